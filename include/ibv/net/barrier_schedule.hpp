// SPDX-License-Identifier: MIT
// Barrier message schedules: which participant signals which, in which round, for the three
// barrier algorithms of ibv::net (centralized, binary tree, dissemination). Pure logic, no RDMA.
//
// The model. A barrier over a BarrierGroup runs in numbered rounds 0, 1, ..., R-1, where
// R = round_count(algorithm, group.size()) is the same for every participant. In round r a
// participant first signals every rank of `steps[r].signal` (a Node RDMA-writes its epoch
// counter into the receiver's slot for (round r, sender)), then waits until every rank of
// `steps[r].wait_for` has signalled it in round r (spins on its own slots until each holds at
// least the current epoch), then goes on to round r + 1. After round R-1 it leaves the barrier.
// Where a participant has nothing to do in a round its step is empty, so all participants
// agree on round numbers and each (round, sender) slot is written by one sender only.
//
// The schedules are consistent: participant s lists t in `signal` of round r exactly when t
// lists s in `wait_for` of round r. Following them, no participant leaves before every
// participant has entered, and every wait is eventually satisfied (tests/unit/
// barrier_schedule_test.cpp checks both by simulation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace ibv::net {

/// How a barrier exchanges its signals. Round counts for a group of n participants (n = 1:
/// zero rounds for all three):
///   - centralized:   2 rounds (gather to the leader, then release from it).
///   - binary_tree:   2 * floor(log2 n) rounds (reduce up the tree level by level, then
///                    broadcast down it level by level).
///   - dissemination: ceil(log2 n) rounds.
enum class BarrierAlgorithm : std::uint8_t {
  /// The leader (the lowest rank of the group) collects a signal from everyone, then signals
  /// everyone. 2(n-1) signals, 2 rounds, but the leader handles n-1 signals in each round.
  centralized,
  /// A binary tree over group positions (the children of position i are 2i+1 and 2i+2): every
  /// participant waits for its children, signals its parent, waits for its parent, signals its
  /// children. 2(n-1) signals and at most 3 peers per participant.
  binary_tree,
  /// In round k the participant at position p signals position (p + 2^k) mod n and waits for
  /// position (p - 2^k) mod n. n * ceil(log2 n) signals, one sent and one received per round.
  dissemination,
};

/// Name of a BarrierAlgorithm: "centralized", "binary_tree" or "dissemination".
[[nodiscard]] std::string_view to_string(BarrierAlgorithm algorithm) noexcept;

/// The participants of a barrier: a sorted, duplicate-free, non-empty list of global ranks, each
/// below the world size. A participant is named by its global rank; its position is its index
/// in the list. Cheap to copy for small groups; immutable once built.
class BarrierGroup {
 public:
  /// Every rank of a world: 0, 1, ..., world_size - 1. Throws ibv::Error (invalid_argument)
  /// when world_size is 0 (test: `BarrierGroup.AllIsEveryRankOfTheWorld`).
  [[nodiscard]] static BarrierGroup all(std::uint32_t world_size);

  /// A subset of the world that includes the caller `me`. Throws ibv::Error (invalid_argument)
  /// naming the first problem: world_size 0, `ranks` empty, not in ascending order (naming the
  /// first out-of-order position), a rank listed twice (naming it), a rank not below
  /// world_size, or `me` not among `ranks` (tests: `BarrierGroup.SubsetRejectsAZeroWorld`,
  /// `BarrierGroup.SubsetRejectsAnEmptyList`, `BarrierGroup.SubsetNamesTheFirstOutOfOrderPosition`,
  /// `BarrierGroup.SubsetNamesADuplicate`, `BarrierGroup.SubsetNamesARankOutsideTheWorld`,
  /// `BarrierGroup.SubsetRejectsACallerThatIsNotIncluded`).
  [[nodiscard]] static BarrierGroup subset(std::vector<std::uint32_t> ranks, std::uint32_t me,
                                           std::uint32_t world_size);

  /// Number of participants (at least 1).
  [[nodiscard]] std::size_t size() const noexcept { return ranks_.size(); }
  /// Number of ranks in the world the group was taken from.
  [[nodiscard]] std::uint32_t world_size() const noexcept { return world_size_; }
  /// The participants' global ranks, in ascending order.
  [[nodiscard]] std::span<const std::uint32_t> ranks() const noexcept { return ranks_; }
  /// Global rank of the participant at `position`; throws ibv::Error (invalid_argument) when
  /// position >= size() (test: `BarrierGroup.PositionsAndRanks`).
  [[nodiscard]] std::uint32_t rank_at(std::size_t position) const;
  /// Whether `rank` takes part (O(log n)).
  [[nodiscard]] bool contains(std::uint32_t rank) const noexcept;
  /// Position (index in ranks()) of `rank` (O(log n)); throws ibv::Error (invalid_argument)
  /// when `rank` is not a participant (test: `BarrierGroup.PositionsAndRanks`).
  [[nodiscard]] std::size_t position_of(std::uint32_t rank) const;

  /// Same world size and same participants.
  friend bool operator==(const BarrierGroup&, const BarrierGroup&) = default;

 private:
  BarrierGroup(std::vector<std::uint32_t> ranks, std::uint32_t world_size) noexcept
      : ranks_(std::move(ranks)), world_size_(world_size) {}

  std::vector<std::uint32_t> ranks_;
  std::uint32_t world_size_;
};

/// What one participant does in one round: first signal (RDMA-write its epoch to) every rank in
/// `signal`, then wait until every rank in `wait_for` has signalled it in this round. Both hold
/// global ranks of group members, in ascending order, never the participant itself. Either or
/// both may be empty (the participant idles in this round).
struct BarrierStep {
  std::vector<std::uint32_t> signal;    ///< Ranks to signal, before waiting.
  std::vector<std::uint32_t> wait_for;  ///< Ranks whose signal of this round to wait for.

  friend bool operator==(const BarrierStep&, const BarrierStep&) = default;
};

/// The number of rounds of `algorithm` for a group of `group_size` participants; every
/// participant's schedule has exactly this many steps. 0 when group_size is 1; otherwise 2 for
/// centralized, 2 * floor(log2 group_size) for binary_tree, ceil(log2 group_size) for
/// dissemination. Throws ibv::Error (invalid_argument) when group_size is 0 or `algorithm` is not
/// one of the enumerators (test: `BarrierSchedule.RejectsAnUnknownAlgorithm`).
[[nodiscard]] std::size_t round_count(BarrierAlgorithm algorithm, std::size_t group_size);

/// The rounds participant `me` (a global rank) goes through in a barrier of `group` by
/// `algorithm`: round_count(algorithm, group.size()) steps, see BarrierAlgorithm for the
/// pattern. Throws ibv::Error (invalid_argument) when `me` is not in the group or `algorithm` is
/// not one of the enumerators (tests: `BarrierSchedule.RejectsACallerOutsideTheGroup`,
/// `BarrierSchedule.RejectsAnUnknownAlgorithm`).
[[nodiscard]] std::vector<BarrierStep> barrier_schedule(BarrierAlgorithm algorithm,
                                                        const BarrierGroup& group,
                                                        std::uint32_t me);

}  // namespace ibv::net
