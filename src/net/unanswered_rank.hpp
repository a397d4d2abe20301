// SPDX-License-Identifier: MIT
// What the Node's collectives say of a rank that stopped acknowledging (retry_exceeded): it is
// gone, or alive but too slow to answer within the queue pairs' retry budget, with the budget in
// milliseconds and the remedy. One text for the barriers and the all-to-all.
#pragma once

#include <cstdint>
#include <string>

#include "ibv/verbs/queue_pair.hpp"

namespace ibv::net::detail {

/// "rank 3 gone, or too slow to answer within 470 ms (...)": `settings` are the queue pair's
/// to that rank, whose ack_timeout and retry_count make the budget.
[[nodiscard]] std::string unanswered_rank_text(std::uint32_t rank,
                                               const QueuePairSettings& settings);

}  // namespace ibv::net::detail
