// SPDX-License-Identifier: MIT
// MulticastGroup: an rdma_cm multicast join (bind, rdma_join_multicast, a bounded wait for its
// event), the attached UD queue pairs, and the leave on every exit path.
#include "ibv/cm/multicast_group.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cm/address.hpp"
#include "cm/cm_id.hpp"
#include "detail/brief_quote.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv {
namespace {

// The kernel's ENOTSUPP (not in userspace's errno.h): what rdma_cm answers for an IPv6 group on
// RoCE v2.
constexpr int kKernelEnotsupp = 524;

}  // namespace

struct MulticastGroup::State {
  detail::CmEndpoint endpoint;  // channel and id: the id goes first
  detail::SocketAddress group;
  std::string local;
  std::string device;
  PortNumber port{};
  bool send_only = false;
  bool joined = false;  // rdma_join_multicast succeeded and the group is not left yet
  ibv_ah_attr attributes{};
  std::uint32_t qkey = 0;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  State(State&&) = delete;
  State& operator=(State&&) = delete;
  ~State() {
    if (!joined) return;
    if (const int error = leave_now(); error != 0) {
      std::fprintf(stderr, "ibverbs-cpp: rdma_leave_multicast of %s failed (errno %d)\n",
                   group.text.c_str(), error);
    }
  }

  /// Leaves the group (detaching first, once there are attachments); 0 or the errno.
  int leave_now() noexcept {
    joined = false;
    // Every event taken for this membership has been acknowledged (CmEvent), so
    // rdma_leave_multicast, which waits for that, returns at once.
    if (rdma_leave_multicast(endpoint.id.get(), group.native()) != 0) return errno;
    return 0;
  }
};

MulticastGroup::MulticastGroup(std::string_view group, std::string_view local_address,
                               MulticastOptions options) {
  constexpr std::string_view kOperation = "MulticastGroup";
  // Everything that needs no device first: nothing is created for bad input.
  detail::check_positive(options.join_timeout, "join_timeout", kOperation);
  auto state = std::make_unique<State>();
  state->group = detail::parse_multicast_group(group, kOperation);
  if (detail::is_any_address(local_address)) {
    throw_invalid_argument(kOperation, "local_address " + detail::quote_briefly(local_address),
                           "is the wildcard address: give the IP address of the RDMA device's "
                           "netdev to join on (e.g. 10.0.0.1), so that the group is joined on "
                           "that device and its network interface");
  }
  auto local = detail::parse_address(local_address, 0, kOperation, false);
  state->local = std::string(local_address);
  state->send_only = options.send_only;
  const std::string& name = state->group.text;
  const std::string on = name + " on " + state->local;

  state->endpoint = detail::make_endpoint(kOperation, RDMA_PS_UDP);
  rdma_cm_id* id = state->endpoint.id.get();
  if (rdma_bind_addr(id, local.native()) != 0) {
    const int error = errno;
    detail::throw_cm_error("rdma_bind_addr", error,
                           "binding to local address " + state->local + " to join group " + name,
                           error == EADDRNOTAVAIL
                               ? "the local address must be one of this host's addresses (`ip "
                                 "-brief address`), on the netdev of an RDMA device"
                               : "");
  }
  if (id->verbs == nullptr) {
    throw Error(
        ErrorKind::not_found, "rdma_bind_addr", ENODEV,
        "local address " + state->local + " for group " + name + " belongs to no RDMA device",
        "give the IP address of an RDMA device's netdev (`rdma link show` lists them)");
  }
  const char* device = ibv_get_device_name(id->verbs->device);
  state->device = device != nullptr ? device : "(unnamed)";
  state->port = PortNumber{id->port_num};

  rdma_cm_join_mc_attr_ex join{};
  join.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  join.join_flags =
      options.send_only ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER : RDMA_MC_JOIN_FLAG_FULLMEMBER;
  join.addr = state->group.native();
  if (rdma_join_multicast_ex(id, &join, nullptr) != 0) {
    const int error = errno;
    if (error == kKernelEnotsupp || error == EOPNOTSUPP) {
      throw Error(ErrorKind::unsupported, "rdma_join_multicast", error,
                  "joining group " + on + " (" + state->device + ")",
                  "the kernel's rdma_cm joins only IPv4 groups on RoCE v2 (IPv6 groups on "
                  "InfiniBand): use an IPv4 group, 224.0.0.0/4");
    }
    detail::throw_cm_error("rdma_join_multicast", error,
                           "joining group " + on + " (" + state->device + ")");
  }
  // From here on the destructor of `state` leaves the group, whatever happens below.
  state->joined = true;

  const auto deadline = detail::CmClock::now() + options.join_timeout;
  for (;;) {
    auto event = detail::next_event(state->endpoint.channel.get(), deadline, kOperation);
    if (!event) {
      throw Error(ErrorKind::timeout, kOperation, ETIMEDOUT,
                  "joining group " + on + " took longer than " +
                      detail::duration_text(options.join_timeout),
                  "on RoCE a join completes locally at once; on InfiniBand the subnet manager "
                  "must answer: is it running (`sminfo`)? Raise MulticastOptions::join_timeout "
                  "for a slow subnet manager");
    }
    const rdma_cm_event& e = **event;
    if (e.event == RDMA_CM_EVENT_MULTICAST_JOIN) {
      state->attributes = e.param.ud.ah_attr;
      state->qkey = e.param.ud.qkey;
      break;
    }
    if (e.event == RDMA_CM_EVENT_MULTICAST_ERROR) {
      const int error = e.status < 0 ? -e.status : (e.status > 0 ? e.status : EIO);
      detail::throw_cm_error(
          "rdma_join_multicast", error,
          "joining group " + on + " (" + state->device + "): RDMA_CM_EVENT_MULTICAST_ERROR",
          "the join was refused (on InfiniBand by the subnet manager: the "
          "group's parameters, or the partition)");
    }
    detail::throw_event_error(e, kOperation, "joining group", on);
  }
  state_ = std::move(state);
}

MulticastGroup::MulticastGroup(MulticastGroup&&) noexcept = default;

MulticastGroup& MulticastGroup::operator=(MulticastGroup&& other) noexcept {
  if (this != &other) {
    state_.reset();  // leaves this membership first
    state_ = std::move(other.state_);
  }
  return *this;
}

MulticastGroup::~MulticastGroup() = default;

const MulticastGroup::State& MulticastGroup::joined_state(std::string_view operation) const {
  if (!state_) {
    throw Error(ErrorKind::state, operation, EINVAL,
                "this MulticastGroup was moved from: it holds no membership");
  }
  return *state_;
}

const std::string& MulticastGroup::group() const {
  return joined_state("MulticastGroup::group").group.text;
}
const std::string& MulticastGroup::local_address() const {
  return joined_state("MulticastGroup::local_address").local;
}
const std::string& MulticastGroup::device_name() const {
  return joined_state("MulticastGroup::device_name").device;
}
PortNumber MulticastGroup::port() const { return joined_state("MulticastGroup::port").port; }
Gid MulticastGroup::mgid() const {
  return Gid(joined_state("MulticastGroup::mgid").attributes.grh.dgid);
}
std::uint16_t MulticastGroup::mlid() const {
  return joined_state("MulticastGroup::mlid").attributes.dlid;
}
std::uint32_t MulticastGroup::qkey() const { return joined_state("MulticastGroup::qkey").qkey; }
bool MulticastGroup::send_only() const {
  return joined_state("MulticastGroup::send_only").send_only;
}
const ibv_ah_attr& MulticastGroup::address_vector() const {
  return joined_state("MulticastGroup::address_vector").attributes;
}

bool MulticastGroup::joined() const noexcept { return state_ && state_->joined; }

void MulticastGroup::leave() {
  if (!state_ || !state_->joined) return;
  if (const int error = state_->leave_now(); error != 0) {
    detail::throw_cm_error("rdma_leave_multicast", error, "leaving group " + state_->group.text);
  }
}

}  // namespace ibv
