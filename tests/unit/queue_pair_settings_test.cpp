// SPDX-License-Identifier: MIT
// Tests the range checks and duration conversions of the queue pair setting value types, and the
// defaults of QueuePairSettings.
#include "ibv/verbs/queue_pair_settings.hpp"

#include <chrono>
#include <cstdint>
#include <set>

#include <gtest/gtest.h>

#include "ibv/verbs/queue_pair.hpp"
#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_invalid_argument;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

// --- Psn -------------------------------------------------------------------------------------

TEST(Psn, AcceptsTheWhole24BitRange) {
  EXPECT_EQ(ibv::Psn(0).value(), 0U);
  EXPECT_EQ(ibv::Psn(0x123456).value(), 0x123456U);
  EXPECT_EQ(ibv::Psn(0xFFFFFF).value(), 0xFFFFFFU);
}

TEST(Psn, RejectsValuesAbove24BitsNamingTheArgument) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::Psn(0x1000000); }, {"psn", "16777216"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::Psn(0xFFFFFFFF); }, {"psn"}));
}

TEST(Psn, RandomStaysIn24BitsAndVaries) {
  std::set<std::uint32_t> seen;
  for (int i = 0; i < 64; ++i) {
    const auto psn = ibv::Psn::random();
    EXPECT_LE(psn.value(), 0xFFFFFFU);
    seen.insert(psn.value());
  }
  // 64 draws from 2^24 values: a repeat-only sequence means the generator is broken.
  EXPECT_GT(seen.size(), 1U);
}

TEST(Psn, ComparesByValue) {
  EXPECT_EQ(ibv::Psn(7), ibv::Psn(7));
  EXPECT_NE(ibv::Psn(7), ibv::Psn(8));
}

// --- AckTimeout ------------------------------------------------------------------------------

TEST(AckTimeout, RejectsZeroPointingToInfinite) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::AckTimeout(0); }, {"infinite()"}));
}

TEST(AckTimeout, AcceptsExponentsOneToThirtyOne) {
  for (int e = 1; e <= 31; ++e) {
    const ibv::AckTimeout timeout(static_cast<std::uint8_t>(e));
    EXPECT_EQ(timeout.exponent(), e);
    EXPECT_FALSE(timeout.is_infinite());
  }
}

TEST(AckTimeout, RejectsExponentsAboveThirtyOne) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::AckTimeout(32); }, {"32", "1..31"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::AckTimeout(255); }, {"255"}));
}

TEST(AckTimeout, DurationIs4096NanosecondsShiftedByTheExponent) {
  for (int e = 1; e <= 31; ++e) {
    EXPECT_EQ(ibv::AckTimeout(static_cast<std::uint8_t>(e)).duration(),
              nanoseconds(std::int64_t{4096} << e))
        << "exponent " << e;
  }
  EXPECT_EQ(ibv::AckTimeout(1).duration(), nanoseconds(8192));
  // 4.096 us * 2^31 is about 2.4 hours.
  EXPECT_EQ(ibv::AckTimeout(31).duration(), nanoseconds(8'796'093'022'208));
}

TEST(AckTimeout, InfiniteIsExponentZeroWithZeroDuration) {
  constexpr auto infinite = ibv::AckTimeout::infinite();
  EXPECT_TRUE(infinite.is_infinite());
  EXPECT_EQ(infinite.exponent(), 0);
  EXPECT_EQ(infinite.duration(), nanoseconds(0));
  EXPECT_NE(infinite, ibv::AckTimeout::default_value());
}

TEST(AckTimeout, DefaultIsExponent14AboutSixtySevenMilliseconds) {
  constexpr auto timeout = ibv::AckTimeout::default_value();
  EXPECT_EQ(timeout.exponent(), 14);
  EXPECT_FALSE(timeout.is_infinite());
  EXPECT_EQ(timeout.duration(), nanoseconds(67'108'864));
}

TEST(AckTimeout, AtLeastPicksTheSmallestNotShorter) {
  for (int e = 1; e <= 31; ++e) {
    const ibv::AckTimeout exact(static_cast<std::uint8_t>(e));
    EXPECT_EQ(ibv::AckTimeout::at_least(exact.duration()), exact) << "exponent " << e;
    if (e < 31) {
      EXPECT_EQ(ibv::AckTimeout::at_least(exact.duration() + nanoseconds(1)).exponent(), e + 1)
          << "exponent " << e;
    }
    if (e > 1) {
      // Just above the next shorter timeout still needs this one.
      const ibv::AckTimeout shorter(static_cast<std::uint8_t>(e - 1));
      EXPECT_EQ(ibv::AckTimeout::at_least(shorter.duration() + nanoseconds(1)), exact)
          << "exponent " << e;
    }
  }
}

TEST(AckTimeout, AtLeastOfTinyDurationsIsTheShortest) {
  EXPECT_EQ(ibv::AckTimeout::at_least(nanoseconds(0)).exponent(), 1);
  EXPECT_EQ(ibv::AckTimeout::at_least(nanoseconds(1)).exponent(), 1);
  EXPECT_EQ(ibv::AckTimeout::at_least(nanoseconds(-5)).exponent(), 1);
  EXPECT_FALSE(ibv::AckTimeout::at_least(nanoseconds(0)).is_infinite());
}

TEST(AckTimeout, AtLeastClampsToTheLongest) {
  const auto longest = ibv::AckTimeout(31).duration();
  EXPECT_EQ(ibv::AckTimeout::at_least(longest + nanoseconds(1)).exponent(), 31);
  EXPECT_EQ(ibv::AckTimeout::at_least(std::chrono::hours(100)).exponent(), 31);
  EXPECT_FALSE(ibv::AckTimeout::at_least(std::chrono::hours(100)).is_infinite());
}

TEST(AckTimeout, AtLeastOfAMillisecond) {
  // 4.096 us * 2^7 = 524 us < 1 ms <= 4.096 us * 2^8 = 1.05 ms.
  EXPECT_EQ(ibv::AckTimeout::at_least(std::chrono::milliseconds(1)).exponent(), 8);
}

// --- RetryCount ------------------------------------------------------------------------------

TEST(RetryCount, AcceptsZeroToSeven) {
  for (int count = 0; count <= 7; ++count) {
    EXPECT_EQ(ibv::RetryCount(static_cast<std::uint8_t>(count)).value(), count);
  }
}

TEST(RetryCount, RejectsEightAndAbove) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::RetryCount(8); }, {"retry_count", "8"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::RetryCount(255); }, {"retry_count"}));
}

TEST(RetryCount, DefaultIsSixNotSeven) {
  // 6, not 7: rxe takes 7 as "retry forever" (see queue_pair_settings.hpp).
  EXPECT_EQ(ibv::RetryCount::default_value().value(), 6);
  EXPECT_EQ(ibv::RetryCount::default_value(), ibv::RetryCount(6));
}

// --- retry_budget ----------------------------------------------------------------------------

TEST(RetryBudget, IsTheAckTimeoutTimesTheRetriesPlusOne) {
  EXPECT_EQ(ibv::retry_budget(ibv::AckTimeout(14), ibv::RetryCount(6)),
            nanoseconds(7 * 67'108'864));
  EXPECT_EQ(ibv::retry_budget(ibv::AckTimeout(1), ibv::RetryCount(0)), nanoseconds(8192));
  EXPECT_EQ(ibv::retry_budget(ibv::AckTimeout(20), ibv::RetryCount(7)),
            8 * ibv::AckTimeout(20).duration());
}

TEST(RetryBudget, OfTheDefaultsIsAboutHalfASecond) {
  const auto budget =
      ibv::retry_budget(ibv::AckTimeout::default_value(), ibv::RetryCount::default_value());
  EXPECT_EQ(std::chrono::round<std::chrono::milliseconds>(nanoseconds(budget)).count(), 470);
}

TEST(RetryBudget, OfAnInfiniteAckTimeoutIsZero) {
  EXPECT_EQ(ibv::retry_budget(ibv::AckTimeout::infinite(), ibv::RetryCount(6)), nanoseconds(0));
}

// --- RnrRetryCount ---------------------------------------------------------------------------

TEST(RnrRetryCount, AcceptsZeroToSix) {
  for (int count = 0; count <= 6; ++count) {
    const ibv::RnrRetryCount retry(static_cast<std::uint8_t>(count));
    EXPECT_EQ(retry.value(), count);
    EXPECT_FALSE(retry.is_infinite());
  }
}

TEST(RnrRetryCount, RejectsSevenPointingToInfinite) {
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::RnrRetryCount(7); }, {"rnr_retry", "infinite()"}));
}

TEST(RnrRetryCount, RejectsAboveSeven) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::RnrRetryCount(8); }, {"rnr_retry", "8"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::RnrRetryCount(200); }, {"200"}));
}

TEST(RnrRetryCount, InfiniteIsVerbsValueSeven) {
  constexpr auto infinite = ibv::RnrRetryCount::infinite();
  EXPECT_EQ(infinite.value(), 7);
  EXPECT_TRUE(infinite.is_infinite());
}

TEST(RnrRetryCount, DefaultIsSixAndBounded) {
  constexpr auto retry = ibv::RnrRetryCount::default_value();
  EXPECT_EQ(retry.value(), 6);
  EXPECT_FALSE(retry.is_infinite());
  EXPECT_EQ(retry, ibv::RnrRetryCount(6));
}

// --- RnrTimer --------------------------------------------------------------------------------

TEST(RnrTimer, DurationFollowsTheSpecTable) {
  EXPECT_EQ(ibv::RnrTimer(1).duration(), microseconds(10));
  EXPECT_EQ(ibv::RnrTimer(2).duration(), microseconds(20));
  EXPECT_EQ(ibv::RnrTimer(12).duration(), microseconds(640));
  EXPECT_EQ(ibv::RnrTimer(16).duration(), microseconds(2560));
  EXPECT_EQ(ibv::RnrTimer(31).duration(), microseconds(491520));
  EXPECT_EQ(ibv::RnrTimer(0).duration(), microseconds(655360));
}

TEST(RnrTimer, CodesOneToThirtyOneGrowStrictlyAndCodeZeroIsTheLongest) {
  for (int code = 2; code <= 31; ++code) {
    EXPECT_GT(ibv::RnrTimer(static_cast<std::uint8_t>(code)).duration(),
              ibv::RnrTimer(static_cast<std::uint8_t>(code - 1)).duration())
        << "code " << code;
    EXPECT_GT(ibv::RnrTimer(0).duration(),
              ibv::RnrTimer(static_cast<std::uint8_t>(code)).duration());
  }
}

TEST(RnrTimer, AcceptsZeroToThirtyOneAndRejectsAbove) {
  for (int code = 0; code <= 31; ++code) {
    EXPECT_EQ(ibv::RnrTimer(static_cast<std::uint8_t>(code)).code(), code);
  }
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::RnrTimer(32); }, {"min_rnr_timer", "32"}));
}

TEST(RnrTimer, DefaultIsCode16) {
  EXPECT_EQ(ibv::RnrTimer::default_value().code(), 16);
  EXPECT_EQ(ibv::RnrTimer::default_value().duration(), microseconds(2560));
}

TEST(RnrTimer, AtLeastPicksTheShortestNotShorter) {
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(10)).code(), 1);
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(11)).code(), 2);
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(640)).code(), 12);
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(641)).code(), 13);
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(491520)).code(), 31);
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(0)).code(), 1);
}

TEST(RnrTimer, AtLeastAgreesWithABruteForceSearchOfTheTable) {
  for (const std::int64_t us : {1, 9, 10, 15, 25, 100, 999, 2560, 2561, 100000, 491519, 491520}) {
    const auto chosen = ibv::RnrTimer::at_least(microseconds(us));
    EXPECT_GE(chosen.duration(), microseconds(us)) << us << " us";
    for (int code = 0; code <= 31; ++code) {
      const auto other = ibv::RnrTimer(static_cast<std::uint8_t>(code)).duration();
      if (other >= microseconds(us)) {
        EXPECT_LE(chosen.duration(), other) << us << " us";
      }
    }
  }
}

TEST(RnrTimer, AtLeastAboveTheLargestCodedValueIsCodeZero) {
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(491521)).code(), 0);
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(655360)).code(), 0);
  // Clamped: nothing longer exists.
  EXPECT_EQ(ibv::RnrTimer::at_least(microseconds(655361)).code(), 0);
  EXPECT_EQ(ibv::RnrTimer::at_least(std::chrono::seconds(10)).code(), 0);
}

// --- QueueDepth, SgeCount --------------------------------------------------------------------

TEST(QueueDepth, AcceptsOneToIntMax) {
  EXPECT_EQ(ibv::QueueDepth(1).value(), 1U);
  EXPECT_EQ(ibv::QueueDepth(0x7FFFFFFF).value(), 0x7FFFFFFFU);
}

TEST(QueueDepth, RejectsZeroAndAboveIntMax) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::QueueDepth(0); }, {"queue depth 0"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::QueueDepth(0x80000000U); }, {"2147483648"}));
}

TEST(SgeCount, AcceptsOneToIntMax) {
  EXPECT_EQ(ibv::SgeCount(1).value(), 1U);
  EXPECT_EQ(ibv::SgeCount(0x7FFFFFFF).value(), 0x7FFFFFFFU);
}

TEST(SgeCount, RejectsZeroAndAboveIntMax) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::SgeCount(0); }, {"SGE count 0"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::SgeCount(0xFFFFFFFFU); }, {"4294967295"}));
}

// --- InlineSize, ReadAtomicDepth -------------------------------------------------------------

TEST(InlineSize, AcceptsZeroTo64KiB) {
  EXPECT_EQ(ibv::InlineSize(0).value(), 0U);
  EXPECT_EQ(ibv::InlineSize(256).value(), 256U);
  EXPECT_EQ(ibv::InlineSize(65536).value(), 65536U);
}

TEST(InlineSize, RejectsAbove64KiB) {
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::InlineSize(65537); }, {"max_inline_data", "65537"}));
}

TEST(ReadAtomicDepth, RejectsZeroAcceptsOneTo255) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::ReadAtomicDepth(0); }, {"depth 0"}));
  EXPECT_EQ(ibv::ReadAtomicDepth(1).value(), 1);
  EXPECT_EQ(ibv::ReadAtomicDepth(255).value(), 255);
}

// --- QueuePairSettings defaults --------------------------------------------------------------

TEST(QueuePairSettings, DefaultsAreBounded) {
  const ibv::QueuePairSettings settings;
  EXPECT_EQ(settings.port.value, 1);
  EXPECT_FALSE(settings.gid_index.has_value());
  EXPECT_EQ(settings.access, ibv::RemoteAccess::all());
  EXPECT_EQ(settings.max_send_wr, ibv::QueueDepth(128));
  EXPECT_EQ(settings.max_recv_wr, ibv::QueueDepth(128));
  EXPECT_EQ(settings.max_send_sge, ibv::SgeCount(1));
  EXPECT_EQ(settings.max_recv_sge, ibv::SgeCount(1));
  EXPECT_FALSE(settings.max_inline_data.has_value());  // the device's, from kDefault down
  EXPECT_FALSE(settings.mtu.has_value());
  EXPECT_FALSE(settings.send_psn.has_value());
  EXPECT_EQ(settings.ack_timeout, ibv::AckTimeout::default_value());
  EXPECT_FALSE(settings.ack_timeout.is_infinite());
  EXPECT_EQ(settings.retry_count, ibv::RetryCount::default_value());
  EXPECT_EQ(settings.rnr_retry, ibv::RnrRetryCount::default_value());
  EXPECT_FALSE(settings.rnr_retry.is_infinite());
  EXPECT_EQ(settings.min_rnr_timer, ibv::RnrTimer::default_value());
  EXPECT_FALSE(settings.max_rd_atomic.has_value());
  EXPECT_FALSE(settings.max_dest_rd_atomic.has_value());
  EXPECT_EQ(settings.hop_limit, 64);
  EXPECT_EQ(settings.traffic_class, 0);
  EXPECT_EQ(settings.service_level, 0);
}

}  // namespace
