// SPDX-License-Identifier: MIT
// Reliable-connected queue pairs, built in two phases: a QueuePairBuilder makes a
// PreparedQueuePair (created, in INIT), whose endpoint() goes to the peer out of band; its
// handshake(remote) drives INIT -> RTR -> RTS and gives a connected QueuePair.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "ibv/verbs/access.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/mtu.hpp"
#include "ibv/verbs/port.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair_settings.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"
#include "ibv/verbs/work_request.hpp"

struct ibv_qp;

namespace ibv {

/// The verbs a queue pair posts its send-queue requests with. Both post the same requests with
/// the same checks and the same effect; receives always go through ibv_post_recv. See
/// docs/operations.md, "The post interface", for what each costs and why classic is the
/// default.
enum class PostInterface : std::uint8_t {
  /// ibv_post_send with a linked list of ibv_send_wr: every provider has it. A list the device
  /// cuts short is posted up to the request it rejected.
  classic,
  /// ibv_wr_start / ibv_wr_* / ibv_wr_complete on an ibv_qp_ex (perftest's default): the
  /// provider takes each request through its builders, without an ibv_send_wr. A request of
  /// several elements still goes through ibv_post_send (see detail::takes_extended). A list is
  /// all or nothing: the device takes every request of it or none. Building fails on a provider
  /// without it.
  extended,
};

/// Every setting of a queue pair, with bounded defaults (no infinite retry or timeout).
/// Unset optionals are taken from the device and port when the QP is built.
///
/// Bounds checked by QueuePairBuilder::build() before anything is created (errors name the
/// setting): port 1..physical_port_count (not_found); gid_index a valid entry of the port's GID
/// table (not_found, listing the valid ones) within 0..255; max_send_wr / max_recv_wr up to the
/// device's max_qp_wr; max_send_sge / max_recv_sge up to max_sge; max_rd_atomic /
/// max_dest_rd_atomic up to max_qp_init_rd_atom / max_qp_rd_atom; mtu up to the port's max MTU;
/// service_level 0..15. The value types check their own ranges at construction. The full table
/// of checked inputs is docs/bad-input.md.
struct QueuePairSettings {
  /// 1-based; 0 and ports past the device's count are rejected.
  PortNumber port{};
  /// GID index for RoCE and for InfiniBand with a global route: a valid entry of the port's
  /// table (not_found otherwise), within 0..255 (the address vector's sgid_index is 8 bits;
  /// invalid_argument for a valid entry above); default: Context::default_gid_index.
  std::optional<std::uint32_t> gid_index;
  /// Rights peers get on this QP (memory regions must grant them too).
  RemoteAccess access = RemoteAccess::all();
  /// Send queue depth: requests posted and not yet completed; up to the device's max_qp_wr.
  QueueDepth max_send_wr{128};
  /// Receive queue depth (ignored with a shared receive queue); up to max_qp_wr.
  QueueDepth max_recv_wr{128};
  /// Most gather elements per send-queue request; up to the device's max_sge.
  SgeCount max_send_sge{1};
  /// Most scatter elements per receive (ignored with a shared receive queue); up to max_sge.
  SgeCount max_recv_sge{1};
  /// Inline bytes to ask the device for. Default (unset): InlineSize::kDefault (220), and if
  /// the device refuses to create the QP with that, 64, then 0. Either way the QP then knows
  /// what the device granted (QueuePair::max_inline_data, often more than asked: rxe grants
  /// at least 16 bytes per send SGE), and the Channel sends and writes up to that much inline
  /// by default (PostOptions::inline_data). Set: exactly this is asked for, and building fails
  /// if the device grants less.
  std::optional<InlineSize> max_inline_data;
  /// Path MTU; default: the port's active MTU.
  std::optional<Mtu> mtu;
  /// First PSN this side sends with; default: random.
  std::optional<Psn> send_psn;
  /// How long a request waits for its ACK before it is retransmitted (about 67 ms).
  AckTimeout ack_timeout = AckTimeout::default_value();
  /// Retransmissions after ACK timeouts before a request fails (6).
  RetryCount retry_count = RetryCount::default_value();
  /// Retries of a send that found no receive posted at the peer before it fails (6).
  RnrRetryCount rnr_retry = RnrRetryCount::default_value();
  /// What this side asks a sender to wait before retrying such a send (2.56 ms).
  RnrTimer min_rnr_timer = RnrTimer::default_value();
  /// Outstanding reads/atomics as initiator; default: min(device limit, 16).
  std::optional<ReadAtomicDepth> max_rd_atomic;
  /// Outstanding reads/atomics as responder; default: min(device limit, 16).
  std::optional<ReadAtomicDepth> max_dest_rd_atomic;
  /// Global route header: hop limit (RoCE, or InfiniBand with a GID).
  std::uint8_t hop_limit = 64;
  /// Global route header: traffic class (RoCE, or InfiniBand with a GID).
  std::uint8_t traffic_class = 0;
  /// InfiniBand service level: 0..15 (4 bits).
  std::uint8_t service_level = 0;
  /// How send-queue requests reach the device (see PostInterface): ibv_post_send by default.
  PostInterface post_interface = PostInterface::classic;
};

class PreparedQueuePair;
class QueuePair;

/// Collects the settings of a reliable-connected queue pair (QueuePairSettings: what each
/// means, its default and its bounds) and builds it in two phases: build() gives a
/// PreparedQueuePair (created, in INIT), whose endpoint() goes to the peer out of band; its
/// handshake() with the peer's endpoint gives a connected QueuePair.
///
/// Setters take validated value types; limits that depend on the device (queue depths, SGEs,
/// inline size, port, GID index) are checked in build(), before the QP is created, with errors
/// that name the setting ([docs/bad-input.md](docs/bad-input.md) lists every check).
///
///     auto prepared = ibv::QueuePairBuilder(pd, cq, cq).max_send_wr(ibv::QueueDepth(64)).build();
///     send_to_peer(prepared.endpoint());
///     ibv::QueuePair qp = std::move(prepared).handshake(receive_from_peer());
class QueuePairBuilder {
 public:
  /// A builder with the default QueuePairSettings. Completions of sends go to `send_cq`, of
  /// receives to `recv_cq` (they may be the same queue); the QP keeps all three alive.
  QueuePairBuilder(ProtectionDomain pd, CompletionQueue send_cq, CompletionQueue recv_cq);

  /// Sets QueuePairSettings::post_interface (extended: build() fails on a provider without it).
  QueuePairBuilder& post_interface(PostInterface interface) noexcept;
  /// Sets QueuePairSettings::port (checked in build()).
  QueuePairBuilder& port(PortNumber port) noexcept;
  /// Sets QueuePairSettings::gid_index (checked in build()).
  QueuePairBuilder& gid_index(std::uint32_t index) noexcept;
  /// Sets QueuePairSettings::access.
  QueuePairBuilder& access(RemoteAccess access) noexcept;
  /// Sets QueuePairSettings::max_send_wr (checked in build()).
  QueuePairBuilder& max_send_wr(QueueDepth depth) noexcept;
  /// Sets QueuePairSettings::max_recv_wr (checked in build()).
  QueuePairBuilder& max_recv_wr(QueueDepth depth) noexcept;
  /// Sets QueuePairSettings::max_send_sge (checked in build()).
  QueuePairBuilder& max_send_sge(SgeCount count) noexcept;
  /// Sets QueuePairSettings::max_recv_sge (checked in build()).
  QueuePairBuilder& max_recv_sge(SgeCount count) noexcept;
  /// Sets QueuePairSettings::max_inline_data: exactly this much, or build() fails.
  QueuePairBuilder& max_inline_data(InlineSize bytes) noexcept;
  /// Sets QueuePairSettings::mtu (checked against the port's max MTU in build()).
  QueuePairBuilder& mtu(Mtu mtu) noexcept;
  /// Sets QueuePairSettings::send_psn.
  QueuePairBuilder& send_psn(Psn psn) noexcept;
  /// Sets QueuePairSettings::ack_timeout.
  QueuePairBuilder& ack_timeout(AckTimeout timeout) noexcept;
  /// Sets QueuePairSettings::retry_count.
  QueuePairBuilder& retry_count(RetryCount count) noexcept;
  /// Sets QueuePairSettings::rnr_retry.
  QueuePairBuilder& rnr_retry(RnrRetryCount count) noexcept;
  /// Sets QueuePairSettings::min_rnr_timer.
  QueuePairBuilder& min_rnr_timer(RnrTimer timer) noexcept;
  /// Sets QueuePairSettings::max_rd_atomic (checked in build()).
  QueuePairBuilder& max_rd_atomic(ReadAtomicDepth depth) noexcept;
  /// Sets QueuePairSettings::max_dest_rd_atomic (checked in build()).
  QueuePairBuilder& max_dest_rd_atomic(ReadAtomicDepth depth) noexcept;
  /// Sets QueuePairSettings::hop_limit.
  QueuePairBuilder& hop_limit(std::uint8_t hops) noexcept;
  /// Sets QueuePairSettings::traffic_class.
  QueuePairBuilder& traffic_class(std::uint8_t traffic_class) noexcept;
  /// Sets QueuePairSettings::service_level (0..15, checked in build()).
  QueuePairBuilder& service_level(std::uint8_t level) noexcept;
  /// All settings at once.
  QueuePairBuilder& settings(const QueuePairSettings& settings) noexcept;
  /// Takes the QP's receives from `srq` (ibv_qp_init_attr.srq) instead of a receive queue of
  /// its own: max_recv_wr / max_recv_sge are then ignored, and posting a receive to the QP
  /// throws ibv::Error (state). build() rejects an SRQ of another device (invalid_argument).
  QueuePairBuilder& shared_receive_queue(SharedReceiveQueue srq) noexcept;

  /// The settings as set so far (unset optionals are resolved only by build()).
  [[nodiscard]] const QueuePairSettings& settings() const noexcept { return settings_; }

  /// Checks the settings against the device, creates the QP and moves it to INIT. Throws
  /// ibv::Error naming the setting that does not fit (invalid_argument / not_found), or the
  /// verb that failed.
  [[nodiscard]] PreparedQueuePair build() const;

 private:
  ProtectionDomain pd_;
  CompletionQueue send_cq_;
  CompletionQueue recv_cq_;
  QueuePairSettings settings_;
  std::optional<SharedReceiveQueue> srq_;
};

namespace detail {
/// Destroys a QP (ibv_destroy_qp), reporting a failure on stderr: destructors do not throw.
struct QueuePairDestroyer {
  void operator()(ibv_qp* qp) const noexcept;
};

/// What a queue pair owns, shared by its prepared and connected forms: the QP and the objects
/// it must keep alive (PD, CQs), plus the resolved settings.
struct QueuePairCore {
  ProtectionDomain pd;
  CompletionQueue send_cq;
  CompletionQueue recv_cq;
  QueuePairSettings settings;  // optionals resolved by build()
  PortAttributes port;
  std::uint32_t gid_index = 0;
  Gid gid;
  bool device_atomics = false;        // the device's atomic_cap is not NONE
  std::uint32_t max_inline_data = 0;  // what the device granted
  // The most bytes a send-queue request may move: [0] the port's max message size, [1] with
  // inline data, the smaller of that and max_inline_data (QueuePair::passes_check's compare).
  std::array<std::uint64_t, 2> send_length_limit{};
  // Set by QueuePair once connected: the queue pair can take atomics (the device has them, and
  // max_rd_atomic and max_dest_rd_atomic are at least 1), and the SGE and message size limits
  // admit an atomic's one 8-byte element. An atomic request's own checks remain.
  bool atomics_ready = false;
  // The QP's extended post interface (ibv_wr_*), when it was created with one; else null and
  // requests go through ibv_post_send.
  ibv_qp_ex* qpx = nullptr;
  std::optional<SharedReceiveQueue> srq;           // where receives come from, if shared
  std::unique_ptr<ibv_qp, QueuePairDestroyer> qp;  // declared last: destroyed first
};
}  // namespace detail

/// A queue pair that exists (state INIT) but is not connected yet. Its endpoint() goes to the
/// peer; handshake() with the peer's endpoint connects it. Move-only.
class PreparedQueuePair {
 public:
  /// Wraps what QueuePairBuilder::build() created (for the library and connection managers).
  explicit PreparedQueuePair(std::unique_ptr<detail::QueuePairCore> core) noexcept;

  /// This side's address for the peer: QPN, LID, GID (at the chosen index) and send PSN.
  [[nodiscard]] Endpoint endpoint() const;
  /// The GID index the QP uses.
  [[nodiscard]] std::uint32_t gid_index() const noexcept { return core_->gid_index; }
  /// The settings with every optional resolved (port, GID index, MTU, PSN, ...).
  [[nodiscard]] const QueuePairSettings& settings() const noexcept { return core_->settings; }

  /// Posts receives before the QP is connected (verbs allows it from INIT), so that they are
  /// in place before the peer's first message can arrive. Completions come once connected.
  void post_receive(std::span<ReceiveRequest> requests) const;

  /// Connects to `remote` (INIT -> RTR -> RTS). Addresses by GID with a global route header on
  /// Ethernet (RoCE) ports, by LID on InfiniBand (adding the GRH when a GID index was set and
  /// `remote` has a GID). Connecting to its own endpoint gives a loopback QP. Throws ibv::Error
  /// with a hint (on RoCE, EINVAL at RTR is nearly always the GID index or the remote GID).
  [[nodiscard]] QueuePair handshake(const Endpoint& remote) &&;

  /// For connection managers that drive INIT -> RTR -> RTS themselves (ibv/cm, with
  /// rdma_cm's attributes): gives up what the queue pair owns; QueuePair(core, remote) wraps
  /// it once it is connected. The PreparedQueuePair is empty afterwards.
  [[nodiscard]] std::unique_ptr<detail::QueuePairCore> release() && noexcept {
    return std::move(core_);
  }

 private:
  std::unique_ptr<detail::QueuePairCore> core_;
};

namespace detail {
/// Throws the Error of a failed ibv_post_send / ibv_post_recv (`verb`) on QP `qp_number`,
/// naming the request the device rejected (`rejected`: its wr_id, when the verb said).
[[noreturn, gnu::cold]] void throw_post_failure(std::string_view verb, std::uint32_t qp_number,
                                                int errno_value,
                                                std::optional<std::uint64_t> rejected);

/// Bit 2 * opcode + inline_data: whether QueuePair::passes_check() takes a request of that
/// opcode, with inline data (1) or not (0), by its length compares alone. Not atomics (their
/// checks are check()'s); inline data only for the opcodes that may_be_inline(). Computed over
/// every row of the opcode table.
inline constexpr std::uint64_t kPlainSendMask = [] {
  std::uint64_t mask = 0;
  for (unsigned code = 0; code < kSendOpcodeCount; ++code) {
    const auto opcode = static_cast<SendOpcode>(code);
    if (is_atomic(opcode)) continue;
    mask |= std::uint64_t{1} << (2 * code);
    if (may_be_inline(opcode)) mask |= std::uint64_t{1} << (2 * code + 1);
  }
  return mask;
}();
static_assert(2 * kSendOpcodeCount <= 64,
              "kPlainSendMask has a bit for every opcode, with and without inline data");
/// Whether `opcode` with `inline_data` (0 or 1) is plain: see kPlainSendMask.
[[nodiscard]] constexpr bool is_plain_send(SendOpcode opcode, unsigned inline_data) noexcept {
  return ((kPlainSendMask >> (2U * static_cast<unsigned>(opcode) + inline_data)) & 1U) != 0;
}

/// Whether the extended post interface (ibv_qp_ex `qpx`, null when the queue pair has none)
/// takes a request of `element_count` elements. Not one of several: Soft-RoCE before
/// rdma-core 64 computes the length of an element list wrongly (ibv_wr_set_sge_list) and lets
/// inline data of several buffers overrun its queue (ibv_wr_set_inline_data_list); such a
/// request goes through ibv_post_send, which the interface allows between its batches.
[[nodiscard]] constexpr bool takes_extended(const ibv_qp_ex* qpx,
                                            std::size_t element_count) noexcept {
  return qpx != nullptr && element_count <= 1;
}
/// Puts `request` (takes_extended) into the queue pair's current batch of the extended post
/// interface (between ibv_wr_start and ibv_wr_complete): its wr_id and flags, its opcode with
/// the remote address, key, immediate or atomic operands it uses (its row of the opcode table,
/// visit_send_opcode), and its data, inline or as its element (unless the row's put took it).
[[gnu::always_inline]] inline void put_extended(ibv_qp_ex* qpx, const SendRequest& request) {
  const ibv_send_wr& wr = request.native();
  qpx->wr_id = wr.wr_id;
  qpx->wr_flags = wr.send_flags;
  // The opcode's ibv_wr_* call, from its row of the opcode table (inlined: a switch).
  const bool data =
      visit_send_opcode(request.opcode(), [qpx, &wr](const SendOpcodeTraits& traits, auto put) {
        put(qpx, wr);
        return traits.extended_data;
      });
  if (!data) return;
  if (wr.num_sge == 0) {
    ibv_wr_set_sge_list(qpx, 0, nullptr);
  } else if (request.is_inline()) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): a CPU address, as inline data requires
    ibv_wr_set_inline_data(qpx, reinterpret_cast<void*>(wr.sg_list->addr), wr.sg_list->length);
  } else {
    ibv_wr_set_sge(qpx, wr.sg_list->lkey, wr.sg_list->addr, wr.sg_list->length);
  }
}
}  // namespace detail

/// A request that QueuePair::checked() has passed for that queue pair: QueuePair::post() posts
/// it without checking it again. It refers to the request, which must stay alive and unchanged
/// (its flags too) until it is posted.
template <typename Request>
class Checked {
 public:
  /// The request it refers to.
  [[nodiscard]] Request& request() const noexcept { return *request_; }

 private:
  friend class QueuePair;
  explicit Checked(Request& request) noexcept : request_(&request) {}
  Request* request_;
};

/// Requests that QueuePair::checked() has passed, all of them, for QueuePair::post() to post as
/// one linked list (one doorbell) without checking them again. Like Checked, it refers to the
/// requests, which must stay alive and unchanged until they are posted.
template <typename Request>
class CheckedList {
 public:
  /// The requests it refers to, in posting order.
  [[nodiscard]] std::span<Request> requests() const noexcept { return requests_; }
  /// How many requests.
  [[nodiscard]] std::size_t size() const noexcept { return requests_.size(); }
  /// `count` of the requests from `offset` on: a part of a checked list is checked.
  [[nodiscard]] CheckedList part(std::size_t offset, std::size_t count) const noexcept {
    return CheckedList(requests_.subspan(offset, count));
  }

 private:
  friend class QueuePair;
  explicit CheckedList(std::span<Request> requests) noexcept : requests_(requests) {}
  std::span<Request> requests_;
};

/// What QueuePair::post() of a CheckedList does with the requests' links afterwards. A list is
/// linked in place for the post (each request's `next` points to the following one).
enum class AfterPost : std::uint8_t {
  /// Unlinks them again, so that each stays reusable on its own (the default).
  unlink,
  /// Leaves them linked: for requests built for this one post and rebuilt before the next
  /// (a Channel's list storage), which saves a pass over the list.
  leave_linked,
};

/// What QueuePair::post() of a CheckedList did: the device took the first `posted` requests;
/// when it rejected the next one, `error` is the verb's errno (else 0).
struct ListPosted {
  /// How many requests, from the first, the device took.
  std::size_t posted = 0;
  /// The verb's errno for the request after them, or 0 when all were posted.
  int error = 0;
};

/// A connected reliable-connected queue pair (state RTS). Move-only; destroying it destroys the
/// QP, after which its PD and CQs live on only as long as other users hold them.
///
/// Posting checks every request before it reaches the device (element count against the QP's
/// SGE limit, inline size, local length against the remote region) and throws ibv::Error
/// (invalid_argument) naming the problem; a failure of the verb itself throws with a hint.
/// Completions arrive in the CQs given at build time.
class QueuePair {
 public:
  /// Wraps a queue pair already in RTS, connected to `remote` (PreparedQueuePair::handshake(),
  /// or a connection manager after PreparedQueuePair::release()).
  explicit QueuePair(std::unique_ptr<detail::QueuePairCore> core, const Endpoint& remote) noexcept;

  /// The checks of post_send() (see check()), then `request` as checked, for post().
  [[nodiscard]] Checked<SendRequest> checked(SendRequest& request) const {
    if (!passes_check(request)) [[unlikely]]
      check(request);  // the atomic checks, or the one that fails: throws naming it
    return Checked<SendRequest>(request);
  }
  /// The checks of post_receive(), then `request` as checked, for post().
  [[nodiscard]] Checked<ReceiveRequest> checked(ReceiveRequest& request) const {
    if (!passes_check(request)) [[unlikely]]
      check(request);  // throws naming the check that fails
    return Checked<ReceiveRequest>(request);
  }
  /// The checks of post_send() on every request, then all of them as checked, for post().
  [[nodiscard]] CheckedList<SendRequest> checked(std::span<SendRequest> requests) const {
    return checked(requests, [](SendRequest& /*request*/, std::size_t /*index*/) {});
  }
  /// checked(requests), with `prepare(request, index)` called on each request just before its
  /// checks, in the same pass: for a caller that fills in each request's wr_id and flags.
  template <typename Prepare>
  [[nodiscard]] CheckedList<SendRequest> checked(std::span<SendRequest> requests,
                                                 Prepare&& prepare) const {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      SendRequest& request = requests[i];
      prepare(request, i);
      if (!passes_check(request)) [[unlikely]]
        check(request);
    }
    return CheckedList<SendRequest>(requests);
  }
  /// The checks of post_receive() on every receive, then all of them as checked, for post().
  [[nodiscard]] CheckedList<ReceiveRequest> checked(std::span<ReceiveRequest> requests) const {
    for (const auto& request : requests) {
      if (!passes_check(request)) [[unlikely]]
        check(request);
    }
    return CheckedList<ReceiveRequest>(requests);
  }
  /// Posts checked requests as one list, one doorbell, nothing checked again: one ibv_post_send
  /// (the requests are linked in place and unlinked afterwards), or on a queue pair built with
  /// PostInterface::extended one batch of ibv_wr_* (all or nothing) when none has several
  /// elements. Says how many the device took rather than throwing, so that a caller that tracks
  /// requests knows which are posted.
  [[nodiscard]] ListPosted post(CheckedList<SendRequest> list,
                                AfterPost after = AfterPost::unlink) const noexcept;
  /// Posts checked receives as one linked list (one ibv_post_recv); as
  /// post(CheckedList<SendRequest>).
  [[nodiscard]] ListPosted post(CheckedList<ReceiveRequest> list,
                                AfterPost after = AfterPost::unlink) const noexcept;
  /// Posts one checked request, with nothing checked again: ibv_post_send, inline, or on a
  /// queue pair built with PostInterface::extended one batch of ibv_wr_* (out of line). Throws
  /// ibv::Error (with a hint) when the verb fails.
  [[gnu::always_inline]] void post(Checked<SendRequest> checked) const {
    ibv_send_wr& wr = checked.request().native();
    // Not the default (PostInterface::classic): out of line, off the default's straight path.
    if (detail::takes_extended(core_->qpx, checked.request().element_count())) [[unlikely]] {
      post_extended(checked.request());
      return;
    }
    ibv_send_wr* rejected = nullptr;
    if (const int rc = ibv_post_send(native(), &wr, &rejected); rc != 0) [[unlikely]] {
      detail::throw_post_failure("ibv_post_send", qp_number(), rc, wr_id_of(rejected));
    }
  }
  /// Posts one checked receive: ibv_post_recv, inline. Throws as post(Checked<SendRequest>).
  void post(Checked<ReceiveRequest> checked) const {
    ibv_recv_wr* rejected = nullptr;
    ibv_recv_wr& wr = checked.request().native();
    if (const int rc = ibv_post_recv(native(), &wr, &rejected); rc != 0) [[unlikely]] {
      detail::throw_post_failure("ibv_post_recv", qp_number(), rc, wr_id_of(rejected));
    }
  }

  /// Posts one send-queue request: post(checked(request)), inline in the caller.
  [[gnu::always_inline]] void post_send(SendRequest& request) const { post(checked(request)); }
  /// Posts several send-queue requests with one doorbell (linked in place, no allocation).
  /// All are checked before any is posted; if the device rejects one, the error says which
  /// and the ones before it are posted.
  void post_send(std::span<SendRequest> requests) const;
  /// Posts one receive: post(checked(request)), inline in the caller.
  [[gnu::always_inline]] void post_receive(ReceiveRequest& request) const {
    post(checked(request));
  }
  /// Posts several receives with one doorbell.
  void post_receive(std::span<ReceiveRequest> requests) const;

  /// Posts one signaled send of `data` (SendRequest::send), checked as post_send(SendRequest&).
  void post_send(std::uint64_t wr_id, std::span<const GatherElement> data) const;
  /// Posts one signaled RDMA write of `data` to `destination` (SendRequest::write), checked.
  void post_write(std::uint64_t wr_id, std::span<const GatherElement> data,
                  const RemoteMemoryRegion& destination) const;
  /// Posts one signaled RDMA read of `source` into `into` (SendRequest::read), checked.
  void post_read(std::uint64_t wr_id, std::span<const ScatterElement> into,
                 const RemoteMemoryRegion& source) const;
  /// Posts one receive into `into` (ReceiveRequest), checked as post_receive(ReceiveRequest&).
  void post_receive(std::uint64_t wr_id, std::span<const ScatterElement> into) const;

  /// The local QP number.
  [[nodiscard]] std::uint32_t qp_number() const noexcept { return core_->qp->qp_num; }
  /// This side's endpoint, as PreparedQueuePair::endpoint() gave it.
  [[nodiscard]] Endpoint local_endpoint() const;
  /// The peer's endpoint it is connected to.
  [[nodiscard]] const Endpoint& remote_endpoint() const noexcept { return remote_; }
  /// The settings with every optional resolved.
  [[nodiscard]] const QueuePairSettings& settings() const noexcept { return core_->settings; }
  /// Inline bytes the device granted (at least what was asked).
  [[nodiscard]] std::uint32_t max_inline_data() const noexcept { return core_->max_inline_data; }
  /// The GID index the QP uses.
  [[nodiscard]] std::uint32_t gid_index() const noexcept { return core_->gid_index; }
  /// The protection domain the QP was created on.
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return core_->pd; }
  /// The completion queue of its send-queue requests.
  [[nodiscard]] const CompletionQueue& send_cq() const noexcept { return core_->send_cq; }
  /// The completion queue of its receives.
  [[nodiscard]] const CompletionQueue& recv_cq() const noexcept { return core_->recv_cq; }
  /// The shared receive queue the QP takes its receives from, or null when it has its own.
  [[nodiscard]] const SharedReceiveQueue* shared_receive_queue() const noexcept {
    return core_->srq ? &*core_->srq : nullptr;
  }
  /// Moves the queue pair to the error state (ibv_modify_qp to IBV_QPS_ERR): the device
  /// completes every outstanding request as WorkStatus::work_request_flushed and touches none
  /// of their buffers afterwards. There is no way back to RTS. Throws ibv::Error when the verb
  /// fails.
  void move_to_error() const;
  /// The current state as the device reports it ("RTS", "ERR", ...), for diagnostics.
  [[nodiscard]] std::string query_state() const;

  /// The libibverbs QP, for verbs this library does not wrap; it stays owned by this object
  /// (do not destroy it, and keep its state RTS unless you mean to end the QP).
  [[nodiscard]] ibv_qp* native() const noexcept { return core_->qp.get(); }

  /// The checks post_send() makes, without posting: throws ibv::Error (invalid_argument) naming
  /// the request (opcode, wr_id) and what does not fit: more elements than max_send_sge, more
  /// bytes than the port's max message size, inline data beyond max_inline_data or on an RDMA
  /// read or atomic, more bytes than the remote region (destination / source) holds. Atomics
  /// also: a device without atomics (atomic_cap NONE, naming the device), a QP without
  /// max_rd_atomic / max_dest_rd_atomic, a result buffer that is not one element of exactly 8
  /// bytes, a target address that is not 8-byte aligned, a target region shorter than 8 bytes
  /// or known (RemoteMemoryRegion::access) to lack atomic access. And an element in a memory
  /// region registered on another protection domain than the QP's (as far as the library
  /// knows: an element made from_raw for memory registered elsewhere is left to the device).
  /// Lets callers that post batches over several QPs check everything before posting anything.
  void check(const SendRequest& request) const;
  /// Whether `request` passes check() without its atomic checks, by comparisons only (inline:
  /// it runs on every post). False for an atomic (check() then checks it fully) and for a
  /// request check() would reject; check() says which check failed.
  [[nodiscard]] bool passes_check(const SendRequest& request) const noexcept {
    const detail::QueuePairCore& core = *core_;
    const std::uint64_t length = request.byte_length();
    const unsigned inline_data = request.is_inline() ? 1U : 0U;
    return request.element_count() <= core.settings.max_send_sge.value() &&
           detail::is_plain_send(request.opcode(), inline_data) &&
           length <= core.send_length_limit[inline_data] && length <= request.remote_limit() &&
           core.pd.local_keys().all_known(request.native().sg_list, request.element_count());
  }
  /// The checks post_receive() makes, without posting: more elements than max_recv_sge, more
  /// bytes than the port's max message size, an element on another protection domain (as
  /// check() above); ibv::Error (state) when the QP takes its
  /// receives from a shared receive queue (post them there).
  void check(const ReceiveRequest& request) const;
  /// Whether `request` passes check(ReceiveRequest), by comparisons only (inline, as the send
  /// queue's passes_check()).
  [[nodiscard]] bool passes_check(const ReceiveRequest& request) const noexcept {
    const detail::QueuePairCore& core = *core_;
    return !core.srq && request.element_count() <= core.settings.max_recv_sge.value() &&
           request.byte_length() <= core.port.max_message_size &&
           core.pd.local_keys().all_known(request.native().sg_list, request.element_count());
  }

 private:
  /// post(Checked<SendRequest>) through the extended interface (PostInterface::extended): one
  /// batch of one request.
  void post_extended(const SendRequest& request) const;
  template <typename Native>
  [[nodiscard]] static std::optional<std::uint64_t> wr_id_of(const Native* rejected) noexcept {
    return rejected == nullptr ? std::nullopt : std::optional<std::uint64_t>(rejected->wr_id);
  }

  std::unique_ptr<detail::QueuePairCore> core_;
  Endpoint remote_;
};

}  // namespace ibv
