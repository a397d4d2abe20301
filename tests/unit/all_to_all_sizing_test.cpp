// SPDX-License-Identifier: MIT
// Tests the pure parts of PersistentAllToAll: the queue sizing against a device's limits (the
// errors name max_qp_wr and max_cqe, which no test device is small enough to reach), and the
// immediate data of parts and credits (size, round modulo 32, credits carried by a part,
// credit count), bit by bit.
#include <cstdint>

#include <gtest/gtest.h>

#include "collective/all_to_all_core.hpp"
#include "ibv/verbs/context.hpp"
#include "support/error_matchers.hpp"

namespace {

using ibv::DeviceAttributes;
using ibv::net::detail::AllToAllImmediate;
using ibv::net::detail::size_all_to_all;
using ibv_test::throws_invalid_argument;

/// Soft-RoCE's limits (rxe_param.h: RXE_MAX_QP_WR, RXE_MAX_CQE).
DeviceAttributes rxe_like() {
  DeviceAttributes device;
  device.max_qp_wr = 0x4000;
  device.max_cqe = 32767;
  return device;
}

TEST(AllToAllSizing, QueuesHoldEverySlotsPartsAndCredits) {
  const auto sizing = size_all_to_all(8, 2, rxe_like());
  EXPECT_EQ(sizing.send_queue, 5U);     // 2 parts + 2 credits + 1
  EXPECT_EQ(sizing.receive_queue, 4U);  // the peer's 2 parts + 2 credits
  EXPECT_EQ(sizing.completion_queue, 7 * 9);
}

TEST(AllToAllSizing, OneRankNeedsOneCompletionEntryAndNoQueues) {
  EXPECT_EQ(size_all_to_all(1, 2, rxe_like()).completion_queue, 1);
}

TEST(AllToAllSizing, ACompletionQueueOverMaxCqeNamesTheLimit) {
  // 128 peers x (4 x 64 + 1) = 32,896 entries > 32,767; 127 peers fit exactly (32,639).
  EXPECT_NO_THROW((void)size_all_to_all(128, 64, rxe_like()));
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)size_all_to_all(129, 64, rxe_like()); },
                              {"slots_per_peer", "max_cqe 32767", "32896 entries", "128 peers"}));
}

TEST(AllToAllSizing, AQueueOverMaxQpWrNamesTheLimit) {
  DeviceAttributes small = rxe_like();
  small.max_qp_wr = 4;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)size_all_to_all(4, 2, small); },
                                      {"slots_per_peer", "max_qp_wr 4", "5 entries"}));
  small.max_qp_wr = 5;
  EXPECT_NO_THROW((void)size_all_to_all(4, 2, small));
}

TEST(AllToAllImmediate, APartCarriesItsSizeAndRoundModulo32) {
  const std::uint32_t immediate = AllToAllImmediate::part(34, 0xabcdef);
  EXPECT_FALSE(AllToAllImmediate::is_credit(immediate));
  EXPECT_EQ(AllToAllImmediate::round_bits(immediate), 2U);
  EXPECT_EQ(AllToAllImmediate::size(immediate), 0xabcdefU);
  EXPECT_EQ(AllToAllImmediate::credits(immediate), 0U);
  EXPECT_EQ(AllToAllImmediate::size(AllToAllImmediate::part(0, 0)), 0U);
  EXPECT_EQ(AllToAllImmediate::part(31, (1U << 24U) - 1), 0x1fffffffU);
}

TEST(AllToAllImmediate, APartCarriesUpToThreeCreditsWithoutDisturbingItsRoundOrSize) {
  for (const std::uint32_t carried : {0U, 1U, 2U, 3U}) {
    const std::uint32_t immediate = AllToAllImmediate::part(31, (1U << 24U) - 1, carried);
    EXPECT_FALSE(AllToAllImmediate::is_credit(immediate));
    EXPECT_EQ(AllToAllImmediate::credits(immediate), carried);
    EXPECT_EQ(AllToAllImmediate::round_bits(immediate), 31U);
    EXPECT_EQ(AllToAllImmediate::size(immediate), (1U << 24U) - 1);
  }
  EXPECT_EQ(AllToAllImmediate::part(31, (1U << 24U) - 1, 3), 0x7fffffffU);
}

TEST(AllToAllImmediate, ACreditCarriesItsCountAndNeverLooksLikeAPart) {
  for (const std::uint32_t count : {1U, 2U, 64U, 0x7fffffffU}) {
    const std::uint32_t immediate = AllToAllImmediate::credit(count);
    EXPECT_TRUE(AllToAllImmediate::is_credit(immediate));
    EXPECT_EQ(AllToAllImmediate::credits(immediate), count);
  }
}

}  // namespace
