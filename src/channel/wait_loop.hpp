// SPDX-License-Identifier: MIT
// Private: the one wait loop behind every completion wait of a WaitMode: a Channel's
// (ChannelCore::wait_until, one completion queue) and a MultiChannel's receive from any peer
// (several queues on one completion channel). Spin, or arm / check / sleep without a race.
#pragma once

#include <algorithm>
#include <chrono>

#include "ibv/channel/wait_mode.hpp"

namespace ibv::detail {

/// Calls `done()` (which polls and says whether the wait is over) until it returns true or
/// `deadline` passes, waiting between calls as `mode` says:
/// - spin (and the first spin_for of spin_then_block): call again at once, reading the clock
///   every 32 calls and passing it to `tick(now)`;
/// - block (and spin_then_block after its spin): `done()`, then `arm()` (request a
///   notification on every queue and take in what completed before it: a completion after
///   arming raises an event, one before is found by the check that follows), `done()` again,
///   `tick(now)`, then `sleep(time left)` on the completion channel, and round again.
/// Returns whether `done()` returned true.
template <typename Done, typename Arm, typename Sleep, typename Tick>
bool wait_by_mode(const WaitMode& mode, std::chrono::steady_clock::time_point deadline, Done&& done,
                  Arm&& arm, Sleep&& sleep, Tick&& tick) {
  using Clock = std::chrono::steady_clock;
  // The clock is read every few dozen empty polls (a poll costs far less than the timeouts'
  // millisecond granularity).
  constexpr unsigned kPollsPerClockRead = 32;
  if (mode.strategy != WaitStrategy::block) {
    const auto spin_end = mode.strategy == WaitStrategy::spin
                              ? deadline
                              : std::min(deadline, Clock::now() + mode.spin_for);
    for (unsigned polls = 1;; ++polls) {
      if (done()) return true;
      if (polls % kPollsPerClockRead == 0) {
        const auto now = Clock::now();
        if (now >= spin_end) break;
        tick(now);
      }
    }
    if (mode.strategy == WaitStrategy::spin) return false;
  }
  for (;;) {
    if (done()) return true;
    arm();
    if (done()) return true;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    tick(now);
    sleep(Clock::duration(deadline - now));
  }
}

}  // namespace ibv::detail
