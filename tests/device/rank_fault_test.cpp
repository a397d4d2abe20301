// SPDX-License-Identifier: MIT
// Device tests of a rank that dies: a world of 3 ranks on the test device, each rank its own
// process. This test process is rank 1; ranks 0 and 2 are child processes of this binary (child
// roles, child_role.hpp). One rank is killed (SIGKILL) in a barrier or in the middle of a
// PersistentAllToAll's round, or dies half way through the out-of-band endpoint exchange. Every
// survivor must end that call with a typed ibv::Error within its timeout (never hang), tear down
// cleanly (no verbs objects left), and then build a new world of the 2 survivors on fresh ports
// that passes barriers and exchanges data.
//
// A barrier's fault path is the same for every algorithm but is waited for in either of the
// channel's ways: four of the seven barrier faults wait spinning (one per algorithm, and the
// only one whose signal fails), three sleep on the completion channel (WaitMode::block), so
// that both ways are tested and the processes that only wait out a timeout leave the testbed's
// two vCPUs to the work that needs them.
//
// Children report on stdout, one fact a line ("FAULT kind=timeout at_ns=... elapsed_ms=...",
// "WHAT <message>", "CLEAN"); this process checks those lines, so every assertion is here.
// Times are steady_clock (CLOCK_MONOTONIC), the same clock in every process of the machine, so
// a survivor's error can be dated from the moment the victim died.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "child_role.hpp"
#include "device_fixture.hpp"
#include "ibv/collective/persistent_all_to_all.hpp"
#include "ibv/net/exchange_message.hpp"
#include "node_ranks.hpp"
#include "resource_check.hpp"
#include "support/child_process.hpp"
#include "support/error_matchers.hpp"
#include "support/timing.hpp"

namespace ibv::test {
namespace {

using ibv_test::milliseconds_since;

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ibv_test::error_of;
using net::BarrierAlgorithm;

constexpr std::array kFaultAlgorithms{BarrierAlgorithm::centralized, BarrierAlgorithm::binary_tree,
                                      BarrierAlgorithm::dissemination};

/// Exchanger deadline while a world is built: it covers the children's start-up, which is slow
/// under emulation. Failures come from a closed connection, long before it.
constexpr auto kBuildTimeout = 20'000ms;
/// Every barrier's timeout: what a survivor of a dead rank waits at most.
constexpr auto kBarrierTimeout = 2'000ms;
/// How long tearing a Node down waits for each barrier signal still in flight. A signal to a
/// killed rank never completes on Soft-RoCE: rxe takes the default retry count 7 as "retry
/// forever" (real adapters give up after 7 retries), so each such signal costs this much at
/// teardown (then it is cancelled: its queue pair is moved to the error state). The default is
/// 10 s.
constexpr auto kDropTimeout = 1'000ms;
/// Hard bound on a child process; only reached when something hangs.
constexpr auto kRankProcessTimeout = 90s;
/// Barriers every rank passes before one of them is killed.
constexpr int kBarriersBefore = 3;
/// The world of the fault, and the rank this test process plays in it.
constexpr std::uint32_t kFaultWorld = 3;
constexpr std::uint32_t kTestRank = 1;

std::int64_t now_ns(Clock::time_point when = Clock::now()) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
}

double milliseconds_between(std::int64_t from_ns, std::int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) / 1e6;
}

// --- Worlds on this host ----------------------------------------------------------------

/// A world of `size` ranks on 127.0.0.1, each on a fresh port, all on `device`.
net::NetworkConfig local_world(std::uint32_t size, const std::string& device) {
  const auto ports = fresh_ports(size);
  net::NetworkConfigBuilder builder;
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    builder.add_host(
        {.rank = rank, .hostname = "127.0.0.1", .port = ports.at(rank), .ibdev = device});
  }
  return builder.build();
}

std::filesystem::path write_config(const std::filesystem::path& path,
                                   const net::NetworkConfig& config) {
  std::ofstream(path) << config.to_json();
  return path;
}

/// Rank `rank` of `config`, connected over `exchanger`, every barrier by `algorithm`, every
/// wait by `wait`.
net::Node connect_rank(const net::NetworkConfig& config, std::uint32_t rank, const Context& context,
                       const ProtectionDomain& pd, net::Exchanger& exchanger,
                       BarrierAlgorithm algorithm, RetryCount retries = RetryCount::default_value(),
                       const WaitMode& wait = WaitMode::spin()) {
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  settings.retry_count = retries;
  return net::NodeBuilder(pd, config, rank)
      .queue_pair(settings)
      .wait_mode(wait)
      .barrier_algorithm(algorithm)
      .barrier_timeout(kBarrierTimeout)
      .timeouts({.operation = 10'000ms, .drop = kDropTimeout})
      .build()
      .connect(exchanger);
}

std::byte pattern_byte(std::uint32_t rank, std::size_t index) {
  return static_cast<std::byte>((std::size_t{rank} * 37U + index * 11U) & 0xffU);
}

/// The survivors' new world of 2: connects rank `rank` of `config`, passes a barrier of every
/// algorithm, exchanges a text over the exchanger and sends bytes over RDMA to the other rank,
/// checking what arrives. Throws on any failure; everything is released when it returns.
void run_new_world(const net::NetworkConfig& config, std::uint32_t rank) {
  if (config.world_size() != 2) throw std::invalid_argument("the new world has 2 ranks");
  const std::uint32_t peer = 1 - rank;
  net::Exchanger exchanger(config, rank, {.timeout = kBuildTimeout});
  const Context context = open_device(config.host(rank).ibdev);
  const ProtectionDomain pd(context);
  net::Node node =
      connect_rank(config, rank, context, pd, exchanger, BarrierAlgorithm::dissemination);
  for (const auto algorithm : kFaultAlgorithms) node.barrier({.algorithm = algorithm});

  const auto texts = exchanger.exchange("rank " + std::to_string(rank) + " of the new world");
  if (texts.at(peer) != "rank " + std::to_string(peer) + " of the new world") {
    throw std::runtime_error("the exchange brought \"" + texts.at(peer) + "\" from rank " +
                             std::to_string(peer));
  }

  constexpr std::size_t kBytes = 256;
  std::vector<std::byte> outbox(kBytes);
  std::vector<std::byte> inbox(kBytes, std::byte{0});
  for (std::size_t i = 0; i < kBytes; ++i) outbox[i] = pattern_byte(rank, i);
  const MemoryRegion out_mr = pd.register_local(outbox);
  const MemoryRegion in_mr = pd.register_local(inbox);
  PendingWork receive =
      node.post(peer, ibv::op::Receive{std::array{in_mr.scatter(std::span(inbox))}});
  node.barrier();  // both receives are posted before either rank sends
  node.execute(peer, ibv::op::Send{std::array{out_mr.gather(std::span(outbox))}});
  if (receive.wait().byte_length() != kBytes) throw std::runtime_error("short receive");
  for (std::size_t i = 0; i < kBytes; ++i) {
    if (inbox[i] != pattern_byte(peer, i)) {
      throw std::runtime_error("byte " + std::to_string(i) + " from rank " + std::to_string(peer) +
                               " is wrong");
    }
  }
  node.barrier();
}

// --- What children report -----------------------------------------------------------------

/// A survivor's failed call, as a child prints it or as this process sees it.
struct Fault {
  std::string kind;       ///< ErrorKind of the ibv::Error ("" when none).
  std::int64_t at_ns{};   ///< When the call ended (steady_clock).
  double elapsed_ms{};    ///< How long the call ran.
  std::string then_kind;  ///< Kind of the next call's error (poisoned barrier/exchanger).
  bool poisoned{};        ///< Barrier: Node::barrier_poisoned() afterwards.
  std::string what;
};

void print_fault(const Fault& fault) {
  std::printf("FAULT kind=%s at_ns=%lld elapsed_ms=%.1f then=%s poisoned=%d\nWHAT %s\n",
              fault.kind.c_str(), static_cast<long long>(fault.at_ns), fault.elapsed_ms,
              fault.then_kind.c_str(), fault.poisoned ? 1 : 0, fault.what.c_str());
  std::fflush(stdout);
}

/// The value of `key=` on the first line of `text` that starts with `tag` ("" if none).
std::string field(const std::string& text, const std::string& tag, const std::string& key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with(tag + " ")) continue;
    std::istringstream words(line.substr(tag.size() + 1));
    std::string word;
    while (words >> word) {
      if (word.starts_with(key + "=")) return word.substr(key.size() + 1);
    }
    return "";
  }
  return "";
}

/// The rest of the first line of `text` that starts with `tag` (nullopt if none).
std::optional<std::string> line_after(const std::string& text, const std::string& tag) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line == tag) return "";
    if (line.starts_with(tag + " ")) return line.substr(tag.size() + 1);
  }
  return std::nullopt;
}

/// A child's FAULT and WHAT lines (nullopt without a FAULT line).
std::optional<Fault> parse_fault(const std::string& text) {
  if (!line_after(text, "FAULT")) return std::nullopt;
  Fault fault;
  fault.kind = field(text, "FAULT", "kind");
  const std::string at = field(text, "FAULT", "at_ns");
  const std::string elapsed = field(text, "FAULT", "elapsed_ms");
  fault.at_ns = at.empty() ? 0 : std::stoll(at);
  fault.elapsed_ms = elapsed.empty() ? 0.0 : std::stod(elapsed);
  fault.then_kind = field(text, "FAULT", "then");
  fault.poisoned = field(text, "FAULT", "poisoned") == "1";
  fault.what = line_after(text, "WHAT").value_or("");
  return fault;
}

/// What a child does after its fault: tear down (already done by the caller's scopes), build
/// the new world, and check that it holds no verbs objects at the end. Its exit code.
int rebuild_and_check(const std::string& new_config, const std::string& new_rank) {
  run_new_world(net::NetworkConfig::from_file(new_config),
                static_cast<std::uint32_t>(std::stoul(new_rank)));
  std::printf("REBUILT\n");
  std::string why;
  const auto own = own_resource_counts(why);
  if (!own) {
    std::printf("UNCHECKED %s\n", why.c_str());
    return 6;
  }
  if (!own->empty()) {
    std::printf("LEAKS");
    for (const auto& [key, count] : *own) {
      std::printf(" %lld %s on %s;", count, key.second.c_str(), key.first.c_str());
    }
    std::printf("\n");
    return 5;
  }
  std::printf("CLEAN\n");
  return 0;
}

/// Waits until `child` has printed a line `tag`, or has ended, or kRankProcessTimeout passed.
bool wait_for_line(ChildProcess& child, const std::string& tag) {
  const auto deadline = Clock::now() + kRankProcessTimeout;
  while (Clock::now() < deadline) {
    if (line_after(child.out(), tag)) return true;
    if (!child.running()) return line_after(child.out(), tag).has_value();
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

// --- Child roles --------------------------------------------------------------------------

BarrierAlgorithm algorithm_named(const std::string& name) {
  for (const auto algorithm : kFaultAlgorithms) {
    if (to_string(algorithm) == name) return algorithm;
  }
  throw std::invalid_argument("no barrier algorithm '" + name + "'");
}

/// The wait mode a child is told by name ("spin" or "block").
WaitMode wait_mode_named(const std::string& name) {
  if (name == to_string(WaitStrategy::spin)) return WaitMode::spin();
  if (name == to_string(WaitStrategy::block)) return WaitMode::block();
  throw std::invalid_argument("no wait mode '" + name + "' (spin or block)");
}

/// rank_fault_barrier CONFIG RANK ALGORITHM victim|survivor NEW_CONFIG NEW_RANK spin|block:
/// passes kBarriersBefore barriers, then the victim prints PARKED and waits to be killed; a
/// survivor enters one more barrier, which must fail (FAULT line), then builds the new world.
/// Every barrier of the old world waits in the mode named last.
int barrier_rank_role(const std::vector<std::string>& args) {
  if (args.size() != 7) throw std::invalid_argument("rank_fault_barrier needs 7 arguments");
  const auto config = net::NetworkConfig::from_file(args[0]);
  const auto rank = static_cast<std::uint32_t>(std::stoul(args[1]));
  const bool victim = args[3] == "victim";
  {
    net::Exchanger exchanger(config, rank, {.timeout = kBuildTimeout});
    const Context context = open_device(config.host(rank).ibdev);
    const ProtectionDomain pd(context);
    net::Node node = connect_rank(config, rank, context, pd, exchanger, algorithm_named(args[2]),
                                  RetryCount::default_value(), wait_mode_named(args[6]));
    for (int i = 0; i < kBarriersBefore; ++i) node.barrier();
    if (victim) {
      std::printf("PARKED\n");
      std::fflush(stdout);
      std::this_thread::sleep_for(kRankProcessTimeout);  // killed long before
      return 9;
    }
    const auto start = Clock::now();
    Fault fault;
    const auto error = error_of([&] { node.barrier(); });
    fault.at_ns = now_ns();
    fault.elapsed_ms = milliseconds_since(start);
    if (!error) {
      std::printf("NO FAULT: the barrier passed without the killed rank\n");
      return 3;
    }
    fault.kind = to_string(error->kind());
    fault.what = error->what();
    fault.poisoned = node.barrier_poisoned();
    const auto then = error_of([&] { node.barrier(); });
    fault.then_kind = then ? std::string(to_string(then->kind())) : "none";
    print_fault(fault);
  }  // the failed world is torn down here
  return rebuild_and_check(args[4], args[5]);
}

/// Connects to `port` on 127.0.0.1, retrying while it is refused, until kBuildTimeout.
int dial(std::uint16_t port) {
  const auto deadline = Clock::now() + kBuildTimeout;
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("socket() failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) {
      return fd;
    }
    ::close(fd);
    if (Clock::now() > deadline) {
      throw std::runtime_error("port " + std::to_string(port) + " never took a connection");
    }
    std::this_thread::sleep_for(20ms);
  }
}

/// rank_fault_exchange CONFIG RANK MODE NEW_CONFIG NEW_RANK, MODE one of
///   hello_then_die:     (rank 0 only) dials every other rank like an Exchanger, sends its
///                       hello, prints DYING and kills itself before sending any data;
///   endpoints_then_die: runs the endpoint exchange of PreparedNode::connect() with the real
///                       Exchanger, prints DYING and kills itself before the second exchange
///                       (the one that says every rank's queue pairs are connected);
///   survivor:           builds its Node, which must fail (FAULT line), then the new world.
int exchange_rank_role(const std::vector<std::string>& args) {
  if (args.size() != 5) throw std::invalid_argument("rank_fault_exchange needs 5 arguments");
  const auto config = net::NetworkConfig::from_file(args[0]);
  const auto rank = static_cast<std::uint32_t>(std::stoul(args[1]));
  const std::string& mode = args[2];
  const auto world = static_cast<std::uint32_t>(config.world_size());
  if (mode == "hello_then_die") {
    if (rank != 0) throw std::invalid_argument("hello_then_die is for rank 0, which only dials");
    std::vector<int> sockets;
    for (std::uint32_t peer = 1; peer < world; ++peer) {
      const int fd = dial(config.host(peer).port);
      sockets.push_back(fd);
      const auto hello = net::MessageHeader{.kind = net::MessageKind::hello,
                                            .sender_rank = rank,
                                            .world_size = world,
                                            .sequence = 0,
                                            .payload_length = 0}
                             .encode();
      if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(hello.size())) {
        throw std::runtime_error("could not send the hello to rank " + std::to_string(peer));
      }
    }
    std::printf("DYING at_ns=%lld\n", static_cast<long long>(now_ns()));
    std::fflush(stdout);
    std::raise(SIGKILL);
    return 9;
  }
  if (mode == "endpoints_then_die") {
    net::Exchanger exchanger(config, rank, {.timeout = kBuildTimeout});
    const Context context = open_device(config.host(rank).ibdev);
    const ProtectionDomain pd(context);
    QueuePairSettings settings;
    settings.gid_index = test_gid_index(context);
    const net::PreparedNode prepared =
        net::NodeBuilder(pd, config, rank).queue_pair(settings).build();
    std::vector<net::PeerEndpoint> mine;
    for (std::uint32_t peer = 0; peer < world; ++peer) mine.push_back(prepared.endpoint_for(peer));
    (void)exchanger.all_to_all<net::PeerEndpoint>(mine);
    std::printf("DYING at_ns=%lld\n", static_cast<long long>(now_ns()));
    std::fflush(stdout);
    std::raise(SIGKILL);
    return 9;
  }
  if (mode != "survivor") throw std::invalid_argument("no mode '" + mode + "'");
  {
    net::Exchanger exchanger(config, rank, {.timeout = kBuildTimeout});
    const Context context = open_device(config.host(rank).ibdev);
    const ProtectionDomain pd(context);
    const auto start = Clock::now();
    Fault fault;
    const auto error = error_of([&] {
      (void)connect_rank(config, rank, context, pd, exchanger, BarrierAlgorithm::dissemination);
    });
    fault.at_ns = now_ns();
    fault.elapsed_ms = milliseconds_since(start);
    if (!error) {
      std::printf("NO FAULT: the Node was built without the dead rank\n");
      return 3;
    }
    fault.kind = to_string(error->kind());
    fault.what = error->what();
    const auto then = error_of([&] { (void)exchanger.exchange_bytes({}); });
    fault.then_kind = then ? std::string(to_string(then->kind())) : "none";
    print_fault(fault);
  }  // the failed world is torn down here
  return rebuild_and_check(args[3], args[4]);
}

/// The rounds every rank of an all-to-all fault runs before the victim stops.
constexpr std::uint64_t kAllToAllRoundsBefore = 3;
/// The all-to-all's wait: what a survivor of a dead rank waits at most.
constexpr auto kAllToAllTimeout = 2'000ms;
/// Rounds a survivor tries after the victim stopped; one of them must fail.
constexpr std::uint64_t kAllToAllRoundsAfter = 4;

/// One rank's all-to-all of an all-to-all fault: 256-byte parts, two slots per peer.
struct AllToAllRank {
  static constexpr std::size_t kSlot = 256;
  AllToAllRank(net::Node& node, net::Bootstrap& bootstrap)
      : send(std::size_t{node.world_size()} * kSlot, std::byte{1}),
        receive(std::size_t{node.world_size()} * 2 * kSlot),
        send_mr(node.protection_domain().register_local(send)),
        receive_mr(
            node.protection_domain().register_remote_accessible(receive, RemoteAccess::write())),
        all_to_all(node, bootstrap, send_mr, receive_mr,
                   {.slot_size = kSlot, .timeout = kAllToAllTimeout}) {
    for (std::uint32_t r = 0; r < node.world_size(); ++r) {
      parts.emplace_back(send.data() + std::size_t{r} * kSlot, kSlot);
    }
  }
  /// Runs one round and checks that every part arrived whole.
  void round() {
    const net::AllToAllRound done = all_to_all.run(parts);
    for (std::uint32_t r = 0; r < parts.size(); ++r) {
      if (done.part(r).size() != kSlot) throw std::runtime_error("a short part");
    }
  }
  std::vector<std::byte> send;
  std::vector<std::byte> receive;
  MemoryRegion send_mr;
  MemoryRegion receive_mr;
  net::PersistentAllToAll all_to_all;
  std::vector<std::span<const std::byte>> parts;
};

/// A survivor's rounds after the victim stopped: the fault of the first that fails (kind ""
/// when none did), with the kind of the call after it.
Fault all_to_all_survivor_fault(AllToAllRank& rank) {
  Fault fault;
  for (std::uint64_t n = 0; n < kAllToAllRoundsAfter; ++n) {
    const auto start = Clock::now();
    const auto error = error_of([&] { rank.round(); });
    if (!error) continue;
    fault.at_ns = now_ns();
    fault.elapsed_ms = milliseconds_since(start);
    fault.kind = to_string(error->kind());
    fault.what = error->what();
    const auto then = error_of([&] { rank.round(); });
    fault.then_kind = then ? std::string(to_string(then->kind())) : "none";
    break;
  }
  return fault;
}

/// rank_fault_all_to_all CONFIG RANK victim|survivor NEW_CONFIG NEW_RANK: builds a Node and a
/// PersistentAllToAll, runs kAllToAllRoundsBefore rounds; then the victim starts the next
/// round (its writes posted), prints PARKED and waits to be killed; a survivor runs rounds
/// until one fails (FAULT line), then builds the new world.
int all_to_all_rank_role(const std::vector<std::string>& args) {
  if (args.size() != 5) throw std::invalid_argument("rank_fault_all_to_all needs 5 arguments");
  const auto config = net::NetworkConfig::from_file(args[0]);
  const auto rank = static_cast<std::uint32_t>(std::stoul(args[1]));
  {
    net::Exchanger exchanger(config, rank, {.timeout = kBuildTimeout});
    const Context context = open_device(config.host(rank).ibdev);
    const ProtectionDomain pd(context);
    net::Node node =
        connect_rank(config, rank, context, pd, exchanger, BarrierAlgorithm::dissemination);
    AllToAllRank all_to_all(node, exchanger);
    for (std::uint64_t n = 0; n < kAllToAllRoundsBefore; ++n) all_to_all.round();
    if (args[2] == "victim") {
      all_to_all.all_to_all.start(all_to_all.parts);
      std::printf("PARKED\n");
      std::fflush(stdout);
      std::this_thread::sleep_for(kRankProcessTimeout);  // killed long before
      return 9;
    }
    const Fault fault = all_to_all_survivor_fault(all_to_all);
    if (fault.kind.empty()) {
      std::printf("NO FAULT: %llu rounds passed without the killed rank\n",
                  static_cast<unsigned long long>(kAllToAllRoundsAfter));
      return 3;
    }
    print_fault(fault);
  }  // the failed world is torn down here
  return rebuild_and_check(args[3], args[4]);
}

const bool kBarrierRoleRegistered = register_child_role("rank_fault_barrier", barrier_rank_role);
const bool kExchangeRoleRegistered = register_child_role("rank_fault_exchange", exchange_rank_role);
const bool kAllToAllRoleRegistered =
    register_child_role("rank_fault_all_to_all", all_to_all_rank_role);

// --- The tests ----------------------------------------------------------------------------

/// The worlds of one fault: 3 ranks, then the 2 survivors (the child survivor and this
/// process, in the order of their old ranks) on fresh ports, as files for the children.
struct Worlds {
  explicit Worlds(std::uint32_t victim)
      : directory("rank_fault"),
        device(open_test_device().name()),
        old_world(local_world(kFaultWorld, device)),
        new_world(local_world(2, device)),
        old_file(write_config(directory.path() / "old_world.json", old_world)),
        new_file(write_config(directory.path() / "new_world.json", new_world)),
        survivor(victim == 0 ? 2 : 0),
        survivor_new_rank(survivor < kTestRank ? 0 : 1),
        test_new_rank(1 - survivor_new_rank) {}

  TemporaryDirectory directory;
  std::string device;
  net::NetworkConfig old_world;
  net::NetworkConfig new_world;
  std::filesystem::path old_file;
  std::filesystem::path new_file;
  std::uint32_t survivor;           ///< Old rank of the child that survives.
  std::uint32_t survivor_new_rank;  ///< Its rank in the new world.
  std::uint32_t test_new_rank;      ///< This process's rank in the new world.
};

/// Checks a child survivor's report: its fault, its teardown and its new world.
void expect_child_survived(ChildProcess& child, const std::string& expected_kinds,
                           const std::string& mentions, const std::string& then_kind) {
  const std::optional<int> code = child.wait();
  EXPECT_EQ(code, 0) << child.describe();
  const std::string out = child.out();
  const auto fault = parse_fault(out);
  ASSERT_TRUE(fault) << child.describe();
  EXPECT_NE(expected_kinds.find(fault->kind), std::string::npos)
      << "kind " << fault->kind << ", expected one of " << expected_kinds << ": " << fault->what;
  EXPECT_NE(fault->what.find(mentions), std::string::npos) << fault->what;
  EXPECT_EQ(fault->then_kind, then_kind) << child.describe();
  EXPECT_TRUE(line_after(out, "REBUILT")) << child.describe();
  EXPECT_TRUE(line_after(out, "CLEAN")) << child.describe();
}

/// A barrier where one rank dies: ranks 0..2 pass kBarriersBefore barriers by `algorithm`; the
/// victim (rank 0 or 2, a child) parks; this process kills it (SIGKILL) while the other child
/// is already in the next barrier, then enters that barrier itself. Both survivors' barriers
/// must fail with a typed ibv::Error within their timeout and poison the Node; then the two
/// build a new world.
///
/// With the default retry count a signal to the dead rank never fails on Soft-RoCE (see
/// kDropTimeout), so the barriers time out. With `finite_retries` this process's queue pairs
/// retry 6 times: its signal to the dead rank then fails (retry exceeded) well before the
/// barrier's timeout, and the barrier must say so (peer_gone naming the rank, the kind a vanished
/// peer has on a channel too). Every rank of
/// the old world waits by `wait`.
void kill_a_rank_in_a_barrier(BarrierAlgorithm algorithm, std::uint32_t victim,
                              const WaitMode& wait, bool finite_retries = false) {
  const Worlds worlds(victim);
  const std::string algorithm_name(to_string(algorithm));
  const std::string wait_name(to_string(wait.strategy));
  const auto& dir = worlds.directory.path();
  ChildProcess victim_process(
      child_role_command("rank_fault_barrier",
                         {worlds.old_file.string(), std::to_string(victim), algorithm_name,
                          "victim", worlds.new_file.string(), "-", wait_name}),
      kRankProcessTimeout, dir / "victim.out");
  ChildProcess survivor_process(
      child_role_command(
          "rank_fault_barrier",
          {worlds.old_file.string(), std::to_string(worlds.survivor), algorithm_name, "survivor",
           worlds.new_file.string(), std::to_string(worlds.survivor_new_rank), wait_name}),
      kRankProcessTimeout, dir / "survivor.out");

  Fault fault;
  std::int64_t killed_at = 0;
  {
    net::Exchanger exchanger(worlds.old_world, kTestRank, {.timeout = kBuildTimeout});
    const Context context = open_device(worlds.device);
    const ProtectionDomain pd(context);
    net::Node node =
        connect_rank(worlds.old_world, kTestRank, context, pd, exchanger, algorithm,
                     finite_retries ? RetryCount(6) : RetryCount::default_value(), wait);
    ASSERT_TRUE(node.channel(worlds.survivor).wait_mode() == wait);
    for (int i = 0; i < kBarriersBefore; ++i) node.barrier();
    ASSERT_TRUE(wait_for_line(victim_process, "PARKED")) << victim_process.describe();
    victim_process.kill();
    EXPECT_EQ(victim_process.wait(), std::nullopt) << victim_process.describe();
    killed_at = now_ns();

    const auto start = Clock::now();
    // Room for 7 retransmissions of 67 ms each (AckTimeout 14), many times over.
    const auto timeout = finite_retries ? 3 * kBarrierTimeout : kBarrierTimeout;
    const auto error = error_of([&] { node.barrier({.timeout = timeout}); });
    fault.at_ns = now_ns();
    fault.elapsed_ms = milliseconds_since(start);
    ASSERT_TRUE(error) << "the barrier passed without rank " << victim;
    fault.kind = to_string(error->kind());
    fault.what = error->what();
    if (finite_retries) {
      EXPECT_EQ(error->kind(), ErrorKind::peer_gone) << fault.what;
      EXPECT_NE(fault.what.find("signal to rank " + std::to_string(victim) + " failed"),
                std::string::npos)
          << fault.what;
      // It may be alive but too slow: the message gives the budget (67 ms x 7) and the remedy.
      EXPECT_NE(fault.what.find("rank " + std::to_string(victim) +
                                " gone, or too slow to answer within 470 ms"),
                std::string::npos)
          << fault.what;
    } else {
      EXPECT_TRUE(error->kind() == ErrorKind::timeout || error->kind() == ErrorKind::peer_gone)
          << fault.what;
    }
    EXPECT_NE(fault.what.find(algorithm_name + " barrier"), std::string::npos) << fault.what;
    // An upper bound on the wait, not a speed test: the timeout plus slack for emulation.
    EXPECT_LT(fault.elapsed_ms, static_cast<double>((timeout + 10s).count()));
    EXPECT_TRUE(node.barrier_poisoned());
    EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state, [&] { node.barrier(); },
                                       {"poisoned", fault.what}));
  }  // this process's rank of the failed world is torn down here
  EXPECT_NO_THROW(run_new_world(worlds.new_world, worlds.test_new_rank));
  expect_child_survived(survivor_process, "timeout peer_gone", algorithm_name + " barrier",
                        "state");
  const auto child = parse_fault(survivor_process.out());
  ASSERT_TRUE(child);
  EXPECT_TRUE(child->poisoned);
  EXPECT_LT(child->elapsed_ms, static_cast<double>((kBarrierTimeout + 10s).count()));
  std::printf(
      "[ figures  ] %s barrier, rank %u killed: rank %u (this process) failed %.0f ms "
      "after entering (%s); rank %u (child) failed %.0f ms after the kill, %.0f ms "
      "after entering (%s)\n",
      algorithm_name.c_str(), victim, kTestRank, fault.elapsed_ms, fault.kind.c_str(),
      worlds.survivor, milliseconds_between(killed_at, child->at_ns), child->elapsed_ms,
      child->kind.c_str());
  std::printf("[ messages ] rank %u: %s\n[ messages ] rank %u: %s\n", kTestRank, fault.what.c_str(),
              worlds.survivor, child->what.c_str());
}

TEST(RankFaultBarrier, CentralizedLeaderKilled) {
  kill_a_rank_in_a_barrier(BarrierAlgorithm::centralized, 0, WaitMode::spin());
}
TEST(RankFaultBarrier, CentralizedMemberKilledWhileBlocked) {
  kill_a_rank_in_a_barrier(BarrierAlgorithm::centralized, 2, WaitMode::block());
}
TEST(RankFaultBarrier, BinaryTreeRootKilledWhileBlocked) {
  kill_a_rank_in_a_barrier(BarrierAlgorithm::binary_tree, 0, WaitMode::block());
}
TEST(RankFaultBarrier, BinaryTreeLeafKilled) {
  kill_a_rank_in_a_barrier(BarrierAlgorithm::binary_tree, 2, WaitMode::spin());
}
TEST(RankFaultBarrier, CentralizedLeaderKilledSignalFailsWithFiniteRetries) {
  kill_a_rank_in_a_barrier(BarrierAlgorithm::centralized, 0, WaitMode::spin(),
                           /*finite_retries=*/true);
}
TEST(RankFaultBarrier, DisseminationRank0KilledWhileBlocked) {
  kill_a_rank_in_a_barrier(BarrierAlgorithm::dissemination, 0, WaitMode::block());
}
TEST(RankFaultBarrier, DisseminationRank2Killed) {
  kill_a_rank_in_a_barrier(BarrierAlgorithm::dissemination, 2, WaitMode::spin());
}

/// An exchange where one rank dies half way (`mode`, see exchange_rank_role): every survivor's
/// Node build must end with a peer_gone error naming the dead rank, well within the
/// exchanger's timeout, leave the exchanger unusable (state), and the two survivors then build
/// a new world.
void kill_a_rank_in_the_exchange(const std::string& mode, std::uint32_t victim) {
  const Worlds worlds(victim);
  const auto& dir = worlds.directory.path();
  ChildProcess victim_process(
      child_role_command("rank_fault_exchange", {worlds.old_file.string(), std::to_string(victim),
                                                 mode, worlds.new_file.string(), "-"}),
      kRankProcessTimeout, dir / "victim.out");
  ChildProcess survivor_process(
      child_role_command("rank_fault_exchange",
                         {worlds.old_file.string(), std::to_string(worlds.survivor), "survivor",
                          worlds.new_file.string(), std::to_string(worlds.survivor_new_rank)}),
      kRankProcessTimeout, dir / "survivor.out");
  const std::string victim_name = "rank " + std::to_string(victim);

  Fault fault;
  {
    net::Exchanger exchanger(worlds.old_world, kTestRank, {.timeout = kBuildTimeout});
    const Context context = open_device(worlds.device);
    const ProtectionDomain pd(context);
    const auto start = Clock::now();
    const auto error = error_of([&] {
      (void)connect_rank(worlds.old_world, kTestRank, context, pd, exchanger,
                         BarrierAlgorithm::dissemination);
    });
    fault.at_ns = now_ns();
    fault.elapsed_ms = milliseconds_since(start);
    ASSERT_TRUE(error) << "the Node was built without " << victim_name;
    fault.kind = to_string(error->kind());
    fault.what = error->what();
    EXPECT_EQ(error->kind(), ErrorKind::peer_gone) << fault.what;
    EXPECT_NE(fault.what.find(victim_name), std::string::npos) << fault.what;
    EXPECT_LT(fault.elapsed_ms, static_cast<double>(kBuildTimeout.count()));
    EXPECT_TRUE(
        ibv_test::throws_error(ErrorKind::state, [&] { (void)exchanger.exchange_bytes({}); }));
  }
  EXPECT_EQ(victim_process.wait(), std::nullopt) << victim_process.describe();
  EXPECT_NE(victim_process.describe().find("killed by signal 9"), std::string::npos)
      << victim_process.describe();
  const std::string died = field(victim_process.out(), "DYING", "at_ns");
  ASSERT_FALSE(died.empty()) << victim_process.describe();
  const std::int64_t died_at = std::stoll(died);

  EXPECT_NO_THROW(run_new_world(worlds.new_world, worlds.test_new_rank));
  expect_child_survived(survivor_process, "peer_gone", victim_name, "state");
  const auto child = parse_fault(survivor_process.out());
  ASSERT_TRUE(child);
  std::printf(
      "[ figures  ] %s, rank %u died: rank %u (this process) failed %.0f ms after the "
      "death (%s); rank %u (child) %.0f ms after (%s)\n",
      mode.c_str(), victim, kTestRank, milliseconds_between(died_at, fault.at_ns),
      fault.kind.c_str(), worlds.survivor, milliseconds_between(died_at, child->at_ns),
      child->kind.c_str());
  std::printf("[ messages ] rank %u: %s\n[ messages ] rank %u: %s\n", kTestRank, fault.what.c_str(),
              worlds.survivor, child->what.c_str());
}

TEST(RankFaultExchange, ARankThatDiesAfterItsHelloBeforeItsDataIsNamed) {
  kill_a_rank_in_the_exchange("hello_then_die", 0);
}
TEST(RankFaultExchange, ARankThatDiesBetweenEndpointsAndReadyIsNamed) {
  kill_a_rank_in_the_exchange("endpoints_then_die", 2);
}

/// An all-to-all where one rank is killed mid-round: after kAllToAllRoundsBefore rounds the
/// victim (rank 0 or 2, a child) starts one more round and parks; this process kills it
/// (SIGKILL). Every survivor's rounds must then fail within the all-to-all's timeout with a
/// typed ibv::Error naming the victim (timeout, or peer_gone where a write to it failed), and
/// every later call is state; then the two survivors build a new world and the child checks
/// that nothing of the old one leaked.
void kill_a_rank_in_an_all_to_all(std::uint32_t victim) {
  const Worlds worlds(victim);
  const auto& dir = worlds.directory.path();
  const std::string victim_name = "rank " + std::to_string(victim);
  ChildProcess victim_process(
      child_role_command("rank_fault_all_to_all", {worlds.old_file.string(), std::to_string(victim),
                                                   "victim", worlds.new_file.string(), "-"}),
      kRankProcessTimeout, dir / "victim.out");
  ChildProcess survivor_process(
      child_role_command("rank_fault_all_to_all",
                         {worlds.old_file.string(), std::to_string(worlds.survivor), "survivor",
                          worlds.new_file.string(), std::to_string(worlds.survivor_new_rank)}),
      kRankProcessTimeout, dir / "survivor.out");

  Fault fault;
  std::int64_t killed_at = 0;
  {
    net::Exchanger exchanger(worlds.old_world, kTestRank, {.timeout = kBuildTimeout});
    const Context context = open_device(worlds.device);
    const ProtectionDomain pd(context);
    net::Node node = connect_rank(worlds.old_world, kTestRank, context, pd, exchanger,
                                  BarrierAlgorithm::dissemination);
    AllToAllRank all_to_all(node, exchanger);
    for (std::uint64_t n = 0; n < kAllToAllRoundsBefore; ++n) all_to_all.round();
    ASSERT_TRUE(wait_for_line(victim_process, "PARKED")) << victim_process.describe();
    victim_process.kill();
    EXPECT_EQ(victim_process.wait(), std::nullopt) << victim_process.describe();
    killed_at = now_ns();
    fault = all_to_all_survivor_fault(all_to_all);
    ASSERT_FALSE(fault.kind.empty()) << "every round passed without " << victim_name;
    EXPECT_TRUE(fault.kind == "timeout" || fault.kind == "peer_gone") << fault.what;
    EXPECT_NE(fault.what.find(victim_name), std::string::npos) << fault.what;
    EXPECT_EQ(fault.then_kind, "state");
    EXPECT_TRUE(all_to_all.all_to_all.failed());
    // An upper bound on the wait, not a speed test: the timeout plus slack for emulation.
    EXPECT_LT(milliseconds_between(killed_at, fault.at_ns),
              static_cast<double>((kAllToAllTimeout + 10s).count()));
  }  // this process's rank of the failed world is torn down here
  EXPECT_NO_THROW(run_new_world(worlds.new_world, worlds.test_new_rank));
  expect_child_survived(survivor_process, "timeout peer_gone", victim_name, "state");
  const auto child = parse_fault(survivor_process.out());
  ASSERT_TRUE(child);
  EXPECT_LT(milliseconds_between(killed_at, child->at_ns),
            static_cast<double>((kAllToAllTimeout + 10s).count()));
  std::printf(
      "[ figures  ] all-to-all, rank %u killed: rank %u (this process) failed %.0f ms after "
      "the kill (%s); rank %u (child) %.0f ms after (%s)\n",
      victim, kTestRank, milliseconds_between(killed_at, fault.at_ns), fault.kind.c_str(),
      worlds.survivor, milliseconds_between(killed_at, child->at_ns), child->kind.c_str());
  std::printf("[ messages ] rank %u: %s\n[ messages ] rank %u: %s\n", kTestRank, fault.what.c_str(),
              worlds.survivor, child->what.c_str());
}

TEST(RankFaultAllToAll, Rank0KilledMidRoundIsNamedByEverySurvivor) {
  kill_a_rank_in_an_all_to_all(0);
}
TEST(RankFaultAllToAll, Rank2KilledMidRoundIsNamedByEverySurvivor) {
  kill_a_rank_in_an_all_to_all(2);
}

}  // namespace
}  // namespace ibv::test
