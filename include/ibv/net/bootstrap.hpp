// SPDX-License-Identifier: MIT
// Bootstrap: how the ranks of a job find each other before any RDMA connection exists. One
// interface, several ways: the hosts file's TCP mesh (ibv::net::Exchanger), a TCP rendezvous at
// one root address (ibv::net::Rendezvous), and the launcher's PMIx server
// (ibv::net::PmixBootstrap); bootstrap_from_environment() picks the one the process was started
// for. docs/bootstrap.md compares them.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ibv/error.hpp"
#include "ibv/net/wire.hpp"

namespace ibv::net {

/// The out-of-band collectives of a job: rank and world size, an all-gather, a personalized
/// all-to-all and a barrier, each bounded by the implementation's timeout.
///
/// Contract of every implementation: every rank calls the same collectives in the same order;
/// a call returns only when it is complete for this rank; a failure (a rank that left, a
/// protocol violation, the deadline) throws ibv::Error naming the rank or address concerned and
/// leaves the Bootstrap unusable (later calls throw ErrorKind::state; tests:
/// `Exchanger.APeerThatClosesDuringAnExchangeIsPeerGoneThenTheExchangerIsPoisoned`,
/// `Rendezvous.AFailureLeavesItUnusableAndSaysWhy`). Not thread-safe.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  /// This process's rank: below world_size().
  [[nodiscard]] virtual std::uint32_t rank() const noexcept = 0;
  /// The number of ranks: at least 1.
  [[nodiscard]] virtual std::uint32_t world_size() const noexcept = 0;
  /// How this bootstrap works, for messages and logs: "hosts file (TCP mesh)", "TCP rendezvous
  /// at node01:18515", "PMIx (namespace prterun-node01-1234@1)".
  [[nodiscard]] virtual std::string description() const = 0;

  /// Every rank contributes `mine`; returns one entry per rank, index = rank, its own a copy.
  [[nodiscard]] virtual std::vector<std::vector<std::byte>> all_gather_bytes(
      std::span<const std::byte> mine) = 0;
  /// Personalized all-to-all: `to_peer[r]` goes to rank r only (the entry at rank() is ignored;
  /// it may be empty). Returns, index = rank, what each rank sent to this one; the own entry is
  /// a copy of to_peer[rank()]. Throws ibv::Error (invalid_argument) when to_peer does not have
  /// world_size() entries (test: `Rendezvous.TooLargeAContributionIsRefusedBeforeAnythingIsSent`).
  /// This rank receives only its own entries: O(world size) bytes.
  [[nodiscard]] virtual std::vector<std::vector<std::byte>> all_to_all_bytes(
      std::span<const std::vector<std::byte>> to_peer) = 0;
  /// Returns when every rank has entered it.
  virtual void barrier() = 0;

  /// all_gather_bytes() of Wire<T>::encode(mine), each peer's entry decoded (own entry: a copy
  /// of `mine`). An entry that does not decode throws ibv::Error (protocol) naming its rank (test:
  /// `Exchanger.AnEntryThatDoesNotDecodeNamesTheRankAndLeavesTheExchangerUsable`).
  template <WireSerializable T>
  requires std::copy_constructible<T>
  [[nodiscard]] std::vector<T> all_gather(const T& mine) {
    return decode_all(all_gather_bytes(Wire<T>::encode(mine)), mine);
  }
  /// all_to_all_bytes() of Wire<T>::encode(to_peer[r]), each entry decoded likewise.
  template <WireSerializable T>
  requires std::copy_constructible<T>
  [[nodiscard]] std::vector<T> all_to_all(std::span<const T> to_peer) {
    std::vector<std::vector<std::byte>> encoded;
    encoded.reserve(to_peer.size());
    for (const T& value : to_peer) encoded.push_back(Wire<T>::encode(value));
    std::vector<std::vector<std::byte>> entries = all_to_all_bytes(encoded);  // checks the size
    return decode_all(std::move(entries), to_peer[rank()]);
  }

 protected:
  /// For the implementations: a Bootstrap has no state of its own.
  Bootstrap() = default;
  /// Copies and moves, for implementations that allow them (Bootstrap has nothing to copy).
  Bootstrap(const Bootstrap&) = default;
  /// See Bootstrap(const Bootstrap&).
  Bootstrap(Bootstrap&&) noexcept = default;
  /// See Bootstrap(const Bootstrap&).
  Bootstrap& operator=(const Bootstrap&) = default;
  /// See Bootstrap(const Bootstrap&).
  Bootstrap& operator=(Bootstrap&&) noexcept = default;

  /// Throws the protocol error of an entry from `sender` that does not decode (test:
  /// `Exchanger.AnEntryThatDoesNotDecodeNamesTheRankAndLeavesTheExchangerUsable`).
  [[noreturn]] virtual void throw_undecodable(std::uint32_t sender, const Error& error) const;

 private:
  template <typename T>
  std::vector<T> decode_all(std::vector<std::vector<std::byte>> entries, const T& own) {
    std::vector<T> values;
    values.reserve(entries.size());
    for (std::uint32_t sender = 0; sender < entries.size(); ++sender) {
      if (sender == rank()) {
        values.push_back(own);
        continue;
      }
      try {
        values.push_back(Wire<T>::decode(entries[sender]));
      } catch (const Error& error) {
        throw_undecodable(sender, error);
      }
    }
    return values;
  }
};

}  // namespace ibv::net
