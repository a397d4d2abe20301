// SPDX-License-Identifier: MIT
// UdQueuePairBuilder and UdQueuePair: settings checked against the device (the RC queue pair's
// resolver, plus the P_Key index), RESET -> INIT -> RTR -> RTS at build, checked posting.
#include "ibv/verbs/ud_queue_pair.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cerrno>
#include <string>
#include <utility>

#include "ibv/error.hpp"
#include "ibv/verbs/ud_received.hpp"
#include "verbs/queue_pair_resolve.hpp"

namespace ibv {
namespace {

constexpr std::uint32_t kMaxQpNumber = 0xFFFFFF;
constexpr std::uint32_t kControlledQkeyBit = 0x80000000U;

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

[[noreturn, gnu::cold]] void reject_send(const UdSendRequest& request, const std::string& reason) {
  throw_invalid_argument("UdQueuePair::post_send",
                         std::string(to_string(request.request().opcode())) + " wr_id " +
                             std::to_string(request.wr_id()),
                         reason);
}

void check_send(const detail::UdQueuePairCore& core, const UdSendRequest& request) {
  const SendRequest& send = request.request();
  const auto max_sge = core.settings.max_send_sge.value();
  if (send.element_count() > max_sge) {
    reject_send(request, "has " + std::to_string(send.element_count()) +
                             " elements, more than the QP's max_send_sge of " +
                             std::to_string(max_sge));
  }
  const std::uint32_t mtu = core.port.active_mtu.bytes();
  if (send.byte_length() > mtu) {
    reject_send(request, "carries " + std::to_string(send.byte_length()) +
                             " bytes, more than the path MTU of " + std::to_string(mtu) +
                             ": a UD datagram is one packet");
  }
  if (send.is_inline() && send.byte_length() > core.max_inline_data) {
    reject_send(request, "has " + std::to_string(send.byte_length()) +
                             " inline bytes, more than the QP's max_inline_data of " +
                             std::to_string(core.max_inline_data));
  }
  if (request.remote_qp_number() > kMaxQpNumber) {
    reject_send(request, "names remote QPN " + std::to_string(request.remote_qp_number()) +
                             ", which does not fit 24 bits");
  }
  if ((request.remote_qkey() & kControlledQkeyBit) != 0) {
    reject_send(request, "names Q_Key " + std::to_string(request.remote_qkey()) +
                             ", a controlled Q_Key (bit 31 set): the device would send the QP's "
                             "own Q_Key instead");
  }
  if (request.address_handle().native() == nullptr) {
    reject_send(request, "has no address handle");
  }
  if (request.address_handle().protection_domain() != core.pd) {
    reject_send(request, "goes through " + request.address_handle().to_string() +
                             ", made on another protection domain than the QP's");
  }
  if (const auto refusal =
          core.pd.local_keys().refusal(send.native().sg_list, send.element_count())) {
    reject_send(request, *refusal);
  }
}

void check_receive(const detail::UdQueuePairCore& core, const ReceiveRequest& request) {
  if (core.srq) {
    throw Error(ErrorKind::state, "UdQueuePair::post_receive", EINVAL,
                "receive wr_id " + std::to_string(request.wr_id()) + " for UD QP " +
                    std::to_string(core.qp->qp_num) +
                    ", which takes its receives from a shared receive queue",
                "post receives to the SharedReceiveQueue the QP was built with");
  }
  const auto max_sge = core.settings.max_recv_sge.value();
  if (request.element_count() > max_sge) {
    throw_invalid_argument(
        "UdQueuePair::post_receive", "receive wr_id " + std::to_string(request.wr_id()),
        "has " + std::to_string(request.element_count()) +
            " elements, more than the QP's max_recv_sge of " + std::to_string(max_sge));
  }
  if (request.byte_length() < GlobalRouteHeader::kSize) {
    throw_invalid_argument("UdQueuePair::post_receive",
                           "receive wr_id " + std::to_string(request.wr_id()),
                           "has room for " + std::to_string(request.byte_length()) +
                               " bytes, fewer than the 40 bytes of the GRH area every UD "
                               "receive starts with");
  }
  if (const auto refusal =
          core.pd.local_keys().refusal(request.native().sg_list, request.element_count())) {
    throw_invalid_argument("UdQueuePair::post_receive",
                           "receive wr_id " + std::to_string(request.wr_id()), *refusal);
  }
}

// Links `requests`, posts them with one call and unlinks them; throws naming the rejected one.
template <typename Request, typename Native>
void post_list(std::span<Request> requests, ibv_qp* qp, int (*post)(ibv_qp*, Native*, Native**),
               std::string_view verb) {
  if (requests.empty()) return;
  for (std::size_t i = 0; i + 1 < requests.size(); ++i) {
    requests[i].native().next = &requests[i + 1].native();
  }
  requests.back().native().next = nullptr;
  Native* bad = nullptr;
  const int rc = post(qp, &requests.front().native(), &bad);
  for (Request& request : requests) request.native().next = nullptr;
  if (rc != 0) {
    detail::throw_post_failure(verb, qp->qp_num, rc,
                               bad == nullptr ? std::nullopt : std::optional(bad->wr_id));
  }
}

}  // namespace

QKey::QKey(std::uint32_t value) : value_(value) {
  if ((value & kControlledQkeyBit) != 0) {
    throw_invalid_argument("QKey", "qkey " + std::to_string(value),
                           "has bit 31 set: a controlled Q_Key, which only a privileged queue "
                           "pair may hold (use 0..0x7fffffff)");
  }
}

// ---------------------------------------------------------------------------------------------
// UdQueuePairBuilder

UdQueuePairBuilder::UdQueuePairBuilder(ProtectionDomain pd, CompletionQueue send_cq,
                                       CompletionQueue recv_cq)
    : pd_(std::move(pd)), send_cq_(std::move(send_cq)), recv_cq_(std::move(recv_cq)) {}

UdQueuePairBuilder& UdQueuePairBuilder::port(PortNumber port) noexcept {
  settings_.port = port;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::gid_index(std::uint32_t index) noexcept {
  settings_.gid_index = index;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::qkey(QKey qkey) noexcept {
  settings_.qkey = qkey;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::pkey_index(std::uint16_t index) noexcept {
  settings_.pkey_index = index;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::max_send_wr(QueueDepth depth) noexcept {
  settings_.max_send_wr = depth;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::max_recv_wr(QueueDepth depth) noexcept {
  settings_.max_recv_wr = depth;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::max_send_sge(SgeCount count) noexcept {
  settings_.max_send_sge = count;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::max_recv_sge(SgeCount count) noexcept {
  settings_.max_recv_sge = count;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::max_inline_data(InlineSize bytes) noexcept {
  settings_.max_inline_data = bytes;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::send_psn(Psn psn) noexcept {
  settings_.send_psn = psn;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::settings(const UdQueuePairSettings& settings) noexcept {
  settings_ = settings;
  return *this;
}
UdQueuePairBuilder& UdQueuePairBuilder::shared_receive_queue(SharedReceiveQueue srq) noexcept {
  srq_ = std::move(srq);
  return *this;
}

UdQueuePair UdQueuePairBuilder::build() const {
  constexpr std::string_view kOperation = "UdQueuePairBuilder::build";
  const Context& context = pd_.context();
  if (send_cq_.context().native() != context.native() ||
      recv_cq_.context().native() != context.native()) {
    throw_invalid_argument(kOperation, "completion queues",
                           "belong to another device than the protection domain");
  }
  if (srq_ && srq_->protection_domain() != pd_) {
    throw_invalid_argument(kOperation, "shared_receive_queue",
                           "belongs to another protection domain than the queue pair");
  }
  // The RC resolver checks what the two share (port, GID index, depths, SGEs); its RC-only
  // choices (read/atomic depths, MTU, RNR) are not used.
  QueuePairSettings common;
  common.port = settings_.port;
  common.gid_index = settings_.gid_index;
  common.max_send_wr = settings_.max_send_wr;
  common.max_recv_wr = settings_.max_recv_wr;
  common.max_send_sge = settings_.max_send_sge;
  common.max_recv_sge = settings_.max_recv_sge;
  common.send_psn = settings_.send_psn;
  auto resolved = detail::resolve_queue_pair(context, common, kOperation);
  if (!resolved.settings.gid_index) {  // InfiniBand without a GID index: the first entry, if any
    const auto table = context.gid_table(settings_.port);
    if (!table.empty()) resolved.gid_index = table.front().index;
  }
  ibv_port_attr port_attr{};
  if (const int rc = ibv_query_port(context.native(), settings_.port.value, &port_attr); rc != 0) {
    throw_verb_error("ibv_query_port", rc);
  }
  if (settings_.pkey_index >= port_attr.pkey_tbl_len) {
    throw_invalid_argument(
        kOperation, "pkey_index " + std::to_string(settings_.pkey_index),
        "is past the port's P_Key table of " + std::to_string(port_attr.pkey_tbl_len) + " entries");
  }

  auto core = std::make_unique<detail::UdQueuePairCore>(detail::UdQueuePairCore{pd_,
                                                                                send_cq_,
                                                                                recv_cq_,
                                                                                settings_,
                                                                                resolved.port,
                                                                                resolved.gid_index,
                                                                                resolved.gid,
                                                                                0,
                                                                                srq_,
                                                                                {}});
  core->settings.gid_index = resolved.settings.gid_index;
  core->settings.send_psn = resolved.settings.send_psn;
  const auto& s = core->settings;

  ibv_qp_init_attr init{};
  init.send_cq = send_cq_.native();
  init.recv_cq = recv_cq_.native();
  init.qp_type = IBV_QPT_UD;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = s.max_send_wr.value();
  init.cap.max_recv_wr = s.max_recv_wr.value();
  init.cap.max_send_sge = s.max_send_sge.value();
  init.cap.max_recv_sge = s.max_recv_sge.value();
  if (srq_) {
    init.srq = srq_->native();
    init.cap.max_recv_wr = 0;
    init.cap.max_recv_sge = 0;
  }
  constexpr std::array<std::uint32_t, 3> kDefaultInlineSteps{InlineSize::kDefault, 64, 0};
  const std::span<const std::uint32_t> inline_tries =
      s.max_inline_data ? std::span<const std::uint32_t>() : std::span(kDefaultInlineSteps);
  const std::uint32_t asked_inline = s.max_inline_data ? s.max_inline_data->value() : 0;
  ibv_qp* raw = nullptr;
  for (std::size_t attempt = 0;; ++attempt) {
    const std::uint32_t inline_size = inline_tries.empty() ? asked_inline : inline_tries[attempt];
    init.cap.max_inline_data = inline_size;
    errno = 0;
    raw = ibv_create_qp(pd_.native(), &init);
    if (raw != nullptr) break;
    if (attempt + 1 < inline_tries.size()) continue;
    throw_verb_error("ibv_create_qp", errno != 0 ? errno : ENOMEM,
                     "UD QP on " + context.name() + " with max_send_wr " +
                         std::to_string(s.max_send_wr.value()) + ", max_recv_wr " +
                         std::to_string(s.max_recv_wr.value()) + ", max_inline_data " +
                         std::to_string(inline_size));
  }
  core->qp.reset(raw);
  core->max_inline_data = init.cap.max_inline_data;
  if (s.max_inline_data && init.cap.max_inline_data < asked_inline) {
    throw_invalid_argument(
        kOperation, "max_inline_data " + std::to_string(asked_inline),
        "is more than the device grants (" + std::to_string(init.cap.max_inline_data) + ")");
  }

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = s.pkey_index;
  attr.port_num = s.port.value;
  attr.qkey = s.qkey.value();
  if (const int rc =
          ibv_modify_qp(raw, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
      rc != 0) {
    throw_verb_error("ibv_modify_qp", rc, "UD RESET -> INIT");
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  if (const int rc = ibv_modify_qp(raw, &attr, IBV_QP_STATE); rc != 0) {
    throw_verb_error("ibv_modify_qp", rc, "UD INIT -> RTR");
  }
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = s.send_psn->value();
  if (const int rc = ibv_modify_qp(raw, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN); rc != 0) {
    throw_verb_error("ibv_modify_qp", rc, "UD RTR -> RTS");
  }
  return UdQueuePair(std::move(core));
}

// ---------------------------------------------------------------------------------------------
// UdQueuePair

UdQueuePair::UdQueuePair(std::unique_ptr<detail::UdQueuePairCore> core) noexcept
    : core_(std::move(core)) {}

std::uint32_t UdQueuePair::qp_number() const noexcept { return core_->qp->qp_num; }

UdAddress UdQueuePair::address() const {
  return UdAddress{core_->qp->qp_num, core_->settings.qkey.value(), core_->port.lid, core_->gid,
                   core_->port.active_mtu};
}

void UdQueuePair::check(const UdSendRequest& request) const { check_send(*core_, request); }

void UdQueuePair::check(const ReceiveRequest& request) const { check_receive(*core_, request); }

void UdQueuePair::post_send(UdSendRequest& request) const {
  check_send(*core_, request);
  ibv_send_wr* rejected = nullptr;
  if (const int rc = ibv_post_send(native(), &request.native(), &rejected); rc != 0) {
    detail::throw_post_failure("ibv_post_send", qp_number(), rc, request.wr_id());
  }
}

void UdQueuePair::post_send(std::span<UdSendRequest> requests) const {
  for (const auto& request : requests) check_send(*core_, request);
  post_list(requests, native(), ibv_post_send, "ibv_post_send");
}

void UdQueuePair::post_receive(ReceiveRequest& request) const {
  check_receive(*core_, request);
  ibv_recv_wr* rejected = nullptr;
  if (const int rc = ibv_post_recv(native(), &request.native(), &rejected); rc != 0) {
    detail::throw_post_failure("ibv_post_recv", qp_number(), rc, request.wr_id());
  }
}

void UdQueuePair::post_receive(std::span<ReceiveRequest> requests) const {
  for (const auto& request : requests) check_receive(*core_, request);
  post_list(requests, native(), ibv_post_recv, "ibv_post_recv");
}

void UdQueuePair::move_to_error() const {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (const int rc = ibv_modify_qp(native(), &attr, IBV_QP_STATE); rc != 0) {
    throw_verb_error("ibv_modify_qp", rc, "to ERR, UD QP " + std::to_string(qp_number()));
  }
}

std::string UdQueuePair::query_state() const {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (const int rc = ibv_query_qp(native(), &attr, IBV_QP_STATE, &init); rc != 0) {
    throw_verb_error("ibv_query_qp", rc);
  }
  return std::string(state_name(attr.qp_state));
}

}  // namespace ibv
