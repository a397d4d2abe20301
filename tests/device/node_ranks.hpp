// SPDX-License-Identifier: MIT
// Device-test helper: a Node world on one device, every rank a thread of this process with its
// own Context, protection domain and Bootstrap on 127.0.0.1: an Exchanger (a port per rank) or
// a Rendezvous (one port for the root). Used by node_test.cpp, node_datagram_test.cpp and
// wait_test.cpp; its free ports also serve the rank-fault tests.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "device_fixture.hpp"
#include "ibv/error.hpp"
#include "ibv/net/bootstrap.hpp"
#include "ibv/net/exchanger.hpp"
#include "ibv/net/node.hpp"
#include "ibv/net/rendezvous.hpp"
#include "support/child_process.hpp"

namespace ibv::test {

/// Whether a listener can be bound to TCP `port` now (and no one listens there).
inline bool port_is_free(std::uint16_t port) {
  if (is_listening(port)) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const int on = 1;
  static_cast<void>(::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  const bool bound = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return bound;
}

/// `count` free TCP ports, never handed out twice by this process, from a range that depends
/// on its pid (concurrent runs on one machine do not collide). Below Linux's ephemeral range
/// (32768 and up), so that no outgoing connection (another rank's dial) takes one before its
/// rank listens.
inline std::vector<std::uint16_t> fresh_ports(std::size_t count) {
  static std::atomic<std::uint32_t> next{20000U +
                                         (static_cast<std::uint32_t>(::getpid()) % 200U) * 20U};
  std::vector<std::uint16_t> ports;
  while (ports.size() < count) {
    const auto port = static_cast<std::uint16_t>(next.fetch_add(1));
    if (port < 1024U || port >= 32768U) {
      throw std::runtime_error("no free TCP ports left below 32768");
    }
    if (port_is_free(port)) ports.push_back(port);
  }
  return ports;
}

/// A NetworkConfig of `world` ranks on 127.0.0.1 (ports from fresh_ports()), all on `device`.
inline net::NetworkConfig local_config(std::uint32_t world, const std::string& device) {
  const std::vector<std::uint16_t> ports = fresh_ports(world);
  net::NetworkConfigBuilder builder;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    builder.add_host({.rank = rank, .hostname = "127.0.0.1", .port = ports[rank], .ibdev = device});
  }
  return builder.build();
}

/// How the ranks of run_ranks() find each other.
enum class BootstrapKind { hosts_file, rendezvous };

inline std::string to_string(BootstrapKind kind) {
  return kind == BootstrapKind::hosts_file ? "hosts_file" : "rendezvous";
}

/// The Bootstrap of `rank` of the world `config` describes: its Exchanger, or a Rendezvous at
/// rank 0's address.
inline std::unique_ptr<net::Bootstrap> make_bootstrap(BootstrapKind kind,
                                                      const net::NetworkConfig& config,
                                                      std::uint32_t rank) {
  constexpr auto kTimeout = std::chrono::seconds(20);
  if (kind == BootstrapKind::hosts_file) {
    return std::make_unique<net::Exchanger>(config, rank,
                                            net::ExchangerOptions{.timeout = kTimeout});
  }
  return std::make_unique<net::Rendezvous>(
      net::RootAddress{.host = config.host(0).hostname, .port = config.host(0).port}, rank,
      static_cast<std::uint32_t>(config.world_size()), net::RendezvousOptions{.timeout = kTimeout});
}

/// How the ranks of a Node test exchange their endpoints: the all_to_all of PeerEndpoints in
/// PreparedNode::connect(), or an all-gather of NodeEndpoints and PreparedNode::handshake().
enum class ExchangePath { all_to_all, all_gather };

/// Runs body(node, bootstrap) on `world` ranks, one thread each, each built by
/// configure(rank, builder) and connected over `path` through a Bootstrap of `kind`. A rank's
/// connect error goes to on_connect_error(rank, error) when one is given (body then does not
/// run for that rank); every other exception of a rank is rethrown, the first, after all
/// threads have ended.
inline void run_ranks_over(
    std::uint32_t world, ExchangePath path, BootstrapKind kind,
    const std::function<void(std::uint32_t, net::NodeBuilder&)>& configure,
    const std::function<void(net::Node&, net::Bootstrap&)>& body,
    const std::function<void(std::uint32_t, const Error&)>& on_connect_error = {}) {
  const std::string device = open_test_device().name();
  const net::NetworkConfig config = local_config(world, device);
  std::mutex mutex;
  std::exception_ptr first_error;
  std::vector<std::jthread> threads;  // joined even if starting a later one throws
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        const std::unique_ptr<net::Bootstrap> bootstrap = make_bootstrap(kind, config, rank);
        const Context context = open_device(device);
        const ProtectionDomain pd(context);
        QueuePairSettings settings;
        settings.gid_index = test_gid_index(context);
        net::NodeBuilder builder(pd, rank, world);
        builder.queue_pair(settings).barrier_timeout(std::chrono::seconds(20));
        if (configure) configure(rank, builder);
        net::PreparedNode prepared = builder.build();
        std::optional<net::Node> node;
        try {
          if (path == ExchangePath::all_to_all) {
            node.emplace(std::move(prepared).connect(*bootstrap));
          } else {
            const auto all = bootstrap->all_gather(prepared.endpoint());
            node.emplace(std::move(prepared).handshake(std::span<const net::NodeEndpoint>(all)));
            bootstrap->barrier();
          }
        } catch (const Error& error) {
          if (!on_connect_error) throw;
          on_connect_error(rank, error);
          return;
        }
        body(*node, *bootstrap);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

/// Runs body(node, bootstrap) on `world` ranks, one thread each, every rank connected through
/// a Bootstrap of `kind` (PreparedNode::connect()); rethrows the first exception of any rank
/// after all threads have ended.
inline void run_ranks(std::uint32_t world,
                      const std::function<void(net::Node&, net::Bootstrap&)>& body,
                      const std::function<void(net::NodeBuilder&)>& configure = {},
                      BootstrapKind kind = BootstrapKind::hosts_file) {
  run_ranks_over(
      world, ExchangePath::all_to_all, kind,
      [&configure](std::uint32_t /*rank*/, net::NodeBuilder& builder) {
        if (configure) configure(builder);
      },
      body);
}

}  // namespace ibv::test
