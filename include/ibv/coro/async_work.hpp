// SPDX-License-Identifier: MIT
// AsyncWork: the awaitable of one posted request (a PendingWork) for ibv::Task coroutines, with
// a timeout. Every operation of the coroutine interface (async_channel.hpp,
// async_multi_channel.hpp) returns one.
#pragma once

#include <chrono>
#include <coroutine>
#include <optional>
#include <utility>

#include "ibv/channel/pending_work.hpp"
#include "ibv/coro/event_loop.hpp"
#include "ibv/coro/task.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

namespace detail {
/// Selects AsyncWork's constructor that posts in place.
struct PostInPlace {};
}  // namespace detail

/// `co_await` on it, inside an ibv::Task running on an EventLoop, gives the request's
/// WorkCompletion, as the blocking calls do:
/// - a failed completion throws ibv::WorkError;
/// - no completion within the timeout (counted from the co_await that suspends the task for
///   it) throws ibv::Error (timeout) after cancelling the request as a blocking call does: the
///   channel's queue pair goes to the error state, the device touches none of its buffers
///   afterwards, and the channel refuses further work.
/// The completion is looked for once (one poll) before the task suspends: a send-queue
/// request's by the coroutine call that posts it, right after the post (as a blocking call
/// looks), a receive's by co_await. A request that has completed by then (Soft-RoCE and fast
/// NICs often complete a small one by its first poll) continues the task at once, without the loop
/// or a clock read, for up to EventLoop::kInlineTurns such awaits in a row, so that a task that
/// posts and awaits in a loop can not starve the loop's other tasks. Otherwise its loop resumes the
/// task on the first pass that finds the completion (or the deadline passed).
///
/// Destroyed without having delivered its completion (never awaited, or its task destroyed
/// while suspended on it), it settles the request as its PendingWork does: it waits for the
/// completion, at most the channel's drop timeout, then cancels it and logs. So the device
/// never touches buffers that the program believes free, at the price of that bounded wait in
/// the destructor (let operations finish or time out before destroying their tasks).
///
/// Move-only, and only movable before it is awaited.
class [[nodiscard]] AsyncWork {
 public:
  /// Awaits `work` for at most `timeout` (default: its channel's operation timeout).
  /// `operation` names the call in errors; it must outlive the AsyncWork (a string literal).
  /// Throws ibv::Error (invalid_argument) for a timeout that is not positive or a moved-from
  /// `work` (the request is then settled as a dropped PendingWork).
  explicit AsyncWork(PendingWork work, std::optional<Duration> timeout = {},
                     const char* operation = "ibv::AsyncWork");
  /// For the coroutine calls (async_channel.hpp, async_multi_channel.hpp), which have checked
  /// `timeout` already: awaits the request that `post()` posts, its PendingWork made in place
  /// (no move of the handle, no second check), for at most `timeout` (default: its channel's
  /// operation timeout, looked up only if the task suspends). `looked`: `post()` has polled
  /// for the completion once already (detail::CoroutinePost), so co_await does not.
  template <typename Post>
  AsyncWork(detail::PostInPlace /*tag*/, Post&& post, const std::optional<Duration>& timeout,
            const char* operation, bool looked)
      : work_(std::forward<Post>(post)()),
        timeout_(timeout),
        operation_(operation),
        looked_(looked) {}
  /// Takes `other`'s request (allowed only before it is awaited).
  AsyncWork(AsyncWork&& other) noexcept;
  AsyncWork& operator=(AsyncWork&&) = delete;
  AsyncWork(const AsyncWork&) = delete;
  AsyncWork& operator=(const AsyncWork&) = delete;
  /// Forgets the loop's watch, if any; the PendingWork then settles a request nobody took.
  ~AsyncWork() {
    if (loop_ != nullptr) [[unlikely]]
      loop_->unwatch(this);
  }

  /// False: the task's loop decides in await_suspend (see above).
  // NOLINTNEXTLINE(readability-convert-member-functions-to-static): called on the awaitable
  [[nodiscard]] bool await_ready() const noexcept { return false; }
  /// Continues the task at once (false) when the request has completed and the loop grants an
  /// inline turn; else suspends it (true) until its loop sees the completion or the deadline
  /// pass. Throws ibv::Error (state) if the task does not run on a loop.
  template <detail::TaskPromise Promise>
  bool await_suspend(std::coroutine_handle<Promise> coroutine) {
    EventLoop* loop = coroutine.promise().loop();
    if (loop == nullptr || loop->idle_mode().sleeps()) [[unlikely]]
      check_loop(loop);
    // Complete by its one look (at the post, or this poll), and the loop grants an inline
    // turn: the task goes on at once.
    const bool complete = work_.is_complete() || (!looked_ && work_.refresh());
    if (complete && loop->take_inline_turn()) [[likely]]
      return false;
    watch(*loop, coroutine);
    return true;
  }
  /// The completion; throws ibv::WorkError (failed) or ibv::Error (timeout), see above.
  WorkCompletion await_resume() {
    loop_ = nullptr;  // the loop forgets a waiter when it resumes it
    // The common case inline: the completion was taken in by await_suspend() or the loop's ready().
    if (work_.completion_ && work_.completion_->ok()) [[likely]]
      return *work_.completion_;
    return resume_slowly();
  }

  /// The request's handle (e.g. for its wr_id).
  [[nodiscard]] const PendingWork& work() const noexcept { return work_; }

 private:
  /// What the loop calls (detail::WaiterOps), on the request's channel.
  static const detail::WaiterOps kWaiterOps;
  static bool ready(void* self, std::chrono::steady_clock::time_point now);
  static std::chrono::steady_clock::time_point deadline(const void* self);
  static int fd(const void* self);
  static void arm(void* self);
  static void consume(void* self);
  /// await_suspend()'s checks of a loop that is null (throws ibv::Error, state) or sleeps
  /// (refuses, at once, a channel without a completion fd).
  void check_loop(const EventLoop* loop) const;
  /// Suspends the task on `loop` until its completion or deadline (time_limit() from now).
  void watch(EventLoop& loop, std::coroutine_handle<> coroutine);
  /// How long the task waits once suspended: the timeout given, or the channel's.
  [[nodiscard]] Duration time_limit() const noexcept {
    return timeout_ ? *timeout_ : work_.operation_timeout();
  }
  /// await_resume() past its common case: a failed completion, or none (timed out).
  WorkCompletion resume_slowly();

  PendingWork work_;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<Duration> timeout_;  // none: the channel's operation timeout (time_limit())
  const char* operation_;
  EventLoop* loop_ = nullptr;  // while suspended on it (watched)
  bool timed_out_ = false;
  bool looked_ = false;  // the post polled for the completion once (see await_suspend)
};

}  // namespace ibv
