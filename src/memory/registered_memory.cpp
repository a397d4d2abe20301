// SPDX-License-Identifier: MIT
// RegisteredMemory: allocate, register, and tear down in the right order.
#include "ibv/memory/registered_memory.hpp"

#include <utility>

namespace ibv {
namespace {

MemoryRegion register_all(const ProtectionDomain& pd, const Allocation& allocation,
                          RemoteAccess access) {
  if (access == RemoteAccess::none()) return pd.register_local(allocation.bytes());
  return pd.register_remote_accessible(allocation.bytes(), access);
}

}  // namespace

RegisteredMemory RegisteredMemory::local(const ProtectionDomain& pd, std::size_t size,
                                         const AllocationOptions& options) {
  return {pd, Allocation(size, options), RemoteAccess::none()};
}

RegisteredMemory RegisteredMemory::remote_accessible(const ProtectionDomain& pd, std::size_t size,
                                                     RemoteAccess access,
                                                     const AllocationOptions& options) {
  return {pd, Allocation(size, options), access};
}

RegisteredMemory::RegisteredMemory(const ProtectionDomain& pd, Allocation allocation,
                                   RemoteAccess access)
    : allocation_(std::move(allocation)), region_(register_all(pd, allocation_, access)) {}

RegisteredMemory& RegisteredMemory::operator=(RegisteredMemory&& other) noexcept {
  if (this != &other) {
    region_ = std::move(other.region_);          // deregisters this object's region first,
    allocation_ = std::move(other.allocation_);  // then frees its memory
  }
  return *this;
}

std::string RegisteredMemory::to_string() const {
  return allocation_.to_string() + ", " + region_.to_string();
}

}  // namespace ibv
