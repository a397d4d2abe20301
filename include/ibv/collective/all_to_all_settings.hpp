// SPDX-License-Identifier: MIT
// AllToAllSettings: the shape of a PersistentAllToAll (slot size, slots per peer, peers in
// flight) and how it waits. Every rank of the job builds its collective with the same shape.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "ibv/channel/wait_mode.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/completion_channel.hpp"

namespace ibv::net {

/// What a PersistentAllToAll is built with. The first three must be the same on every rank
/// (the build checks it and names a rank that differs); the rest is this rank's own choice.
/// The story, and how to choose: [docs/all-to-all.md](docs/all-to-all.md).
struct AllToAllSettings {
  /// The largest part (bytes) one rank sends another in one round: 1 to kMaxSlotSize. A part's
  /// size travels in 24 bits of the write's immediate data, hence the cap.
  std::size_t slot_size = 0;
  /// Receive slots per sender, each holding one round: 2 to kMaxSlotsPerPeer. With two, round
  /// n + 1 can land while the caller still reads round n; each one more lets the senders run
  /// one more round ahead of a slow reader.
  std::uint32_t slots_per_peer = 2;
  /// How many of a round's parts this rank has on the wire at once, at most (the traffic
  /// shaping of the shift schedule): 0 (default), or anything from world size - 1 up, means
  /// all of them. PersistentAllToAll::settings() gives the number in force (0 in a world of 1).
  std::uint32_t peers_in_flight = 0;
  /// How long wait() and run() wait for a round; unset: the Node's operation timeout
  /// (ChannelTimeouts::operation). Positive.
  std::optional<Duration> timeout{};
  /// How wait() and run() wait (WaitMode); unset: as the Node's channels wait.
  std::optional<WaitMode> wait_mode{};
  /// A completion channel for the collective's completion queue, to wait on in the caller's
  /// event loop (PersistentAllToAll::completion_fd). Unset: one is made when the wait mode
  /// sleeps, none otherwise.
  std::optional<CompletionChannel> completion_channel{};

  /// The largest slot_size: 2^24 - 1 bytes.
  static constexpr std::size_t kMaxSlotSize = (std::size_t{1} << 24U) - 1U;
  /// The most slots_per_peer: 64 (rounds are checked on arrival against the one due, modulo
  /// 32: a part of another round is a protocol error; untested: `protocol`, no test sends one).
  static constexpr std::uint32_t kMaxSlotsPerPeer = 64;
};

}  // namespace ibv::net
