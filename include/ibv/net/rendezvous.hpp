// SPDX-License-Identifier: MIT
// Rendezvous: the Bootstrap of a job without a hosts file. Every rank knows only the root's
// address (IBV_BOOTSTRAP=host:port, or an argument), the world size and its own rank; rank 0
// listens there and every other rank dials it, so a rank holds one socket and each collective
// is one message to the root and one back (a star; docs/bootstrap.md says why not a tree).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/duration.hpp"
#include "ibv/net/bootstrap.hpp"

namespace ibv::net {

/// Where a rendezvous root listens: a host name or numeric address, and a port.
struct RootAddress {
  /// A host name, or an IPv4 or IPv6 address (without brackets).
  std::string host;
  /// The TCP port, 1..65535.
  std::uint16_t port = 0;

  /// Parses "host:port", "10.0.0.1:18515" or "[fe80::1]:18515". Throws ibv::Error
  /// (invalid_argument), quoting the text briefly, for anything else: no port, a port that is not
  /// 1..65535, an empty host, an unclosed bracket (test:
  /// `RootAddressParse.RefusesEverythingElseQuotingItBriefly`).
  [[nodiscard]] static RootAddress parse(std::string_view text);
  /// "host:port" ("[v6]:port").
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const RootAddress&, const RootAddress&) = default;
};

/// How a Rendezvous waits and what it accepts.
struct RendezvousOptions {
  /// One overall deadline for each collective (the first includes connecting to the root);
  /// positive. A rank other than the root waits up to 2 s longer for the root's answer once it
  /// is connected, so that the root's account of a failure reaches it first.
  Duration timeout{std::chrono::seconds(30)};
  /// First pause between attempts to reach a root that is not listening yet; positive. Later
  /// pauses grow by half each time up to 1 s (or this, when longer), spread over 75-125 %.
  Duration retry_interval{std::chrono::milliseconds(100)};
  /// Largest contribution of one rank to one collective, in bytes (for all_to_all: all its
  /// entries together): 1 .. 2^32 - 1. The root refuses a larger one before allocating for it.
  std::size_t max_message_size = std::size_t{1} << 20;
  /// The root's listening address: empty for the wildcard address (IPv6 and IPv4), or an
  /// address or host name of the root's machine. Ignored by the other ranks.
  std::string listen_address{};
};

/// A star-shaped Bootstrap over TCP: rank 0 (the root) listens on root.port; every other rank
/// dials root.host:root.port, retrying while the root is not up yet, says hello (its rank and
/// world size) and keeps that one connection. Each collective sends the root one message and
/// gets one back: the root answers when every rank's message is in (all_gather: everyone's
/// entries; all_to_all: the entries addressed to that rank; barrier: nothing). The framing is
/// that of ibv/net/exchange_message.hpp.
///
/// Costs for N ranks: one socket per rank and N - 1 at the root (the root raises its soft
/// descriptor limit, as far as the hard limit allows, when it needs to); two messages per rank
/// per collective; a rank receives O(N) bytes for all_to_all and all_gather; the root holds
/// every rank's contribution to one collective at once, and for all_to_all also the answers
/// built from them (N x N entries each: 1,024 ranks x 64-byte entries is 64 MiB each).
/// Measured in bench/bootstrap (bench/results/bootstrap.md).
///
/// Failures: the root checks every hello and message (world size, duplicate or unknown ranks,
/// ranks that call different collectives) and, on any failure, including a rank that closes its
/// connection or does not come within the timeout, sends every connected rank an abort naming
/// the rank and the problem before it throws; those ranks throw an ibv::Error of the same kind
/// that quotes it. A failure before the deadline also keeps the root's port open until every
/// rank has been told, at most 2 s, so that ranks still starting hear the reason too. A rank that
/// loses the root throws ErrorKind::peer_gone naming it (untested: `peer_gone`, no test ends the
/// root in the middle of a collective). After a failure the Rendezvous is unusable
/// (ErrorKind::state; test: `Rendezvous.AFailureLeavesItUnusableAndSaysWhy`).
///
/// Move-only; not thread-safe. World size 1 opens nothing.
///
///   const auto launcher = ibv::net::rank_from_launcher();  // OMPI_*, PMI_*, SLURM_*
///   ibv::net::Rendezvous bootstrap(ibv::net::RootAddress::parse("node01:18515"),
///                                  launcher->rank, launcher->size);
///   const auto everyone = bootstrap.all_gather(my_region);
class Rendezvous final : public Bootstrap {
 public:
  /// Rank `rank` of `world_size`; the root (rank 0) listens on root.port at once (on
  /// options.listen_address). Throws ibv::Error: invalid_argument for world_size 0, a rank not
  /// below it, a port 0 or bad options (test: `Rendezvous.BadArgumentsAreRefusedAtConstruction`);
  /// resource when the root's port is in use (naming it; test:
  /// `Rendezvous.TheRootsPortInUseIsAResourceErrorNamingIt`), permission for a privileged port
  /// (untested: `permission`, no test binds a privileged port).
  Rendezvous(RootAddress root, std::uint32_t rank, std::uint32_t world_size,
             RendezvousOptions options = {});

  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;
  /// Takes over the connections; `other` may then only be destroyed or assigned to.
  Rendezvous(Rendezvous&& other) noexcept;
  /// Closes this object's connections and takes over `other`'s.
  Rendezvous& operator=(Rendezvous&& other) noexcept;
  /// Closes every connection (the root: its listener too).
  ~Rendezvous() override;

  [[nodiscard]] std::uint32_t rank() const noexcept override { return rank_; }
  [[nodiscard]] std::uint32_t world_size() const noexcept override { return world_size_; }
  /// "TCP rendezvous at node01:18515 (rank 3 of 64)".
  [[nodiscard]] std::string description() const override;

  /// Bootstrap::all_gather_bytes. Throws ibv::Error: invalid_argument when `mine` exceeds
  /// max_message_size (nothing is sent, still usable; test:
  /// `Rendezvous.TooLargeAContributionIsRefusedBeforeAnythingIsSent`); otherwise, leaving it
  /// unusable: timeout (test: `Rendezvous.ARankThatNeverComesIsNamedOnEveryOtherRankAtTheTimeout`),
  /// peer_gone for a rank that closes its connection (test:
  /// `Rendezvous.ARankThatLeavesDuringTheBootstrapIsNamedOnEveryOtherRank`), connection for a stray
  /// client that closes in the middle of its hello (untested: `connection`, no test sends the root
  /// a cut hello), protocol as described above (test:
  /// `Rendezvous.ARankWithAnotherWorldSizeFailsEveryRank`); state after an earlier failure (tests:
  /// `Rendezvous.AFailureLeavesItUnusableAndSaysWhy`, `Rendezvous.MovedFromIsAStateError`).
  [[nodiscard]] std::vector<std::vector<std::byte>> all_gather_bytes(
      std::span<const std::byte> mine) override;
  /// Bootstrap::all_to_all_bytes, with the errors of all_gather_bytes (the limit applies to
  /// all entries together).
  [[nodiscard]] std::vector<std::vector<std::byte>> all_to_all_bytes(
      std::span<const std::vector<std::byte>> to_peer) override;
  /// Bootstrap::barrier, with the errors of all_gather_bytes.
  void barrier() override;

  /// Where the root listens.
  [[nodiscard]] const RootAddress& root() const noexcept { return root_; }
  /// The options it was made with.
  [[nodiscard]] const RendezvousOptions& options() const noexcept { return options_; }

  /// What the root's state is made of, in src/net/rendezvous.cpp; public only so that the
  /// source file can name it.
  class State;

 private:
  std::vector<std::vector<std::byte>> run(std::uint8_t operation,
                                          std::span<const std::vector<std::byte>> entries);

  RootAddress root_;
  std::uint32_t rank_;
  std::uint32_t world_size_;
  RendezvousOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace ibv::net
