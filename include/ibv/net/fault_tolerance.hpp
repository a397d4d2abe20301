// SPDX-License-Identifier: MIT
// What a Node knows about lost ranks, and how it learns it: the settings of its failure
// detector (NodeBuilder::fault_tolerance()), each failed rank with how it was detected, and a
// revocation. The story, with the failure model and the bounds: docs/fault-tolerance.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/duration.hpp"
#include "ibv/verbs/queue_pair_settings.hpp"

namespace ibv::net {

/// How a Node watches its peers (NodeBuilder::fault_tolerance()). Each rank probes the next
/// rank of a ring (the next rank it does not know to have failed) every `probe_interval` with
/// an 8-byte RDMA read over a control queue pair of its own, which the peer's device answers
/// without its process: a busy rank is not taken for a dead one. A read the peer does not
/// answer through all retries (`probe_ack_timeout`, `probe_retries`) declares it failed, and
/// the rank tells every other rank at once. A dead rank is named to every survivor within
/// detection_bound() of its death, whether or not anything is in flight to it.
struct FaultToleranceSettings {
  /// How often per probe interval the detector reads its control block (the reports and the
  /// revoke mark that peers wrote into it).
  static constexpr int kReadsPerProbeInterval = 4;

  /// How often each rank probes its ring successor. Costs one 8-byte read (two packets) per
  /// interval per rank, and a wake-up of the Node's detector thread.
  Duration probe_interval{std::chrono::milliseconds(20)};
  /// How long a probe waits for the peer's answer before it is sent again (the queue pair's
  /// ACK timeout: 4.096 us x 2^value; 12 is about 16.8 ms).
  AckTimeout probe_ack_timeout{12};
  /// How often a probe is sent again before the peer is declared failed. At most 6: Soft-RoCE
  /// takes 7 as "retry forever".
  RetryCount probe_retries{3};
  /// How long a rank's process may stop (SIGSTOP, a debugger, a hung machine whose device still
  /// answers) before its predecessor declares it failed: every rank's detector counts a
  /// heartbeat in its control block, which the probes read. Positive. A busy process is not a
  /// stopped one: the detector is a thread of its own.
  Duration stall_timeout{std::chrono::seconds(2)};
  /// Whether Node::shrink() refuses to make a Node of half the ranks or fewer: it throws
  /// ibv::Error (state) then, and the Node is left as it was (test:
  /// `FaultToleranceKill.AStoppedRankIsDeclaredFailedAndFencedItsLateWriteLandsNowhere`). A rank
  /// cut off from the others, or declared failed by them while it still runs, sees every other rank
  /// fail; with this it cannot go on alone while they go on without it (the price: when exactly
  /// half survive, neither half goes on). Set it the same on every rank. Off by default.
  bool survivors_need_a_majority = false;

  /// The longest a dead rank goes unnamed, from its death to every survivor knowing: one
  /// probe interval, a probe's whole retry budget, and a quarter interval until each survivor
  /// reads the report (a write's latency, microseconds, comes on top). About 92 ms with the
  /// defaults.
  [[nodiscard]] Duration detection_bound() const noexcept;
};

/// How a rank learned that another one failed.
enum class FailureCause : std::uint8_t {
  probe,       ///< Its probe of the rank, its ring successor, went unanswered.
  completion,  ///< Work to the rank failed with a completion that says it is gone.
  report,      ///< Another rank reported it failed.
  left,        ///< The rank destroyed its Node (a clean exit, not a crash).
  stalled,     ///< Its device answered, but its process's heartbeat stood still for the
               ///< stall timeout (the process stopped).
};

/// Name of a FailureCause, e.g. "probe".
[[nodiscard]] std::string_view to_string(FailureCause cause) noexcept;

/// One rank a Node knows to be out of it for good (fail-stop: even a rank that was only slow
/// is never taken back).
struct RankFailure {
  std::uint32_t rank = 0;                       ///< The rank that failed.
  FailureCause cause = FailureCause::probe;     ///< How this rank learned it.
  std::uint32_t reported_by = 0;                ///< With FailureCause::report: who said so.
  std::chrono::steady_clock::time_point known;  ///< When this rank learned it.

  /// "rank 3 (its probe went unanswered)", "rank 3 (reported failed by rank 1)", ...
  [[nodiscard]] std::string to_string() const;
};

/// What the surviving ranks agreed on (Node::agree()): the same on every rank that returns.
struct AgreedValue {
  std::uint32_t flags = 0;            ///< The bitwise AND of every contribution's flags.
  std::vector<std::uint32_t> failed;  ///< The union of the failures the ranks knew, by rank.

  friend bool operator==(const AgreedValue&, const AgreedValue&) = default;
};

}  // namespace ibv::net
