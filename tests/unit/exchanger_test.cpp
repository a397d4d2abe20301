// SPDX-License-Identifier: MIT
// Tests ibv::net::Exchanger over loopback TCP, with the ranks as threads of this process: world
// sizes 1 to 8, successive exchanges on the same connections, large payloads both ways at once,
// ranks that start late or never, peers that close, hostile raw clients and acceptors, the
// construction errors, and that an Exchanger that failed stays failed.
#include "ibv/net/exchanger.hpp"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/net/exchange_message.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "loopback_exchange.hpp"
#include "support/error_matchers.hpp"

namespace {

using namespace std::chrono_literals;
using ibv::ErrorKind;
using ibv::net::Exchanger;
using ibv::net::ExchangerOptions;
using ibv::net::MessageHeader;
using ibv::net::MessageKind;
using ibv::net::NetworkConfig;
using ibv_test::throws_error;
using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace ibv_test::loopback;

std::string port_of(const NetworkConfig& config, std::uint32_t rank) {
  return std::to_string(config.host(rank).port);
}

std::string address_of(const NetworkConfig& config, std::uint32_t rank) {
  return "127.0.0.1:" + port_of(config, rank);
}

// How one rank's work ended.
struct Outcome {
  std::optional<ibv::Error> error;
  std::string other;  // what() of an exception that is not an ibv::Error
  milliseconds elapsed{};
};

// Runs body(rank) on one thread per rank and waits for all of them.
std::vector<Outcome> run_ranks(std::size_t world, const std::function<void(std::uint32_t)>& body) {
  std::vector<Outcome> outcomes(world);
  std::vector<std::jthread> threads;  // joined even if starting a later one throws
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    threads.emplace_back([&outcomes, &body, rank] {
      const auto start = Clock::now();
      try {
        body(rank);
      } catch (const ibv::Error& error) {
        outcomes[rank].error = error;
      } catch (const std::exception& error) {
        outcomes[rank].other = error.what();
      }
      outcomes[rank].elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    });
  }
  for (std::jthread& thread : threads) thread.join();
  return outcomes;
}

void expect_all_succeeded(const std::vector<Outcome>& outcomes) {
  for (std::size_t rank = 0; rank < outcomes.size(); ++rank) {
    EXPECT_FALSE(outcomes[rank].error.has_value())
        << "rank " << rank << ": " << outcomes[rank].error->what();
    EXPECT_TRUE(outcomes[rank].other.empty()) << "rank " << rank << ": " << outcomes[rank].other;
  }
}

::testing::AssertionResult has_error(const Outcome& outcome, ErrorKind kind,
                                     std::initializer_list<std::string_view> mentions) {
  if (!outcome.other.empty()) {
    return ::testing::AssertionFailure() << "threw a non-ibv::Error: " << outcome.other;
  }
  const std::optional<ibv::Error> error = outcome.error;
  return throws_error(
      kind,
      [&error] {
        if (error) throw ibv::Error(*error);
      },
      mentions);
}

ibv::Endpoint endpoint_of(std::uint32_t rank) {
  ibv::Endpoint endpoint;
  endpoint.qp_number = 0x1000 + rank;
  endpoint.lid = static_cast<std::uint16_t>(rank + 1);
  endpoint.gid = ibv::Gid::from_string("fe80::" + std::to_string(rank + 1));
  endpoint.psn = 0x5000 + rank;
  return endpoint;
}

Bytes pattern(std::size_t size, std::uint32_t rank) {
  Bytes bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 7 + rank) & 0xffU);
  return bytes;
}

// Waits until `count` threads arrived (or 10 s passed, so a failing rank can not hang the test).
class Rendezvous {
 public:
  explicit Rendezvous(std::size_t count) : count_(count) {}
  bool arrive_and_wait() {
    std::unique_lock lock(mutex_);
    const std::size_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return true;
    }
    return changed_.wait_for(lock, 10s, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t count_;
  std::size_t arrived_ = 0;
  std::size_t generation_ = 0;
};

// --- construction ------------------------------------------------------------------------------

TEST(Exchanger, RejectsARankOutsideTheConfiguration) {
  const NetworkConfig config = loopback_network(3);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { Exchanger exchanger(config, 3, test_options()); },
                           {"Exchanger::Exchanger", "rank 3", "3 ranks (0..2)"}));
}

TEST(Exchanger, RejectsInvalidOptions) {
  const NetworkConfig config = loopback_network(2);
  ExchangerOptions options = test_options();
  options.timeout = 0ms;
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { Exchanger exchanger(config, 0, options); },
                           {"options.timeout 0 ms", "not positive"}));
  options = test_options();
  options.retry_interval = -5ms;
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { Exchanger exchanger(config, 0, options); },
                           {"options.retry_interval -5 ms"}));
  for (const std::size_t size : {std::size_t{0}, std::size_t{1} << 32U}) {
    options = test_options();
    options.max_message_size = size;
    EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                             [&] { Exchanger exchanger(config, 0, options); },
                             {"options.max_message_size " + std::to_string(size)}));
  }
}

TEST(Exchanger, APortInUseIsReportedWithThePort) {
  const NetworkConfig config = loopback_network(2);
  const Exchanger first(config, 1, test_options());
  const auto error = ibv_test::error_of([&] { Exchanger second(config, 1, test_options()); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ErrorKind::resource) << error->what();
  EXPECT_EQ(error->errno_value(), EADDRINUSE);
  const std::string what = error->what();
  for (const std::string& part :
       {"port " + port_of(config, 1), std::string("is in use"), std::string("previous run")}) {
    EXPECT_NE(what.find(part), std::string::npos) << part << " not in: " << what;
  }
  // The default wildcard listener collides with it as well.
  ExchangerOptions wildcard = test_options();
  wildcard.listen_address.clear();
  EXPECT_TRUE(throws_error(ErrorKind::resource, [&] { Exchanger third(config, 1, wildcard); },
                           {"port " + port_of(config, 1)}));
}

TEST(Exchanger, AListenAddressOfAnotherHostIsRejected) {
  const NetworkConfig config = loopback_network(2);
  ExchangerOptions options = test_options();
  options.listen_address = "192.0.2.1";  // TEST-NET-1: never an address of this machine
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { Exchanger exchanger(config, 0, options); },
                           {"192.0.2.1", "not an address of this host"}));
}

TEST(Exchanger, KnowsItsRankWorldAndConfig) {
  const NetworkConfig config = loopback_network(3);
  const Exchanger exchanger(config, 2, test_options());
  EXPECT_EQ(exchanger.rank(), 2U);
  EXPECT_EQ(exchanger.world_size(), 3U);
  EXPECT_EQ(exchanger.config(), config);
  EXPECT_EQ(exchanger.options().retry_interval, 20ms);
}

// --- world size 1 ------------------------------------------------------------------------------

TEST(Exchanger, WorldSizeOneReturnsMineWithoutTouchingTheNetwork) {
  const NetworkConfig config = loopback_network(1);
  Exchanger exchanger(config, 0, test_options());
  EXPECT_TRUE(port_is_free(config.host(0).port)) << "a single rank must not listen";
  const Bytes mine = pattern(100, 0);
  const auto all = exchanger.exchange_bytes(mine);
  ASSERT_EQ(all.size(), 1U);
  EXPECT_EQ(all[0], mine);
  EXPECT_EQ(exchanger.exchange(std::string("solo")), std::vector<std::string>{"solo"});
  EXPECT_EQ(exchanger.exchange(endpoint_of(0)), std::vector<ibv::Endpoint>{endpoint_of(0)});
}

TEST(Exchanger, AnOversizedOwnMessageIsRejectedBeforeSendingAndLeavesItUsable) {
  const NetworkConfig config = loopback_network(1);
  ExchangerOptions options = test_options();
  options.max_message_size = 16;
  Exchanger exchanger(config, 0, options);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { static_cast<void>(exchanger.exchange_bytes(pattern(17, 0))); },
                           {"17 bytes", "maximum of 16", "max_message_size"}));
  EXPECT_EQ(exchanger.exchange_bytes(pattern(16, 0)).at(0), pattern(16, 0));
}

// --- meshes ------------------------------------------------------------------------------------

class ExchangerRanks : public ::testing::TestWithParam<std::size_t> {};

TEST_P(ExchangerRanks, EveryRankGetsEveryEndpoint) {
  const std::size_t world = GetParam();
  const NetworkConfig config = loopback_network(world);
  std::vector<std::vector<ibv::Endpoint>> received(world);
  const auto outcomes = run_ranks(world, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, test_options());
    received[rank] = exchanger.exchange(endpoint_of(rank));
  });
  expect_all_succeeded(outcomes);
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    ASSERT_EQ(received[rank].size(), world) << "rank " << rank;
    for (std::uint32_t sender = 0; sender < world; ++sender) {
      EXPECT_EQ(received[rank][sender], endpoint_of(sender))
          << "rank " << rank << " got " << received[rank][sender].to_string() << " for rank "
          << sender;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ExchangerMesh, ExchangerRanks,
                         ::testing::Values(std::size_t{2}, std::size_t{4}, std::size_t{8}));

TEST(Exchanger, SuccessiveExchangesReuseTheConnections) {
  constexpr std::size_t kWorld = 3;
  constexpr std::uint32_t kRounds = 6;
  const NetworkConfig config = loopback_network(kWorld);
  Rendezvous rendezvous(kWorld);
  std::atomic<std::size_t> after_first{0};
  std::atomic<std::size_t> after_last{0};
  std::atomic<int> wrong{0};
  const auto outcomes = run_ranks(kWorld, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, test_options());
    for (std::uint32_t round = 0; round < kRounds; ++round) {
      const std::vector<std::uint32_t> values = exchanger.exchange(round * 100 + rank);
      for (std::uint32_t sender = 0; sender < kWorld; ++sender) {
        if (values.at(sender) != round * 100 + sender) ++wrong;
      }
      if (round == 0 || round == kRounds - 1) {
        ASSERT_TRUE(rendezvous.arrive_and_wait());
        if (rank == 0) (round == 0 ? after_first : after_last) = open_descriptors();
        ASSERT_TRUE(rendezvous.arrive_and_wait());
      }
    }
  });
  expect_all_succeeded(outcomes);
  EXPECT_EQ(wrong, 0);
  // Each rank holds its listener and one connection per peer from the first exchange on.
  EXPECT_EQ(after_first.load(), after_last.load()) << "connections were opened after the first";
}

TEST(Exchanger, StringsAndVectorsOfRegionsTravelTyped) {
  constexpr std::size_t kWorld = 3;
  const NetworkConfig config = loopback_network(kWorld);
  std::vector<std::vector<std::string>> names(kWorld);
  std::vector<std::vector<std::vector<ibv::RemoteMemoryRegion>>> regions(kWorld);
  const auto region_list = [](std::uint32_t rank) {
    return std::vector<ibv::RemoteMemoryRegion>(
        rank + 1, ibv::RemoteMemoryRegion(std::uint64_t{0x1000} * rank, 64, rank));
  };
  const auto outcomes = run_ranks(kWorld, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, test_options());
    names[rank] =
        exchanger.exchange(std::string(std::size_t{rank} * 1000, static_cast<char>('a' + rank)));
    regions[rank] = exchanger.exchange(region_list(rank));
  });
  expect_all_succeeded(outcomes);
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    for (std::uint32_t sender = 0; sender < kWorld; ++sender) {
      EXPECT_EQ(names[rank].at(sender),
                std::string(std::size_t{sender} * 1000, static_cast<char>('a' + sender)));
      EXPECT_EQ(regions[rank].at(sender), region_list(sender));
    }
  }
}

TEST(Exchanger, MessagesOfTheMaximumSizeTravelBothWaysAtOnce) {
  constexpr std::size_t kWorld = 2;
  constexpr std::size_t kSize = std::size_t{1} << 20;  // exactly max_message_size
  const NetworkConfig config = loopback_network(kWorld);
  std::vector<std::vector<Bytes>> received(kWorld);
  const auto outcomes = run_ranks(kWorld, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, test_options());
    received[rank] = exchanger.exchange_bytes(pattern(kSize, rank));
    received[rank] = exchanger.exchange_bytes(pattern(kSize - 1, rank + 2));  // and again
  });
  expect_all_succeeded(outcomes);
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    ASSERT_EQ(received[rank].size(), kWorld);
    for (std::uint32_t sender = 0; sender < kWorld; ++sender) {
      EXPECT_TRUE(received[rank][sender] == pattern(kSize - 1, sender + 2))
          << "rank " << rank << " from " << sender;
    }
  }
}

TEST(Exchanger, PayloadsOfDifferentSizesIncludingEmpty) {
  constexpr std::size_t kWorld = 4;
  const std::array<std::size_t, kWorld> sizes = {0, 1, 4099, (std::size_t{1} << 20) - 7};
  const NetworkConfig config = loopback_network(kWorld);
  std::vector<std::vector<Bytes>> received(kWorld);
  const auto outcomes = run_ranks(kWorld, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, test_options());
    received[rank] = exchanger.exchange_bytes(pattern(sizes[rank], rank));
  });
  expect_all_succeeded(outcomes);
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    for (std::uint32_t sender = 0; sender < kWorld; ++sender) {
      EXPECT_TRUE(received[rank].at(sender) == pattern(sizes[sender], sender))
          << "rank " << rank << " from " << sender;
    }
  }
}

TEST(Exchanger, TheWildcardListenerAcceptsLoopbackConnections) {
  constexpr std::size_t kWorld = 2;
  const NetworkConfig config = loopback_network(kWorld);
  ExchangerOptions options = test_options();
  options.listen_address = "*";
  std::vector<std::vector<std::uint64_t>> received(kWorld);
  const auto outcomes = run_ranks(kWorld, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, options);
    received[rank] = exchanger.exchange(std::uint64_t{rank} << 40U);
  });
  expect_all_succeeded(outcomes);
  EXPECT_EQ(received[0], (std::vector<std::uint64_t>{0, std::uint64_t{1} << 40U}));
  EXPECT_EQ(received[1], received[0]);
}

TEST(Exchanger, AMovedExchangerKeepsItsConnections) {
  constexpr std::size_t kWorld = 2;
  const NetworkConfig config = loopback_network(kWorld);
  std::vector<std::vector<std::uint32_t>> received(kWorld);
  std::optional<ibv::Error> moved_from_error;
  const auto outcomes = run_ranks(kWorld, [&](std::uint32_t rank) {
    Exchanger original(config, rank, test_options());
    static_cast<void>(original.exchange(rank));
    Exchanger moved(std::move(original));
    received[rank] = moved.exchange(rank + 10);
    if (rank == 0) {
      // NOLINTNEXTLINE(bugprone-use-after-move): what a moved-from Exchanger does is the point
      moved_from_error = ibv_test::error_of([&] { static_cast<void>(original.exchange(rank)); });
    }
  });
  expect_all_succeeded(outcomes);
  EXPECT_EQ(received[0], (std::vector<std::uint32_t>{10, 11}));
  EXPECT_EQ(received[1], received[0]);
  ASSERT_TRUE(moved_from_error.has_value());
  EXPECT_EQ(moved_from_error->kind(), ErrorKind::state);
  EXPECT_NE(std::string(moved_from_error->what()).find("moved from"), std::string::npos);
}

// --- ranks that start late, never, or leave ---------------------------------------------------

TEST(Exchanger, ARankThatStartsLateIsWaitedFor) {
  constexpr std::size_t kWorld = 3;
  const NetworkConfig config = loopback_network(kWorld);
  std::vector<std::vector<ibv::Endpoint>> received(kWorld);
  const auto outcomes = run_ranks(kWorld, [&](std::uint32_t rank) {
    if (rank == 1) std::this_thread::sleep_for(500ms);  // its peers dial a closed port meanwhile
    Exchanger exchanger(config, rank, test_options());
    received[rank] = exchanger.exchange(endpoint_of(rank));
  });
  expect_all_succeeded(outcomes);
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    ASSERT_EQ(received[rank].size(), kWorld);
    for (std::uint32_t sender = 0; sender < kWorld; ++sender) {
      EXPECT_EQ(received[rank][sender], endpoint_of(sender));
    }
  }
  EXPECT_GE(outcomes[0].elapsed, 450ms) << "rank 0 can not have finished before rank 1 started";
}

TEST(Exchanger, AHigherRankThatNeverStartsTimesOutNamingItsAddress) {
  const NetworkConfig config = loopback_network(2);
  ExchangerOptions options = test_options();
  options.timeout = 1000ms;
  Exchanger exchanger(config, 0, options);
  const auto start = Clock::now();
  const auto error = ibv_test::error_of([&] { static_cast<void>(exchanger.exchange(1U)); });
  const auto elapsed = Clock::now() - start;
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->errno_value(), ETIMEDOUT);
  EXPECT_TRUE(throws_error(
      ErrorKind::timeout, [&] { throw ibv::Error(*error); },
      {"timed out after 1000 ms waiting for rank 1 (", "rank 1 at " + address_of(config, 1),
       "refused the connection", "times: is it running?"}));
  EXPECT_GE(elapsed, 950ms);
  EXPECT_LT(elapsed, 2500ms);
}

TEST(Exchanger, ALowerRankThatNeverStartsTimesOutNamingIt) {
  const NetworkConfig config = loopback_network(3);
  ExchangerOptions options = test_options();
  options.timeout = 800ms;
  Exchanger exchanger(config, 2, options);
  const auto start = Clock::now();
  EXPECT_TRUE(throws_error(ErrorKind::timeout, [&] { static_cast<void>(exchanger.exchange(2U)); },
                           {"timed out after 800 ms waiting for ranks 0, 1 (",
                            "rank 0 (127.0.0.1) never connected to our port " + port_of(config, 2),
                            "rank 1 (127.0.0.1) never connected"}));
  EXPECT_LT(Clock::now() - start, 2500ms);
}

TEST(Exchanger, APeerThatClosesDuringAnExchangeIsPeerGoneThenTheExchangerIsPoisoned) {
  const NetworkConfig config = loopback_network(2);
  std::optional<Exchanger> leaver(std::in_place, config, 0, test_options());
  Exchanger stayer(config, 1, test_options());
  const auto outcomes = run_ranks(2, [&](std::uint32_t rank) {
    static_cast<void>(rank == 0 ? leaver->exchange(0U) : stayer.exchange(1U));
  });
  expect_all_succeeded(outcomes);

  leaver.reset();  // rank 0 goes away between exchanges
  const auto start = Clock::now();
  EXPECT_TRUE(throws_error(ErrorKind::peer_gone, [&] { static_cast<void>(stayer.exchange(1U)); },
                           {"rank 0 (127.0.0.1, connected from 127.0.0.1:",
                            "closed the connection before sending a message for exchange 1"}));
  EXPECT_LT(Clock::now() - start, kPrompt);

  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { static_cast<void>(stayer.exchange(1U)); },
                           {"an earlier exchange failed and poisoned this Exchanger",
                            "closed the connection", "make a new Exchanger"}));
}

// A rank that sees rank 2's connection close fails, and tells its peers why (an abort) before
// it closes its own connections: so every rank names rank 2, also one that hears of it from
// another rank first.
TEST(Exchanger, ARankThatLeavesDuringTheBootstrapIsNamedOnEveryOtherRankPromptly) {
  const NetworkConfig config = loopback_network(4);
  const auto outcomes = run_ranks(4, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, test_options());
    static_cast<void>(exchanger.exchange(rank));  // the mesh is up
    if (rank == 2) return;  // leaves: its connections close while the others wait for it
    static_cast<void>(exchanger.exchange(rank));
  });
  EXPECT_FALSE(outcomes[2].error.has_value()) << outcomes[2].error->what();
  for (const std::uint32_t rank : {0U, 1U, 3U}) {
    EXPECT_TRUE(has_error(outcomes[rank], ErrorKind::peer_gone, {"rank 2 "})) << "rank " << rank;
    EXPECT_LT(outcomes[rank].elapsed, kPrompt) << "rank " << rank << " waited for the deadline";
  }
}

TEST(Exchanger, AnEntryThatDoesNotDecodeNamesTheRankAndLeavesTheExchangerUsable) {
  const NetworkConfig config = loopback_network(2);
  std::optional<ibv::Error> decode_error;
  std::vector<std::uint32_t> after;
  const auto outcomes = run_ranks(2, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, test_options());
    if (rank == 0) {
      decode_error =
          ibv_test::error_of([&] { static_cast<void>(exchanger.exchange(endpoint_of(0))); });
      after = exchanger.exchange(7U);
    } else {
      static_cast<void>(exchanger.exchange(std::string("not an endpoint")));
      static_cast<void>(exchanger.exchange(8U));
    }
  });
  expect_all_succeeded(outcomes);
  ASSERT_TRUE(decode_error.has_value());
  EXPECT_TRUE(throws_error(ErrorKind::protocol, [&] { throw ibv::Error(*decode_error); },
                           {"rank 1 (" + address_of(config, 1) +
                                ") sent an entry that does not "
                                "decode",
                            "expected 28 bytes, got 15"}));
  EXPECT_EQ(after, (std::vector<std::uint32_t>{7, 8}));
}

// --- hostile clients ---------------------------------------------------------------------------

// Rank `victim` of a `world`-rank loopback network exchanges, no other rank running, while
// `attack` does its worst to the victim's port; then the victim tries once more.
struct Attack {
  Outcome exchange;                  // how the exchange ended
  std::optional<ibv::Error> second;  // what the next exchange threw
};

Attack attack_rank(std::size_t world, std::uint32_t victim,
                   const std::function<void(const NetworkConfig&)>& attack) {
  const NetworkConfig config = loopback_network(world);
  Exchanger exchanger(config, victim, test_options());
  Attack result;
  std::jthread thread([&] {  // joined however `attack` ends
    const auto start = Clock::now();
    try {
      static_cast<void>(exchanger.exchange_bytes(pattern(10, victim)));
    } catch (const ibv::Error& error) {
      result.exchange.error = error;
    } catch (const std::exception& error) {
      result.exchange.other = error.what();
    }
    result.exchange.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  });
  attack(config);
  thread.join();
  result.second =
      ibv_test::error_of([&] { static_cast<void>(exchanger.exchange_bytes(pattern(1, 0))); });
  return result;
}

// The victim failed promptly with `kind` and `mentions`, and is poisoned since.
void expect_rejected(const Attack& attack, ErrorKind kind,
                     std::initializer_list<std::string_view> mentions) {
  EXPECT_TRUE(has_error(attack.exchange, kind, mentions));
  EXPECT_LT(attack.exchange.elapsed, kPrompt) << "not rejected promptly";
  ASSERT_TRUE(attack.second.has_value());
  EXPECT_EQ(attack.second->kind(), ErrorKind::state) << attack.second->what();
}

TEST(ExchangerHostile, GarbageIsRejectedAndTheConnectionClosed) {
  bool closed = false;
  const Attack attack = attack_rank(2, 1, [&](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    send_text(client, "GET / HTTP/1.1\r\nHost: node02\r\n\r\n");
    closed = closed_by_peer(client);
  });
  expect_rejected(attack, ErrorKind::protocol,
                  {"a connection from 127.0.0.1:", "sent a message with magic 0x47455420",
                   "instead of \"IBVX\" (not an ibverbs-cpp exchanger?)"});
  EXPECT_TRUE(closed) << "the victim kept the hostile connection open";
}

TEST(ExchangerHostile, AValidLookingHeaderWithTheWrongMagicIsRejected) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    Bytes bytes = hello(0, 2);
    bytes[0] = std::byte{'X'};
    send_all(client, bytes);
    EXPECT_TRUE(closed_by_peer(client));
  });
  expect_rejected(attack, ErrorKind::protocol, {"magic 0x58425658", "IBVX"});
}

TEST(ExchangerHostile, AHelloClaimingAnUnknownRankIsRejected) {
  const Attack attack = attack_rank(3, 1, [](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    send_all(client, hello(7, 3));
    EXPECT_TRUE(closed_by_peer(client));
  });
  expect_rejected(
      attack, ErrorKind::protocol,
      {"a connection from 127.0.0.1:", "claims to be rank 7, an unknown rank", "world size is 3"});
}

TEST(ExchangerHostile, AHelloClaimingAHigherRankIsRejected) {
  const Attack attack = attack_rank(3, 1, [](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    send_all(client, hello(2, 3));
    EXPECT_TRUE(closed_by_peer(client));
  });
  expect_rejected(attack, ErrorKind::protocol,
                  {"introduced itself as rank 2, a HIGHER rank than ours (1)"});
}

TEST(ExchangerHostile, ADuplicateHelloIsRejected) {
  const Attack attack = attack_rank(3, 2, [](const NetworkConfig& config) {
    const Socket first = connect_to(config.host(2).port);
    send_all(first, hello(0, 3));
    const Socket second = connect_to(config.host(2).port);
    send_all(second, hello(0, 3));
    EXPECT_TRUE(closed_by_peer(second));
  });
  expect_rejected(
      attack, ErrorKind::protocol,
      {"introduced itself as rank 0, but rank 0 is already connected", "a duplicate rank"});
}

TEST(ExchangerHostile, AHelloAfterTheMeshIsCompleteIsADuplicate) {
  const NetworkConfig config = loopback_network(2);
  Exchanger rank0(config, 0, test_options());
  Exchanger rank1(config, 1, test_options());
  expect_all_succeeded(run_ranks(2, [&](std::uint32_t rank) {
    static_cast<void>(rank == 0 ? rank0.exchange(0U) : rank1.exchange(1U));
  }));

  const Socket impostor = connect_to(config.host(1).port);
  send_all(impostor, hello(0, 2));
  // Rank 1 accepts only while it exchanges: wait until the kernel has queued the impostor's
  // connection there, so that the next exchange is sure to find it.
  const auto deadline = Clock::now() + 5s;
  while (pending_connections(config.host(1).port) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);  // polling the condition, not hoping for it
  }
  ASSERT_EQ(pending_connections(config.host(1).port), 1U) << "the impostor never got queued";
  const auto outcomes = run_ranks(2, [&](std::uint32_t rank) {
    static_cast<void>(rank == 0 ? rank0.exchange(0U) : rank1.exchange(1U));
  });
  EXPECT_TRUE(has_error(outcomes[1], ErrorKind::protocol,
                        {"a connection from 127.0.0.1:", "introduced itself as rank 0",
                         "already connected", "duplicate rank"}));
  // Rank 1 tells rank 0 why before it closes its connections: rank 0 learns the reason at once.
  EXPECT_TRUE(has_error(
      outcomes[0], ErrorKind::protocol,
      {"rank 1 at " + address_of(config, 1), "failed during exchange 1", "duplicate rank"}));
  EXPECT_LT(outcomes[0].elapsed, kPrompt);
  EXPECT_LT(outcomes[1].elapsed, kPrompt);
}

TEST(ExchangerHostile, AnOversizedLengthIsRejectedWithoutAllocatingIt) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    send_all(client, concat({hello(0, 2), data(0, 2, 0, 0xFFFFFFFF)}));
    EXPECT_TRUE(closed_by_peer(client));
  });
  expect_rejected(attack, ErrorKind::protocol,
                  {"rank 0 (127.0.0.1, connected from 127.0.0.1:",
                   "sent a 4294967295-byte message; the maximum is 1048576 "
                   "(ExchangerOptions::max_message_size)"});
}

TEST(ExchangerHostile, ATruncatedHeaderOfAKnownRankIsPeerGone) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    Socket client = connect_to(config.host(1).port);
    const Bytes whole = data(0, 2, 0, 100);
    send_all(client, concat({hello(0, 2), Bytes(whole.begin(), whole.begin() + 10)}));
    client.close();
  });
  expect_rejected(attack, ErrorKind::peer_gone,
                  {"rank 0 (127.0.0.1, connected from 127.0.0.1:",
                   "closed the connection after 10 of the 24 header bytes (truncated message)"});
}

TEST(ExchangerHostile, ATruncatedPayloadOfAKnownRankIsPeerGone) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    Socket client = connect_to(config.host(1).port);
    send_all(client, concat({hello(0, 2), data(0, 2, 0, 100), pattern(40, 0)}));
    client.close();
  });
  expect_rejected(attack, ErrorKind::peer_gone,
                  {"rank 0", "after 40 of the 100 payload bytes (truncated message)"});
}

TEST(ExchangerHostile, ATruncatedHelloOfAStrangerIsAConnectionError) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    Socket client = connect_to(config.host(1).port);
    const Bytes whole = hello(0, 2);
    send_all(client, std::span(whole).first(10));
    client.close();
  });
  expect_rejected(
      attack, ErrorKind::connection,
      {"a connection from 127.0.0.1:", "after 10 of the 24 header bytes", "of its hello"});
}

TEST(ExchangerHostile, AnotherWorldSizeIsRejected) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    send_all(client, hello(0, 5));
    EXPECT_TRUE(closed_by_peer(client));
  });
  expect_rejected(attack, ErrorKind::protocol, {"has a world size of 5 but ours is 2"});
}

TEST(ExchangerHostile, AnotherSequenceNumberIsRejected) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    send_all(client, concat({hello(0, 2), data(0, 2, 5, 0)}));
    EXPECT_TRUE(closed_by_peer(client));
  });
  expect_rejected(
      attack, ErrorKind::protocol,
      {"rank 0 (127.0.0.1, connected from 127.0.0.1:",
       "sent sequence number 5 but this is exchange 0", "disagree on how many exchanges"});
}

TEST(ExchangerHostile, DataWithoutAHelloIsRejected) {
  const Attack attack = attack_rank(2, 1, [](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    send_all(client, data(0, 2, 0, 0));
    EXPECT_TRUE(closed_by_peer(client));
  });
  expect_rejected(attack, ErrorKind::protocol, {"data message before introducing itself"});
}

TEST(ExchangerHostile, ConnectionsThatSayNothingAreIgnored) {
  constexpr std::size_t kWorld = 2;
  std::vector<std::uint32_t> from_rank0;
  const Attack attack = attack_rank(kWorld, 1, [&](const NetworkConfig& config) {
    for (int i = 0; i < 3; ++i) {
      Socket probe = connect_to(config.host(1).port);  // a port scanner, a health check
      probe.close();
    }
    Exchanger rank0(config, 0, test_options());
    const auto all = rank0.exchange_bytes(pattern(5, 0));
    from_rank0.assign(1, static_cast<std::uint32_t>(all.at(1).size()));
  });
  EXPECT_FALSE(attack.exchange.error.has_value()) << attack.exchange.error->what();
  EXPECT_EQ(from_rank0, std::vector<std::uint32_t>{10});  // the victim's 10 bytes arrived
  // The victim is still usable, but rank 0 is gone now: the next exchange notices.
  ASSERT_TRUE(attack.second.has_value());
  EXPECT_EQ(attack.second->kind(), ErrorKind::peer_gone) << attack.second->what();
}

TEST(ExchangerHostile, ASilentConnectionKeptOpenDoesNotHoldUpTheExchange) {
  std::vector<std::uint32_t> from_rank0;
  std::optional<Socket> silent;
  const Attack attack = attack_rank(2, 1, [&](const NetworkConfig& config) {
    silent.emplace(connect_to(config.host(1).port));  // connects, never says a word, stays open
    Exchanger rank0(config, 0, test_options());
    const auto all = rank0.exchange_bytes(pattern(5, 0));
    from_rank0.assign(1, static_cast<std::uint32_t>(all.at(1).size()));
  });
  EXPECT_FALSE(attack.exchange.error.has_value()) << attack.exchange.error->what();
  EXPECT_LT(attack.exchange.elapsed, kPrompt) << "the silent connection held the exchange up";
  EXPECT_EQ(from_rank0, std::vector<std::uint32_t>{10});  // the victim's 10 bytes arrived
}

TEST(ExchangerHostile, AHelloSentOneByteASecondDoesNotStallPastTheTimeout) {
  // A client dribbles a valid hello, a byte a second, for longer than the exchange's timeout:
  // the exchange must end when its own deadline passes, not when the client gives up.
  const auto dribble_for = kTimeout + 2000ms;
  const Attack attack = attack_rank(2, 1, [&](const NetworkConfig& config) {
    const Socket client = connect_to(config.host(1).port);
    const Bytes whole = hello(0, 2);
    const auto until = Clock::now() + dribble_for;
    for (std::size_t i = 0; i < whole.size() && Clock::now() < until; ++i) {
      // Once the victim has given up it closes the connection and the next byte fails (EPIPE or
      // ECONNRESET): that is the end of the dribble, not a failure of the test.
      if (::send(client.get(), &whole[i], 1, MSG_NOSIGNAL) != 1) break;
      std::this_thread::sleep_for(1000ms);
    }
  });
  EXPECT_TRUE(has_error(attack.exchange, ErrorKind::timeout,
                        {"timed out after " + std::to_string(kTimeout.count()) + " ms"}));
  EXPECT_GE(attack.exchange.elapsed, kTimeout - 50ms);
  EXPECT_LT(attack.exchange.elapsed, kTimeout + 1000ms) << "held up by the slow client";
}

// --- hostile acceptors (this rank dials them) -------------------------------------------------

TEST(ExchangerHostile, AnAcceptorThatSendsGarbageIsRejected) {
  const NetworkConfig config = loopback_network(2);
  const Socket server = listen_on(config.host(1).port);  // not an exchanger
  Exchanger exchanger(config, 0, test_options());
  Outcome outcome;
  std::jthread thread([&] {  // joined however the test ends
    const auto start = Clock::now();
    outcome.error = ibv_test::error_of([&] { static_cast<void>(exchanger.exchange(0U)); });
    outcome.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  });
  const Socket connection = accept_from(server);
  send_text(connection, "SSH-2.0-OpenSSH_9.2p1\r\n");
  thread.join();
  EXPECT_TRUE(has_error(outcome, ErrorKind::protocol,
                        {"rank 1 at " + address_of(config, 1),
                         "sent a message with magic 0x5353482d", "(it reads \"SSH-\")"}));
  EXPECT_LT(outcome.elapsed, kPrompt);
}

TEST(ExchangerHostile, AnAcceptorThatClosesMidMessageIsPeerGone) {
  const NetworkConfig config = loopback_network(2);
  const Socket server = listen_on(config.host(1).port);
  Exchanger exchanger(config, 0, test_options());
  Outcome outcome;
  std::jthread thread([&] {  // joined however the test ends
    const auto start = Clock::now();
    outcome.error =
        ibv_test::error_of([&] { static_cast<void>(exchanger.exchange_bytes(pattern(10, 0))); });
    outcome.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  });
  Socket connection = accept_from(server);
  // What the dialler sends: a hello, then its data message.
  const Bytes received = receive_exactly(connection, 2 * MessageHeader::kSize + 10);
  ASSERT_EQ(received.size(), 2 * MessageHeader::kSize + 10);
  const ibv::net::HeaderExpectation hello_expected{
      .kind = MessageKind::hello, .world_size = 2, .receiver_rank = 1};
  const auto hello_header =
      ibv::net::decode_header(std::span(received).first(MessageHeader::kSize), hello_expected);
  ASSERT_TRUE(hello_header.has_value());
  EXPECT_EQ(hello_header->sender_rank, 0U);
  const ibv::net::HeaderExpectation data_expected{
      .kind = MessageKind::data, .world_size = 2, .receiver_rank = 1, .sender_rank = 0};
  const auto data_header = ibv::net::decode_header(
      std::span(received).subspan(MessageHeader::kSize, MessageHeader::kSize), data_expected);
  ASSERT_TRUE(data_header.has_value());
  EXPECT_EQ(data_header->payload_length, 10U);
  EXPECT_TRUE(std::equal(received.end() - 10, received.end(), pattern(10, 0).begin()));

  send_all(connection, concat({data(1, 2, 0, 100), pattern(30, 1)}));
  connection.close();
  thread.join();
  EXPECT_TRUE(has_error(outcome, ErrorKind::peer_gone,
                        {"rank 1 at " + address_of(config, 1),
                         "closed the connection after 30 of the 100 payload bytes (truncated "
                         "message) for exchange 0"}));
  EXPECT_LT(outcome.elapsed, kPrompt);
}

// Two ranks of one machine whose entries name different addresses and the same port
// (two rails, the multi-host testbed) each listen on their own address by default, so each
// dial reaches the rank it is meant for.
TEST(Exchanger, RanksOfOneMachineWithDistinctAddressesShareAPort) {
  const std::uint16_t port = free_ports(1)[0];
  NetworkConfigBuilder builder;
  for (std::uint32_t rank = 0; rank < 2; ++rank) {
    builder.add_host({.rank = rank,
                      .hostname = "127.0.0." + std::to_string(rank + 1),
                      .port = port,
                      .ibdev = "rxe0",
                      .comment = ""});
  }
  const NetworkConfig config = builder.build();
  ExchangerOptions options = test_options();
  options.listen_address.clear();  // the default: the entry's own address
  std::vector<std::vector<std::uint64_t>> received(2);
  const auto outcomes = run_ranks(2, [&](std::uint32_t rank) {
    Exchanger exchanger(config, rank, options);
    received[rank] = exchanger.exchange(std::uint64_t{rank} + 7);
  });
  expect_all_succeeded(outcomes);
  EXPECT_EQ(received[0], (std::vector<std::uint64_t>{7, 8}));
  EXPECT_EQ(received[1], received[0]);
}

}  // namespace
