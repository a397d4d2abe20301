// SPDX-License-Identifier: MIT
// perftest's latency and bandwidth statistics (perftest_parameters.c: print_report_lat,
// print_report_bw), on nanosecond timestamps.
#include "ibvcpp/statistics.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ibvcpp {
namespace {

/// perftest drops this many of the largest intervals (LAT_MEASURE_TAIL).
constexpr std::size_t kMeasureTail = 2;

/// perftest's get_median on a sorted array of n: the middle element for odd n, the integer
/// mean of the two middle ones for even n.
std::int64_t median_of(std::span<const std::int64_t> sorted, std::size_t n) {
  if ((n - 1) % 2 != 0) return (sorted[n / 2] + sorted[n / 2 - 1]) / 2;
  return sorted[n / 2];
}

}  // namespace

LatencyStats latency_statistics(std::span<const std::int64_t> posted_ns, unsigned rtt_factor) {
  if (posted_ns.size() < kMeasureTail + 2) {
    throw std::invalid_argument("latency statistics need at least 4 iterations");
  }
  if (rtt_factor == 0) throw std::invalid_argument("rtt_factor must be positive");
  std::vector<std::int64_t> delta(posted_ns.size() - 1);
  for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = posted_ns[i + 1] - posted_ns[i];
  std::ranges::sort(delta);
  const std::size_t m = delta.size() - kMeasureTail;
  const double quotient = 1000.0 * static_cast<double>(rtt_factor);  // ns -> us, one way
  auto us = [&](std::int64_t ns) { return static_cast<double>(ns) / quotient; };

  double sum = 0;
  for (std::size_t i = 0; i < m; ++i) sum += us(delta[i]);
  const double average = sum / static_cast<double>(m);
  double squares = 0;
  for (std::size_t i = 0; i < m; ++i) squares += std::pow(average - us(delta[i]), 2);

  const auto p99 = static_cast<std::size_t>(std::ceil(static_cast<double>(m) * 0.99));
  const auto p999 = static_cast<std::size_t>(std::ceil(static_cast<double>(m) * 0.999));
  LatencyStats stats;
  stats.t_min_us = us(delta[0]);
  stats.t_max_us = us(delta[m]);
  stats.t_typical_us = us(median_of(delta, m));
  stats.t_avg_us = average;
  stats.t_stdev_us = std::sqrt(squares / static_cast<double>(m));
  stats.p99_us = us(delta[p99]);
  stats.p999_us = us(delta[p999]);
  return stats;
}

BandwidthStats average_bandwidth(std::int64_t start_ns, std::int64_t end_ns, std::uint64_t size,
                                 std::uint64_t messages) {
  if (end_ns <= start_ns) throw std::invalid_argument("the end is not after the start");
  const auto elapsed_ns = static_cast<double>(end_ns - start_ns);
  const auto n = static_cast<double>(messages);
  BandwidthStats stats;
  stats.avg_bytes_per_s = static_cast<double>(size) * n * 1e9 / elapsed_ns;
  stats.msg_rate_per_s = n * 1e9 / elapsed_ns;
  return stats;
}

BandwidthStats bandwidth_statistics(std::span<const std::int64_t> posted_ns,
                                    std::span<const CompletionMark> completions, std::uint64_t size,
                                    bool with_peak) {
  if (posted_ns.empty() || completions.empty()) {
    throw std::invalid_argument("bandwidth statistics need posts and completions");
  }
  BandwidthStats stats =
      average_bandwidth(posted_ns.front(), completions.back().ns, size, posted_ns.size());
  if (with_peak) {
    double best_ns = std::numeric_limits<double>::infinity();  // per message
    std::size_t first = 0;  // the first completion at or after post i
    for (std::size_t i = 0; i < posted_ns.size(); ++i) {
      while (first < completions.size() && completions[first].index < i) ++first;
      for (std::size_t j = first; j < completions.size(); ++j) {
        const auto& mark = completions[j];
        if (mark.index < i) continue;  // marks of several QPs need not be in index order
        const double per_message =
            static_cast<double>(mark.ns - posted_ns[i]) / static_cast<double>(mark.index - i + 1);
        best_ns = std::min(best_ns, per_message);
      }
    }
    if (best_ns > 0 && std::isfinite(best_ns)) {
      stats.peak_bytes_per_s = static_cast<double>(size) * 1e9 / best_ns;
    }
  }
  return stats;
}

}  // namespace ibvcpp
