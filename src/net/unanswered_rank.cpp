// SPDX-License-Identifier: MIT
// The text of a rank that stopped acknowledging: see unanswered_rank.hpp.
#include "net/unanswered_rank.hpp"

#include <chrono>
#include <string>

#include "ibv/verbs/queue_pair_settings.hpp"

namespace ibv::net::detail {

std::string unanswered_rank_text(std::uint32_t rank, const QueuePairSettings& settings) {
  using std::chrono::milliseconds;
  const auto budget = std::chrono::round<milliseconds>(
      std::chrono::nanoseconds(retry_budget(settings.ack_timeout, settings.retry_count)));
  return "rank " + std::to_string(rank) + " gone, or too slow to answer within " +
         std::to_string(budget.count()) + " ms (ack_timeout " +
         std::to_string(settings.ack_timeout.exponent()) + " x (retry_count " +
         std::to_string(settings.retry_count.value()) +
         " + 1)); with every rank alive, more busy-polling processes than cores exhaust it: raise "
         "ack_timeout or retry_count, or let the ranks block (docs/safety.md, \"A live peer "
         "reported gone\")";
}

}  // namespace ibv::net::detail
