// SPDX-License-Identifier: MIT
// ChannelSettings: everything a Channel is built with besides its protection domain, in one
// struct that ChannelBuilder, MultiChannelBuilder, NodeBuilder and rdma_cm's ConnectOptions all
// take (and give back with settings()).
#pragma once

#include <optional>

#include "ibv/channel/channel_timeouts.hpp"
#include "ibv/channel/shared_receive_pool.hpp"
#include "ibv/channel/wait_mode.hpp"
#include "ibv/verbs/completion_channel.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"

namespace ibv {

/// How a Channel (and every per-peer channel of a MultiChannel or Node) is built. The builders'
/// named setters (`queue_pair()`, `wait_mode()`, ...) set one field each; `settings(s)` sets
/// them all. Checked when a builder builds, before anything is created: both timeouts
/// positive, every queue pair setting against the device (see QueuePairSettings), the
/// completion queue size between what the queues can hold and the device's max_cqe, a wait
/// mode that sleeps only with a completion channel to sleep on (one is made when none is
/// given), and at most one of shared_receive_queue and shared_receive_pool. Errors name the
/// setting. The story is in README.md, "Quick start: a Channel".
struct ChannelSettings {
  /// The queue pair's settings (every knob of QueuePairBuilder).
  QueuePairSettings queue_pair;
  /// How long the channel's waits may take, unless a call says otherwise.
  ChannelTimeouts timeouts;
  /// Entries of the completion queue; default and minimum: max_send_wr + max_recv_wr (with a
  /// shared receive queue, max_send_wr + its max_wr), so that it can not overflow.
  std::optional<int> completion_queue_size;
  /// How the channel waits for completions (see wait_mode.hpp). Default: spin.
  WaitMode wait_mode;
  /// The completion channel the completion queue is attached to (shared: one fd may cover
  /// several channels). Unset: a new one when the wait mode sleeps, else none.
  std::optional<CompletionChannel> completion_channel;
  /// Take receives from this shared receive queue, which the caller posts to (wr_ids below
  /// 2^63: the channel tags its own with the top bit); see Channel::receive_shared(). The
  /// queue pair then has no receive queue of its own (max_recv_wr / max_recv_sge are ignored).
  std::optional<SharedReceiveQueue> shared_receive_queue;
  /// Take receives from this pool, whose buffers the library keeps posted; see
  /// Channel::receive_message(). Not together with shared_receive_queue.
  std::optional<SharedReceivePool> shared_receive_pool;
};

}  // namespace ibv
