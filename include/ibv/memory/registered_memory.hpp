// SPDX-License-Identifier: MIT
// RegisteredMemory: an Allocation and its MemoryRegion owned together, deregistered before the
// memory is freed.
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "ibv/memory/allocation.hpp"
#include "ibv/verbs/access.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/protection_domain.hpp"

namespace ibv {

/// Memory the library allocated and registered for the caller. Move-only. Destruction (and
/// move assignment) deregisters the region first and frees the memory after, so the device
/// never holds a registration of freed memory; moving does not move the memory, so the region
/// and every element made from it stay valid.
///
/// ```
/// auto memory = ibv::RegisteredMemory::local(pd, 1 << 20);  // 1 MiB, page-aligned
/// channel.send(std::array{memory.region().gather(memory.bytes().first(64))});
/// ```
class RegisteredMemory {
 public:
  /// Allocates `size` bytes (see Allocation for rounding, options and errors) and registers
  /// them for local use (ProtectionDomain::register_local, whose errors apply too).
  [[nodiscard]] static RegisteredMemory local(const ProtectionDomain& pd, std::size_t size,
                                              const AllocationOptions& options = {});
  /// Allocates and registers so that peers may access the memory as `access` says
  /// (ProtectionDomain::register_remote_accessible).
  [[nodiscard]] static RegisteredMemory remote_accessible(const ProtectionDomain& pd,
                                                          std::size_t size, RemoteAccess access,
                                                          const AllocationOptions& options = {});
  /// Registers all of `allocation` with `access` (RemoteAccess::none(): local only) and takes
  /// ownership of it.
  RegisteredMemory(const ProtectionDomain& pd, Allocation allocation, RemoteAccess access);

  /// Takes over the memory and its registration.
  RegisteredMemory(RegisteredMemory&&) noexcept = default;
  /// Deregisters and frees this object's memory (in that order), then takes `other`'s.
  RegisteredMemory& operator=(RegisteredMemory&& other) noexcept;
  RegisteredMemory(const RegisteredMemory&) = delete;
  RegisteredMemory& operator=(const RegisteredMemory&) = delete;
  ~RegisteredMemory() = default;  // members: region_ is destroyed before allocation_

  /// All of the memory (the size asked for, rounded up to the page size).
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return allocation_.bytes(); }
  /// bytes().size().
  [[nodiscard]] std::size_t size() const noexcept { return allocation_.size(); }
  /// The allocation, for its page kind, page size and NUMA node.
  [[nodiscard]] const Allocation& allocation() const noexcept { return allocation_; }
  /// The registration: gather() / scatter() / remote() as for any MemoryRegion.
  [[nodiscard]] const MemoryRegion& region() const noexcept { return region_; }

  /// "<allocation>, MR lkey 0x.. rkey 0x.. <access>".
  [[nodiscard]] std::string to_string() const;

 private:
  Allocation allocation_;  // declared first: destroyed after the registration
  MemoryRegion region_;
};

}  // namespace ibv
