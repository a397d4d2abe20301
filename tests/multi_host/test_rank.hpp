// One rank of a multi-host test, connected to all others: its exchanger (kept for later
// exchanges of memory regions), device, protection domain and Node. Shared by the network tests
// and the soak.
#pragma once

#include <chrono>
#include <vector>

#include "ibv/ibv.hpp"
#include "multi_host.hpp"

namespace ibv::test {

/// This process's rank of the run (multi_host()), connected: build one per test.
struct Rank {
  /// Connects to every other rank on fresh ports, waiting up to `exchange_timeout` for them.
  explicit Rank(std::chrono::milliseconds exchange_timeout = std::chrono::seconds(60))
      : exchanger(world().config(world().fresh_port_offset()), world().rank(),
                  {.timeout = exchange_timeout}),
        context(world().open_device()),
        pd(context),
        node(build(pd)) {}

  static MultiHost& world() { return multi_host(); }

  net::Node build(const ProtectionDomain& domain) {
    using namespace std::chrono_literals;
    QueuePairSettings settings;
    if (world().gid_index()) settings.gid_index = *world().gid_index();
    return net::NodeBuilder(domain, exchanger.config(), world().rank())
        .queue_pair(settings)
        .barrier_timeout(60s)
        .timeouts({.operation = 30s, .drop = 30s})
        .build()
        .connect(exchanger);
  }

  /// Every rank's region, tagged with its rank.
  std::vector<PeerRemoteMemoryRegion> exchange(const MemoryRegion& mr) {
    return tag_with_ranks(exchanger.exchange(mr.remote()));
  }

  net::Exchanger exchanger;
  Context context;
  ProtectionDomain pd;
  net::Node node;
};

}  // namespace ibv::test
