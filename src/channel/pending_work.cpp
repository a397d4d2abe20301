// SPDX-License-Identifier: MIT
// PendingWork: polling, waiting, and the destructor that settles unpolled work.
#include "ibv/channel/pending_work.hpp"

#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>

#include "channel/channel_core.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv {

namespace {
/// `core` (left null) as a counted reference: a borrowed one, of a handle moved out of the
/// scope that owned the core for it, takes a share.
detail::CoreOwner owning(detail::CoreOwner&& core) noexcept {
  if (core.owns() || !core) return std::move(core);
  detail::CoreOwner shared(core.get(), core.get());
  core.reset();
  return shared;
}
}  // namespace

PendingWork::PendingWork(PendingWork&& other) noexcept
    : core_(owning(std::move(other.core_))), wr_id_(other.wr_id_), completion_(other.completion_) {
  other.completion_.reset();  // a moved-from handle tracks nothing
}

PendingWork& PendingWork::operator=(PendingWork&& other) noexcept {
  if (this != &other) {
    settle();
    core_ = owning(std::move(other.core_));
    wr_id_ = other.wr_id_;
    completion_ = other.completion_;
    other.completion_.reset();
  }
  return *this;
}

bool PendingWork::refresh() {
  if (!completion_ && core_) {
    if (const WorkCompletion* taken = core_->take(wr_id_)) completion_ = *taken;
  }
  return completion_.has_value();
}

// Flattened: refresh() in line, one frame per poll of a spinning caller.
[[gnu::flatten]] const std::optional<WorkCompletion>& PendingWork::poll() & {
  refresh();
  return completion_;
}

std::optional<WorkCompletion> PendingWork::wait_for(Duration timeout) {
  if (timeout.count() < 0) {
    throw_invalid_argument("PendingWork::wait_for", "timeout " + detail::duration_text(timeout),
                           "is negative (0 polls once; the request stays pending)");
  }
  if (!completion_ && core_) completion_ = core_->wait(wr_id_, timeout);
  if (completion_ && !completion_->ok()) throw WorkError(*completion_, "PendingWork::wait");
  return completion_;
}

const WorkCompletion& PendingWork::wait() & {
  // The common case first: complete by now, or by one poll.
  if (!completion_ && core_) [[likely]] {
    if (const WorkCompletion* taken = core_->take(wr_id_)) {
      completion_ = *taken;
      if (taken->ok()) [[likely]]
        return *completion_;
    }
  }
  return wait_rest();
}

// Out of line, so that wait()'s first look stays a small frame. A failure taken by wait() is thrown
// by wait_for() below, which finds it in completion_.
[[gnu::noinline]] const WorkCompletion& PendingWork::wait_rest() {
  if (!core_ && !completion_) {
    throw Error(ErrorKind::state, "PendingWork::wait", EINVAL, "the handle was moved from");
  }
  const Duration limit = completion_ ? Duration{} : core_->timeouts().operation;
  if (wait_for(limit)) return *completion_;
  throw Error(ErrorKind::timeout, "PendingWork::wait", ETIMEDOUT,
              "wr_id " + std::to_string(wr_id_) + " did not complete within " +
                  detail::duration_text(limit),
              "it is still pending: wait again, or let the handle go (its destructor waits "
              "once more, then cancels it, which breaks the channel)");
}

Duration PendingWork::operation_timeout() const noexcept {
  return core_ ? core_->timeouts().operation : Duration{};
}

void PendingWork::cancel(std::string_view operation, std::string_view reason) noexcept {
  if (core_ && !completion_) core_->cancel(wr_id_, operation, reason);
  forget_core();
}

void PendingWork::settle() noexcept {
  if (!core_ || completion_) return;
  try {
    const auto completion = core_->wait(wr_id_, core_->timeouts().drop);
    if (!completion) {
      const std::string reason =
          detail::timed_out("a PendingWork dropped unpolled:", wr_id_, core_->timeouts().drop);
      std::fprintf(stderr,
                   "ibverbs-cpp: %s; cancelled (the channel's queue pair is moved to the error "
                   "state, and the channel refuses further work)\n",
                   reason.c_str());
      core_->cancel(wr_id_, "PendingWork::~PendingWork", reason);
    } else if (!completion->ok()) {
      std::fprintf(stderr, "ibverbs-cpp: PendingWork dropped unpolled, and it failed: %s\n",
                   completion->to_string().c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ibverbs-cpp: PendingWork for wr_id %llu: %s\n",
                 static_cast<unsigned long long>(wr_id_), error.what());
  }
  forget_core();
}

}  // namespace ibv
