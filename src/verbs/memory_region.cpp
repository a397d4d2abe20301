// SPDX-License-Identifier: MIT
// MemoryRegion: keys, bounds checks and the making of scatter/gather elements.
#include "ibv/verbs/memory_region.hpp"

#include <infiniband/verbs.h>

#include <cstdio>
#include <limits>
#include <string>

#include "ibv/error.hpp"

namespace ibv {
namespace {

std::string hex(std::uint64_t value) {
  std::array<char, 24> text{};
  std::snprintf(text.data(), text.size(), "0x%llx", static_cast<unsigned long long>(value));
  return text.data();
}

std::uint64_t address_of(const void* pointer) noexcept {
  return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pointer));
}

/// The deleter of a registration: deregisters it and forgets its local key in its protection
/// domain, which it keeps alive until then (ibv_dealloc_pd fails while a region is registered),
/// also when every MemoryRegion handle went before the last owner of the registration.
struct Deregister {
  ProtectionDomain pd;
  void operator()(ibv_mr* mr) const noexcept {
    if (mr == nullptr) return;  // a null registration, refused by the constructor
    pd.local_keys().remove(mr->lkey);
    if (const int rc = ibv_dereg_mr(mr); rc != 0) {
      std::fprintf(stderr, "ibverbs-cpp: ibv_dereg_mr failed (errno %d)\n", rc);
    }
  }
};

}  // namespace

MemoryRegion::MemoryRegion(ProtectionDomain pd, ibv_mr* owned, RemoteAccess access)
    : pd_(std::move(pd)), mr_(owned, Deregister{pd_}), access_(access) {
  if (owned == nullptr) throw_invalid_argument("MemoryRegion", "registration", "is null");
  if (owned->pd != pd_.native()) {
    throw_invalid_argument("MemoryRegion", "registration",
                           "was registered on another protection domain than the one given");
  }
  pd_.local_keys().add(owned->lkey);
}

MemoryRegion& MemoryRegion::operator=(MemoryRegion&& other) noexcept {
  if (this != &other) {
    // The registration held before goes first (deregistered unless shared); its deleter keeps
    // its own copy of the protection domain, so the domain outlives it whatever the order.
    mr_ = std::move(other.mr_);
    pd_ = std::move(other.pd_);
    access_ = other.access_;
  }
  return *this;
}

std::uint64_t MemoryRegion::address() const noexcept { return address_of(mr_->addr); }
std::size_t MemoryRegion::length() const noexcept { return mr_->length; }
std::uint32_t MemoryRegion::lkey() const noexcept { return mr_->lkey; }
std::uint32_t MemoryRegion::rkey() const noexcept { return mr_->rkey; }

std::span<std::byte> MemoryRegion::bytes() const noexcept {
  return {static_cast<std::byte*>(mr_->addr), mr_->length};
}

bool MemoryRegion::contains(std::uint64_t address, std::size_t length) const noexcept {
  const std::uint64_t start = this->address();
  if (address < start) return false;
  const std::uint64_t offset = address - start;
  return offset <= mr_->length && length <= mr_->length - offset;
}

RemoteMemoryRegion MemoryRegion::remote() const {
  if (access_.empty()) {
    throw_invalid_argument("MemoryRegion::remote", "region",
                           "was registered for local use only; register it with "
                           "register_remote_accessible() to hand it to a peer");
  }
  return RemoteMemoryRegion(address(), length(), rkey()).with_access(access_);
}

namespace {
template <typename Span>
void check_element(const MemoryRegion& mr, std::string_view operation, Span data) {
  const auto address = address_of(data.data());
  if (data.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw_invalid_argument(operation, "element of " + std::to_string(data.size()) + " bytes",
                           "is longer than a scatter/gather element can be (4 GiB - 1)");
  }
  if (!mr.contains(address, data.size())) {
    throw_invalid_argument(
        operation, "element of " + std::to_string(data.size()) + " bytes at " + hex(address),
        "lies outside its memory region (" + std::to_string(mr.length()) + " bytes at " +
            hex(mr.address()) + ")");
  }
}
}  // namespace

GatherElement MemoryRegion::gather(std::span<const std::byte> data) const {
  check_element(*this, "MemoryRegion::gather", data);
  return gather_unchecked(data);
}

ScatterElement MemoryRegion::scatter(std::span<std::byte> data) const {
  check_element(*this, "MemoryRegion::scatter", data);
  return scatter_unchecked(data);
}

GatherElement MemoryRegion::gather_all() const noexcept {
  return GatherElement::from_raw(address(), static_cast<std::uint32_t>(length()), lkey());
}

ScatterElement MemoryRegion::scatter_all() const noexcept {
  return ScatterElement::from_raw(address(), static_cast<std::uint32_t>(length()), lkey());
}

GatherElement MemoryRegion::gather_unchecked(std::span<const std::byte> data) const noexcept {
  return GatherElement::from_raw(address_of(data.data()), static_cast<std::uint32_t>(data.size()),
                                 lkey());
}

ScatterElement MemoryRegion::scatter_unchecked(std::span<std::byte> data) const noexcept {
  return ScatterElement::from_raw(address_of(data.data()), static_cast<std::uint32_t>(data.size()),
                                  lkey());
}

std::string MemoryRegion::to_string() const {
  return "MR " + std::to_string(length()) + " B at " + hex(address()) + " lkey " + hex(lkey()) +
         " rkey " + hex(rkey()) + " remote " + access_.to_string();
}

int RemoteAccess::native_with_local_write() const noexcept {
  int flags = IBV_ACCESS_LOCAL_WRITE;
  if (allows_write()) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (allows_read()) flags |= IBV_ACCESS_REMOTE_READ;
  if (allows_atomic()) flags |= IBV_ACCESS_REMOTE_ATOMIC;
  return flags;
}

std::string RemoteAccess::to_string() const {
  std::string text;
  auto add = [&text](std::string_view name) {
    if (!text.empty()) text += '|';
    text += name;
  };
  if (allows_write()) add("write");
  if (allows_read()) add("read");
  if (allows_atomic()) add("atomic");
  return text.empty() ? "none" : text;
}

}  // namespace ibv
