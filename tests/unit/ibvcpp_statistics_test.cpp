// SPDX-License-Identifier: MIT
// ibvcpp's figures against hand-computed values, computed the way perftest computes them:
// intervals between posts, the two largest dropped, the integer median, population stdev,
// percentiles at ceil(m * p); bandwidth over first post to last completion, and the peak.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "ibvcpp/statistics.hpp"

namespace {

using ibvcpp::CompletionMark;

/// Post timestamps (ns) whose consecutive intervals are `intervals`, starting at `start`.
std::vector<std::int64_t> posts_with_intervals(const std::vector<std::int64_t>& intervals,
                                               std::int64_t start = 1'000'000) {
  std::vector<std::int64_t> posts{start};
  for (const auto interval : intervals) posts.push_back(posts.back() + interval);
  return posts;
}

TEST(IbvcppLatencyStatistics, SmallSetByHand) {
  // Intervals 10..60 us, shuffled: sorted 10 20 30 40 | 50 60 dropped; m = 4.
  const auto posts = posts_with_intervals({40'000, 10'000, 60'000, 30'000, 50'000, 20'000});
  const auto s = ibvcpp::latency_statistics(posts, 1);
  EXPECT_DOUBLE_EQ(s.t_min_us, 10.0);
  EXPECT_DOUBLE_EQ(s.t_max_us, 50.0);                // element m: the smaller dropped one
  EXPECT_DOUBLE_EQ(s.t_typical_us, 25.0);            // m even: (20 + 30) / 2
  EXPECT_DOUBLE_EQ(s.t_avg_us, 25.0);                // (10 + 20 + 30 + 40) / 4
  EXPECT_DOUBLE_EQ(s.t_stdev_us, std::sqrt(125.0));  // (225 + 25 + 25 + 225) / 4
  EXPECT_DOUBLE_EQ(s.p99_us, 50.0);                  // ceil(4 * 0.99) = 4
  EXPECT_DOUBLE_EQ(s.p999_us, 50.0);                 // ceil(4 * 0.999) = 4
}

TEST(IbvcppLatencyStatistics, RoundTripFactorHalvesEveryFigure) {
  const auto posts = posts_with_intervals({40'000, 10'000, 60'000, 30'000, 50'000, 20'000});
  const auto s = ibvcpp::latency_statistics(posts, 2);
  EXPECT_DOUBLE_EQ(s.t_min_us, 5.0);
  EXPECT_DOUBLE_EQ(s.t_max_us, 25.0);
  EXPECT_DOUBLE_EQ(s.t_typical_us, 12.5);
  EXPECT_DOUBLE_EQ(s.t_avg_us, 12.5);
  EXPECT_DOUBLE_EQ(s.t_stdev_us, std::sqrt(125.0) / 2);
  EXPECT_DOUBLE_EQ(s.p99_us, 25.0);
  EXPECT_DOUBLE_EQ(s.p999_us, 25.0);
}

TEST(IbvcppLatencyStatistics, MedianIsPerftestsIntegerMean) {
  // Sorted intervals 1 2 3 4 | 100 200 ns: m = 4, median (3 + 2) / 2 = 2 in integer ns.
  const auto even = ibvcpp::latency_statistics(posts_with_intervals({100, 3, 1, 200, 4, 2}), 1);
  EXPECT_DOUBLE_EQ(even.t_typical_us, 0.002);
  // Odd m = 5: the middle element. Sorted 1 1 2 3 4 | 5 9.
  const auto odd = ibvcpp::latency_statistics(posts_with_intervals({3, 1, 4, 1, 5, 9, 2}), 1);
  EXPECT_DOUBLE_EQ(odd.t_typical_us, 0.002);
  EXPECT_DOUBLE_EQ(odd.t_min_us, 0.001);
  EXPECT_DOUBLE_EQ(odd.t_max_us, 0.005);
  EXPECT_DOUBLE_EQ(odd.t_avg_us, 0.0022);  // (1 + 1 + 2 + 3 + 4) / 5 ns
}

TEST(IbvcppLatencyStatistics, PercentilesOfAThousand) {
  // Intervals 1..1002 us in descending order: m = 1000 after the two largest are dropped.
  std::vector<std::int64_t> intervals;
  for (std::int64_t us = 1002; us >= 1; --us) intervals.push_back(us * 1000);
  const auto s = ibvcpp::latency_statistics(posts_with_intervals(intervals), 1);
  EXPECT_DOUBLE_EQ(s.t_min_us, 1.0);
  EXPECT_DOUBLE_EQ(s.t_max_us, 1001.0);     // element 1000
  EXPECT_DOUBLE_EQ(s.t_typical_us, 500.5);  // (501 + 500) / 2
  EXPECT_DOUBLE_EQ(s.t_avg_us, 500.5);      // mean of 1..1000
  EXPECT_NEAR(s.t_stdev_us, std::sqrt((1000.0 * 1000.0 - 1.0) / 12.0), 1e-9);
  EXPECT_DOUBLE_EQ(s.p99_us, 991.0);    // element ceil(990) = 990
  EXPECT_DOUBLE_EQ(s.p999_us, 1000.0);  // element ceil(999) = 999
}

TEST(IbvcppLatencyStatistics, NeedsFourTimestamps) {
  EXPECT_THROW((void)ibvcpp::latency_statistics(posts_with_intervals({1, 2}), 1),
               std::invalid_argument);
  EXPECT_NO_THROW((void)ibvcpp::latency_statistics(posts_with_intervals({1, 2, 3}), 1));
  EXPECT_THROW((void)ibvcpp::latency_statistics(posts_with_intervals({1, 2, 3}), 0),
               std::invalid_argument);
}

TEST(IbvcppBandwidthStatistics, AverageAndPeakByHand) {
  // Four 1000-byte requests posted every 10 ns, completions polled for #1 at 100 ns and #3 at
  // 400 ns (CQ moderation 2). Average: 4000 bytes in 400 ns. Peak: the best
  // (completion - post) / messages is post 0 to completion 1: 100 ns / 2 messages.
  const std::vector<std::int64_t> posted{0, 10, 20, 30};
  const std::vector<CompletionMark> marks{{1, 100}, {3, 400}};
  const auto s = ibvcpp::bandwidth_statistics(posted, marks, 1000, true);
  EXPECT_DOUBLE_EQ(s.avg_bytes_per_s, 1e10);
  EXPECT_DOUBLE_EQ(s.msg_rate_per_s, 1e7);
  EXPECT_DOUBLE_EQ(s.peak_bytes_per_s, 2e10);
  EXPECT_DOUBLE_EQ(ibvcpp::to_mb_per_s(s.peak_bytes_per_s), 2e10 / 1048576.0);
}

TEST(IbvcppBandwidthStatistics, PeakConsidersOnlyLaterCompletions) {
  // Post 3 is late: its own completion alone is slow; the peak is not taken from completions
  // before a post.
  const std::vector<std::int64_t> posted{0, 100, 200, 300};
  const std::vector<CompletionMark> marks{{0, 110}, {1, 200}, {2, 290}, {3, 500}};
  const auto s = ibvcpp::bandwidth_statistics(posted, marks, 100, true);
  // Best per message: post 2 -> completion 2: 90 ns.
  EXPECT_DOUBLE_EQ(s.peak_bytes_per_s, 100 * 1e9 / 90);
  EXPECT_DOUBLE_EQ(s.avg_bytes_per_s, 400 * 1e9 / 500);
}

TEST(IbvcppBandwidthStatistics, WithoutPeakReportsZero) {
  const std::vector<std::int64_t> posted{0, 10, 20, 30};
  const std::vector<CompletionMark> marks{{3, 400}};
  const auto s = ibvcpp::bandwidth_statistics(posted, marks, 1000, false);
  EXPECT_DOUBLE_EQ(s.peak_bytes_per_s, 0.0);
  EXPECT_DOUBLE_EQ(s.avg_bytes_per_s, 1e10);
}

TEST(IbvcppBandwidthStatistics, AverageBandwidthBetweenTwoTimes) {
  const auto s = ibvcpp::average_bandwidth(1000, 1000 + 1'000'000'000, 65536, 1000);
  EXPECT_DOUBLE_EQ(s.avg_bytes_per_s, 65536.0 * 1000);
  EXPECT_DOUBLE_EQ(s.msg_rate_per_s, 1000.0);
  EXPECT_DOUBLE_EQ(s.peak_bytes_per_s, 0.0);
  EXPECT_THROW((void)ibvcpp::average_bandwidth(5, 5, 1, 1), std::invalid_argument);
}

TEST(IbvcppBandwidthStatistics, RejectsEmptyOrBackwardsInput) {
  const std::vector<std::int64_t> posted{100};
  EXPECT_THROW((void)ibvcpp::bandwidth_statistics(posted, {}, 1, true), std::invalid_argument);
  const std::vector<CompletionMark> early{{0, 50}};
  EXPECT_THROW((void)ibvcpp::bandwidth_statistics(posted, early, 1, true), std::invalid_argument);
}

TEST(IbvcppBandwidthStatistics, PerftestUnits) {
  EXPECT_DOUBLE_EQ(ibvcpp::to_mb_per_s(1048576.0), 1.0);  // MB = 2^20 bytes
  EXPECT_DOUBLE_EQ(ibvcpp::to_gbit_per_s(125e6), 1.0);    // Gb = 10^9 bits
  EXPECT_DOUBLE_EQ(ibvcpp::to_mpps(2.5e6), 2.5);
}

}  // namespace
