// SPDX-License-Identifier: MIT
// ChannelTimeouts: how long a Channel's waits may take, unless a call says otherwise.
#pragma once

#include <chrono>

#include "ibv/duration.hpp"

namespace ibv {

/// How long the Channel's waits may take, unless a call says otherwise.
struct ChannelTimeouts {
  /// Blocking calls without a timeout of their own, PendingWork::wait(), and a scope's drain.
  Duration operation{std::chrono::seconds(10)};
  /// How long a PendingWork destroyed unpolled waits for its completion before it gives up
  /// and logs.
  Duration drop{std::chrono::seconds(10)};
};

}  // namespace ibv
