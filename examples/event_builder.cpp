// SPDX-License-Identifier: MIT
// An event builder, as in CERN LHCb's data acquisition, on ibv::net::PersistentAllToAll. Each
// rank is a readout unit that produces one fragment of every event, and the builder of a share
// of the events: event e is built by rank e mod N. In each round every rank sends every rank one
// part: the fragments of the events that rank builds in this round, each a header (event,
// source rank, length, FNV-1a checksum) and a payload whose size and bytes are drawn from
// (--seed, event, source), sizes uniform over MEAN +- min(MEAN, MAX - MEAN). The rounds
// pipeline: round n is on the wire while round n - 1's events are assembled from their N
// fragments and every fragment is checked (event, source, size, checksum); a bad or missing one
// is named and the rank exits non-zero. Rank 0 then prints the bytes per second each rank sent
// to the others (its own fragments excluded), the job's events per second and the spread of
// the fragment sizes.
//
// With --survive the Node watches its peers (NodeBuilder::fault_tolerance()): when a rank is
// lost, the others say which, shrink the Node to themselves, build the all-to-all again on it
// over the same memory and go on from the next round, every fragment still checked (the events
// of the rounds in flight at the loss are lost). --kill RANK@ROUND makes rank RANK kill itself
// (SIGKILL, as a crash) before it produces round ROUND, to see it happen.
//
//   event_builder [--rounds N] [--events-per-round N] [--fragment-size MEAN[,MAX]] [--seed N]
//                 [--slot-size BYTES] [--slots-per-peer N] [--peers-in-flight N]
//                 [--timeout-ms N] [--gid-index N] [--config FILE] [--rank N] [--world N]
//                 [--survive] [--kill RANK@ROUND]
//
// Defaults: 300 rounds, 4 events per builder and round, payloads of 1024,2048 bytes (MEAN alone
// means MAX = 2 x MEAN), slots just big enough for a part. `mpirun -np 4 event_builder` needs no
// configuration (PMIx); each rank opens the IBV_DEVICE entry of its local rank (a comma-separated
// list) or the first active device. A hosts file (--config, --rank) or IBV_BOOTSTRAP=host:port work
// as in network.cpp.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

using namespace std::chrono_literals;
namespace net = ibv::net;

/// What precedes every fragment's payload, in host byte order (the ranks share one architecture).
struct FragmentHeader {
  std::uint64_t event = 0;
  std::uint32_t source = 0;
  std::uint32_t length = 0;    // payload bytes
  std::uint64_t checksum = 0;  // FNV-1a of the payload
};
constexpr std::size_t kHeader = sizeof(FragmentHeader);

struct Options {
  std::string config;
  std::optional<std::uint32_t> rank;
  std::optional<std::uint32_t> world;
  std::uint32_t rounds = 300;
  std::uint32_t events_per_round = 4;  // per builder: N times this many events per round
  std::uint32_t mean_payload = 1024;
  std::uint32_t max_payload = 2048;
  std::uint32_t seed = 1;
  std::size_t slot_size = 0;  // 0: room for events_per_round fragments of max_payload
  std::uint32_t slots_per_peer = 2;
  std::uint32_t peers_in_flight = 0;  // 0: all peers
  std::optional<std::uint32_t> gid_index;
  std::chrono::milliseconds timeout = 30s;
  bool survive = false;
  std::optional<std::pair<std::uint32_t, std::uint64_t>> kill;  // rank, round
};

[[noreturn]] void usage(std::string_view problem) {
  std::fprintf(stderr,
               "event_builder: %.*s\n"
               "usage: event_builder [--rounds N] [--events-per-round N] "
               "[--fragment-size MEAN[,MAX]] [--seed N]\n"
               "                     [--slot-size BYTES] [--slots-per-peer N] "
               "[--peers-in-flight N] [--timeout-ms N]\n"
               "                     [--gid-index N] [--config FILE] [--rank N] [--world N]\n"
               "                     [--survive] [--kill RANK@ROUND]\n",
               static_cast<int>(problem.size()), problem.data());
  std::exit(2);
}

std::uint32_t number(std::string_view flag, const std::string& text) {
  char* end = nullptr;
  const unsigned long value = std::strtoul(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value > UINT32_MAX) {
    usage(std::string(flag) + " wants a number, not '" + text + "'");
  }
  return static_cast<std::uint32_t>(value);
}

/// Checks the fragment sizes against each other and the slot, choosing the slot when unset.
void check_sizes(Options& options) {
  if (options.events_per_round == 0) usage("--events-per-round must be at least 1");
  if (options.mean_payload > options.max_payload) usage("--fragment-size: MEAN is over MAX");
  const std::size_t needed = options.events_per_round * (kHeader + options.max_payload);
  if (options.slot_size == 0) options.slot_size = needed;
  if (options.slot_size > net::AllToAllSettings::kMaxSlotSize) {
    usage("slots of " + std::to_string(options.slot_size) +
          " bytes (--slot-size, else room for --events-per-round fragments of MAX bytes) are "
          "over the most a slot holds, " +
          std::to_string(net::AllToAllSettings::kMaxSlotSize));
  }
  if (options.slot_size < needed) {
    usage("--slot-size " + std::to_string(options.slot_size) + " is too small for " +
          std::to_string(options.events_per_round) + " fragments of up to " +
          std::to_string(options.max_payload) + " bytes and their headers (" +
          std::to_string(needed) + ")");
  }
}

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--survive") {
      options.survive = true;
      continue;
    }
    if (i + 1 >= argc) usage(std::string(flag) + " wants a value");
    const std::string value = argv[++i];
    if (flag == "--config") {
      options.config = value;
    } else if (flag == "--rank") {
      options.rank = number(flag, value);
    } else if (flag == "--world") {
      options.world = number(flag, value);
    } else if (flag == "--rounds") {
      options.rounds = number(flag, value);
    } else if (flag == "--events-per-round") {
      options.events_per_round = number(flag, value);
    } else if (flag == "--fragment-size") {
      const std::size_t comma = value.find(',');
      options.mean_payload = number(flag, value.substr(0, comma));
      options.max_payload = comma == std::string::npos ? 2 * options.mean_payload
                                                       : number(flag, value.substr(comma + 1));
    } else if (flag == "--seed") {
      options.seed = number(flag, value);
    } else if (flag == "--slot-size") {
      options.slot_size = number(flag, value);
    } else if (flag == "--slots-per-peer") {
      options.slots_per_peer = number(flag, value);
    } else if (flag == "--peers-in-flight") {
      options.peers_in_flight = number(flag, value);
    } else if (flag == "--timeout-ms") {
      options.timeout = std::chrono::milliseconds(number(flag, value));
    } else if (flag == "--gid-index") {
      options.gid_index = number(flag, value);
    } else if (flag == "--kill") {
      const std::size_t at = value.find('@');
      if (at == std::string::npos) usage("--kill wants RANK@ROUND, not '" + value + "'");
      options.kill.emplace(number(flag, value.substr(0, at)), number(flag, value.substr(at + 1)));
    } else {
      usage("unknown option " + std::string(flag));
    }
  }
  if (options.kill && !options.survive) usage("--kill needs --survive");
  check_sizes(options);
  return options;
}

/// splitmix64's finalizer: a well-mixed 64-bit number from any input.
std::uint64_t mix(std::uint64_t x) {
  x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31U);
}

/// Where the size and bytes of the fragment of `event` from `source` come from, on every rank.
std::uint64_t fragment_key(std::uint32_t seed, std::uint64_t event, std::uint32_t source) {
  return mix(mix(mix(seed) ^ event) + source);
}

/// A payload size uniform over [MEAN - d, MEAN + d], d = min(MEAN, MAX - MEAN).
std::uint32_t payload_size(const Options& options, std::uint64_t key) {
  const std::uint32_t spread =
      std::min(options.mean_payload, options.max_payload - options.mean_payload);
  return options.mean_payload - spread + static_cast<std::uint32_t>(mix(key) % (2ULL * spread + 1));
}

void fill_payload(std::span<std::byte> payload, std::uint64_t key) {
  for (std::size_t at = 0; at < payload.size(); at += 8) {
    const std::uint64_t word = mix(key + at);
    std::memcpy(payload.data() + at, &word, std::min<std::size_t>(8, payload.size() - at));
  }
}

std::uint64_t fnv1a(std::span<const std::byte> bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const std::byte b : bytes)
    hash = (hash ^ std::to_integer<std::uint64_t>(b)) * 0x100000001b3ULL;
  return hash;
}

/// What a rank counts, gathered by rank 0: these numbers, then the payload sizes counted in
/// kBins equal bins from 0 to MAX (for the percentiles).
enum Figure : std::uint8_t {
  kEvents,         // built here
  kBytesToOthers,  // sent to other ranks: fragments with their headers
  kNanoseconds,    // from the first round's start to the last round built
  kFragments,      // checked here
  kMinSize,
  kMaxSize,
  kSizeSum,
  kFirstBin
};
constexpr std::size_t kBins = 256;
using Figures = std::vector<std::uint64_t>;  // [Figure], then the bins

/// One rank: its send memory (a part per builder), its receive slots, the collective, its figures.
class EventBuilder {
 public:
  EventBuilder(net::Node& node, net::Bootstrap& bootstrap, const Options& options)
      : options_(options),
        rank_(node.rank()),
        world_(node.world_size()),
        send_(std::size_t{world_} * options.slot_size),
        receive_(std::size_t{world_} * options.slots_per_peer * options.slot_size),
        send_mr_(node.protection_domain().register_local(send_)),
        receive_mr_(node.protection_domain().register_remote_accessible(
            receive_, ibv::RemoteAccess::write())),
        all_to_all_(std::in_place, node, bootstrap, send_mr_, receive_mr_, settings()),
        parts_(world_),
        figures_(kFirstBin + kBins, 0) {
    figures_[kMinSize] = UINT64_MAX;
  }

  /// Runs rounds `first` to `rounds` - 1, pipelined: round n is on the wire while round n - 1
  /// is built, then n - 1's slots go back to the senders. Throws naming the first bad fragment,
  /// or the collective's error (next_round() says where to go on).
  void run(std::uint64_t first, std::uint64_t rounds) {
    const auto started = std::chrono::steady_clock::now();
    first_ = first;
    next_ = first;
    try {
      if (first < rounds) {
        net::AllToAllRound held = all_to_all_->run(produce(first));
        for (std::uint64_t n = first + 1; n < rounds; ++n) {
          all_to_all_->start(produce(n));
          build(held);
          held.release();
          held = all_to_all_->wait();
        }
        build(held);
      }
    } catch (...) {
      figures_[kNanoseconds] +=
          static_cast<std::uint64_t>((std::chrono::steady_clock::now() - started) / 1ns);
      throw;
    }
    figures_[kNanoseconds] +=
        static_cast<std::uint64_t>((std::chrono::steady_clock::now() - started) / 1ns);
  }

  /// The first round not built here yet.
  [[nodiscard]] std::uint64_t next_round() const noexcept { return next_; }

  /// After a lost rank: the collective again, on the survivors' `node` (through its in-band
  /// bootstrap, the job's having another world now) over the same memory.
  void rebuild(net::Node& node) {
    all_to_all_.reset();  // fenced by the failure already
    rank_ = node.rank();
    world_ = node.world_size();
    parts_.assign(world_, {});
    all_to_all_.emplace(node, node.in_band_bootstrap(), send_mr_, receive_mr_, settings());
  }

  [[nodiscard]] const Figures& figures() const noexcept { return figures_; }
  [[nodiscard]] std::uint32_t peers_in_flight() const {
    return all_to_all_->settings().peers_in_flight;
  }

 private:
  [[nodiscard]] net::AllToAllSettings settings() const {
    return {.slot_size = options_.slot_size,
            .slots_per_peer = options_.slots_per_peer,
            .peers_in_flight = options_.peers_in_flight,
            .timeout = options_.timeout};
  }

  /// Event j of `builder` in `round`; events of one round are numbered consecutively.
  [[nodiscard]] std::uint64_t event(std::uint64_t round, std::uint32_t j,
                                    std::uint32_t builder) const {
    return (round * options_.events_per_round + j) * world_ + builder;
  }

  /// Writes this rank's fragments of `round` into the send memory, one part per builder.
  std::span<const std::span<const std::byte>> produce(std::uint64_t round) {
    if (options_.kill && options_.kill->first == rank_ && options_.kill->second == round) {
      std::printf("rank %u: killing itself (SIGKILL) before round %" PRIu64 ", as --kill says\n",
                  rank_, round);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    for (std::uint32_t builder = 0; builder < world_; ++builder) {
      const std::span<std::byte> part = std::span(send_).subspan(builder * options_.slot_size);
      std::size_t used = 0;
      for (std::uint32_t j = 0; j < options_.events_per_round; ++j) {
        const std::uint64_t e = event(round, j, builder);
        const std::uint64_t key = fragment_key(options_.seed, e, rank_);
        const std::span<std::byte> payload =
            part.subspan(used + kHeader, payload_size(options_, key));
        fill_payload(payload, key);
        const FragmentHeader header{.event = e,
                                    .source = rank_,
                                    .length = static_cast<std::uint32_t>(payload.size()),
                                    .checksum = fnv1a(payload)};
        std::memcpy(part.data() + used, &header, kHeader);
        used += kHeader + payload.size();
      }
      parts_[builder] = part.first(used);
      if (builder != rank_) figures_[kBytesToOthers] += used;
    }
    return parts_;
  }

  /// Assembles this rank's events of `held` (the collective's rounds count from first_), each
  /// from one fragment of every rank, and checks every fragment; throws naming the first that
  /// is wrong.
  void build(const net::AllToAllRound& held) {
    const std::uint64_t round = first_ + held.number();
    std::vector<std::span<const std::byte>> rest(world_);  // [source]: its part, not yet read
    for (std::uint32_t source = 0; source < world_; ++source) rest[source] = held.part(source);
    for (std::uint32_t j = 0; j < options_.events_per_round; ++j) {
      const std::uint64_t e = event(round, j, rank_);
      for (std::uint32_t source = 0; source < world_; ++source) {
        rest[source] = rest[source].subspan(check_fragment(e, source, rest[source]));
      }
      ++figures_[kEvents];
    }
    for (std::uint32_t source = 0; source < world_; ++source) {
      if (!rest[source].empty()) {
        fail(event(round, options_.events_per_round - 1, rank_), source,
             "is followed by " + std::to_string(rest[source].size()) + " bytes too many");
      }
    }
    next_ = round + 1;
  }

  /// Checks the fragment of event `e` from `source` at the start of `bytes`; returns its size.
  std::size_t check_fragment(std::uint64_t e, std::uint32_t source,
                             std::span<const std::byte> bytes) {
    if (bytes.size() < kHeader) fail(e, source, "is missing (the part ends before it)");
    FragmentHeader header;
    std::memcpy(&header, bytes.data(), kHeader);
    if (header.event != e) fail(e, source, "is of event " + std::to_string(header.event));
    if (header.source != source) fail(e, source, "says rank " + std::to_string(header.source));
    const std::uint32_t size = payload_size(options_, fragment_key(options_.seed, e, source));
    if (header.length != size || bytes.size() - kHeader < size) {
      fail(e, source,
           "has " + std::to_string(header.length) + " payload bytes (" +
               std::to_string(bytes.size() - kHeader) + " in the part), not " +
               std::to_string(size));
    }
    if (fnv1a(bytes.subspan(kHeader, size)) != header.checksum) {
      fail(e, source, "has a payload that does not match its checksum");
    }
    ++figures_[kFragments];
    figures_[kMinSize] = std::min<std::uint64_t>(figures_[kMinSize], size);
    figures_[kMaxSize] = std::max<std::uint64_t>(figures_[kMaxSize], size);
    figures_[kSizeSum] += size;
    ++figures_[kFirstBin + std::uint64_t{size} * kBins / (options_.max_payload + 1ULL)];
    return kHeader + size;
  }

  [[noreturn]] void fail(std::uint64_t e, std::uint32_t source, const std::string& what) const {
    throw std::runtime_error("rank " + std::to_string(rank_) + ": event " + std::to_string(e) +
                             ", the fragment from rank " + std::to_string(source) + " " + what);
  }

  Options options_;
  std::uint32_t rank_;
  std::uint32_t world_;
  std::vector<std::byte> send_;
  std::vector<std::byte> receive_;
  ibv::MemoryRegion send_mr_;
  ibv::MemoryRegion receive_mr_;
  std::optional<net::PersistentAllToAll> all_to_all_;
  std::uint64_t first_ = 0;                        // the round the collective's round 0 is
  std::uint64_t next_ = 0;                         // the first round not built yet
  std::vector<std::span<const std::byte>> parts_;  // [builder] of the round being produced
  Figures figures_;
};

/// The payload size (a bin's upper edge) at or below which `share` of the fragments lie.
std::uint64_t percentile(const Figures& all, double share, std::uint32_t max_payload) {
  const double wanted = share * static_cast<double>(all[kFragments]);
  std::uint64_t seen = 0;
  std::size_t bin = 0;
  for (; bin + 1 < kBins; ++bin) {
    seen += all[kFirstBin + bin];
    if (static_cast<double>(seen) >= wanted) break;
  }
  return ((bin + 1) * (max_payload + 1ULL) - 1) / kBins;
}

/// Rank 0's summary of every rank's figures.
void report(const std::vector<Figures>& ranks, const std::vector<std::string>& devices,
            const Options& options) {
  Figures all = ranks[0];
  for (std::size_t r = 1; r < ranks.size(); ++r) {
    for (std::size_t i = 0; i < all.size(); ++i) {
      all[i] = i == kMinSize                        ? std::min(all[i], ranks[r][i])
               : i == kMaxSize || i == kNanoseconds ? std::max(all[i], ranks[r][i])
                                                    : all[i] + ranks[r][i];
    }
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    std::printf("rank %zu (%s): built %" PRIu64 " events, sent %.2f MB/s to the other ranks\n", r,
                devices[r].c_str(), ranks[r][kEvents],
                static_cast<double>(ranks[r][kBytesToOthers]) * 1e3 /
                    static_cast<double>(std::max<std::uint64_t>(1, ranks[r][kNanoseconds])));
  }
  const double seconds = static_cast<double>(std::max<std::uint64_t>(1, all[kNanoseconds])) / 1e9;
  std::printf("all ranks: %" PRIu64
              " events in %.3f s, %.0f events/s; every fragment's event, "
              "source, size and checksum checked\n",
              all[kEvents], seconds, static_cast<double>(all[kEvents]) / seconds);
  if (all[kFragments] == 0) return;
  std::printf("fragment payloads (bytes): min %" PRIu64 ", mean %.1f, p50 <= %" PRIu64
              ", p99 <= %" PRIu64 ", max %" PRIu64 " (%" PRIu64 " fragments)\n",
              all[kMinSize],
              static_cast<double>(all[kSizeSum]) / static_cast<double>(all[kFragments]),
              percentile(all, 0.5, options.max_payload), percentile(all, 0.99, options.max_payload),
              all[kMaxSize], all[kFragments]);
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
  const auto* hosts_file = dynamic_cast<const net::Exchanger*>(bootstrap.get());
  const ibv::Context context = hosts_file != nullptr
                                   ? ibv::open_device(hosts_file->config().host(rank).ibdev)
                                   : net::open_device_from_environment();
  const ibv::ProtectionDomain pd(context);
  ibv::QueuePairSettings settings;
  if (options.gid_index) settings.gid_index = *options.gid_index;
  // Ranks may share cores (mpirun --oversubscribe, the testbed): spin briefly, then sleep.
  net::NodeBuilder node_builder(pd, rank, bootstrap->world_size());
  node_builder.queue_pair(settings)
      .wait_mode(ibv::WaitMode::spin_then_block(50us))
      .barrier_timeout(options.timeout);
  if (options.survive) node_builder.fault_tolerance();
  net::Node node = node_builder.build().connect(*bootstrap);

  EventBuilder builder(node, *bootstrap, options);
  if (rank == 0) {
    std::printf(
        "%u ranks connected through %s; %u rounds of %u events (%u per builder), slots of "
        "%zu bytes, %u per peer; peers in flight: %u\n",
        node.world_size(), bootstrap->description().c_str(), options.rounds,
        options.events_per_round * node.world_size(), options.events_per_round, options.slot_size,
        options.slots_per_peer, builder.peers_in_flight());
  }
  std::uint64_t first = 0;
  bool survived = false;
  for (;;) {
    try {
      builder.run(first, options.rounds);
      break;
    } catch (const ibv::Error& error) {
      if (!options.survive ||
          (error.kind() != ibv::ErrorKind::peer_gone && error.kind() != ibv::ErrorKind::revoked)) {
        throw;
      }
      const std::uint32_t was = node.rank();
      std::printf("rank %u: the all-to-all failed in round %" PRIu64 ": %s\n", was,
                  builder.next_round(), error.what());
      net::ShrunkNode shrunk = std::move(node).shrink();
      node = std::move(shrunk.node);
      std::string lost;
      for (const std::uint32_t r : shrunk.lost)
        lost += (lost.empty() ? "" : ", ") + std::to_string(r);
      builder.rebuild(node);
      // Go on together from the furthest round any survivor built: what the others had not
      // built of the rounds before it was in flight, and is lost.
      std::uint64_t furthest = builder.next_round();
      for (const std::uint64_t next : node.in_band_bootstrap().all_gather(builder.next_round())) {
        furthest = std::max(furthest, next);
      }
      first = furthest;
      survived = true;
      std::printf(
          "rank %u: lost rank(s) %s; now rank %u of %u, the all-to-all rebuilt over the "
          "same memory, going on from round %" PRIu64 "\n",
          was, lost.c_str(), node.rank(), node.world_size(), first);
      std::fflush(stdout);
    }
  }
  // Every rank's figures to rank 0; also keeps every collective alive until all are done. After
  // a loss the job's bootstrap has another world: the Node's in-band one has this one's.
  net::Bootstrap& gather = survived ? node.in_band_bootstrap() : *bootstrap;
  const std::vector<Figures> figures = gather.all_gather(builder.figures());
  const std::vector<std::string> devices = gather.all_gather(context.name());
  if (node.rank() == 0) report(figures, devices, options);
  return EXIT_SUCCESS;
} catch (const std::exception& error) {
  std::fprintf(stderr, "event_builder: %s\n", error.what());
  return EXIT_FAILURE;
}
