// SPDX-License-Identifier: MIT
// What ibvcpp perf prints: perftest's header and columns as text, or one JSON document
// (schema in tools/ibvcpp/README.md), and a progress line per size on stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "ibvcpp/options.hpp"
#include "ibvcpp/statistics.hpp"

namespace ibvcpp {

/// The facts of a run that the header and the JSON document show.
struct RunInfo {
  TestKind test;
  bool client = true;
  std::string device;
  std::uint8_t ib_port = 1;
  std::string link_layer;  ///< "Ethernet" or "IB", as perftest prints it.
  std::uint32_t mtu = 0;   ///< Path MTU in bytes.
  std::optional<std::uint32_t> gid_index;
  std::uint32_t qps = 1;
  std::uint32_t iterations = 0;
  std::uint32_t tx_depth = 0;
  std::uint32_t rx_depth = 0;   ///< Send tests.
  std::uint32_t post_list = 1;  ///< Requests per post (bw tests).
  std::uint32_t cq_moderation = 0;
  /// CQ moderation of sizes above 8 KiB, when it differs (a --sizes list that crosses 8 KiB).
  std::optional<std::uint32_t> cq_moderation_large;
  std::uint32_t inline_size = 0;                                    ///< Send and write tests.
  std::uint32_t outstanding_reads = 0;                              ///< Read tests.
  ibv::PostInterface post_interface = ibv::PostInterface::classic;  ///< This side's.
  bool report_gbits = false;
  bool rdma_cm = false;                  ///< -R: the queue pairs were connected by rdma_cm.
  Transport connection = Transport::rc;  ///< -c.
};

/// One row of a bandwidth test.
struct BwResult {
  std::uint64_t bytes = 0;
  std::uint64_t iterations = 0;  ///< All QPs together, as perftest counts them.
  BandwidthStats stats;
  /// The server of a UD send test: datagrams the client sent that never arrived (iterations
  /// then counts those that did). Unset elsewhere.
  std::optional<std::uint64_t> lost;
};

/// One row of a latency test.
struct LatResult {
  std::uint64_t bytes = 0;
  std::uint64_t iterations = 0;
  LatencyStats stats;
};

/// perftest's dashed separator line (with its newline).
[[nodiscard]] std::string result_line();
/// The block before the results: separator, title, settings, separator.
[[nodiscard]] std::string format_header(const RunInfo& info);
/// The column titles (with newline), e.g. " #bytes     #iterations    BW peak[MB/sec] ...".
[[nodiscard]] std::string format_column_titles(const RunInfo& info);
/// One result row with perftest's field widths (with newline).
[[nodiscard]] std::string format_row(const BwResult& result, bool report_gbits);
[[nodiscard]] std::string format_row(const LatResult& result);

/// The JSON document of a whole run (one line, with newline).
[[nodiscard]] std::string format_json(const RunInfo& info, std::span<const BwResult> results);
[[nodiscard]] std::string format_json(const RunInfo& info, std::span<const LatResult> results);

/// The stderr line after a size: "ibvcpp: write_bw: 65536 bytes done (3 of 23)" (with newline).
[[nodiscard]] std::string format_progress(const TestKind& test, std::uint64_t bytes,
                                          std::size_t done, std::size_t total);

}  // namespace ibvcpp
