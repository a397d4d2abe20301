// SPDX-License-Identifier: MIT
// What one rank of a Node tells the others before the handshake. PeerEndpoint: what it sends
// one peer (the endpoint of the queue pair meant for it, and the region its barrier signals land
// in), so that a rank receives O(world size) bytes. NodeEndpoint: everything at once (every queue
// pair), the same value for every peer, for exchanges that can only all-gather. Both carry the
// rank's datagram address when its Node has datagrams (NodeBuilder::datagrams()), and its control
// plane's addresses when it has one (a control queue pair per peer and a control block).
//
// Wire versions (both forms alike):
// - version 1: neither a datagram address nor a control part. Written whenever there is
//   neither, so such a Node sends exactly the bytes it always did (and still talks to a peer
//   that only knows version 1).
// - version 2: version 1's layout with its first reserved byte used for flags. Flag bit 0: a
//   UdAddress (UdAddress::kWireSize bytes) follows. Flag bit 1: a control part follows, after
//   the address when there is one. PeerEndpoint: [version 1's 60 bytes][address][control queue
//   pair (Endpoint)][control block (RemoteMemoryRegion)]. NodeEndpoint: [header][address]
//   [control block][queue pairs][control queue pairs, world_size Endpoints]. Written only when
//   there is an address or a control part. Unknown flag bits are refused, and so is version 2
//   with no flag (that value's form is version 1: one form per value).
// A parser of this version reads both. A peer that does not know a flag it receives (an
// ibverbs-cpp that knows version 1 only, or only version 2's datagram flag) refuses the bytes,
// so a world where the ranks that opted in meet one that cannot fails at the handshake on both
// sides instead of hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/ud_address.hpp"

namespace ibv::net {

/// The out-of-band address of one rank of a Node. The same value goes to every peer: peer p
/// connects its queue pair for this rank to queue_pairs[p], and RDMA-writes its barrier
/// signals into `barrier`. A plain value with a binary form for the exchanger (ibv::net::Wire
/// picks up to_bytes() / from_bytes()).
struct NodeEndpoint;

/// The control plane's addresses one rank of a Node sends one peer (PeerEndpoint::control):
/// `queue_pair` is the endpoint of the sender's control queue pair meant for the receiving peer
/// (reliable connected, short retry timeouts), `block` the sender's control block (registered,
/// remote-accessible).
struct ControlEndpoint {
  Endpoint queue_pair;       ///< The sender's control queue pair for the receiving peer.
  RemoteMemoryRegion block;  ///< The sender's control block.

  friend bool operator==(const ControlEndpoint&, const ControlEndpoint&) = default;
};

/// The control plane's addresses of one rank for every peer at once (NodeEndpoint::control).
/// One optional of both rather than two optional fields, so that a control block without its
/// queue pairs, or the reverse, cannot be expressed.
struct NodeControl {
  /// One per rank: queue_pairs[p] is the control queue pair meant for peer p. The entry at the
  /// sender's rank is a default Endpoint.
  std::vector<Endpoint> queue_pairs;
  RemoteMemoryRegion block;  ///< The sender's control block.

  friend bool operator==(const NodeControl&, const NodeControl&) = default;
};

/// What one rank of a Node sends one peer before the handshake (Bootstrap::all_to_all): the
/// peer connects its queue pair for `rank` to `queue_pair` and RDMA-writes its barrier signals
/// into `barrier`; when the sender's Node has datagrams, `datagram` is its UD endpoint's
/// address, and when it has a control plane, `control` holds that plane's addresses. A plain
/// value with a binary form (ibv::net::Wire picks up to_bytes() / from_bytes()).
struct PeerEndpoint {
  /// Version byte of the binary form without a datagram address or a control part (the
  /// original form).
  static constexpr std::uint8_t kWireVersion = 1;
  /// Version byte of the binary form with a datagram address, a control part or both (the
  /// flags say which).
  static constexpr std::uint8_t kDatagramWireVersion = 2;
  /// Flag bit (byte 1 of a version 2 form): a UdAddress follows the fixed part.
  static constexpr std::uint8_t kHasDatagramFlag = 0x01;
  /// Flag bit (byte 1 of a version 2 form): a control part follows (after the UdAddress, if
  /// any).
  static constexpr std::uint8_t kHasControlFlag = 0x02;
  /// Bytes of the version 1 form: version (1), reserved (3), rank (4), world size (4), queue
  /// pair (Endpoint::kWireSize), barrier region (RemoteMemoryRegion::kWireSize). Big-endian.
  static constexpr std::size_t kWireSize = 12 + Endpoint::kWireSize + RemoteMemoryRegion::kWireSize;
  /// Bytes of the form with a datagram address only: version 2 (1), flags (1), reserved (2),
  /// then as above, then the datagram address (UdAddress::kWireSize).
  static constexpr std::size_t kDatagramWireSize = kWireSize + UdAddress::kWireSize;
  /// Bytes the control part adds at the end of a version 2 form: the control queue pair
  /// (Endpoint::kWireSize), then the control block (RemoteMemoryRegion::kWireSize).
  static constexpr std::size_t kControlWireSize =
      Endpoint::kWireSize + RemoteMemoryRegion::kWireSize;

  std::uint32_t rank = 0;        ///< The rank that sent it.
  std::uint32_t world_size = 0;  ///< The number of ranks that rank believes in.
  Endpoint queue_pair;           ///< The sender's queue pair for the receiving peer.
  RemoteMemoryRegion barrier;    ///< The sender's barrier slots.
  /// The sender's datagram endpoint, when its Node has datagrams; every rank of a world must
  /// agree on having them (PreparedNode::handshake checks).
  std::optional<UdAddress> datagram;
  /// The sender's control queue pair for the receiving peer and its control block, when its
  /// Node has a control plane.
  std::optional<ControlEndpoint> control;

  /// The binary form: version 1 in kWireSize bytes without a datagram address or a control
  /// part; else version 2 in kWireSize bytes, plus UdAddress::kWireSize with an address, plus
  /// kControlWireSize with a control part.
  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  /// Parses to_bytes() of either version. Throws ibv::Error (invalid_argument) naming what is
  /// wrong: a size that does not fit the version and flags, an unknown version or flag,
  /// version 2 with no flag, non-zero reserved bytes, a rank not below the world size, an
  /// invalid endpoint, region, datagram address, control queue pair or control block (tests:
  /// `PeerEndpoint.RejectsMalformedBytes`, `PeerEndpoint.RejectsMalformedControlParts`).
  [[nodiscard]] static PeerEndpoint from_bytes(std::span<const std::byte> bytes);

  friend bool operator==(const PeerEndpoint&, const PeerEndpoint&) = default;
};

/// What one rank of a Node sends every other rank at once (PreparedNode::endpoint()): its
/// rank, world size and barrier slots, a queue pair endpoint for each peer, its datagram
/// address when its Node has datagrams, and its control plane's addresses when it has one. An
/// all-gather of these connects the whole world; for_peer() cuts out the PeerEndpoint one peer
/// needs.
struct NodeEndpoint {
  /// Version byte of the binary form without a datagram address or a control part (the
  /// original form).
  static constexpr std::uint8_t kWireVersion = 1;
  /// Version byte of the binary form with a datagram address, a control part or both (the
  /// flags say which).
  static constexpr std::uint8_t kDatagramWireVersion = 2;
  /// Flag bit (byte 1 of a version 2 form): a UdAddress follows the header.
  static constexpr std::uint8_t kHasDatagramFlag = PeerEndpoint::kHasDatagramFlag;
  /// Flag bit (byte 1 of a version 2 form): a control part follows (the control block after
  /// the header and the UdAddress, if any; the control queue pairs after the queue pairs).
  static constexpr std::uint8_t kHasControlFlag = PeerEndpoint::kHasControlFlag;
  /// Bytes of the version 1 form before the queue pairs: version (1), reserved (3), rank (4),
  /// world size (4), barrier region (RemoteMemoryRegion::kWireSize); then world_size endpoints
  /// of Endpoint::kWireSize bytes each. Integers big-endian. The version 2 form has flags in
  /// byte 1, then between this header and the endpoints the datagram address
  /// (UdAddress::kWireSize) and then the control block (kControlHeaderSize), each when its flag
  /// is set; with a control part, world_size control queue pair endpoints follow the queue
  /// pairs.
  static constexpr std::size_t kHeaderSize = 12 + RemoteMemoryRegion::kWireSize;
  /// Bytes the control part adds before the queue pairs (the control block); it adds
  /// world_size * Endpoint::kWireSize after them.
  static constexpr std::size_t kControlHeaderSize = RemoteMemoryRegion::kWireSize;

  std::uint32_t rank = 0;        ///< The rank that sent it.
  std::uint32_t world_size = 0;  ///< The number of ranks that rank believes in.
  /// One per rank: queue_pairs[p] is the queue pair meant for peer p. The entry at `rank` is a
  /// default Endpoint (there is no queue pair to oneself).
  std::vector<Endpoint> queue_pairs;
  /// The rank's barrier slots (remote-writable, an array of 64-bit counters).
  RemoteMemoryRegion barrier;
  /// The rank's datagram endpoint, when its Node has datagrams.
  std::optional<UdAddress> datagram;
  /// The rank's control block and control queue pairs (as many as queue_pairs), when its Node
  /// has a control plane.
  std::optional<NodeControl> control;

  /// The binary form: version 1 (kHeaderSize bytes, then world_size endpoints) without a
  /// datagram address or a control part; version 2 (the header, the address, the control
  /// block, the endpoints, the control endpoints: each part present by its flag) otherwise.
  /// Throws ibv::Error (invalid_argument) when `control` holds another number of queue pairs
  /// than queue_pairs (test: `NodeEndpoint.ToBytesRefusesControlQueuePairsOfAnotherCount`).
  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  /// Parses to_bytes() of either version. Throws ibv::Error (invalid_argument) naming what is
  /// wrong: a size that does not match the world size, version and flags, an unknown version
  /// or flag, version 2 with no flag, non-zero reserved bytes, a rank not below the world
  /// size, an invalid endpoint, datagram address, control block or control endpoint (tests:
  /// `NodeEndpoint.RejectsMalformedBytes`, `NodeEndpoint.RejectsMalformedVersionTwoBytes`,
  /// `NodeEndpoint.VersionTwoWithoutTheFlagIsRefused`,
  /// `NodeEndpoint.RejectsMalformedControlParts`).
  [[nodiscard]] static NodeEndpoint from_bytes(std::span<const std::byte> bytes);

  /// The part of it meant for `peer`: its queue_pairs[peer], the barrier slots, the datagram
  /// address, and with a control part ControlEndpoint{control->queue_pairs[peer],
  /// control->block}. Throws ibv::Error (invalid_argument) when queue_pairs, or the control
  /// part's queue pairs, have no entry for `peer` (test:
  /// `NodeEndpoint.ForPeerRefusesAPeerWithoutAnEntry`).
  [[nodiscard]] PeerEndpoint for_peer(std::uint32_t peer) const;

  friend bool operator==(const NodeEndpoint&, const NodeEndpoint&) = default;
};

}  // namespace ibv::net
