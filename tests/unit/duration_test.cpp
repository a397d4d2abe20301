// SPDX-License-Identifier: MIT
// Tests ibv::Duration, the one type of public timeouts: implicit conversion from any
// std::chrono duration, saturation at 100 years instead of overflow, and how messages write one
// (detail::duration_text).
#include "ibv/duration.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <ratio>

#include <gtest/gtest.h>

#include "detail/positive_timeout.hpp"
#include "ibv/channel/channel_timeouts.hpp"
#include "ibv/error.hpp"

namespace {

using namespace std::chrono_literals;

TEST(Duration, ConvertsFromAnyChronoDuration) {
  EXPECT_EQ(ibv::Duration(2s).count(), 2'000'000'000);
  EXPECT_EQ(ibv::Duration(20us).count(), 20'000);
  EXPECT_EQ(ibv::Duration(std::chrono::duration<double>(1.5)).count(), 1'500'000'000);
  ibv::ChannelTimeouts timeouts;
  timeouts.operation = 250ms;  // a field assigned from milliseconds
  EXPECT_EQ(timeouts.operation, 250ms);
  const std::optional<ibv::Duration> timeout = 3s;
  EXPECT_EQ(*timeout, 3000ms);
}

TEST(Duration, SaturatesAtOneHundredYearsInsteadOfOverflowing) {
  EXPECT_EQ(ibv::Duration(std::chrono::hours::max()), ibv::Duration::kLongest);
  EXPECT_EQ(ibv::Duration(std::chrono::milliseconds::max()), ibv::Duration::kLongest);
  EXPECT_EQ(ibv::Duration(std::chrono::nanoseconds::max()), ibv::Duration::kLongest);
  EXPECT_EQ(ibv::Duration(std::chrono::milliseconds::min()), -ibv::Duration::kLongest);
  EXPECT_EQ(ibv::Duration(std::chrono::duration<double>(1e30)), ibv::Duration::kLongest);
  // Unsigned ticks and units finer than nanoseconds convert too.
  EXPECT_EQ(ibv::Duration(std::chrono::duration<unsigned, std::milli>(5)), 5ms);
  EXPECT_EQ(ibv::Duration(std::chrono::duration<std::int64_t, std::pico>(1500)), 1ns);
  EXPECT_EQ(ibv::Duration(std::chrono::duration<std::int64_t, std::pico>::max()),
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                std::chrono::duration<std::int64_t, std::pico>::max()));
  // The longest still fits a deadline: now() + it does not overflow.
  const auto deadline = std::chrono::steady_clock::now() + ibv::Duration(std::chrono::hours::max());
  EXPECT_GT(deadline, std::chrono::steady_clock::now());
}

TEST(DurationText, UsesTheLargestUnitThatIsExact) {
  EXPECT_EQ(ibv::detail::duration_text(10s), "10000 ms");
  EXPECT_EQ(ibv::detail::duration_text(0ns), "0 ms");
  EXPECT_EQ(ibv::detail::duration_text(1500us), "1500 us");
  EXPECT_EQ(ibv::detail::duration_text(-1ns), "-1 ns");
}

TEST(CheckPositive, NamesTheArgumentAndItsValue) {
  try {
    ibv::detail::check_positive(-5ms, "options.timeout", "Exchanger::Exchanger");
    FAIL() << "a negative duration passed";
  } catch (const ibv::Error& error) {
    EXPECT_EQ(error.kind(), ibv::ErrorKind::invalid_argument);
    EXPECT_NE(std::string_view(error.what()).find("options.timeout -5 ms is not positive"),
              std::string_view::npos)
        << error.what();
  }
  EXPECT_NO_THROW(ibv::detail::check_positive(1ns, "timeout", "test"));
}

}  // namespace
