// SPDX-License-Identifier: MIT
// ProtectionDomain: allocation and the three kinds of memory registration.
#include "ibv/verbs/protection_domain.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "ibv/error.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "verbs/registration_error.hpp"

namespace ibv {
namespace {

std::string describe(const void* address, std::size_t length) {
  std::array<char, 64> text{};
  std::snprintf(text.data(), text.size(), "%zu bytes at %p", length, address);
  return text.data();
}

}  // namespace

ProtectionDomain::ProtectionDomain(const Context& context)
    : context_(context), keys_(std::make_shared<detail::LocalKeys>(context.native())) {
  ibv_pd* raw = ibv_alloc_pd(context.native());
  if (raw == nullptr) throw_verb_error("ibv_alloc_pd", errno != 0 ? errno : ENOMEM, context.name());
  // The deleter holds the context open until the PD is gone.
  pd_ = std::shared_ptr<ibv_pd>(raw, [owner = context.shared()](ibv_pd* pd) {
    if (const int rc = ibv_dealloc_pd(pd); rc != 0) {
      std::fprintf(stderr,
                   "ibverbs-cpp: ibv_dealloc_pd failed (errno %d): resources created "
                   "through native() handles are still alive\n",
                   rc);
    }
  });
}

MemoryRegion ProtectionDomain::register_local(std::span<std::byte> buffer) const {
  return register_remote_accessible(buffer, RemoteAccess::none());
}

MemoryRegion ProtectionDomain::register_remote_accessible(std::span<std::byte> buffer,
                                                          RemoteAccess access) const {
  if (buffer.data() == nullptr && !buffer.empty()) {
    throw_invalid_argument("register", "buffer", "is null with a non-zero length");
  }
  if (buffer.empty()) {
    throw_invalid_argument("register", "buffer",
                           "is empty (0 bytes): a memory region has at least one byte");
  }
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(pd_.get(), buffer.data(), buffer.size(),
                          static_cast<unsigned>(access.native_with_local_write()));
  if (mr == nullptr) {
    detail::throw_registration_error(
        "ibv_reg_mr", errno != 0 ? errno : ENOMEM,
        describe(buffer.data(), buffer.size()) + ", access " + access.to_string(), buffer.size());
  }
  return {*this, mr, access};
}

MemoryRegion ProtectionDomain::register_dmabuf(int fd, std::uint64_t offset, std::size_t length,
                                               std::uint64_t iova, RemoteAccess access) const {
  if (fd < 0) {
    throw_invalid_argument("register_dmabuf", "fd " + std::to_string(fd),
                           "is not a file descriptor");
  }
  if (length == 0) throw_invalid_argument("register_dmabuf", "length", "is 0");
  errno = 0;
  ibv_mr* mr =
      ibv_reg_dmabuf_mr(pd_.get(), offset, length, iova, fd, access.native_with_local_write());
  if (mr == nullptr) {
    detail::throw_registration_error("ibv_reg_dmabuf_mr", errno != 0 ? errno : EOPNOTSUPP,
                                     "dma-buf fd " + std::to_string(fd) + ", " +
                                         std::to_string(length) + " bytes at offset " +
                                         std::to_string(offset),
                                     length);
  }
  return {*this, mr, access};
}

}  // namespace ibv
