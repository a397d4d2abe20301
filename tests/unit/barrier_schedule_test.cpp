// SPDX-License-Identifier: MIT
// Tests the barrier schedules: BarrierGroup validation, the round-count formulas, schedules
// checked by hand (n = 2, 3, 5), and a discrete-event simulation that runs every participant's
// schedule of consecutive barriers with random arrival times and message latencies, checking
// the barrier property, freedom from deadlock and the consistency of the schedules.
#include "ibv/net/barrier_schedule.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"

namespace {

using ibv::net::barrier_schedule;
using ibv::net::BarrierAlgorithm;
using ibv::net::BarrierGroup;
using ibv::net::BarrierStep;
using ibv::net::round_count;
using ibv_test::throws_invalid_argument;

using Schedule = std::vector<BarrierStep>;

constexpr std::array kAlgorithms = {BarrierAlgorithm::centralized, BarrierAlgorithm::binary_tree,
                                    BarrierAlgorithm::dissemination};

// ---------------------------------------------------------------------------------------------
// Independent statements of the documented round counts.
// ---------------------------------------------------------------------------------------------

std::size_t ceil_log2_by_loop(std::size_t n) {
  std::size_t k = 0;
  while ((std::size_t{1} << k) < n) ++k;
  return k;
}

std::size_t floor_log2_by_loop(std::size_t n) {
  std::size_t k = 0;
  while ((std::size_t{2} << k) <= n) ++k;
  return k;
}

std::size_t documented_rounds(BarrierAlgorithm algorithm, std::size_t n) {
  if (n == 1) return 0;
  switch (algorithm) {
    case BarrierAlgorithm::centralized: return 2;
    case BarrierAlgorithm::binary_tree: return 2 * floor_log2_by_loop(n);
    case BarrierAlgorithm::dissemination: return ceil_log2_by_loop(n);
  }
  return 0;
}

std::vector<Schedule> all_schedules(BarrierAlgorithm algorithm, const BarrierGroup& group) {
  std::vector<Schedule> schedules;
  schedules.reserve(group.size());
  for (const std::uint32_t rank : group.ranks()) {
    schedules.push_back(barrier_schedule(algorithm, group, rank));
  }
  return schedules;
}

std::string describe(BarrierAlgorithm algorithm, const BarrierGroup& group) {
  return std::string(to_string(algorithm)) + ", group of " + std::to_string(group.size()) +
         " in a world of " + std::to_string(group.world_size());
}

// Checks without running anything: the number of steps, that steps name only other group
// members in ascending order, and that the signals sent and the signals awaited are the same
// set of (round, sender, receiver). Returns the first problem, or "" when there is none.
std::string check_statically(BarrierAlgorithm algorithm, const BarrierGroup& group,
                             const std::vector<Schedule>& schedules) {
  const std::size_t rounds = documented_rounds(algorithm, group.size());
  if (round_count(algorithm, group.size()) != rounds) {
    return "round_count is " + std::to_string(round_count(algorithm, group.size())) +
           ", documented " + std::to_string(rounds);
  }
  using Signal = std::array<std::uint32_t, 3>;  // round, sender, receiver
  std::vector<Signal> sent;
  std::vector<Signal> awaited;
  for (std::size_t position = 0; position < group.size(); ++position) {
    const std::uint32_t me = group.rank_at(position);
    const Schedule& schedule = schedules[position];
    if (schedule.size() != rounds) {
      return "rank " + std::to_string(me) + " has " + std::to_string(schedule.size()) +
             " steps, not " + std::to_string(rounds);
    }
    for (std::size_t round = 0; round < rounds; ++round) {
      const auto r = static_cast<std::uint32_t>(round);
      for (const auto* list : {&schedule[round].signal, &schedule[round].wait_for}) {
        if (!std::is_sorted(list->begin(), list->end()) ||
            std::adjacent_find(list->begin(), list->end()) != list->end()) {
          return "rank " + std::to_string(me) + " round " + std::to_string(round) +
                 ": a list is not strictly ascending";
        }
        for (const std::uint32_t peer : *list) {
          if (peer == me || !group.contains(peer)) {
            return "rank " + std::to_string(me) + " round " + std::to_string(round) +
                   " names rank " + std::to_string(peer) + ", itself or not a member";
          }
        }
      }
      for (const std::uint32_t to : schedule[round].signal) sent.push_back({r, me, to});
      for (const std::uint32_t from : schedule[round].wait_for) awaited.push_back({r, from, me});
    }
  }
  std::sort(sent.begin(), sent.end());
  std::sort(awaited.begin(), awaited.end());
  std::vector<Signal> unmatched;
  std::set_difference(sent.begin(), sent.end(), awaited.begin(), awaited.end(),
                      std::back_inserter(unmatched));
  if (!unmatched.empty()) {
    return "rank " + std::to_string(unmatched[0][1]) + " signals rank " +
           std::to_string(unmatched[0][2]) + " in round " + std::to_string(unmatched[0][0]) +
           ", which does not wait for it";
  }
  std::set_difference(awaited.begin(), awaited.end(), sent.begin(), sent.end(),
                      std::back_inserter(unmatched));
  if (!unmatched.empty()) {
    return "rank " + std::to_string(unmatched[0][2]) + " waits for rank " +
           std::to_string(unmatched[0][1]) + " in round " + std::to_string(unmatched[0][0]) +
           ", which never signals it then";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// The simulation.
// ---------------------------------------------------------------------------------------------

// How arrivals and messages are spread in time (arbitrary units).
struct Timing {
  double arrival_spread;  // arrival at the first barrier: uniform in [0, spread)
  double min_latency;     // a signal reaches its receiver min..max after it was sent
  double max_latency;
  bool straggler;  // in every barrier one random participant arrives 1000 units late
};

// Four shapes of timing, chosen by seed: simultaneous arrivals on a fast network, arrivals
// spread wider than the latency, latencies much wider than the arrival spread, and a straggler.
Timing timing_for(std::uint32_t seed) {
  switch (seed % 4) {
    case 0: return {0.0, 1.0, 2.0, false};
    case 1: return {100.0, 1.0, 10.0, false};
    case 2: return {5.0, 1.0, 100.0, false};
    default: return {100.0, 1.0, 10.0, true};
  }
}

// Runs `epochs` consecutive barriers of all participants, as a Node would: a signal is an
// RDMA write of the sender's epoch into the receiver's slot for (round, sender), landing after a
// random latency (in order per slot), and a wait is satisfied when each awaited slot holds at
// least the current epoch; each slot must go through the epochs 0, 1, 2, ... one by one. Between
// barriers a participant works for a random time. Every signal also carries which participants the
// sender knows to have arrived at this epoch, so a participant that leaves without knowing of every
// arrival is caught whatever the timing. run() returns the first violation, or "" when every
// barrier held.
class Simulation {
 public:
  Simulation(const BarrierGroup& group, const std::vector<Schedule>& schedules, Timing timing,
             std::uint32_t seed, std::size_t epochs)
      : group_(group),
        timing_(timing),
        random_(seed),
        epochs_(epochs),
        n_(group.size()),
        words_((n_ + 63) / 64),
        arrived_(epochs, 0),
        participants_(n_) {
    for (std::size_t p = 0; p < n_; ++p) {
      Participant& participant = participants_[p];
      participant.knows.assign(epochs_ * words_, 0);
      for (const BarrierStep& step : schedules[p]) {
        Round round;
        for (const std::uint32_t rank : step.signal)
          round.signal.push_back(group.position_of(rank));
        for (const std::uint32_t rank : step.wait_for) {
          round.wait_for.push_back(group.position_of(rank));
        }
        round.slot.assign(round.wait_for.size(), -1);
        round.last_sent.assign(round.signal.size(), 0.0);
        participant.rounds.push_back(std::move(round));
      }
    }
    for (std::size_t e = 0; e < epochs_; ++e) {
      straggler_.push_back(std::uniform_int_distribution<std::size_t>(0, n_ - 1)(random_));
    }
  }

  std::string run() {
    std::uniform_real_distribution<double> arrival(0.0, timing_.arrival_spread);
    for (std::size_t p = 0; p < n_; ++p) {
      push({arrival_time(p, 0, timing_.arrival_spread > 0 ? arrival(random_) : 0.0), 0, false, p, 0,
            0, 0, 0});
    }
    while (!events_.empty() && failure_.empty()) {
      const Event event = events_.top();
      events_.pop();
      now_ = event.time;
      if (event.delivery) {
        deliver(event);
      } else {
        arrive(event.to);
      }
    }
    if (failure_.empty() && finished_ != n_ * epochs_) {
      for (std::size_t p = 0; p < n_; ++p) {
        const Participant& participant = participants_[p];
        if (participant.epoch < epochs_) {
          return "deadlock: rank " + std::to_string(group_.rank_at(p)) + " never leaves barrier " +
                 std::to_string(participant.epoch) + " (stuck in round " +
                 std::to_string(participant.round) + ")";
        }
      }
    }
    return failure_;
  }

 private:
  struct Round {
    std::vector<std::size_t> signal;    // positions
    std::vector<double> last_sent;      // delivery time of the last signal to signal[i]
    std::vector<std::size_t> wait_for;  // positions, ascending
    std::vector<long> slot;             // epoch last written by wait_for[i], -1 for none
  };
  struct Participant {
    std::vector<Round> rounds;
    std::size_t epoch = 0;  // the barrier it is in or will enter next
    std::size_t round = 0;
    bool active = false;               // inside barrier `epoch`
    std::size_t pending = 0;           // waits of the current round not yet satisfied
    std::vector<std::uint64_t> knows;  // per epoch: a bit per position known to have arrived
  };
  struct Event {
    double time;
    std::uint64_t sequence;  // ties broken by creation order, so runs are reproducible
    bool delivery;           // a signal arriving; otherwise a participant arriving
    std::size_t to;
    std::size_t from;
    std::size_t round;
    std::size_t epoch;
    std::size_t payload;  // index into payloads_: the sender's knowledge
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.sequence > b.sequence;
    }
  };

  double arrival_time(std::size_t p, std::size_t epoch, double delay) const {
    return now_ + delay + (timing_.straggler && straggler_[epoch] == p ? 1000.0 : 0.0);
  }

  void push(Event event) {
    event.sequence = sequence_++;
    events_.push(event);
  }

  std::uint64_t* knows(std::size_t p, std::size_t epoch) {
    return participants_[p].knows.data() + (epoch * words_);
  }

  void arrive(std::size_t p) {
    Participant& participant = participants_[p];
    ++arrived_[participant.epoch];
    participant.active = true;
    participant.round = 0;
    knows(p, participant.epoch)[p / 64] |= std::uint64_t{1} << (p % 64);
    run_rounds(p);
  }

  // From the start of the current round: signal, then wait; on to the next round while no wait
  // is pending; leave after the last round.
  void run_rounds(std::size_t p) {
    Participant& participant = participants_[p];
    const auto epoch = static_cast<long>(participant.epoch);
    while (participant.round < participant.rounds.size()) {
      Round& round = participant.rounds[participant.round];
      for (std::size_t i = 0; i < round.signal.size(); ++i) send(p, i);
      participant.pending = static_cast<std::size_t>(
          std::count_if(round.slot.begin(), round.slot.end(), [&](long s) { return s < epoch; }));
      if (participant.pending > 0) return;
      ++participant.round;
    }
    leave(p);
  }

  // Participant `from` signals the i-th receiver of its current round.
  void send(std::size_t from, std::size_t i) {
    const Participant& sender = participants_[from];
    const std::size_t epoch = sender.epoch;
    Round& round = participants_[from].rounds[sender.round];
    std::size_t payload = 0;
    if (free_payloads_.empty()) {
      payload = payloads_.size();
      payloads_.emplace_back();
    } else {
      payload = free_payloads_.back();
      free_payloads_.pop_back();
    }
    const std::uint64_t* known = knows(from, epoch);
    payloads_[payload].assign(known, known + words_);
    std::uniform_real_distribution<double> latency(timing_.min_latency, timing_.max_latency);
    // An RC queue pair delivers a sender's writes to one receiver in order. The simulation
    // keeps only the order into each slot, so signals into different slots may overtake each
    // other: a harsher network than RC, which the schedules must not depend on.
    double& last = round.last_sent[i];
    last = std::max(now_ + latency(random_), last);
    push({last, 0, true, round.signal[i], from, sender.round, epoch, payload});
  }

  void deliver(const Event& event) {
    Participant& receiver = participants_[event.to];
    Round& round = receiver.rounds[event.round];
    const auto found = std::lower_bound(round.wait_for.begin(), round.wait_for.end(), event.from);
    if (found == round.wait_for.end() || *found != event.from) {
      fail("rank " + rank(event.from) + " signals rank " + rank(event.to) + " in round " +
           std::to_string(event.round) + ", which does not wait for it");
      return;
    }
    long& slot = round.slot[static_cast<std::size_t>(found - round.wait_for.begin())];
    if (slot != static_cast<long>(event.epoch) - 1) {
      fail("rank " + rank(event.from) + " writes epoch " + std::to_string(event.epoch) +
           " over epoch " + std::to_string(slot) + " in its round " + std::to_string(event.round) +
           " slot at rank " + rank(event.to));
      return;
    }
    slot = static_cast<long>(event.epoch);
    std::uint64_t* known = knows(event.to, event.epoch);
    const std::vector<std::uint64_t>& carried = payloads_[event.payload];
    for (std::size_t w = 0; w < words_; ++w) known[w] |= carried[w];
    free_payloads_.push_back(event.payload);
    if (receiver.active && receiver.epoch == event.epoch && receiver.round == event.round &&
        --receiver.pending == 0) {
      ++receiver.round;
      run_rounds(event.to);
    }
  }

  void leave(std::size_t p) {
    Participant& participant = participants_[p];
    const std::size_t epoch = participant.epoch;
    if (arrived_[epoch] != n_) {
      fail("rank " + rank(p) + " leaves barrier " + std::to_string(epoch) + " when only " +
           std::to_string(arrived_[epoch]) + " of " + std::to_string(n_) + " have arrived");
      return;
    }
    const std::uint64_t* known = knows(p, epoch);
    for (std::size_t w = 0; w < words_; ++w) {
      const std::size_t bits = std::min<std::size_t>(64, n_ - (w * 64));
      const std::uint64_t all = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
      if (known[w] != all) {
        const auto q = (w * 64) + static_cast<std::size_t>(std::countr_one(known[w]));
        fail("rank " + rank(p) + " leaves barrier " + std::to_string(epoch) +
             " without having heard (even indirectly) of rank " + rank(q));
        return;
      }
    }
    ++finished_;
    participant.active = false;
    ++participant.epoch;
    if (participant.epoch < epochs_) {
      std::uniform_real_distribution<double> work(0.0, timing_.arrival_spread);
      const double delay = timing_.arrival_spread > 0 ? work(random_) : 0.0;
      push({arrival_time(p, participant.epoch, delay), 0, false, p, 0, 0, 0, 0});
    }
  }

  void fail(std::string message) {
    if (failure_.empty()) failure_ = std::move(message);
  }

  std::string rank(std::size_t position) const { return std::to_string(group_.rank_at(position)); }

  const BarrierGroup& group_;
  Timing timing_;
  std::mt19937 random_;
  std::size_t epochs_;
  std::size_t n_;
  std::size_t words_;
  std::vector<std::size_t> arrived_;  // per epoch
  std::vector<Participant> participants_;
  std::vector<std::size_t> straggler_;  // per epoch
  std::priority_queue<Event, std::vector<Event>, Later> events_;
  std::uint64_t sequence_ = 0;
  double now_ = 0.0;
  std::size_t finished_ = 0;
  std::vector<std::vector<std::uint64_t>> payloads_;
  std::vector<std::size_t> free_payloads_;
  std::string failure_;
};

// Static checks, then `runs` simulations of three consecutive barriers with seeds
// first_seed, first_seed + 1, ...
void check_group(BarrierAlgorithm algorithm, const BarrierGroup& group, std::uint32_t first_seed,
                 std::uint32_t runs) {
  const std::vector<Schedule> schedules = all_schedules(algorithm, group);
  ASSERT_EQ(check_statically(algorithm, group, schedules), "") << describe(algorithm, group);
  for (std::uint32_t seed = first_seed; seed < first_seed + runs; ++seed) {
    Simulation simulation(group, schedules, timing_for(seed), seed, 3);
    ASSERT_EQ(simulation.run(), "") << describe(algorithm, group) << ", seed " << seed;
  }
}

class BarrierSimulation : public ::testing::TestWithParam<BarrierAlgorithm> {};

TEST_P(BarrierSimulation, EveryWorldOfOneTo64Ranks) {
  for (std::uint32_t n = 1; n <= 64; ++n) {
    check_group(GetParam(), BarrierGroup::all(n), n * 1000, 24);
  }
}

TEST_P(BarrierSimulation, WorldsOf1000And4096Ranks) {
  check_group(GetParam(), BarrierGroup::all(1000), 1, 4);
  check_group(GetParam(), BarrierGroup::all(4096), 7, 2);
}

TEST_P(BarrierSimulation, RandomSubsetsOfAWorldOf64) {
  std::mt19937 random(2024);
  std::vector<std::uint32_t> world(64);
  std::iota(world.begin(), world.end(), 0U);
  for (std::uint32_t trial = 0; trial < 300; ++trial) {
    std::shuffle(world.begin(), world.end(), random);
    const auto size = std::uniform_int_distribution<std::size_t>(1, 64)(random);
    std::vector<std::uint32_t> ranks(world.begin(),
                                     world.begin() + static_cast<std::ptrdiff_t>(size));
    std::sort(ranks.begin(), ranks.end());
    const std::uint32_t me = ranks[std::uniform_int_distribution<std::size_t>(0, size - 1)(random)];
    check_group(GetParam(), BarrierGroup::subset(ranks, me, 64), trial * 10, 4);
  }
}

TEST_P(BarrierSimulation, ASparseSubsetOfAWorldOf4096) {
  std::vector<std::uint32_t> ranks;
  for (std::uint32_t rank = 3; rank < 4096; rank += 7) ranks.push_back(rank);  // 585 ranks
  check_group(GetParam(), BarrierGroup::subset(ranks, 4091, 4096), 99, 4);
}

INSTANTIATE_TEST_SUITE_P(Barrier, BarrierSimulation, ::testing::ValuesIn(kAlgorithms),
                         [](const auto& test) { return std::string(to_string(test.param)); });

// ---------------------------------------------------------------------------------------------
// Round counts and hand-checked schedules.
// ---------------------------------------------------------------------------------------------

TEST(BarrierSchedule, RoundCountsFollowTheDocumentedFormulas) {
  for (std::size_t n = 1; n <= 5000; ++n) {
    for (const BarrierAlgorithm algorithm : kAlgorithms) {
      EXPECT_EQ(round_count(algorithm, n), documented_rounds(algorithm, n))
          << to_string(algorithm) << " n=" << n;
    }
  }
  EXPECT_EQ(round_count(BarrierAlgorithm::dissemination, 4096), 12U);
  EXPECT_EQ(round_count(BarrierAlgorithm::dissemination, 4097), 13U);
  EXPECT_EQ(round_count(BarrierAlgorithm::binary_tree, 7), 4U);
  EXPECT_EQ(round_count(BarrierAlgorithm::binary_tree, 8), 6U);
  EXPECT_EQ(round_count(BarrierAlgorithm::centralized, 1000), 2U);
}

TEST(BarrierSchedule, OneParticipantHasNoRounds) {
  for (const BarrierAlgorithm algorithm : kAlgorithms) {
    EXPECT_EQ(round_count(algorithm, 1), 0U);
    EXPECT_TRUE(barrier_schedule(algorithm, BarrierGroup::all(1), 0).empty());
    EXPECT_TRUE(barrier_schedule(algorithm, BarrierGroup::subset({9}, 9, 10), 9).empty());
  }
}

TEST(BarrierSchedule, TwoParticipants) {
  const auto group = BarrierGroup::all(2);
  const Schedule leader = {{{}, {1}}, {{1}, {}}};
  const Schedule other = {{{0}, {}}, {{}, {0}}};
  for (const auto algorithm : {BarrierAlgorithm::centralized, BarrierAlgorithm::binary_tree}) {
    EXPECT_EQ(barrier_schedule(algorithm, group, 0), leader) << to_string(algorithm);
    EXPECT_EQ(barrier_schedule(algorithm, group, 1), other) << to_string(algorithm);
  }
  EXPECT_EQ(barrier_schedule(BarrierAlgorithm::dissemination, group, 0), (Schedule{{{1}, {1}}}));
  EXPECT_EQ(barrier_schedule(BarrierAlgorithm::dissemination, group, 1), (Schedule{{{0}, {0}}}));
}

TEST(BarrierSchedule, ThreeParticipants) {
  const auto group = BarrierGroup::all(3);
  // The tree of three is the root with two leaves: the same rounds as the centralized barrier.
  for (const auto algorithm : {BarrierAlgorithm::centralized, BarrierAlgorithm::binary_tree}) {
    EXPECT_EQ(barrier_schedule(algorithm, group, 0), (Schedule{{{}, {1, 2}}, {{1, 2}, {}}}));
    EXPECT_EQ(barrier_schedule(algorithm, group, 1), (Schedule{{{0}, {}}, {{}, {0}}}));
    EXPECT_EQ(barrier_schedule(algorithm, group, 2), (Schedule{{{0}, {}}, {{}, {0}}}));
  }
  // Round 0: p -> p+1; round 1: p -> p+2 (mod 3).
  const auto dissemination = BarrierAlgorithm::dissemination;
  EXPECT_EQ(barrier_schedule(dissemination, group, 0), (Schedule{{{1}, {2}}, {{2}, {1}}}));
  EXPECT_EQ(barrier_schedule(dissemination, group, 1), (Schedule{{{2}, {0}}, {{0}, {2}}}));
  EXPECT_EQ(barrier_schedule(dissemination, group, 2), (Schedule{{{0}, {1}}, {{1}, {0}}}));
}

TEST(BarrierSchedule, FiveParticipantsOfASubsetUseGlobalRanks) {
  // Positions 0..4 are ranks 2, 5, 7, 11, 13 of a world of 16.
  const auto group = BarrierGroup::subset({2, 5, 7, 11, 13}, 7, 16);

  const auto centralized = BarrierAlgorithm::centralized;
  EXPECT_EQ(barrier_schedule(centralized, group, 2),
            (Schedule{{{}, {5, 7, 11, 13}}, {{5, 7, 11, 13}, {}}}));
  EXPECT_EQ(barrier_schedule(centralized, group, 13), (Schedule{{{2}, {}}, {{}, {2}}}));

  // Tree: 2 is the root, 5 and 7 its children, 11 and 13 the children of 5; height 2, so two
  // reduce rounds (leaves of depth 2 first) and two broadcast rounds.
  const auto tree = BarrierAlgorithm::binary_tree;
  EXPECT_EQ(barrier_schedule(tree, group, 2),
            (Schedule{{{}, {}}, {{}, {5, 7}}, {{5, 7}, {}}, {{}, {}}}));
  EXPECT_EQ(barrier_schedule(tree, group, 5),
            (Schedule{{{}, {11, 13}}, {{2}, {}}, {{}, {2}}, {{11, 13}, {}}}));
  EXPECT_EQ(barrier_schedule(tree, group, 7), (Schedule{{{}, {}}, {{2}, {}}, {{}, {2}}, {{}, {}}}));
  for (const std::uint32_t leaf : {11U, 13U}) {
    EXPECT_EQ(barrier_schedule(tree, group, leaf),
              (Schedule{{{5}, {}}, {{}, {}}, {{}, {}}, {{}, {5}}}));
  }

  // Dissemination: distances 1, 2, 4. Rank 11 is position 3: it signals positions 4, 0, 2 and
  // waits for positions 2, 1, 4.
  const auto dissemination = BarrierAlgorithm::dissemination;
  EXPECT_EQ(barrier_schedule(dissemination, group, 11),
            (Schedule{{{13}, {7}}, {{2}, {5}}, {{7}, {13}}}));
  EXPECT_EQ(barrier_schedule(dissemination, group, 2),
            (Schedule{{{5}, {13}}, {{7}, {11}}, {{13}, {5}}}));
}

TEST(BarrierSchedule, RejectsACallerOutsideTheGroup) {
  const auto group = BarrierGroup::subset({1, 4}, 4, 8);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)barrier_schedule(BarrierAlgorithm::dissemination, group, 2); },
      {"barrier_schedule", "me", "rank 2", "not a member"}));
}

TEST(BarrierSchedule, RejectsAnUnknownAlgorithm) {
  const auto bogus = static_cast<BarrierAlgorithm>(7);
  EXPECT_EQ(to_string(bogus), "unknown");
  EXPECT_TRUE(throws_invalid_argument([&] { (void)round_count(bogus, 4); },
                                      {"round_count", "algorithm", "value 7"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)barrier_schedule(bogus, BarrierGroup::all(1), 0); },
                              {"barrier_schedule", "algorithm", "value 7"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)round_count(BarrierAlgorithm::centralized, 0); },
                                      {"group_size", "is 0"}));
}

TEST(BarrierAlgorithm, Names) {
  EXPECT_EQ(to_string(BarrierAlgorithm::centralized), "centralized");
  EXPECT_EQ(to_string(BarrierAlgorithm::binary_tree), "binary_tree");
  EXPECT_EQ(to_string(BarrierAlgorithm::dissemination), "dissemination");
}

// ---------------------------------------------------------------------------------------------
// BarrierGroup.
// ---------------------------------------------------------------------------------------------

TEST(BarrierGroup, AllIsEveryRankOfTheWorld) {
  const auto group = BarrierGroup::all(5);
  EXPECT_EQ(group.size(), 5U);
  EXPECT_EQ(group.world_size(), 5U);
  EXPECT_EQ(std::vector<std::uint32_t>(group.ranks().begin(), group.ranks().end()),
            (std::vector<std::uint32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(group, BarrierGroup::subset({0, 1, 2, 3, 4}, 3, 5));
  EXPECT_TRUE(throws_invalid_argument([] { (void)BarrierGroup::all(0); },
                                      {"BarrierGroup::all", "world_size", "is 0"}));
}

TEST(BarrierGroup, PositionsAndRanks) {
  const auto group = BarrierGroup::subset({3, 8, 20}, 8, 32);
  EXPECT_EQ(group.size(), 3U);
  EXPECT_EQ(group.world_size(), 32U);
  EXPECT_EQ(group.rank_at(0), 3U);
  EXPECT_EQ(group.rank_at(2), 20U);
  EXPECT_EQ(group.position_of(3), 0U);
  EXPECT_EQ(group.position_of(8), 1U);
  EXPECT_EQ(group.position_of(20), 2U);
  EXPECT_TRUE(group.contains(8));
  EXPECT_FALSE(group.contains(9));
  EXPECT_FALSE(group.contains(31));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)group.position_of(9); },
                                      {"BarrierGroup::position_of", "9", "not a member"}));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)group.rank_at(3); },
                                      {"BarrierGroup::rank_at", "position", "3", "size 3"}));
  EXPECT_NE(group, BarrierGroup::subset({3, 8, 20}, 8, 33));
}

TEST(BarrierGroup, SubsetRejectsAnEmptyList) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)BarrierGroup::subset({}, 0, 4); },
                                      {"BarrierGroup::subset", "ranks is empty"}));
}

TEST(BarrierGroup, SubsetRejectsAZeroWorld) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)BarrierGroup::subset({0}, 0, 0); },
                                      {"BarrierGroup::subset", "world_size is 0"}));
}

TEST(BarrierGroup, SubsetNamesTheFirstOutOfOrderPosition) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)BarrierGroup::subset({1, 4, 6, 5, 2}, 1, 8);
      },
      {"ranks is not in ascending order", "ranks[3] = 5 follows ranks[2] = 6"}));
}

TEST(BarrierGroup, SubsetNamesADuplicate) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)BarrierGroup::subset({0, 2, 2, 3}, 0, 8);
      },
      {"ranks lists rank 2 twice", "ranks[1] and ranks[2]"}));
}

TEST(BarrierGroup, SubsetNamesARankOutsideTheWorld) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)BarrierGroup::subset({0, 3, 8}, 0, 8);
      },
      {"contains rank 8 (ranks[2])", "outside the world of 8 ranks (0..7)"}));
}

TEST(BarrierGroup, SubsetRejectsACallerThatIsNotIncluded) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)BarrierGroup::subset({0, 3, 5}, 4, 8);
      },
      {"me (rank 4) is not in ranks"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)BarrierGroup::subset({0, 3, 5}, 9, 8);
      },
      {"me (rank 9) is not in ranks"}));
}

}  // namespace
