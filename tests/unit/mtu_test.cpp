// SPDX-License-Identifier: MIT
// Tests Mtu: the five path MTU sizes, their verbs codes, ordering and the rejected values.
#include "ibv/verbs/mtu.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_invalid_argument;

TEST(Mtu, FromBytesAcceptsTheFiveSizes) {
  EXPECT_EQ(ibv::Mtu::from_bytes(256), ibv::Mtu::mtu256());
  EXPECT_EQ(ibv::Mtu::from_bytes(512), ibv::Mtu::mtu512());
  EXPECT_EQ(ibv::Mtu::from_bytes(1024), ibv::Mtu::mtu1024());
  EXPECT_EQ(ibv::Mtu::from_bytes(2048), ibv::Mtu::mtu2048());
  EXPECT_EQ(ibv::Mtu::from_bytes(4096), ibv::Mtu::mtu4096());
  for (const std::uint32_t bytes : {256U, 512U, 1024U, 2048U, 4096U}) {
    EXPECT_EQ(ibv::Mtu::from_bytes(bytes).bytes(), bytes);
  }
}

TEST(Mtu, FromBytesRejectsOtherSizes) {
  for (const std::uint32_t bytes : {0U, 1U, 128U, 1000U, 1500U, 4095U, 8192U, 9000U}) {
    EXPECT_TRUE(throws_invalid_argument([bytes] { (void)ibv::Mtu::from_bytes(bytes); },
                                        {"mtu", std::to_string(bytes)}))
        << bytes;
  }
}

TEST(Mtu, NativeCodesMatchEnumIbvMtu) {
  EXPECT_EQ(ibv::Mtu::mtu256().native(), IBV_MTU_256);
  EXPECT_EQ(ibv::Mtu::mtu512().native(), IBV_MTU_512);
  EXPECT_EQ(ibv::Mtu::mtu1024().native(), IBV_MTU_1024);
  EXPECT_EQ(ibv::Mtu::mtu2048().native(), IBV_MTU_2048);
  EXPECT_EQ(ibv::Mtu::mtu4096().native(), IBV_MTU_4096);
  EXPECT_EQ(ibv::Mtu::mtu256().native(), 1);
  EXPECT_EQ(ibv::Mtu::mtu4096().native(), 5);
}

TEST(Mtu, FromNativeRoundTripsCodesOneToFive) {
  constexpr std::array<std::uint32_t, 5> kBytes = {256, 512, 1024, 2048, 4096};
  for (int code = 1; code <= 5; ++code) {
    const auto mtu = ibv::Mtu::from_native(code);
    EXPECT_EQ(mtu.native(), code);
    EXPECT_EQ(mtu.bytes(), kBytes[static_cast<std::size_t>(code - 1)]);
  }
}

TEST(Mtu, FromNativeRejectsOutOfRange) {
  for (const int code : {-1, 0, 6, 100}) {
    EXPECT_TRUE(throws_invalid_argument([code] { (void)ibv::Mtu::from_native(code); },
                                        {"ibv_mtu", std::to_string(code), "1..5"}))
        << code;
  }
}

TEST(Mtu, OrdersBySize) {
  EXPECT_LT(ibv::Mtu::mtu256(), ibv::Mtu::mtu512());
  EXPECT_LT(ibv::Mtu::mtu512(), ibv::Mtu::mtu1024());
  EXPECT_LT(ibv::Mtu::mtu1024(), ibv::Mtu::mtu2048());
  EXPECT_LT(ibv::Mtu::mtu2048(), ibv::Mtu::mtu4096());
  EXPECT_GT(ibv::Mtu::mtu4096(), ibv::Mtu::mtu256());
  EXPECT_LE(ibv::Mtu::mtu1024(), ibv::Mtu::from_bytes(1024));
  EXPECT_EQ(std::min(ibv::Mtu::mtu4096(), ibv::Mtu::mtu1024()), ibv::Mtu::mtu1024());
}

}  // namespace
