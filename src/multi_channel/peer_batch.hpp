// SPDX-License-Identifier: MIT
// Private: the checks that every MultiChannel call makes on the peers it addresses, and the
// posting of batches (scatter, gather, multicast) shared by the three styles of posting.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "ibv/multi_channel/multi_channel.hpp"

namespace ibv::detail {

/// The channel to `peer`; throws ibv::Error (invalid_argument) naming `operation` when `peer` is
/// the MultiChannel's own rank or not below its world size.
Channel& peer_channel(MultiChannel& channels, std::uint32_t peer, std::string_view operation);
/// peer_channel(), and also throws unless `region` belongs to `peer`.
Channel& peer_channel(MultiChannel& channels, std::uint32_t peer,
                      const PeerRemoteMemoryRegion& region, std::string_view operation);

/// Why a region of `owner` can not be used for `peer` ("belongs to peer 2, not to peer 3 ...").
[[nodiscard]] std::string foreign_region_problem(std::uint32_t peer, std::uint32_t owner);

/// Receives each request of a batch as it is posted, with its peer.
using BatchSink = std::function<void(std::uint32_t peer, PendingWork work)>;

// Each checks every element first (naming the first bad one, "sends[2]: ..."), then posts them
// in order, handing each PendingWork to `sink`.
void post_batch(MultiChannel& channels, std::span<const PeerSend> sends, PostOptions options,
                std::string_view operation, const BatchSink& sink);
void post_batch(MultiChannel& channels, std::span<const PeerReceive> receives,
                std::string_view operation, const BatchSink& sink);
void post_batch(MultiChannel& channels, std::span<const PeerWrite> writes, PostOptions options,
                std::string_view operation, const BatchSink& sink);
void post_batch(MultiChannel& channels, std::span<const PeerRead> reads, PostOptions options,
                std::string_view operation, const BatchSink& sink);
/// `peers` must not name a rank twice.
void post_multicast(MultiChannel& channels, std::span<const std::uint32_t> peers,
                    std::span<const GatherElement> data, PostOptions options,
                    std::string_view operation, const BatchSink& sink);

}  // namespace ibv::detail
