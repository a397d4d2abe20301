// SPDX-License-Identifier: MIT
// Private helpers: fixed-width big-endian integers in byte buffers, for the wire forms of
// endpoints and remote regions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace ibv::detail {

/// Writes the low `bytes` bytes of `value` to `out`, most significant first.
inline void put_big_endian(std::byte* out, std::uint64_t value, int bytes) noexcept {
  if (bytes == 8 && std::endian::native == std::endian::little) {  // one store, not eight
    const std::uint64_t swapped = __builtin_bswap64(value);
    std::memcpy(out, &swapped, sizeof swapped);
    return;
  }
  for (int i = bytes - 1; i >= 0; --i) {
    out[i] = static_cast<std::byte>(value & 0xffU);
    value >>= 8U;
  }
}

/// Reads `bytes` bytes from `in`, most significant first.
[[nodiscard]] inline std::uint64_t get_big_endian(const std::byte* in, int bytes) noexcept {
  std::uint64_t value = 0;
  if (bytes == 8 && std::endian::native == std::endian::little) {  // one load, not eight
    std::memcpy(&value, in, sizeof value);
    return __builtin_bswap64(value);
  }
  for (int i = 0; i < bytes; ++i) value = (value << 8U) | std::to_integer<std::uint64_t>(in[i]);
  return value;
}

}  // namespace ibv::detail
