// SPDX-License-Identifier: MIT
// MulticastGroup: an rdma_cm multicast join (bind, rdma_join_multicast, a bounded wait for its
// event), the attached UD queue pairs, and the leave on every exit path.
#include "ibv/cm/multicast_group.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <memory>
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

/// A queue pair attached to the group, and whether it is attached (not after a leave): one the
/// group holds (`owned`, attach()), or a DatagramEndpoint's, which the endpoint holds and
/// detaches before destroying (attach_borrowed()).
struct Member {
  std::unique_ptr<UdQueuePair> owned;
  UdQueuePair* qp = nullptr;
  bool attached = false;
};

struct MulticastGroup::State {
  detail::CmEndpoint endpoint;  // channel and id: the id goes first
  detail::SocketAddress group;
  std::string local;
  std::string device;
  PortNumber port{};
  Mtu mtu = Mtu::mtu1024();
  bool send_only = false;
  bool joined = false;  // rdma_join_multicast succeeded and the group is not left yet
  ibv_ah_attr attributes{};
  std::uint32_t qkey = 0;
  std::vector<Member> members;  // destroyed (detached before) ahead of the id

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

  /// ibv_detach_mcast of `member` if attached: 0 or the errno.
  int detach(Member& member) noexcept {
    if (!member.attached) return 0;
    const int rc =
        ibv_detach_mcast(member.qp->native_handle(), &attributes.grh.dgid, attributes.dlid);
    if (rc == 0) member.attached = false;
    return rc;
  }

  /// Detaches every member, then leaves the group; 0 or the errno of the leave.
  int leave_now() noexcept {
    for (Member& member : members) {
      if (const int rc = detach(member); rc != 0) {
        // Destroying it would fail (EBUSY) and leak it: keep it, attached, until the end.
        std::fprintf(stderr,
                     "ibverbs-cpp: ibv_detach_mcast of QP %u from %s failed (errno %d); the "
                     "queue pair is kept until the process ends\n",
                     member.qp->qp_number(), group.text.c_str(), rc);
        (void)member.owned.release();  // NOLINT(bugprone-unused-return-value): leaked on purpose
      }
    }
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
  if (ibv_port_attr port{}; ibv_query_port(id->verbs, id->port_num, &port) == 0) {
    state->mtu = Mtu::from_native(port.active_mtu);
  }

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

UdAddress MulticastGroup::destination() const {
  const State& state = joined_state("MulticastGroup::destination");
  UdAddress address;
  address.qp_number = kQpNumber;
  address.qkey = state.qkey;
  address.lid = state.attributes.dlid;
  address.gid = Gid(state.attributes.grh.dgid);
  address.mtu = state.mtu;
  return address;
}

AddressHandle MulticastGroup::address_handle(const ProtectionDomain& pd) const {
  constexpr std::string_view kOperation = "MulticastGroup::address_handle";
  const State& state = joined_state(kOperation);
  if (const std::string given = pd.context().name(); given != state.device) {
    throw_invalid_argument(kOperation, "protection domain",
                           "is on device " + given + ", but group " + state.group.text +
                               " was joined on " + state.device);
  }
  return AddressHandle::from_attributes(pd, state.attributes);
}

void MulticastGroup::attach_member(UdQueuePair& qp, std::unique_ptr<UdQueuePair> owned,
                                   std::string_view operation) {
  if (!state_) (void)joined_state(operation);  // throws: moved from
  State& state = *state_;
  const std::string& name = state.group.text;
  if (state.send_only) {
    throw Error(ErrorKind::state, operation, EINVAL,
                "group " + name + " was joined send-only: no queue pair can receive from it",
                "join without MulticastOptions::send_only to receive");
  }
  if (!state.joined) {
    throw Error(ErrorKind::state, operation, EINVAL,
                "group " + name + " was left: join it again to receive from it");
  }
  if (const std::string device = qp.protection_domain().context().name(); device != state.device) {
    throw_invalid_argument(operation, "queue pair " + std::to_string(qp.qp_number()),
                           "is on device " + device + ", but group " + name + " was joined on " +
                               state.device + " (" + state.local + ")");
  }
  if (qp.settings().port != state.port) {
    throw_invalid_argument(operation, "queue pair " + std::to_string(qp.qp_number()),
                           "is on port " + std::to_string(qp.settings().port.value) +
                               ", but group " + name + " was joined on port " +
                               std::to_string(state.port.value));
  }
  if (qp.qkey().value() != state.qkey) {
    std::array<char, 128> text{};
    std::snprintf(text.data(), text.size(), "has Q_Key 0x%08x, but group %s has 0x%08x",
                  qp.qkey().value(), name.c_str(), state.qkey);
    throw_invalid_argument(operation, "queue pair " + std::to_string(qp.qp_number()),
                           std::string(text.data()) +
                               ": the device would drop every datagram of the group; build it "
                               "with the group's Q_Key (UdQueuePairBuilder::qkey, or "
                               "DatagramSettings::qkey: QKey(group.qkey()))");
  }
  state.members.reserve(state.members.size() + 1);  // no throw after the attach below
  if (const int rc =
          ibv_attach_mcast(qp.native_handle(), &state.attributes.grh.dgid, state.attributes.dlid);
      rc != 0) {
    throw_verb_error("ibv_attach_mcast", rc,
                     "attaching queue pair " + std::to_string(qp.qp_number()) + " to group " +
                         name + " on " + state.device);
  }
  state.members.push_back(Member{std::move(owned), &qp, true});
}

UdQueuePair& MulticastGroup::attach(UdQueuePair qp) {
  auto owned = std::make_unique<UdQueuePair>(std::move(qp));
  UdQueuePair& attached = *owned;
  attach_member(attached, std::move(owned), "MulticastGroup::attach");
  return attached;
}

void MulticastGroup::attach_borrowed(UdQueuePair& qp, std::string_view operation) {
  attach_member(qp, nullptr, operation);
}

UdQueuePair MulticastGroup::detach(const UdQueuePair& qp) {
  constexpr std::string_view kOperation = "MulticastGroup::detach";
  if (!state_) (void)joined_state(kOperation);  // throws: moved from
  State& state = *state_;
  const auto it = std::find_if(state.members.begin(), state.members.end(),
                               [&](const Member& member) { return member.qp == &qp; });
  if (it == state.members.end() || !it->owned) {
    throw_invalid_argument(
        kOperation, "queue pair " + std::to_string(qp.qp_number()),
        "is not attached to group " + state.group.text + " (give the reference attach() returned)");
  }
  if (const int rc = state.detach(*it); rc != 0) {
    throw_verb_error("ibv_detach_mcast", rc,
                     "detaching queue pair " + std::to_string(qp.qp_number()) + " from group " +
                         state.group.text);
  }
  UdQueuePair result = std::move(*it->owned);
  state.members.erase(it);
  return result;
}

std::size_t MulticastGroup::attached_count() const {
  return joined_state("MulticastGroup::attached_count").members.size();
}

bool MulticastGroup::joined() const noexcept { return state_ && state_->joined; }

void MulticastGroup::leave() {
  if (!state_ || !state_->joined) return;
  if (const int error = state_->leave_now(); error != 0) {
    detail::throw_cm_error("rdma_leave_multicast", error, "leaving group " + state_->group.text);
  }
}

}  // namespace ibv
