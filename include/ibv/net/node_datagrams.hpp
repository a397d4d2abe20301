// SPDX-License-Identifier: MIT
// NodeDatagrams: a Node rank's unreliable-datagram endpoint (opt-in: NodeBuilder::datagrams()),
// with every rank's address from the Node's own bootstrap exchange, so that small control
// messages go to any rank by its number and arrive with the sender's rank.
//
//   ibv::net::Node node = ibv::net::NodeBuilder(pd, config, rank)
//                             .datagrams(ibv::DatagramSettings{})
//                             .build()
//                             .connect(bootstrap);
//   ibv::net::NodeDatagrams& datagrams = node.datagrams();
//   datagrams.send_to(0, std::as_bytes(std::span(status)));     // to rank 0
//   if (auto got = datagrams.receive(std::chrono::milliseconds(100))) {
//     use(got->rank, got->message.data());                      // from got->rank
//   }
//
// What UD delivers and does not (loss, ordering, sizes, Q_Key): docs/datagrams.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "ibv/datagram/datagram_endpoint.hpp"
#include "ibv/datagram/datagram_header.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/ud_address.hpp"

namespace ibv::net {

class PreparedNode;

/// One datagram a Node rank received, with the rank that sent it. `message` lends a buffer of
/// the endpoint's receive pool until it is released or destroyed (see DatagramMessage).
struct RankDatagram {
  std::uint32_t rank = 0;   ///< The sending rank (this one's own rank for a datagram to itself).
  DatagramMessage message;  ///< Payload, sequence number, the gap it closed.
};

/// The datagram endpoint of one Node rank (Node::datagrams()): a DatagramEndpoint whose peers
/// are the ranks of the Node, addressed by rank.
///
/// - Each rank's UdAddress came in the Node's bootstrap exchange (in its PeerEndpoint or
///   NodeEndpoint): no extra round. Every rank has one, or the handshake failed.
/// - send_to() / post_to() copy the payload, behind the DatagramEndpoint's header, into a
///   library buffer; the limits, waits and errors are DatagramEndpoint::send()'s and post()'s.
///   A payload must fit one packet: max_payload(rank).
/// - A rank may send to itself: the datagram goes through the device's loopback like any
///   other, takes a receive buffer and is counted like any other sender's.
/// - receive() gives the next datagram with the sender's rank, found from its source queue
///   pair number and GID (or LID without a global route), which the network fills in and a
///   sender cannot forge into another rank's; no header bytes are spent on it. A datagram from
///   a queue pair that is no rank's (a stray sender with the same Q_Key) is dropped and counted
///   (unknown_sender_datagrams()).
/// - Loss is counted per sending rank (counts()); nothing is retransmitted. A datagram that
///   finds no receive buffer posted is dropped by the device and shows up as a gap.
///
/// Move-only; not thread-safe (one thread at a time, as the Node). Lives inside its Node.
class NodeDatagrams {
 public:
  /// Takes over the endpoint; the moved-from object may only be destroyed or assigned to.
  NodeDatagrams(NodeDatagrams&&) noexcept;
  /// Releases this endpoint and takes over `other`'s.
  NodeDatagrams& operator=(NodeDatagrams&&) noexcept;
  NodeDatagrams(const NodeDatagrams&) = delete;
  NodeDatagrams& operator=(const NodeDatagrams&) = delete;
  ~NodeDatagrams();

  /// This rank.
  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
  /// The number of ranks, this one included.
  [[nodiscard]] std::uint32_t world_size() const noexcept {
    return static_cast<std::uint32_t>(addresses_.size());
  }
  /// The datagram address of `rank` (this rank's own included). Throws ibv::Error
  /// (invalid_argument) when `rank` is not below world_size() (test:
  /// `NodeDatagrams.SizesAndRanksAreCheckedBeforeAnythingIsPosted`).
  [[nodiscard]] const UdAddress& address(std::uint32_t rank) const;
  /// The largest payload a datagram to `rank` carries: the smaller path MTU of the two ranks,
  /// minus DatagramHeader::kSize. Throws as address().
  [[nodiscard]] std::uint32_t max_payload(std::uint32_t rank) const;
  /// The largest payload that goes to every rank: the smallest of max_payload(r).
  [[nodiscard]] std::uint32_t max_payload() const noexcept { return max_payload_all_; }

  /// Sends `payload` to `rank` and waits for the send's completion (which says it left, not
  /// that it arrived). Throws ibv::Error: invalid_argument for a rank not below world_size()
  /// or a payload over max_payload(rank), before anything is posted (test:
  /// `NodeDatagrams.SizesAndRanksAreCheckedBeforeAnythingIsPosted`); otherwise as
  /// DatagramEndpoint::send().
  void send_to(std::uint32_t rank, std::span<const std::byte> payload);
  /// Posts the send and returns without waiting for its completion (the payload is copied).
  /// Checks and waits as DatagramEndpoint::post().
  void post_to(std::uint32_t rank, std::span<const std::byte> payload);
  /// Waits until every posted send has completed (DatagramEndpoint::flush()).
  void flush(Duration timeout);

  /// The next datagram from a rank, waiting at most `timeout` (positive, else ibv::Error
  /// invalid_argument; test: `NodeDatagrams.SizesAndRanksAreCheckedBeforeAnythingIsPosted`);
  /// nullopt when none arrived in time. Datagrams from queue pairs that are no rank's are dropped
  /// on the way (unknown_sender_datagrams()).
  [[nodiscard]] std::optional<RankDatagram> receive(Duration timeout);
  /// The next datagram from a rank if one has arrived, without waiting.
  [[nodiscard]] std::optional<RankDatagram> try_receive();

  /// What was counted of `rank`'s datagrams to this one: received, lost, late (zeros if none
  /// came). Throws as address().
  [[nodiscard]] SequenceCounts counts(std::uint32_t rank) const;
  /// Datagrams with our header from a queue pair that is no rank's, dropped.
  [[nodiscard]] std::uint64_t unknown_sender_datagrams() const noexcept { return unknown_; }

  /// The DatagramEndpoint underneath (its foreign_datagrams(), receive_buffers_posted(), ...).
  /// Sending through it directly works and is counted as from this rank.
  [[nodiscard]] DatagramEndpoint& endpoint() noexcept { return endpoint_; }
  /// The DatagramEndpoint underneath.
  [[nodiscard]] const DatagramEndpoint& endpoint() const noexcept { return endpoint_; }

 private:
  friend class PreparedNode;  // PreparedNode::handshake() makes every NodeDatagrams
  friend class Node;          // Node::shrink() keeps the survivors' addresses
  /// The same endpoint addressing only `survivors` (ascending ranks, this one among them),
  /// numbered densely in that order.
  [[nodiscard]] NodeDatagrams regrouped(std::span<const std::uint32_t> survivors) &&;
  /// `addresses[r]` is rank r's address (this rank's own at `rank`).
  NodeDatagrams(DatagramEndpoint endpoint, std::uint32_t rank, std::vector<UdAddress> addresses);
  /// The rank `message` came from, or nullopt.
  [[nodiscard]] std::optional<std::uint32_t> rank_of(const DatagramMessage& message) const;
  /// `message` with its rank, or nullopt (counted, released) when it is from no rank.
  std::optional<RankDatagram> ranked(DatagramMessage message);
  /// The address of `rank`, or ibv::Error (invalid_argument) from `operation` (test:
  /// `NodeDatagrams.SizesAndRanksAreCheckedBeforeAnythingIsPosted`).
  [[nodiscard]] const UdAddress& checked(std::uint32_t rank, std::string_view operation) const;

  DatagramEndpoint endpoint_;
  std::uint32_t rank_;
  std::vector<UdAddress> addresses_;
  /// (QPN, rank), sorted: the ranks whose address has that QPN (one, unless two hosts' queue
  /// pairs happen to share a number; then the GID or LID tells them apart).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> by_qp_number_;
  std::uint32_t max_payload_all_ = 0;
  std::uint64_t unknown_ = 0;
};

}  // namespace ibv::net
