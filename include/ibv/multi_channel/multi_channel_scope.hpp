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
#include <utility>

#include "ibv/channel/channel.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/channel/scope.hpp"
#include "ibv/multi_channel/peer_operation.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

class MultiChannel;

namespace detail {
/// post_all()'s one mechanism for work to several peers, on a MultiChannel and in its scopes:
/// checks every element of `operations` (a range of op::ToPeer) before any is posted (see
/// MultiChannel::post_all; errors name `call`, a string literal, and the element), then posts
/// each to its peer with `options`, in order, handing `keep(peer, handle)` every handle.
/// Defined in multi_channel.hpp, where MultiChannel is complete.
template <typename Operations, typename Options, typename Keep>
void post_each(MultiChannel& channels, const Operations& operations, Options options,
               const char* call, Keep&& keep);

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
  /// handle until the scope ends; checked as MultiChannel::post(peer, operation). (Defined in
  /// multi_channel.hpp, where MultiChannel is complete.)
  template <op::PeerOperation Operation>
  PendingWork& post(std::uint32_t peer, const Operation& operation,
                    op::options_t<Operation> options = {});

  /// Posts every operation in `operations` to `peer` as linked lists, one doorbell each, and
  /// keeps their handles: ChannelScope::post_all on the peer's channel (a range of one
  /// send-queue operation type or of op::PeerAnySend, with `options`; or of op::Receive).
  /// Every operation's PeerRemoteMemoryRegion is checked against `peer` before any is posted.
  template <std::ranges::forward_range Operations>
  requires op::SendOperation<std::ranges::range_value_t<Operations>> &&
      op::PeerOperation<std::ranges::range_value_t<Operations>>
  void post_all(std::uint32_t peer, const Operations& operations,
                op::options_t<std::ranges::range_value_t<Operations>> options = {}) {
    ChannelCore& core = peer_core(peer);
    for (const auto& operation : operations)
      op::check_region_owner(operation, peer, "MultiChannelScope::post_all");
    ListPoster(core, work_, peer).post_all(operations, as_post_options(options));
  }
  template <std::ranges::forward_range Operations>
  requires std::same_as<std::ranges::range_value_t<Operations>, op::Receive>
  void post_all(std::uint32_t peer, const Operations& operations) {
    ListPoster(peer_core(peer), work_, peer).post_all(operations);
  }
  /// Posts every element of `operations` (a range of op::ToPeer) to its peer and keeps their
  /// handles until the scope ends: MultiChannel::post_all, checked as it checks (all first).
  template <std::ranges::forward_range Operations>
  requires op::Addressed<std::ranges::range_value_t<Operations>>
  void post_all(
      const Operations& operations,
      op::options_t<op::addressed_t<std::ranges::range_value_t<Operations>>> options = {}) {
    post_each(channels_, operations, options, "MultiChannelScope::post_all",
              [this](std::uint32_t peer, PendingWork work) { keep(peer, std::move(work)); });
  }

  /// Requests posted through this scope so far.
  [[nodiscard]] std::size_t size() const noexcept { return work_.size(); }

 protected:
  explicit MultiScopeBase(MultiChannel& channels) noexcept : channels_(channels) {}
  ~MultiScopeBase() = default;
  /// The core of MultiChannel::channel(peer) (throws for a bad peer).
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
/// leaves out: `post(peer, operation)`, `post_all(peer, operations)` (lists to one peer) and
/// `post_all(operations)` (op::ToPeer elements, to several peers). The scope keeps every
/// handle; `size()` counts them.
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
/// waits on every request itself. close() throws ibv::Error (state) naming every request (and its
/// peer) that the caller never saw complete, after waiting for them (test:
/// `MultiChannelTest.ManualScopeComplainsAboutUnpolledWorkNamingThePeer`); destroyed without
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

  /// Ends the scope; throws ibv::Error (state) if any request was left unpolled (test:
  /// `MultiChannelTest.ManualScopeComplainsAboutUnpolledWorkNamingThePeer`).
  void close();

 private:
  bool closed_ = false;
};

}  // namespace ibv
