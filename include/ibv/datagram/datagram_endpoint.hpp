// SPDX-License-Identifier: MIT
// DatagramEndpoint: a safe unreliable-datagram endpoint over one UD queue pair. Peers by their
// UdAddress, address handles cached per destination, sends copied into library buffers and
// checked against the MTU, receives into a pool of library buffers lent to the caller, bounded
// waits, loss made visible by a per-sender sequence number, and multicast groups it joins.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/channel/wait_mode.hpp"
#include "ibv/cm/multicast_group.hpp"
#include "ibv/datagram/datagram_header.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/address_handle.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/ud_address.hpp"
#include "ibv/verbs/ud_queue_pair.hpp"
#include "ibv/verbs/ud_received.hpp"

namespace ibv {

namespace detail {
struct DatagramCore;
}  // namespace detail

/// The settings of a DatagramEndpoint, with defaults. Checked when it is built (errors name
/// the setting): the counts at least 1 and within the device's queue depth, timeout positive,
/// the port, GID index and route fields as UdQueuePairSettings and AddressHandleSettings check
/// them.
struct DatagramSettings {
  /// The UD queue pair's port.
  PortNumber port{};
  /// The GID index of its address and of the address handles it makes; default: the RoCE v2
  /// IPv4 entry.
  std::optional<std::uint32_t> gid_index;
  /// The Q_Key it accepts. Endpoints that talk to each other use the same one (a datagram with
  /// another is dropped by the receiver, and counted only as a gap in the sequence).
  QKey qkey = QKey::default_value();
  /// Receive buffers in the pool (each the path MTU plus the 40-byte GRH area): how many
  /// datagrams may wait, polled or not, before the next ones are dropped.
  std::uint32_t receive_buffers = 64;
  /// Send buffers: how many sends may be in flight (posted, not completed) at once.
  std::uint32_t send_buffers = 64;
  /// How waits run: spin, block on a completion channel, or spin then block.
  WaitMode wait_mode = WaitMode::spin();
  /// The bound of send()'s wait for its completion and of post()'s wait for a free send
  /// buffer (positive).
  Duration timeout = std::chrono::seconds(10);
  /// Route of the datagrams it sends (service level, traffic class, hop limit).
  std::uint8_t service_level = 0;
  std::uint8_t traffic_class = 0;  ///< See AddressHandleSettings::traffic_class.
  std::uint8_t hop_limit = 64;     ///< See AddressHandleSettings::hop_limit.
};

/// What a DatagramEndpoint counted of one sender: who (its queue pair number and GID or LID)
/// and its SequenceCounts.
struct DatagramSenderCounts {
  UdSource sender;        ///< The sending queue pair.
  SequenceCounts counts;  ///< Received, lost, late.
};

/// One received datagram, in a buffer of the endpoint's receive pool lent to the caller: its
/// payload stays valid and unchanged until the message is released (release(), or its
/// destruction), which posts the buffer again. Move-only. While the caller holds messages, the
/// pool has fewer buffers posted, and datagrams that find none are dropped (and counted as a
/// gap by the next one that arrives). A message may outlive its endpoint: it keeps the
/// endpoint's buffers and queue pair alive until it is released.
class DatagramMessage {
 public:
  /// Takes over `other`'s buffer; `other` holds none afterwards.
  DatagramMessage(DatagramMessage&& other) noexcept;
  /// Releases this message's buffer, then takes over `other`'s.
  DatagramMessage& operator=(DatagramMessage&& other) noexcept;
  DatagramMessage(const DatagramMessage&) = delete;
  DatagramMessage& operator=(const DatagramMessage&) = delete;
  ~DatagramMessage();

  /// The payload (past the GRH area and the endpoint's header).
  [[nodiscard]] std::span<const std::byte> data() const noexcept { return data_; }
  /// Who sent it.
  [[nodiscard]] const UdSource& source() const noexcept { return source_; }
  /// The sender's address for a reply (DatagramEndpoint::send): its QPN and GID or LID, with
  /// this endpoint's Q_Key and MTU (endpoints that talk share a Q_Key).
  [[nodiscard]] const UdAddress& sender() const noexcept { return sender_; }
  /// Its sequence number in the sender's stream to this endpoint.
  [[nodiscard]] std::uint64_t sequence() const noexcept { return sequence_; }
  /// Datagrams of the same sender found lost just before this one (the gap it closed).
  [[nodiscard]] std::uint64_t lost_before() const noexcept { return lost_before_; }
  /// Posts the buffer back to the pool now (once; later calls do nothing).
  void release() noexcept;

 private:
  friend struct detail::DatagramCore;  // makes them
  DatagramMessage() = default;

  std::shared_ptr<detail::DatagramCore> core_;
  std::uint32_t buffer_ = 0;
  std::span<const std::byte> data_;
  UdSource source_;
  UdAddress sender_;
  std::uint64_t sequence_ = 0;
  std::uint64_t lost_before_ = 0;
};

/// A safe endpoint for unreliable datagrams over one UD queue pair (docs/datagrams.md).
///
/// - Peers are named by their UdAddress (exchanged out of band, like an Endpoint). The first
///   send to a destination makes its address handle and keeps it, with the destination's next
///   sequence number, for the endpoint's life: a handle is never destroyed while a send that
///   uses it may be pending (the no-orphans rule of UD).
/// - send() copies the payload, behind a DatagramHeader, into a library-owned send buffer,
///   posts it and waits for its completion (at most settings.timeout); post() returns once
///   posted (waiting, bounded, only for a free send buffer), and flush() waits for every posted
///   send. The caller's buffer is never referred to after the call returns.
/// - A payload must fit one packet: max_payload(to) is the smaller of the two sides' path MTU
///   minus the header; a longer one is refused with ibv::Error (invalid_argument) before
///   anything is posted.
/// - receive() lends the caller a buffer of the pool (DatagramMessage), or gives nothing when
///   no datagram arrived within its timeout. Datagrams without our header are dropped and
///   counted (foreign_datagrams()).
/// - Loss is visible, not prevented: the receiver counts per sender the gaps in the sequence
///   (counts()). A send's completion says the datagram left, not that it arrived.
///
/// Not thread-safe: one thread uses an endpoint at a time (messages may be released from any
/// thread). Move-only; a moved-from endpoint may only be destroyed or assigned to.
class DatagramEndpoint {
 public:
  /// Builds the endpoint on `pd`: its completion queues (and completion channel when the wait
  /// mode sleeps), UD queue pair, the registered send and receive buffers, all receives posted.
  /// Throws ibv::Error naming the setting that does not fit, before creating anything it can.
  explicit DatagramEndpoint(const ProtectionDomain& pd, const DatagramSettings& settings = {});
  /// Takes over the endpoint; the moved-from one may only be destroyed or assigned to.
  DatagramEndpoint(DatagramEndpoint&&) noexcept;
  /// Destroys this endpoint (as the destructor does), then takes over `other`.
  DatagramEndpoint& operator=(DatagramEndpoint&& other) noexcept;
  DatagramEndpoint(const DatagramEndpoint&) = delete;
  DatagramEndpoint& operator=(const DatagramEndpoint&) = delete;
  ~DatagramEndpoint();

  /// This endpoint's address, for its peers.
  [[nodiscard]] UdAddress address() const;
  /// The largest payload it sends or receives: its path MTU minus DatagramHeader::kSize.
  [[nodiscard]] std::uint32_t max_payload() const noexcept;
  /// The largest payload it may send to `to`: the smaller path MTU of the two, minus the
  /// header.
  [[nodiscard]] std::uint32_t max_payload(const UdAddress& to) const noexcept;

  /// Sends `payload` to `to` and waits for the send's completion (settings.timeout). Throws
  /// ibv::Error: invalid_argument before posting for a payload over max_payload(to) or a bad
  /// address (QPN over 24 bits; Q_Key checked by UdAddress); the address handle's errors; a
  /// WorkError when the send fails; timeout when no completion came in time (the endpoint is
  /// then unusable: its queue pair is moved to error, so the device releases the buffer).
  void send(const UdAddress& to, std::span<const std::byte> payload);
  /// Posts the send and returns without waiting for its completion: the payload is copied.
  /// Waits (settings.timeout, then ibv::Error timeout) only while every send buffer is in
  /// flight. Checks as send().
  void post(const UdAddress& to, std::span<const std::byte> payload);
  /// Waits until every posted send has completed (at most `timeout`; ibv::Error timeout, as
  /// send()). Throws a WorkError for a failed one.
  void flush(Duration timeout);

  /// The next datagram, waiting at most `timeout` (positive, else ibv::Error invalid_argument);
  /// nullopt when none arrived in time.
  [[nodiscard]] std::optional<DatagramMessage> receive(Duration timeout);
  /// The next datagram if one has arrived, without waiting.
  [[nodiscard]] std::optional<DatagramMessage> try_receive();

  /// What it counted of each sender it received from, in no particular order.
  [[nodiscard]] std::vector<DatagramSenderCounts> counts() const;
  /// The counts of one sender, by its address (QPN and GID, or LID): zeros if none came.
  [[nodiscard]] SequenceCounts counts(const UdAddress& sender) const;
  /// Datagrams that arrived without a DatagramHeader of ours, and were dropped.
  [[nodiscard]] std::uint64_t foreign_datagrams() const noexcept;
  /// Receive buffers posted now (the pool's size minus the messages held or awaiting
  /// release).
  [[nodiscard]] std::uint32_t receive_buffers_posted() const noexcept;
  /// Sends posted and not completed yet, as far as the endpoint has polled.
  [[nodiscard]] std::uint32_t sends_in_flight() const noexcept;
  /// Address handles in its cache: one per route (GID, or LID) it has sent to, kept for the
  /// endpoint's life.
  [[nodiscard]] std::size_t cached_destinations() const noexcept;

  /// Joins the IP multicast group `group` on the RDMA device of `local_address` through rdma_cm
  /// (a MulticastGroup, held by the endpoint) and attaches the endpoint's queue pair to it:
  /// datagrams sent to the group then arrive through receive() like any other, their loss
  /// counted per sender. Returns the group's address: send() and post() to it reach every
  /// member, this endpoint too (multicast loopback). With MulticastOptions::send_only nothing is
  /// attached (no IGMP membership; the address is still given). The endpoint's Q_Key must be the
  /// group's (rdma_cm's is MulticastGroup::kRdmaCmQkey: build the endpoint with it, and so its
  /// unicast peers too). Throws ibv::Error: as MulticastGroup's constructor; state when `group`
  /// is joined already; invalid_argument for a group on another device or port, or with another
  /// Q_Key (nothing stays joined then). Left by leave(), and by the endpoint's destruction.
  UdAddress join(std::string_view group, std::string_view local_address,
                 const MulticastOptions& options = {});
  /// Detaches the queue pair from `group` (as join() was given it) and leaves it; false when it
  /// was not joined. Throws ibv::Error when rdma_leave_multicast fails (left either way).
  bool leave(std::string_view group);
  /// The groups joined, as join() was given them, in the order joined.
  [[nodiscard]] std::vector<std::string> groups() const;

  /// The UD queue pair underneath, for inspection (posting on it directly bypasses the
  /// endpoint's accounting).
  [[nodiscard]] const UdQueuePair& queue_pair() const noexcept;

 private:
  std::shared_ptr<detail::DatagramCore> core_;
};

}  // namespace ibv
