// SPDX-License-Identifier: MIT
// DatagramHeader's wire form and SequenceTracker's gap counting.
#include "ibv/datagram/datagram_header.hpp"

#include "detail/big_endian.hpp"

namespace ibv {

void DatagramHeader::write(std::span<std::byte, kSize> out) const noexcept {
  detail::put_big_endian(out.data(), kMagic, 2);
  out[2] = std::byte{kVersion};
  out[3] = std::byte{0};
  detail::put_big_endian(&out[4], sequence, 8);
}

std::optional<DatagramHeader> DatagramHeader::read(std::span<const std::byte> bytes) noexcept {
  if (bytes.size() < kSize) return std::nullopt;
  if (detail::get_big_endian(bytes.data(), 2) != kMagic || bytes[2] != std::byte{kVersion} ||
      bytes[3] != std::byte{0}) {
    return std::nullopt;
  }
  return DatagramHeader{detail::get_big_endian(&bytes[4], 8)};
}

std::uint64_t SequenceTracker::record(std::uint64_t sequence) noexcept {
  if (sequence < counts_.next_expected) {  // after a later one: it was counted lost
    ++counts_.late;
    if (counts_.lost > 0) --counts_.lost;
    return 0;
  }
  const std::uint64_t gap = sequence - counts_.next_expected;
  counts_.lost += gap;
  ++counts_.received;
  counts_.next_expected = sequence + 1;
  return gap;
}

}  // namespace ibv
