// SPDX-License-Identifier: MIT
// A registered memory region: memory the device may access by its local key (and, when
// registered remote-accessible, by peers through its remote key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "ibv/verbs/access.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

struct ibv_mr;

namespace ibv {

/// A registered memory region. Move-only: one handle per registration, which is deregistered
/// when this handle is destroyed, or, when an object that must keep it registered shares it
/// (shared(): a PersistentAllToAll does), when the last of them goes. It keeps its protection
/// domain alive, and so does the registration until it is deregistered.
///
/// Safety contract: the library does not own the registered memory. The caller keeps the
/// memory alive, and does not reuse it, while any work request that uses it is outstanding;
/// the Channel layer's scopes and PendingWork make that the easy path.
///
/// Elements for work requests are made here, checked to lie inside the region:
/// `mr.gather(span)` for data the device reads (send, RDMA write source), `mr.scatter(span)`
/// for memory the device writes (receive, RDMA read destination).
class MemoryRegion {
 public:
  /// Takes ownership of a registration made with `pd` (normally via ProtectionDomain). Throws
  /// ibv::Error (invalid_argument) when `owned` is null or was registered on another protection
  /// domain (it is deregistered then: it was given).
  MemoryRegion(ProtectionDomain pd, ibv_mr* owned, RemoteAccess access);

  /// Takes over the registration; the moved-from region may only be destroyed or assigned to.
  MemoryRegion(MemoryRegion&&) noexcept = default;
  /// Lets go of the registration held before (deregistering it unless another owner shares
  /// it), then takes over `other`'s.
  MemoryRegion& operator=(MemoryRegion&& other) noexcept;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;
  ~MemoryRegion() = default;

  /// Start of the region as the device addresses it (the buffer address, or the iova).
  [[nodiscard]] std::uint64_t address() const noexcept;
  /// Its length in bytes.
  [[nodiscard]] std::size_t length() const noexcept;
  /// The local key, which local work requests name the region by.
  [[nodiscard]] std::uint32_t lkey() const noexcept;
  /// The remote key. Meaningful only when remote access was granted.
  [[nodiscard]] std::uint32_t rkey() const noexcept;
  /// The rights peers were granted (none() for a local region).
  [[nodiscard]] RemoteAccess remote_access() const noexcept { return access_; }
  /// The protection domain it is registered on (only its queue pairs may use it).
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return pd_; }

  /// The whole registered memory (for regions registered from a buffer).
  [[nodiscard]] std::span<std::byte> bytes() const noexcept;
  /// Whether `[address, address + length)` lies inside the region.
  [[nodiscard]] bool contains(std::uint64_t address, std::size_t length) const noexcept;

  /// What a peer needs to reach this region: address, length, rkey. Throws ibv::Error
  /// (invalid_argument) for a region registered for local use only.
  [[nodiscard]] RemoteMemoryRegion remote() const;

  /// An element for the device to read from (send, RDMA write). Throws ibv::Error
  /// (invalid_argument) when `data` is not entirely inside this region, before anything is
  /// posted.
  [[nodiscard]] GatherElement gather(std::span<const std::byte> data) const;
  /// An element for the device to write into (receive, RDMA read). Checked like gather().
  [[nodiscard]] ScatterElement scatter(std::span<std::byte> data) const;
  /// Typed conveniences: any span of trivially copyable objects, const or not (the device
  /// only reads what it gathers).
  template <typename T>
  [[nodiscard]] GatherElement gather(std::span<T> data) const {
    return gather(std::as_bytes(data));
  }
  /// Typed scatter(): any span of non-const trivially copyable objects.
  template <typename T>
  requires(!std::is_const_v<T>) [[nodiscard]] ScatterElement scatter(std::span<T> data) const {
    return scatter(std::as_writable_bytes(data));
  }
  /// Whole-region elements.
  [[nodiscard]] GatherElement gather_all() const noexcept;
  /// The whole region, for the device to write into.
  [[nodiscard]] ScatterElement scatter_all() const noexcept;

  /// Unchecked variants for hot paths where the caller has already proven the bounds.
  [[nodiscard]] GatherElement gather_unchecked(std::span<const std::byte> data) const noexcept;
  /// scatter() without the bounds check: the device reports bad bounds as a failed completion.
  [[nodiscard]] ScatterElement scatter_unchecked(std::span<std::byte> data) const noexcept;

  /// The libibverbs MR, owned by this object (do not deregister it).
  [[nodiscard]] ibv_mr* native() const noexcept { return mr_.get(); }
  /// The owning pointer of the registration, for objects that must keep it registered while
  /// they use its keys (as a queue pair keeps its protection domain through
  /// ProtectionDomain::shared()): the region is deregistered when this handle and every copy
  /// are gone, and the copies keep the protection domain alive until then. Null for a
  /// moved-from region.
  [[nodiscard]] const std::shared_ptr<ibv_mr>& shared() const noexcept { return mr_; }

  /// "MR 4096 B at 0x7f.. lkey 0x123 rkey 0x456 remote write|read".
  [[nodiscard]] std::string to_string() const;

 private:
  ProtectionDomain pd_;
  // Deregistered by its last owner, which forgets its local key in the domain's set; its
  // deleter holds a copy of the protection domain until then.
  std::shared_ptr<ibv_mr> mr_;
  RemoteAccess access_;
};

}  // namespace ibv
