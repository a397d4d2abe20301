// SPDX-License-Identifier: MIT
// Protection domain: the scope in which memory regions and queue pairs may be used together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "ibv/verbs/access.hpp"
#include "ibv/verbs/context.hpp"
#include "ibv/verbs/local_keys.hpp"

struct ibv_pd;

namespace ibv {

class MemoryRegion;

/// A protection domain. Cheap-to-copy handle; it keeps its Context open, and every memory
/// region and queue pair created in it keeps it alive in turn, so destruction order is never
/// the caller's concern.
class ProtectionDomain {
 public:
  /// Allocates a protection domain on `context` (ibv_alloc_pd).
  explicit ProtectionDomain(const Context& context);

  /// The device it was allocated on.
  [[nodiscard]] const Context& context() const noexcept { return context_; }

  /// Registers `buffer` for local use only (send sources, receive targets, RDMA read
  /// destinations and write sources on this side). The peer can not touch it.
  ///
  /// Throws ibv::Error: invalid_argument for an empty buffer (checked before the device sees
  /// it); resource when the kernel refuses to pin the memory (ENOMEM / EAGAIN: the pinned total
  /// would pass RLIMIT_MEMLOCK; EPERM: the limit is 0), with a hint naming the limit in force,
  /// the size asked for and `ulimit -l`. The same for register_remote_accessible().
  [[nodiscard]] MemoryRegion register_local(std::span<std::byte> buffer) const;
  /// Registers `buffer` so that peers may access it as `access` says (RDMA write into it,
  /// read from it, atomics on it), besides local use. The name says so on purpose: a remote
  /// key handed out for this region lets any connected peer of this PD reach it.
  [[nodiscard]] MemoryRegion register_remote_accessible(std::span<std::byte> buffer,
                                                        RemoteAccess access) const;
  /// Registers `length` bytes at `offset` of a dma-buf (`fd`), e.g. device memory exported by
  /// a GPU driver, addressed as `iova` in work requests. Throws ibv::Error (unsupported) where
  /// the device cannot do it, (invalid_argument) for a negative fd or a length of 0.
  [[nodiscard]] MemoryRegion register_dmabuf(int fd, std::uint64_t offset, std::size_t length,
                                             std::uint64_t iova, RemoteAccess access) const;

  /// The libibverbs PD, owned by this handle (do not deallocate it).
  [[nodiscard]] ibv_pd* native() const noexcept { return pd_.get(); }
  /// The owning pointer its copies share, for objects that must keep it alive.
  [[nodiscard]] const std::shared_ptr<ibv_pd>& shared() const noexcept { return pd_; }
  /// The local keys of the memory regions registered on it, which its queue pairs check every
  /// request's elements against (a region of another protection domain is refused).
  [[nodiscard]] detail::LocalKeys& local_keys() const noexcept { return *keys_; }

  friend bool operator==(const ProtectionDomain& a, const ProtectionDomain& b) noexcept {
    return a.pd_ == b.pd_;
  }

 private:
  Context context_;
  std::shared_ptr<ibv_pd> pd_;
  std::shared_ptr<detail::LocalKeys> keys_;  // shared by its copies, like pd_
};

}  // namespace ibv
