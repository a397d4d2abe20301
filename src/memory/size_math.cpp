// SPDX-License-Identifier: MIT
// Overflow-checked size arithmetic of the memory helpers (see size_math.hpp).
#include "memory/size_math.hpp"

#include <bit>
#include <cstdint>
#include <string>

#include "ibv/error.hpp"

namespace ibv::detail {

std::size_t page_rounded_size(std::string_view operation, std::size_t size, std::size_t page_size) {
  if (size == 0) throw_invalid_argument(operation, "size", "is 0 (nothing to allocate)");
  const auto rounded = round_up(size, page_size);
  if (!rounded) {
    throw_invalid_argument(operation, "size",
                           std::to_string(size) + " rounded up to the page size of " +
                               std::to_string(page_size) + " B does not fit in size_t");
  }
  return *rounded;
}

PoolLayout pool_layout(std::size_t buffer_size, std::size_t count, std::size_t alignment) {
  constexpr std::string_view kOperation = "BufferPool";
  if (buffer_size == 0) throw_invalid_argument(kOperation, "buffer_size", "is 0");
  if (buffer_size > UINT32_MAX) {
    throw_invalid_argument(kOperation, "buffer_size",
                           std::to_string(buffer_size) +
                               " is longer than a scatter/gather element can be (4 GiB - 1)");
  }
  if (count == 0) throw_invalid_argument(kOperation, "count", "is 0");
  if (count > UINT32_MAX) {
    throw_invalid_argument(kOperation, "count",
                           std::to_string(count) + " is more than 2^32 - 1 buffers");
  }
  if (!std::has_single_bit(alignment)) {
    throw_invalid_argument(kOperation, "alignment",
                           std::to_string(alignment) + " is not a power of two");
  }
  const auto stride = round_up(buffer_size, alignment);
  const auto total = stride ? multiply(*stride, count) : std::nullopt;
  if (!total) {
    throw_invalid_argument(kOperation, "count",
                           std::to_string(count) + " buffers of " + std::to_string(buffer_size) +
                               " B (aligned to " + std::to_string(alignment) +
                               ") do not fit in size_t");
  }
  return PoolLayout{*stride, *total};
}

}  // namespace ibv::detail
