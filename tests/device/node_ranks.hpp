// Device-test helper: a Node world on one device, every rank a thread of this process with its
// own Context, protection domain and Exchanger (TCP on 127.0.0.1, a port per rank). Used by
// node_test.cpp and wait_test.cpp.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "device_fixture.hpp"

namespace ibv::test {

/// A port range for this process, so that concurrent runs on one machine do not collide; each
/// run_ranks() call takes the next `world` ports.
inline std::uint16_t next_ports(std::uint32_t world) {
  static std::atomic<std::uint32_t> next{20000U +
                                         (static_cast<std::uint32_t>(::getpid()) % 2000U) * 16U};
  return static_cast<std::uint16_t>(next.fetch_add(world));
}

/// A NetworkConfig of `world` ranks on 127.0.0.1 (ports from next_ports()), all on `device`.
inline net::NetworkConfig local_config(std::uint32_t world, const std::string& device) {
  const std::uint16_t base = next_ports(world);
  net::NetworkConfigBuilder builder;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    builder.add_host({.rank = rank,
                      .hostname = "127.0.0.1",
                      .port = static_cast<std::uint16_t>(base + rank),
                      .ibdev = device});
  }
  return builder.build();
}

/// Runs body(node) on `world` ranks, one thread each, every rank connected through an
/// Exchanger; rethrows the first exception of any rank after all threads have ended.
inline void run_ranks(std::uint32_t world,
                      const std::function<void(net::Node&, net::Exchanger&)>& body,
                      const std::function<void(net::NodeBuilder&)>& configure = {}) {
  const std::string device = open_test_device().name();
  const net::NetworkConfig config = local_config(world, device);
  std::mutex mutex;
  std::exception_ptr first_error;
  std::vector<std::jthread> threads;  // joined even if starting a later one throws
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        net::Exchanger exchanger(config, rank, {.timeout = std::chrono::seconds(20)});
        const Context context = open_device(device);
        const ProtectionDomain pd(context);
        QueuePairSettings settings;
        settings.gid_index = test_gid_index(context);
        net::NodeBuilder builder(pd, rank, world);
        builder.queue_pair(settings).barrier_timeout(std::chrono::seconds(20));
        if (configure) configure(builder);
        net::Node node = builder.build().connect(exchanger);
        body(node, exchanger);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace ibv::test
