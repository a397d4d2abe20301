// SPDX-License-Identifier: MIT
// Private: overflow-checked size arithmetic of the memory helpers (rounding to pages, the
// layout of a buffer pool). Pure functions, unit-tested on their own.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace ibv::detail {

/// `size` rounded up to a multiple of `multiple` (> 0), or nullopt when that overflows.
[[nodiscard]] constexpr std::optional<std::size_t> round_up(std::size_t size,
                                                            std::size_t multiple) noexcept {
  if (multiple == 0) return std::nullopt;
  const std::size_t remainder = size % multiple;
  if (remainder == 0) return size;
  const std::size_t add = multiple - remainder;
  if (size > static_cast<std::size_t>(-1) - add) return std::nullopt;
  return size + add;
}

/// `a * b`, or nullopt when that overflows.
[[nodiscard]] constexpr std::optional<std::size_t> multiply(std::size_t a, std::size_t b) noexcept {
  std::size_t product = 0;
  if (__builtin_mul_overflow(a, b, &product)) return std::nullopt;
  return product;
}

/// The size to map for a request of `size` bytes in pages of `page_size`: `size` rounded up to
/// the page size. Throws ibv::Error (invalid_argument) naming `operation` for a size of 0 and
/// for a size whose rounding overflows.
[[nodiscard]] std::size_t page_rounded_size(std::string_view operation, std::size_t size,
                                            std::size_t page_size);

/// How a buffer pool lays out `count` buffers of `buffer_size` bytes: each starts at a multiple
/// of `alignment` (a power of two), so `stride` is buffer_size rounded up to it.
struct PoolLayout {
  std::size_t stride = 0;  ///< Distance between the starts of two buffers.
  std::size_t total = 0;   ///< stride * count: the bytes the pool needs (before page rounding).
};

/// The layout of a pool, checked: buffer_size and count > 0, buffer_size fits a scatter/gather
/// element (< 4 GiB), count fits 32 bits, alignment a power of two, no overflow. Throws
/// ibv::Error (invalid_argument) naming the argument otherwise.
[[nodiscard]] PoolLayout pool_layout(std::size_t buffer_size, std::size_t count,
                                     std::size_t alignment);

}  // namespace ibv::detail
