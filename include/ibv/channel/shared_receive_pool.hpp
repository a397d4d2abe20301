// SPDX-License-Identifier: MIT
// SharedReceivePool: a shared receive queue that owns its receive buffers (fixed size, one
// registered region) and keeps them posted: a message taken from it is a ReceivedMessage, whose
// buffer goes back to the queue when the message is released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"

namespace ibv {

class ReceivedMessage;

namespace detail {
class ChannelCore;
class SharedReceivePoolCore;
}  // namespace detail

/// A shared receive queue with `buffer_count` buffers of `buffer_size` bytes each, carved from
/// one memory region registered for local use, all posted at construction. Channels and
/// MultiChannels built on it (ChannelBuilder::shared_receive_pool) hand out each arriving
/// message as a ReceivedMessage; releasing that (or destroying it) posts its buffer again, so
/// a stream of any length flows through a fixed number of buffers as long as messages are
/// released. While every buffer is held, senders are told to retry (RNR NAK) and fail with
/// rnr_retry_exceeded if none comes free in time.
///
/// The receive wr_id of buffer i is i. A cheap-to-copy handle: channels on the pool, and
/// messages taken from it, keep it alive.
class SharedReceivePool {
 public:
  /// Allocates and registers buffer_count * buffer_size bytes on `pd`, creates a shared
  /// receive queue of buffer_count receives and posts every buffer. Throws ibv::Error
  /// (invalid_argument) before creating anything when buffer_count or buffer_size is 0,
  /// buffer_count exceeds the device's max_srq_wr, or the region would exceed the device's
  /// max_mr_size (test: `SharedReceiveTest.SizesAreCheckedAgainstTheDevice`); (unsupported) when
  /// the device has no shared receive queues (untested: `unsupported`, every device the tests run
  /// on has them).
  SharedReceivePool(const ProtectionDomain& pd, std::uint32_t buffer_count,
                    std::uint32_t buffer_size);

  /// The shared receive queue (for arm_limit(), or to build queue pairs on directly).
  [[nodiscard]] const SharedReceiveQueue& queue() const noexcept;
  /// How many buffers (and receives) the pool has.
  [[nodiscard]] std::uint32_t buffer_count() const noexcept;
  /// Bytes per buffer: the longest message the pool can take. A longer one fails the receive
  /// (local_length_error; rxe reports local_qp_operation_error) and the peer's send, and
  /// leaves the queue pair it came on in error.
  [[nodiscard]] std::uint32_t buffer_size() const noexcept;
  /// Buffers posted as far as the pool knows: buffer_count() minus the messages its channels
  /// have polled and not released yet (a message that has arrived but not been polled still
  /// counts as posted). A snapshot; other threads may release messages meanwhile.
  [[nodiscard]] std::uint32_t posted() const noexcept;

 private:
  friend class ReceivedMessage;      // holds the pool's state until it releases its buffer
  friend class detail::ChannelCore;  // tells the pool when a channel takes a message in
  /// The shared state, for the ReceivedMessages this pool's channels make.
  [[nodiscard]] const std::shared_ptr<detail::SharedReceivePoolCore>& core() const noexcept {
    return core_;
  }
  std::shared_ptr<detail::SharedReceivePoolCore> core_;
};

}  // namespace ibv
