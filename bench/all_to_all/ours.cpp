// SPDX-License-Identifier: MIT
// bench/all_to_all/ours.cpp: one rank of the all-to-all benchmark, the library's side. A Node
// booted with bootstrap_from_environment() (PMIx under mpirun), a PersistentAllToAll over it;
// per round every rank sends SIZE bytes to every rank (its own part copied locally, as
// MPI_Alltoall does) and releases the round at once, keeping --in-flight rounds (by default as
// many as keep about 4 MiB of its parts in flight, 1 to 7 of --slots 8) on the wire, with
// --peers-in-flight (by default as many parts as make about 2 MiB, all at 256 KiB and below): round
// n + 1 starts before round n is waited for. After W warm-up rounds and a barrier each rank times R
// rounds; rank 0 prints one JSON line with every rank's seconds (the run script divides the bytes
// each rank sent to the others, R x (N - 1) x SIZE, by the slowest rank's).
//
//   all_to_all_ours --size BYTES [--rounds R | --seconds T] [--warmup W] [--peers-in-flight K]
//                   [--slots S] [--in-flight D] [--wait spin|block|spin_then_block:US]
//                   [--timeout-s S] [--callgrind GAP] [--settle-us US] [--own-part yes|no]
//                   [--retry-count N]
//
// --retry-count N: the queue pairs' retransmissions after an ACK timeout (0..7; default the
// library's 6; perftest asks for 7, which Soft-RoCE takes as "retry forever").
// --seconds T: as many rounds as take about T seconds at the pace of rank 0's warm-up (its
// rounds after the first; W at least 2), the same count on every rank.
// --callgrind GAP: the instruction-count mode of bench/all_to_all/run --callgrind: after the
// warm-up, R rounds in measured_early(), GAP rounds not measured, R rounds in measured_late(),
// each measured part ended by end_of_measurement() (callgrind's --dump-before splits there).
// In the measured rounds every rank sleeps --settle-us (default 20000) between starting a round
// and waiting for it, in settle(), so that the waiting finds every completion there: the count
// is the work of a round, not the spinning of a wait that depends on the machine's timing (the
// run script subtracts settle()'s own instructions). --own-part no sends an empty own part (no
// local copy), as the raw loop (raw_loop.c) does in that mode.
// Device: IBV_DEVICE (bench/all_to_all/rank sets it per testbed host), else the first active
// one; GID index: IBV_TEST_GID_INDEX when set, else the device's default.
#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../json_string.hpp"
#include "ibv/collective/persistent_all_to_all.hpp"
#include "ibv/ibv.hpp"

namespace {

namespace net = ibv::net;
using Clock = std::chrono::steady_clock;

struct Options {
  std::size_t size = 0;
  std::uint64_t rounds = 100;
  std::optional<double> seconds;
  std::uint64_t warmup = 10;
  std::uint32_t peers_in_flight = 0;  // 0: by the bytes in flight (peers_in_flight_for)
  std::uint32_t slots = 8;
  std::uint32_t in_flight = 0;  // 0: by the bytes in flight (rounds_in_flight_for)
  ibv::WaitMode wait = ibv::WaitMode::spin();
  std::string wait_text = "spin";
  std::uint32_t timeout_s = 120;
  std::optional<std::uint64_t> callgrind_gap;
  std::uint32_t settle_us = 20000;
  bool own_part = true;
  std::optional<std::uint32_t> retry_count;
};

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr,
               "all_to_all_ours: %s\n"
               "usage: all_to_all_ours --size BYTES [--rounds R | --seconds T] [--warmup W] "
               "[--peers-in-flight K] [--slots S] [--in-flight D]\n"
               "                       [--wait spin|block|spin_then_block:US] [--timeout-s S] "
               "[--callgrind GAP] [--settle-us US] [--own-part yes|no] [--retry-count N]\n",
               problem.c_str());
  std::exit(2);
}

std::uint64_t number(std::string_view flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || text[0] == '-') {
    usage(std::string(flag) + " wants a whole number, not '" + text + "'");
  }
  return value;
}

std::uint32_t number32(std::string_view flag, const char* text) {
  const std::uint64_t value = number(flag, text);
  if (value > UINT32_MAX) usage(std::string(flag) + " is too large: " + text);
  return static_cast<std::uint32_t>(value);
}

double seconds_of(const char* text) {
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0 && value < 3600)) {
    usage("--seconds wants a number of seconds above 0 and below 3600");
  }
  return value;
}

ibv::WaitMode wait_mode_of(std::string_view text) {
  constexpr std::string_view kSpinThenBlock = "spin_then_block:";
  if (text == "spin") return ibv::WaitMode::spin();
  if (text == "block") return ibv::WaitMode::block();
  if (text.starts_with(kSpinThenBlock)) {
    const std::string us(text.substr(kSpinThenBlock.size()));
    return ibv::WaitMode::spin_then_block(std::chrono::microseconds(number("--wait", us.c_str())));
  }
  usage("--wait is spin, block or spin_then_block:US");
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) usage(std::string(flag) + " wants a value");
    const char* value = argv[++i];
    if (flag == "--size") {
      options.size = number(flag, value);
    } else if (flag == "--rounds") {
      options.rounds = number(flag, value);
    } else if (flag == "--seconds") {
      options.seconds = seconds_of(value);
    } else if (flag == "--warmup") {
      options.warmup = number(flag, value);
    } else if (flag == "--peers-in-flight") {
      options.peers_in_flight = number32(flag, value);
    } else if (flag == "--slots") {
      options.slots = number32(flag, value);
    } else if (flag == "--in-flight") {
      options.in_flight = number32(flag, value);
    } else if (flag == "--timeout-s") {
      options.timeout_s = number32(flag, value);
    } else if (flag == "--callgrind") {
      options.callgrind_gap = number(flag, value);
    } else if (flag == "--settle-us") {
      options.settle_us = number32(flag, value);
    } else if (flag == "--retry-count") {
      options.retry_count = number32(flag, value);
      if (*options.retry_count > 7) usage("--retry-count is 0 to 7");
    } else if (flag == "--own-part") {
      const std::string_view text = value;
      if (text != "yes" && text != "no") usage("--own-part is yes or no");
      options.own_part = text == "yes";
    } else if (flag == "--wait") {
      options.wait_text = value;
      options.wait = wait_mode_of(value);
    } else {
      usage("unknown option " + std::string(flag));
    }
  }
  if (options.size == 0) usage("--size is needed (bytes per pair and round, at least 1)");
  if (options.rounds == 0) usage("--rounds must be at least 1");
  if (options.in_flight > options.slots) {
    usage("--in-flight is 1 to --slots (rounds in flight share the slots; 0: by the bytes)");
  }
  if (options.timeout_s == 0) usage("--timeout-s must be at least 1");
  if (options.seconds && options.warmup < 2) usage("--seconds needs --warmup 2 or more");
  if (options.seconds && options.callgrind_gap)
    usage("--seconds and --callgrind exclude each other");
  return options;
}

/// One round, released at once (its slots go back to the senders).
void one_round(net::PersistentAllToAll& all_to_all,
               std::span<const std::span<const std::byte>> parts) {
  const net::AllToAllRound round = all_to_all.run(parts);
  (void)round;
}

/// The peers in flight when --peers-in-flight is not given: as many parts as make about
/// kPartBytesInFlight, at least 1 (all of them at small parts). At 8 hosts and 1 MiB every
/// part at once (7 MiB per rank) overloaded Soft-RoCE until a write's retries ran out, with
/// every rank alive, and with retries unbounded (--retry-count 7) no write of round 0 was
/// acknowledged in 120 s; 2 at once ran.
std::uint32_t peers_in_flight_for(const Options& options, std::uint32_t world) {
  constexpr std::uint64_t kPartBytesInFlight = std::uint64_t{2} << 20U;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(kPartBytesInFlight / options.size, 1, std::max(world, 2U) - 1));
}

/// The rounds in flight when --in-flight is not given: as many as keep about kBytesInFlight of
/// this rank's parts on the wire, at least 1, at most slots - 1. More overloads Soft-RoCE at
/// large parts: at 8 hosts and 1 MiB, 7 rounds (49 MiB per rank) made the testbed drop packets
/// until a queue pair's retries ran out ("rank gone?" with every rank alive).
std::uint32_t rounds_in_flight_for(const Options& options, std::uint32_t world) {
  constexpr std::uint64_t kBytesInFlight = std::uint64_t{4} << 20U;
  const std::uint64_t round_bytes = std::uint64_t{std::max(world, 2U) - 1} * options.size;
  return static_cast<std::uint32_t>(
      std::clamp<std::uint64_t>(kBytesInFlight / round_bytes, 1, std::max(options.slots, 2U) - 1));
}

/// `rounds` rounds with up to `depth` in flight: the next round starts as soon as the oldest
/// is returned and released (the parts do not change, so the rounds share the send memory).
void rounds_in_flight(net::PersistentAllToAll& all_to_all,
                      std::span<const std::span<const std::byte>> parts, std::uint64_t rounds,
                      std::uint32_t depth) {
  std::uint64_t started = 0;
  for (; started < rounds && started < depth; ++started) all_to_all.start(parts);
  for (std::uint64_t done = 0; done < rounds; ++done) {
    { const net::AllToAllRound round = all_to_all.wait(); }  // released at once
    if (started < rounds) {
      all_to_all.start(parts);
      ++started;
    }
  }
}

/// Sleeps `us` microseconds: the rounds of the callgrind mode let the fabric finish here
/// (bench/all_to_all/run subtracts this function's instructions).
[[gnu::noinline]] void settle(std::uint32_t us) {
  timespec pause{.tv_sec = static_cast<time_t>(us / 1000000U),
                 .tv_nsec = static_cast<long>(us % 1000000U) * 1000L};
  while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
  }
}

void settled_rounds(net::PersistentAllToAll& all_to_all,
                    std::span<const std::span<const std::byte>> parts, std::uint64_t rounds,
                    std::uint32_t settle_us) {
  for (std::uint64_t i = 0; i < rounds; ++i) {
    all_to_all.start(parts);
    settle(settle_us);
    const net::AllToAllRound round = all_to_all.wait();
    (void)round;
  }
}

// The measured parts of the callgrind mode: callgrind starts a fresh count on entering
// measured_* and writes it out on entering end_of_measurement (bench/hot_path/lib.sh).
[[gnu::noinline]] void measured_early(net::PersistentAllToAll& all_to_all,
                                      std::span<const std::span<const std::byte>> parts,
                                      std::uint64_t rounds, std::uint32_t settle_us) {
  settled_rounds(all_to_all, parts, rounds, settle_us);
}
[[gnu::noinline]] void measured_late(net::PersistentAllToAll& all_to_all,
                                     std::span<const std::span<const std::byte>> parts,
                                     std::uint64_t rounds, std::uint32_t settle_us) {
  settled_rounds(all_to_all, parts, rounds, settle_us);
}
volatile int measurement_ended = 0;
[[gnu::noinline]] void end_of_measurement() { measurement_ended = 1; }

std::vector<std::byte> encode(double value) {
  std::vector<std::byte> bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

double decode(const std::vector<std::byte>& bytes) {
  double value = 0;
  if (bytes.size() == sizeof value) std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  const auto timeout = std::chrono::seconds(options.timeout_s);
  const std::unique_ptr<net::Bootstrap> bootstrap =
      net::bootstrap_from_environment({.timeout = timeout});
  const std::uint32_t rank = bootstrap->rank();
  const std::uint32_t world = bootstrap->world_size();
  const std::uint32_t in_flight =
      options.in_flight != 0 ? options.in_flight : rounds_in_flight_for(options, world);
  const ibv::Context context = net::open_device_from_environment();
  const ibv::ProtectionDomain pd(context);
  ibv::QueuePairSettings qp_settings;
  if (const char* gid = std::getenv("IBV_TEST_GID_INDEX"); gid != nullptr && *gid != '\0') {
    qp_settings.gid_index = number32("IBV_TEST_GID_INDEX", gid);
  }
  if (options.retry_count) {
    qp_settings.retry_count = ibv::RetryCount(static_cast<std::uint8_t>(*options.retry_count));
  }
  net::Node node = net::NodeBuilder(pd, rank, world)
                       .queue_pair(qp_settings)
                       .wait_mode(options.wait)
                       .timeouts({.operation = timeout, .drop = timeout})
                       .barrier_timeout(timeout)
                       .build()
                       .connect(*bootstrap);

  // Send memory: one part per rank, each in a place of its own (MPI_Alltoall's send buffer).
  // Receive memory: the collective's slots, world x slots_per_peer x size.
  const std::size_t size = options.size;
  std::vector<std::byte> send(std::size_t{world} * size);
  std::vector<std::byte> receive(std::size_t{world} * options.slots * size);
  for (std::size_t i = 0; i < send.size(); ++i) send[i] = static_cast<std::byte>(i * 7U + rank);
  const ibv::MemoryRegion send_mr = pd.register_local(send);
  const ibv::MemoryRegion receive_mr =
      pd.register_remote_accessible(receive, ibv::RemoteAccess::write());
  net::PersistentAllToAll all_to_all(
      node, *bootstrap, send_mr, receive_mr,
      {.slot_size = size,
       .slots_per_peer = options.slots,
       .peers_in_flight = options.peers_in_flight != 0 ? options.peers_in_flight
                                                       : peers_in_flight_for(options, world),
       .timeout = timeout,
       .wait_mode = options.wait});
  std::vector<std::span<const std::byte>> parts(world);
  for (std::uint32_t r = 0; r < world; ++r) {
    parts[r] = std::span<const std::byte>(send).subspan(std::size_t{r} * size, size);
  }
  if (!options.own_part) parts[rank] = {};

  // The warm-up, its rounds after the first timed: the pace --seconds counts with.
  Clock::time_point paced_from{};
  for (std::uint64_t i = 0; i < options.warmup; ++i) {
    if (i == 1) paced_from = Clock::now();
    one_round(all_to_all, parts);
  }
  std::uint64_t rounds = options.rounds;
  if (options.seconds) {
    const double per_round = std::chrono::duration<double>(Clock::now() - paced_from).count() /
                             static_cast<double>(options.warmup - 1);
    const double wanted = std::ceil(*options.seconds / std::max(per_round, 1e-7));
    // Rank 0's count, on every rank.
    const double agreed = decode(bootstrap->all_gather_bytes(encode(wanted)).front());
    rounds = static_cast<std::uint64_t>(std::clamp(agreed, 3.0, 1e7));
  }
  node.barrier();  // everyone starts the measured rounds together

  double seconds = 0;
  if (options.callgrind_gap) {
    measured_early(all_to_all, parts, rounds, options.settle_us);
    end_of_measurement();
    for (std::uint64_t i = 0; i < *options.callgrind_gap; ++i) one_round(all_to_all, parts);
    measured_late(all_to_all, parts, rounds, options.settle_us);
    end_of_measurement();
  } else {
    const auto started = Clock::now();
    rounds_in_flight(all_to_all, parts, rounds, in_flight);
    seconds = std::chrono::duration<double>(Clock::now() - started).count();
  }
  node.barrier();  // nobody tears down while a peer still needs it

  const std::vector<std::vector<std::byte>> all = bootstrap->all_gather_bytes(encode(seconds));
  if (rank == 0) {
    std::string list;
    for (const auto& entry : all) {
      std::array<char, 32> text{};
      std::snprintf(text.data(), text.size(), "%s%.6f", list.empty() ? "" : ",", decode(entry));
      list += text.data();
    }
    const auto& settings = all_to_all.settings();
    std::printf(
        "{\"tool\":\"ours\",\"ranks\":%u,\"size\":%zu,\"rounds\":%llu,\"warmup\":%llu,"
        "\"bytes_per_rank\":%llu,\"seconds\":[%s],\"peers_in_flight\":%u,"
        "\"slots_per_peer\":%u,\"in_flight\":%u,\"wait\":\"%s\",\"own_part\":%s,\"device\":%s,"
        "\"bootstrap\":%s}\n",
        world, size, static_cast<unsigned long long>(rounds),
        static_cast<unsigned long long>(options.warmup),
        static_cast<unsigned long long>(rounds * (world - 1ULL) * size), list.c_str(),
        settings.peers_in_flight, settings.slots_per_peer, in_flight, options.wait_text.c_str(),
        options.own_part ? "true" : "false", ibv::bench::json_string(context.name()).c_str(),
        ibv::bench::json_string(bootstrap->description()).c_str());
  }
  return EXIT_SUCCESS;
} catch (const std::exception& error) {
  std::fprintf(stderr, "all_to_all_ours: %s\n", error.what());
  return EXIT_FAILURE;
}
