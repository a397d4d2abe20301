// SPDX-License-Identifier: MIT
// BufferPool: a free list of buffer indices over one RegisteredMemory, shared by the pool and
// its handles through a plain (not atomic) reference count.
#include "ibv/memory/buffer_pool.hpp"

#include <cerrno>
#include <utility>
#include <vector>

#include "ibv/error.hpp"
#include "memory/size_math.hpp"

namespace ibv {
namespace detail {

struct BufferPoolState {
  BufferPoolState(RegisteredMemory registered, std::size_t buffer_size_, std::size_t stride_,
                  std::size_t count_)
      : memory(std::move(registered)), buffer_size(buffer_size_), stride(stride_), count(count_) {
    free_list.reserve(count);  // release() never allocates: the list never outgrows this
    for (std::size_t i = count; i > 0; --i) free_list.push_back(static_cast<std::uint32_t>(i - 1));
  }

  RegisteredMemory memory;
  std::size_t buffer_size;
  std::size_t stride;
  std::size_t count;
  std::vector<std::uint32_t> free_list;  // a stack: the most recently released buffer first
  std::size_t references = 1;            // the pool's own, plus one per handle
};

namespace {
void drop(BufferPoolState* state) noexcept {
  if (state != nullptr && --state->references == 0) delete state;
}
}  // namespace

}  // namespace detail

// --- PooledBuffer ------------------------------------------------------------------------------

PooledBuffer::PooledBuffer(detail::BufferPoolState* state, std::uint32_t index) noexcept
    : state_(state),
      data_(state->memory.bytes().data() + index * state->stride),
      size_(state->buffer_size),
      index_(index) {
  ++state_->references;
}

PooledBuffer::PooledBuffer(PooledBuffer&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      index_(other.index_) {}

PooledBuffer& PooledBuffer::operator=(PooledBuffer&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::exchange(other.state_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    index_ = other.index_;
  }
  return *this;
}

void PooledBuffer::release() noexcept {
  if (state_ == nullptr) return;
  state_->free_list.push_back(index_);  // capacity reserved for every buffer: no allocation
  detail::drop(std::exchange(state_, nullptr));
  data_ = nullptr;
  size_ = 0;
}

GatherElement PooledBuffer::gather() const noexcept {
  if (state_ == nullptr) return {};
  return state_->memory.region().gather_unchecked(bytes());
}

GatherElement PooledBuffer::gather(std::size_t length) const {
  if (length > size_) {
    throw_invalid_argument(
        "PooledBuffer::gather", "length",
        std::to_string(length) + " is longer than the buffer (" + std::to_string(size_) + " B)");
  }
  if (state_ == nullptr) return {};
  return state_->memory.region().gather_unchecked(bytes().first(length));
}

ScatterElement PooledBuffer::scatter() const noexcept {
  if (state_ == nullptr) return {};
  return state_->memory.region().scatter_unchecked(bytes());
}

ScatterElement PooledBuffer::scatter(std::size_t length) const {
  if (length > size_) {
    throw_invalid_argument(
        "PooledBuffer::scatter", "length",
        std::to_string(length) + " is longer than the buffer (" + std::to_string(size_) + " B)");
  }
  if (state_ == nullptr) return {};
  return state_->memory.region().scatter_unchecked(bytes().first(length));
}

RemoteMemoryRegion PooledBuffer::remote() const {
  if (state_ == nullptr) {
    throw Error(ErrorKind::state, "PooledBuffer::remote", EINVAL, "the handle holds no buffer");
  }
  const MemoryRegion& region = state_->memory.region();
  return region.remote().sub_region(
      static_cast<std::uint64_t>(data_ - state_->memory.bytes().data()), size_);
}

// --- BufferPool --------------------------------------------------------------------------------

BufferPool::BufferPool(const ProtectionDomain& pd, std::size_t buffer_size, std::size_t count,
                       const BufferPoolOptions& options) {
  if (options.alignment > system_page_size()) {
    throw_invalid_argument("BufferPool", "alignment",
                           std::to_string(options.alignment) + " is larger than the page size (" +
                               std::to_string(system_page_size()) + ")");
  }
  const detail::PoolLayout layout = detail::pool_layout(buffer_size, count, options.alignment);
  RegisteredMemory memory(pd, Allocation(layout.total, options.allocation), options.access);
  state_ = new detail::BufferPoolState(std::move(memory), buffer_size, layout.stride, count);
}

BufferPool::BufferPool(BufferPool&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)) {}

BufferPool& BufferPool::operator=(BufferPool&& other) noexcept {
  if (this != &other) {
    detail::drop(state_);
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

BufferPool::~BufferPool() { detail::drop(state_); }

PooledBuffer BufferPool::acquire() {
  if (auto buffer = try_acquire()) return std::move(*buffer);
  throw Error(ErrorKind::resource, "BufferPool::acquire", ENOBUFS,
              (state_->count == 1 ? std::string("the pool's only buffer")
                                  : "all " + std::to_string(state_->count) + " buffers") +
                  " of " + std::to_string(state_->buffer_size) + " B in use",
              "release a buffer (destroy its PooledBuffer or call release()) once the work request "
              "using it has completed, use try_acquire() to wait for one, or make the pool "
              "larger");
}

std::optional<PooledBuffer> BufferPool::try_acquire() noexcept {
  if (state_->free_list.empty()) return std::nullopt;
  const std::uint32_t index = state_->free_list.back();
  state_->free_list.pop_back();
  return PooledBuffer(state_, index);
}

std::size_t BufferPool::buffer_size() const noexcept { return state_->buffer_size; }
std::size_t BufferPool::stride() const noexcept { return state_->stride; }
std::size_t BufferPool::capacity() const noexcept { return state_->count; }
std::size_t BufferPool::available() const noexcept { return state_->free_list.size(); }
const MemoryRegion& BufferPool::region() const noexcept { return state_->memory.region(); }
const RegisteredMemory& BufferPool::memory() const noexcept { return state_->memory; }

std::string BufferPool::to_string() const {
  return "BufferPool " + std::to_string(state_->count) + " x " +
         std::to_string(state_->buffer_size) + " B (stride " + std::to_string(state_->stride) +
         "), " + std::to_string(in_use()) + " in use, " + state_->memory.to_string();
}

}  // namespace ibv
