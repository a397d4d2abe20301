// SPDX-License-Identifier: MIT
// PendingWork: the handle of one posted, not yet completed work request of a Channel.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

#include "ibv/channel/core_owner.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

class AsyncWork;

namespace detail {
class ChannelCore;
class ScopeBase;
class ScopeWork;
}  // namespace detail

/// One work request posted on a Channel and not yet seen complete. Move-only and
/// `[[nodiscard]]`: dropping it by accident would let the buffers it uses be released while
/// the device still reads or writes them.
///
/// - poll(): non-blocking; the completion once it has arrived (a failed one too: on the
///   polling path a failure is a value).
/// - wait() / wait_for(timeout): blocking; throw ibv::WorkError for a failed completion.
/// - The destructor waits for the completion (up to the channel's drop timeout) if nobody
///   did. It never throws: a failure or a timeout there is logged on stderr, and a request
///   still in flight then is cancelled: the channel moves its queue pair to the error state
///   and takes in the flushed completions, so that the device touches none of the request's
///   buffers once the destructor returns; the channel then refuses further work
///   (docs/safety.md, "Giving up"). wait() and wait_for() that run out keep the request.
///
/// Completions of other requests that arrive while this one is awaited are kept for their own
/// handles: none is lost, none is delivered twice.
class [[nodiscard]] PendingWork {
 public:
  /// Takes `other`'s request; `other` is left empty (its destructor then waits for nothing).
  PendingWork(PendingWork&& other) noexcept;
  /// Settles this handle's own request first (as the destructor does), then takes `other`'s.
  PendingWork& operator=(PendingWork&& other) noexcept;
  PendingWork(const PendingWork&) = delete;
  PendingWork& operator=(const PendingWork&) = delete;
  /// Settles a request still pending (see the class comment); one that completed costs a test.
  ~PendingWork() {
    if (core_ && !completion_) settle();
  }

  /// The completion if it has arrived, else nullopt. Never blocks. A reference to what the
  /// handle keeps, as wait()'s; a temporary's poll() gives a copy.
  [[nodiscard]] const std::optional<WorkCompletion>& poll() &;
  /// poll() of a temporary handle: the completion by value.
  [[nodiscard]] std::optional<WorkCompletion> poll() && { return poll(); }
  /// Waits for the completion, at most the channel's default timeout. Throws ibv::WorkError
  /// if it failed, ibv::Error (timeout) if it did not arrive in time (the request stays pending:
  /// wait again, or let the destructor deal with it; tests:
  /// `ChannelPendingWork.WaitThatTimesOutLeavesTheRequestPending`,
  /// `ChannelStateTest.AWaitThatTimesOutLeavesTheChannelUsable`). Returns a reference to the
  /// completion the handle keeps: valid while the handle lives and is not moved from (as
  /// std::optional::value()).
  const WorkCompletion& wait() &;
  /// wait() of a temporary handle (`channel.post(op).wait()`): the completion by value.
  WorkCompletion wait() && { return wait(); }  // *this is an lvalue here: the overload above
  /// Waits at most `timeout` (0: polls once); nullopt if the completion did not arrive in time.
  /// Throws ibv::WorkError if it failed, ibv::Error (invalid_argument) naming the timeout when it
  /// is negative (the request stays pending; test:
  /// `BadInputChannel.RejectedPostsPostNothingAndLeaveTheChannelUsable`).
  [[nodiscard]] std::optional<WorkCompletion> wait_for(Duration timeout);

  /// Whether the completion has been seen (by poll, wait or wait_for).
  [[nodiscard]] bool is_complete() const noexcept { return completion_.has_value(); }
  /// The channel-unique id of the request.
  [[nodiscard]] std::uint64_t wr_id() const noexcept { return wr_id_; }

 private:
  friend class Channel;  // Channel::post and the named post_* calls make every handle
  friend class detail::ScopeBase;
  friend class detail::ScopeWork;
  friend class AsyncWork;  // the coroutine layer cancels on timeout, as the blocking calls do
  /// A handle that does not share ownership of `core`: for one a scope keeps in place, which
  /// ends (ScopeWork destroys its handles) while the scope still owns the channel's core. Saves
  /// the atomic count of the core's owners on every scoped request. Moved out of the scope, the
  /// handle takes a share of the core, like any other.
  PendingWork(detail::ChannelCore& core, std::uint64_t wr_id) noexcept
      : core_(detail::CoreOwner::borrowing(core)), wr_id_(wr_id) {}
  /// A handle that shares ownership of the channel's core (a copy of `core`, made in place).
  // Not by value: that is a copy, a move and a moved-from owner's destructor on every unpolled
  // post (bench/hot_path/notes.md, seventh pass).
  // NOLINTNEXTLINE(modernize-pass-by-value)
  PendingWork(const detail::CoreOwner& core, std::uint64_t wr_id) noexcept
      : core_(core), wr_id_(wr_id) {}
  /// A handle whose request has completed already (Channel::post_and_look): it shares the
  /// core only for what its owner may still ask of the channel (AsyncWork's loop checks).
  PendingWork(detail::CoreOwner core, std::uint64_t wr_id,
              const WorkCompletion& completion) noexcept
      : core_(std::move(core)), wr_id_(wr_id), completion_(completion) {}
  /// Lets go of the channel (and of its ownership, if this handle shares it).
  void forget_core() noexcept { core_.reset(); }
  void settle() noexcept;
  /// wait() past its first look: a failure, a moved-from handle, or the wait itself.
  const WorkCompletion& wait_rest();
  /// Takes the completion in if it has arrived (one poll, as poll()); whether the handle has it
  /// now. poll() without the copy.
  bool refresh();
  /// The channel's operation timeout (0 for a moved-from handle).
  [[nodiscard]] Duration operation_timeout() const noexcept;
  /// Gives up on the request because of `reason`: cancels it (the channel's queue pair to the
  /// error state, its completions flushed; see docs/safety.md) and lets go of it. `operation`
  /// (a string literal) names the call that gave up in the channel's state().
  void cancel(std::string_view operation, std::string_view reason) noexcept;
  // Keeps the channel's core alive (borrowed when a scope does); null once moved from or
  // settled.
  detail::CoreOwner core_;
  std::uint64_t wr_id_ = 0;
  std::optional<WorkCompletion> completion_;
};

}  // namespace ibv
