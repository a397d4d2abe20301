// SPDX-License-Identifier: MIT
// EventLoop: spawning, the pass that resumes ready coroutines, reaping finished tasks, and
// sleeping on the completion fds between passes.
#include "ibv/coro/event_loop.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <limits>
#include <string>
#include <utility>

#include "ibv/error.hpp"

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

void EventLoop::watch(void* waiter, const detail::WaiterOps& ops,
                      std::coroutine_handle<> coroutine) {
  check_can_sleep_on(waiter, ops);
  watched_.push_back({waiter, &ops, coroutine});
}

void EventLoop::check_can_sleep_on(const void* waiter, const detail::WaiterOps& ops) const {
  if (idle_.sleeps() && ops.fd(waiter) < 0) {
    throw Error(ErrorKind::state, "EventLoop", EINVAL,
                "this loop sleeps between passes (WaitMode " +
                    std::string(to_string(idle_.strategy)) +
                    "), and the awaited operation's channel has no completion channel",
                "build the channel with ChannelBuilder::completion_channel or a sleeping "
                "wait_mode, or use a spinning loop");
  }
}

void EventLoop::unwatch(const void* waiter) noexcept {
  const auto same = [waiter](const Watched& entry) { return entry.waiter == waiter; };
  std::erase_if(watched_, same);
  ready_.erase(
      std::remove_if(ready_.begin() + static_cast<std::ptrdiff_t>(ready_head_), ready_.end(), same),
      ready_.end());
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

  if (armed_) {
    // Read and acknowledge the events of the last sleep before anything is armed again.
    armed_ = false;
    std::vector<int> consumed;
    for (const auto& entry : watched_) {
      const int fd = entry.ops->fd(entry.waiter);
      if (fd < 0 || std::find(consumed.begin(), consumed.end(), fd) != consumed.end()) continue;
      consumed.push_back(fd);
      entry.ops->consume(entry.waiter);
    }
  }
  // Move what is ready to the queue, then resume only what the queue held at the start, so
  // that a pass ends even when the resumed tasks keep making more work ready.
  const auto now = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < watched_.size();) {
    if (watched_[i].ops->ready(watched_[i].waiter, now)) {
      ready_.push_back(watched_[i]);
      watched_[i] = watched_.back();
      watched_.pop_back();
    } else {
      ++i;
    }
  }
  std::size_t resumed = 0;
  for (std::size_t count = ready_.size() - ready_head_; count > 0 && ready_head_ < ready_.size();
       --count) {
    const Watched next = ready_[ready_head_++];
    inline_turns_ = kInlineTurns;  // each resumed task's own
    next.coroutine.resume();  // a task's exceptions end in its promise: resume() does not throw
    ++resumed;
  }
  // Forget what was resumed; what the resumed tasks made ready waits for the next pass.
  ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(ready_head_));
  ready_head_ = 0;
  reap();
  return resumed;
}

bool EventLoop::run(std::optional<Duration> timeout) {
  const auto deadline =
      timeout ? std::optional(std::chrono::steady_clock::now() + *timeout) : std::nullopt;
  last_progress_ = std::chrono::steady_clock::now();
  while (!tasks_.empty() || !failures_.empty()) {
    const auto resumed = run_once();
    if (tasks_.empty()) break;
    const auto now = std::chrono::steady_clock::now();
    if (deadline && now >= *deadline) return false;
    if (resumed > 0) {
      last_progress_ = now;
    } else {
      idle(deadline);
    }
  }
  return true;
}

void EventLoop::idle(std::optional<std::chrono::steady_clock::time_point> deadline) {
  using Clock = std::chrono::steady_clock;
  if (idle_.strategy == WaitStrategy::spin) return;
  if (idle_.strategy == WaitStrategy::spin_then_block &&
      Clock::now() - last_progress_ < idle_.spin_for) {
    return;
  }
  if (!arm_for_sleep()) return;
  auto until = next_deadline();
  if (deadline && (!until || *deadline < *until)) until = deadline;
  std::vector<pollfd> fds;
  for (const int fd : completion_fds()) fds.push_back({.fd = fd, .events = POLLIN, .revents = 0});
  int timeout_ms = -1;  // no deadline: only a completion ends the sleep
  if (until) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(*until - Clock::now()).count();
    timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, std::numeric_limits<int>::max()));
  }
  // EINTR or a wake-up without a completion just means another pass.
  (void)::poll(fds.data(), fds.size(), timeout_ms);
}

bool EventLoop::arm_for_sleep() {
  if (ready_head_ < ready_.size()) return false;
  for (const auto& entry : watched_) {
    if (entry.ops->fd(entry.waiter) < 0) {
      throw Error(ErrorKind::state, "EventLoop::arm_for_sleep", EINVAL,
                  "a suspended operation's channel has no completion channel",
                  "build the channel with ChannelBuilder::completion_channel or a sleeping "
                  "wait_mode");
    }
  }
  armed_ = true;
  for (const auto& entry : watched_) entry.ops->arm(entry.waiter);
  const auto now = std::chrono::steady_clock::now();
  return std::none_of(watched_.begin(), watched_.end(),
                      [now](const Watched& entry) { return entry.ops->ready(entry.waiter, now); });
}

std::vector<int> EventLoop::completion_fds() const {
  std::vector<int> fds;
  for (const auto& entry : watched_) {
    const int fd = entry.ops->fd(entry.waiter);
    if (fd >= 0 && std::find(fds.begin(), fds.end(), fd) == fds.end()) fds.push_back(fd);
  }
  return fds;
}

std::optional<std::chrono::steady_clock::time_point> EventLoop::next_deadline() const {
  std::optional<std::chrono::steady_clock::time_point> earliest;
  for (const auto& entry : watched_) {
    const auto deadline = entry.ops->deadline(entry.waiter);
    if (!earliest || deadline < *earliest) earliest = deadline;
  }
  return earliest;
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
