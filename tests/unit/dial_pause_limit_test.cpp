// SPDX-License-Identifier: MIT
// The cap of a TCP bootstrap dial's back-off (src/net/tcp_link.hpp): a second for small jobs,
// longer when many ranks of one machine retry many peers, never more than 10 s.
#include <chrono>

#include <gtest/gtest.h>

#include "net/tcp_link.hpp"

namespace {
namespace dial_pause_limit_test {

using ibv::net::detail::dial_pause_limit;
using namespace std::chrono_literals;

TEST(DialPauseLimit, ASecondForSmallJobsAndSpreadRanks) {
  EXPECT_EQ(dial_pause_limit(0, 1), 1s);
  EXPECT_EQ(dial_pause_limit(7, 8), 1s);     // 8 ranks on one machine
  EXPECT_EQ(dial_pause_limit(63, 64), 1s);   // 64: 4,032 attempts a second at most
  EXPECT_EQ(dial_pause_limit(4095, 1), 1s);  // 4,096 machines of one rank each
  EXPECT_EQ(dial_pause_limit(4095, 4), 1s);  // 16,380 attempts a second
}

TEST(DialPauseLimit, GrowsWithTheAttemptsOfOneMachine) {
  // 255 dials x 256 local ranks / 20,000 a second = 3.264 s.
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(dial_pause_limit(255, 256)),
            3264ms);
  EXPECT_GT(dial_pause_limit(511, 512), dial_pause_limit(255, 512));
}

TEST(DialPauseLimit, NeverMoreThanTenSeconds) {
  EXPECT_EQ(dial_pause_limit(1023, 1024), 10s);
  EXPECT_EQ(dial_pause_limit(1'000'000, 1'000'000), 10s);
}

}  // namespace dial_pause_limit_test
}  // namespace
