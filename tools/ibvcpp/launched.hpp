// SPDX-License-Identifier: MIT
// ibvcpp perf started by a launcher: `mpirun -np 2 ibvcpp perf write bw` (or srun -n 2, or any
// job with IBV_BOOTSTRAP set) runs a server as rank 0 and its client as rank 1, with no address
// on the command line. The two ranks meet through the library's Bootstrap (PMIx, the
// rendezvous): rank 0 listens first, then publishes its numeric addresses (those of its RDMA
// device first) and TCP port; rank 1 dials them in turn. The session after that is the usual
// TCP one (protocol.hpp), and only rank 0 prints the report.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/net/bootstrap.hpp"
#include "ibv/net/launcher.hpp"
#include "ibv/verbs/context.hpp"
#include "ibvcpp/options.hpp"
#include "ibvcpp/tcp.hpp"

namespace ibvcpp {

/// Where a launched server listens: its TCP port and the numeric addresses to try, in order.
struct ServerAddresses {
  std::uint16_t port = 0;
  std::vector<std::string> hosts;

  friend bool operator==(const ServerAddresses&, const ServerAddresses&) = default;
};

/// "<port> <host> <host>...": what rank 0 publishes.
[[nodiscard]] std::string encode_server_addresses(const ServerAddresses& addresses);
/// Throws ToolError (connection) unless `text` is a port and at least one host.
[[nodiscard]] ServerAddresses decode_server_addresses(std::string_view text);

/// Whether this process is one rank of a launched job that should run as a pair: no server is
/// named and IBV_BOOTSTRAP is set, or a launcher (its rank variables, or PMIx) started it as
/// one of 2 or more processes. A job of one process (`srun -n 1 ibvcpp perf ...`) runs alone,
/// as before. Throws ibv::Error (invalid_argument) for malformed launcher variables.
[[nodiscard]] bool runs_as_launched_pair(const PerfOptions& options,
                                         const ibv::net::EnvironmentLookup& lookup);

/// The two ranks of a launched ibvcpp perf.
class LaunchedPair {
 public:
  /// The bootstrap_from_environment() of this job, bounded by options.timeout. Throws
  /// UsageError when the job does not have exactly 2 ranks, ToolError (connection) when the
  /// bootstrap cannot be made.
  explicit LaunchedPair(const PerfOptions& options);

  /// Rank 0 serves; rank 1 is its client.
  [[nodiscard]] bool is_server() const noexcept { return bootstrap_->rank() == 0; }
  /// "PMIx (namespace ...)", for messages.
  [[nodiscard]] std::string description() const { return bootstrap_->description(); }

  /// Rank 0 (`mine` set): publishes where it listens. Rank 1 (`mine` empty): returns what rank 0
  /// published. Both ranks call it once, at the same point. Throws ToolError (connection).
  ServerAddresses exchange(const std::optional<ServerAddresses>& mine);

 private:
  std::unique_ptr<ibv::net::Bootstrap> bootstrap_;
};

/// The numeric addresses a launched server publishes for `port`: the IP addresses of `context`'s
/// GID table on that port (so that -R's rdma_cm reaches the RDMA device), then every other
/// address of this host's interfaces that are up, loopback last; IPv6 link-local ones are left
/// out (they need a scope). No duplicates.
[[nodiscard]] std::vector<std::string> local_addresses(const ibv::Context& context,
                                                       std::uint8_t port);

/// Dials the hosts of `server` in turn, each for at most `per_host`; returns the first
/// connection and sets `reached` to its host. Throws ToolError (connection) naming every host
/// tried and why each failed.
[[nodiscard]] Connection dial_first(const ServerAddresses& server,
                                    std::chrono::milliseconds per_host, std::string& reached);

}  // namespace ibvcpp
