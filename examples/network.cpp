// SPDX-License-Identifier: MIT
// The Network layer: a Node per rank, however the job was started. The ranks find each other
// through ibv::net::bootstrap_from_environment() (PMIx under mpirun or srun, a TCP rendezvous
// with IBV_BOOTSTRAP=host:port, or a JSON hosts file), connect a Node each, then for a few
// rounds every rank RDMA-writes a block into its right neighbour's memory and sends a message to
// its left neighbour, checking what arrived from both; barriers keep the rounds in step. At the
// end each barrier algorithm is timed.
//
//   network [--config FILE] [--rank N] [--world N] [--rounds N] [--algorithm NAME]
//           [--gid-index N] [--timeout-ms N] [--barriers N]
//
// `mpirun -np 4 network` works with no configuration at all (PMIx); so does
// `IBV_BOOTSTRAP=node01:18515 srun -n 4 network`. With --config each rank opens the device its
// host entry names ("ibdev") and listens on its "port"; otherwise it opens IBV_DEVICE or the
// first active device. The rank and world size come from --rank / --world, else the launcher.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

using namespace std::chrono_literals;
namespace net = ibv::net;

constexpr std::size_t kBlock = 4096;  // bytes written or sent per neighbour and round

struct Options {
  std::string config;
  std::optional<std::uint32_t> rank;
  std::optional<std::uint32_t> world;
  std::uint32_t rounds = 5;
  net::BarrierAlgorithm algorithm = net::BarrierAlgorithm::dissemination;
  std::optional<std::uint32_t> gid_index;
  std::chrono::milliseconds timeout = 30s;
  std::uint32_t timed_barriers = 200;
};

[[noreturn]] void usage(std::string_view problem) {
  std::fprintf(stderr,
               "network: %.*s\n"
               "usage: network [--config FILE] [--rank N] [--world N] [--rounds N] "
               "[--algorithm "
               "centralized|binary_tree|dissemination]\n"
               "               [--gid-index N] [--timeout-ms N] [--barriers N]\n",
               static_cast<int>(problem.size()), problem.data());
  std::exit(2);
}

std::uint32_t number(std::string_view flag, const char* text) {
  char* end = nullptr;
  const unsigned long value = std::strtoul(text, &end, 10);
  if (end == text || *end != '\0' || value > UINT32_MAX) {
    usage(std::string(flag) + " wants a number, not '" + text + "'");
  }
  return static_cast<std::uint32_t>(value);
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (i + 1 >= argc) usage(std::string(flag) + " wants a value");
    const char* value = argv[++i];
    if (flag == "--config") {
      options.config = value;
    } else if (flag == "--rank") {
      options.rank = number(flag, value);
    } else if (flag == "--world") {
      options.world = number(flag, value);
    } else if (flag == "--rounds") {
      options.rounds = number(flag, value);
    } else if (flag == "--gid-index") {
      options.gid_index = number(flag, value);
    } else if (flag == "--timeout-ms") {
      options.timeout = std::chrono::milliseconds(number(flag, value));
    } else if (flag == "--barriers") {
      options.timed_barriers = number(flag, value);
    } else if (flag == "--algorithm") {
      const std::string_view name = value;
      if (name == "centralized") {
        options.algorithm = net::BarrierAlgorithm::centralized;
      } else if (name == "binary_tree") {
        options.algorithm = net::BarrierAlgorithm::binary_tree;
      } else if (name == "dissemination") {
        options.algorithm = net::BarrierAlgorithm::dissemination;
      } else {
        usage("unknown barrier algorithm '" + std::string(name) + "'");
      }
    } else {
      usage("unknown option " + std::string(flag));
    }
  }
  return options;
}

/// The byte `index` of the block that `sender` sends in `round`.
std::byte pattern(std::uint32_t sender, std::uint32_t round, std::size_t index) {
  return static_cast<std::byte>((sender * 31U + round * 7U + index) & 0xffU);
}

void fill(std::span<std::byte> block, std::uint32_t sender, std::uint32_t round) {
  for (std::size_t i = 0; i < block.size(); ++i) block[i] = pattern(sender, round, i);
}

bool holds(std::span<const std::byte> block, std::uint32_t sender, std::uint32_t round) {
  for (std::size_t i = 0; i < block.size(); ++i) {
    if (block[i] != pattern(sender, round, i)) return false;
  }
  return true;
}

/// Neighbour rounds: write right, send left, check both arrivals. Returns the number of rounds
/// whose data was wrong (0 when all is well).
std::uint32_t neighbour_rounds(net::Node& node, net::Bootstrap& bootstrap, std::uint32_t rounds) {
  const std::uint32_t world = node.world_size();
  const std::uint32_t me = node.rank();
  const std::uint32_t right = (me + 1) % world;
  const std::uint32_t left = (me + world - 1) % world;

  // inbox: [0, kBlock) is written by the left neighbour, [kBlock, 2 kBlock) receives the right
  // neighbour's message. outbox: what this rank writes and sends.
  std::vector<std::byte> inbox(2 * kBlock);
  std::vector<std::byte> outbox(2 * kBlock);
  const auto& pd = node.protection_domain();
  const ibv::MemoryRegion inbox_mr =
      pd.register_remote_accessible(inbox, ibv::RemoteAccess::write());
  const ibv::MemoryRegion outbox_mr = pd.register_local(outbox);
  // Every rank's inbox, tagged with its rank: writing one into the wrong peer is refused.
  const std::vector<ibv::PeerRemoteMemoryRegion> inboxes =
      ibv::tag_with_ranks(bootstrap.all_gather(inbox_mr.remote()));

  const std::span<std::byte> written = std::span(inbox).first(kBlock);
  const std::span<std::byte> received = std::span(inbox).last(kBlock);
  const std::array to_write{outbox_mr.gather(std::span(outbox).first(kBlock))};
  const std::array to_send{outbox_mr.gather(std::span(outbox).last(kBlock))};
  const std::array into{inbox_mr.scatter(received)};

  std::uint32_t bad_rounds = 0;
  for (std::uint32_t round = 0; round < rounds; ++round) {
    fill(std::span(outbox).first(kBlock), me, round);
    fill(std::span(outbox).last(kBlock), me, round + 1000);
    ibv::PendingWork receive = node.post(right, ibv::op::Receive{into});
    node.barrier();  // every rank's receive is posted before anyone sends
    node.execute(right, ibv::op::PeerWrite{to_write, inboxes[right].sub_region(0, kBlock)});
    node.execute(left, ibv::op::Send{to_send});
    receive.wait();
    node.barrier();  // every write of this round has completed everywhere
    const bool ok = holds(written, left, round) && holds(received, right, round + 1000);
    if (!ok) ++bad_rounds;
  }
  return bad_rounds;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  net::BootstrapChoice choice{
      .rank = options.rank, .world_size = options.world, .timeout = options.timeout};
  if (!options.config.empty()) choice.hosts_file = options.config;
  // First, so that the other ranks can reach this one while it opens its device.
  const std::unique_ptr<net::Bootstrap> bootstrap = net::bootstrap_from_environment(choice);
  const std::uint32_t rank = bootstrap->rank();
  const std::uint32_t world = bootstrap->world_size();
  const auto* hosts_file = dynamic_cast<const net::Exchanger*>(bootstrap.get());
  const ibv::Context context = hosts_file != nullptr
                                   ? ibv::open_device(hosts_file->config().host(rank).ibdev)
                                   : net::open_device_from_environment();
  const ibv::ProtectionDomain pd(context);
  ibv::QueuePairSettings settings;
  if (options.gid_index) settings.gid_index = *options.gid_index;
  net::Node node = net::NodeBuilder(pd, rank, world)
                       .queue_pair(settings)
                       .barrier_algorithm(options.algorithm)
                       .barrier_timeout(options.timeout)
                       .build()
                       .connect(*bootstrap);
  if (rank == 0) {
    std::printf("%u ranks connected through %s\n", world, bootstrap->description().c_str());
  }

  std::uint32_t bad_rounds = 0;
  if (world > 1) bad_rounds = neighbour_rounds(node, *bootstrap, options.rounds);

  // Time each barrier algorithm over every rank.
  std::string timings;
  for (const auto algorithm :
       {net::BarrierAlgorithm::centralized, net::BarrierAlgorithm::binary_tree,
        net::BarrierAlgorithm::dissemination}) {
    node.barrier({.algorithm = algorithm});  // warm up, and start together
    const auto started = std::chrono::steady_clock::now();
    for (std::uint32_t i = 0; i < options.timed_barriers; ++i)
      node.barrier({.algorithm = algorithm});
    const auto elapsed = std::chrono::steady_clock::now() - started;
    const double micros = std::chrono::duration<double, std::micro>(elapsed).count() /
                          std::max(1U, options.timed_barriers);
    timings += " " + std::string(net::to_string(algorithm)) + " " +
               std::to_string(static_cast<int>(micros)) + " us;";
  }
  // A subset: the even ranks only (rank 0 is always among them).
  std::vector<std::uint32_t> evens;
  for (std::uint32_t r = 0; r < world; r += 2) evens.push_back(r);
  if (rank % 2 == 0) node.barrier(evens);
  node.barrier();

  std::printf("rank %u (%s): %u neighbour rounds, %s; barriers:%s even-rank subset done\n", rank,
              context.name().c_str(), options.rounds,
              world == 1        ? "no neighbours"
              : bad_rounds == 0 ? "all data checked"
                                : "DATA WRONG",
              timings.c_str());
  return bad_rounds == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
} catch (const std::exception& error) {
  std::fprintf(stderr, "network: %s\n", error.what());
  return EXIT_FAILURE;
}
