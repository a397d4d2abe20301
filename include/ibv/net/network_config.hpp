// SPDX-License-Identifier: MIT
// The network of a job: which host runs which rank, where its out-of-band exchanger listens and
// which RDMA device it opens. Loaded from JSON (or built in code) and always valid once made.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ibv::net {

/// One rank of the network, as one entry of the JSON "hosts" array:
/// {"hostname":"node01","port":18515,"ibdev":"mlx5_0","rankid":0,"comment":"rack 3"}.
struct HostConfig {
  std::uint32_t rank = 0;  ///< "rankid": 0..N-1, each rank exactly once.
  std::string hostname{};  ///< Host name or address the other ranks dial; non-empty, no blanks.
  std::uint16_t port = 0;  ///< TCP port of the out-of-band exchanger on that host: 1..65535.
  std::string ibdev{};     ///< RDMA device to open on that host ("mlx5_0", "rxe0"); non-empty.
  std::string comment{};   ///< Free text for people; optional (empty when absent).

  friend bool operator==(const HostConfig&, const HostConfig&) = default;
};

/// The hosts of a job, one per rank, sorted by rank. Every NetworkConfig is valid: at least
/// one and at most kMaxHosts hosts, ranks exactly 0..N-1, non-empty host names and device
/// names, ports in 1..65535, and no two ranks listening on the same host name and port (host
/// names compared without regard to case). Invalid input throws ibv::Error (invalid_argument)
/// whose message names what is wrong and where ("hosts[2].port is 0: it must be 1..65535"; test:
/// `NetworkConfigErrors.PortMustBeAnIntegerIn1To65535`).
class NetworkConfig {
 public:
  /// The largest network accepted: a sanity bound that catches runaway or corrupt files.
  static constexpr std::size_t kMaxHosts = 65536;

  /// Parses {"hosts":[{"hostname":...,"port":...,"ibdev":...,"rankid":...,"comment":...}]}.
  /// Entries may come in any order. Unknown fields are rejected by name (so a typo such as
  /// "rankId" can not pass silently); "comment" is the only optional field. Throws ibv::Error
  /// (invalid_argument) for text that is not JSON (with the byte position), a wrong shape, a
  /// missing, mistyped or out-of-range field, or ranks that are not exactly 0..N-1 (tests:
  /// `NetworkConfigErrors.TextThatIsNotJsonGivesTheBytePosition`,
  /// `NetworkConfigErrors.HostsMustBeAnArray`, `NetworkConfigErrors.EachMissingFieldIsNamed`,
  /// `NetworkConfigErrors.RanksMustStartAtZero`).
  [[nodiscard]] static NetworkConfig from_json(std::string_view text);

  /// from_json() on the content of a file. Throws ibv::Error naming the file when it can not
  /// be read (kind not_found, permission, ... by errno; test:
  /// `NetworkConfigFile.AMissingFileIsNamed`; untested: `permission`, no test makes a file it can
  /// not read) or its content is invalid (invalid_argument, the message starting with the file
  /// name; test: `NetworkConfigFile.ErrorsInTheContentNameTheFile`).
  [[nodiscard]] static NetworkConfig from_file(const std::filesystem::path& path);

  /// The JSON form, indented, hosts in rank order, "comment" only where non-empty;
  /// from_json(to_json()) == *this. Bytes that are not UTF-8 are written as U+FFFD.
  [[nodiscard]] std::string to_json() const;

  /// Number of ranks (hosts); at least 1.
  [[nodiscard]] std::size_t world_size() const noexcept { return hosts_.size(); }

  /// The host of `rank`. Throws ibv::Error (invalid_argument) naming the rank and the world
  /// size when rank >= world_size() (test:
  /// `NetworkConfigHost.OutOfRangeNamesTheRankAndTheWorldSize`).
  [[nodiscard]] const HostConfig& host(std::uint32_t rank) const;

  /// All hosts, sorted by rank: hosts()[r].rank == r.
  [[nodiscard]] std::span<const HostConfig> hosts() const noexcept { return hosts_; }

  friend bool operator==(const NetworkConfig&, const NetworkConfig&) = default;

 private:
  friend class NetworkConfigBuilder;
  explicit NetworkConfig(std::vector<HostConfig> sorted_hosts) noexcept;

  std::vector<HostConfig> hosts_;
};

/// Makes a NetworkConfig in code: add the hosts in any order, then build(), which applies the
/// same validation as NetworkConfig::from_json(). Messages name the hosts by the order they
/// were added ("hosts[0]" is the first add_host()).
///
///   auto config = ibv::net::NetworkConfigBuilder()
///                     .add_host({.rank = 0, .hostname = "node01", .port = 18515, .ibdev = "rxe0"})
///                     .add_host({.rank = 1, .hostname = "node02", .port = 18515, .ibdev = "rxe0"})
///                     .build();
class NetworkConfigBuilder {
 public:
  /// Adds one host; nothing is checked until build().
  NetworkConfigBuilder& add_host(HostConfig host);

  /// Validates the hosts added so far and returns them as a NetworkConfig sorted by rank.
  /// Throws ibv::Error (invalid_argument) like NetworkConfig::from_json() (test:
  /// `NetworkConfigBuilder.RunsTheSameValidation`). The builder is left unchanged, so it may be
  /// built again.
  [[nodiscard]] NetworkConfig build() const;

 private:
  std::vector<HostConfig> hosts_;
};

}  // namespace ibv::net
