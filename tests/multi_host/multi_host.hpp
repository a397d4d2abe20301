// SPDX-License-Identifier: MIT
// The multi-host tests (ibv_multi_host_tests) run as N cooperating processes, one per rank,
// each on its own (emulated) host: tests/multi_host/run starts them, inside the testbed
// (testbed/run --hosts N) or on one machine with a real RDMA device. Every rank runs the same
// tests in the same order; a test talks to its peers through the addresses below.
//
//   TEST(Exchange, EveryRankSeesEveryOther) {
//     auto& world = ibv::test::multi_host();
//     const auto config = world.config(world.fresh_port_offset());  // ports no test used before
//     ... build rank world.rank() of `config` on world.open_device() ...
//   }
//
// Environment (set by tests/multi_host/run; main() reads it once and exits 2 when it is
// incomplete): IBV_TEST_RANK, IBV_TEST_WORLD, IBV_TEST_DEVICE, IBV_TEST_GID_INDEX (optional),
// IBV_TEST_BASE_PORT, and for every rank k IBV_TEST_RANK<k>_IP and IBV_TEST_RANK<k>_DEVICE;
// IBV_TEST_BOOTSTRAP (optional): how the tests' Nodes connect, hosts (default), rendezvous or
// pmix (then a PMIx launcher must have started the ranks: tests/multi_host/run under mpirun).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ibv/net/bootstrap.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/verbs/context.hpp"

namespace ibv::test {

/// Who this process is among the ranks of a multi-host test run, and where the others are.
class MultiHost {
 public:
  /// Ports reserved for one run, from base_port(): port(k, offset) = base_port() + offset *
  /// world_size() + k stays below base_port() + kPortSpan (tests/multi_host/run checks that
  /// nothing listens there when it picks the base).
  static constexpr std::uint32_t kPortSpan = 4096;

  /// Reads the environment. Throws std::runtime_error naming the variable that is missing or
  /// malformed. Tests use multi_host() instead.
  [[nodiscard]] static MultiHost from_environment();

  /// This process's rank: 0 .. world_size() - 1 (IBV_TEST_RANK).
  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
  /// Number of ranks (IBV_TEST_WORLD).
  [[nodiscard]] std::uint32_t world_size() const noexcept { return world_size_; }
  /// This rank's RDMA device, e.g. "rxe_h1" (IBV_TEST_DEVICE).
  [[nodiscard]] const std::string& device() const noexcept { return device_; }
  /// Rank k's RDMA device (IBV_TEST_RANK<k>_DEVICE); device(rank()) == device() in a coherent
  /// run. Throws std::out_of_range for k >= world_size().
  [[nodiscard]] const std::string& device(std::uint32_t k) const;
  /// The GID index to use on device() (IBV_TEST_GID_INDEX); nullopt: the library's default
  /// (Context::default_gid_index()).
  [[nodiscard]] std::optional<std::uint32_t> gid_index() const noexcept { return gid_index_; }
  /// Rank k's IPv4 address, to dial it and (for k = rank()) to bind to; "127.0.0.1" for every
  /// rank when all run on one machine. Throws std::out_of_range for k >= world_size().
  [[nodiscard]] const std::string& ip(std::uint32_t k) const;
  /// First port of this run (IBV_TEST_BASE_PORT).
  [[nodiscard]] std::uint16_t base_port() const noexcept { return base_port_; }

  /// The TCP port rank k listens on for the test that uses `port_offset`: distinct for every
  /// (k, port_offset), so ranks sharing one IP do not collide. Throws std::out_of_range past
  /// kPortSpan or 65535.
  [[nodiscard]] std::uint16_t port(std::uint32_t k, std::uint16_t port_offset) const;
  /// A NetworkConfig of all ranks: rank k at hostname ip(k), port port(k, port_offset), ibdev
  /// device(k).
  [[nodiscard]] net::NetworkConfig config(std::uint16_t port_offset) const;
  /// 0, 1, 2, ... in call order: the same sequence on every rank, as long as every rank runs
  /// the same tests in the same order (which the runner ensures). One call per test that
  /// listens, so no test binds a port a previous test's socket may still hold (TIME_WAIT).
  [[nodiscard]] std::uint16_t fresh_port_offset();

  /// "hosts", "rendezvous" or "pmix" (IBV_TEST_BOOTSTRAP).
  [[nodiscard]] const std::string& bootstrap_kind() const noexcept { return bootstrap_kind_; }
  /// A Bootstrap of this run's kind for one test, on fresh ports (fresh_port_offset()): an
  /// Exchanger of config(offset), a Rendezvous at ip(0):port(0, offset), or the process's one
  /// PmixBootstrap (PMIx is initialized once per process; its collectives go on in sequence).
  /// Throws std::runtime_error when PMIx's rank or size disagree with IBV_TEST_RANK/WORLD.
  [[nodiscard]] std::shared_ptr<net::Bootstrap> bootstrap(std::chrono::milliseconds timeout);

  /// Opens device().
  [[nodiscard]] Context open_device() const;

  /// "[ rank 1/4 ] device rxe_h1, GID index 1, IP 10.0.0.2", the line main() prints.
  [[nodiscard]] std::string to_string() const;

 private:
  MultiHost() = default;

  std::uint32_t rank_ = 0;
  std::uint32_t world_size_ = 0;
  std::string device_;
  std::optional<std::uint32_t> gid_index_;
  std::uint16_t base_port_ = 0;
  std::vector<std::string> ips_;
  std::vector<std::string> devices_;
  std::uint16_t next_port_offset_ = 0;
  std::string bootstrap_kind_ = "hosts";
  std::shared_ptr<net::Bootstrap> pmix_;
};

/// The process's MultiHost, read from the environment at the first call (main() makes that
/// call, and exits 2 when it throws).
[[nodiscard]] MultiHost& multi_host();

}  // namespace ibv::test
