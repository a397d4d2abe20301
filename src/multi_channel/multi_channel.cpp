// SPDX-License-Identifier: MIT
// MultiChannel, its builder and prepared form: making one queue pair per peer, connecting them
// all, and the blocking and unpolled peer-addressed calls.
#include "ibv/multi_channel/multi_channel.hpp"

#include <cerrno>
#include <string>
#include <utility>

#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "multi_channel/peer_batch.hpp"

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
                                   std::uint32_t rank, std::size_t world_size) {
  throw_invalid_argument(operation, "peer " + std::to_string(peer),
                         peer == rank
                             ? "is this rank itself (there is no channel to it)"
                             : "is not below the world size " + std::to_string(world_size));
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

std::vector<std::uint32_t> MultiChannel::peers() const {
  std::vector<std::uint32_t> peers;
  peers.reserve(channels_.size());
  for (std::uint32_t peer = 0; peer < world_size(); ++peer) {
    if (peer != rank_) peers.push_back(peer);
  }
  return peers;
}

void MultiChannel::throw_no_channel(std::uint32_t peer) const {
  ibv::throw_no_channel("MultiChannel::channel", peer, rank_, channels_.size());
}

void MultiChannel::throw_foreign_region(const char* call, std::uint32_t peer, std::uint32_t owner) {
  throw_invalid_argument(call,
                         "the remote region of the operation for peer " + std::to_string(peer),
                         detail::foreign_region_problem(peer, owner) + "; nothing was posted");
}

std::optional<std::uint32_t> MultiChannel::peer_of(const WorkCompletion& completion) const {
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
  (void)completion_fd();  // throws unless one channel covers every peer
  for (auto& channel : channels_) {
    if (channel) channel->arm_completion_fd();
  }
}

std::size_t MultiChannel::consume_completion_events() {
  (void)completion_fd();
  for (auto& channel : channels_) {
    if (channel) return channel->consume_completion_events();  // the one shared channel
  }
  return 0;
}

// --- blocking, one peer -------------------------------------------------------------------------

WorkCompletion MultiChannel::send(std::uint32_t peer, std::span<const GatherElement> data,
                                  Timeout timeout) {
  return detail::peer_channel(*this, peer, "MultiChannel::send").send(data, timeout);
}

WorkCompletion MultiChannel::send_with_immediate(std::uint32_t peer,
                                                 std::span<const GatherElement> data,
                                                 std::uint32_t immediate, Timeout timeout) {
  return detail::peer_channel(*this, peer, "MultiChannel::send_with_immediate")
      .send_with_immediate(data, immediate, timeout);
}

WorkCompletion MultiChannel::receive(std::uint32_t peer, std::span<const ScatterElement> into,
                                     Timeout timeout) {
  return detail::peer_channel(*this, peer, "MultiChannel::receive").receive(into, timeout);
}

WorkCompletion MultiChannel::write(std::uint32_t peer, std::span<const GatherElement> data,
                                   const PeerRemoteMemoryRegion& destination, Timeout timeout) {
  return detail::peer_channel(*this, peer, destination, "MultiChannel::write")
      .write(data, destination.region(), timeout);
}

WorkCompletion MultiChannel::write_with_immediate(std::uint32_t peer,
                                                  std::span<const GatherElement> data,
                                                  const PeerRemoteMemoryRegion& destination,
                                                  std::uint32_t immediate, Timeout timeout) {
  return detail::peer_channel(*this, peer, destination, "MultiChannel::write_with_immediate")
      .write_with_immediate(data, destination.region(), immediate, timeout);
}

WorkCompletion MultiChannel::read(std::uint32_t peer, std::span<const ScatterElement> into,
                                  const PeerRemoteMemoryRegion& source, Timeout timeout) {
  return detail::peer_channel(*this, peer, source, "MultiChannel::read")
      .read(into, source.region(), timeout);
}

WorkCompletion MultiChannel::fetch_add(std::uint32_t peer, const ScatterElement& result,
                                       const PeerRemoteMemoryRegion& target, std::uint64_t add,
                                       Timeout timeout) {
  return detail::peer_channel(*this, peer, target, "MultiChannel::fetch_add")
      .fetch_add(result, target.region(), add, timeout);
}

WorkCompletion MultiChannel::compare_swap(std::uint32_t peer, const ScatterElement& result,
                                          const PeerRemoteMemoryRegion& target,
                                          std::uint64_t expected, std::uint64_t desired,
                                          Timeout timeout) {
  return detail::peer_channel(*this, peer, target, "MultiChannel::compare_swap")
      .compare_swap(result, target.region(), expected, desired, timeout);
}

// --- blocking, several peers --------------------------------------------------------------------

namespace {

/// Runs `post` (which posts a batch into the sink), then waits for the whole batch.
template <typename PostBatch>
std::vector<WorkCompletion> complete_batch(const MultiChannel& channels, std::string_view operation,
                                           MultiChannel::Timeout timeout, PostBatch&& post) {
  detail::check_positive_timeout(timeout, operation, "nothing was posted");
  detail::ScopeWork work;  // if posting throws midway, its destructor waits for what was posted
  post([&work](std::uint32_t peer, PendingWork posted) { work.keep(std::move(posted), peer); });
  return work.complete_all(operation, timeout.value_or(channels.timeouts().operation));
}

}  // namespace

std::vector<WorkCompletion> MultiChannel::scatter_send(std::span<const PeerSend> sends,
                                                       Timeout timeout) {
  constexpr std::string_view kOperation = "MultiChannel::scatter_send";
  return complete_batch(*this, kOperation, timeout, [&](const detail::BatchSink& sink) {
    detail::post_batch(*this, sends, {}, kOperation, sink);
  });
}

std::vector<WorkCompletion> MultiChannel::gather_receive(std::span<const PeerReceive> receives,
                                                         Timeout timeout) {
  constexpr std::string_view kOperation = "MultiChannel::gather_receive";
  return complete_batch(*this, kOperation, timeout, [&](const detail::BatchSink& sink) {
    detail::post_batch(*this, receives, kOperation, sink);
  });
}

std::vector<WorkCompletion> MultiChannel::scatter_write(std::span<const PeerWrite> writes,
                                                        Timeout timeout) {
  constexpr std::string_view kOperation = "MultiChannel::scatter_write";
  return complete_batch(*this, kOperation, timeout, [&](const detail::BatchSink& sink) {
    detail::post_batch(*this, writes, {}, kOperation, sink);
  });
}

std::vector<WorkCompletion> MultiChannel::gather_read(std::span<const PeerRead> reads,
                                                      Timeout timeout) {
  constexpr std::string_view kOperation = "MultiChannel::gather_read";
  return complete_batch(*this, kOperation, timeout, [&](const detail::BatchSink& sink) {
    detail::post_batch(*this, reads, {}, kOperation, sink);
  });
}

std::vector<WorkCompletion> MultiChannel::multicast_send(std::span<const std::uint32_t> peers,
                                                         std::span<const GatherElement> data,
                                                         Timeout timeout) {
  constexpr std::string_view kOperation = "MultiChannel::multicast_send";
  return complete_batch(*this, kOperation, timeout, [&](const detail::BatchSink& sink) {
    detail::post_multicast(*this, peers, data, {}, kOperation, sink);
  });
}

// --- unpolled, one peer -------------------------------------------------------------------------

PendingWork MultiChannel::post_send(std::uint32_t peer, std::span<const GatherElement> data,
                                    PostOptions options) {
  return detail::peer_channel(*this, peer, "MultiChannel::post_send").post_send(data, options);
}

PendingWork MultiChannel::post_send_with_immediate(std::uint32_t peer,
                                                   std::span<const GatherElement> data,
                                                   std::uint32_t immediate, PostOptions options) {
  return detail::peer_channel(*this, peer, "MultiChannel::post_send_with_immediate")
      .post_send_with_immediate(data, immediate, options);
}

PendingWork MultiChannel::post_receive(std::uint32_t peer, std::span<const ScatterElement> into) {
  return detail::peer_channel(*this, peer, "MultiChannel::post_receive").post_receive(into);
}

PendingWork MultiChannel::post_write(std::uint32_t peer, std::span<const GatherElement> data,
                                     const PeerRemoteMemoryRegion& destination,
                                     PostOptions options) {
  return detail::peer_channel(*this, peer, destination, "MultiChannel::post_write")
      .post_write(data, destination.region(), options);
}

PendingWork MultiChannel::post_write_with_immediate(std::uint32_t peer,
                                                    std::span<const GatherElement> data,
                                                    const PeerRemoteMemoryRegion& destination,
                                                    std::uint32_t immediate, PostOptions options) {
  return detail::peer_channel(*this, peer, destination, "MultiChannel::post_write_with_immediate")
      .post_write_with_immediate(data, destination.region(), immediate, options);
}

PendingWork MultiChannel::post_read(std::uint32_t peer, std::span<const ScatterElement> into,
                                    const PeerRemoteMemoryRegion& source,
                                    SignalingOptions options) {
  return detail::peer_channel(*this, peer, source, "MultiChannel::post_read")
      .post_read(into, source.region(), options);
}

PendingWork MultiChannel::post_fetch_add(std::uint32_t peer, const ScatterElement& result,
                                         const PeerRemoteMemoryRegion& target, std::uint64_t add,
                                         SignalingOptions options) {
  return detail::peer_channel(*this, peer, target, "MultiChannel::post_fetch_add")
      .post_fetch_add(result, target.region(), add, options);
}

PendingWork MultiChannel::post_compare_swap(std::uint32_t peer, const ScatterElement& result,
                                            const PeerRemoteMemoryRegion& target,
                                            std::uint64_t expected, std::uint64_t desired,
                                            SignalingOptions options) {
  return detail::peer_channel(*this, peer, target, "MultiChannel::post_compare_swap")
      .post_compare_swap(result, target.region(), expected, desired, options);
}

// --- unpolled, several peers --------------------------------------------------------------------

namespace {
detail::BatchSink append_to(std::vector<PendingWork>& handles) {
  return [&handles](std::uint32_t, PendingWork posted) { handles.push_back(std::move(posted)); };
}
}  // namespace

std::vector<PendingWork> MultiChannel::post_scatter_send(std::span<const PeerSend> sends,
                                                         PostOptions options) {
  std::vector<PendingWork> handles;
  handles.reserve(sends.size());
  detail::post_batch(*this, sends, options, "MultiChannel::post_scatter_send", append_to(handles));
  return handles;
}

std::vector<PendingWork> MultiChannel::post_gather_receive(std::span<const PeerReceive> receives) {
  std::vector<PendingWork> handles;
  handles.reserve(receives.size());
  detail::post_batch(*this, receives, "MultiChannel::post_gather_receive", append_to(handles));
  return handles;
}

std::vector<PendingWork> MultiChannel::post_scatter_write(std::span<const PeerWrite> writes,
                                                          PostOptions options) {
  std::vector<PendingWork> handles;
  handles.reserve(writes.size());
  detail::post_batch(*this, writes, options, "MultiChannel::post_scatter_write",
                     append_to(handles));
  return handles;
}

std::vector<PendingWork> MultiChannel::post_gather_read(std::span<const PeerRead> reads,
                                                        SignalingOptions options) {
  std::vector<PendingWork> handles;
  handles.reserve(reads.size());
  detail::post_batch(*this, reads, detail::as_post_options(options),
                     "MultiChannel::post_gather_read", append_to(handles));
  return handles;
}

std::vector<PendingWork> MultiChannel::post_multicast_send(std::span<const std::uint32_t> peers,
                                                           std::span<const GatherElement> data,
                                                           PostOptions options) {
  std::vector<PendingWork> handles;
  handles.reserve(peers.size());
  detail::post_multicast(*this, peers, data, options, "MultiChannel::post_multicast_send",
                         append_to(handles));
  return handles;
}

}  // namespace ibv
