// SPDX-License-Identifier: MIT
// The figures of a run, computed exactly as perftest computes them from the same raw data:
// a timestamp per posted request (tposted) and a timestamp per polled completion (tcompleted),
// here in nanoseconds of std::chrono::steady_clock rather than CPU cycles.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ibvcpp {

/// Latency figures in microseconds (perftest's columns).
struct LatencyStats {
  double t_min_us = 0;
  double t_max_us = 0;
  double t_typical_us = 0;  ///< The median.
  double t_avg_us = 0;
  double t_stdev_us = 0;
  double p99_us = 0;
  double p999_us = 0;
};

/// perftest's print_report_lat: from the `iters` timestamps of the posts of a ping-pong (or of
/// a sequence of blocking reads), the iters - 1 intervals between consecutive posts, sorted;
/// the two largest are dropped (LAT_MEASURE_TAIL); of the m = iters - 3 that remain: t_min
/// the smallest, t_max element m (the largest dropped one's neighbour, as perftest prints it),
/// t_typical the median (the mean of the two middle values, in integer nanoseconds, for even
/// m), t_avg and t_stdev (population) over the m, 99% and 99.9% the elements at ceil(m * 0.99)
/// and ceil(m * 0.999). Every figure is divided by `rtt_factor` (2 for send and write, whose
/// interval is a round trip; 1 for read). Needs at least 4 timestamps, else throws
/// std::invalid_argument.
[[nodiscard]] LatencyStats latency_statistics(std::span<const std::int64_t> posted_ns,
                                              unsigned rtt_factor);

/// Bandwidth figures in bytes per second and messages per second.
struct BandwidthStats {
  double peak_bytes_per_s = 0;  ///< 0 when the peak was not computed.
  double avg_bytes_per_s = 0;
  double msg_rate_per_s = 0;
};

/// One polled completion of a bandwidth run: perftest's tcompleted[index] = time.
struct CompletionMark {
  std::size_t index = 0;  ///< The request it completes (and every one before it).
  std::int64_t ns = 0;
};

/// Above this many iterations perftest skips the peak (its --noPeak default).
inline constexpr std::uint64_t kPeakIterationLimit = 20'000;

/// perftest's print_report_bw. `posted_ns[i]` is the time request i was posted (all QPs in
/// posting order), `completions` the polled completions in polling order, the last one
/// completing the last request. Average: bytes * n / (last completion - first post);
/// message rate: n / that time; peak: `size` / the smallest (completions[j].ns - posted[i]) /
/// (index_j - i + 1) over every post i and every completion j at or after it, computed only
/// when `with_peak` (else 0). Throws std::invalid_argument for empty input or a last
/// completion not after the first post.
[[nodiscard]] BandwidthStats bandwidth_statistics(std::span<const std::int64_t> posted_ns,
                                                  std::span<const CompletionMark> completions,
                                                  std::uint64_t size, bool with_peak);

/// Average bandwidth and message rate of `messages` messages of `size` bytes between two
/// times (perftest's figures without a peak). Throws std::invalid_argument unless end > start.
[[nodiscard]] BandwidthStats average_bandwidth(std::int64_t start_ns, std::int64_t end_ns,
                                               std::uint64_t size, std::uint64_t messages);

/// perftest's units: MB/sec is 2^20 bytes per second, Gb/sec 10^9 bits per second, Mpps 10^6
/// messages per second.
[[nodiscard]] constexpr double to_mb_per_s(double bytes_per_s) noexcept {
  return bytes_per_s / 1048576.0;
}
[[nodiscard]] constexpr double to_gbit_per_s(double bytes_per_s) noexcept {
  return bytes_per_s / 125'000'000.0;
}
[[nodiscard]] constexpr double to_mpps(double per_s) noexcept { return per_s / 1e6; }

}  // namespace ibvcpp
