// SPDX-License-Identifier: MIT
// What one rank of a Node tells the others before the handshake. PeerEndpoint: what it sends
// one peer (the endpoint of the queue pair meant for it, and the region its barrier signals land
// in), so that a rank receives O(world size) bytes. NodeEndpoint: everything at once (every queue
// pair), the same value for every peer, for exchanges that can only all-gather.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/remote_memory_region.hpp"

namespace ibv::net {

/// The out-of-band address of one rank of a Node. The same value goes to every peer: peer p
/// connects its queue pair for this rank to queue_pairs[p], and RDMA-writes its barrier
/// signals into `barrier`. A plain value with a binary form for the exchanger (ibv::net::Wire
/// picks up to_bytes() / from_bytes()).
struct NodeEndpoint;

/// What one rank of a Node sends one peer before the handshake (Bootstrap::all_to_all): the
/// peer connects its queue pair for `rank` to `queue_pair` and RDMA-writes its barrier signals
/// into `barrier`. A plain value with a binary form (ibv::net::Wire picks up to_bytes() /
/// from_bytes()).
struct PeerEndpoint {
  /// Version byte that starts the binary form.
  static constexpr std::uint8_t kWireVersion = 1;
  /// Bytes of the binary form: version (1), reserved (3), rank (4), world size (4), queue pair
  /// (Endpoint::kWireSize), barrier region (RemoteMemoryRegion::kWireSize). Big-endian.
  static constexpr std::size_t kWireSize = 12 + Endpoint::kWireSize + RemoteMemoryRegion::kWireSize;

  std::uint32_t rank = 0;        ///< The rank that sent it.
  std::uint32_t world_size = 0;  ///< The number of ranks that rank believes in.
  Endpoint queue_pair;           ///< The sender's queue pair for the receiving peer.
  RemoteMemoryRegion barrier;    ///< The sender's barrier slots.

  /// The binary form: kWireSize bytes.
  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  /// Parses to_bytes(). Throws ibv::Error (invalid_argument) naming what is wrong: another
  /// size, an unknown version, non-zero reserved bytes, a rank not below the world size, an
  /// invalid endpoint or region.
  [[nodiscard]] static PeerEndpoint from_bytes(std::span<const std::byte> bytes);

  friend bool operator==(const PeerEndpoint&, const PeerEndpoint&) = default;
};

/// What one rank of a Node sends every other rank at once (PreparedNode::endpoint()): its
/// rank, world size and barrier slots, and a queue pair endpoint for each peer. An all-gather
/// of these connects the whole world; for_peer() cuts out the PeerEndpoint one peer needs.
struct NodeEndpoint {
  /// Version byte that starts the binary form.
  static constexpr std::uint8_t kWireVersion = 1;
  /// Bytes of the binary form before the queue pairs: version (1), reserved (3), rank (4),
  /// world size (4), barrier region (RemoteMemoryRegion::kWireSize); then world_size endpoints
  /// of Endpoint::kWireSize bytes each. Integers big-endian.
  static constexpr std::size_t kHeaderSize = 12 + RemoteMemoryRegion::kWireSize;

  std::uint32_t rank = 0;        ///< The rank that sent it.
  std::uint32_t world_size = 0;  ///< The number of ranks that rank believes in.
  /// One per rank: queue_pairs[p] is the queue pair meant for peer p. The entry at `rank` is a
  /// default Endpoint (there is no queue pair to oneself).
  std::vector<Endpoint> queue_pairs;
  /// The rank's barrier slots (remote-writable, an array of 64-bit counters).
  RemoteMemoryRegion barrier;

  /// The binary form: kHeaderSize bytes, then world_size endpoints.
  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  /// Parses to_bytes(). Throws ibv::Error (invalid_argument) naming what is wrong: a size that
  /// does not match the world size, an unknown version, non-zero reserved bytes, a rank not
  /// below the world size, an invalid endpoint.
  [[nodiscard]] static NodeEndpoint from_bytes(std::span<const std::byte> bytes);

  /// The part of it meant for `peer` (its queue_pairs[peer]). Throws ibv::Error
  /// (invalid_argument) when queue_pairs has no entry for `peer`.
  [[nodiscard]] PeerEndpoint for_peer(std::uint32_t peer) const;

  friend bool operator==(const NodeEndpoint&, const NodeEndpoint&) = default;
};

}  // namespace ibv::net
