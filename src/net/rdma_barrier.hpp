// SPDX-License-Identifier: MIT
// Private: the barrier of a Node over RDMA. Registered slots that peers write their signals
// into, one per (round, sender); per-peer counters of signals sent and received; running one
// participant's barrier schedule with a deadline; poisoning after a failure. After a shrink the
// slots keep their places (a sender's slot is the one of its rank as built), and every counter
// carries the epoch in its top bits, so a signal of an earlier epoch never counts.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/wait_mode.hpp"
#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"
#include "ibv/net/barrier_schedule.hpp"
#include "ibv/net/fault_tolerance.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/protection_domain.hpp"

namespace ibv::net::detail {

class ControlPlane;

class RdmaBarrier {
 public:
  /// Registers the slots (enough rounds for any group of the world and any algorithm) and the
  /// outgoing counters. `wait` is the channels' wait mode: how await() waits for signals.
  RdmaBarrier(const ProtectionDomain& pd, std::uint32_t rank, std::uint32_t world_size,
              WaitMode wait = {});

  /// Where the peers write their signals to this rank.
  [[nodiscard]] RemoteMemoryRegion slots() const { return slots_mr_.remote(); }
  /// The group of every rank (made once: the common case should not allocate).
  [[nodiscard]] const BarrierGroup& all_ranks() const noexcept { return all_ranks_; }
  /// Number of rounds the slots have room for.
  [[nodiscard]] std::size_t max_rounds() const noexcept { return max_rounds_; }
  /// The peers' slot regions, index = rank (the entry at this rank is ignored). Each must be
  /// large enough for max_rounds() rounds of world_size senders.
  void set_peer_slots(std::vector<PeerRemoteMemoryRegion> peer_slots);

  /// Runs this rank's part of a barrier of `group` by `algorithm`, within `timeout`. Throws
  /// ibv::Error (state) at once when poisoned; poisons and throws on any failure. With a
  /// `control` plane (a fault-tolerant Node): throws revoked when the Node is revoked, and
  /// peer_gone as soon as a rank it still waits for is known failed; a signal that fails as
  /// peer_gone declares its rank failed there.
  void run(MultiChannel& channels, const BarrierGroup& group, BarrierAlgorithm algorithm,
           Duration timeout, ControlPlane* control = nullptr);

  [[nodiscard]] bool poisoned() const noexcept { return poison_.has_value(); }

  /// For the Node of `survivors` (ranks of this barrier's world, ascending, this rank among
  /// them), in `epoch`: waits (until `deadline`) for the signals still in flight, whatever
  /// their outcome, then numbers the survivors densely, starts every counter afresh in the
  /// epoch and forgets the poison. The survivors' slot regions are kept (set_peer_slots() is
  /// not needed again).
  void shrink(std::span<const std::uint32_t> survivors, std::uint32_t epoch,
              std::chrono::steady_clock::time_point deadline);

 private:
  using Clock = std::chrono::steady_clock;

  /// The schedule of this rank in `group`; cached for the group of all ranks.
  const std::vector<BarrierStep>& schedule(const BarrierGroup& group, BarrierAlgorithm algorithm);
  /// Writes the next counter of `peer` into its slot (round, this rank).
  void signal(MultiChannel& channels, std::size_t round, std::uint32_t peer,
              Clock::time_point deadline);
  /// Spins until every rank of `senders` has signalled this round, polling the signals in flight.
  void await(std::size_t round, std::span<const std::uint32_t> senders, Clock::time_point deadline);
  /// Takes the completions of signals in flight; with `deadline`, waits for all of them.
  void reap(std::optional<Clock::time_point> deadline);
  /// The slot (round, sender), read as the device may be writing it.
  [[nodiscard]] std::uint64_t slot(std::size_t round, std::uint32_t sender) noexcept;
  /// With a control plane whose news changed: throws revoked when the Node is; else the failed
  /// rank this barrier cannot do without (one of `waiting`, or a crashed member), if any.
  std::optional<RankFailure> check_control(std::size_t round,
                                           std::span<const std::uint32_t> waiting);
  /// Fences `culprit` and throws peer_gone naming it.
  [[noreturn]] void fail_for(std::size_t round, const RankFailure& culprit);
  /// "dissemination barrier over all 4 ranks": the barrier being run, for messages.
  [[nodiscard]] std::string current() const;

  std::uint32_t rank_;
  std::uint32_t world_size_;
  std::uint32_t slot_world_;              // the world as built: the slots' layout
  std::vector<std::uint32_t> slot_rank_;  // [rank]: its rank as built, its slot's column
  WaitMode wait_;
  BarrierGroup all_ranks_;
  std::size_t max_rounds_;
  std::vector<std::uint64_t> slots_;     // [round * slot_world_ + slot rank], written by peers
  std::vector<std::uint64_t> outgoing_;  // [slot rank]: the counter being written to that peer
  MemoryRegion slots_mr_;
  MemoryRegion outgoing_mr_;
  std::vector<PeerRemoteMemoryRegion> peer_slots_;
  // [peer]: signals sent to and taken from that peer so far, in the low 48 bits; the epoch in
  // the top 16 (a later epoch's counters are larger than any earlier one's).
  std::vector<std::uint64_t> sent_;
  std::vector<std::uint64_t> received_;
  std::vector<std::optional<PendingWork>> in_flight_;  // [peer]: its last signal, until complete
  std::vector<std::uint32_t> in_flight_peers_;
  std::array<std::optional<std::vector<BarrierStep>>, 3> all_ranks_schedules_;
  std::vector<BarrierStep> subset_schedule_;
  // The barrier being run, for messages.
  const BarrierGroup* group_ = nullptr;
  BarrierAlgorithm algorithm_ = BarrierAlgorithm::dissemination;
  std::size_t rounds_ = 0;
  Duration timeout_{};
  MultiChannel* channels_ = nullptr;         // while run() runs: the queue pairs' retry budget
  ControlPlane* control_ = nullptr;          // while run() runs, on a fault-tolerant Node
  std::uint64_t control_seen_ = 0;           // the control plane's generation last looked at
  std::vector<RankFailure> known_failures_;  // as of that generation
  std::optional<std::string> poison_;
};

}  // namespace ibv::net::detail
