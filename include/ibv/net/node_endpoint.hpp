// NodeEndpoint: what one rank of a Node sends every other rank before the handshake: the
// endpoints of its queue pairs (one per peer) and the region its barrier signals land in.
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

  [[nodiscard]] std::vector<std::byte> to_bytes() const;
  /// Parses to_bytes(). Throws ibv::Error (invalid_argument) naming what is wrong: a size that
  /// does not match the world size, an unknown version, non-zero reserved bytes, a rank not
  /// below the world size, an invalid endpoint.
  [[nodiscard]] static NodeEndpoint from_bytes(std::span<const std::byte> bytes);

  friend bool operator==(const NodeEndpoint&, const NodeEndpoint&) = default;
};

}  // namespace ibv::net
