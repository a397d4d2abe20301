// SPDX-License-Identifier: MIT
// Unreliable-datagram queue pairs: a UdQueuePairBuilder drives the QP to RTS at build (UD needs
// no peer), and the UdQueuePair posts checked sends that name their destination and receives
// that start with the 40-byte GRH area.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/port.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"
#include "ibv/verbs/ud_address.hpp"
#include "ibv/verbs/ud_queue_pair_settings.hpp"
#include "ibv/verbs/ud_send_request.hpp"
#include "ibv/verbs/work_request.hpp"

struct ibv_qp;

namespace ibv {

class UdQueuePair;

/// Collects the settings of a UD queue pair (UdQueuePairSettings: meaning, default, bounds) and
/// builds it: build() checks them against the device, creates the QP and drives it
/// RESET -> INIT (P_Key index, port, Q_Key) -> RTR -> RTS (send PSN), so it is ready to send
/// and receive at once. Errors name the setting that does not fit.
///
///     ibv::UdQueuePair qp = ibv::UdQueuePairBuilder(pd, cq, cq).qkey(ibv::QKey(0x1234)).build();
///     publish(qp.address());
class UdQueuePairBuilder {
 public:
  /// A builder with the default UdQueuePairSettings; completions of sends go to `send_cq`, of
  /// receives to `recv_cq` (they may be the same). The QP keeps all three alive.
  UdQueuePairBuilder(ProtectionDomain pd, CompletionQueue send_cq, CompletionQueue recv_cq);

  /// Sets UdQueuePairSettings::port (checked in build()).
  UdQueuePairBuilder& port(PortNumber port) noexcept;
  /// Sets UdQueuePairSettings::gid_index (checked in build()).
  UdQueuePairBuilder& gid_index(std::uint32_t index) noexcept;
  /// Sets UdQueuePairSettings::qkey.
  UdQueuePairBuilder& qkey(QKey qkey) noexcept;
  /// Sets UdQueuePairSettings::pkey_index (checked in build()).
  UdQueuePairBuilder& pkey_index(std::uint16_t index) noexcept;
  /// Sets UdQueuePairSettings::max_send_wr (checked in build()).
  UdQueuePairBuilder& max_send_wr(QueueDepth depth) noexcept;
  /// Sets UdQueuePairSettings::max_recv_wr (checked in build()).
  UdQueuePairBuilder& max_recv_wr(QueueDepth depth) noexcept;
  /// Sets UdQueuePairSettings::max_send_sge (checked in build()).
  UdQueuePairBuilder& max_send_sge(SgeCount count) noexcept;
  /// Sets UdQueuePairSettings::max_recv_sge (checked in build()).
  UdQueuePairBuilder& max_recv_sge(SgeCount count) noexcept;
  /// Sets UdQueuePairSettings::max_inline_data: exactly this much, or build() fails.
  UdQueuePairBuilder& max_inline_data(InlineSize bytes) noexcept;
  /// Sets UdQueuePairSettings::send_psn.
  UdQueuePairBuilder& send_psn(Psn psn) noexcept;
  /// All settings at once.
  UdQueuePairBuilder& settings(const UdQueuePairSettings& settings) noexcept;
  /// Takes the QP's receives from `srq`; max_recv_wr / max_recv_sge are then ignored and
  /// posting a receive to the QP throws ibv::Error (state). build() rejects an SRQ of another
  /// protection domain.
  UdQueuePairBuilder& shared_receive_queue(SharedReceiveQueue srq) noexcept;

  /// The settings as set so far.
  [[nodiscard]] const UdQueuePairSettings& settings() const noexcept { return settings_; }

  /// Checks the settings against the device, creates the QP and moves it to RTS. Throws
  /// ibv::Error naming the setting that does not fit (invalid_argument / not_found), or the
  /// verb that failed.
  [[nodiscard]] UdQueuePair build() const;

 private:
  ProtectionDomain pd_;
  CompletionQueue send_cq_;
  CompletionQueue recv_cq_;
  UdQueuePairSettings settings_;
  std::optional<SharedReceiveQueue> srq_;
};

namespace detail {
/// What a UD queue pair owns: the QP and the objects it keeps alive, and its resolved settings.
struct UdQueuePairCore {
  ProtectionDomain pd;
  CompletionQueue send_cq;
  CompletionQueue recv_cq;
  UdQueuePairSettings settings;  // optionals resolved by build()
  PortAttributes port;
  std::uint32_t gid_index = 0;
  Gid gid;
  std::uint32_t max_inline_data = 0;  // what the device granted
  std::optional<SharedReceiveQueue> srq;
  std::unique_ptr<ibv_qp, QueuePairDestroyer> qp;  // declared last: destroyed first
};
}  // namespace detail

/// An unreliable-datagram queue pair in RTS: one queue pair that sends to and receives from any
/// number of peers. Move-only; destroying it destroys the QP (receives still posted are
/// dropped), after which its PD and CQs live on only as long as other users hold them.
///
/// The UD contract (docs/datagrams.md): a datagram is at most one packet (max_message_size(),
/// the port's active MTU), delivered at most once, possibly not at all (no acknowledgement:
/// a datagram that finds no receive posted, or carries a Q_Key the receiver does not accept, is
/// dropped without a completion on either side), and in order between two queue pairs on one
/// path only as far as the network keeps it. Every receive buffer starts with 40 bytes for the
/// global route header (UdReceived reads it). A send's completion says the datagram left, not
/// that it arrived.
///
/// Posting checks every request first and throws ibv::Error (invalid_argument) naming it: see
/// check(). Completions arrive in the CQs given at build time.
class UdQueuePair {
 public:
  /// Wraps what UdQueuePairBuilder::build() made (in RTS).
  explicit UdQueuePair(std::unique_ptr<detail::UdQueuePairCore> core) noexcept;

  /// What a peer needs to send here: QPN, Q_Key, LID, GID (at the QP's GID index), MTU.
  [[nodiscard]] UdAddress address() const;

  /// Posts one send after check().
  void post_send(UdSendRequest& request) const;
  /// Posts several sends with one doorbell (linked in place, no allocation). All are checked
  /// before any is posted; if the device rejects one, the error names its wr_id and the ones
  /// before it are posted.
  void post_send(std::span<UdSendRequest> requests) const;
  /// Posts one receive after check(ReceiveRequest).
  void post_receive(ReceiveRequest& request) const;
  /// Posts several receives with one doorbell; as post_send(span).
  void post_receive(std::span<ReceiveRequest> requests) const;

  /// The checks post_send() makes, without posting: throws ibv::Error (invalid_argument) naming
  /// the request (wr_id) and what does not fit: more elements than max_send_sge, more bytes than
  /// max_message_size() (the MTU: a UD datagram is one packet), inline data beyond
  /// max_inline_data, a remote QPN above 24 bits, a remote Q_Key with bit 31 set, an address
  /// handle of another protection domain than the QP's, an element in a memory region of
  /// another protection domain (as far as the library knows).
  void check(const UdSendRequest& request) const;
  /// The checks post_receive() makes: more elements than max_recv_sge, room for fewer than the
  /// 40 bytes of the GRH area, an element on another protection domain; ibv::Error (state) when
  /// the QP takes its receives from a shared receive queue (post them there; they too need the
  /// 40 bytes, which the SharedReceiveQueue does not know to check).
  void check(const ReceiveRequest& request) const;

  /// The local QP number.
  [[nodiscard]] std::uint32_t qp_number() const noexcept;
  /// The Q_Key it accepts.
  [[nodiscard]] QKey qkey() const noexcept { return core_->settings.qkey; }
  /// The largest datagram it sends or receives (payload, without the GRH area): the port's
  /// active MTU.
  [[nodiscard]] std::uint32_t max_message_size() const noexcept {
    return core_->port.active_mtu.bytes();
  }
  /// The settings with every optional resolved.
  [[nodiscard]] const UdQueuePairSettings& settings() const noexcept { return core_->settings; }
  /// The attributes of its port, as queried at build.
  [[nodiscard]] const PortAttributes& port() const noexcept { return core_->port; }
  /// Inline bytes the device granted.
  [[nodiscard]] std::uint32_t max_inline_data() const noexcept { return core_->max_inline_data; }
  /// The GID index its address uses.
  [[nodiscard]] std::uint32_t gid_index() const noexcept { return core_->gid_index; }
  /// The protection domain it was created on.
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return core_->pd; }
  /// The completion queue of its sends.
  [[nodiscard]] const CompletionQueue& send_cq() const noexcept { return core_->send_cq; }
  /// The completion queue of its receives.
  [[nodiscard]] const CompletionQueue& recv_cq() const noexcept { return core_->recv_cq; }
  /// The shared receive queue it takes receives from, or null.
  [[nodiscard]] const SharedReceiveQueue* shared_receive_queue() const noexcept {
    return core_->srq ? &*core_->srq : nullptr;
  }
  /// Moves the QP to the error state: outstanding requests complete as work_request_flushed
  /// and the device touches none of their buffers afterwards. Throws ibv::Error when it fails.
  void move_to_error() const;
  /// The current state as the device reports it ("RTS", "ERR", ...), for diagnostics.
  [[nodiscard]] std::string query_state() const;

  /// The libibverbs QP (IBV_QPT_UD), for verbs this library does not wrap (multicast attach);
  /// it stays owned by this object.
  [[nodiscard]] ibv_qp* native_handle() const noexcept { return core_->qp.get(); }
  /// The same as native_handle(), named as the other verbs objects name it.
  [[nodiscard]] ibv_qp* native() const noexcept { return core_->qp.get(); }

 private:
  std::unique_ptr<detail::UdQueuePairCore> core_;
};

}  // namespace ibv
