// SPDX-License-Identifier: MIT
// Tests the private big-endian helpers behind the Endpoint and RemoteMemoryRegion wire forms.
#include "detail/big_endian.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

#include <gtest/gtest.h>

namespace {

using ibv::detail::get_big_endian;
using ibv::detail::put_big_endian;

TEST(BigEndian, PutWritesMostSignificantFirst) {
  std::array<std::byte, 8> out{};
  put_big_endian(out.data(), 0x0102030405060708, 8);
  for (std::size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(std::to_integer<int>(out[i]), static_cast<int>(i + 1)) << i;
  }
}

TEST(BigEndian, PutWritesOnlyTheLowBytesAndNothingElse) {
  std::array<std::byte, 6> out{};
  out.fill(std::byte{0xEE});
  put_big_endian(out.data() + 1, 0xAABBCCDD11223344, 4);
  EXPECT_EQ(std::to_integer<int>(out[0]), 0xEE);
  EXPECT_EQ(std::to_integer<int>(out[1]), 0x11);
  EXPECT_EQ(std::to_integer<int>(out[2]), 0x22);
  EXPECT_EQ(std::to_integer<int>(out[3]), 0x33);
  EXPECT_EQ(std::to_integer<int>(out[4]), 0x44);
  EXPECT_EQ(std::to_integer<int>(out[5]), 0xEE);
}

TEST(BigEndian, GetReadsMostSignificantFirst) {
  const std::array<std::byte, 4> in = {std::byte{0xDE}, std::byte{0xAD}, std::byte{0xBE},
                                       std::byte{0xEF}};
  EXPECT_EQ(get_big_endian(in.data(), 4), 0xDEADBEEFU);
  EXPECT_EQ(get_big_endian(in.data(), 2), 0xDEADU);
  EXPECT_EQ(get_big_endian(in.data() + 3, 1), 0xEFU);
}

TEST(BigEndian, RoundTripsEveryWidth) {
  constexpr std::uint64_t kValue = 0xF1E2D3C4B5A69788;
  for (int bytes = 1; bytes <= 8; ++bytes) {
    std::array<std::byte, 8> buffer{};
    put_big_endian(buffer.data(), kValue, bytes);
    const std::uint64_t mask =
        bytes == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * bytes)) - 1;
    EXPECT_EQ(get_big_endian(buffer.data(), bytes), kValue & mask) << bytes << " bytes";
  }
}

}  // namespace
