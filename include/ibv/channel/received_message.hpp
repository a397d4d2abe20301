// SPDX-License-Identifier: MIT
// ReceivedMessage: a message that landed in a SharedReceivePool buffer, owned by the caller
// until released; releasing it posts the buffer back to the shared receive queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ibv/verbs/work_completion.hpp"

namespace ibv {

class SharedReceivePool;

namespace detail {
class SharedReceivePoolCore;
}

/// One message in a buffer of a SharedReceivePool. Move-only. While it lives the buffer is the
/// caller's: data() stays valid and unchanged. release(), or the destructor, posts the buffer
/// back to the pool's shared receive queue (no allocation), after which the message is empty.
/// A message may be released on any thread, also after its channel is gone.
class ReceivedMessage {
 public:
  /// An empty message (holds no buffer).
  ReceivedMessage() noexcept = default;
  /// Takes buffer `completion.wr_id()` of `pool`, which `completion` (from a queue pair that
  /// receives from `pool`) says a message landed in.
  ReceivedMessage(const SharedReceivePool& pool, const WorkCompletion& completion) noexcept;
  /// Takes `other`'s buffer; `other` is left empty.
  ReceivedMessage(ReceivedMessage&& other) noexcept;
  /// Releases this message's buffer (as release()), then takes `other`'s.
  ReceivedMessage& operator=(ReceivedMessage&& other) noexcept;
  ReceivedMessage(const ReceivedMessage&) = delete;
  ReceivedMessage& operator=(const ReceivedMessage&) = delete;
  /// Releases the buffer (see release()); a failure to repost is logged, not thrown.
  ~ReceivedMessage();

  /// The message's bytes (completion().byte_length() of them; empty for a message that
  /// carried only immediate data), or empty once released.
  [[nodiscard]] std::span<const std::byte> data() const noexcept;
  /// Which of the pool's buffers holds the message (its receive wr_id).
  [[nodiscard]] std::uint32_t buffer_index() const noexcept {
    return static_cast<std::uint32_t>(completion_.wr_id());
  }
  /// The receive completion: byte length, immediate data, the queue pair it came in on.
  [[nodiscard]] const WorkCompletion& completion() const noexcept { return completion_; }
  /// Whether the message still holds its buffer.
  [[nodiscard]] bool holds_buffer() const noexcept { return pool_ != nullptr; }

  /// Posts the buffer back to the shared receive queue now. Throws ibv::Error if the device
  /// refuses the post (the buffer is then lost to the pool). Does nothing when empty.
  void release();

 private:
  std::shared_ptr<detail::SharedReceivePoolCore> pool_;
  WorkCompletion completion_;
};

}  // namespace ibv
