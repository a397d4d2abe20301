// SPDX-License-Identifier: MIT
// RemoteMemoryRegion: checked sub-regions and the 20-byte wire form.
#include "ibv/verbs/remote_memory_region.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

#include "detail/big_endian.hpp"
#include "ibv/error.hpp"

namespace ibv {
namespace detail {
void throw_remote_region_error(std::string_view operation, std::string_view problem) {
  throw Error(ErrorKind::invalid_argument, operation, EINVAL, problem);
}

void throw_element_index_error(std::uint64_t index, std::uint64_t count, std::size_t element_size,
                               std::uint64_t length) {
  std::string problem = "index " + std::to_string(index) + " is out of range: element " +
                        std::to_string(index) + " of " + std::to_string(element_size) +
                        " bytes lies outside the remote region of " + std::to_string(length) +
                        " bytes, which holds " + std::to_string(count) + " elements";
  problem += count == 0 ? std::string(" (no valid index)")
                        : " (indices 0.." + std::to_string(count - 1) + ")";
  if (index > UINT64_MAX / element_size) problem += "; index * sizeof(T) overflows 64 bits";
  throw_remote_region_error("RemoteMemoryRegion::element", problem);
}

void throw_field_error(std::size_t struct_size, std::uint64_t length) {
  throw_remote_region_error("RemoteMemoryRegion::field",
                            "the remote region of " + std::to_string(length) +
                                " bytes is smaller than the struct (" +
                                std::to_string(struct_size) + " bytes) whose field is asked for");
}
}  // namespace detail

RemoteMemoryRegion::RemoteMemoryRegion(std::uint64_t address, std::uint64_t length,
                                       std::uint32_t rkey)
    : address_(address), length_(length), rkey_(rkey) {
  if (length > UINT64_MAX - address) {
    detail::throw_remote_region_error("RemoteMemoryRegion", "address + length overflows 64 bits");
  }
}

RemoteMemoryRegion RemoteMemoryRegion::sub_region(std::uint64_t offset,
                                                  std::uint64_t length) const {
  if (offset > length_ || length > length_ - offset) {
    detail::throw_remote_region_error(
        "RemoteMemoryRegion::sub_region",
        "offset " + std::to_string(offset) + " + length " + std::to_string(length) +
            " lies outside the remote region of " + std::to_string(length_) + " bytes");
  }
  RemoteMemoryRegion sub(address_ + offset, length, rkey_);
  sub.access_ = access_;
  return sub;
}

RemoteMemoryRegion RemoteMemoryRegion::sub_region_from(std::uint64_t offset) const {
  if (offset > length_) {
    detail::throw_remote_region_error("RemoteMemoryRegion::sub_region_from",
                                      "offset " + std::to_string(offset) +
                                          " lies past the end of the remote region of " +
                                          std::to_string(length_) + " bytes");
  }
  RemoteMemoryRegion sub(address_ + offset, length_ - offset, rkey_);
  sub.access_ = access_;
  return sub;
}

std::array<std::byte, RemoteMemoryRegion::kWireSize> RemoteMemoryRegion::to_bytes() const noexcept {
  std::array<std::byte, kWireSize> out{};
  detail::put_big_endian(out.data(), address_, 8);
  detail::put_big_endian(out.data() + 8, length_, 8);
  detail::put_big_endian(out.data() + 16, rkey_, 4);
  return out;
}

RemoteMemoryRegion RemoteMemoryRegion::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != kWireSize) {
    detail::throw_remote_region_error(
        "RemoteMemoryRegion::from_bytes",
        "expected " + std::to_string(kWireSize) + " bytes, got " + std::to_string(bytes.size()));
  }
  return {detail::get_big_endian(bytes.data(), 8), detail::get_big_endian(bytes.data() + 8, 8),
          static_cast<std::uint32_t>(detail::get_big_endian(bytes.data() + 16, 4))};
}

std::string RemoteMemoryRegion::to_string() const {
  std::array<char, 96> text{};
  std::snprintf(text.data(), text.size(), "remote MR %llu B at 0x%llx rkey 0x%x",
                static_cast<unsigned long long>(length_), static_cast<unsigned long long>(address_),
                rkey_);
  return text.data();
}

}  // namespace ibv
