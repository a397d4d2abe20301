// SPDX-License-Identifier: MIT
// AsyncWork: polling a PendingWork on behalf of a suspended task, its timeout and cancelling.
#include "ibv/coro/async_work.hpp"

#include <cerrno>
#include <string>
#include <utility>

#include "channel/channel_core.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv {

AsyncWork::AsyncWork(PendingWork work, std::optional<Duration> timeout, const char* operation)
    : work_(std::move(work)),
      timeout_(timeout.value_or(work_.operation_timeout())),
      operation_(operation) {
  if (!work_.core_ && !work_.is_complete()) {
    throw_invalid_argument(operation_, "work", "is a moved-from PendingWork");
  }
  if (timeout_->count() <= 0) [[unlikely]]  // names the operation only then (strlen)
    detail::check_positive_timeout(*timeout_, operation_);
}

AsyncWork::AsyncWork(AsyncWork&& other) noexcept
    : work_(std::move(other.work_)),
      deadline_(other.deadline_),
      timeout_(other.timeout_),
      operation_(other.operation_),
      timed_out_(other.timed_out_),
      looked_(other.looked_) {}

void AsyncWork::check_loop(const EventLoop* loop) const {
  if (loop == nullptr) {
    throw Error(ErrorKind::state, operation_, EINVAL, "awaited in a task that runs on no loop",
                "spawn the task on an ibv::EventLoop");
  }
  if (loop->idle_mode().sleeps()) loop->check_can_sleep_on(this, kWaiterOps);  // refused at once
}

void AsyncWork::watch(EventLoop& loop, std::coroutine_handle<> coroutine) {
  deadline_ = std::chrono::steady_clock::now() + time_limit();
  loop.watch(this, kWaiterOps, coroutine);
  loop_ = &loop;
}

bool AsyncWork::ready(void* self, std::chrono::steady_clock::time_point now) {
  auto& work = *static_cast<AsyncWork*>(self);
  if (work.work_.refresh()) return true;
  if (now >= work.deadline_) work.timed_out_ = true;
  return work.timed_out_;
}

const detail::WaiterOps AsyncWork::kWaiterOps{
    .ready = &AsyncWork::ready,
    .deadline = &AsyncWork::deadline,
    .fd = &AsyncWork::fd,
    .arm = &AsyncWork::arm,
    .consume = &AsyncWork::consume,
};

std::chrono::steady_clock::time_point AsyncWork::deadline(const void* self) {
  return static_cast<const AsyncWork*>(self)->deadline_;
}

int AsyncWork::fd(const void* self) {
  const auto& core = static_cast<const AsyncWork*>(self)->work_.core_;
  if (!core || !core->completion_queue().channel()) return -1;
  return core->completion_fd();
}

void AsyncWork::arm(void* self) {
  if (const auto& core = static_cast<AsyncWork*>(self)->work_.core_) core->arm_completion_fd();
}

void AsyncWork::consume(void* self) {
  if (const auto& core = static_cast<AsyncWork*>(self)->work_.core_) {
    core->consume_completion_events();
  }
}

WorkCompletion AsyncWork::resume_slowly() {
  if (work_.refresh()) {
    const WorkCompletion& completion = *work_.completion_;
    if (!completion.ok()) throw WorkError(completion, operation_);
    return completion;
  }
  const std::string reason = detail::timed_out("an awaited request", work_.wr_id(), time_limit());
  work_.cancel(operation_, reason);  // operation_: a string literal (AsyncWork's contract)
  detail::throw_given_up(operation_, reason);
}

}  // namespace ibv
