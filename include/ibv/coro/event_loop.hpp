// EventLoop: runs ibv::Task coroutines and resumes them when the operations they await complete
// or time out. Run it on its own (run()) or drive it from another loop (run_once()).
#pragma once

#include <chrono>
#include <coroutine>
#include <cstddef>
#include <deque>
#include <exception>
#include <optional>
#include <vector>

#include "ibv/coro/task.hpp"

namespace ibv {

namespace detail {

/// How the loop asks something a suspended coroutine waits for (an AsyncWork) whether the
/// coroutine should be resumed now: its event happened, or its deadline (compare with `now`)
/// has passed. Called on the loop's thread; it must not resume anything itself.
using ReadyCheck = bool (*)(void* waiter, std::chrono::steady_clock::time_point now);

}  // namespace detail

/// A single-threaded loop for ibv::Task coroutines: it owns the tasks spawned on it, starts
/// them, and resumes a task suspended on an operation (AsyncWork) once the operation's
/// completion has arrived or its timeout has passed. It polls the completion queues of the
/// channels the awaited operations are on; it never blocks in a pass.
///
///   ibv::EventLoop loop;
///   loop.spawn(pinger(a));
///   loop.spawn(ponger(b));
///   loop.run();  // until both have finished
///
/// - run(): passes until every spawned task has finished (or the timeout passed); while
///   nothing is ready it spins (polls again at once).
/// - run_once(): one pass, for driving the loop from another event loop.
/// - A spawned task that ends with an exception is removed, and the exception comes out of the
///   run() / run_once() that saw it end (the other tasks stay on the loop; run again to go on).
/// - Not thread-safe: spawn, run and the tasks all belong to one thread. Not movable (the
///   suspended operations point at it).
/// - Destroying the loop destroys the unfinished tasks (see Task).
class EventLoop {
 public:
  EventLoop() = default;
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
  bool run(std::optional<std::chrono::nanoseconds> timeout = {});

  /// How many spawned tasks have not finished.
  [[nodiscard]] std::size_t task_count() const noexcept { return tasks_.size(); }

  /// For awaitables (AsyncWork): `coroutine`, suspended on `waiter`, is resumed (once) on the
  /// first pass on which `ready(waiter, now)` is true. unwatch() forgets it (call it when the
  /// waiter is destroyed before that), also after it was found ready but before it resumed.
  void watch(void* waiter, detail::ReadyCheck ready, std::coroutine_handle<> coroutine);
  void unwatch(const void* waiter) noexcept;

 private:
  friend void detail::notify_task_finished(EventLoop* loop) noexcept;
  struct Watched {
    void* waiter = nullptr;  // null: a spawned task's start
    detail::ReadyCheck ready = nullptr;
    std::coroutine_handle<> coroutine;
  };
  /// Removes the finished spawned tasks and rethrows the first exception one ended with.
  void reap();

  std::vector<Task<>> tasks_;                // spawned, not reaped yet
  std::deque<Watched> ready_;                // to resume (waiter null: a task's start)
  std::vector<Watched> watched_;             // suspended on an operation
  std::deque<std::exception_ptr> failures_;  // of reaped tasks, not rethrown yet
  bool finished_ = false;                    // a spawned task finished since the last reap
  bool running_ = false;                     // inside run_once()
};

}  // namespace ibv
