// SPDX-License-Identifier: MIT
// PeerRemoteMemoryRegion: its text form, and tagging the regions gathered from every rank.
#include "ibv/multi_channel/peer_remote_memory_region.hpp"

namespace ibv {

std::string PeerRemoteMemoryRegion::to_string() const {
  return "peer " + std::to_string(peer_) + ": " + region_.to_string();
}

std::vector<PeerRemoteMemoryRegion> tag_with_ranks(const std::vector<RemoteMemoryRegion>& regions) {
  std::vector<PeerRemoteMemoryRegion> tagged;
  tagged.reserve(regions.size());
  for (std::size_t rank = 0; rank < regions.size(); ++rank) {
    tagged.emplace_back(static_cast<std::uint32_t>(rank), regions[rank]);
  }
  return tagged;
}

}  // namespace ibv
