// SPDX-License-Identifier: MIT
// The operations a MultiChannel posts to a peer: the Channel's operations, with the peer's
// memory named by a PeerRemoteMemoryRegion (op::PeerWrite, op::PeerRead, ...), so that a region
// of another peer is refused before anything is posted and a plain RemoteMemoryRegion, which
// says no peer, does not compile; and op::ToPeer, an operation with the peer it goes to, what
// MultiChannel's post_all takes for work to several peers at once (op::to_each: one to each).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "ibv/channel/operation.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"

namespace ibv::op {

/// A write into a peer's PeerRemoteMemoryRegion.
using PeerWrite = BasicWrite<PeerRemoteMemoryRegion>;
/// A read of a peer's PeerRemoteMemoryRegion.
using PeerRead = BasicRead<PeerRemoteMemoryRegion>;
/// A fetch-and-add on a peer's PeerRemoteMemoryRegion.
using PeerFetchAdd = BasicFetchAdd<PeerRemoteMemoryRegion>;
/// A compare-and-swap on a peer's PeerRemoteMemoryRegion.
using PeerCompareSwap = BasicCompareSwap<PeerRemoteMemoryRegion>;
/// Mixed send-queue operations to one peer.
using PeerAnySend = BasicAnySend<PeerRemoteMemoryRegion>;

namespace detail {
template <typename T>
inline constexpr bool is_any_send = false;
template <typename Region>
inline constexpr bool is_any_send<BasicAnySend<Region>> = true;
}  // namespace detail

/// What a MultiChannel takes for a peer: an Operation that names no memory of the peer's (Send,
/// Receive, a type of your own without remote_region()), or whose remote_region() is a
/// PeerRemoteMemoryRegion (PeerWrite, PeerRead, PeerFetchAdd, PeerCompareSwap, PeerAnySend).
/// A Channel operation with a plain RemoteMemoryRegion (op::Write, ...) is not one.
template <typename T>
concept PeerOperation = Operation<T> &&(
    detail::is_any_send<T> ? std::same_as<T, PeerAnySend>
                           : !requires(const T& operation) { operation.remote_region(); } ||
                                 requires(const T& operation) {
                                   {
                                     operation.remote_region()
                                     } -> std::same_as<const PeerRemoteMemoryRegion&>;
                                 });

/// The peer whose memory `operation` names, if it names any (PeerAnySend: its alternative's).
template <PeerOperation Operation>
[[nodiscard]] std::optional<std::uint32_t> region_owner(const Operation& operation) {
  if constexpr (detail::is_any_send<Operation>) {
    return std::visit(
        [](const auto& alternative) -> std::optional<std::uint32_t> {
          return region_owner(alternative);
        },
        operation.operation);
  } else if constexpr (requires { operation.remote_region(); }) {
    return operation.remote_region().peer();
  } else {
    return std::nullopt;
  }
}

namespace detail {
/// Throws the ibv::Error (invalid_argument) of `call` given a region of `owner` for `peer` (test:
/// `MultiChannelTest.ARegionOfAnotherPeerIsRejectedAndNothingIsWritten`).
[[noreturn]] void throw_foreign_region(const char* call, std::uint32_t peer, std::uint32_t owner);
/// Throws the ibv::Error (invalid_argument) of to_each() for `peer`, listed twice in `peers` (test:
/// `BadInputMultiChannel.PeersRanksAndBatchesAreCheckedBeforeAnythingIsPosted`).
[[noreturn]] void throw_listed_twice(std::span<const std::uint32_t> peers, std::uint32_t peer);
}  // namespace detail

/// Throws ibv::Error (invalid_argument), naming `call` (a string literal), when `operation`
/// names memory of another peer than `peer` (the check of every peer-addressed call; tests:
/// `MultiChannelTest.ARegionOfAnotherPeerIsRejectedAndNothingIsWritten`,
/// `MultiChannelTest.TheGenericCallsRefuseARegionOfAnotherPeerToo`).
template <PeerOperation Operation>
void check_region_owner(const Operation& operation, std::uint32_t peer, const char* call) {
  if (const std::optional<std::uint32_t> owner = region_owner(operation); owner && *owner != peer)
      [[unlikely]] {
    detail::throw_foreign_region(call, peer, *owner);
  }
}

/// `operation` addressed to `peer`: an element of MultiChannel::post_all, which takes a range of
/// them (one operation type; op::PeerAnySend to mix send-queue operations), so that one call
/// posts work to several peers: a scatter of sends or writes, a gather of receives or reads.
/// As safe to keep as the operation itself (ElementList).
template <PeerOperation Operation>
struct ToPeer {
  /// The rank it goes to.
  std::uint32_t peer = 0;
  /// What is posted there.
  Operation operation;
};
/// ToPeer{peer, operation} names its operation type itself.
template <PeerOperation Operation>
ToPeer(std::uint32_t, Operation) -> ToPeer<Operation>;

namespace detail {
template <typename T>
inline constexpr bool is_to_peer = false;
template <typename Operation>
inline constexpr bool is_to_peer<ToPeer<Operation>> = true;
template <typename T>
struct addressed_operation;
template <typename Operation>
struct addressed_operation<ToPeer<Operation>> {
  using type = Operation;
};
}  // namespace detail

/// An op::ToPeer of some operation: what post_all posts to several peers.
template <typename T>
concept Addressed = detail::is_to_peer<T>;
/// The operation type of an op::ToPeer.
template <Addressed T>
using addressed_t = typename detail::addressed_operation<T>::type;

/// `operation` to each rank of `peers`, in that order: a multicast of a send, or a receive from
/// each (an operation on a peer's memory names one peer's region, so it goes to that peer
/// alone). Throws ibv::Error (invalid_argument) for a rank listed twice (test:
/// `BadInputMultiChannel.PeersRanksAndBatchesAreCheckedBeforeAnythingIsPosted`); post_all checks
/// the ranks themselves.
template <PeerOperation Operation>
[[nodiscard]] std::vector<ToPeer<Operation>> to_each(std::span<const std::uint32_t> peers,
                                                     const Operation& operation) {
  std::vector<std::uint32_t> sorted(peers.begin(), peers.end());
  std::ranges::sort(sorted);
  if (const auto twice = std::ranges::adjacent_find(sorted); twice != sorted.end()) [[unlikely]]
    detail::throw_listed_twice(peers, *twice);
  std::vector<ToPeer<Operation>> addressed;
  addressed.reserve(peers.size());
  for (const std::uint32_t peer : peers) addressed.push_back({peer, operation});
  return addressed;
}

}  // namespace ibv::op
