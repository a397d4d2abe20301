// SPDX-License-Identifier: MIT
// Private: what a SharedReceivePool and its ReceivedMessages share: the shared receive queue,
// the buffers' memory and region, and how many buffers are posted.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"

namespace ibv::detail {

class SharedReceivePoolCore {
 public:
  SharedReceivePoolCore(const ProtectionDomain& pd, std::uint32_t buffer_count,
                        std::uint32_t buffer_size);

  /// Posts buffer `index` to the queue (no allocation). Throws ibv::Error if the device
  /// refuses.
  void post(std::uint32_t index);
  /// A buffer has been taken by a message (a receive completed).
  void taken() noexcept { posted_.fetch_sub(1, std::memory_order_relaxed); }
  /// The bytes of buffer `index`.
  [[nodiscard]] std::span<std::byte> buffer(std::uint32_t index) const noexcept {
    return {memory_.get() + std::size_t{index} * buffer_size_, buffer_size_};
  }

  [[nodiscard]] const SharedReceiveQueue& queue() const noexcept { return queue_; }
  [[nodiscard]] std::uint32_t buffer_count() const noexcept { return buffer_count_; }
  [[nodiscard]] std::uint32_t buffer_size() const noexcept { return buffer_size_; }
  [[nodiscard]] std::uint32_t posted() const noexcept {
    return posted_.load(std::memory_order_relaxed);
  }

 private:
  std::uint32_t buffer_count_;
  std::uint32_t buffer_size_;
  std::unique_ptr<std::byte[]> memory_;  // NOLINT(*-avoid-c-arrays): one block, index-addressed
  MemoryRegion region_;
  SharedReceiveQueue queue_;
  std::atomic<std::uint32_t> posted_{0};
};

}  // namespace ibv::detail
