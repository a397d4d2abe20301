// SPDX-License-Identifier: MIT
// Tests ibv::net::Rendezvous, the TCP star bootstrap, with every rank a thread of this process on
// loopback: the three collectives at several world sizes and repeated, a root that comes up
// late, and every failure a bootstrap must report (a rank that leaves during the bootstrap, a rank
// that never comes, a root that never comes up, a rank with another world size, ranks that call
// different collectives, a duplicate rank), each checked on every rank for an error that names
// the culprit within the timeout. Also RootAddress::parse.
#include "ibv/net/rendezvous.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/error.hpp"
#include "ibv/net/bootstrap.hpp"
#include "loopback_exchange.hpp"
#include "support/error_matchers.hpp"

// A named namespace inside the anonymous one: in a unity build (several test files in one
// translation unit) its helpers can not collide with another file's.
namespace {
namespace rendezvous_tests {

using namespace std::chrono_literals;
using ibv::ErrorKind;
using ibv::net::Rendezvous;
using ibv::net::RendezvousOptions;
using ibv::net::RootAddress;
using ibv_test::throws_error;
using ibv_test::throws_invalid_argument;
using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;

constexpr auto kTimeout = 3000ms;

RendezvousOptions options() {
  return {.timeout = kTimeout, .retry_interval = 20ms, .listen_address = "127.0.0.1"};
}

RootAddress free_root() {
  return {.host = "127.0.0.1", .port = ibv_test::loopback::free_ports(1)[0]};
}

Bytes bytes_of(const std::string& text) {
  Bytes bytes;
  for (const char c : text) bytes.push_back(static_cast<std::byte>(c));
  return bytes;
}

// What one rank's thread did: the error it threw (if any), when, and what it recorded.
struct Outcome {
  std::optional<ibv::Error> error;
  std::string other_exception;
  Clock::duration took{};
  std::vector<std::vector<Bytes>> results;
};

// Runs body(rank, results) for every rank in its own thread and joins them all; the body's
// ibv::Error (or any other exception) is recorded, never thrown across the join.
std::vector<Outcome> run_ranks(
    std::uint32_t world,
    const std::function<void(std::uint32_t, std::vector<std::vector<Bytes>>&)>& body) {
  std::vector<Outcome> outcomes(world);
  std::vector<std::thread> threads;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      const auto start = Clock::now();
      try {
        body(rank, outcomes[rank].results);
      } catch (const ibv::Error& error) {
        outcomes[rank].error = error;
      } catch (const std::exception& error) {
        outcomes[rank].other_exception = error.what();
      }
      outcomes[rank].took = Clock::now() - start;
    });
  }
  for (std::thread& thread : threads) thread.join();
  return outcomes;
}

// Every rank in `ranks` failed with an error of `kind` mentioning `mention`, within the timeout
// plus the members' grace and a margin.
void expect_failed(const std::vector<Outcome>& outcomes, const std::vector<std::uint32_t>& ranks,
                   ErrorKind kind, const std::string& mention) {
  for (const std::uint32_t rank : ranks) {
    const Outcome& outcome = outcomes[rank];
    EXPECT_EQ(outcome.other_exception, "") << "rank " << rank;
    ASSERT_TRUE(outcome.error.has_value()) << "rank " << rank << " did not fail";
    EXPECT_EQ(outcome.error->kind(), kind) << "rank " << rank << ": " << outcome.error->what();
    EXPECT_NE(std::string(outcome.error->what()).find(mention), std::string::npos)
        << "rank " << rank << ": " << outcome.error->what();
    EXPECT_LT(outcome.took, kTimeout + 2s + 1500ms) << "rank " << rank;
  }
}

class RendezvousWorld : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(RendezvousWorld, AllGatherAllToAllAndBarrierGiveEveryRankItsEntriesThreeTimesOver) {
  const std::uint32_t world = GetParam();
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(world, [&](std::uint32_t rank, auto& results) {
    Rendezvous bootstrap(root, rank, world, options());
    for (int round = 0; round < 3; ++round) {
      results.push_back(bootstrap.all_gather_bytes(
          bytes_of("r" + std::to_string(rank) + "." + std::to_string(round))));
      std::vector<Bytes> to_peer;
      for (std::uint32_t peer = 0; peer < world; ++peer) {
        to_peer.push_back(bytes_of(std::to_string(rank) + "->" + std::to_string(peer)));
      }
      results.push_back(bootstrap.all_to_all_bytes(to_peer));
      bootstrap.barrier();
    }
  });
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    const Outcome& outcome = outcomes[rank];
    ASSERT_FALSE(outcome.error.has_value()) << "rank " << rank << ": " << outcome.error->what();
    ASSERT_EQ(outcome.other_exception, "");
    ASSERT_EQ(outcome.results.size(), 6U);
    for (std::size_t round = 0; round < 3; ++round) {
      const auto& gathered = outcome.results[2 * round];
      const auto& personal = outcome.results[2 * round + 1];
      ASSERT_EQ(gathered.size(), world);
      ASSERT_EQ(personal.size(), world);
      for (std::uint32_t peer = 0; peer < world; ++peer) {
        EXPECT_EQ(gathered[peer],
                  bytes_of("r" + std::to_string(peer) + "." + std::to_string(round)))
            << "rank " << rank << " round " << round;
        EXPECT_EQ(personal[peer], bytes_of(std::to_string(peer) + "->" + std::to_string(rank)))
            << "rank " << rank << " round " << round;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, RendezvousWorld, ::testing::Values(1U, 2U, 5U, 16U));

TEST(Rendezvous, TypedAllGatherAndAllToAllDecodeEveryEntry) {
  const RootAddress root = free_root();
  std::vector<std::vector<std::uint64_t>> gathered(3);
  std::vector<std::vector<std::uint64_t>> personal(3);
  const auto outcomes = run_ranks(3, [&](std::uint32_t rank, auto&) {
    Rendezvous bootstrap(root, rank, 3, options());
    ibv::net::Bootstrap& any = bootstrap;
    gathered[rank] = any.all_gather<std::uint64_t>(100 + rank);
    const std::uint64_t base = std::uint64_t{10} * rank;
    const std::vector<std::uint64_t> to_peer{base, base + 1, base + 2};
    personal[rank] = any.all_to_all<std::uint64_t>(to_peer);
  });
  for (std::uint32_t rank = 0; rank < 3; ++rank) {
    ASSERT_FALSE(outcomes[rank].error.has_value()) << outcomes[rank].error->what();
    EXPECT_EQ(gathered[rank], (std::vector<std::uint64_t>{100, 101, 102}));
    EXPECT_EQ(personal[rank], (std::vector<std::uint64_t>{rank, 10 + rank, 20 + rank}));
  }
}

TEST(Rendezvous, MembersWaitForARootThatStartsLate) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(4, [&](std::uint32_t rank, auto& results) {
    if (rank == 0) std::this_thread::sleep_for(500ms);  // the others dial a closed port first
    Rendezvous bootstrap(root, rank, 4, options());
    results.push_back(bootstrap.all_gather_bytes(bytes_of(std::to_string(rank))));
  });
  for (std::uint32_t rank = 0; rank < 4; ++rank) {
    ASSERT_FALSE(outcomes[rank].error.has_value()) << outcomes[rank].error->what();
    ASSERT_EQ(outcomes[rank].results.size(), 1U);
    EXPECT_EQ(outcomes[rank].results[0][3], bytes_of("3"));
  }
}

TEST(Rendezvous, ARankThatLeavesDuringTheBootstrapIsNamedOnEveryOtherRank) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(4, [&](std::uint32_t rank, auto&) {
    Rendezvous bootstrap(root, rank, 4, options());
    bootstrap.barrier();
    if (rank == 2) return;  // exits: its connection closes while the others wait for it
    (void)bootstrap.all_gather_bytes(bytes_of("x"));
  });
  EXPECT_FALSE(outcomes[2].error.has_value());
  expect_failed(outcomes, {0, 1, 3}, ErrorKind::peer_gone, "rank 2");
  // Promptly: the close is seen at once, not at the deadline.
  for (const std::uint32_t rank : {0U, 1U, 3U}) EXPECT_LT(outcomes[rank].took, 1500ms);
}

TEST(Rendezvous, ARankThatNeverComesIsNamedOnEveryOtherRankAtTheTimeout) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(4, [&](std::uint32_t rank, auto&) {
    if (rank == 3) return;  // never started
    Rendezvous bootstrap(root, rank, 4, options());
    (void)bootstrap.all_gather_bytes(bytes_of("x"));
  });
  expect_failed(outcomes, {0, 1, 2}, ErrorKind::timeout, "rank 3 never connected");
}

TEST(Rendezvous, ARootThatNeverComesUpIsATimeoutNamingItsAddress) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(3, [&](std::uint32_t rank, auto&) {
    if (rank == 0) return;
    Rendezvous bootstrap(root, rank, 3, options());
    bootstrap.barrier();
  });
  expect_failed(outcomes, {1, 2}, ErrorKind::timeout,
                "the root (rank 0 at " + root.to_string() + ") refused the connection");
  for (const std::uint32_t rank : {1U, 2U}) EXPECT_LT(outcomes[rank].took, kTimeout + 1s);
}

TEST(Rendezvous, ARankWithAnotherWorldSizeFailsEveryRank) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(3, [&](std::uint32_t rank, auto&) {
    // Whenever rank 2 comes, the root tells every rank why it failed: also those that reach
    // it after the failure (it keeps its port open until each has been told).
    Rendezvous bootstrap(root, rank, rank == 2 ? 4 : 3, options());
    bootstrap.barrier();
  });
  expect_failed(outcomes, {0, 1}, ErrorKind::protocol, "has a world size of 4 but ours is 3");
  // Rank 2 hears it from the root, whose header says 3.
  expect_failed(outcomes, {2}, ErrorKind::protocol, "world size");
}

TEST(Rendezvous, ARankThatReachesTheRootAfterItFailedIsToldWhy) {
  const RootAddress root = free_root();
  std::promise<void> rank2_ended;
  const std::shared_future<void> rank2_failed = rank2_ended.get_future().share();
  const auto outcomes = run_ranks(3, [&](std::uint32_t rank, auto&) {
    if (rank == 2) {  // another world size: the root fails on its hello
      const auto signal = std::unique_ptr<std::promise<void>, void (*)(std::promise<void>*)>(
          &rank2_ended, [](std::promise<void>* ended) { ended->set_value(); });
      Rendezvous bootstrap(root, 2, 4, options());
      bootstrap.barrier();
      return;
    }
    if (rank == 1 && rank2_failed.wait_for(kTimeout) != std::future_status::ready) {
      throw std::runtime_error("rank 2 did not end");
    }
    Rendezvous bootstrap(root, rank, 3, options());
    bootstrap.barrier();
  });
  // Rank 1 came after the root had failed, and heard its reason, not a closed port.
  expect_failed(outcomes, {0, 1}, ErrorKind::protocol, "has a world size of 4 but ours is 3");
  expect_failed(outcomes, {2}, ErrorKind::protocol, "world size");
}

TEST(Rendezvous, RanksThatCallDifferentCollectivesFailWithBothNamed) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(3, [&](std::uint32_t rank, auto&) {
    Rendezvous bootstrap(root, rank, 3, options());
    bootstrap.barrier();  // everyone has reached the root before it fails
    if (rank == 1) {
      bootstrap.barrier();
    } else {
      (void)bootstrap.all_gather_bytes(bytes_of("x"));
    }
  });
  expect_failed(outcomes, {0, 1, 2}, ErrorKind::protocol, "rank 1 (connected from 127.0.0.1:");
  EXPECT_NE(std::string(outcomes[2].error->what())
                .find("called barrier where the root called "
                      "all_gather"),
            std::string::npos)
      << outcomes[2].error->what();
}

TEST(Rendezvous, ADuplicateRankFailsTheJob) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(3, [&](std::uint32_t rank, auto&) {
    Rendezvous bootstrap(root, rank == 2 ? 1 : rank, 3, options());
    bootstrap.barrier();
  });
  expect_failed(outcomes, {0, 1, 2}, ErrorKind::protocol, "a duplicate rank");
}

TEST(Rendezvous, AFailureLeavesItUnusableAndSaysWhy) {
  const RootAddress root = free_root();
  const auto outcomes = run_ranks(2, [&](std::uint32_t rank, auto&) {
    if (rank == 0) return;
    Rendezvous bootstrap(root, rank, 2,
                         {.timeout = 200ms, .retry_interval = 20ms, .listen_address = ""});
    EXPECT_TRUE(throws_error(ErrorKind::timeout, [&] { bootstrap.barrier(); }));
    EXPECT_TRUE(throws_error(ErrorKind::state, [&] { bootstrap.barrier(); },
                             {"an earlier collective failed", "timed out"}));
  });
  EXPECT_FALSE(outcomes[1].error.has_value());
}

TEST(Rendezvous, TooLargeAContributionIsRefusedBeforeAnythingIsSent) {
  const RootAddress root = free_root();
  RendezvousOptions small = options();
  small.max_message_size = 8;
  const auto outcomes = run_ranks(2, [&](std::uint32_t rank, auto& results) {
    Rendezvous bootstrap(root, rank, 2, small);
    if (rank == 1) {
      EXPECT_TRUE(throws_invalid_argument([&] { (void)bootstrap.all_gather_bytes(Bytes(9)); },
                                          {"9 bytes", "max_message_size"}));
      EXPECT_TRUE(throws_invalid_argument(
          [&] {
            (void)bootstrap.all_to_all_bytes(std::vector<Bytes>{Bytes(5), Bytes(5)});
          },
          {"10 bytes"}));
      EXPECT_TRUE(throws_invalid_argument(
          [&] { (void)bootstrap.all_to_all_bytes(std::vector<Bytes>(3)); }, {"one per rank"}));
    }
    results.push_back(bootstrap.all_gather_bytes(Bytes(8)));  // still usable
  });
  for (const Outcome& outcome : outcomes) {
    ASSERT_FALSE(outcome.error.has_value()) << outcome.error->what();
    ASSERT_EQ(outcome.results.size(), 1U);
  }
}

TEST(Rendezvous, BadArgumentsAreRefusedAtConstruction) {
  const RootAddress root{.host = "127.0.0.1", .port = 1};
  EXPECT_TRUE(throws_invalid_argument([&] { Rendezvous(root, 0, 0); }, {"world_size 0"}));
  EXPECT_TRUE(throws_invalid_argument([&] { Rendezvous(root, 3, 3); }, {"rank 3"}));
  EXPECT_TRUE(throws_invalid_argument([&] { Rendezvous({.host = "h", .port = 0}, 1, 2); },
                                      {"root.port 0"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { Rendezvous({.host = "", .port = 5}, 1, 2); }, {"root.host"}));
  EXPECT_TRUE(throws_invalid_argument([&] { Rendezvous(root, 1, 2, {.timeout = 0ms}); },
                                      {"options.timeout"}));
  EXPECT_TRUE(throws_invalid_argument([&] { Rendezvous(root, 1, 2, {.max_message_size = 0}); },
                                      {"max_message_size"}));
}

TEST(Rendezvous, TheRootsPortInUseIsAResourceErrorNamingIt) {
  const RootAddress root = free_root();
  const Rendezvous first(root, 0, 2, options());
  EXPECT_TRUE(throws_error(ErrorKind::resource, [&] { Rendezvous(root, 0, 2, options()); },
                           {"port " + std::to_string(root.port), "is in use"}));
}

TEST(Rendezvous, MovedFromIsAStateError) {
  const RootAddress root = free_root();
  Rendezvous first(root, 0, 2, options());
  const Rendezvous second(std::move(first));
  // The moved-from object's one allowed use besides destruction is this error.
  // NOLINTNEXTLINE(bugprone-use-after-move)
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { first.barrier(); }, {"moved from"}));
  EXPECT_EQ(second.description(), "TCP rendezvous at " + root.to_string() + " (rank 0 of 2)");
}

TEST(RootAddressParse, AcceptsHostPortAndBracketedIpv6) {
  EXPECT_EQ(RootAddress::parse("node01:18515"), (RootAddress{.host = "node01", .port = 18515}));
  EXPECT_EQ(RootAddress::parse("10.0.0.1:1"), (RootAddress{.host = "10.0.0.1", .port = 1}));
  EXPECT_EQ(RootAddress::parse("[fe80::1]:65535"), (RootAddress{.host = "fe80::1", .port = 65535}));
  EXPECT_EQ(RootAddress::parse("[fe80::1]:80").to_string(), "[fe80::1]:80");
}

TEST(RootAddressParse, RefusesEverythingElseQuotingItBriefly) {
  for (const std::string_view bad :
       {"", "node01", "node01:", ":18515", "node01:0", "node01:65536", "node01:18x", "node01:-1",
        "fe80::1:80", "[fe80::1:80", "[fe80::1]80", "[]:80"}) {
    EXPECT_TRUE(throws_invalid_argument([&] { (void)RootAddress::parse(bad); }, {"host:port"}))
        << bad;
  }
  const std::string huge(100000, 'x');
  const auto error = ibv_test::error_of([&] { (void)RootAddress::parse(huge); });
  ASSERT_TRUE(error.has_value());
  EXPECT_LT(std::string(error->what()).size(), 400U) << error->what();
}

}  // namespace rendezvous_tests
}  // namespace
