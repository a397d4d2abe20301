// SPDX-License-Identifier: MIT
// Task<T>: the coroutine type of the library's C++20 coroutine interface. A function returning
// ibv::Task<T> may co_await the library's operations (async_work.hpp, async_channel.hpp) and
// other tasks; tasks run on an ibv::EventLoop (event_loop.hpp).
#pragma once

#include <cerrno>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "ibv/error.hpp"

namespace ibv {

class EventLoop;

namespace detail {

/// Tells `loop` that one of its spawned tasks has finished (defined in event_loop.cpp).
void notify_task_finished(EventLoop* loop) noexcept;

/// What every Task's promise has, whatever its result: the coroutine to resume when the task
/// finishes (the task that awaited it), the loop the task runs on, and its exception.
class TaskPromiseBase {
 public:
  /// Tasks are lazy: nothing runs until the task is awaited or spawned on a loop.
  // Members, not static: the compiler calls them on the promise object.
  // NOLINTNEXTLINE(readability-convert-member-functions-to-static)
  std::suspend_always initial_suspend() noexcept { return {}; }

  /// At the end: a task that finished while its awaiter was still starting it hands control
  /// back to that start (Task::Awaiter::await_suspend, which lets the awaiter go on without
  /// nesting); otherwise control goes straight to the awaiting task (symmetric transfer); a
  /// spawned task tells its loop.
  struct FinalAwaiter {
    // NOLINTNEXTLINE(readability-convert-member-functions-to-static)
    [[nodiscard]] bool await_ready() const noexcept { return false; }
    template <typename Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) noexcept {
      TaskPromiseBase& promise = self.promise();
      if (promise.start_ == Start::starting) {
        promise.start_ = Start::finished_while_starting;
        return std::noop_coroutine();
      }
      if (promise.continuation_) return promise.continuation_;
      if (promise.loop_ != nullptr) notify_task_finished(promise.loop_);
      return std::noop_coroutine();
    }
    // NOLINTNEXTLINE(readability-convert-member-functions-to-static)
    void await_resume() const noexcept {}
  };
  // NOLINTNEXTLINE(readability-convert-member-functions-to-static)
  FinalAwaiter final_suspend() noexcept { return {}; }

  void unhandled_exception() noexcept { exception_ = std::current_exception(); }

  /// The loop this task runs on (null until it is spawned or awaited by a task that runs).
  [[nodiscard]] EventLoop* loop() const noexcept { return loop_; }
  void set_loop(EventLoop* loop) noexcept { loop_ = loop; }
  void set_continuation(std::coroutine_handle<> continuation) noexcept {
    continuation_ = continuation;
  }
  /// Rethrows the exception the task ended with, if any.
  void rethrow_if_failed() const {
    if (exception_) std::rethrow_exception(exception_);
  }
  [[nodiscard]] std::exception_ptr exception() const noexcept { return exception_; }

  /// Task::Awaiter's start of the task: between begin_start() and end_start() the awaiter runs
  /// the task in its await_suspend; end_start() says whether the task finished meanwhile.
  void begin_start() noexcept { start_ = Start::starting; }
  bool end_start() noexcept {
    const bool finished = start_ == Start::finished_while_starting;
    start_ = Start::none;
    return finished;
  }

 private:
  /// Whether the task is being started by its awaiter's await_suspend, and finished during it.
  enum class Start : std::uint8_t { none, starting, finished_while_starting };
  Start start_ = Start::none;
  std::coroutine_handle<> continuation_;
  EventLoop* loop_ = nullptr;
  std::exception_ptr exception_;
};

/// The result slot of Task<T> (none for Task<void>).
template <typename T>
class TaskPromiseResult : public TaskPromiseBase {
 public:
  template <typename Value>
  requires std::is_constructible_v<T, Value&&>
  void return_value(Value&& value) { value_.emplace(std::forward<Value>(value)); }
  T take_result() {
    rethrow_if_failed();
    return std::move(*value_);
  }

 private:
  std::optional<T> value_;
};

template <>
class TaskPromiseResult<void> : public TaskPromiseBase {
 public:
  void return_void() noexcept {}
  void take_result() const { rethrow_if_failed(); }
};

/// The promise types a library awaitable may suspend: those of ibv::Task (they know their loop).
template <typename Promise>
concept TaskPromise = std::is_base_of_v<TaskPromiseBase, Promise>;

}  // namespace detail

/// A coroutine that produces a T (or nothing, for Task<>) and may co_await the library's
/// operations and other tasks. Lazy: the body starts when the task is awaited (`co_await
/// std::move(task)` or `co_await make_task()`) or spawned on an EventLoop, never on its own.
///
/// - The awaiting task gets the value, or the exception the task ended with.
/// - Move-only. Destroying a Task destroys its coroutine frame, finished or not; locals are
///   destroyed as for any scope exit. An operation the task was suspended on is settled by its
///   PendingWork (see AsyncWork: it waits for the completion, bounded by the channel's drop
///   timeout, so the device never writes into freed buffers).
/// - A task runs on one thread, on the loop that spawned it (or its awaiter's loop).
template <typename T = void>
class [[nodiscard]] Task {
 public:
  /// The coroutine's promise (C++20 coroutine machinery: not for direct use).
  struct promise_type : detail::TaskPromiseResult<T> {
    /// The Task that owns the new coroutine.
    Task get_return_object() noexcept {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
  };
  /// The coroutine handle type.
  using Handle = std::coroutine_handle<promise_type>;

  /// A task without a coroutine (valid() is false).
  Task() noexcept = default;
  /// Takes `other`'s coroutine; `other` is left without one.
  Task(Task&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  /// Destroys this task's coroutine, if any, then takes `other`'s.
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() { reset(); }

  /// Whether this object holds a coroutine (false after a move).
  [[nodiscard]] bool valid() const noexcept { return static_cast<bool>(handle_); }
  /// Whether the coroutine has run to its end.
  [[nodiscard]] bool done() const noexcept { return handle_ && handle_.done(); }

  /// Awaiting a task starts it (on the awaiting task's loop) and resumes the awaiter with its
  /// value, or rethrows its exception, when it finishes. Await each task once.
  class Awaiter {
   public:
    /// Awaits the coroutine `handle` (operator co_await makes it).
    explicit Awaiter(Handle handle) noexcept : handle_(handle) {}
    /// True when there is nothing to run: no coroutine, or one that has finished.
    [[nodiscard]] bool await_ready() const noexcept { return !handle_ || handle_.done(); }
    /// Runs the task here until it first suspends or finishes. Finished (the common case for
    /// a task whose requests complete inside the post): returns false, so the awaiter goes on
    /// without a nested resume; a loop of such awaits runs in constant stack whether or not
    /// the compiler turns symmetric transfer into a tail call (GCC does not at -O1 with ASan,
    /// where 200,000 awaits in a row overflowed the stack). Suspended: the task resumes the
    /// awaiter when it finishes.
    template <detail::TaskPromise Promise>
    bool await_suspend(std::coroutine_handle<Promise> awaiter) noexcept {
      auto& promise = handle_.promise();
      promise.set_loop(awaiter.promise().loop());
      promise.set_continuation(awaiter);
      promise.begin_start();
      handle_.resume();
      return !promise.end_start();
    }
    /// The task's value, or its exception rethrown; ibv::Error (state) for a moved-from task.
    T await_resume() {
      if (!handle_) throw Error(ErrorKind::state, "ibv::Task", EINVAL, "awaited a moved-from task");
      return handle_.promise().take_result();
    }

   private:
    Handle handle_;
  };
  /// `co_await std::move(task)` or `co_await make_task()`: see Awaiter.
  Awaiter operator co_await() && noexcept { return Awaiter(handle_); }
  /// `co_await task`: the same; the Task still owns the coroutine.
  Awaiter operator co_await() & noexcept { return Awaiter(handle_); }

  /// The coroutine (for EventLoop); the Task still owns it.
  [[nodiscard]] Handle handle() const noexcept { return handle_; }

 private:
  explicit Task(Handle handle) noexcept : handle_(handle) {}
  void reset() noexcept {
    if (handle_) std::exchange(handle_, {}).destroy();
  }
  Handle handle_;
};

}  // namespace ibv
