// EventLoop: spawning, the pass that resumes ready coroutines, and reaping finished tasks.
#include "ibv/coro/event_loop.hpp"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "ibv/verbs/error.hpp"

namespace ibv {

namespace detail {

void notify_task_finished(EventLoop* loop) noexcept { loop->finished_ = true; }

}  // namespace detail

EventLoop::~EventLoop() {
  // Destroying a frame destroys the awaitables in it, which unwatch themselves: tasks_ first,
  // while the lists they unwatch from still exist.
  while (!tasks_.empty()) tasks_.pop_back();
}

void EventLoop::spawn(Task<> task) {
  if (!task.valid()) throw_invalid_argument("EventLoop::spawn", "task", "is moved-from");
  task.handle().promise().set_loop(this);
  ready_.push_back({nullptr, nullptr, task.handle()});
  tasks_.push_back(std::move(task));
}

void EventLoop::watch(void* waiter, detail::ReadyCheck ready, std::coroutine_handle<> coroutine) {
  watched_.push_back({waiter, ready, coroutine});
}

void EventLoop::unwatch(const void* waiter) noexcept {
  const auto same = [waiter](const Watched& entry) { return entry.waiter == waiter; };
  std::erase_if(watched_, same);
  std::erase_if(ready_, same);
}

std::size_t EventLoop::run_once() {
  if (running_) {
    throw Error(ErrorKind::state, "EventLoop::run_once", EINVAL,
                "called from inside a task of this loop", "co_await instead of running the loop");
  }
  running_ = true;
  struct Reset {
    explicit Reset(bool& flag) noexcept : flag_(&flag) {}
    Reset(const Reset&) = delete;
    Reset& operator=(const Reset&) = delete;
    Reset(Reset&&) = delete;
    Reset& operator=(Reset&&) = delete;
    ~Reset() { *flag_ = false; }
    bool* flag_;
  };
  const Reset reset(running_);

  // Move what is ready to the queue, then resume only what the queue held at the start, so
  // that a pass ends even when the resumed tasks keep making more work ready.
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < watched_.size();) {
    if (watched_[i].ready(watched_[i].waiter, now)) {
      ready_.push_back(watched_[i]);
      watched_[i] = watched_.back();
      watched_.pop_back();
    } else {
      ++i;
    }
  }
  std::size_t resumed = 0;
  for (std::size_t count = ready_.size(); count > 0 && !ready_.empty(); --count) {
    const Watched next = ready_.front();
    ready_.pop_front();
    next.coroutine.resume();  // a task's exceptions end in its promise: resume() does not throw
    ++resumed;
  }
  reap();
  return resumed;
}

bool EventLoop::run(std::optional<std::chrono::nanoseconds> timeout) {
  const auto deadline =
      timeout ? std::optional(std::chrono::steady_clock::now() + *timeout) : std::nullopt;
  while (!tasks_.empty() || !failures_.empty()) {
    run_once();
    if (tasks_.empty()) break;
    if (deadline && std::chrono::steady_clock::now() >= *deadline) return false;
  }
  return true;
}

void EventLoop::reap() {
  if (finished_) {
    finished_ = false;
    for (std::size_t i = 0; i < tasks_.size();) {
      if (tasks_[i].done()) {
        if (auto failure = tasks_[i].handle().promise().exception()) failures_.push_back(failure);
        tasks_.erase(tasks_.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        ++i;
      }
    }
  }
  if (!failures_.empty()) {
    const auto failure = failures_.front();
    failures_.pop_front();
    std::rethrow_exception(failure);
  }
}

}  // namespace ibv
