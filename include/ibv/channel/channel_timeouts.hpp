// ChannelTimeouts: how long a Channel's waits may take, unless a call says otherwise.
#pragma once

#include <chrono>

namespace ibv {

/// How long the Channel's waits may take, unless a call says otherwise.
struct ChannelTimeouts {
  /// Blocking calls without a timeout of their own, PendingWork::wait(), and a scope's drain.
  std::chrono::milliseconds operation{10'000};
  /// How long a PendingWork destroyed unpolled waits for its completion before it gives up
  /// and logs.
  std::chrono::milliseconds drop{10'000};
};

}  // namespace ibv
