// SPDX-License-Identifier: MIT
// Private: acknowledgement accounting of the completion events of one completion queue that
// is attached to a completion channel. Its address is the queue's cq_context, so whoever reads
// an event from a (possibly shared) channel finds the queue's counter from the event alone.
#pragma once

#include <atomic>
#include <cstdint>

struct ibv_cq;

namespace ibv::detail {

/// Events read for one queue, acknowledged kAckBatch at a time; the remainder when the queue
/// is destroyed (ibv_destroy_cq blocks until every event read has been acknowledged).
struct CqEvents {
  static constexpr std::uint32_t kAckBatch = 64;
  std::atomic<std::uint64_t> read{0};  // events read from the channel for this queue

  /// Counts one event read for `cq` (whose cq_context is this); acknowledges a whole batch
  /// when it completes one. Safe from several threads.
  void note(ibv_cq* cq) noexcept;
  /// Acknowledges what note() has not, right before the queue is destroyed (no reader left).
  void acknowledge_rest(ibv_cq* cq) noexcept;
};

}  // namespace ibv::detail
