// The requests of MultiChannel calls that address several peers at once: one element per peer
// of a scatter send, gather receive, scatter write or gather read.
#pragma once

#include <cstdint>
#include <span>

#include "ibv/multi_channel/peer_remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

/// One message of a scatter send: `data` goes to `peer`.
struct PeerSend {
  std::uint32_t peer = 0;
  std::span<const GatherElement> data;
};

/// One receive of a gather receive: the next message from `peer` lands in `into`.
struct PeerReceive {
  std::uint32_t peer = 0;
  std::span<const ScatterElement> into;
};

/// One RDMA write of a scatter write: `data` is written to `destination`, which must belong
/// to `peer`.
struct PeerWrite {
  std::uint32_t peer = 0;
  std::span<const GatherElement> data;
  PeerRemoteMemoryRegion destination;
};

/// One RDMA read of a gather read: `source`, which must belong to `peer`, is read into `into`.
struct PeerRead {
  std::uint32_t peer = 0;
  std::span<const ScatterElement> into;
  PeerRemoteMemoryRegion source;
};

}  // namespace ibv
