// SPDX-License-Identifier: MIT
// Scopes of a Channel: ChannelScope, which Channel::scope() gives its body and which returns
// only after all work posted through it has completed; ManualScope, where leaving work unpolled
// is a bug; and BatchError, what went wrong in a scope.
#pragma once

#include <array>
#include <chrono>
#include <concepts>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <ranges>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ibv/channel/core_owner.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/error.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

namespace detail {
/// What a scope found when it waited for its requests at the end. The peer vectors run
/// parallel to the others: the peer a request went to, or nullopt on a plain Channel.
struct DrainResult {
  std::vector<WorkCompletion> failed;    ///< completions that failed, in posting order
  std::vector<std::uint64_t> timed_out;  ///< did not complete in time; now cancelled
  std::vector<std::uint64_t> unpolled;   ///< the caller had not seen these complete
  std::vector<std::optional<std::uint32_t>> failed_peers;
  std::vector<std::optional<std::uint32_t>> timed_out_peers;
  std::vector<std::optional<std::uint32_t>> unpolled_peers;
};

/// The requests of one scope (on one channel or on the channels of several peers), kept until
/// the scope ends, and what ending a scope means: waiting for all of them, then reporting.
class ScopeWork {
 public:
  ScopeWork() = default;
  ScopeWork(const ScopeWork&) = delete;
  ScopeWork& operator=(const ScopeWork&) = delete;
  ScopeWork(ScopeWork&&) = delete;
  ScopeWork& operator=(ScopeWork&&) = delete;
  ~ScopeWork() { clear(); }  // in posting order, as the requests were kept

  /// Keeps `work` (posted to `peer`, if on a MultiChannel) until the scope ends; the reference
  /// stays valid until then.
  PendingWork& keep(PendingWork work, std::optional<std::uint32_t> peer = {});
  /// Keeps a handle on request `wr_id` of `core` (posted to `peer`, if on a MultiChannel) that
  /// borrows the core (the scope's channel outlives it: PendingWork's borrowing constructor),
  /// made in place. `folded`: the requests before it in its list that it stands for (see
  /// post_all: they complete with it, and its completion reports their failure).
  PendingWork& keep(ChannelCore& core, std::uint64_t wr_id, std::optional<std::uint32_t> peer = {},
                    std::uint32_t folded = 0) {
    folded_ += folded;
    if (inline_count_ < kInline) [[likely]] {
      // Placement new of the aggregate: the handle is made in the slot, never moved (a move
      // would take a share of the core).
      Kept* kept = ::new (static_cast<void*>(&inline_[inline_count_].kept))
          Kept{PendingWork(core, wr_id), peer};
      ++inline_count_;
      return kept->work;
    }
    return keep_spilled(core, wr_id, peer);
  }
  /// The requests kept, with those folded into them.
  [[nodiscard]] std::size_t size() const noexcept {
    return inline_count_ + (spilled_ ? spilled_->size() : 0) + folded_;
  }

  /// Waits for every request not yet seen complete (each at most its channel's operation
  /// timeout) and records into `result` what it found, filled as it goes, so a throw midway
  /// keeps what was found (the requests not seen complete only if `note_unpolled`). Requests
  /// that did not complete in time are cancelled (their channels' state() names `operation`,
  /// a string literal). Afterwards nothing is kept.
  void drain(DrainResult& result, std::string_view operation, bool note_unpolled = true);
  /// The end of a scope with a body: drains, then throws BatchError if any request failed or
  /// timed out, or rethrows `body_error` if only the body failed.
  void finish(std::string_view operation, const std::exception_ptr& body_error);
  /// finish() for a scope destroyed without it (`operation` names the scope): reports a failure
  /// on stderr instead of throwing. Never throws.
  void finish_unfinished(std::string_view operation) noexcept;
  /// The end of a manual scope: drains, then throws ibv::Error (state) if any request was left
  /// unpolled (naming them, and any that failed or timed out; test:
  /// `ChannelManualScope.CloseNamesTheRequestsLeftUnpolledAfterWaitingForThem`).
  void close(std::string_view operation);
  /// A manual scope destroyed without close(): drains, and reports unpolled work as a bug on
  /// stderr. Never throws.
  void abandon(std::string_view operation) noexcept;

 private:
  struct Kept {
    PendingWork work;
    std::optional<std::uint32_t> peer;
  };
  /// Settles `work` without waiting when its request has succeeded (polling its channel once if
  /// it has not arrived yet). Whether it did; a handle moved out of the scope counts as settled.
  static bool settled_quickly(PendingWork& work);
  /// settled_quickly() for every request not seen complete, until one is not: whether all were.
  /// Inline in finish(), its only caller.
  bool drain_quickly();
  /// finish() once a request is still in flight after drain_quickly(): waits for every one.
  /// Out of line, so that its waiting and reporting cost finish()'s common case nothing.
  [[gnu::noinline]] void finish_slowly(std::string_view operation,
                                       const std::exception_ptr& body_error);
  /// Waits up to `timeout` for `kept`; records a failure, or a timeout (and cancels the
  /// request), in `result`; `operation` (a string literal) is the call that a cancel names in
  /// its channel's state().
  static void settle(Kept& kept, std::chrono::nanoseconds timeout, DrainResult& result,
                     std::string_view operation);
  /// Calls `visit(kept)` for every request kept, in posting order.
  template <typename Visit>
  [[gnu::always_inline]] void for_each(Visit&& visit) {
    for (std::size_t i = 0; i < inline_count_; ++i) visit(inline_[i].kept);
    if (spilled_) {
      for (auto& kept : *spilled_) visit(kept);
    }
  }
  /// keep() once the inline slots are full: the handle is moved into place, so it takes a
  /// share of the core.
  PendingWork& keep_spilled(ChannelCore& core, std::uint64_t wr_id,
                            std::optional<std::uint32_t> peer);
  /// Forgets every request kept (their destructors run: settled handles do not wait). Costs a
  /// test when nothing is kept (a scope's finish has cleared already when it is destroyed).
  void clear() noexcept {
    if (inline_count_ != 0 || spilled_) forget_all();
  }
  /// clear() when something is kept.
  void forget_all() noexcept;
  /// forget_all()'s work, inline in finish()'s common case.
  void destroy_kept() noexcept;

  // The first kInline requests are kept in place (a scope of up to 32 requests allocates
  // nothing), the rest in a deque made when needed: references to either stay valid as more
  // are kept.
  static constexpr std::size_t kInline = 32;
  /// Storage for one Kept, constructed by keep() and destroyed by clear(): slots not in use
  /// cost nothing when a scope begins or ends.
  union InlineSlot {
    InlineSlot() noexcept {}  // NOLINT(modernize-use-equals-default): leaves `kept` unmade
    ~InlineSlot() {}          // NOLINT(modernize-use-equals-default): clear() destroys it
    InlineSlot(const InlineSlot&) = delete;
    InlineSlot& operator=(const InlineSlot&) = delete;
    InlineSlot(InlineSlot&&) = delete;
    InlineSlot& operator=(InlineSlot&&) = delete;
    Kept kept;
  };
  std::array<InlineSlot, kInline> inline_;
  std::size_t inline_count_ = 0;
  std::unique_ptr<std::deque<Kept>> spilled_;
  std::size_t folded_ = 0;  // requests of lists that a kept handle stands for
};

/// Runs `body(scope)`, then `scope.finish(exception of the body or null)`, which waits for the
/// scope's work and throws if anything failed; returns what the body returned (by value). The
/// common part of Channel::scope() and MultiChannel::scope().
template <typename Scope, typename Body>
auto run_scope(Scope& scope, Body&& body) -> std::decay_t<std::invoke_result_t<Body, Scope&>> {
  using Result = std::decay_t<std::invoke_result_t<Body, Scope&>>;
  std::exception_ptr body_error;
  if constexpr (std::is_void_v<Result>) {
    try {
      std::forward<Body>(body)(scope);
    } catch (...) {
      body_error = std::current_exception();
    }
    scope.finish(body_error);  // throws if anything failed
  } else {
    std::optional<Result> result;
    try {
      result.emplace(std::forward<Body>(body)(scope));
    } catch (...) {
      body_error = std::current_exception();
    }
    scope.finish(body_error);
    return std::move(*result);
  }
}

/// post_all()'s one mechanism, for a scope on one channel and for a MultiChannel scope's
/// peer: builds the requests of a range of operations in the storage `core` keeps for lists
/// and posts them in parts (one doorbell each), keeping every request the device took in
/// `work` (under `peer` in a MultiChannel scope), also when a part then fails.
class ListPoster {
 public:
  ListPoster(ChannelCore& core, ScopeWork& work, std::optional<std::uint32_t> peer) noexcept
      : core_(core), work_(work), peer_(peer) {}

  /// Send-queue operations (one type, or op::AnySend); see ScopeBase::post_all.
  template <typename Operations>
  void post_all(const Operations& operations, PostOptions options) {
    post_in_parts(
        operations, send_list_storage(), [](const auto& operation) { return operation.request(0); },
        [&](SendRequest& request) { check_request(request, options); },
        [&](std::span<SendRequest> part) { post_list(part, options); });
  }
  /// Receives (op::Receive).
  template <typename Operations>
  void post_all(const Operations& operations) {
    post_in_parts(
        operations, receive_list_storage(),
        [](const op::Receive& operation) { return operation.request(0); },
        [&](const ReceiveRequest& request) { check_request(request); },
        [&](std::span<ReceiveRequest> part) { post_list(part); });
  }

 private:
  /// post_all()'s one mechanism: when `operations` do not all fit `storage`, checks every
  /// request first (`check`), so that bad input posts nothing; then builds them (`make`) into
  /// `storage` and posts each full part, and the rest, with `post`.
  template <typename Operations, typename Request, typename Make, typename Check, typename Post>
  static void post_in_parts(const Operations& operations, std::span<Request> storage, Make make,
                            Check check, Post post) {
    if (std::ranges::distance(operations) > std::ranges::ssize(storage)) {
      for (const auto& operation : operations) {
        Request request = make(operation);
        check(request);
      }
    }
    Request* const first = storage.data();
    Request* const end = first + storage.size();
    Request* next = first;
    for (const auto& operation : operations) {
      // Made in place (the prvalue initializes the element): no copy of the request.
      static_assert(std::is_trivially_destructible_v<Request>);
      ::new (static_cast<void*>(next++)) Request(make(operation));
      if (next == end) {
        post(storage);
        next = first;
      }
    }
    if (next != first) post(storage.first(static_cast<std::size_t>(next - first)));
  }
  /// post_all()'s parts: the channel's room for building a list in place, the checks of a
  /// request as a post would make them, and the posting of a built list (keeping every
  /// request the device took, also when it then throws).
  [[nodiscard]] std::span<SendRequest> send_list_storage() noexcept;
  [[nodiscard]] std::span<ReceiveRequest> receive_list_storage() noexcept;
  void check_request(SendRequest& request, PostOptions options) const;
  void check_request(const ReceiveRequest& request) const;
  void post_list(std::span<SendRequest> requests, PostOptions options);
  void post_list(std::span<ReceiveRequest> requests);

  ChannelCore& core_;
  ScopeWork& work_;
  std::optional<std::uint32_t> peer_;
};

/// Channel scopes' posting: every post_* keeps the request's PendingWork until the scope ends
/// and returns a reference to it, valid until then.
class ScopeBase {
 public:
  ScopeBase(const ScopeBase&) = delete;
  ScopeBase& operator=(const ScopeBase&) = delete;
  ScopeBase(ScopeBase&&) = delete;
  ScopeBase& operator=(ScopeBase&&) = delete;

  /// Posts `operation` (any of ibv/channel/operation.hpp) and keeps its handle until the scope
  /// ends.
  /// `options`: op::options_t of the operation (as Channel::post).
  template <op::SendOperation Operation>
  PendingWork& post(const Operation& operation, op::options_t<Operation> options = {}) {
    SendRequest request = operation.request(0);
    return post_request(request, detail::as_post_options(options));
  }
  /// A receive: always signaled, never inline (ReceiveOptions has nothing to set).
  PendingWork& post(const op::Receive& operation, ReceiveOptions options = {});

  /// Posts every operation in `operations` (a range of one operation type, e.g. a
  /// std::vector<op::Write>) as linked lists that reach the device with one doorbell each (as
  /// many requests as half the send queue holds, at most 64), and keeps them until the scope
  /// ends (size() counts them; the scope waits for them like any other). Signaled (`options`),
  /// each list asks for one completion, its last request's; a failure inside it is reported
  /// once, as that request's own. All of them are checked before any is posted: bad input
  /// throws and posts nothing. `options`: op::options_t of the element type (a list of
  /// op::AnySend takes SignalingOptions, what every alternative takes). See
  /// docs/operations.md, "Posting a list".
  template <std::ranges::forward_range Operations>
  requires op::SendOperation<std::ranges::range_value_t<Operations>>
  void post_all(const Operations& operations,
                op::options_t<std::ranges::range_value_t<Operations>> options = {}) {
    ListPoster(*core_, work_, std::nullopt).post_all(operations, detail::as_post_options(options));
  }
  /// Posts a receive for each of `operations` (a range of op::Receive) as linked lists, one
  /// doorbell each; as post_all() of send-queue operations.
  template <std::ranges::forward_range Operations>
  requires std::same_as<std::ranges::range_value_t<Operations>, op::Receive>
  void post_all(const Operations& operations) {
    ListPoster(*core_, work_, std::nullopt).post_all(operations);
  }

  /// Requests posted through this scope so far.
  [[nodiscard]] std::size_t size() const noexcept { return work_.size(); }

 protected:
  explicit ScopeBase(CoreOwner core) noexcept : core_(std::move(core)) {}
  ~ScopeBase() = default;
  /// The one posting path of a scope: posts `request` on the channel (Channel::post's path)
  /// and keeps its handle.
  PendingWork& post_request(SendRequest& request, PostOptions options);

  CoreOwner core_;  // the body may destroy the Channel: the scope keeps its core alive
  ScopeWork work_;
};
}  // namespace detail

/// What the body of Channel::scope() posts through. The scope waits at its exit for every
/// request the body did not see complete: the body may poll or wait on what it posted, or
/// leave it all to the scope.
///
/// Its posting calls come from detail::ScopeBase (this header), which the reference leaves
/// out: `post(operation)` and `post_all(operations)`, and the named `post_send()`,
/// `post_send_with_immediate()`, `post_receive()`, `post_write()`,
/// `post_write_with_immediate()`, `post_read()`, `post_fetch_add()`, `post_compare_swap()`,
/// with Channel's arguments. Each returns a `PendingWork&` the scope keeps (poll or wait on
/// it, or leave it to the scope); `size()` counts them. See
/// [docs/operations.md](docs/operations.md).
class ChannelScope : public detail::ScopeBase {
 public:
  ChannelScope(const ChannelScope&) = delete;
  ChannelScope& operator=(const ChannelScope&) = delete;
  ChannelScope(ChannelScope&&) = delete;
  ChannelScope& operator=(ChannelScope&&) = delete;
  /// Channel::scope() always finishes; a scope left otherwise still waits for its work (and
  /// reports a failure on stderr).
  [[gnu::always_inline]] ~ChannelScope() {
    if (!finished_) [[unlikely]]
      work_.finish_unfinished("Channel::scope");
  }

  /// Used by Channel::scope(): waits for every request, then throws BatchError if any failed,
  /// or rethrows `body_error` if only the body failed. Returns normally if nothing failed.
  void finish(const std::exception_ptr& body_error) {
    finished_ = true;
    work_.finish("Channel::scope", body_error);
  }

 private:
  friend class Channel;  // Channel::scope() makes every ChannelScope
  explicit ChannelScope(detail::CoreOwner core) noexcept : ScopeBase(std::move(core)) {}
  bool finished_ = false;
};

/// A scope without a body (Channel::manual_scope()), for code that polls or waits on every
/// request itself, e.g. across the iterations of an event loop. Leaving a request unpolled is
/// treated as a bug: close() throws ibv::Error (state) naming every request the caller never saw
/// complete, after waiting for them so their buffers are free (test:
/// `ChannelManualScope.CloseNamesTheRequestsLeftUnpolledAfterWaitingForThem`); a ManualScope
/// destroyed without close() does the same waiting and reports the bug loudly on stderr.
///
/// It posts as ChannelScope does (the calls of detail::ScopeBase, listed there).
class ManualScope : public detail::ScopeBase {
 public:
  ManualScope(const ManualScope&) = delete;
  ManualScope& operator=(const ManualScope&) = delete;
  ManualScope(ManualScope&&) = delete;
  ManualScope& operator=(ManualScope&&) = delete;
  ~ManualScope();

  /// Ends the scope. Throws ibv::Error (state) if any request was left unpolled (listing them, and
  /// any that failed or timed out; test:
  /// `ChannelManualScope.CloseNamesTheRequestsLeftUnpolledAfterWaitingForThem`); returns normally
  /// if the caller saw all complete.
  void close();

 private:
  friend class Channel;  // Channel::manual_scope() makes every ManualScope
  explicit ManualScope(detail::CoreOwner core) noexcept;
  bool closed_ = false;
};

}  // namespace ibv
