// SPDX-License-Identifier: MIT
// The command line of ibvcpp: `devices` and `perf {send|write|read} {bw|lat}`, parsed and
// validated into plain option structs, with perftest's defaults.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ibv/channel/post_options.hpp"
#include "ibv/verbs/queue_pair.hpp"

namespace ibvcpp {

/// Which work request a perf test measures.
enum class Verb : std::uint8_t { send, write, read };
/// Bandwidth or latency.
enum class Measure : std::uint8_t { bw, lat };
/// The transport of the queue pairs (-c): reliable connected, or unreliable datagram (sends
/// only, each message one packet: at most the path MTU).
enum class Transport : std::uint8_t { rc, ud };

/// One of the six tests, e.g. write bw.
struct TestKind {
  Verb verb = Verb::write;
  Measure measure = Measure::bw;

  /// "write_bw", "send_lat", ...
  [[nodiscard]] std::string name() const;
  /// perftest's title: "RDMA_Write BW Test", "Send Latency Test", ...
  [[nodiscard]] std::string title() const;
  /// Parses name() ("write_bw"); nullopt for anything else.
  [[nodiscard]] static std::optional<TestKind> from_name(std::string_view name);

  friend constexpr bool operator==(TestKind, TestKind) noexcept = default;
};

/// The largest message size (-s, -a, --sizes): 8 MiB, as perftest's -a.
inline constexpr std::uint64_t kMaxSize = std::uint64_t{1} << 23;
/// perftest's default TCP port.
inline constexpr std::uint16_t kDefaultTcpPort = 18515;
/// perftest's minimum of -n.
inline constexpr std::uint32_t kMinIterations = 5;
/// The most -n (times -q) accepts: a timestamp of every request is kept.
inline constexpr std::uint32_t kMaxIterations = 100'000'000;
/// perftest's CQ moderation: one signaled request in this many (bw tests).
inline constexpr std::uint32_t kDefaultCqModeration = 100;
/// perftest's range of -Q (MIN_CQ_MOD, MAX_CQ_MOD).
inline constexpr std::uint32_t kMaxCqModeration = 1024;
/// Above this size perftest signals every request (unless -a).
inline constexpr std::uint64_t kCqModerationSizeLimit = 8192;
/// perftest's receive queue depth for send tests.
inline constexpr std::uint32_t kDefaultRxDepth = 512;
/// perftest's receive queue depth for UD send tests: every message's receive posted before the
/// test starts, up to this many (UC_MAX_RX), so that no datagram finds the queue empty.
inline constexpr std::uint32_t kMaxUdRxDepth = 16000;

/// `ibvcpp perf ...`, with every default resolved.
struct PerfOptions {
  TestKind test;
  std::optional<std::string> server;  ///< Set: this side is the client.
  std::optional<std::string> device;  ///< Unset: the first device with an active port.
  std::uint8_t ib_port = 1;
  std::optional<std::uint32_t> gid_index;  ///< Unset: the library's choice.
  std::vector<std::uint64_t> sizes;        ///< In the order they run.
  bool all_sizes = false;                  ///< -a (keeps CQ moderation for large sizes).
  std::uint32_t iterations = 0;            ///< Per size (and per QP in bw tests).
  std::uint16_t tcp_port = kDefaultTcpPort;
  std::optional<std::uint32_t> mtu;  ///< Unset: the port's active MTU.
  std::uint32_t tx_depth = 0;        ///< Already capped at iterations, as perftest does.
  std::uint32_t qps = 1;
  /// -l: requests per post (bw tests), linked and posted with one ibv_post_send. A divisor of
  /// the iterations, at most the TX depth.
  std::uint32_t post_list = 1;
  /// -Q as given (bw tests); unset: perftest's rule (see cq_moderation()). With -l, a divisor
  /// of the post list once capped at the TX depth.
  std::optional<std::uint32_t> cq_mod;
  std::uint32_t inline_size = 0;  ///< 0 for read tests.
  /// --post-interface: how this side's queue pairs post their send-queue requests (classic:
  /// ibv_post_send, the library's default; extended: ibv_wr_*, perftest's). Not exchanged: each
  /// side posts its own way.
  ibv::PostInterface post_interface = ibv::PostInterface::classic;
  bool report_gbits = false;
  bool json = false;
  std::chrono::seconds timeout{30};
  /// -R: the queue pairs are connected with rdma_cm (Channel::connect / ChannelListener on the
  /// same port number, in rdma_cm's port space) instead of the endpoint exchange.
  bool rdma_cm = false;
  /// -c: RC (the default) or UD (send tests, sizes up to the path MTU, no -R).
  Transport connection = Transport::rc;

  [[nodiscard]] bool is_client() const noexcept { return server.has_value(); }
  [[nodiscard]] std::uint64_t max_size() const noexcept;
  /// perftest's CQ moderation for a bw test of `size` bytes: -Q if given (at any size);
  /// else the post list if -l is above 1; else 100, but 1 above 8 KiB (unless -a). Never more
  /// than the TX depth. 1 for latency tests.
  [[nodiscard]] std::uint32_t cq_moderation(std::uint64_t size) const noexcept;
  /// Receives kept posted in send tests: 512, at most the iterations; over UD the iterations,
  /// at most 16000 (as perftest).
  [[nodiscard]] std::uint32_t rx_depth() const noexcept;
  /// Whether a request of `size` bytes goes inline (sends and writes up to -I).
  [[nodiscard]] bool sends_inline(std::uint64_t size) const noexcept {
    return test.verb != Verb::read && size <= inline_size;
  }
  /// sends_inline() as the Channel's per-request policy: exactly as -I says (as perftest), never
  /// the library's automatic choice.
  [[nodiscard]] ibv::InlinePolicy inline_policy(std::uint64_t size) const noexcept {
    return sends_inline(size) ? ibv::InlinePolicy::always : ibv::InlinePolicy::never;
  }
};

/// `ibvcpp devices [-v] [--json]`.
struct DevicesOptions {
  bool verbose = false;
  bool json = false;
};

/// -h anywhere: print `text` on stdout and exit 0.
struct HelpRequest {
  std::string text;
};

using Command = std::variant<HelpRequest, DevicesOptions, PerfOptions>;

/// Parses the arguments after the program name. Throws UsageError (exit status 2) with a
/// message that names the option and what is wrong with it.
[[nodiscard]] Command parse_command_line(std::span<const std::string_view> args);

/// The help texts.
[[nodiscard]] std::string general_usage();
[[nodiscard]] std::string devices_usage();
[[nodiscard]] std::string perf_usage();

/// "RC" or "UD", as perftest's -c spells them.
[[nodiscard]] std::string_view transport_name(Transport transport) noexcept;
/// -c UD: the sizes a message of the path MTU `mtu` bounds. -a keeps the sizes up to the MTU
/// (perftest runs -a up to it too); a size given with -s or --sizes above it is a UsageError
/// naming both (a datagram is one packet). Both sides know the negotiated MTU, so both decide
/// alike.
void fit_datagram_sizes(PerfOptions& options, std::uint32_t mtu);

}  // namespace ibvcpp
