// SPDX-License-Identifier: MIT
// Barrier schedules: BarrierGroup validation and the per-round signal/wait lists of the
// centralized, binary-tree and dissemination barriers.
#include "ibv/net/barrier_schedule.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibv/error.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kSubset = "BarrierGroup::subset";

std::string at(std::size_t position) { return "ranks[" + std::to_string(position) + "]"; }

// ceil(log2 n) and floor(log2 n) for n >= 1.
std::size_t ceil_log2(std::size_t n) { return static_cast<std::size_t>(std::bit_width(n - 1)); }
std::size_t floor_log2(std::size_t n) { return static_cast<std::size_t>(std::bit_width(n)) - 1; }

// Leader at position 0. Round 0 (gather): everyone else signals the leader, the leader waits
// for them all. Round 1 (release): the leader signals everyone else, who wait for it.
std::vector<BarrierStep> centralized(const BarrierGroup& group, std::size_t position) {
  std::vector<BarrierStep> steps(2);
  const std::uint32_t leader = group.rank_at(0);
  if (position == 0) {
    const auto others = group.ranks().subspan(1);
    steps[0].wait_for.assign(others.begin(), others.end());
    steps[1].signal.assign(others.begin(), others.end());
  } else {
    steps[0].signal.push_back(leader);
    steps[1].wait_for.push_back(leader);
  }
  return steps;
}

// Heap-shaped tree over positions: parent (p-1)/2, children 2p+1 and 2p+2, depth
// d = floor(log2(p+1)), height h = floor(log2 n). Reduce rounds 0..h-1: in round r the nodes at
// depth h-r signal their parents and those at depth h-r-1 wait for their children. Broadcast
// rounds h..2h-1: in round h+d the nodes at depth d signal their children, who wait for them.
// So a node of depth d waits for its children in round h-d-1, signals its parent in round h-d,
// waits for its parent in round h+d-1 and signals its children in round h+d.
std::vector<BarrierStep> binary_tree(const BarrierGroup& group, std::size_t position) {
  const std::size_t n = group.size();
  const std::size_t height = floor_log2(n);
  const std::size_t depth = floor_log2(position + 1);
  std::vector<BarrierStep> steps(2 * height);
  if (position > 0) {
    const std::uint32_t parent = group.rank_at((position - 1) / 2);
    steps[height - depth].signal.push_back(parent);
    steps[height + depth - 1].wait_for.push_back(parent);
  }
  std::vector<std::uint32_t> children;
  for (const std::size_t child : {(2 * position) + 1, (2 * position) + 2}) {
    if (child < n) children.push_back(group.rank_at(child));
  }
  if (!children.empty()) {  // then depth < height
    steps[height - depth - 1].wait_for = children;
    steps[height + depth].signal = std::move(children);
  }
  return steps;
}

// Round k: position p signals (p + 2^k) mod n and waits for (p - 2^k) mod n. 2^k < n in every
// round, so nobody signals itself.
std::vector<BarrierStep> dissemination(const BarrierGroup& group, std::size_t position) {
  const std::size_t n = group.size();
  std::vector<BarrierStep> steps(ceil_log2(n));
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const std::size_t distance = std::size_t{1} << k;
    steps[k].signal.push_back(group.rank_at((position + distance) % n));
    steps[k].wait_for.push_back(group.rank_at((position + n - distance) % n));
  }
  return steps;
}

void check_algorithm(std::string_view operation, BarrierAlgorithm algorithm) {
  switch (algorithm) {
    case BarrierAlgorithm::centralized:
    case BarrierAlgorithm::binary_tree:
    case BarrierAlgorithm::dissemination: return;
  }
  throw_invalid_argument(
      operation, "algorithm",
      "is not a BarrierAlgorithm (value " + std::to_string(static_cast<int>(algorithm)) + ")");
}

}  // namespace

std::string_view to_string(BarrierAlgorithm algorithm) noexcept {
  switch (algorithm) {
    case BarrierAlgorithm::centralized: return "centralized";
    case BarrierAlgorithm::binary_tree: return "binary_tree";
    case BarrierAlgorithm::dissemination: return "dissemination";
  }
  return "unknown";
}

BarrierGroup BarrierGroup::all(std::uint32_t world_size) {
  if (world_size == 0) {
    throw_invalid_argument("BarrierGroup::all", "world_size",
                           "is 0; a world has at least one rank");
  }
  std::vector<std::uint32_t> ranks(world_size);
  for (std::uint32_t rank = 0; rank < world_size; ++rank) ranks[rank] = rank;
  return {std::move(ranks), world_size};
}

BarrierGroup BarrierGroup::subset(std::vector<std::uint32_t> ranks, std::uint32_t me,
                                  std::uint32_t world_size) {
  if (world_size == 0) {
    throw_invalid_argument(kSubset, "world_size", "is 0; a world has at least one rank");
  }
  if (ranks.empty()) {
    throw_invalid_argument(kSubset, "ranks",
                           "is empty; a barrier group has at least the calling rank");
  }
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0 && ranks[i] == ranks[i - 1]) {
      throw_invalid_argument(kSubset, "ranks",
                             "lists rank " + std::to_string(ranks[i]) + " twice (" + at(i - 1) +
                                 " and " + at(i) + "); each rank may take part once");
    }
    if (i > 0 && ranks[i] < ranks[i - 1]) {
      throw_invalid_argument(kSubset, "ranks",
                             "is not in ascending order: " + at(i) + " = " +
                                 std::to_string(ranks[i]) + " follows " + at(i - 1) + " = " +
                                 std::to_string(ranks[i - 1]) + "; sort the ranks");
    }
    if (ranks[i] >= world_size) {
      throw_invalid_argument(kSubset, "ranks",
                             "contains rank " + std::to_string(ranks[i]) + " (" + at(i) +
                                 "), outside the world of " + std::to_string(world_size) +
                                 " ranks (0.." + std::to_string(world_size - 1) + ")");
    }
  }
  if (!std::binary_search(ranks.begin(), ranks.end(), me)) {
    throw_invalid_argument(kSubset, "me",
                           "(rank " + std::to_string(me) +
                               ") is not in ranks; the calling rank must take part in the "
                               "barriers it synchronizes");
  }
  return {std::move(ranks), world_size};
}

std::uint32_t BarrierGroup::rank_at(std::size_t position) const {
  if (position >= ranks_.size()) {
    throw_invalid_argument(
        "BarrierGroup::rank_at", "position",
        std::to_string(position) + " is not below the group size " + std::to_string(ranks_.size()));
  }
  return ranks_[position];
}

bool BarrierGroup::contains(std::uint32_t rank) const noexcept {
  return std::binary_search(ranks_.begin(), ranks_.end(), rank);
}

std::size_t BarrierGroup::position_of(std::uint32_t rank) const {
  const auto found = std::lower_bound(ranks_.begin(), ranks_.end(), rank);
  if (found == ranks_.end() || *found != rank) {
    throw_invalid_argument("BarrierGroup::position_of", "rank",
                           std::to_string(rank) + " is not a member of the barrier group");
  }
  return static_cast<std::size_t>(found - ranks_.begin());
}

std::size_t round_count(BarrierAlgorithm algorithm, std::size_t group_size) {
  check_algorithm("round_count", algorithm);
  if (group_size == 0) {
    throw_invalid_argument("round_count", "group_size", "is 0; a barrier group has a member");
  }
  if (group_size == 1) return 0;
  if (algorithm == BarrierAlgorithm::centralized) return 2;
  if (algorithm == BarrierAlgorithm::binary_tree) return 2 * floor_log2(group_size);
  return ceil_log2(group_size);
}

std::vector<BarrierStep> barrier_schedule(BarrierAlgorithm algorithm, const BarrierGroup& group,
                                          std::uint32_t me) {
  check_algorithm("barrier_schedule", algorithm);
  if (!group.contains(me)) {
    throw_invalid_argument("barrier_schedule", "me",
                           "(rank " + std::to_string(me) + ") is not a member of the group");
  }
  const std::size_t position = group.position_of(me);
  if (group.size() == 1) return {};
  if (algorithm == BarrierAlgorithm::centralized) return centralized(group, position);
  if (algorithm == BarrierAlgorithm::binary_tree) return binary_tree(group, position);
  return dissemination(group, position);
}

}  // namespace ibv::net
