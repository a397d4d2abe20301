// SPDX-License-Identifier: MIT
// Test helper: lets a test order events between its own thread and a helper thread without
// sleeping. The helper thread takes a step only when the test allows one; a std::jthread's stop
// request (its destructor makes one) wakes a helper waiting for permission, so a test that
// returns early (a failed ASSERT, an exception) joins its helper instead of std::terminate.
#pragma once

#include <condition_variable>
#include <mutex>
#include <stop_token>

namespace ibv_test {

/// Permissions for a helper thread's steps, handed out by the test one at a time.
class ThreadSteps {
 public:
  /// Lets the helper take one more step.
  void allow() {
    {
      const std::lock_guard lock(mutex_);
      ++allowed_;
    }
    changed_.notify_all();
  }

  /// Waits until a step is allowed (true; the permission is used up) or `stop` is requested
  /// (false: the test is done with the helper and is about to join it).
  [[nodiscard]] bool next(const std::stop_token& stop) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait(lock, stop, [&] { return allowed_ > 0; })) return false;
    --allowed_;
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable_any changed_;
  int allowed_ = 0;
};

}  // namespace ibv_test
