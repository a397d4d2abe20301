// SPDX-License-Identifier: MIT
// MultiChannel: one Channel per peer, all on one protection domain (so one memory region serves
// every peer), with peer-addressed posting in the Channel's styles (execute, post, a scope's
// post, async) and post_all, which posts work to several peers at once (op::ToPeer).
//
// The model. A job has `world_size` ranks; this process is `rank`. MultiChannelBuilder makes
// one queue pair per other rank (PreparedMultiChannel). Every rank sends every other rank the
// endpoint of the queue pair meant for it (endpoint_for(peer)), out of band (ibv::net::Exchanger
// does this over TCP); handshake() takes the endpoints the peers meant for this rank and
// connects all the queue pairs. There is no channel from a rank to itself.
//
//   ibv::PreparedMultiChannel prepared = ibv::MultiChannelBuilder(pd, rank, world_size).build();
//   // ... send prepared.endpoint_for(p) to each peer p, receive theirs into remote[p] ...
//   ibv::MultiChannel channels = std::move(prepared).handshake(remote);
//   channels.scope([&](ibv::MultiChannelScope& s) {
//     s.post_all(ibv::op::to_each(std::array{1U, 2U, 3U}, ibv::op::Send{data}));
//   });  // returns once all three sends are done
//   });
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <ranges>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "ibv/channel/channel.hpp"
#include "ibv/multi_channel/multi_channel_scope.hpp"
#include "ibv/multi_channel/peer_message.hpp"
#include "ibv/multi_channel/peer_operation.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/protection_domain.hpp"

namespace ibv {

class PreparedMultiChannel;

/// Settings of a MultiChannel: this rank, the number of ranks, and what every per-peer Channel
/// gets (the settings of ChannelBuilder).
class MultiChannelBuilder {
 public:
  /// Throws ibv::Error (invalid_argument) when world_size is 0 or rank is not below it (test:
  /// `MultiChannelBuild.RejectsABadRankOrWorldSize`).
  MultiChannelBuilder(ProtectionDomain pd, std::uint32_t rank, std::uint32_t world_size);

  /// What every per-peer channel is built with (see ChannelBuilder; all at once).
  MultiChannelBuilder& settings(const ChannelSettings& settings);
  /// The queue pair settings of every channel (ChannelSettings::queue_pair).
  MultiChannelBuilder& queue_pair(const QueuePairSettings& settings) noexcept;
  /// The timeouts of every channel (ChannelSettings::timeouts); `operation` is also the
  /// default timeout of the MultiChannel's blocking calls and how long a scope waits for each
  /// request.
  MultiChannelBuilder& timeouts(const ChannelTimeouts& timeouts) noexcept;
  /// Entries of each channel's completion queue (ChannelSettings::completion_queue_size).
  MultiChannelBuilder& completion_queue_size(int entries) noexcept;
  /// How every per-peer channel waits (see wait_mode.hpp). Default: spin. With a mode that
  /// sleeps, all the per-peer completion queues share one completion channel (the one given
  /// to completion_channel(), or a new one), so one fd covers every peer.
  MultiChannelBuilder& wait_mode(const WaitMode& mode) noexcept;
  /// Attaches every per-peer completion queue to `channel` (also with WaitMode::spin: then
  /// completion_fd() is there for the caller's own event loop).
  MultiChannelBuilder& completion_channel(const CompletionChannel& channel);
  /// Every channel takes its receives from `srq` (ChannelSettings::shared_receive_queue):
  /// one queue of receives for all peers instead of one per peer.
  MultiChannelBuilder& shared_receive_queue(SharedReceiveQueue srq) noexcept;
  /// Every channel takes its receives from `pool` (ChannelSettings::shared_receive_pool).
  MultiChannelBuilder& shared_receive_pool(SharedReceivePool pool) noexcept;

  /// This rank, below world_size().
  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
  /// The number of ranks, this one included.
  [[nodiscard]] std::uint32_t world_size() const noexcept { return world_size_; }
  /// The protection domain every channel will be built on.
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept {
    return channel_.protection_domain();
  }
  /// What every per-peer channel will be built with.
  [[nodiscard]] const ChannelSettings& settings() const noexcept { return channel_.settings(); }

  /// Creates world_size - 1 channels' queue pairs and completion queues. Throws ibv::Error
  /// (invalid_argument) before creating any when world_size - 1 exceeds the device's max_qp or
  /// max_cq, or a channel setting does not fit (see ChannelBuilder::build; test:
  /// `BadInputDevice.MultiChannelAndNodeBuilders`).
  [[nodiscard]] PreparedMultiChannel build() const;

 private:
  ChannelBuilder channel_;
  std::uint32_t rank_;
  std::uint32_t world_size_;
};

/// The queue pairs of a MultiChannel, made but not connected.
class PreparedMultiChannel {
 public:
  /// `channels[p]` will connect to peer p; empty exactly at `rank` (what
  /// MultiChannelBuilder::build() makes).
  PreparedMultiChannel(ProtectionDomain pd, std::uint32_t rank,
                       std::vector<std::optional<PreparedChannel>> channels,
                       ChannelTimeouts timeouts);

  /// This rank.
  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
  /// The number of ranks, this one included.
  [[nodiscard]] std::uint32_t world_size() const noexcept {
    return static_cast<std::uint32_t>(channels_.size());
  }
  /// The endpoint of the queue pair that connects to `peer`: send it to that peer. Throws
  /// ibv::Error (invalid_argument) when `peer` is this rank or not below the world size (test:
  /// `MultiChannelBuild.EndpointsArePerPeerAndHandshakeChecksThemFirst`).
  [[nodiscard]] Endpoint endpoint_for(std::uint32_t peer) const;
  /// endpoint_for() of every rank, indexed by rank; this rank's own entry is nullopt.
  [[nodiscard]] std::vector<std::optional<Endpoint>> endpoints() const;

  /// Connects every queue pair. `remote[p]` is the endpoint peer p made for this rank (its
  /// endpoint_for(rank())); `remote` has world_size() entries, and this rank's own entry is
  /// ignored (it may be nullopt). Everything is checked before any queue pair changes state:
  /// a wrong size or a missing peer throws ibv::Error (invalid_argument) naming it (test:
  /// `MultiChannelBuild.EndpointsArePerPeerAndHandshakeChecksThemFirst`).
  [[nodiscard]] MultiChannel handshake(std::span<const std::optional<Endpoint>> remote) &&;

 private:
  ProtectionDomain pd_;
  std::uint32_t rank_;
  std::vector<std::optional<PreparedChannel>> channels_;  // index = peer; empty at rank_
  ChannelTimeouts timeouts_;
};

/// One connected Channel per peer, on one protection domain. Move-only; not thread-safe (as a
/// Channel: one thread at a time; the per-peer channels may be used from different threads
/// through channel(peer)).
///
/// Every call names its peer by rank. A peer that is this rank or not below the world size, or
/// a PeerRemoteMemoryRegion tagged with another peer than the one addressed, throws ibv::Error
/// (invalid_argument) before anything is posted; post_all checks all its elements first (the
/// peer, the region's tag, and the queue pair's own checks of each request, QueuePair::check),
/// so bad input never leaves half of it posted; errors name the element ("operations[1] ...";
/// tests: `BadInputMultiChannel.PeersRanksAndBatchesAreCheckedBeforeAnythingIsPosted`,
/// `MultiChannelTest.ARegionOfAnotherPeerIsRejectedAndNothingIsWritten`). The operations are the
/// Channel's (ibv/channel/operation.hpp), with the peer's memory named by a PeerRemoteMemoryRegion
/// (op::PeerWrite, ...: ibv/multi_channel/peer_operation.hpp).
///
/// - blocking, `execute(peer, operation)`: as Channel::execute on the peer's channel (a request
///   that does not complete in time is cancelled, and that peer's channel then refuses further
///   work).
/// - scoped (`scope`, `manual_scope`): see MultiChannelScope; its `post_all` of op::ToPeer
///   elements is the blocking form of work to several peers (failures come out as one
///   BatchError naming the peer of each).
/// - unpolled, `post(peer, operation)` and `post_all(operations)`: PendingWork handles (one per
///   element, in input order).
/// - coroutines: `ibv::async(channels, peer, operation)` (ibv/coro/async_multi_channel.hpp).
///
/// A moved-from MultiChannel (or Node) may be destroyed or assigned to; every call that needs a
/// channel or the peers throws ibv::Error (state) saying it was moved from (test:
/// `NodeMovedFrom.EveryCallThatNeedsItsChannelsOrBarrierThrowsState`), and its noexcept
/// getters answer without throwing (world_size() is 0 then).
///
/// Built on a shared receive queue or pool (MultiChannelBuilder), the per-peer channels post
/// no receives (see Channel); `receive_shared_any` / `receive_message_any` and their poll_
/// forms hand out the next message from any peer, saying which, visiting the peers in turn so
/// that a busy peer does not starve the others (each peer's own messages in arrival order).
class MultiChannel {
 public:
  /// A blocking call's timeout: unset means timeouts().operation; a set one must be positive.
  using Timeout = Channel::Timeout;

  /// `channels[p]` connects to peer p; empty exactly at `rank`. All on `pd`, all with
  /// `timeouts` (timeouts()).
  MultiChannel(ProtectionDomain pd, std::uint32_t rank,
               std::vector<std::optional<Channel>> channels, ChannelTimeouts timeouts);

  /// This rank.
  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
  /// The number of ranks, this one included.
  [[nodiscard]] std::uint32_t world_size() const noexcept {
    return static_cast<std::uint32_t>(channels_.size());
  }
  /// The ranks this MultiChannel connects to: every rank but rank(), ascending.
  [[nodiscard]] std::vector<std::uint32_t> peers() const;
  /// The channel to `peer`, for anything not covered here. Throws ibv::Error (invalid_argument)
  /// when `peer` is this rank or not below the world size (test:
  /// `MultiChannelTest.KnowsItsPeersAndTheirChannels`).
  [[nodiscard]] Channel& channel(std::uint32_t peer) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): one lookup, written once
    return const_cast<Channel&>(std::as_const(*this).channel(peer));
  }
  /// The channel to `peer`, read-only; throws as channel(peer).
  [[nodiscard]] const Channel& channel(std::uint32_t peer) const {
    if (peer >= channels_.size() || !channels_[peer]) [[unlikely]]
      throw_no_channel(peer);
    return *channels_[peer];
  }
  /// The peer whose channel produced `completion` (by its QP number), or nullopt.
  [[nodiscard]] std::optional<std::uint32_t> peer_of(const WorkCompletion& completion) const;
  /// The protection domain every channel is on: register memory here to use it with any peer.
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return pd_; }
  /// The timeouts every channel has; `operation` is the default of the blocking calls.
  [[nodiscard]] const ChannelTimeouts& timeouts() const noexcept { return timeouts_; }

  // Your own event loop: the per-peer channels built by MultiChannelBuilder with a completion
  // channel share it, so one fd covers every peer. The sequence is Channel's (see
  // docs/wait-modes.md), over all peers at once:
  //
  //   for (;;) {
  //     node.arm_completion_fd();            // arm every peer's queue, take in what completed
  //     if (all_done(works)) break;          // poll the PendingWorks (any peers)
  //     epoll_wait(epfd, &ready, 1, -1);     // completion_fd() is in epfd
  //     node.consume_completion_events();
  //   }

  /// The fd of the completion channel the per-peer channels share (see Channel::completion_fd).
  /// Throws ibv::Error (state) when there is none (WaitMode::spin without a completion
  /// channel), when there are no peers, or when the peers' channels do not share one (untested:
  /// `state`, no test asks a MultiChannel without a shared completion channel for its fd).
  [[nodiscard]] int completion_fd() const;
  /// Arms every peer's completion queue and takes in what already completed (see
  /// Channel::arm_completion_fd). Throws as completion_fd().
  void arm_completion_fd();
  /// Reads and acknowledges every event queued on completion_fd() now, without blocking;
  /// returns how many. Throws as completion_fd().
  std::size_t consume_completion_events();

  /// Blocking, one peer, any peer operation (ibv/multi_channel/peer_operation.hpp: op::Send,
  /// op::Receive, op::PeerWrite, ...): channel(peer).execute(). Throws ibv::Error
  /// (invalid_argument) before posting for a peer that is this rank or not below the world
  /// size, and for a PeerRemoteMemoryRegion of another peer than `peer` (tests:
  /// `BadInputMultiChannel.PeersRanksAndBatchesAreCheckedBeforeAnythingIsPosted`,
  /// `MultiChannelTest.TheGenericCallsRefuseARegionOfAnotherPeerToo`).
  template <op::PeerOperation Operation>
  WorkCompletion execute(std::uint32_t peer, const Operation& operation, Timeout timeout = {}) {
    return channel_for(peer, operation, "MultiChannel::execute").execute(operation, timeout);
  }
  /// execute() of a send or write posted as `options` say, as Channel::execute(operation,
  /// options, timeout).
  template <op::PeerOperation Operation>
  requires op::InlineCapable<Operation> WorkCompletion execute(std::uint32_t peer,
                                                               const Operation& operation,
                                                               InlineOptions options,
                                                               Timeout timeout = {}) {
    return channel_for(peer, operation, "MultiChannel::execute")
        .execute(operation, options, timeout);
  }
  /// Unpolled, one peer, any peer operation: channel(peer).post(); checked as execute().
  template <op::PeerOperation Operation>
  PendingWork post(std::uint32_t peer, const Operation& operation,
                   op::options_t<Operation> options = {}) {
    return channel_for(peer, operation, "MultiChannel::post").post(operation, options);
  }
  /// Unpolled, several peers: posts every element of `operations` (a forward range of
  /// op::ToPeer of one operation type; op::PeerAnySend mixes send-queue operations) to its
  /// peer, in order, each as post(peer, operation, options) would, and returns their handles in
  /// the same order. All elements are checked before any is posted.
  template <std::ranges::forward_range Operations>
  requires op::Addressed<std::ranges::range_value_t<Operations>>
  [[nodiscard]] std::vector<PendingWork> post_all(
      const Operations& operations,
      op::options_t<op::addressed_t<std::ranges::range_value_t<Operations>>> options = {}) {
    std::vector<PendingWork> handles;
    if constexpr (std::ranges::sized_range<Operations>)
      handles.reserve(std::ranges::size(operations));
    detail::post_each(
        *this, operations, options, "MultiChannel::post_all",
        [&handles](std::uint32_t, PendingWork work) { handles.push_back(std::move(work)); });
    return handles;
  }
  /// The channel to `peer` for `operation`, checked as execute() checks them, naming `call` (a
  /// string literal) in the error: what every peer-addressed call does first.
  template <op::PeerOperation Operation>
  [[nodiscard]] Channel& channel_for(std::uint32_t peer, const Operation& operation,
                                     const char* call) {
    if (peer >= channels_.size() || !channels_[peer]) [[unlikely]]
      throw_no_channel(peer, call);
    op::check_region_owner(operation, peer, call);
    return *channels_[peer];
  }

  // Shared receives, from any peer (on a shared receive queue or pool).
  /// The next completion of a shared receive from any peer, waiting (default: the operation
  /// timeout). Throws ibv::WorkError for a failed one (naming the peer), ibv::Error (timeout) when
  /// none came, (state) when the channels are not on a shared receive queue (untested: `timeout`,
  /// `state`, the tests take shared messages from any peer only through receive_message_any).
  PeerCompletion receive_shared_any(Timeout timeout = {});
  /// The next one if there is one, without waiting.
  [[nodiscard]] std::optional<PeerCompletion> poll_shared_any();
  /// On a SharedReceivePool: the next message from any peer, waiting (default: the operation
  /// timeout); failures as Channel::receive_message, naming the peer.
  PeerMessage receive_message_any(Timeout timeout = {});
  /// The next message if there is one, without waiting.
  [[nodiscard]] std::optional<PeerMessage> poll_message_any();

  /// A scope without a body: see MultiManualScope.
  [[nodiscard]] MultiManualScope manual_scope() { return MultiManualScope(*this); }

  /// Runs `body` with a MultiChannelScope and returns what it returns, after every request
  /// posted through the scope has completed, also when the body throws (as Channel::scope).
  template <typename Body>
  requires std::is_invocable_v<Body, MultiChannelScope&>
  auto scope(Body&& body) -> std::decay_t<std::invoke_result_t<Body, MultiChannelScope&>> {
    MultiChannelScope scope(*this);
    return detail::run_scope(scope, std::forward<Body>(body));
  }

 protected:
  /// A MultiChannel of the channels to `ranks` (ascending, this rank among them) numbered
  /// densely in that order, on the same protection domain; the channels to every other peer
  /// are destroyed, and this one is left as a moved-from one. For a Node's shrink.
  [[nodiscard]] MultiChannel regrouped(std::span<const std::uint32_t> ranks) &&;

 private:
  /// Throws channel()'s ibv::Error for a `peer` that has no channel (inline: every
  /// peer-addressed call looks its channel up); with `call`, naming it and saying that nothing
  /// was posted. In a moved-from MultiChannel no peer has one: ibv::Error (state) then (test:
  /// `NodeMovedFrom.EveryCallThatNeedsItsChannelsOrBarrierThrowsState`).
  [[noreturn]] void throw_no_channel(std::uint32_t peer, const char* call = nullptr) const;

  ProtectionDomain pd_;
  std::uint32_t rank_;
  std::vector<std::optional<Channel>> channels_;  // index = peer; empty at rank_
  ChannelTimeouts timeouts_;
  std::uint32_t next_shared_ = 0;  // the peer the next *_any poll looks at first
};

namespace detail {
/// Throws the ibv::Error (invalid_argument) of `call` when element `index` of a post_all, to
/// `peer` and naming memory of `owner` (if any), can not be posted: `peer` is no peer of
/// `channels`, `owner` is another peer, or the request (with `options`) does not pass the peer's
/// queue pair's checks (test:
/// `BadInputMultiChannel.PeersRanksAndBatchesAreCheckedBeforeAnythingIsPosted`).
void check_addressed(MultiChannel& channels, const char* call, std::size_t index,
                     std::uint32_t peer, std::optional<std::uint32_t> owner, SendRequest request,
                     PostOptions options);
/// check_addressed() of a receive.
void check_addressed(MultiChannel& channels, const char* call, std::size_t index,
                     std::uint32_t peer, const ReceiveRequest& request);

template <op::PeerOperation Operation>
PendingWork& MultiScopeBase::post(std::uint32_t peer, const Operation& operation,
                                  op::options_t<Operation> options) {
  return keep(
      peer,
      channels_.channel_for(peer, operation, "MultiChannelScope::post").post(operation, options));
}

template <typename Operations, typename Options, typename Keep>
void post_each(MultiChannel& channels, const Operations& operations, Options options,
               const char* call, Keep&& keep) {
  std::size_t index = 0;
  for (const auto& addressed : operations) {
    if constexpr (op::SendOperation<decltype(addressed.operation)>) {
      check_addressed(channels, call, index++, addressed.peer,
                      op::region_owner(addressed.operation), addressed.operation.request(0),
                      as_post_options(options));
    } else {
      check_addressed(channels, call, index++, addressed.peer, addressed.operation.request(0));
    }
  }
  for (const auto& addressed : operations)
    keep(addressed.peer, channels.channel(addressed.peer).post(addressed.operation, options));
}
}  // namespace detail

}  // namespace ibv
