// SPDX-License-Identifier: MIT
// FaultToleranceSettings' bound, and the names and texts of failures.
#include "ibv/net/fault_tolerance.hpp"

namespace ibv::net {

Duration FaultToleranceSettings::detection_bound() const noexcept {
  const auto interval = std::chrono::nanoseconds(probe_interval);
  return {interval + std::chrono::nanoseconds(retry_budget(probe_ack_timeout, probe_retries)) +
          interval / kReadsPerProbeInterval};
}

std::string_view to_string(FailureCause cause) noexcept {
  switch (cause) {
    case FailureCause::probe: return "probe";
    case FailureCause::completion: return "completion";
    case FailureCause::report: return "report";
    case FailureCause::left: return "left";
    case FailureCause::stalled: return "stalled";
  }
  return "unknown";
}

std::string RankFailure::to_string() const {
  std::string who = "rank " + std::to_string(rank);
  switch (cause) {
    case FailureCause::probe: return who + " (its probe went unanswered)";
    case FailureCause::completion: return who + " (work to it failed: it is gone)";
    case FailureCause::report:
      return who + " (reported failed by rank " + std::to_string(reported_by) + ")";
    case FailureCause::left: return who + " (it destroyed its Node)";
    case FailureCause::stalled: return who + " (its process stood still)";
  }
  return who;
}

}  // namespace ibv::net
