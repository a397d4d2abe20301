// SPDX-License-Identifier: MIT
// Peer checks and batch posting of MultiChannel: everything is checked before the first post.
#include "multi_channel/peer_batch.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "channel/channel_core.hpp"
#include "ibv/error.hpp"

namespace ibv::detail {
namespace {

std::string element(std::string_view batch, std::size_t index) {
  return std::string(batch) + "[" + std::to_string(index) + "]";
}

/// Empty if `peer` is a peer of `channels`, else what is wrong with it (after its name).
std::string peer_problem(const MultiChannel& channels, std::uint32_t peer) {
  if (peer == channels.rank()) {
    return "is this rank itself: a MultiChannel has no channel to its own rank";
  }
  if (peer >= channels.world_size()) {
    return "is not a rank: the world size is " + std::to_string(channels.world_size()) +
           " (ranks 0.." + std::to_string(channels.world_size() - 1) + ")";
  }
  return {};
}

std::string owner_problem(std::uint32_t peer, const PeerRemoteMemoryRegion& region) {
  if (region.peer() == peer) return {};
  return foreign_region_problem(peer, region.peer());
}

void check(std::string_view operation, const std::string& where, const std::string& problem) {
  if (!problem.empty()) {
    throw_invalid_argument(operation, where, problem + "; nothing was posted");
  }
}

/// Checks the peer of element `index` of `batch` ("sends[2].peer 7 is not a rank ...").
void check_peer(std::string_view operation, const MultiChannel& channels, std::string_view batch,
                std::size_t index, std::uint32_t peer) {
  check(operation, element(batch, index) + ".peer " + std::to_string(peer),
        peer_problem(channels, peer));
}

/// Runs the queue pair's own checks of element `index` (QueuePair::check) before anything of
/// the batch is posted, naming the element.
template <typename Request>
void check_request(std::string_view operation, MultiChannel& channels, std::string_view batch,
                   std::size_t index, std::uint32_t peer, const Request& request) {
  try {
    channels.channel(peer).queue_pair().check(request);
  } catch (const Error& error) {
    throw_invalid_argument(operation, element(batch, index),
                           "(to peer " + std::to_string(peer) + ") does not fit its queue pair: " +
                               error.what() + "; nothing was posted");
  }
}

/// `request` as the channel to `peer` would post it with `options` (inline or not).
SendRequest with_options(SendRequest request, PostOptions options, const MultiChannel& channels,
                         std::uint32_t peer) {
  apply_inline(request, options.inline_data, channels.channel(peer).queue_pair().max_inline_data());
  return request;
}

}  // namespace

std::string foreign_region_problem(std::uint32_t peer, std::uint32_t owner) {
  return "belongs to peer " + std::to_string(owner) + ", not to peer " + std::to_string(peer) +
         " (its rkey and addresses mean nothing on peer " + std::to_string(peer) + "'s device)";
}

Channel& peer_channel(MultiChannel& channels, std::uint32_t peer, std::string_view operation) {
  check(operation, "peer " + std::to_string(peer), peer_problem(channels, peer));
  return channels.channel(peer);
}

Channel& peer_channel(MultiChannel& channels, std::uint32_t peer,
                      const PeerRemoteMemoryRegion& region, std::string_view operation) {
  Channel& channel = peer_channel(channels, peer, operation);
  check(operation, "remote region", owner_problem(peer, region));
  return channel;
}

void post_batch(MultiChannel& channels, std::span<const PeerSend> sends, PostOptions options,
                std::string_view operation, const BatchSink& sink) {
  for (std::size_t i = 0; i < sends.size(); ++i) {
    check_peer(operation, channels, "sends", i, sends[i].peer);
    check_request(
        operation, channels, "sends", i, sends[i].peer,
        with_options(SendRequest::send(0, sends[i].data), options, channels, sends[i].peer));
  }
  for (const auto& send : sends) {
    sink(send.peer, channels.channel(send.peer).post_send(send.data, options));
  }
}

void post_batch(MultiChannel& channels, std::span<const PeerReceive> receives,
                std::string_view operation, const BatchSink& sink) {
  for (std::size_t i = 0; i < receives.size(); ++i) {
    check_peer(operation, channels, "receives", i, receives[i].peer);
    check_request(operation, channels, "receives", i, receives[i].peer,
                  ReceiveRequest(0, receives[i].into));
  }
  for (const auto& receive : receives) {
    sink(receive.peer, channels.channel(receive.peer).post_receive(receive.into));
  }
}

void post_batch(MultiChannel& channels, std::span<const PeerWrite> writes, PostOptions options,
                std::string_view operation, const BatchSink& sink) {
  for (std::size_t i = 0; i < writes.size(); ++i) {
    check_peer(operation, channels, "writes", i, writes[i].peer);
    check(operation, element("writes", i) + ".destination",
          owner_problem(writes[i].peer, writes[i].destination));
    check_request(
        operation, channels, "writes", i, writes[i].peer,
        with_options(SendRequest::write(0, writes[i].data, writes[i].destination.region()), options,
                     channels, writes[i].peer));
  }
  for (const auto& write : writes) {
    sink(write.peer,
         channels.channel(write.peer).post_write(write.data, write.destination.region(), options));
  }
}

void post_batch(MultiChannel& channels, std::span<const PeerRead> reads, PostOptions options,
                std::string_view operation, const BatchSink& sink) {
  for (std::size_t i = 0; i < reads.size(); ++i) {
    check_peer(operation, channels, "reads", i, reads[i].peer);
    check(operation, element("reads", i) + ".source",
          owner_problem(reads[i].peer, reads[i].source));
    check_request(operation, channels, "reads", i, reads[i].peer,
                  with_options(SendRequest::read(0, reads[i].into, reads[i].source.region()),
                               options, channels, reads[i].peer));
  }
  for (const auto& read : reads) {
    sink(read.peer, channels.channel(read.peer).post_read(read.into, read.source.region(),
                                                          {.signaled = options.signaled}));
  }
}

void post_multicast(MultiChannel& channels, std::span<const std::uint32_t> peers,
                    std::span<const GatherElement> data, PostOptions options,
                    std::string_view operation, const BatchSink& sink) {
  std::vector<bool> seen(channels.world_size(), false);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const std::uint32_t peer = peers[i];
    const std::string where = element("peers", i) + " (peer " + std::to_string(peer) + ")";
    check(operation, where, peer_problem(channels, peer));
    if (seen[peer]) check(operation, where, "is listed twice (a multicast sends once to each)");
    seen[peer] = true;
    check_request(operation, channels, "peers", i, peer,
                  with_options(SendRequest::send(0, data), options, channels, peer));
  }
  for (const std::uint32_t peer : peers) {
    sink(peer, channels.channel(peer).post_send(data, options));
  }
}

}  // namespace ibv::detail
