// SPDX-License-Identifier: MIT
// MultiChannel, its builder and prepared form: making one queue pair per peer and connecting
// them all (the peer-addressed calls are templates in the header; their checks are in
// peer_batch.cpp).
#include "ibv/multi_channel/multi_channel.hpp"

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>

#include "detail/moved_from.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv {

MultiChannelBuilder::MultiChannelBuilder(ProtectionDomain pd, std::uint32_t rank,
                                         std::uint32_t world_size)
    : channel_(std::move(pd)), rank_(rank), world_size_(world_size) {
  if (world_size == 0) {
    throw_invalid_argument("MultiChannelBuilder", "world_size", "is 0: a world has a rank");
  }
  if (rank >= world_size) {
    throw_invalid_argument("MultiChannelBuilder", "rank " + std::to_string(rank),
                           "is not below the world size " + std::to_string(world_size));
  }
}

MultiChannelBuilder& MultiChannelBuilder::settings(const ChannelSettings& settings) {
  channel_.settings(settings);
  return *this;
}

MultiChannelBuilder& MultiChannelBuilder::queue_pair(const QueuePairSettings& settings) noexcept {
  channel_.queue_pair(settings);
  return *this;
}

MultiChannelBuilder& MultiChannelBuilder::timeouts(const ChannelTimeouts& timeouts) noexcept {
  channel_.timeouts(timeouts);
  return *this;
}

MultiChannelBuilder& MultiChannelBuilder::completion_queue_size(int entries) noexcept {
  channel_.completion_queue_size(entries);
  return *this;
}

MultiChannelBuilder& MultiChannelBuilder::wait_mode(const WaitMode& mode) noexcept {
  channel_.wait_mode(mode);
  return *this;
}

MultiChannelBuilder& MultiChannelBuilder::completion_channel(const CompletionChannel& channel) {
  channel_.completion_channel(channel);
  return *this;
}

MultiChannelBuilder& MultiChannelBuilder::shared_receive_queue(SharedReceiveQueue srq) noexcept {
  channel_.shared_receive_queue(std::move(srq));
  return *this;
}

MultiChannelBuilder& MultiChannelBuilder::shared_receive_pool(SharedReceivePool pool) noexcept {
  channel_.shared_receive_pool(std::move(pool));
  return *this;
}

PreparedMultiChannel MultiChannelBuilder::build() const {
  // One queue pair and one completion queue per peer: a world the device can not hold is
  // rejected before the first is made (instead of failing, or exhausting memory, midway).
  const auto& context = channel_.protection_domain().context();
  const auto device = context.query_device();
  const std::uint64_t peers = world_size_ - 1;
  if (std::cmp_greater(peers, device.max_qp) || std::cmp_greater(peers, device.max_cq)) {
    throw_invalid_argument(
        "MultiChannelBuilder::build", "world_size " + std::to_string(world_size_),
        "needs " + std::to_string(peers) +
            " queue pairs and completion "
            "queues; " +
            context.name() + " offers at most max_qp " + std::to_string(device.max_qp) +
            ", max_cq " + std::to_string(device.max_cq));
  }
  // One completion channel for every peer's queue: one fd covers the whole MultiChannel.
  ChannelBuilder per_peer = channel_;
  if (!per_peer.settings().completion_channel && per_peer.settings().wait_mode.sleeps() &&
      peers > 0) {
    per_peer.completion_channel(CompletionChannel(context));
  }
  std::vector<std::optional<PreparedChannel>> channels(world_size_);
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    if (peer != rank_) channels[peer].emplace(per_peer.build());
  }
  return {channel_.protection_domain(), rank_, std::move(channels), channel_.settings().timeouts};
}

PreparedMultiChannel::PreparedMultiChannel(ProtectionDomain pd, std::uint32_t rank,
                                           std::vector<std::optional<PreparedChannel>> channels,
                                           ChannelTimeouts timeouts)
    : pd_(std::move(pd)), rank_(rank), channels_(std::move(channels)), timeouts_(timeouts) {}

namespace {
/// Throws for a `peer` that has no channel: this rank itself, or not below the world size.
[[noreturn]] void throw_no_channel(std::string_view operation, std::uint32_t peer,
                                   std::uint32_t rank, std::size_t world_size,
                                   std::string_view after = {}) {
  throw_invalid_argument(
      operation, "peer " + std::to_string(peer),
      (peer == rank ? std::string("is this rank itself (there is no channel to it)")
                    : "is not below the world size " + std::to_string(world_size)) +
          std::string(after));
}

/// A PreparedMultiChannel has at least one rank until handshake() takes its queue pairs.
void check_not_consumed(std::size_t ranks, std::string_view operation) {
  if (ranks == 0) {
    throw Error(ErrorKind::state, operation, EINVAL,
                "the PreparedMultiChannel was already handshaken (or moved from)");
  }
}
}  // namespace

Endpoint PreparedMultiChannel::endpoint_for(std::uint32_t peer) const {
  check_not_consumed(channels_.size(), "PreparedMultiChannel::endpoint_for");
  if (peer >= channels_.size() || !channels_[peer]) {
    throw_no_channel("PreparedMultiChannel::endpoint_for", peer, rank_, channels_.size());
  }
  return channels_[peer]->endpoint();
}

std::vector<std::optional<Endpoint>> PreparedMultiChannel::endpoints() const {
  check_not_consumed(channels_.size(), "PreparedMultiChannel::endpoints");
  std::vector<std::optional<Endpoint>> endpoints(channels_.size());
  for (std::size_t peer = 0; peer < channels_.size(); ++peer) {
    if (channels_[peer]) endpoints[peer] = channels_[peer]->endpoint();
  }
  return endpoints;
}

MultiChannel PreparedMultiChannel::handshake(std::span<const std::optional<Endpoint>> remote) && {
  constexpr std::string_view kOperation = "PreparedMultiChannel::handshake";
  check_not_consumed(channels_.size(), kOperation);
  if (remote.size() != channels_.size()) {
    throw_invalid_argument(
        kOperation, "remote endpoints",
        "has " + std::to_string(remote.size()) +
            " entries; it needs one per rank: " + std::to_string(channels_.size()));
  }
  for (std::size_t peer = 0; peer < channels_.size(); ++peer) {
    if (channels_[peer] && !remote[peer]) {
      throw_invalid_argument(
          kOperation, "remote[" + std::to_string(peer) + "]",
          "is missing: peer " + std::to_string(peer) + "'s endpoint is needed to connect to it");
    }
  }
  std::vector<std::optional<Channel>> connected(channels_.size());
  for (std::size_t peer = 0; peer < channels_.size(); ++peer) {
    if (channels_[peer]) {
      connected[peer].emplace(std::move(*channels_[peer]).handshake(*remote[peer]));
    }
  }
  channels_.clear();  // consumed: later calls say so instead of touching moved-from channels
  return {std::move(pd_), rank_, std::move(connected), timeouts_};
}

MultiChannel::MultiChannel(ProtectionDomain pd, std::uint32_t rank,
                           std::vector<std::optional<Channel>> channels, ChannelTimeouts timeouts)
    : pd_(std::move(pd)), rank_(rank), channels_(std::move(channels)), timeouts_(timeouts) {}

MultiChannel MultiChannel::regrouped(std::span<const std::uint32_t> ranks) && {
  std::vector<std::optional<Channel>> kept;
  kept.reserve(ranks.size());
  for (const std::uint32_t rank : ranks) kept.push_back(std::move(channels_.at(rank)));
  const auto rank =
      static_cast<std::uint32_t>(std::ranges::lower_bound(ranks, rank_) - ranks.begin());
  channels_.clear();  // the others' channels end here
  return {std::move(pd_), rank, std::move(kept), timeouts_};
}

std::vector<std::uint32_t> MultiChannel::peers() const {
  detail::check_channels_not_moved_from(world_size(), "MultiChannel::peers");
  std::vector<std::uint32_t> peers;
  peers.reserve(channels_.size());
  for (std::uint32_t peer = 0; peer < world_size(); ++peer) {
    if (peer != rank_) peers.push_back(peer);
  }
  return peers;
}

void MultiChannel::throw_no_channel(std::uint32_t peer, const char* call) const {
  detail::check_channels_not_moved_from(world_size(),
                                        call == nullptr ? "MultiChannel::channel" : call);
  if (call == nullptr)
    ibv::throw_no_channel("MultiChannel::channel", peer, rank_, channels_.size());
  ibv::throw_no_channel(call, peer, rank_, channels_.size(), "; nothing was posted");
}

std::optional<std::uint32_t> MultiChannel::peer_of(const WorkCompletion& completion) const {
  detail::check_channels_not_moved_from(world_size(), "MultiChannel::peer_of");
  for (std::uint32_t peer = 0; peer < world_size(); ++peer) {
    if (channels_[peer] && channels_[peer]->queue_pair().qp_number() == completion.qp_number()) {
      return peer;
    }
  }
  return std::nullopt;
}

namespace {
/// Throws the state Error of the completion-fd calls of a MultiChannel.
[[noreturn]] void throw_no_shared_fd(std::string_view operation, std::string_view why) {
  throw Error(ErrorKind::state, operation, EINVAL, std::string(why),
              "build it with a WaitMode that blocks, or give MultiChannelBuilder a "
              "CompletionChannel: then every peer's queue shares one");
}
}  // namespace

int MultiChannel::completion_fd() const {
  constexpr std::string_view kOperation = "MultiChannel::completion_fd";
  detail::check_channels_not_moved_from(world_size(), kOperation);
  std::optional<int> fd;
  for (const auto& channel : channels_) {
    if (!channel) continue;
    const auto& attached = channel->completion_channel();
    if (!attached) throw_no_shared_fd(kOperation, "a peer's channel has no completion channel");
    if (fd && *fd != attached->fd()) {
      throw_no_shared_fd(kOperation, "the peers' channels do not share one completion channel");
    }
    fd = attached->fd();
  }
  if (!fd) throw_no_shared_fd(kOperation, "the MultiChannel has no peers");
  return *fd;
}

void MultiChannel::arm_completion_fd() {
  detail::check_channels_not_moved_from(world_size(), "MultiChannel::arm_completion_fd");
  (void)completion_fd();  // throws unless one channel covers every peer
  for (auto& channel : channels_) {
    if (channel) channel->arm_completion_fd();
  }
}

std::size_t MultiChannel::consume_completion_events() {
  detail::check_channels_not_moved_from(world_size(), "MultiChannel::consume_completion_events");
  (void)completion_fd();
  for (auto& channel : channels_) {
    if (channel) return channel->consume_completion_events();  // the one shared channel
  }
  return 0;
}

}  // namespace ibv
