// SPDX-License-Identifier: MIT
// QueuePairBuilder, PreparedQueuePair and QueuePair: settings checked against the device, the
// RESET -> INIT -> RTR -> RTS transitions, and checked posting.
#include "ibv/verbs/queue_pair.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "ibv/error.hpp"
#include "verbs/atomic_check.hpp"
#include "verbs/queue_pair_resolve.hpp"

namespace ibv {
namespace {

constexpr std::uint32_t kMaxQpNumber = 0xFFFFFF;
constexpr std::uint8_t kDefaultReadAtomicDepth = 16;
constexpr std::uint8_t kMaxServiceLevel = 15;
// The address vector's sgid_index is 8 bits wide.
constexpr std::uint32_t kMaxGidIndex = 255;

void check_limit(std::string_view operation, std::string_view setting, std::uint64_t value,
                 std::int64_t device_limit, std::string_view limit_name) {
  if (std::cmp_greater(value, device_limit)) {
    throw_invalid_argument(
        operation, std::string(setting) + " " + std::to_string(value),
        "exceeds the device's " + std::string(limit_name) + " of " + std::to_string(device_limit));
  }
}

// The GID at `index`, which the user set: an error naming gid_index unless it is a valid entry
// that an address vector can name.
Gid checked_gid(const Context& context, PortNumber port, std::uint32_t index,
                std::string_view operation) {
  const auto table = context.gid_table(port);
  const auto entry = std::find_if(table.begin(), table.end(),
                                  [index](const GidEntry& e) { return e.index == index; });
  if (entry == table.end()) {
    std::string valid;
    for (const auto& e : table) {
      if (!valid.empty()) valid += "; ";
      valid += e.to_string();
    }
    throw Error(ErrorKind::not_found, operation, EINVAL,
                "gid_index " + std::to_string(index) + " is not a valid entry: GID index " +
                    std::to_string(index) + " of " + context.name() + " port " +
                    std::to_string(port.value) + " is unused or past the table; the port has " +
                    std::to_string(table.size()) + " GIDs (" +
                    (valid.empty() ? std::string("none") : valid) + ")",
                "leave the GID index unset to choose the RoCE v2 IPv4 entry automatically");
  }
  if (index > kMaxGidIndex) {  // a valid entry, but one an address vector can not name
    throw_invalid_argument(operation, "gid_index " + std::to_string(index),
                           "is out of range 0..255 (the 8-bit sgid_index of an address vector)");
  }
  return entry->gid;
}

// An RC QP with the extended post interface for every opcode the library posts (atomics when
// the device has them), `init` as ibv_create_qp takes it; `init.cap` gets what the device
// granted. Null (errno set) when the provider refuses: no extended interface, or the sizes.
ibv_qp* create_extended_qp(ibv_pd* pd, ibv_qp_init_attr& init, bool atomics) {
  ibv_qp_init_attr_ex extended{};
  extended.send_cq = init.send_cq;
  extended.recv_cq = init.recv_cq;
  extended.srq = init.srq;
  extended.cap = init.cap;
  extended.qp_type = init.qp_type;
  extended.sq_sig_all = init.sq_sig_all;
  extended.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  extended.pd = pd;
  extended.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                            IBV_QP_EX_WITH_RDMA_READ;
  if (atomics) {
    extended.send_ops_flags |=
        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP;
  }
  ibv_qp* qp = ibv_create_qp_ex(pd->context, &extended);
  if (qp != nullptr) init.cap = extended.cap;
  return qp;
}

std::string_view state_name(ibv_qp_state state) {
  switch (state) {
    case IBV_QPS_RESET: return "RESET";
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    case IBV_QPS_SQD: return "SQD";
    case IBV_QPS_SQE: return "SQE";
    case IBV_QPS_ERR: return "ERR";
    default: return "UNKNOWN";
  }
}

// Links `requests` through their `next` pointers, posts them with one call of `post` (one
// doorbell) and, unless `after` says to leave them linked, unlinks them again (the caller's
// requests stay reusable one by one). The batch posts; a single request goes through
// QueuePair::post, inline in the header.
template <typename Request, typename Native>
ListPosted post_linked(std::span<Request> requests, ibv_qp* qp,
                       int (*post)(ibv_qp*, Native*, Native**),
                       AfterPost after = AfterPost::unlink) noexcept {
  if (requests.empty()) return {};
  for (std::size_t i = 0; i + 1 < requests.size(); ++i) {
    requests[i].native().next = &requests[i + 1].native();
  }
  requests.back().native().next = nullptr;
  Native* bad = nullptr;
  const int rc = post(qp, &requests.front().native(), &bad);
  if (after == AfterPost::unlink) {
    for (Request& request : requests) request.native().next = nullptr;
  }
  if (rc == 0) [[likely]]
    return {requests.size(), 0};
  // The device took the requests before the one it names; a failure that names none: none is
  // known to be posted.
  std::size_t posted = 0;
  if (bad != nullptr) {
    while (posted < requests.size() && &requests[posted].native() != bad) ++posted;
  }
  return {posted, rc};
}

/// Throws the Error of a list post that the device cut short.
template <typename Request>
void throw_if_cut_short(const ListPosted& result, std::span<Request> requests, ibv_qp* qp,
                        std::string_view verb) {
  if (result.error == 0) return;
  detail::throw_post_failure(verb, qp->qp_num, result.error,
                             result.posted < requests.size()
                                 ? std::optional(requests[result.posted].native().wr_id)
                                 : std::nullopt);
}

// This side's address (QPN, LID, GID, send PSN); shared by the prepared and connected forms.
Endpoint endpoint_of(const detail::QueuePairCore& core) {
  return Endpoint{core.qp->qp_num, core.port.lid, core.gid, core.settings.send_psn->value()};
}

// Checks a receive against the QP's limits (throws naming it); shared by both forms.
// The post path first asks QueuePair::passes_check(ReceiveRequest) (queue_pair.hpp: the same
// comparisons, inline) and comes here only for a request that fails: a check added here must be
// added there too.
void check_receive(const detail::QueuePairCore& core, const ReceiveRequest& request) {
  if (core.srq) [[unlikely]] {
    throw Error(ErrorKind::state, "QueuePair::post_receive", EINVAL,
                "receive wr_id " + std::to_string(request.wr_id()) + " for QP " +
                    std::to_string(core.qp->qp_num) +
                    ", which takes its receives from a shared receive queue",
                "post receives to the SharedReceiveQueue the QP was built with");
  }
  const auto max_sge = core.settings.max_recv_sge.value();
  if (request.element_count() > max_sge) {
    throw_invalid_argument("post_receive", "receive wr_id " + std::to_string(request.wr_id()),
                           "has " + std::to_string(request.element_count()) +
                               " elements, more than the QP's max_recv_sge of " +
                               std::to_string(max_sge));
  }
  if (request.byte_length() > core.port.max_message_size) {
    throw_invalid_argument("post_receive", "receive wr_id " + std::to_string(request.wr_id()),
                           "has room for " + std::to_string(request.byte_length()) +
                               " bytes, more than the port's max message size of " +
                               std::to_string(core.port.max_message_size));
  }
  if (const auto refusal =
          core.pd.local_keys().refusal(request.native().sg_list, request.element_count())) {
    throw_invalid_argument("post_receive", "receive wr_id " + std::to_string(request.wr_id()),
                           *refusal);
  }
}

// Checks and posts receives; shared by the prepared (INIT) and connected (RTS) forms.
void post_receives(const detail::QueuePairCore& core, std::span<ReceiveRequest> requests) {
  for (const auto& request : requests) check_receive(core, request);
  throw_if_cut_short(post_linked(requests, core.qp.get(), ibv_post_recv), requests, core.qp.get(),
                     "ibv_post_recv");
}

// Throws the invalid-argument error of a send-queue request that failed a check: off the hot
// path, so that the checks themselves never format (the reason is only built when it throws).
[[noreturn, gnu::cold, gnu::noinline]] void reject_send(const SendRequest& request,
                                                        const std::string& reason) {
  throw_invalid_argument(
      "QueuePair::post_send",
      std::string(to_string(request.opcode())) + " wr_id " + std::to_string(request.wr_id()),
      reason);
}

// The checks only atomics need (QueuePair::check calls it for them alone): compares
// (atomic_problem), and the message is built only when one fails.
void check_atomic(const detail::QueuePairCore& core, const SendRequest& request) {
  const auto& s = core.settings;
  const auto problem = detail::atomic_problem(
      request, core.device_atomics, s.max_rd_atomic ? s.max_rd_atomic->value() : 0U,
      s.max_dest_rd_atomic ? s.max_dest_rd_atomic->value() : 0U);
  if (problem == detail::AtomicProblem::none) [[likely]] {
    return;
  }
  const std::string target = request.remote() ? request.remote()->to_string() : "no region";
  switch (problem) {
    case detail::AtomicProblem::device_without_atomics:
      reject_send(request, "is " + std::string(send_opcode_traits(request.opcode()).kind) +
                               ", but device " + core.pd.context().name() +
                               " does not implement atomics (its atomic_cap is NONE)");
    case detail::AtomicProblem::no_read_atomic_depth:
      reject_send(request, "is " + std::string(send_opcode_traits(request.opcode()).kind) +
                               ", but the QP allows no outstanding reads/atomics "
                               "(max_rd_atomic and max_dest_rd_atomic must be at least 1)");
    case detail::AtomicProblem::result_not_one_word:
      reject_send(request, "has a result buffer of " + std::to_string(request.byte_length()) +
                               " bytes in " + std::to_string(request.element_count()) +
                               " element(s); an atomic's result buffer is one element of "
                               "exactly 8 bytes");
    case detail::AtomicProblem::unaligned_target:
      reject_send(request, "targets " + target +
                               ", whose address is not 8-byte aligned (atomics operate on "
                               "aligned 8-byte words)");
    case detail::AtomicProblem::short_target:
      reject_send(request,
                  "targets " + target + ", shorter than the 8-byte word an atomic operates on");
    case detail::AtomicProblem::target_without_atomic_access:
      reject_send(request, "targets " + target +
                               ", which was registered without remote atomic access (it allows " +
                               request.remote()->access()->to_string() + ")");
    case detail::AtomicProblem::none: break;
  }
}

}  // namespace

void detail::QueuePairDestroyer::operator()(ibv_qp* qp) const noexcept {
  if (const int rc = ibv_destroy_qp(qp); rc != 0) {
    std::fprintf(stderr, "ibverbs-cpp: ibv_destroy_qp failed (errno %d)\n", rc);
  }
}

// ---------------------------------------------------------------------------------------------
// QueuePairBuilder

QueuePairBuilder::QueuePairBuilder(ProtectionDomain pd, CompletionQueue send_cq,
                                   CompletionQueue recv_cq)
    : pd_(std::move(pd)), send_cq_(std::move(send_cq)), recv_cq_(std::move(recv_cq)) {}

QueuePairBuilder& QueuePairBuilder::post_interface(PostInterface interface) noexcept {
  settings_.post_interface = interface;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::port(PortNumber port) noexcept {
  settings_.port = port;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::gid_index(std::uint32_t index) noexcept {
  settings_.gid_index = index;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::access(RemoteAccess access) noexcept {
  settings_.access = access;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::max_send_wr(QueueDepth depth) noexcept {
  settings_.max_send_wr = depth;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::max_recv_wr(QueueDepth depth) noexcept {
  settings_.max_recv_wr = depth;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::max_send_sge(SgeCount count) noexcept {
  settings_.max_send_sge = count;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::max_recv_sge(SgeCount count) noexcept {
  settings_.max_recv_sge = count;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::max_inline_data(InlineSize bytes) noexcept {
  settings_.max_inline_data = bytes;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::mtu(Mtu mtu) noexcept {
  settings_.mtu = mtu;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::send_psn(Psn psn) noexcept {
  settings_.send_psn = psn;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::ack_timeout(AckTimeout timeout) noexcept {
  settings_.ack_timeout = timeout;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::retry_count(RetryCount count) noexcept {
  settings_.retry_count = count;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::rnr_retry(RnrRetryCount count) noexcept {
  settings_.rnr_retry = count;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::min_rnr_timer(RnrTimer timer) noexcept {
  settings_.min_rnr_timer = timer;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::max_rd_atomic(ReadAtomicDepth depth) noexcept {
  settings_.max_rd_atomic = depth;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::max_dest_rd_atomic(ReadAtomicDepth depth) noexcept {
  settings_.max_dest_rd_atomic = depth;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::hop_limit(std::uint8_t hops) noexcept {
  settings_.hop_limit = hops;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::traffic_class(std::uint8_t traffic_class) noexcept {
  settings_.traffic_class = traffic_class;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::service_level(std::uint8_t level) noexcept {
  settings_.service_level = level;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::settings(const QueuePairSettings& settings) noexcept {
  settings_ = settings;
  return *this;
}
QueuePairBuilder& QueuePairBuilder::shared_receive_queue(SharedReceiveQueue srq) noexcept {
  srq_ = std::move(srq);
  return *this;
}

namespace detail {

Gid checked_gid(const Context& context, PortNumber port, std::uint32_t index,
                std::string_view operation) {
  return ::ibv::checked_gid(context, port, index, operation);
}

ResolvedQueuePair resolve_queue_pair(const Context& context, const QueuePairSettings& settings,
                                     std::string_view operation) {
  const auto device = context.query_device();
  if (settings.port.value == 0 || settings.port.value > device.physical_port_count) {
    throw Error(ErrorKind::not_found, operation, EINVAL,
                "port " + std::to_string(settings.port.value) + " does not exist on " +
                    context.name() + " (ports 1.." + std::to_string(device.physical_port_count) +
                    ")",
                "ports are numbered from 1; `ibvcpp devices -v` lists them");
  }
  ResolvedQueuePair resolved{settings, context.query_port(settings.port), 0, Gid{}, device.atomics};
  auto& s = resolved.settings;
  check_limit(operation, "max_send_wr", s.max_send_wr.value(), device.max_qp_wr, "max_qp_wr");
  check_limit(operation, "max_recv_wr", s.max_recv_wr.value(), device.max_qp_wr, "max_qp_wr");
  check_limit(operation, "max_send_sge", s.max_send_sge.value(), device.max_sge, "max_sge");
  check_limit(operation, "max_recv_sge", s.max_recv_sge.value(), device.max_sge, "max_sge");
  if (!s.max_rd_atomic) {
    s.max_rd_atomic = ReadAtomicDepth(static_cast<std::uint8_t>(
        std::clamp<std::int32_t>(device.max_qp_init_rd_atom, 1, kDefaultReadAtomicDepth)));
  }
  if (!s.max_dest_rd_atomic) {
    s.max_dest_rd_atomic = ReadAtomicDepth(static_cast<std::uint8_t>(
        std::clamp<std::int32_t>(device.max_qp_rd_atom, 1, kDefaultReadAtomicDepth)));
  }
  check_limit(operation, "max_rd_atomic", s.max_rd_atomic->value(), device.max_qp_init_rd_atom,
              "max_qp_init_rd_atom");
  check_limit(operation, "max_dest_rd_atomic", s.max_dest_rd_atomic->value(), device.max_qp_rd_atom,
              "max_qp_rd_atom");
  if (s.service_level > kMaxServiceLevel) {
    throw_invalid_argument(operation, "service_level " + std::to_string(s.service_level),
                           "is out of range 0..15 (the 4-bit InfiniBand service level)");
  }
  if (!s.mtu) s.mtu = resolved.port.active_mtu;
  if (*s.mtu > resolved.port.max_mtu) {
    throw_invalid_argument(
        operation, "mtu " + std::to_string(s.mtu->bytes()),
        "exceeds the port's max MTU of " + std::to_string(resolved.port.max_mtu.bytes()));
  }
  if (!s.send_psn) s.send_psn = Psn::random();

  // GID: validated when set; chosen on Ethernet; optional on InfiniBand.
  if (s.gid_index) {
    resolved.gid_index = *s.gid_index;
    resolved.gid = checked_gid(context, s.port, *s.gid_index, operation);
  } else if (resolved.port.link_layer == LinkLayer::ethernet) {
    resolved.gid_index = context.default_gid_index(s.port);
    resolved.gid = context.query_gid(resolved.gid_index, s.port).gid;
    s.gid_index = resolved.gid_index;
  } else {
    const auto table = context.gid_table(s.port);
    if (!table.empty()) resolved.gid = table.front().gid;  // sent in the endpoint; GRH stays off
  }
  return resolved;
}

}  // namespace detail

PreparedQueuePair QueuePairBuilder::build() const {
  constexpr std::string_view kOperation = "QueuePairBuilder::build";
  const Context& context = pd_.context();
  if (send_cq_.context().native() != context.native() ||
      recv_cq_.context().native() != context.native()) {
    throw_invalid_argument(kOperation, "completion queues",
                           "belong to another device than the protection domain");
  }
  if (srq_ && srq_->protection_domain().context().native() != context.native()) {
    throw_invalid_argument(kOperation, "shared_receive_queue",
                           "belongs to another device than the protection domain");
  }
  // Every check and every choice first: nothing is created for settings that do not fit.
  auto resolved = detail::resolve_queue_pair(context, settings_, kOperation);
  auto core =
      std::make_unique<detail::QueuePairCore>(detail::QueuePairCore{pd_,
                                                                    send_cq_,
                                                                    recv_cq_,
                                                                    std::move(resolved.settings),
                                                                    resolved.port,
                                                                    resolved.gid_index,
                                                                    resolved.gid,
                                                                    resolved.device_atomics,
                                                                    0,
                                                                    {},
                                                                    false,
                                                                    nullptr,
                                                                    srq_,
                                                                    {}});
  const auto& s = core->settings;

  ibv_qp_init_attr init{};
  init.send_cq = send_cq_.native();
  init.recv_cq = recv_cq_.native();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = s.max_send_wr.value();
  init.cap.max_recv_wr = s.max_recv_wr.value();
  init.cap.max_send_sge = s.max_send_sge.value();
  init.cap.max_recv_sge = s.max_recv_sge.value();
  if (srq_) {
    init.srq = srq_->native();
    init.cap.max_recv_wr = 0;  // ignored with an SRQ
    init.cap.max_recv_sge = 0;
  }
  // Unset max_inline_data: the default, and less where the device refuses it (devices differ
  // in how much they inline, and say so only by failing ibv_create_qp).
  constexpr std::array<std::uint32_t, 3> kDefaultInlineSteps{InlineSize::kDefault, 64, 0};
  const std::span<const std::uint32_t> inline_tries =
      s.max_inline_data ? std::span<const std::uint32_t>() : std::span(kDefaultInlineSteps);
  const std::uint32_t asked_inline = s.max_inline_data ? s.max_inline_data->value() : 0;
  const bool extended = s.post_interface == PostInterface::extended;
  ibv_qp* raw = nullptr;
  for (std::size_t attempt = 0;; ++attempt) {
    const std::uint32_t inline_size = inline_tries.empty() ? asked_inline : inline_tries[attempt];
    init.cap.max_inline_data = inline_size;
    errno = 0;
    if (extended) {
      raw = create_extended_qp(pd_.native(), init, core->device_atomics);
      if (raw != nullptr) core->qpx = ibv_qp_to_qp_ex(raw);
    } else {
      raw = ibv_create_qp(pd_.native(), &init);
    }
    if (raw != nullptr) break;
    if (attempt + 1 < inline_tries.size()) continue;  // try a smaller default inline size
    throw_verb_error(extended ? "ibv_create_qp_ex" : "ibv_create_qp", errno != 0 ? errno : ENOMEM,
                     std::string(extended ? "post_interface extended (does the device's "
                                            "provider implement ibv_qp_ex? classic works "
                                            "everywhere): "
                                          : "") +
                         "RC QP on " + context.name() + " with max_send_wr " +
                         std::to_string(s.max_send_wr.value()) + ", max_recv_wr " +
                         std::to_string(s.max_recv_wr.value()) + ", max_inline_data " +
                         std::to_string(inline_size));
  }
  core->qp.reset(raw);
  // What the device granted: providers write it back into cap (those that do not leave what
  // was asked, which they granted).
  core->max_inline_data = init.cap.max_inline_data;
  core->send_length_limit = {
      core->port.max_message_size,
      std::min<std::uint64_t>(core->port.max_message_size, core->max_inline_data)};
  if (s.max_inline_data && init.cap.max_inline_data < asked_inline) {
    throw_invalid_argument(
        "QueuePairBuilder::build", "max_inline_data " + std::to_string(asked_inline),
        "is more than the device grants (" + std::to_string(init.cap.max_inline_data) + ")");
  }

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = s.port.value;
  attr.qp_access_flags = static_cast<unsigned>(s.access.native_with_local_write());
  if (const int rc = ibv_modify_qp(
          raw, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      rc != 0) {
    throw_verb_error("ibv_modify_qp", rc, "RESET -> INIT");
  }
  return PreparedQueuePair(std::move(core));
}

// ---------------------------------------------------------------------------------------------
// PreparedQueuePair

PreparedQueuePair::PreparedQueuePair(std::unique_ptr<detail::QueuePairCore> core) noexcept
    : core_(std::move(core)) {}

Endpoint PreparedQueuePair::endpoint() const { return endpoint_of(*core_); }

void PreparedQueuePair::post_receive(std::span<ReceiveRequest> requests) const {
  if (!core_) {
    throw Error(ErrorKind::state, "PreparedQueuePair::post_receive", EINVAL, "already used");
  }
  post_receives(*core_, requests);
}

QueuePair PreparedQueuePair::handshake(const Endpoint& remote) && {
  if (!core_) throw Error(ErrorKind::state, "PreparedQueuePair::handshake", EINVAL, "already used");
  const auto& s = core_->settings;
  const bool ethernet = core_->port.link_layer == LinkLayer::ethernet;
  if (remote.qp_number > kMaxQpNumber || remote.psn > kMaxQpNumber) {
    throw_invalid_argument("PreparedQueuePair::handshake", "remote endpoint",
                           "has a QPN or PSN that does not fit 24 bits: " + remote.to_string());
  }
  if (ethernet && remote.gid.is_zero()) {
    throw_invalid_argument("PreparedQueuePair::handshake", "remote endpoint",
                           "has no GID, but this port is RoCE (Ethernet), where the GID is the "
                           "address: " +
                               remote.to_string());
  }
  if (!ethernet && remote.lid == 0 && !s.gid_index) {
    throw_invalid_argument(
        "PreparedQueuePair::handshake", "remote endpoint",
        "has LID 0 on an InfiniBand port; set a GID index to route by GID: " + remote.to_string());
  }

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = static_cast<ibv_mtu>(s.mtu->native());
  attr.dest_qp_num = remote.qp_number;
  attr.rq_psn = remote.psn;
  attr.max_dest_rd_atomic = s.max_dest_rd_atomic->value();
  attr.min_rnr_timer = s.min_rnr_timer.code();
  attr.ah_attr.dlid = remote.lid;
  attr.ah_attr.sl = s.service_level;
  attr.ah_attr.port_num = s.port.value;
  // RoCE always routes by GID. On InfiniBand a GRH is added when a GID index was set and the
  // peer sent a GID; otherwise the LID alone addresses it (as ibv_rc_pingpong does).
  if (ethernet || (s.gid_index && !remote.gid.is_zero())) {
    attr.ah_attr.is_global = 1;
    attr.ah_attr.grh.dgid = remote.gid.to_native();
    attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(core_->gid_index);
    attr.ah_attr.grh.hop_limit = s.hop_limit;
    attr.ah_attr.grh.traffic_class = s.traffic_class;
  }
  if (const int rc =
          ibv_modify_qp(core_->qp.get(), &attr,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
      rc != 0) {
    const std::string detail = "INIT -> RTR towards " + remote.to_string() + " from GID index " +
                               std::to_string(core_->gid_index) + " (" + core_->gid.to_string() +
                               ")";
    std::string hint =
        ethernet
            ? "on RoCE this is nearly always the GID: the local GID index must name an entry of "
              "the type both sides use (RoCE v2 with IPv4 addresses is the usual one; see "
              "`ibvcpp devices -v`), and the remote GID must be reachable from its netdev"
            : "check the remote LID (is the subnet manager running?) and the path MTU";
    throw Error(rc == EINVAL ? ErrorKind::invalid_argument : ErrorKind::driver, "ibv_modify_qp", rc,
                detail, hint);
  }

  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = s.ack_timeout.exponent();
  attr.retry_cnt = s.retry_count.value();
  attr.rnr_retry = s.rnr_retry.value();
  attr.sq_psn = s.send_psn->value();
  attr.max_rd_atomic = s.max_rd_atomic->value();
  if (const int rc = ibv_modify_qp(core_->qp.get(), &attr,
                                   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
      rc != 0) {
    throw_verb_error("ibv_modify_qp", rc, "RTR -> RTS");
  }
  return QueuePair(std::move(core_), remote);
}

// ---------------------------------------------------------------------------------------------
// QueuePair

QueuePair::QueuePair(std::unique_ptr<detail::QueuePairCore> core, const Endpoint& remote) noexcept
    : core_(std::move(core)), remote_(remote) {
  // Its settings are final now (a connection manager sets the read/atomic depths it chose).
  const auto& s = core_->settings;
  core_->atomics_ready = detail::atomic_queue_pair_problem(
                             core_->device_atomics, s.max_rd_atomic ? s.max_rd_atomic->value() : 0U,
                             s.max_dest_rd_atomic ? s.max_dest_rd_atomic->value() : 0U) ==
                             detail::AtomicProblem::none &&
                         s.max_send_sge.value() >= 1 &&
                         core_->port.max_message_size >= kAtomicWordSize;
}

Endpoint QueuePair::local_endpoint() const { return endpoint_of(*core_); }

std::string QueuePair::query_state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (const int rc = ibv_query_qp(core_->qp.get(), &attr, IBV_QP_STATE, &init); rc != 0) {
    throw_verb_error("ibv_query_qp", rc);
  }
  return std::string(state_name(attr.qp_state));
}

namespace {
/// Whether the atomic `request` passes every check of QueuePair::check, by comparisons only:
/// the post path's passes_check() leaves atomics to check(), whose common case this is.
/// atomics_ready stands for the queue pair's part: its atomic depths, and the SGE and message
/// size limits, which the one 8-byte element atomic_request_problem() insists on then meets.
bool atomic_passes(const detail::QueuePairCore& core, const SendRequest& request) noexcept {
  return core.atomics_ready && !request.is_inline() &&
         detail::atomic_request_problem(request) == detail::AtomicProblem::none &&
         core.pd.local_keys().all_known(request.native().sg_list, request.element_count());
}

/// QueuePair::check past an atomic that passes: finds the check that fails, and throws.
[[gnu::noinline]] void check_send(const detail::QueuePairCore& core, const SendRequest& request) {
  // Compare only: the description of the request is built when one of these throws. The post
  // path first asks passes_check() (queue_pair.hpp: the same comparisons, inline, without the
  // atomic ones) and comes here only for atomics and for a request that fails: a check added
  // here must be added there too (and to atomic_passes() above).
  const auto& s = core.settings;
  if (request.element_count() > s.max_send_sge.value()) {
    reject_send(request, "has " + std::to_string(request.element_count()) +
                             " elements, more than the QP's max_send_sge of " +
                             std::to_string(s.max_send_sge.value()));
  }
  if (request.byte_length() > core.port.max_message_size) {
    reject_send(request, "moves " + std::to_string(request.byte_length()) +
                             " bytes, more than the port's max message size of " +
                             std::to_string(core.port.max_message_size));
  }
  if (is_atomic(request.opcode())) [[unlikely]] {
    check_atomic(core, request);
  }
  if (request.is_inline()) {
    if (!may_be_inline(request.opcode())) {
      reject_send(request, "is " + std::string(send_opcode_traits(request.opcode()).kind) +
                               ", which can not be inline");
    }
    if (request.byte_length() > core.max_inline_data) {
      reject_send(request, "has " + std::to_string(request.byte_length()) +
                               " inline bytes, more than the QP's max_inline_data of " +
                               std::to_string(core.max_inline_data));
    }
  }
  // The compare passes_check() makes (a send's limit is the largest value); the region is
  // rebuilt only for the message.
  if (request.byte_length() > request.remote_limit()) {
    reject_send(request, "moves " + std::to_string(request.byte_length()) +
                             " bytes, more than its " + request.remote()->to_string() +
                             " holds (the " +
                             std::string(send_opcode_traits(request.opcode()).region) + " region)");
  }
  if (const auto refusal =
          core.pd.local_keys().refusal(request.native().sg_list, request.element_count())) {
    reject_send(request, *refusal);
  }
}

// One batch of the extended post interface: every request of `requests` (each takes_extended)
// between ibv_wr_start and ibv_wr_complete. ibv_wr_complete's result: all or nothing, a
// failure discards every request of the batch.
int post_batch(ibv_qp_ex* qpx, std::span<const SendRequest> requests) noexcept {
  ibv_wr_start(qpx);
  for (const SendRequest& request : requests) detail::put_extended(qpx, request);
  return ibv_wr_complete(qpx);
}
}  // namespace

void QueuePair::check(const SendRequest& request) const {
  if (is_atomic(request.opcode()) && atomic_passes(*core_, request)) [[likely]]
    return;
  check_send(*core_, request);
}

void QueuePair::check(const ReceiveRequest& request) const { check_receive(*core_, request); }

void QueuePair::move_to_error() const {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (const int rc = ibv_modify_qp(core_->qp.get(), &attr, IBV_QP_STATE); rc != 0) {
    throw_verb_error("ibv_modify_qp", rc, "to ERR, QP " + std::to_string(qp_number()));
  }
}

void QueuePair::post_send(std::span<SendRequest> requests) const {
  const auto list = checked(requests);
  throw_if_cut_short(post(list), requests, native(), "ibv_post_send");
}

void QueuePair::post_extended(const SendRequest& request) const {
  if (const int rc = post_batch(core_->qpx, std::span(&request, 1)); rc != 0) [[unlikely]] {
    detail::throw_post_failure("ibv_wr_complete", qp_number(), rc, request.wr_id());
  }
}

ListPosted QueuePair::post(CheckedList<SendRequest> list, AfterPost after) const noexcept {
  const std::span<SendRequest> requests = list.requests();
  if (requests.empty()) return {};
  ibv_qp_ex* qpx = core_->qpx;
  if (std::ranges::all_of(requests, [qpx](const SendRequest& request) {
        return detail::takes_extended(qpx, request.element_count());
      })) [[unlikely]] {  // not the default (PostInterface::classic)
    if (const int rc = post_batch(qpx, requests); rc != 0) [[unlikely]]
      return {0, rc};
    return {requests.size(), 0};
  }
  return post_linked(requests, native(), ibv_post_send, after);
}

ListPosted QueuePair::post(CheckedList<ReceiveRequest> list, AfterPost after) const noexcept {
  return post_linked(list.requests(), native(), ibv_post_recv, after);
}

void QueuePair::post_receive(std::span<ReceiveRequest> requests) const {
  post_receives(*core_, requests);
}

void QueuePair::post_send(std::uint64_t wr_id, std::span<const GatherElement> data) const {
  auto request = SendRequest::send(wr_id, data);
  post_send(request);
}

void QueuePair::post_write(std::uint64_t wr_id, std::span<const GatherElement> data,
                           const RemoteMemoryRegion& destination) const {
  auto request = SendRequest::write(wr_id, data, destination);
  post_send(request);
}

void QueuePair::post_read(std::uint64_t wr_id, std::span<const ScatterElement> into,
                          const RemoteMemoryRegion& source) const {
  auto request = SendRequest::read(wr_id, into, source);
  post_send(request);
}

void QueuePair::post_receive(std::uint64_t wr_id, std::span<const ScatterElement> into) const {
  ReceiveRequest request(wr_id, into);
  post_receive(request);
}

void detail::throw_post_failure(std::string_view verb, std::uint32_t qp_number, int errno_value,
                                std::optional<std::uint64_t> rejected) {
  std::string detail = "QP " + std::to_string(qp_number);
  if (rejected) detail += ", rejected wr_id " + std::to_string(*rejected);
  throw_verb_error(verb, errno_value, detail);
}

}  // namespace ibv
