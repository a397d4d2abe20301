// SPDX-License-Identifier: MIT
// One rank of a multi-host test, connected to all others: its bootstrap (the run's kind, kept
// for later exchanges of memory regions), device, protection domain and Node. Shared by the
// network tests and the soak.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "ibv/ibv.hpp"
#include "multi_host.hpp"

namespace ibv::test {

/// This process's rank of the run (multi_host()), connected: build one per test.
struct Rank {
  /// Connects to every other rank on fresh ports, waiting up to `exchange_timeout` for them;
  /// every wait of the Node (barriers included) by `wait`.
  explicit Rank(std::chrono::milliseconds exchange_timeout = std::chrono::seconds(60),
                const WaitMode& wait = WaitMode::spin(),
                std::optional<net::FaultToleranceSettings> fault_tolerance = std::nullopt)
      : bootstrap(world().bootstrap(exchange_timeout)),
        context(world().open_device()),
        pd(context),
        node(build(pd, wait, fault_tolerance)) {}

  static MultiHost& world() { return multi_host(); }

  net::Node build(const ProtectionDomain& domain, const WaitMode& wait = WaitMode::spin(),
                  const std::optional<net::FaultToleranceSettings>& fault_tolerance = {}) {
    using namespace std::chrono_literals;
    QueuePairSettings settings;
    if (world().gid_index()) settings.gid_index = *world().gid_index();
    net::NodeBuilder builder(domain, world().rank(), world().world_size());
    builder.queue_pair(settings).wait_mode(wait).barrier_timeout(60s).timeouts(
        {.operation = 30s, .drop = 30s});
    if (fault_tolerance) builder.fault_tolerance(*fault_tolerance);
    return builder.build().connect(*bootstrap);
  }

  /// Every rank's region, tagged with its rank.
  std::vector<PeerRemoteMemoryRegion> exchange(const MemoryRegion& mr) {
    return tag_with_ranks(bootstrap->all_gather(mr.remote()));
  }

  std::shared_ptr<net::Bootstrap> bootstrap;
  Context context;
  ProtectionDomain pd;
  net::Node node;
};

}  // namespace ibv::test
