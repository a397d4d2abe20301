// SPDX-License-Identifier: MIT
// The out-of-band exchanger of a job: a TCP mesh between the ranks of a NetworkConfig (a hosts
// file) over which every rank contributes one value (an endpoint, a remote region, any byte
// string) and gets back every rank's, or sends each peer its own, before and between the RDMA
// connections that need them. The Bootstrap of a hosts file.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ibv/duration.hpp"
#include "ibv/error.hpp"
#include "ibv/net/bootstrap.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/net/wire.hpp"

namespace ibv::net {

/// How an Exchanger waits, retries and what it accepts.
struct ExchangerOptions {
  /// One overall deadline for each exchange() (building the mesh and the transfer); positive.
  Duration timeout{std::chrono::seconds(30)};
  /// First pause between connection attempts to a peer that is not listening yet; positive.
  /// Later pauses grow by half each time up to 1 s (or this, when longer), each spread over
  /// 75-125 %, so that many ranks do not retry in step.
  Duration retry_interval{std::chrono::milliseconds(100)};
  /// Largest payload of one message, in bytes, incoming or outgoing: 1 .. 2^32 - 1. A peer that
  /// announces more fails the exchange before anything is allocated for it.
  std::size_t max_message_size = std::size_t{1} << 20;
  /// Address to listen on. Empty (the default): the address this rank's entry names when it
  /// is one of this machine's (a numeric address, or the first non-loopback address its name
  /// resolves to), else every address; so ranks of one machine with different addresses may
  /// share a port. "*": every address (IPv6 and IPv4 where the host has IPv6, else IPv4).
  /// Otherwise a numeric IP address or a host name of this machine.
  std::string listen_address{};
};

/// An all-to-all exchange of byte strings between the ranks of a NetworkConfig over TCP, for
/// the endpoints and remote regions that RDMA connections need before they exist.
///
/// Rank r listens on config.host(r).port (on its entry's address, see
/// ExchangerOptions::listen_address) from construction on, accepts one connection from
/// every lower rank and dials every higher rank (config.host(h).hostname, IPv4 or IPv6). The
/// first exchange() builds this mesh, retrying refused connections
/// (ExchangerOptions::retry_interval, backing off) until its deadline, so the ranks may start in
/// any order within ExchangerOptions::timeout. Later exchanges reuse the connections; every message
/// carries a sequence number, so ranks that disagree on how many exchanges they did are detected.
/// The protocol is described in ibv/net/exchange_message.hpp.
///
/// Every exchange is bounded by one deadline and fails fast: a peer that sends anything that
/// breaks the protocol, closes its connection or can not be reached ends the exchange with an
/// ibv::Error (kind protocol, peer_gone or timeout; tests:
/// `ExchangerHostile.GarbageIsRejectedAndTheConnectionClosed`,
/// `Exchanger.APeerThatClosesDuringAnExchangeIsPeerGoneThenTheExchangerIsPoisoned`,
/// `Exchanger.AHigherRankThatNeverStartsTimesOutNamingItsAddress`) naming the rank, its address and
/// exactly what went wrong. The connections are then closed (so the peers fail promptly too) and
/// the Exchanger is unusable: later calls throw ErrorKind::state (test:
/// `Exchanger.APeerThatClosesDuringAnExchangeIsPeerGoneThenTheExchangerIsPoisoned`).
///
/// Host names are resolved with getaddrinfo(), which blocks: a resolver that hangs can delay
/// an exchange beyond its deadline (numeric addresses in the configuration avoid it).
///
/// Single-threaded: one thread at a time may use an Exchanger; it starts no threads itself.
/// Move-only; a moved-from Exchanger may only be destroyed or assigned to.
///
/// Each rank holds world size - 1 sockets: fine for tens of ranks, a limit at hundreds (see
/// ibv::net::Rendezvous for jobs without a hosts file and O(1) sockets per rank).
///
///   const auto config = ibv::net::NetworkConfig::from_file("network.json");
///   ibv::net::Exchanger exchanger(config, rank);
///   const std::vector<ibv::Endpoint> endpoints = exchanger.exchange(prepared.endpoint());
class Exchanger final : public Bootstrap {
 public:
  /// Starts listening on config.host(rank).port at once (on options.listen_address), so that the
  /// peers' connections succeed early; with a world size of 1 it opens nothing. Throws ibv::Error:
  /// invalid_argument for a rank outside the config or invalid options (tests:
  /// `Exchanger.RejectsARankOutsideTheConfiguration`, `Exchanger.RejectsInvalidOptions`); resource
  /// when the port is in use (naming the port; another process, e.g. a previous run, holds it)
  /// (test: `Exchanger.APortInUseIsReportedWithThePort`); permission for a privileged port
  /// (untested: `permission`, no test binds a privileged port); invalid_argument for a
  /// listen_address that is not of this host (test:
  /// `Exchanger.AListenAddressOfAnotherHostIsRejected`).
  Exchanger(NetworkConfig config, std::uint32_t rank, ExchangerOptions options = {});

  Exchanger(const Exchanger&) = delete;
  Exchanger& operator=(const Exchanger&) = delete;
  /// Takes over the connections; `other` may then only be destroyed or assigned to.
  Exchanger(Exchanger&& other) noexcept;
  /// Closes this Exchanger's connections and takes over `other`'s.
  Exchanger& operator=(Exchanger&& other) noexcept;
  /// Closes the listener and every connection.
  ~Exchanger() override;

  /// All-to-all: every rank contributes `mine` and gets back one entry per rank, index = rank,
  /// its own entry being a copy of `mine`. Every rank must call it, equally often. The first
  /// call builds the mesh. Returns only when every peer's message has arrived and every peer has
  /// taken ours, within ExchangerOptions::timeout. With a world size of 1 it returns {mine}
  /// without any network activity.
  ///
  /// Throws ibv::Error: invalid_argument when `mine` exceeds max_message_size (nothing is sent; the
  /// Exchanger stays usable; test:
  /// `Exchanger.AnOversizedOwnMessageIsRejectedBeforeSendingAndLeavesItUsable`); otherwise, and
  /// then the Exchanger is unusable afterwards: protocol when a peer or a stray client sends
  /// something that breaks the protocol (garbage, another protocol version, an unknown, higher or
  /// duplicate rank, another world size or sequence number, an oversized message; tests:
  /// `ExchangerHostile.GarbageIsRejectedAndTheConnectionClosed`,
  /// `ExchangerHostile.AnotherSequenceNumberIsRejected`), peer_gone when a peer closes or breaks
  /// its connection during the exchange (a message cut short included; tests:
  /// `Exchanger.APeerThatClosesDuringAnExchangeIsPeerGoneThenTheExchangerIsPoisoned`,
  /// `ExchangerHostile.ATruncatedPayloadOfAKnownRankIsPeerGone`), connection when a client closes
  /// its connection in the middle of its hello (test:
  /// `ExchangerHostile.ATruncatedHelloOfAStrangerIsAConnectionError`), timeout (ETIMEDOUT) when the
  /// deadline passes, naming the ranks waited for and why (e.g. "rank 3 at node04:18515 refused the
  /// connection 57 times: is it running?") (test:
  /// `Exchanger.AHigherRankThatNeverStartsTimesOutNamingItsAddress`); state when an earlier
  /// exchange failed or the Exchanger was moved from (tests:
  /// `Exchanger.APeerThatClosesDuringAnExchangeIsPeerGoneThenTheExchangerIsPoisoned`,
  /// `Exchanger.AMovedExchangerKeepsItsConnections`).
  [[nodiscard]] std::vector<std::vector<std::byte>> exchange_bytes(std::span<const std::byte> mine);

  /// all_gather<T>(mine): exchange_bytes() of Wire<T>::encode(mine), each peer's entry decoded
  /// with Wire<T>::decode (own entry: a copy of `mine`). A peer's entry that does not decode
  /// throws ibv::Error (protocol) naming the rank (test:
  /// `Exchanger.AnEntryThatDoesNotDecodeNamesTheRankAndLeavesTheExchangerUsable`); that leaves the
  /// Exchanger usable, as the exchange itself succeeded.
  template <WireSerializable T>
  requires std::copy_constructible<T>
  [[nodiscard]] std::vector<T> exchange(const T& mine) { return all_gather(mine); }

  /// Bootstrap: exchange_bytes().
  [[nodiscard]] std::vector<std::vector<std::byte>> all_gather_bytes(
      std::span<const std::byte> mine) override {
    return exchange_bytes(mine);
  }
  /// Bootstrap: one exchange in which each peer gets its own entry, with the errors of
  /// exchange_bytes() (each entry is bounded by max_message_size).
  [[nodiscard]] std::vector<std::vector<std::byte>> all_to_all_bytes(
      std::span<const std::vector<std::byte>> to_peer) override;
  /// Bootstrap: an exchange of empty messages.
  void barrier() override;

  /// This rank.
  [[nodiscard]] std::uint32_t rank() const noexcept override { return rank_; }
  /// Number of ranks, config().world_size().
  [[nodiscard]] std::uint32_t world_size() const noexcept override {
    return static_cast<std::uint32_t>(config_.world_size());
  }
  /// "hosts file (TCP mesh of N ranks)".
  [[nodiscard]] std::string description() const override;
  /// The network this Exchanger connects.
  [[nodiscard]] const NetworkConfig& config() const noexcept { return config_; }
  /// The options it was made with.
  [[nodiscard]] const ExchangerOptions& options() const noexcept { return options_; }

 private:
  struct State;  // sockets and per-exchange progress, in src/net/exchanger.cpp

  [[noreturn]] void throw_undecodable(std::uint32_t sender, const Error& error) const override;
  // Every exchange: the checks, then one run with outgoing[peer] for each peer.
  std::vector<std::vector<std::byte>> run(std::span<const std::span<const std::byte>> outgoing);

  NetworkConfig config_;
  std::uint32_t rank_;
  ExchangerOptions options_;
  std::unique_ptr<State> state_;
};

}  // namespace ibv::net
