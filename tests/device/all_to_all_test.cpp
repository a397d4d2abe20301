// SPDX-License-Identifier: MIT
// Device tests of ibv::net::PersistentAllToAll on one device: every rank a thread of this
// process with its own Node (node_ranks.hpp). Every byte of every part is checked against a
// seeded pattern of (round, source, destination); sizes mix 0, 1, odd, the slot's maximum and
// whatever the generator draws. Credits are checked by a reader that holds its rounds while the
// others run ahead: without them its slots would be overwritten. Faults: a rank that stops
// calling and a rank whose queue pairs vanish (a rank killed for real, SIGKILL, is in
// rank_fault_test.cpp). Bad input is refused before anything is posted. The collective keeps
// its registrations while it lives (the caller's handles may go), and a moved-from collective
// refuses every call.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/collective/persistent_all_to_all.hpp"
#include "node_ranks.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::error_of;
using ibv_test::throws_error;
using ibv_test::throws_invalid_argument;
using net::AllToAllRound;
using net::AllToAllSettings;
using net::PersistentAllToAll;

/// A number from (round, source, destination, salt), the same in every rank.
std::uint64_t mix(std::uint64_t round, std::uint32_t source, std::uint32_t destination,
                  std::uint64_t salt = 0) {
  std::uint64_t x = round * 0x9e3779b97f4a7c15ULL + source * 0xbf58476d1ce4e5b9ULL +
                    destination * 0x94d049bb133111ebULL + salt;
  x ^= x >> 31U;
  x *= 0xd6e8feb86659fd39ULL;
  x ^= x >> 29U;
  return x;
}

/// The size of the part `source` sends `destination` in `round`: 0, 1, odd, the slot's
/// maximum, or any size up to it.
std::size_t part_size(std::uint64_t round, std::uint32_t source, std::uint32_t destination,
                      std::size_t slot) {
  switch (mix(round, source, destination) % 6) {
    case 0: return 0;
    case 1: return 1;
    case 2: return slot;
    case 3: return std::min<std::size_t>(slot, 7);
    case 4: return slot - 1;
    default: return mix(round, source, destination, 1) % (slot + 1);
  }
}

std::byte part_byte(std::uint64_t round, std::uint32_t source, std::uint32_t destination,
                    std::size_t index) {
  return static_cast<std::byte>(
      (round * 131U + std::uint64_t{source} * 31U + std::uint64_t{destination} * 17U + index * 7U) &
      0xffU);
}

/// One rank's memory and collective: send memory with room for one part per rank (in
/// `send_copies` blocks, one per round that may be in flight at once), receive memory for the
/// slots.
class Rank {
 public:
  Rank(net::Node& node, net::Bootstrap& bootstrap, const AllToAllSettings& settings,
       std::uint32_t send_copies = 1)
      : world_(node.world_size()),
        rank_(node.rank()),
        slot_(settings.slot_size),
        copies_(send_copies),
        send_(std::size_t{copies_} * world_ * slot_),
        receive_(std::size_t{world_} * settings.slots_per_peer * slot_),
        send_mr_(node.protection_domain().register_local(send_)),
        receive_mr_(
            node.protection_domain().register_remote_accessible(receive_, RemoteAccess::write())),
        all_to_all_(node, bootstrap, *send_mr_, *receive_mr_, settings),
        parts_(world_) {}

  /// Fills the send memory (block round mod send_copies) with round `round`'s parts and
  /// returns their spans.
  std::span<const std::span<const std::byte>> parts(std::uint64_t round) {
    const std::size_t block = static_cast<std::size_t>(round % copies_) * world_ * slot_;
    for (std::uint32_t to = 0; to < world_; ++to) {
      const std::size_t size = part_size(round, rank_, to, slot_);
      std::byte* base = send_.data() + block + std::size_t{to} * slot_;
      for (std::size_t i = 0; i < size; ++i) base[i] = part_byte(round, rank_, to, i);
      parts_[to] = std::span<const std::byte>(base, size);
    }
    return parts_;
  }

  /// Throws unless every part of `round` is as its sender made it.
  void check(const AllToAllRound& round) const {
    for (std::uint32_t from = 0; from < world_; ++from) {
      const std::span<const std::byte> part = round.part(from);
      const std::size_t size = part_size(round.number(), from, rank_, slot_);
      if (part.size() != size) {
        throw std::runtime_error("rank " + std::to_string(rank_) + ", round " +
                                 std::to_string(round.number()) + ": the part from rank " +
                                 std::to_string(from) + " has " + std::to_string(part.size()) +
                                 " bytes, not " + std::to_string(size));
      }
      for (std::size_t i = 0; i < size; ++i) {
        if (part[i] != part_byte(round.number(), from, rank_, i)) {
          throw std::runtime_error("rank " + std::to_string(rank_) + ", round " +
                                   std::to_string(round.number()) + ": byte " + std::to_string(i) +
                                   " from rank " + std::to_string(from) + " is wrong");
        }
      }
    }
  }

  PersistentAllToAll& all_to_all() { return all_to_all_; }
  /// The MemoryRegion handles (the collective shares their registrations): a test may let go
  /// of them while the collective lives.
  std::optional<MemoryRegion>& send_mr() { return send_mr_; }
  std::optional<MemoryRegion>& receive_mr() { return receive_mr_; }
  std::span<std::byte> send() { return send_; }
  std::span<const std::byte> receive() const { return receive_; }

 private:
  std::uint32_t world_;
  std::uint32_t rank_;
  std::size_t slot_;
  std::uint32_t copies_;
  std::vector<std::byte> send_;
  std::vector<std::byte> receive_;
  std::optional<MemoryRegion> send_mr_;
  std::optional<MemoryRegion> receive_mr_;
  PersistentAllToAll all_to_all_;
  std::vector<std::span<const std::byte>> parts_;
};

/// Worlds of up to 8 threads share the testbed's two vCPUs: they spin briefly, then sleep.
void spin_briefly(net::NodeBuilder& builder) { builder.wait_mode(WaitMode::spin_then_block(50us)); }

class AllToAllWorld : public ::testing::TestWithParam<std::uint32_t> {};

TEST_P(AllToAllWorld, EveryByteOfEveryRoundArrives) {
  const std::uint32_t world = GetParam();
  constexpr std::uint64_t kRounds = 24;
  run_ranks(
      world,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap, {.slot_size = 1021, .timeout = 20s});
        for (std::uint64_t n = 0; n < kRounds; ++n) {
          const AllToAllRound round = rank.all_to_all().run(rank.parts(n));
          ASSERT_EQ(round.number(), n);
          rank.check(round);
        }
        EXPECT_EQ(rank.all_to_all().rounds_started(), kRounds);
        node.barrier();  // no rank ends its collective while a peer is in its last round
      },
      spin_briefly);
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllWorld, ::testing::Values(1U, 2U, 3U, 4U, 5U, 6U, 8U),
                         [](const auto& world) { return std::to_string(world.param) + "_ranks"; });

TEST(AllToAll, OverARendezvousWithOnePeerInFlightAndThreeSlots) {
  run_ranks(
      4,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap,
                  {.slot_size = 4096, .slots_per_peer = 3, .peers_in_flight = 1, .timeout = 20s});
        EXPECT_EQ(rank.all_to_all().settings().peers_in_flight, 1U);
        for (std::uint64_t n = 0; n < 10; ++n) rank.check(rank.all_to_all().run(rank.parts(n)));
        node.barrier();  // no rank ends its collective while a peer is in its last round
      },
      spin_briefly, BootstrapKind::rendezvous);
}

TEST(AllToAll, RoundsPipelineWhileTheCallerHoldsThePreviousOne) {
  run_ranks(
      3,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap, {.slot_size = 512, .timeout = 20s});
        AllToAllRound held = rank.all_to_all().run(rank.parts(0));
        for (std::uint64_t n = 1; n < 12; ++n) {
          AllToAllRound next = rank.all_to_all().run(rank.parts(n));
          rank.check(held);  // still intact while round n landed beside it
          rank.check(next);
          held = std::move(next);  // releases round n - 1
        }
        node.barrier();  // no rank ends its collective while a peer is in its last round
      },
      spin_briefly);
}

TEST(AllToAll, ASlowReaderHoldsTheSendersBackAndNothingIsOverwritten) {
  // Rank 0 holds rounds 0 and 1 (both of its slots) and sleeps; the others finish round 1 and
  // start round 2, whose parts for rank 0 belong in round 0's slots. Only the credits keep them
  // out until rank 0 releases round 0.
  std::atomic<std::uint32_t> started_round_2{0};
  run_ranks(
      3,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap, {.slot_size = 2048, .timeout = 20s});
        PersistentAllToAll& all_to_all = rank.all_to_all();
        if (node.rank() == 0) {
          AllToAllRound round0 = all_to_all.run(rank.parts(0));
          AllToAllRound round1 = all_to_all.run(rank.parts(1));
          EXPECT_TRUE(throws_error(ErrorKind::state, [&] { all_to_all.start(rank.parts(2)); },
                                   {"still holds"}));
          const auto until = std::chrono::steady_clock::now() + 20s;
          while (started_round_2.load() < 2 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
          }
          std::this_thread::sleep_for(200ms);  // the others' round 2 writes would land now
          rank.check(round0);
          rank.check(round1);
          round0.release();
          EXPECT_FALSE(round0.holds_slots());
          EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)round0.part(1); }));
          rank.check(all_to_all.run(rank.parts(2)));
          rank.check(round1);
        } else {
          rank.check(all_to_all.run(rank.parts(0)));
          rank.check(all_to_all.run(rank.parts(1)));
          all_to_all.start(rank.parts(2));
          ++started_round_2;
          rank.check(all_to_all.wait());
        }
        node.barrier();  // no rank ends its collective while a peer is in its last round
      },
      spin_briefly);
}

TEST(AllToAll, RoundsOverlapInFlightAndReturnInOrder) {
  // Three rounds in flight at once on every rank (three slots, each round released as soon as
  // it is checked); each has its own send memory, which must not change while it travels.
  constexpr std::uint64_t kRounds = 20;
  constexpr std::uint32_t kDepth = 3;
  run_ranks(
      4,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap, {.slot_size = 777, .slots_per_peer = kDepth, .timeout = 20s},
                  kDepth);
        PersistentAllToAll& all_to_all = rank.all_to_all();
        std::uint64_t started = 0;
        for (; started < kDepth; ++started) all_to_all.start(rank.parts(started));
        for (std::uint64_t n = 0; n < kRounds; ++n) {
          {
            const AllToAllRound round = all_to_all.wait();
            ASSERT_EQ(round.number(), n);
            rank.check(round);
          }  // released: its slots take round n + kDepth
          if (started < kRounds) all_to_all.start(rank.parts(started++));
        }
        EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)all_to_all.wait(); },
                                 {"no round is started"}));
        node.barrier();  // no rank ends its collective while a peer is in its last round
      },
      spin_briefly);
}

TEST(AllToAll, RoundsReleasedOutOfOrderGiveTheirSlotsBackInOrder) {
  run_ranks(
      2,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap, {.slot_size = 256, .slots_per_peer = 3, .timeout = 20s});
        PersistentAllToAll& all_to_all = rank.all_to_all();
        AllToAllRound round0 = all_to_all.run(rank.parts(0));
        AllToAllRound round1 = all_to_all.run(rank.parts(1));
        AllToAllRound round2 = all_to_all.run(rank.parts(2));
        round1.release();  // round 0 still held: no slot is free yet
        EXPECT_TRUE(throws_error(ErrorKind::state, [&] { all_to_all.start(rank.parts(3)); }));
        rank.check(round0);
        rank.check(round2);
        round0.release();  // frees rounds 0 and 1
        rank.check(all_to_all.run(rank.parts(3)));
        rank.check(all_to_all.run(rank.parts(4)));
        rank.check(round2);
        node.barrier();  // no rank ends its collective while a peer is in its last round
      },
      spin_briefly);
}

TEST(AllToAll, CreditsForMoreRoundsThanAPartCarriesReachTheSenders) {
  // Every rank holds five rounds (six slots) and releases them at once (the oldest last):
  // five credits owed to each peer, more than a part's immediate data carries (three). The
  // rest must go alone, or round 10 (which needs round 4's slots) never gets to be written.
  // A window of one peer in flight keeps parts waiting for room, whose credits wait with them.
  constexpr std::uint32_t kHeld = 5;
  for (const std::uint32_t window : {0U, 1U}) {
    SCOPED_TRACE("peers in flight " + std::to_string(window));
    run_ranks(
        4,
        [&](net::Node& node, net::Bootstrap& bootstrap) {
          Rank rank(node, bootstrap,
                    {.slot_size = 300,
                     .slots_per_peer = kHeld + 1,
                     .peers_in_flight = window,
                     .timeout = 20s});
          PersistentAllToAll& all_to_all = rank.all_to_all();
          std::vector<AllToAllRound> held;
          for (std::uint64_t n = 0; n < kHeld; ++n) held.push_back(all_to_all.run(rank.parts(n)));
          for (std::size_t i = held.size(); i-- > 0;) {
            rank.check(held[i]);
            held[i].release();
          }
          for (std::uint64_t n = kHeld; n < std::uint64_t{4} * kHeld; ++n)
            rank.check(all_to_all.run(rank.parts(n)));
          node.barrier();  // no rank ends its collective while a peer is in its last round
        },
        spin_briefly);
  }
}

TEST(AllToAll, WaitsInEveryWaitMode) {
  for (const WaitMode mode :
       {WaitMode::spin(), WaitMode::block(), WaitMode::spin_then_block(20us)}) {
    SCOPED_TRACE(std::string(to_string(mode.strategy)));
    run_ranks(3, [&](net::Node& node, net::Bootstrap& bootstrap) {
      Rank rank(node, bootstrap, {.slot_size = 300, .timeout = 20s, .wait_mode = mode});
      EXPECT_EQ(rank.all_to_all().settings().wait_mode, mode);
      for (std::uint64_t n = 0; n < 6; ++n) rank.check(rank.all_to_all().run(rank.parts(n)));
      node.barrier();  // no rank ends its collective while a peer is in its last round
    });
  }
}

TEST(AllToAll, RunsInTheCallersEventLoopThroughItsCompletionFd) {
  // Ranks 1 and 2 start each round 20 ms late, so rank 0's loop finds its round incomplete and
  // must sleep on the fd until their parts wake it (a missed wake-up would be a 5 s timeout).
  run_ranks(3, [&](net::Node& node, net::Bootstrap& bootstrap) {
    const CompletionChannel channel(node.protection_domain().context());
    Rank rank(node, bootstrap, {.slot_size = 700, .completion_channel = channel});
    PersistentAllToAll& all_to_all = rank.all_to_all();
    EXPECT_EQ(all_to_all.completion_fd(), channel.fd());
    std::size_t wake_ups = 0;
    std::size_t silent_sleeps = 0;
    for (std::uint64_t n = 0; n < 6; ++n) {
      if (node.rank() != 0) std::this_thread::sleep_for(20ms);
      all_to_all.start(rank.parts(n));
      const auto until = std::chrono::steady_clock::now() + 20s;
      std::optional<AllToAllRound> round;
      while (!(round = all_to_all.poll())) {
        ASSERT_LT(std::chrono::steady_clock::now(), until) << "round " << n << " never came";
        all_to_all.arm_completion_fd();
        if ((round = all_to_all.poll())) break;
        pollfd fd{.fd = all_to_all.completion_fd(), .events = POLLIN, .revents = 0};
        if (::poll(&fd, 1, 5000) > 0) {
          (void)all_to_all.consume_completion_events();
          ++wake_ups;
        } else {
          ++silent_sleeps;
        }
      }
      rank.check(*round);
    }
    if (node.rank() == 0) {
      EXPECT_GT(wake_ups, 0U) << "the loop never slept on the fd";
    }
    EXPECT_EQ(silent_sleeps, 0U) << "armed, incomplete, and no wake-up within 5 s";
    node.barrier();  // no rank ends its collective while a peer is in its last round
  });
}

TEST(AllToAll, WithoutACompletionChannelThereIsNoFd) {
  run_ranks(1, [&](net::Node& node, net::Bootstrap& bootstrap) {
    Rank rank(node, bootstrap, {.slot_size = 8, .wait_mode = WaitMode::spin()});
    EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)rank.all_to_all().completion_fd(); },
                             {"completion channel"}));
  });
}

TEST(AllToAllBadInput, EveryBuildSettingIsCheckedBeforeAnythingIsCreated) {
  run_ranks(2, [&](net::Node& node, net::Bootstrap& bootstrap) {
    const ProtectionDomain& pd = node.protection_domain();
    std::vector<std::byte> send(std::size_t{1024});
    std::vector<std::byte> receive(std::size_t{2} * 2 * 128);
    const MemoryRegion send_mr = pd.register_local(send);
    const MemoryRegion receive_mr = pd.register_remote_accessible(receive, RemoteAccess::write());
    const MemoryRegion receive_local = pd.register_local(receive);
    const ProtectionDomain other_pd(pd.context());
    const MemoryRegion send_elsewhere = other_pd.register_local(send);
    auto build = [&](const MemoryRegion& out, const MemoryRegion& in,
                     const AllToAllSettings& settings) {
      return [&node, &bootstrap, send_memory = &out, receive_memory = &in, settings] {
        (void)PersistentAllToAll(node, bootstrap, *send_memory, *receive_memory, settings);
      };
    };
    EXPECT_TRUE(
        throws_invalid_argument(build(send_mr, receive_mr, {.slot_size = 0}), {"slot_size", "0"}));
    EXPECT_TRUE(throws_invalid_argument(
        build(send_mr, receive_mr, {.slot_size = AllToAllSettings::kMaxSlotSize + 1}),
        {"slot_size", "24 bits"}));
    EXPECT_TRUE(throws_invalid_argument(
        build(send_mr, receive_mr, {.slot_size = 128, .slots_per_peer = 1}), {"slots_per_peer"}));
    EXPECT_TRUE(throws_invalid_argument(
        build(send_mr, receive_mr, {.slot_size = 128, .timeout = Duration(0ms)}), {"timeout"}));
    EXPECT_TRUE(throws_invalid_argument(build(send_mr, receive_mr, {.slot_size = 129}),
                                        {"receive_memory", "need 516"}));
    EXPECT_TRUE(throws_invalid_argument(build(send_mr, receive_local, {.slot_size = 128}),
                                        {"receive_memory", "remote write"}));
    EXPECT_TRUE(throws_invalid_argument(build(send_elsewhere, receive_mr, {.slot_size = 128}),
                                        {"send_memory", "protection domain"}));
    EXPECT_TRUE(throws_invalid_argument(
        build(send_mr, receive_mr, {.slot_size = 128, .slots_per_peer = 1U << 20U}),
        {"slots_per_peer"}));
    // After all that, a good build on both ranks works.
    // peers_in_flight is a bound: more than the peers there are means all of them.
    PersistentAllToAll all_to_all(node, bootstrap, send_mr, receive_mr,
                                  {.slot_size = 128, .peers_in_flight = 5});
    EXPECT_EQ(all_to_all.settings().peers_in_flight, 1U);
    EXPECT_FALSE(all_to_all.failed());
  });
}

TEST(AllToAllBadInput, SettingsThatDifferBetweenRanksNameTheRank) {
  run_ranks(2, [&](net::Node& node, net::Bootstrap& bootstrap) {
    const std::size_t slot = node.rank() == 0 ? 64 : 128;
    std::vector<std::byte> send(std::size_t{256});
    std::vector<std::byte> receive(std::size_t{4} * slot);
    const MemoryRegion send_mr = node.protection_domain().register_local(send);
    const MemoryRegion receive_mr =
        node.protection_domain().register_remote_accessible(receive, RemoteAccess::write());
    const std::string other = "rank " + std::to_string(1 - node.rank());
    EXPECT_TRUE(throws_invalid_argument(
        [&] {
          (void)PersistentAllToAll(node, bootstrap, send_mr, receive_mr, {.slot_size = slot});
        },
        {other, "slot_size", "same shape"}));
  });
}

TEST(AllToAllBadInput, BadPartsAreRefusedBeforeAnythingIsPostedAndTheRoundStillRuns) {
  run_ranks(2, [&](net::Node& node, net::Bootstrap& bootstrap) {
    Rank rank(node, bootstrap, {.slot_size = 100, .timeout = 20s}, 3);  // rounds 0 to 2 apart
    PersistentAllToAll& all_to_all = rank.all_to_all();
    std::vector<std::byte> outside(std::size_t{16});
    const std::span<const std::byte> inside = rank.send().first(10);
    const std::vector<std::span<const std::byte>> one_part{inside};
    const std::vector<std::span<const std::byte>> too_big{inside, rank.send().first(101)};
    const std::vector<std::span<const std::byte>> elsewhere{inside, std::span(outside)};
    EXPECT_TRUE(throws_invalid_argument([&] { all_to_all.start(one_part); },
                                        {"parts", "1 entries", "nothing was posted"}));
    EXPECT_TRUE(throws_invalid_argument([&] { all_to_all.start(too_big); },
                                        {"parts[1]", "101 bytes", "slot size 100"}));
    EXPECT_TRUE(
        throws_invalid_argument([&] { all_to_all.start(elsewhere); }, {"parts[1]", "send memory"}));
    EXPECT_TRUE(
        throws_error(ErrorKind::state, [&] { (void)all_to_all.wait(); }, {"no round is started"}));
    EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)all_to_all.poll(); }));
    all_to_all.start(rank.parts(0));
    all_to_all.start(rank.parts(1));  // two slots: two rounds may be in flight
    EXPECT_TRUE(throws_error(ErrorKind::state, [&] { all_to_all.start(rank.parts(2)); },
                             {"round 2 needs the slots of round 0", "2 in flight"}));
    const AllToAllRound round = all_to_all.wait();
    EXPECT_EQ(round.number(), 0U);
    rank.check(round);
    EXPECT_TRUE(throws_invalid_argument([&] { (void)round.part(2); }, {"source"}));
    rank.check(all_to_all.wait());
    EXPECT_EQ(all_to_all.rounds_started(), 2U);
    node.barrier();  // no rank ends its collective while a peer is in its last round
  });
}

TEST(AllToAllFault, ARankThatStopsCallingIsNamedWithinTheTimeoutAndCannotWriteAfterTheFence) {
  // Rank 2 stops after round 0 and stays alive. Ranks 0 and 1 time out in round 1 naming it,
  // and fence. Then rank 2 runs round 1 after all: its writes must fail, and the survivors'
  // receive memory must not change.
  std::atomic<int> survivors_done{0};
  std::atomic<bool> late_rank_done{false};
  auto wait_for = [](auto&& ready) {
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (!ready() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
  };
  run_ranks(
      3,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap, {.slot_size = 64, .timeout = 1s});
        PersistentAllToAll& all_to_all = rank.all_to_all();
        rank.check(all_to_all.run(rank.parts(0)));
        if (node.rank() == 2) {
          wait_for([&] { return survivors_done.load() == 2; });
          const auto late = error_of([&] { (void)all_to_all.run(rank.parts(1), 5s); });
          late_rank_done = true;
          ASSERT_TRUE(late.has_value()) << "round 1 passed without ranks 0 and 1";
          EXPECT_TRUE(late->kind() == ErrorKind::peer_gone || late->kind() == ErrorKind::timeout)
              << late->what();
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        const auto error = error_of([&] { (void)all_to_all.run(rank.parts(1)); });
        const auto took = std::chrono::steady_clock::now() - start;
        const std::vector<std::byte> before(rank.receive().begin(), rank.receive().end());
        ++survivors_done;
        ASSERT_TRUE(error.has_value());
        EXPECT_EQ(error->kind(), ErrorKind::timeout) << error->what();
        EXPECT_NE(std::string(error->what()).find("no part yet from rank 2"), std::string::npos)
            << error->what();
        EXPECT_LT(took, 3s);
        EXPECT_TRUE(all_to_all.failed());
        EXPECT_TRUE(throws_error(ErrorKind::state, [&] { all_to_all.start(rank.parts(2)); },
                                 {"failed earlier", "rank 2"}));
        wait_for([&] { return late_rank_done.load(); });
        EXPECT_TRUE(std::equal(before.begin(), before.end(), rank.receive().begin()))
            << "rank 2 wrote into rank " << node.rank() << "'s slots after the fence";
      },
      spin_briefly);
}

TEST(AllToAllFault, ARankWhoseQueuePairsVanishIsNamed) {
  // Rank 2 tears its collective down after round 0 (its queue pairs are destroyed, as a killed
  // process's are): the others' round 1 fails naming it, by a timeout or a failed write.
  std::atomic<int> survivors_done{0};
  run_ranks(
      3,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        std::optional<Rank> rank;
        rank.emplace(node, bootstrap, AllToAllSettings{.slot_size = 64, .timeout = 3s});
        rank->check(rank->all_to_all().run(rank->parts(0)));
        if (node.rank() == 2) {
          rank.reset();
          const auto until = std::chrono::steady_clock::now() + 30s;
          while (survivors_done.load() < 2 && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(1ms);
          }
          return;
        }
        std::this_thread::sleep_for(100ms);  // rank 2 is gone by now
        const auto error = error_of([&] { (void)rank->all_to_all().run(rank->parts(1)); });
        ++survivors_done;
        ASSERT_TRUE(error.has_value());
        EXPECT_TRUE(error->kind() == ErrorKind::timeout || error->kind() == ErrorKind::peer_gone)
            << error->what();
        EXPECT_NE(std::string(error->what()).find("rank 2"), std::string::npos) << error->what();
        EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)rank->all_to_all().poll(); }));
        // The fence let go of the registrations with the queue pairs: the handles are the only
        // owners left, so destroying them deregisters (the receive memory's key is dead then).
        EXPECT_EQ(rank->send_mr()->shared().use_count(), 1);
        EXPECT_EQ(rank->receive_mr()->shared().use_count(), 1);
      },
      spin_briefly);
}

TEST(AllToAll, RegionsWhoseHandlesAreDestroyedStayRegisteredWhileTheCollectiveLives) {
  // Every rank destroys both MemoryRegion handles right after the build: the collective's
  // shares keep the registrations (the send memory's local key, the receive memory's remote
  // key that the peers write with), so every round still carries every byte. They are
  // deregistered with the collective, not before and not never.
  run_ranks(
      3,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        std::optional<Rank> rank;
        rank.emplace(node, bootstrap, AllToAllSettings{.slot_size = 509, .timeout = 20s});
        EXPECT_EQ(rank->send_mr()->shared().use_count(), 2);  // the handle and the collective
        const std::weak_ptr<ibv_mr> send_registration = rank->send_mr()->shared();
        const std::weak_ptr<ibv_mr> receive_registration = rank->receive_mr()->shared();
        rank->send_mr().reset();
        rank->receive_mr().reset();
        EXPECT_FALSE(send_registration.expired());
        EXPECT_FALSE(receive_registration.expired());
        for (std::uint64_t n = 0; n < 6; ++n) rank->check(rank->all_to_all().run(rank->parts(n)));
        node.barrier();  // no rank ends its collective while a peer is in its last round
        rank.reset();    // the collective first, then the memory (Rank's members in order)
        EXPECT_TRUE(send_registration.expired());
        EXPECT_TRUE(receive_registration.expired());
      },
      spin_briefly);
}

TEST(AllToAll, EveryCallOfAMovedFromCollectiveThrowsState) {
  // The collective is moved away, mid-job, with a round held: every call on the moved-from
  // object is a state error saying so, while the held round and the collective it moved to
  // go on; assigning to the moved-from object makes it usable again. Building on a moved-from
  // Node or MemoryRegion is the same error.
  run_ranks(
      2,
      [&](net::Node& node, net::Bootstrap& bootstrap) {
        Rank rank(node, bootstrap, {.slot_size = 200, .timeout = 20s});
        PersistentAllToAll& original = rank.all_to_all();
        AllToAllRound held = original.run(rank.parts(0));
        PersistentAllToAll moved = std::move(original);
        const auto moved_from = [&](auto&& call) {
          return throws_error(ErrorKind::state, call, {"this PersistentAllToAll was moved from"});
        };
        // NOLINTBEGIN(bugprone-use-after-move): what a moved-from collective does is the point
        EXPECT_TRUE(moved_from([&] { original.start(rank.parts(1)); }));
        EXPECT_TRUE(moved_from([&] { (void)original.poll(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.wait(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.run(rank.parts(1)); }));
        EXPECT_TRUE(moved_from([&] { (void)original.rank(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.world_size(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.settings(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.rounds_started(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.failed(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.completion_fd(); }));
        EXPECT_TRUE(moved_from([&] { original.arm_completion_fd(); }));
        EXPECT_TRUE(moved_from([&] { (void)original.consume_completion_events(); }));
        // NOLINTEND(bugprone-use-after-move)
        rank.check(held);  // the round belongs to the collective it moved to
        EXPECT_EQ(moved.rounds_started(), 1U);
        rank.check(moved.run(rank.parts(1)));
        held.release();  // round 0's slots go back to the collective it moved to
        // Assigning to a moved-from collective is fine.
        original = std::move(moved);
        rank.check(original.run(rank.parts(2)));
        node.barrier();  // no rank ends its collective while a peer is in its last round

        MemoryRegion region = std::move(*rank.send_mr());
        net::Node taken = std::move(node);
        // NOLINTBEGIN(bugprone-use-after-move): building on moved-from objects is the point
        EXPECT_TRUE(throws_error(ErrorKind::state,
                                 [&] {
                                   (void)PersistentAllToAll(node, bootstrap, *rank.send_mr(),
                                                            region, {.slot_size = 200});
                                 },
                                 {"send_memory, a MemoryRegion, was moved from"}));
        EXPECT_TRUE(throws_error(ErrorKind::state,
                                 [&] {
                                   (void)PersistentAllToAll(node, bootstrap, region,
                                                            *rank.receive_mr(), {.slot_size = 200});
                                 },
                                 {"the Node was moved from"}));
        // NOLINTEND(bugprone-use-after-move)
      },
      spin_briefly);
}

TEST(AllToAll, ARoundOutlivingItsCollectiveHoldsNothing) {
  run_ranks(1, [&](net::Node& node, net::Bootstrap& bootstrap) {
    std::optional<Rank> rank;
    rank.emplace(node, bootstrap, AllToAllSettings{.slot_size = 32});
    AllToAllRound round = rank->all_to_all().run(rank->parts(0));
    rank->check(round);
    rank.reset();
    EXPECT_FALSE(round.holds_slots());
    EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)round.part(0); }, {"holds no slots"}));
    round.release();  // nothing to do, no harm
  });
}

}  // namespace
}  // namespace ibv::test
