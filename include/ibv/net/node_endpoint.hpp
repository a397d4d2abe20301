// SPDX-License-Identifier: MIT
// What one rank of a Node tells the others before the handshake. PeerEndpoint: what it sends
// one peer (the endpoint of the queue pair meant for it, and the region its barrier signals land
// in), so that a rank receives O(world size) bytes. NodeEndpoint: everything at once (every queue
// pair), the same value for every peer, for exchanges that can only all-gather. Both carry the
// rank's datagram address when its Node has datagrams (NodeBuilder::datagrams()).
//
// Wire versions (both forms alike):
// - version 1: no datagram address. Written whenever there is none, so a Node without
//   datagrams sends exactly the bytes it always did (and still talks to a peer that only
//   knows version 1).
// - version 2: version 1's layout with its first reserved byte used for flags; flag bit 0 says
//   a UdAddress (UdAddress::kWireSize bytes) follows the fixed part. Written only when there
//   is a datagram address. Unknown flag bits are refused, and so is version 2 without flag
//   bit 0 (that value's form is version 1: one form per value).
// A parser of this version reads both. A version-1-only peer that receives version 2 refuses
// it ("version 2 is not 1"), so a world where the ranks that opted in meet one that cannot
// fails at the handshake on both sides instead of hanging.
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

/// What one rank of a Node sends one peer before the handshake (Bootstrap::all_to_all): the
/// peer connects its queue pair for `rank` to `queue_pair` and RDMA-writes its barrier signals
/// into `barrier`; when the sender's Node has datagrams, `datagram` is its UD endpoint's
/// address. A plain value with a binary form (ibv::net::Wire picks up to_bytes() /
/// from_bytes()).
struct PeerEndpoint {
  /// Version byte of the binary form without a datagram address (the original form).
  static constexpr std::uint8_t kWireVersion = 1;
  /// Version byte of the binary form with a datagram address.
  static constexpr std::uint8_t kDatagramWireVersion = 2;
  /// Flag bit (byte 1 of a version 2 form): a UdAddress follows the fixed part.
  static constexpr std::uint8_t kHasDatagramFlag = 0x01;
  /// Bytes of the binary form without a datagram address: version (1), reserved (3), rank (4),
  /// world size (4), queue pair (Endpoint::kWireSize), barrier region
  /// (RemoteMemoryRegion::kWireSize). Big-endian.
  static constexpr std::size_t kWireSize = 12 + Endpoint::kWireSize + RemoteMemoryRegion::kWireSize;
  /// Bytes of the binary form with one: version 2 (1), flags (1), reserved (2), then as above,
  /// then the datagram address (UdAddress::kWireSize).
  static constexpr std::size_t kDatagramWireSize = kWireSize + UdAddress::kWireSize;

  std::uint32_t rank = 0;        ///< The rank that sent it.
  std::uint32_t world_size = 0;  ///< The number of ranks that rank believes in.
  Endpoint queue_pair;           ///< The sender's queue pair for the receiving peer.
  RemoteMemoryRegion barrier;    ///< The sender's barrier slots.
  /// The sender's datagram endpoint, when its Node has datagrams; every rank of a world must
  /// agree on having them (PreparedNode::handshake checks).
  std::optional<UdAddress> datagram;

  /// The binary form: version 1 in kWireSize bytes without a datagram address, version 2 in
  /// kDatagramWireSize bytes with one.
  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  /// Parses to_bytes() of either version. Throws ibv::Error (invalid_argument) naming what is
  /// wrong: a size that does not fit the version and flags, an unknown version or flag,
  /// non-zero reserved bytes, a rank not below the world size, an invalid endpoint, region or
  /// datagram address (test: `PeerEndpoint.RejectsMalformedBytes`).
  [[nodiscard]] static PeerEndpoint from_bytes(std::span<const std::byte> bytes);

  friend bool operator==(const PeerEndpoint&, const PeerEndpoint&) = default;
};

/// What one rank of a Node sends every other rank at once (PreparedNode::endpoint()): its
/// rank, world size and barrier slots, a queue pair endpoint for each peer, and its datagram
/// address when its Node has datagrams. An all-gather of these connects the whole world;
/// for_peer() cuts out the PeerEndpoint one peer needs.
struct NodeEndpoint {
  /// Version byte of the binary form without a datagram address (the original form).
  static constexpr std::uint8_t kWireVersion = 1;
  /// Version byte of the binary form with a datagram address.
  static constexpr std::uint8_t kDatagramWireVersion = 2;
  /// Flag bit (byte 1 of a version 2 form): a UdAddress follows the header.
  static constexpr std::uint8_t kHasDatagramFlag = 0x01;
  /// Bytes of the version 1 form before the queue pairs: version (1), reserved (3), rank (4),
  /// world size (4), barrier region (RemoteMemoryRegion::kWireSize); then world_size endpoints
  /// of Endpoint::kWireSize bytes each. Integers big-endian. The version 2 form has flags in
  /// byte 1 and the datagram address (UdAddress::kWireSize) between this header and the
  /// endpoints.
  static constexpr std::size_t kHeaderSize = 12 + RemoteMemoryRegion::kWireSize;

  std::uint32_t rank = 0;        ///< The rank that sent it.
  std::uint32_t world_size = 0;  ///< The number of ranks that rank believes in.
  /// One per rank: queue_pairs[p] is the queue pair meant for peer p. The entry at `rank` is a
  /// default Endpoint (there is no queue pair to oneself).
  std::vector<Endpoint> queue_pairs;
  /// The rank's barrier slots (remote-writable, an array of 64-bit counters).
  RemoteMemoryRegion barrier;
  /// The rank's datagram endpoint, when its Node has datagrams.
  std::optional<UdAddress> datagram;

  /// The binary form: version 1 (kHeaderSize bytes, then world_size endpoints) without a
  /// datagram address; version 2 (the header, the address, the endpoints) with one.
  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  /// Parses to_bytes() of either version. Throws ibv::Error (invalid_argument) naming what is
  /// wrong: a size that does not match the world size, version and flags, an unknown version
  /// or flag, non-zero reserved bytes, a rank not below the world size, an invalid endpoint or
  /// datagram address (tests: `NodeEndpoint.RejectsMalformedBytes`,
  /// `NodeEndpoint.RejectsMalformedVersionTwoBytes`,
  /// `NodeEndpoint.VersionTwoWithoutTheFlagIsRefused`).
  [[nodiscard]] static NodeEndpoint from_bytes(std::span<const std::byte> bytes);

  /// The part of it meant for `peer` (its queue_pairs[peer], and the datagram address). Throws
  /// ibv::Error (invalid_argument) when queue_pairs has no entry for `peer` (untested:
  /// `invalid_argument`, no test asks for a peer outside the world).
  [[nodiscard]] PeerEndpoint for_peer(std::uint32_t peer) const;

  friend bool operator==(const NodeEndpoint&, const NodeEndpoint&) = default;
};

}  // namespace ibv::net
