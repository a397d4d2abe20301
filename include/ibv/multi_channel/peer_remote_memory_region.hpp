// SPDX-License-Identifier: MIT
// PeerRemoteMemoryRegion: a remote memory region tagged with the peer (rank) it belongs to, so
// that a MultiChannel refuses to use it with any other peer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ibv/verbs/remote_memory_region.hpp"

namespace ibv {

/// A RemoteMemoryRegion of one peer of a MultiChannel. Its rkey and addresses mean something
/// only on that peer's device, so the MultiChannel's write and read calls check the tag: using
/// the region with another peer throws ibv::Error (invalid_argument) instead of writing into
/// whatever that peer has at the same address (test:
/// `MultiChannelTest.ARegionOfAnotherPeerIsRejectedAndNothingIsWritten`). Sub-regions keep the tag.
class PeerRemoteMemoryRegion {
 public:
  /// Tags `region` as `peer`'s (unchecked: the rank the region came from is the caller's).
  PeerRemoteMemoryRegion(std::uint32_t peer, RemoteMemoryRegion region) noexcept
      : peer_(peer), region_(region) {}

  /// The rank whose memory this is.
  [[nodiscard]] std::uint32_t peer() const noexcept { return peer_; }
  /// The region itself (address, length, rkey on the peer).
  [[nodiscard]] const RemoteMemoryRegion& region() const noexcept { return region_; }
  /// The region's length in bytes.
  [[nodiscard]] std::uint64_t length() const noexcept { return region_.length(); }

  /// See RemoteMemoryRegion: the same checked arithmetic, the same peer.
  [[nodiscard]] PeerRemoteMemoryRegion sub_region(std::uint64_t offset,
                                                  std::uint64_t length) const {
    return {peer_, region_.sub_region(offset, length)};
  }
  /// RemoteMemoryRegion::sub_region_from, tagged with the same peer.
  [[nodiscard]] PeerRemoteMemoryRegion sub_region_from(std::uint64_t offset) const {
    return {peer_, region_.sub_region_from(offset)};
  }
  /// RemoteMemoryRegion::element, tagged with the same peer.
  template <typename T>
  [[nodiscard]] PeerRemoteMemoryRegion element(std::uint64_t index) const {
    return {peer_, region_.element<T>(index)};
  }
  /// RemoteMemoryRegion::field, tagged with the same peer.
  template <typename S, typename F>
  [[nodiscard]] PeerRemoteMemoryRegion field(F S::*member) const {
    return {peer_, region_.field(member)};
  }

  /// "peer 3: remote MR 4096 B at 0x7f12.. rkey 0x1234".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const PeerRemoteMemoryRegion&,
                         const PeerRemoteMemoryRegion&) noexcept = default;

 private:
  std::uint32_t peer_;
  RemoteMemoryRegion region_;
};

/// Tags the regions gathered from every rank (index = rank, as an all-to-all exchange returns
/// them) with their ranks: result[r] == PeerRemoteMemoryRegion(r, regions[r]).
[[nodiscard]] std::vector<PeerRemoteMemoryRegion> tag_with_ranks(
    const std::vector<RemoteMemoryRegion>& regions);

}  // namespace ibv
