// SPDX-License-Identifier: MIT
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
  /// The rank to send to.
  std::uint32_t peer = 0;
  /// What to send, gathered in order.
  std::span<const GatherElement> data;
};

/// One receive of a gather receive: the next message from `peer` lands in `into`.
struct PeerReceive {
  /// The rank to receive from.
  std::uint32_t peer = 0;
  /// Where the message goes, scattered in order.
  std::span<const ScatterElement> into;
};

/// One RDMA write of a scatter write: `data` is written to `destination`, which must belong
/// to `peer`.
struct PeerWrite {
  /// The rank to write to.
  std::uint32_t peer = 0;
  /// What to write, gathered in order.
  std::span<const GatherElement> data;
  /// Where, in `peer`'s memory.
  PeerRemoteMemoryRegion destination;
};

/// One RDMA read of a gather read: `source`, which must belong to `peer`, is read into `into`.
struct PeerRead {
  /// The rank to read from.
  std::uint32_t peer = 0;
  /// Where the data goes locally, scattered in order.
  std::span<const ScatterElement> into;
  /// What to read, in `peer`'s memory.
  PeerRemoteMemoryRegion source;
};

}  // namespace ibv
