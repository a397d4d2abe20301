// SPDX-License-Identifier: MIT
// EventLoop: runs ibv::Task coroutines and resumes them when the operations they await complete
// or time out. Run it on its own (run()) or drive it from another loop (run_once()).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <optional>
#include <vector>

#include "ibv/channel/wait_mode.hpp"
#include "ibv/coro/task.hpp"
#include "ibv/duration.hpp"

namespace ibv {

namespace detail {

/// What the loop needs of something a suspended coroutine waits for (an AsyncWork). All are
/// called on the loop's thread; none resumes anything.
struct WaiterOps {
  using Clock = std::chrono::steady_clock;
  /// Whether the coroutine should be resumed now: its event happened, or its deadline passed.
  bool (*ready)(void* waiter, Clock::time_point now);
  /// When it times out.
  Clock::time_point (*deadline)(const void* waiter);
  /// The fd that becomes readable when its event happens after arm() (-1: none, so a loop
  /// that sleeps can not wait for it).
  int (*fd)(const void* waiter);
  /// Arms the fd (one-shot) and takes in what already happened, so that ready() sees it.
  void (*arm)(void* waiter);
  /// Reads and acknowledges the events queued on the fd.
  void (*consume)(void* waiter);
};

}  // namespace detail

/// A single-threaded loop for ibv::Task coroutines: it owns the tasks spawned on it, starts
/// them, and resumes a task suspended on an operation (AsyncWork) once the operation's
/// completion has arrived or its timeout has passed. It polls the completion queues of the
/// channels the awaited operations are on; a pass never blocks.
///
///   ibv::EventLoop loop;
///   loop.spawn(pinger(a));
///   loop.spawn(ponger(b));
///   loop.run();  // until both have finished
///
/// - run(): passes until every spawned task has finished (or the timeout passed). Between
///   passes that resume nothing it waits by its WaitMode: spin (the default: the next pass at
///   once), block (sleep in poll(2) on the completion fds of the channels the suspended
///   operations are on, until a completion or the earliest operation deadline), or
///   spin_then_block (spin for spin_for after the last pass that resumed something, then
///   block). Sleeping follows the race-free sequence: arm every fd (which also takes in what
///   already completed), check every suspended operation, only then sleep; the next pass reads
///   and acknowledges the events. A loop that sleeps needs channels with a completion channel
///   (ChannelBuilder::completion_channel, or a sleeping ChannelBuilder::wait_mode): awaiting an
///   operation on a channel without one throws ibv::Error (state) at the co_await.
/// - run_once(): one pass, for driving the loop from another event loop; to sleep in that
///   loop, see arm_for_sleep(), completion_fds() and next_deadline().
/// - A spawned task that ends with an exception is removed, and the exception comes out of the
///   run() / run_once() that saw it end (the other tasks stay on the loop; run again to go on).
/// - An awaited operation that has completed by the time its task awaits it does not suspend
///   the task, for up to kInlineTurns such awaits in a row after the loop resumed the task;
///   the next one suspends as usual and resumes on the next pass, after the other tasks ready
///   in this one: a task whose requests always complete at once can not starve the others.
/// - Not thread-safe: spawn, run and the tasks all belong to one thread. Not movable (the
///   suspended operations point at it).
/// - Destroying the loop destroys the unfinished tasks (see Task).
class EventLoop {
 public:
  /// A loop that waits by `idle` between passes that resume nothing (see above).
  explicit EventLoop(WaitMode idle = WaitMode::spin()) noexcept : idle_(idle) {}
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  EventLoop(EventLoop&&) = delete;
  EventLoop& operator=(EventLoop&&) = delete;
  ~EventLoop();

  /// Takes `task` over; it starts on the next pass. Throws ibv::Error (invalid_argument) for
  /// a moved-from or already started task.
  void spawn(Task<> task);

  /// One pass, never blocking: resumes the tasks that were ready when it began (just spawned,
  /// or their awaited operation completed or timed out). Returns how many it resumed. Rethrows
  /// the exception of a spawned task that ended with one. Throws ibv::Error (state) when called
  /// from inside one of the loop's own tasks.
  std::size_t run_once();

  /// Passes until every spawned task has finished (true) or `timeout` has passed (false;
  /// the unfinished tasks stay on the loop). Rethrows as run_once().
  bool run(std::optional<Duration> timeout = {});

  // Sleeping in another event loop, race-free, with the loop's tasks suspended on operations:
  //
  //   for (;;) {
  //     loop.run_once();
  //     if (loop.task_count() == 0) break;
  //     if (loop.arm_for_sleep()) {
  //       // sleep until one of loop.completion_fds() is readable (or your own fds), at most
  //       // until loop.next_deadline()
  //     }
  //   }

  /// Arms the completion fd of every suspended operation (taking in what already completed),
  /// then checks them: true when nothing is ready, so the caller may sleep on completion_fds()
  /// until next_deadline(); false when run_once() has work now. The next run_once() reads and
  /// acknowledges the events. Throws ibv::Error (state) when a suspended operation's channel
  /// has no completion channel.
  bool arm_for_sleep();
  /// The distinct completion fds of the channels the suspended operations are on (the set
  /// changes as operations come and go: take it again before each sleep).
  [[nodiscard]] std::vector<int> completion_fds() const;
  /// The earliest deadline of a suspended operation (nullopt: none is suspended).
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> next_deadline() const;

  /// How the loop waits between passes that resume nothing.
  [[nodiscard]] const WaitMode& idle_mode() const noexcept { return idle_; }

  /// How many spawned tasks have not finished.
  [[nodiscard]] std::size_t task_count() const noexcept { return tasks_.size(); }

  /// How many completed awaits in a row a task continues past without suspending, after the
  /// loop resumed it (see the class comment).
  static constexpr std::uint32_t kInlineTurns = 64;
  /// For awaitables (AsyncWork): whether the running task may continue at once past an
  /// operation that has completed, without going through the loop; each true uses one of the
  /// kInlineTurns the task got when the loop last resumed it.
  [[nodiscard]] bool take_inline_turn() noexcept {
    if (inline_turns_ == 0) return false;
    --inline_turns_;
    return true;
  }

  /// For awaitables (AsyncWork): `coroutine`, suspended on `waiter`, is resumed (once) on the
  /// first pass on which `ops.ready(waiter, now)` is true. unwatch() forgets it (call it when
  /// the waiter is destroyed before that), also after it was found ready but before it
  /// resumed. Throws ibv::Error (state) when the loop sleeps and the waiter has no fd.
  void watch(void* waiter, const detail::WaiterOps& ops, std::coroutine_handle<> coroutine);
  /// watch()'s check, for an awaitable that may continue without watching (take_inline_turn):
  /// throws ibv::Error (state) when the loop sleeps and the waiter has no fd, so that such an
  /// await is refused whether or not its operation has completed by then.
  void check_can_sleep_on(const void* waiter, const detail::WaiterOps& ops) const;
  /// Forgets `waiter` (see watch()); nothing if it is not watched.
  void unwatch(const void* waiter) noexcept;

 private:
  friend void detail::notify_task_finished(EventLoop* loop) noexcept;
  struct Watched {
    void* waiter = nullptr;                  // null: a spawned task's start
    const detail::WaiterOps* ops = nullptr;  // null: a spawned task's start
    std::coroutine_handle<> coroutine;
  };
  /// Removes the finished spawned tasks and rethrows the first exception one ended with.
  void reap();
  /// Between passes of run() that resumed nothing: spin, or sleep until `deadline` at most.
  void idle(std::optional<std::chrono::steady_clock::time_point> deadline);

  std::vector<Task<>> tasks_;  // spawned, not reaped yet
  // To resume (waiter null: a task's start), from ready_head_ on: a vector whose capacity stays,
  // so that a pass allocates nothing once the loop has run a while.
  std::vector<Watched> ready_;
  std::size_t ready_head_ = 0;
  std::vector<Watched> watched_;               // suspended on an operation
  std::deque<std::exception_ptr> failures_;    // of reaped tasks, not rethrown yet
  std::uint32_t inline_turns_ = kInlineTurns;  // the running task's (take_inline_turn)
  bool finished_ = false;                      // a spawned task finished since the last reap
  bool running_ = false;                       // inside run_once()
  bool armed_ = false;                         // fds armed: the next pass consumes events
  WaitMode idle_;
  std::chrono::steady_clock::time_point last_progress_;  // of run(): a pass resumed something
};

}  // namespace ibv
