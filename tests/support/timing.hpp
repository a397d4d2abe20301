// SPDX-License-Identifier: MIT
// Clock helpers the test files share (one definition: the test targets are unity builds).
#pragma once

#include <chrono>
#include <ctime>

namespace ibv_test {

/// CPU time the calling thread has used so far.
inline std::chrono::nanoseconds thread_cpu_time() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return std::chrono::seconds(now.tv_sec) + std::chrono::nanoseconds(now.tv_nsec);
}

/// Milliseconds of the steady clock since `start`.
inline double milliseconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace ibv_test
