// SPDX-License-Identifier: MIT
// bench/recovery/recovery_rank.cpp: one rank of the recovery benchmark (bench/recovery/run).
// Every rank starts a fault-tolerant Node and a PersistentAllToAll as a job would (the fresh
// start), times the failure-free dissemination barrier and agreement, then runs rounds until
// the victim kills itself (SIGKILL) at the start of a round; the survivors time what follows:
// the round's error, Node::shrink(), the all-to-all built again on the shrunken Node over the
// same memory, and its first round with every byte checked.
//
// Usage: recovery_rank [--config FILE --rank R] [--victim V] [--kill-round K] [--size BYTES]
//                      [--repeat N] [--timeout-ms T] [--gid-index G] [--probe-ack-timeout A]
//                      [--probe-retries R] [--stall-timeout-ms S]
//   The bootstrap is bootstrap_from_environment(): the hosts file, or IBV_BOOTSTRAP=host:port
//   (the rendezvous; --rank and --world or a launcher's variables), or PMIx under mpirun.
//   V (default: the last rank) dies before round K (default 5). BYTES (default 4096): each
//   pair's part of a round. N (default 20): failure-free barriers and agreements timed. A, R,
//   S: the failure detector's FaultToleranceSettings (defaults: the library's).
// Prints one JSON line. Times are CLOCK_MONOTONIC nanoseconds (steady_clock), comparable across
// the ranks of one machine (the testbed's hosts share one kernel): start_ns (main),
// process_start_ns (the process's start, to 10 ms, from /proc/self/stat), fresh_ns
// (the first round checked: device, memory, bootstrap, connection, the collective), barrier_ns
// and agree_ns (failure-free medians at the world size), kill_ns (the victim, just before its
// SIGKILL), error_ns (the round's error), shrunk_ns (holding the shrunken Node), rebuilt_ns (the
// collective built again), round_ns (its first round checked); ok, error.
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "../json_string.hpp"
#include "ibv/ibv.hpp"

namespace {

namespace net = ibv::net;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
  std::optional<std::string> config;
  std::optional<std::uint32_t> rank;
  std::optional<std::uint32_t> world;
  std::optional<std::uint32_t> victim;
  std::uint64_t kill_round = 5;
  std::size_t size = 4096;
  std::uint32_t repeat = 20;
  std::uint32_t timeout_ms = 60000;
  std::optional<std::uint8_t> gid_index;
  net::FaultToleranceSettings detector;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

/// When this process started, on the clock of now_ns(): /proc/self/stat's start time (clock
/// ticks since boot; the testbed's guest never suspends, so boot time is monotonic time), or
/// -1 when it cannot be read.
std::int64_t process_start_ns() {
  std::ifstream stat("/proc/self/stat");
  std::string text;
  if (!std::getline(stat, text)) return -1;
  const auto after_name = text.rfind(')');  // the name may hold spaces and parentheses
  if (after_name == std::string::npos) return -1;
  std::istringstream fields(text.substr(after_name + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) {
      return static_cast<std::int64_t>(
          std::stoull(field) *
          (1'000'000'000ULL / static_cast<std::uint64_t>(sysconf(_SC_CLK_TCK))));
    }
  }
  return -1;
}

std::uint64_t number(std::string_view flag, const char* value) {
  if (value == nullptr) throw std::invalid_argument(std::string(flag) + " needs a value");
  std::size_t used = 0;
  const std::uint64_t parsed = std::stoull(value, &used);
  if (used != std::string_view(value).size()) {
    throw std::invalid_argument(std::string(flag) + " takes a whole number");
  }
  return parsed;
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; i += 2) {  // every option takes a value
    const std::string_view flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (flag == "--config") {
      if (value == nullptr) throw std::invalid_argument("--config needs a file");
      options.config = value;
    } else if (flag == "--rank") {
      options.rank = static_cast<std::uint32_t>(number(flag, value));
    } else if (flag == "--world") {
      options.world = static_cast<std::uint32_t>(number(flag, value));
    } else if (flag == "--victim") {
      options.victim = static_cast<std::uint32_t>(number(flag, value));
    } else if (flag == "--kill-round") {
      options.kill_round = std::max<std::uint64_t>(1, number(flag, value));
    } else if (flag == "--size") {
      options.size = std::max<std::size_t>(16, number(flag, value));
    } else if (flag == "--repeat") {
      options.repeat = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, number(flag, value)));
    } else if (flag == "--timeout-ms") {
      options.timeout_ms = static_cast<std::uint32_t>(number(flag, value));
    } else if (flag == "--gid-index") {
      options.gid_index = static_cast<std::uint8_t>(number(flag, value));
    } else if (flag == "--probe-ack-timeout") {
      options.detector.probe_ack_timeout =
          ibv::AckTimeout(static_cast<std::uint8_t>(number(flag, value)));
    } else if (flag == "--probe-retries") {
      options.detector.probe_retries =
          ibv::RetryCount(static_cast<std::uint8_t>(number(flag, value)));
    } else if (flag == "--stall-timeout-ms") {
      options.detector.stall_timeout = std::chrono::milliseconds(number(flag, value));
    } else {
      throw std::invalid_argument("unknown argument '" + std::string(flag.substr(0, 40)) +
                                  "' (see the comment at the top of recovery_rank.cpp)");
    }
  }
  return options;
}

/// Byte `at` of the part that old rank `from` sends old rank `to` in `round`.
std::byte pattern(std::uint64_t round, std::uint32_t from, std::uint32_t to, std::size_t at) {
  return static_cast<std::byte>(
      (round * 131 + std::uint64_t{from} * 31 + std::uint64_t{to} * 7 + at) & 0xff);
}

/// One rank's collective over memory it keeps across a shrink; parts are addressed by the
/// ranks a rank had in the first Node (`world_ranks` maps the current Node's ranks to those).
class Workload {
 public:
  Workload(net::Node& node, net::Bootstrap& bootstrap, std::size_t size)
      : size_(size),
        send_(std::size_t{node.world_size()} * size),
        receive_(std::size_t{node.world_size()} * 2 * size),
        send_mr_(node.protection_domain().register_local(send_)),
        receive_mr_(node.protection_domain().register_remote_accessible(
            receive_, ibv::RemoteAccess::write())) {
    for (std::uint32_t r = 0; r < node.world_size(); ++r) world_ranks_.push_back(r);
    build(node, bootstrap);
  }

  void build(net::Node& node, net::Bootstrap& bootstrap) {
    all_to_all_.reset();
    all_to_all_.emplace(node, bootstrap, send_mr_, receive_mr_,
                        net::AllToAllSettings{.slot_size = size_, .slots_per_peer = 2});
  }

  /// After a shrink: the surviving ranks, by their new rank.
  void renumber(const net::ShrunkNode& shrunk) {
    std::vector<std::uint32_t> survivors;
    for (std::uint32_t old = 0; old < shrunk.new_rank.size(); ++old) {
      if (shrunk.new_rank[old]) survivors.push_back(world_ranks_.at(old));
    }
    world_ranks_ = std::move(survivors);
  }

  /// One round, every byte of every part checked. Throws the collective's error, or a
  /// std::runtime_error naming the first wrong byte.
  void round(std::uint32_t me, std::uint64_t n) {
    const auto world = static_cast<std::uint32_t>(world_ranks_.size());
    const std::uint32_t from = world_ranks_.at(me);
    std::vector<std::span<const std::byte>> parts;
    for (std::uint32_t to = 0; to < world; ++to) {
      const auto part = std::span(send_).subspan(std::size_t{to} * size_, size_);
      for (std::size_t at = 0; at < size_; ++at) part[at] = pattern(n, from, world_ranks_[to], at);
      parts.emplace_back(part);
    }
    net::AllToAllRound held = all_to_all_->run(parts);
    for (std::uint32_t source = 0; source < world; ++source) {
      const auto got = held.part(source);
      if (got.size() != size_) throw std::runtime_error("a part of the wrong size");
      for (std::size_t at = 0; at < size_; ++at) {
        if (got[at] != pattern(n, world_ranks_[source], from, at)) {
          throw std::runtime_error("round " + std::to_string(n) + ": byte " + std::to_string(at) +
                                   " from rank " + std::to_string(source) + " is wrong");
        }
      }
    }
  }

 private:
  std::size_t size_;
  std::vector<std::byte> send_;
  std::vector<std::byte> receive_;
  ibv::MemoryRegion send_mr_;
  ibv::MemoryRegion receive_mr_;
  std::optional<net::PersistentAllToAll> all_to_all_;
  std::vector<std::uint32_t> world_ranks_;  // [rank now]: the rank it had in the first Node
};

/// The median of `runs` calls of `what`, in nanoseconds.
template <typename F>
std::int64_t median_ns(std::uint32_t runs, F&& what) {
  std::vector<std::int64_t> times;
  for (std::uint32_t i = 0; i < runs; ++i) {
    const std::int64_t start = now_ns();
    what();
    times.push_back(now_ns() - start);
  }
  std::ranges::nth_element(times, times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2));
  return times[times.size() / 2];
}

struct Report {
  std::vector<std::pair<std::string, std::int64_t>> fields;
  void add(std::string name, std::int64_t value) { fields.emplace_back(std::move(name), value); }
  void print(bool ok, const std::string& error) const {
    std::string line = "{";
    for (const auto& [name, value] : fields)
      line += "\"" + name + "\": " + std::to_string(value) + ", ";
    line += "\"ok\": " + std::string(ok ? "true" : "false");
    if (!error.empty()) line += ", \"error\": " + ibv::bench::json_string(error.substr(0, 400));
    std::printf("%s}\n", line.c_str());
    std::fflush(stdout);
  }
};

}  // namespace

int main(int argc, char** argv) {
  Report report;
  report.add("start_ns", now_ns());
  report.add("process_start_ns", process_start_ns());
  try {
    const Options options = parse(argc, argv);
    const auto timeout = std::chrono::milliseconds(options.timeout_ms);
    std::unique_ptr<net::Bootstrap> bootstrap =
        net::bootstrap_from_environment({.hosts_file = options.config,
                                         .rank = options.rank,
                                         .world_size = options.world,
                                         .timeout = timeout});
    const std::uint32_t rank = bootstrap->rank();
    const std::uint32_t world = bootstrap->world_size();
    const std::uint32_t victim = options.victim.value_or(world - 1);
    report.add("rank", rank);
    report.add("world", world);
    const auto* hosts_file = dynamic_cast<const net::Exchanger*>(bootstrap.get());
    const ibv::Context context = hosts_file != nullptr
                                     ? ibv::open_device(hosts_file->config().host(rank).ibdev)
                                     : net::open_device_from_environment();
    const ibv::ProtectionDomain pd(context);
    ibv::QueuePairSettings settings;
    if (options.gid_index) settings.gid_index = *options.gid_index;
    net::Node node = net::NodeBuilder(pd, rank, world)
                         .queue_pair(settings)
                         .wait_mode(ibv::WaitMode::spin_then_block(50us))
                         .barrier_timeout(timeout)
                         .fault_tolerance(options.detector)
                         .build()
                         .connect(*bootstrap);
    Workload workload(node, *bootstrap, options.size);
    std::uint64_t n = 0;
    workload.round(rank, n++);
    report.add("fresh_ns", now_ns());

    report.add("barrier_ns", median_ns(options.repeat, [&] {
                 node.barrier({.algorithm = net::BarrierAlgorithm::dissemination});
               }));
    report.add("agree_ns", median_ns(options.repeat, [&] { (void)node.agree(0); }));
    node.barrier();

    std::uint32_t me = rank;
    for (;; ++n) {
      if (rank == victim && n == options.kill_round) {
        report.add("kill_ns", now_ns());
        report.print(true, "");
        std::raise(SIGKILL);
      }
      try {
        workload.round(me, n);
      } catch (const ibv::Error& error) {
        if (error.kind() != ibv::ErrorKind::peer_gone && error.kind() != ibv::ErrorKind::revoked) {
          throw;
        }
        report.add("error_ns", now_ns());
        report.add("error_round", static_cast<std::int64_t>(n));
        break;
      }
      if (n > options.kill_round + 1000) throw std::runtime_error("the victim never died");
    }
    net::ShrunkNode shrunk = std::move(node).shrink();
    report.add("shrunk_ns", now_ns());
    node = std::move(shrunk.node);
    workload.renumber(shrunk);
    me = node.rank();
    workload.build(node, node.in_band_bootstrap());
    report.add("rebuilt_ns", now_ns());
    // Every survivor goes on from the same round: the furthest any of them reached.
    std::uint64_t next = n;
    for (const std::uint64_t other : node.in_band_bootstrap().all_gather(n))
      next = std::max(next, other);
    workload.round(me, next);
    report.add("round_ns", now_ns());
    report.add("survivors", node.world_size());
    // Until every survivor is done: none leaves while another still needs it.
    node.in_band_bootstrap().barrier();
    report.print(true, "");
    return EXIT_SUCCESS;
  } catch (const std::exception& error) {
    report.print(false, error.what());
    return EXIT_FAILURE;
  }
}
