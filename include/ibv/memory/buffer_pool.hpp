// SPDX-License-Identifier: MIT
// BufferPool: one registered allocation cut into N fixed-size message buffers, handed out and
// taken back through RAII handles without allocating.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ibv/memory/allocation.hpp"
#include "ibv/memory/registered_memory.hpp"
#include "ibv/verbs/access.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

namespace detail {
struct BufferPoolState;
}  // namespace detail

/// How a BufferPool is made.
struct BufferPoolOptions {
  /// Remote access to the pool's memory (RemoteAccess::none(): local use only, the default).
  RemoteAccess access = RemoteAccess::none();
  /// Each buffer starts at a multiple of this (a power of two, at most the page size); 64
  /// keeps buffers on separate cache lines.
  std::size_t alignment = 64;
  /// How the one allocation behind the pool is made (huge pages, NUMA node).
  AllocationOptions allocation = {};
};

/// One buffer of a BufferPool, acquired: the buffer is the holder's until this handle is
/// destroyed (or release() is called), then it goes back to the pool. Move-only.
///
/// The handle keeps the pool's memory and registration alive: a BufferPool may be destroyed
/// while handles are out, and the memory is deregistered and freed when the last one is
/// released. Like the pool, a handle is not thread-safe: acquire and release from one thread
/// at a time (a handle may be moved to another thread if the pool is not used meanwhile).
///
/// Keep the handle while a work request uses its buffer (e.g. alongside the PendingWork).
class PooledBuffer {
 public:
  /// Takes `other`'s buffer; `other` is left empty.
  PooledBuffer(PooledBuffer&& other) noexcept;
  /// Releases this handle's buffer to its pool, then takes `other`'s.
  PooledBuffer& operator=(PooledBuffer&& other) noexcept;
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  ~PooledBuffer() { release(); }

  /// Gives the buffer back to the pool now; the handle is empty afterwards. No-op when empty.
  void release() noexcept;
  /// Whether this handle holds a buffer (false after release() or a move).
  [[nodiscard]] explicit operator bool() const noexcept { return state_ != nullptr; }

  /// The buffer's bytes (buffer_size of the pool; empty for an empty handle).
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
  /// Index of the buffer in the pool, 0 .. capacity - 1.
  [[nodiscard]] std::uint32_t index() const noexcept { return index_; }

  /// The whole buffer, for the device to read (send, RDMA write source).
  [[nodiscard]] GatherElement gather() const noexcept;
  /// The first `length` bytes. Throws ibv::Error (invalid_argument) when length > size.
  [[nodiscard]] GatherElement gather(std::size_t length) const;
  /// The whole buffer, for the device to write into (receive, RDMA read destination).
  [[nodiscard]] ScatterElement scatter() const noexcept;
  /// The first `length` bytes, checked like gather(length).
  [[nodiscard]] ScatterElement scatter(std::size_t length) const;
  /// The buffer as a peer reaches it. Throws ibv::Error (invalid_argument) unless the pool was
  /// made remote-accessible.
  [[nodiscard]] RemoteMemoryRegion remote() const;

 private:
  friend class BufferPool;
  PooledBuffer(detail::BufferPoolState* state, std::uint32_t index) noexcept;
  detail::BufferPoolState* state_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::uint32_t index_ = 0;
};

/// A pool of `count` registered buffers of `buffer_size` bytes each, for fixed-size messages:
/// one Allocation and one MemoryRegion, cut into buffers at `stride()` distances.
///
/// - acquire() hands out a free buffer as a PooledBuffer, or throws ibv::Error (resource) when
///   all are in use; try_acquire() returns nullopt instead. The handle returns the buffer.
/// - The hot path (acquire, release, gather/scatter) does not allocate: the free list is sized
///   at construction.
/// - Lifetime: the pool and its handles share the state; whichever goes last frees it, so a
///   handle can never point into freed or deregistered memory.
/// - Not thread-safe: one thread at a time uses the pool and its handles.
/// - Move-only; a moved-from pool may only be destroyed or assigned to.
///
/// ```
/// ibv::BufferPool pool(pd, 4096, 64);
/// auto buffer = pool.acquire();
/// auto pending = channel.post_receive(std::array{buffer.scatter()});
/// ```
class BufferPool {
 public:
  /// Allocates and registers the pool. Throws ibv::Error (invalid_argument) naming the
  /// argument for buffer_size 0 or >= 4 GiB, count 0 or >= 2^32, an alignment that is not a
  /// power of two or larger than the page size, a total size that overflows; and what
  /// Allocation and the registration throw.
  BufferPool(const ProtectionDomain& pd, std::size_t buffer_size, std::size_t count,
             const BufferPoolOptions& options = {});

  /// Takes `other`'s share of the pool; `other` is left empty.
  BufferPool(BufferPool&& other) noexcept;
  /// Drops this object's share (as the destructor), then takes `other`'s.
  BufferPool& operator=(BufferPool&& other) noexcept;
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  /// Drops the pool's share: the memory lives on until the last PooledBuffer is released.
  ~BufferPool();

  /// A free buffer. Throws ibv::Error (resource) saying how many buffers of what size the pool
  /// has when none is free (release one, or make the pool larger).
  [[nodiscard]] PooledBuffer acquire();
  /// A free buffer, or nullopt when all are in use.
  [[nodiscard]] std::optional<PooledBuffer> try_acquire() noexcept;

  /// Usable bytes per buffer, as asked for.
  [[nodiscard]] std::size_t buffer_size() const noexcept;
  /// Distance between the starts of two buffers (buffer_size rounded up to the alignment).
  [[nodiscard]] std::size_t stride() const noexcept;
  /// Number of buffers.
  [[nodiscard]] std::size_t capacity() const noexcept;
  /// Buffers free now.
  [[nodiscard]] std::size_t available() const noexcept;
  /// Buffers held by handles now (capacity() - available()).
  [[nodiscard]] std::size_t in_use() const noexcept { return capacity() - available(); }
  /// The one registration behind every buffer.
  [[nodiscard]] const MemoryRegion& region() const noexcept;
  /// The allocation and the registration.
  [[nodiscard]] const RegisteredMemory& memory() const noexcept;

  /// "BufferPool 64 x 4096 B (stride 4096), 3 in use, <memory>".
  [[nodiscard]] std::string to_string() const;

 private:
  detail::BufferPoolState* state_ = nullptr;
};

}  // namespace ibv
