// SPDX-License-Identifier: MIT
// Scopes of a MultiChannel: MultiChannelScope, which MultiChannel::scope() gives its body and
// which returns only after every request posted through it (to any peer) has completed; and
// MultiManualScope, where leaving work unpolled is a bug. The MultiChannel counterparts of
// ChannelScope and ManualScope (see ibv/channel/scope.hpp).
#pragma once

#include <concepts>
#include <cstdint>
#include <exception>
#include <ranges>
#include <span>

#include "ibv/channel/channel.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/channel/scope.hpp"
#include "ibv/multi_channel/peer_operation.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"
#include "ibv/multi_channel/peer_request.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

class MultiChannel;

namespace detail {
/// MultiChannel::channel_for(peer, operation, call), for the scopes' templates (defined in
/// multi_channel.hpp, where MultiChannel is complete).
template <op::PeerOperation Operation>
Channel& channel_for(MultiChannel& channels, std::uint32_t peer, const Operation& operation,
                     const char* call);

/// What both MultiChannel scopes share: peer-addressed posting, keeping every request until the
/// scope ends. Single-peer posts return a reference to the request's PendingWork, valid until
/// the scope ends; the calls that address several peers check every element first (so bad
/// input posts nothing) and keep what they post.
class MultiScopeBase {
 public:
  MultiScopeBase(const MultiScopeBase&) = delete;
  MultiScopeBase& operator=(const MultiScopeBase&) = delete;
  MultiScopeBase(MultiScopeBase&&) = delete;
  MultiScopeBase& operator=(MultiScopeBase&&) = delete;

  /// Posts `operation` (any of ibv/multi_channel/peer_operation.hpp) to `peer` and keeps its
  /// handle until the scope ends; checked as MultiChannel::post(peer, operation).
  template <op::PeerOperation Operation>
  PendingWork& post(std::uint32_t peer, const Operation& operation,
                    op::options_t<Operation> options = {}) {
    return keep(peer,
                peer_channel(peer, operation, "MultiChannelScope::post").post(operation, options));
  }

  // By name, with regions tagged with their peer (checked against `peer`).
  PendingWork& post_send(std::uint32_t peer, std::span<const GatherElement> data,
                         PostOptions options = {});
  PendingWork& post_send_with_immediate(std::uint32_t peer, std::span<const GatherElement> data,
                                        std::uint32_t immediate, PostOptions options = {});
  PendingWork& post_receive(std::uint32_t peer, std::span<const ScatterElement> into);
  PendingWork& post_write(std::uint32_t peer, std::span<const GatherElement> data,
                          const PeerRemoteMemoryRegion& destination, PostOptions options = {});
  PendingWork& post_write_with_immediate(std::uint32_t peer, std::span<const GatherElement> data,
                                         const PeerRemoteMemoryRegion& destination,
                                         std::uint32_t immediate, PostOptions options = {});
  PendingWork& post_read(std::uint32_t peer, std::span<const ScatterElement> into,
                         const PeerRemoteMemoryRegion& source, SignalingOptions options = {});
  /// Atomics on `peer`'s memory (see Channel::fetch_add / compare_swap).
  PendingWork& post_fetch_add(std::uint32_t peer, const ScatterElement& result,
                              const PeerRemoteMemoryRegion& target, std::uint64_t add,
                              SignalingOptions options = {});
  PendingWork& post_compare_swap(std::uint32_t peer, const ScatterElement& result,
                                 const PeerRemoteMemoryRegion& target, std::uint64_t expected,
                                 std::uint64_t desired, SignalingOptions options = {});

  /// Posts every operation in `operations` to `peer` as linked lists, one doorbell each, and
  /// keeps their handles: ChannelScope::post_all on the peer's channel (a range of one
  /// send-queue operation type or of op::AnySend, with `options`; or of op::Receive).
  /// Every operation's PeerRemoteMemoryRegion is checked against `peer` before any is posted.
  template <std::ranges::forward_range Operations>
  requires op::SendOperation<std::ranges::range_value_t<Operations>> &&
      op::PeerOperation<std::ranges::range_value_t<Operations>>
  void post_all(std::uint32_t peer, const Operations& operations,
                op::options_t<std::ranges::range_value_t<Operations>> options = {}) {
    ChannelCore& core = peer_core(peer);
    for (const auto& operation : operations)
      (void)peer_channel(peer, operation, "MultiChannelScope::post_all");
    ListPoster(core, work_, peer).post_all(operations, as_post_options(options));
  }
  template <std::ranges::forward_range Operations>
  requires std::same_as<std::ranges::range_value_t<Operations>, op::Receive>
  void post_all(std::uint32_t peer, const Operations& operations) {
    ListPoster(peer_core(peer), work_, peer).post_all(operations);
  }

  void post_scatter_send(std::span<const PeerSend> sends, PostOptions options = {});
  void post_gather_receive(std::span<const PeerReceive> receives);
  void post_scatter_write(std::span<const PeerWrite> writes, PostOptions options = {});
  void post_gather_read(std::span<const PeerRead> reads, SignalingOptions options = {});
  void post_multicast_send(std::span<const std::uint32_t> peers,
                           std::span<const GatherElement> data, PostOptions options = {});

  /// Requests posted through this scope so far.
  [[nodiscard]] std::size_t size() const noexcept { return work_.size(); }

 protected:
  explicit MultiScopeBase(MultiChannel& channels) noexcept : channels_(channels) {}
  ~MultiScopeBase() = default;
  /// MultiChannel::channel(peer), for the templates above (throws for a bad peer).
  [[nodiscard]] Channel& peer_channel(std::uint32_t peer);
  /// MultiChannel::channel_for(peer, operation, call).
  template <op::PeerOperation Operation>
  [[nodiscard]] Channel& peer_channel(std::uint32_t peer, const Operation& operation,
                                      const char* call) {
    return channel_for(channels_, peer, operation, call);
  }
  /// The core of peer_channel(peer).
  [[nodiscard]] ChannelCore& peer_core(std::uint32_t peer);
  /// Keeps `work`, posted to `peer`, until the scope ends.
  PendingWork& keep(std::uint32_t peer, PendingWork work);

  MultiChannel& channels_;
  ScopeWork work_;
};
}  // namespace detail

/// What the body of MultiChannel::scope() posts through. At its exit the scope waits for every
/// request the body did not see complete, on every peer; failures come out as one BatchError
/// naming the peer of each.
///
/// Its posting calls come from detail::MultiScopeBase (this header), which the reference
/// leaves out: `post(peer, operation)`, `post_all(peer, operations)`, the named
/// `post_send(peer, ...)` ... `post_compare_swap(peer, ...)` as MultiChannel's, and the batches
/// `post_scatter_send()`, `post_gather_receive()`, `post_scatter_write()`,
/// `post_gather_read()`, `post_multicast_send()`. The scope keeps every handle; `size()` counts
/// them.
class MultiChannelScope : public detail::MultiScopeBase {
 public:
  /// A scope over `channels` (made by MultiChannel::scope(), which also finishes it).
  explicit MultiChannelScope(MultiChannel& channels) noexcept : MultiScopeBase(channels) {}
  MultiChannelScope(const MultiChannelScope&) = delete;
  MultiChannelScope& operator=(const MultiChannelScope&) = delete;
  MultiChannelScope(MultiChannelScope&&) = delete;
  MultiChannelScope& operator=(MultiChannelScope&&) = delete;
  /// MultiChannel::scope() always finishes; a scope left otherwise still waits for its work
  /// (and reports a failure on stderr).
  [[gnu::always_inline]] ~MultiChannelScope() {
    if (!finished_) [[unlikely]]
      work_.finish_unfinished("MultiChannel::scope");
  }

  /// Used by MultiChannel::scope(): waits for every request, then throws BatchError if any
  /// failed, or rethrows `body_error` if only the body failed.
  void finish(const std::exception_ptr& body_error) {
    finished_ = true;
    work_.finish("MultiChannel::scope", body_error);
  }

 private:
  bool finished_ = false;
};

/// A MultiChannel scope without a body (MultiChannel::manual_scope()): the caller polls or
/// waits on every request itself. close() throws ibv::Error (state) naming every request (and
/// its peer) that the caller never saw complete, after waiting for them; destroyed without
/// close(), it waits the same way and reports the bug on stderr.
///
/// It posts as MultiChannelScope does (the calls of detail::MultiScopeBase, listed there).
class MultiManualScope : public detail::MultiScopeBase {
 public:
  /// A scope over `channels` (what MultiChannel::manual_scope() gives).
  explicit MultiManualScope(MultiChannel& channels) noexcept : MultiScopeBase(channels) {}
  MultiManualScope(const MultiManualScope&) = delete;
  MultiManualScope& operator=(const MultiManualScope&) = delete;
  MultiManualScope(MultiManualScope&&) = delete;
  MultiManualScope& operator=(MultiManualScope&&) = delete;
  ~MultiManualScope();

  /// Ends the scope; throws ibv::Error (state) if any request was left unpolled.
  void close();

 private:
  bool closed_ = false;
};

}  // namespace ibv
