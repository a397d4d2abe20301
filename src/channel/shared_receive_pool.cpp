// SPDX-License-Identifier: MIT
// SharedReceivePool and ReceivedMessage: the pool's buffers, posted at construction and
// posted again as each message is released.
#include "ibv/channel/shared_receive_pool.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "channel/shared_receive_pool_core.hpp"
#include "ibv/channel/received_message.hpp"
#include "ibv/error.hpp"

namespace ibv {
namespace detail {
namespace {

constexpr std::string_view kOperation = "SharedReceivePool";

/// Checks the pool's shape against the device before anything is allocated; returns
/// buffer_count.
std::uint32_t checked_count(const ProtectionDomain& pd, std::uint32_t buffer_count,
                            std::uint32_t buffer_size) {
  if (buffer_count == 0) {
    throw_invalid_argument(kOperation, "buffer_count 0", "is not positive: a pool has a buffer");
  }
  if (buffer_size == 0) {
    throw_invalid_argument(kOperation, "buffer_size 0", "is not positive");
  }
  const auto device = pd.context().query_device();
  if (device.max_srq <= 0) {
    throw Error(ErrorKind::unsupported, kOperation, EOPNOTSUPP,
                pd.context().name() + " has no shared receive queues (max_srq 0)",
                "use channels with receive queues of their own");
  }
  if (std::cmp_greater(buffer_count, device.max_srq_wr)) {
    throw_invalid_argument(kOperation, "buffer_count " + std::to_string(buffer_count),
                           "exceeds the device's max_srq_wr of " +
                               std::to_string(device.max_srq_wr) +
                               " (one posted receive per buffer)");
  }
  const std::uint64_t total = std::uint64_t{buffer_count} * buffer_size;
  if (total > device.max_mr_size) {
    throw_invalid_argument(
        kOperation, "buffer_count * buffer_size = " + std::to_string(total) + " bytes",
        "exceeds the device's max_mr_size of " + std::to_string(device.max_mr_size));
  }
  return buffer_count;
}

}  // namespace

SharedReceivePoolCore::SharedReceivePoolCore(const ProtectionDomain& pd, std::uint32_t buffer_count,
                                             std::uint32_t buffer_size)
    : buffer_count_(checked_count(pd, buffer_count, buffer_size)),
      buffer_size_(buffer_size),
      // NOLINTNEXTLINE(*-avoid-c-arrays): one block, addressed by buffer index
      memory_(std::make_unique<std::byte[]>(std::size_t{buffer_count} * buffer_size)),
      region_(pd.register_local({memory_.get(), std::size_t{buffer_count} * buffer_size})),
      queue_(pd, QueueDepth(buffer_count)) {
  for (std::uint32_t index = 0; index < buffer_count_; ++index) post(index);
}

void SharedReceivePoolCore::post(std::uint32_t index) {
  const auto bytes = buffer(index);
  const ScatterElement element = region_.scatter_unchecked(bytes);  // inside by construction
  ReceiveRequest request(index, std::span<const ScatterElement>(&element, 1));
  queue_.post_receive(request);
  posted_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail

SharedReceivePool::SharedReceivePool(const ProtectionDomain& pd, std::uint32_t buffer_count,
                                     std::uint32_t buffer_size)
    : core_(std::make_shared<detail::SharedReceivePoolCore>(pd, buffer_count, buffer_size)) {}

const SharedReceiveQueue& SharedReceivePool::queue() const noexcept { return core_->queue(); }
std::uint32_t SharedReceivePool::buffer_count() const noexcept { return core_->buffer_count(); }
std::uint32_t SharedReceivePool::buffer_size() const noexcept { return core_->buffer_size(); }
std::uint32_t SharedReceivePool::posted() const noexcept { return core_->posted(); }

// ---------------------------------------------------------------------------------------------
// ReceivedMessage

ReceivedMessage::ReceivedMessage(const SharedReceivePool& pool,
                                 const WorkCompletion& completion) noexcept
    : pool_(pool.core()), completion_(completion) {}

ReceivedMessage::ReceivedMessage(ReceivedMessage&& other) noexcept
    : pool_(std::move(other.pool_)), completion_(other.completion_) {}

ReceivedMessage& ReceivedMessage::operator=(ReceivedMessage&& other) noexcept {
  if (this != &other) {
    if (pool_) {
      try {
        release();
      } catch (const Error& error) {
        std::fprintf(stderr, "ibverbs-cpp: ReceivedMessage: %s\n", error.what());
      }
    }
    pool_ = std::move(other.pool_);
    completion_ = other.completion_;
  }
  return *this;
}

ReceivedMessage::~ReceivedMessage() {
  if (!pool_) return;
  try {
    release();
  } catch (const Error& error) {
    std::fprintf(stderr, "ibverbs-cpp: ReceivedMessage: buffer not reposted: %s\n", error.what());
  }
}

std::span<const std::byte> ReceivedMessage::data() const noexcept {
  if (!pool_) return {};
  const auto buffer = pool_->buffer(buffer_index());
  return buffer.first(std::min<std::size_t>(completion_.byte_length(), buffer.size()));
}

void ReceivedMessage::release() {
  if (!pool_) return;
  const auto pool = std::move(pool_);  // empty even if the post throws
  pool_.reset();
  pool->post(buffer_index());
}

}  // namespace ibv
