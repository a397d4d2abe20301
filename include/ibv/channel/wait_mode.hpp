// SPDX-License-Identifier: MIT
// WaitMode: how a Channel (and a MultiChannel or Node) waits for completions: spinning on the
// completion queue, sleeping on a completion channel, or spinning a while and then sleeping.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "ibv/duration.hpp"

namespace ibv {

/// The ways of waiting for a completion.
enum class WaitStrategy : std::uint8_t {
  /// Poll the completion queue in a loop: the lowest latency, one core busy while waiting.
  spin,
  /// Sleep on the completion channel's fd until a completion arrives (poll; if nothing, arm
  /// the queue; poll again; sleep until the deadline; on waking, take the events and repeat):
  /// no CPU time while waiting, a wake-up (a few microseconds or more) per completion.
  block,
  /// Spin for WaitMode::spin_for, then block: short waits stay fast, long ones sleep.
  spin_then_block,
};

/// Name of a WaitStrategy, e.g. "spin_then_block".
[[nodiscard]] constexpr std::string_view to_string(WaitStrategy strategy) noexcept {
  switch (strategy) {
    case WaitStrategy::spin: return "spin";
    case WaitStrategy::block: return "block";
    case WaitStrategy::spin_then_block: return "spin_then_block";
  }
  return "unknown";
}

/// How every wait of a channel runs: blocking calls, PendingWork::wait, the end of a scope,
/// waiting for room in the send queue, and a Node's barriers. Every wait still ends at its
/// deadline (ibv::Error, timeout; test:
/// `WaitModeTest.AWaitTimesOutAtItsDeadlineAndCancelsItsRequest`) whatever the mode. Set with
/// ChannelBuilder::wait_mode (or the MultiChannelBuilder's / NodeBuilder's). The default spins, as
/// channels always did.
struct WaitMode {
  /// Spin, block, or spin then block.
  WaitStrategy strategy = WaitStrategy::spin;
  /// For spin_then_block: how long to spin before sleeping (positive). Ignored otherwise.
  Duration spin_for{};

  /// Poll the completion queue until the deadline: the lowest latency, one core busy.
  [[nodiscard]] static constexpr WaitMode spin() noexcept { return {}; }
  /// Sleep on the completion channel until a completion or the deadline.
  [[nodiscard]] static constexpr WaitMode block() noexcept {
    return {.strategy = WaitStrategy::block, .spin_for = {}};
  }
  /// Spin for `spin_for` (positive), then sleep as block().
  [[nodiscard]] static constexpr WaitMode spin_then_block(Duration spin_for) noexcept {
    return {.strategy = WaitStrategy::spin_then_block, .spin_for = spin_for};
  }
  /// Whether waits of this mode sleep on a completion channel at some point.
  [[nodiscard]] constexpr bool sleeps() const noexcept { return strategy != WaitStrategy::spin; }

  friend constexpr bool operator==(const WaitMode&, const WaitMode&) = default;
};

}  // namespace ibv
