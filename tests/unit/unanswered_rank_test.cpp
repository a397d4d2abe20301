// SPDX-License-Identifier: MIT
// Tests what the barriers and the all-to-all say of a rank that stopped acknowledging: gone, or
// too slow to answer within the queue pairs' retry budget, in milliseconds, with the remedy.
#include "net/unanswered_rank.hpp"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ibv/verbs/queue_pair.hpp"

namespace {

using ::testing::HasSubstr;

TEST(UnansweredRank, NamesTheRankAndTheDefaultBudgetInMilliseconds) {
  const std::string text = ibv::net::detail::unanswered_rank_text(3, ibv::QueuePairSettings{});
  EXPECT_THAT(text, HasSubstr("rank 3 gone, or too slow to answer within 470 ms"));
  EXPECT_THAT(text, HasSubstr("ack_timeout 14 x (retry_count 6 + 1)"));
}

TEST(UnansweredRank, FollowsTheQueuePairsSettingsAndPointsToTheRemedy) {
  ibv::QueuePairSettings settings;
  settings.ack_timeout = ibv::AckTimeout(18);  // 1.07 s
  settings.retry_count = ibv::RetryCount(3);
  const std::string text = ibv::net::detail::unanswered_rank_text(7, settings);
  EXPECT_THAT(text, HasSubstr("rank 7 gone, or too slow to answer within 4295 ms"));
  EXPECT_THAT(text, HasSubstr("raise ack_timeout or retry_count"));
  EXPECT_THAT(text, HasSubstr("docs/safety.md"));
}

}  // namespace
