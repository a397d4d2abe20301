// Peer checks and batch posting of MultiChannel: everything is checked before the first post.
#include "multi_channel/peer_batch.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "ibv/verbs/error.hpp"

namespace ibv::detail {
namespace {

std::string element(std::string_view batch, std::size_t index) {
  return std::string(batch) + "[" + std::to_string(index) + "]";
}

/// Empty if `peer` is a peer of `channels`, else what is wrong with it.
std::string peer_problem(const MultiChannel& channels, std::uint32_t peer) {
  if (peer == channels.rank()) {
    return "peer " + std::to_string(peer) +
           " is this rank itself: a MultiChannel has no channel to its own rank";
  }
  if (peer >= channels.world_size()) {
    return "peer " + std::to_string(peer) + " is not a rank: the world size is " +
           std::to_string(channels.world_size());
  }
  return {};
}

std::string owner_problem(std::uint32_t peer, const PeerRemoteMemoryRegion& region) {
  if (region.peer() == peer) return {};
  return "the remote region belongs to peer " + std::to_string(region.peer()) + ", not to peer " +
         std::to_string(peer) + " (its rkey and addresses mean nothing on peer " +
         std::to_string(peer) + "'s device)";
}

void check(std::string_view operation, const std::string& where, const std::string& problem) {
  if (!problem.empty()) {
    throw_invalid_argument(operation, where, problem + "; nothing was posted");
  }
}

}  // namespace

Channel& peer_channel(MultiChannel& channels, std::uint32_t peer, std::string_view operation) {
  check(operation, "peer", peer_problem(channels, peer));
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
    check(operation, element("sends", i), peer_problem(channels, sends[i].peer));
  }
  for (const auto& send : sends) {
    sink(send.peer, channels.channel(send.peer).post_send(send.data, options));
  }
}

void post_batch(MultiChannel& channels, std::span<const PeerReceive> receives,
                std::string_view operation, const BatchSink& sink) {
  for (std::size_t i = 0; i < receives.size(); ++i) {
    check(operation, element("receives", i), peer_problem(channels, receives[i].peer));
  }
  for (const auto& receive : receives) {
    sink(receive.peer, channels.channel(receive.peer).post_receive(receive.into));
  }
}

void post_batch(MultiChannel& channels, std::span<const PeerWrite> writes, PostOptions options,
                std::string_view operation, const BatchSink& sink) {
  for (std::size_t i = 0; i < writes.size(); ++i) {
    check(operation, element("writes", i), peer_problem(channels, writes[i].peer));
    check(operation, element("writes", i), owner_problem(writes[i].peer, writes[i].destination));
  }
  for (const auto& write : writes) {
    sink(write.peer,
         channels.channel(write.peer).post_write(write.data, write.destination.region(), options));
  }
}

void post_batch(MultiChannel& channels, std::span<const PeerRead> reads, PostOptions options,
                std::string_view operation, const BatchSink& sink) {
  for (std::size_t i = 0; i < reads.size(); ++i) {
    check(operation, element("reads", i), peer_problem(channels, reads[i].peer));
    check(operation, element("reads", i), owner_problem(reads[i].peer, reads[i].source));
  }
  for (const auto& read : reads) {
    sink(read.peer,
         channels.channel(read.peer).post_read(read.into, read.source.region(), options));
  }
}

void post_multicast(MultiChannel& channels, std::span<const std::uint32_t> peers,
                    std::span<const GatherElement> data, PostOptions options,
                    std::string_view operation, const BatchSink& sink) {
  std::vector<bool> seen(channels.world_size(), false);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const std::uint32_t peer = peers[i];
    check(operation, element("peers", i), peer_problem(channels, peer));
    if (seen[peer]) {
      check(operation, element("peers", i),
            "peer " + std::to_string(peer) + " is listed twice (a multicast sends once to each)");
    }
    seen[peer] = true;
  }
  for (const std::uint32_t peer : peers) {
    sink(peer, channels.channel(peer).post_send(data, options));
  }
}

}  // namespace ibv::detail
