// SPDX-License-Identifier: MIT
// The operations a MultiChannel posts to a peer: the Channel's operations, with the peer's
// memory named by a PeerRemoteMemoryRegion (op::PeerWrite, op::PeerRead, ...), so that a region
// of another peer is refused before anything is posted and a plain RemoteMemoryRegion, which
// says no peer, does not compile.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <variant>

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

}  // namespace ibv::op
