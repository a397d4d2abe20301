// SPDX-License-Identifier: MIT
// Tests the agreement state machine (src/net/agreement.hpp) in a deterministic simulator: N
// ranks, per-pair FIFO channels, a scheduler (oldest message first, or seeded random), scripted
// crashes (after a rank's k-th message, or in the step it decides; its undelivered messages
// dropped or still delivered) and failure notices at the scheduler's choice. Every run checks
// termination (within a step bound), uniform agreement, validity and the failed set. Also the
// failure-free cost, the wire form and the argument checks.
#include "net/agreement.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/error.hpp"
#include "support/error_matchers.hpp"

namespace {
namespace agreement_test {

using ibv::ErrorKind;
using ibv::net::detail::Agreement;
using ibv::net::detail::AgreementMessage;
using ibv::net::detail::AgreementValue;
using ibv::net::detail::Ballot;
using ibv::net::detail::decode_agreement_message;
using ibv::net::detail::encode_agreement_message;
using ibv::net::detail::Proposal;
using ibv::net::detail::RankSet;
using ibv_test::throws_error;
using ibv_test::throws_invalid_argument;
namespace message = ibv::net::detail::agreement;

// Rank r contributes every flag but bit r % 32, so (for N <= 32) the decided flags say exactly
// whose contributions went in.
std::uint32_t flags_of(std::uint32_t rank) { return ~(1U << (rank % 32)); }

std::uint32_t ceil_log2(std::uint32_t n) {
  std::uint32_t k = 0;
  while ((1U << k) < n) ++k;
  return k;
}

// ---------------------------------------------------------------------------------------------
// The simulator.
// ---------------------------------------------------------------------------------------------

enum class Order : std::uint8_t { oldest, random };
// When failure notices are delivered: as soon as they are pending, only when nothing else is,
// or (random order only) like any other event.
enum class Notices : std::uint8_t { early, late, anytime };

struct Schedule {
  Order order = Order::oldest;
  Notices notices = Notices::late;
  std::uint32_t seed = 0;
};

// Two deterministic schedules and six seeded random ones.
const std::vector<Schedule> kSchedules = {
    {Order::oldest, Notices::late, 0},    {Order::oldest, Notices::early, 0},
    {Order::random, Notices::anytime, 1}, {Order::random, Notices::anytime, 2},
    {Order::random, Notices::anytime, 3}, {Order::random, Notices::late, 4},
    {Order::random, Notices::late, 5},    {Order::random, Notices::early, 6}};

struct Crash {
  std::uint32_t rank = 0;
  // Without after_deciding: the rank crashes once it has sent `after_sent` messages (0: before
  // it starts); the rest of that step's messages are lost. With it: in the step in which it
  // decides, after sending `after_sent` of that step's messages.
  std::uint64_t after_sent = 0;
  bool after_deciding = false;
  bool deliver_leftovers = false;  // its messages still in the channels may yet arrive
};

struct Scenario {
  std::uint32_t world = 1;
  std::vector<RankSet> known_failed;  // per rank, or empty; the ranks named never run
  std::vector<Crash> crashes;
  Schedule schedule;
  bool through_wire = false;  // every message goes through encode and decode
};

std::string describe(const Scenario& scenario) {
  std::string text = "N=" + std::to_string(scenario.world);
  for (std::size_t r = 0; r < scenario.known_failed.size(); ++r) {
    if (scenario.known_failed[r].empty()) continue;
    text += ", rank " + std::to_string(r) + " knows failed {";
    for (const std::uint32_t f : scenario.known_failed[r]) text += std::to_string(f) + " ";
    text += "}";
  }
  for (const Crash& crash : scenario.crashes) {
    text += ", rank " + std::to_string(crash.rank) + " crashes " +
            (crash.after_deciding ? "deciding, after " : "after ") +
            std::to_string(crash.after_sent) + " sent" +
            (crash.deliver_leftovers ? " (leftovers delivered)" : "");
  }
  text += scenario.schedule.order == Order::oldest ? ", oldest first" : ", random";
  text += std::string(", notices ") + (scenario.schedule.notices == Notices::early  ? "early"
                                       : scenario.schedule.notices == Notices::late ? "late"
                                                                                    : "anytime");
  return text + ", seed " + std::to_string(scenario.schedule.seed);
}

class Simulation {
 public:
  static constexpr std::size_t kStepBound = 200'000;

  explicit Simulation(Scenario scenario)
      : scenario_(std::move(scenario)),
        n_(scenario_.world),
        random_(scenario_.schedule.seed),
        channels_(std::size_t{n_} * n_),
        alive_(n_, true),
        sent_(n_, 0),
        triggered_(scenario_.crashes.size(), false),
        cut_(scenario_.crashes.size(), false) {
    scenario_.known_failed.resize(n_);
    for (const RankSet& known : scenario_.known_failed) never_ran_.unite(known);
    for (std::uint32_t r = 0; r < n_; ++r) {
      const bool runs = !never_ran_.contains(r);
      agents_.emplace_back(r, n_, 7, runs ? scenario_.known_failed[r] : RankSet{},
                           AgreementValue{.flags = flags_of(r), .failed = {}});
      if (!runs) {
        alive_[r] = false;
        crashed_.insert(r);
        continue;
      }
      unstarted_.insert(r);
      for (const std::uint32_t f : never_ran_) {
        if (!scenario_.known_failed[r].contains(f)) notices_.emplace_back(r, f);
      }
    }
    for (std::size_t i = 0; i < scenario_.crashes.size(); ++i) {
      const Crash& crash = scenario_.crashes[i];
      if (!crash.after_deciding && crash.after_sent == 0 && alive_[crash.rank]) {
        triggered_[i] = true;
        cut_[i] = true;
        crash_rank(crash.rank, crash.deliver_leftovers);
      }
    }
  }

  // Runs until no event is left or the step bound is reached.
  void run() {
    while (steps_ < kStepBound && step()) ++steps_;
  }

  // The first property the run violates, or "".
  [[nodiscard]] std::string check() const {
    if (steps_ >= kStepBound) return "no end within " + std::to_string(kStepBound) + " steps";
    const AgreementValue* first = nullptr;
    std::uint32_t first_rank = 0;
    std::uint32_t required = ~0U;  // AND of the survivors' contributions
    std::uint32_t allowed = ~0U;   // AND of every contribution that could have gone in
    RankSet known;
    for (std::uint32_t r = 0; r < n_; ++r) {
      if (never_ran_.contains(r)) continue;
      known.unite(scenario_.known_failed[r]);
      allowed &= flags_of(r);
      if (alive_[r]) required &= flags_of(r);
      const auto& decided = agents_[r].decided();
      if (!decided) {
        if (alive_[r]) return "survivor " + std::to_string(r) + " did not decide";
        continue;
      }
      if (first == nullptr) {
        first = &*decided;
        first_rank = r;
      } else if (*decided != *first) {
        return "ranks " + std::to_string(first_rank) + " and " + std::to_string(r) +
               " decided differently";
      }
    }
    if (first == nullptr) return "";
    if ((first->flags & ~required) != 0) return "a survivor's contribution is missing";
    if ((allowed & ~first->flags) != 0) return "flags cleared by no contribution";
    for (const std::uint32_t f : first->failed) {
      if (!crashed_.contains(f)) return "rank " + std::to_string(f) + " decided failed but alive";
    }
    for (const std::uint32_t f : known) {
      if (!first->failed.contains(f)) return "known failure " + std::to_string(f) + " missing";
    }
    return "";
  }

  [[nodiscard]] const Agreement& agent(std::uint32_t rank) const { return agents_[rank]; }
  [[nodiscard]] bool alive(std::uint32_t rank) const { return alive_[rank]; }
  // Whether the crash happened and cut something short: a crash point was reached, or the
  // deciding step lost messages.
  [[nodiscard]] bool cut(std::size_t crash) const { return cut_[crash]; }
  [[nodiscard]] std::size_t steps() const { return steps_; }

 private:
  struct Queued {
    std::uint64_t sequence = 0;
    AgreementMessage message;
  };
  enum class Kind : std::uint8_t { start, deliver, notice };
  struct Event {
    Kind kind = Kind::start;
    std::uint32_t a = 0;  // start: the rank; deliver: the channel; notice: index into notices_
  };

  std::size_t pick(std::size_t count) {
    return std::uniform_int_distribution<std::size_t>(0, count - 1)(random_);
  }

  // The next event by the schedule (Notices::anytime with Order::random only).
  std::optional<Event> choose() {
    const Schedule& schedule = scenario_.schedule;
    const bool random = schedule.order == Order::random;
    const std::size_t work = unstarted_.size() + busy_.size();  // starts and deliveries
    const std::size_t notices = notices_.size();
    if (notices > 0 && (schedule.notices == Notices::early || work == 0)) {
      return Event{Kind::notice, static_cast<std::uint32_t>(random ? pick(notices) : 0)};
    }
    if (work == 0) return std::nullopt;
    if (random) {
      const std::size_t i = pick(work + (schedule.notices == Notices::anytime ? notices : 0));
      const auto nth = [](const std::set<std::uint32_t>& set, std::size_t n) {
        return *std::next(set.begin(), static_cast<std::ptrdiff_t>(n));
      };
      if (i < unstarted_.size()) return Event{Kind::start, nth(unstarted_, i)};
      if (i < work) return Event{Kind::deliver, nth(busy_, i - unstarted_.size())};
      return Event{Kind::notice, static_cast<std::uint32_t>(i - work)};
    }
    if (!unstarted_.empty()) return Event{Kind::start, *unstarted_.begin()};
    // The message sent first, over all channels.
    return Event{
        Kind::deliver,
        *std::min_element(busy_.begin(), busy_.end(), [this](std::uint32_t x, std::uint32_t y) {
          return channels_[x].front().sequence < channels_[y].front().sequence;
        })};
  }

  bool step() {
    const std::optional<Event> event = choose();
    if (!event) return false;
    std::uint32_t rank = 0;
    if (event->kind == Kind::start) {
      rank = event->a;
      unstarted_.erase(rank);
      before_ = agents_[rank].decided().has_value();
      agents_[rank].start();
    } else if (event->kind == Kind::deliver) {
      const std::uint32_t from = event->a / n_;
      rank = event->a % n_;
      const AgreementMessage delivered = std::move(channels_[event->a].front().message);
      channels_[event->a].pop_front();
      if (channels_[event->a].empty()) busy_.erase(event->a);
      before_ = agents_[rank].decided().has_value();
      agents_[rank].on_message(from, delivered);
    } else {
      const auto [to, failed] = notices_[event->a];
      notices_.erase(notices_.begin() + event->a);
      rank = to;
      before_ = agents_[rank].decided().has_value();
      agents_[rank].on_failure(failed);
    }
    after_step(rank);
    return true;
  }

  // Moves the rank's messages into the channels, crashing it when its crash is due.
  void after_step(std::uint32_t rank) {
    std::vector<ibv::net::detail::AgreementOutgoing> out = agents_[rank].take_outbox();
    std::size_t allowed = out.size();
    std::optional<std::size_t> due;
    for (std::size_t i = 0; i < scenario_.crashes.size(); ++i) {
      const Crash& crash = scenario_.crashes[i];
      if (crash.rank != rank || triggered_[i]) continue;
      if (crash.after_deciding && !before_ && agents_[rank].decided()) {
        allowed = std::min<std::size_t>(allowed, crash.after_sent);
        due = i;
      } else if (!crash.after_deciding && sent_[rank] + out.size() >= crash.after_sent) {
        allowed = crash.after_sent - sent_[rank];
        due = i;
      }
    }
    for (std::size_t i = 0; i < allowed; ++i) {
      AgreementMessage sent = std::move(out[i].message);
      if (scenario_.through_wire) sent = decode_agreement_message(encode_agreement_message(sent));
      ++sent_[rank];
      const std::uint32_t to = out[i].to;
      if (!alive_[to]) continue;
      const std::uint32_t channel = (rank * n_) + to;
      channels_[channel].push_back({sequence_++, std::move(sent)});
      busy_.insert(channel);
    }
    if (due) {
      triggered_[*due] = true;
      cut_[*due] = !scenario_.crashes[*due].after_deciding || allowed < out.size();
      crash_rank(rank, scenario_.crashes[*due].deliver_leftovers);
    }
  }

  void crash_rank(std::uint32_t rank, bool deliver_leftovers) {
    alive_[rank] = false;
    crashed_.insert(rank);
    unstarted_.erase(rank);
    for (std::uint32_t other = 0; other < n_; ++other) {
      clear(other * n_ + rank);
      if (!deliver_leftovers) clear(rank * n_ + other);
    }
    std::erase_if(notices_, [rank](const auto& notice) { return notice.first == rank; });
    for (std::uint32_t other = 0; other < n_; ++other) {
      if (alive_[other]) notices_.emplace_back(other, rank);
    }
  }

  void clear(std::uint32_t channel) {
    channels_[channel].clear();
    busy_.erase(channel);
  }

  Scenario scenario_;
  std::uint32_t n_;
  std::mt19937 random_;
  std::vector<Agreement> agents_;
  std::vector<std::deque<Queued>> channels_;  // from * n + to
  std::set<std::uint32_t> busy_;              // the channels that hold a message
  std::set<std::uint32_t> unstarted_;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> notices_;  // (to, failed rank)
  std::vector<bool> alive_;
  std::vector<std::uint64_t> sent_;
  std::vector<bool> triggered_;
  std::vector<bool> cut_;
  RankSet crashed_;
  RankSet never_ran_;
  std::uint64_t sequence_ = 0;
  std::size_t steps_ = 0;
  bool before_ = false;  // whether the stepping rank had decided before the step
};

// Runs the scenario and reports a violated property with the scenario; returns the simulation.
Simulation run_checked(const Scenario& scenario) {
  Simulation simulation(scenario);
  simulation.run();
  const std::string problem = simulation.check();
  EXPECT_EQ(problem, "") << describe(scenario);
  return simulation;
}

// Runs one crash of `crash.rank` with crash points 0, 1, 2, ... until the crash no longer cuts
// anything short (under every schedule and both fates of its leftovers), after the crashes
// `also`. Returns the number of runs.
std::size_t every_crash_point(std::uint32_t world, Crash crash,
                              const std::vector<Crash>& also = {}) {
  std::size_t runs = 0;
  for (const Schedule& schedule : kSchedules) {
    for (const bool leftovers : {false, true}) {
      for (crash.after_sent = 0;; ++crash.after_sent) {
        crash.deliver_leftovers = leftovers;
        Scenario scenario{.world = world,
                          .known_failed = {},
                          .crashes = also,
                          .schedule = schedule,
                          .through_wire = false};
        scenario.crashes.push_back(crash);
        const Simulation simulation = run_checked(scenario);
        ++runs;
        if (::testing::Test::HasFailure() || !simulation.cut(also.size())) break;
      }
      if (::testing::Test::HasFailure()) return runs;
    }
  }
  return runs;
}

// ---------------------------------------------------------------------------------------------
// Failure-free runs.
// ---------------------------------------------------------------------------------------------

TEST(AgreementFastPath, SendsTwiceCeilLog2NMessagesPerRankAndDecidesTheCombination) {
  for (std::uint32_t n = 1; n <= 40; ++n) {
    for (const Schedule& schedule : kSchedules) {
      const Scenario scenario{.world = n,
                              .known_failed = {},
                              .crashes = {},
                              .schedule = schedule,
                              .through_wire = n <= 8};
      const Simulation simulation = run_checked(scenario);
      std::uint32_t all = ~0U;
      for (std::uint32_t r = 0; r < n; ++r) all &= flags_of(r);
      for (std::uint32_t r = 0; r < n; ++r) {
        const Agreement& agent = simulation.agent(r);
        ASSERT_TRUE(agent.decided().has_value()) << describe(scenario);
        EXPECT_EQ(agent.decided()->flags, all) << describe(scenario);
        EXPECT_TRUE(agent.decided()->failed.empty()) << describe(scenario);
        EXPECT_EQ(agent.messages_sent(), 2 * ceil_log2(n)) << describe(scenario) << " rank " << r;
        EXPECT_FALSE(agent.recovering()) << describe(scenario);
      }
    }
  }
}

TEST(AgreementFastPath, OneRankDecidesAtStartWithoutMessages) {
  Agreement agent(0, 1, 1, {}, {.flags = 0x5, .failed = {}});
  EXPECT_FALSE(agent.decided().has_value());
  agent.start();
  ASSERT_TRUE(agent.decided().has_value());
  EXPECT_EQ(*agent.decided(), (AgreementValue{.flags = 0x5, .failed = {}}));
  EXPECT_TRUE(agent.take_outbox().empty());
  EXPECT_EQ(agent.messages_sent(), 0U);
}

// By hand: three ranks, FIFO delivery, values with failed sets of their own.
TEST(AgreementFastPath, CombinesFlagsByAndAndFailedSetsByUnion) {
  std::vector<Agreement> agents;
  agents.emplace_back(0, 3, 9, RankSet{}, AgreementValue{.flags = 0b0111, .failed = {10}});
  agents.emplace_back(1, 3, 9, RankSet{}, AgreementValue{.flags = 0b1110, .failed = {}});
  agents.emplace_back(2, 3, 9, RankSet{}, AgreementValue{.flags = 0b1111, .failed = {12, 11}});
  for (Agreement& agent : agents) agent.start();
  for (bool moved = true; moved;) {
    moved = false;
    for (std::uint32_t from = 0; from < 3; ++from) {
      for (const auto& out : agents[from].take_outbox()) {
        agents[out.to].on_message(from, out.message);
        moved = true;
      }
    }
  }
  for (const Agreement& agent : agents) {
    ASSERT_TRUE(agent.decided().has_value());
    EXPECT_EQ(*agent.decided(), (AgreementValue{.flags = 0b0110, .failed = {10, 11, 12}}));
  }
}

// Everyone already knows of a failure: a fast path over the other N - 1 ranks.
TEST(AgreementFastPath, ASharedInitialFailureShrinksTheFastPath) {
  for (std::uint32_t n = 2; n <= 9; ++n) {
    for (std::uint32_t f = 0; f < n; ++f) {
      const Scenario scenario{.world = n,
                              .known_failed = std::vector<RankSet>(n, RankSet{f}),
                              .crashes = {},
                              .schedule = {},
                              .through_wire = false};
      const Simulation simulation = run_checked(scenario);
      for (std::uint32_t r = 0; r < n; ++r) {
        if (r == f) continue;
        EXPECT_EQ(simulation.agent(r).messages_sent(), 2 * ceil_log2(n - 1)) << describe(scenario);
        EXPECT_EQ(simulation.agent(r).decided()->failed, RankSet{f}) << describe(scenario);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Crashes.
// ---------------------------------------------------------------------------------------------

TEST(AgreementCrash, EveryRankAtEveryCrashPointOfWorldsOf1To8) {
  std::size_t runs = 0;
  for (std::uint32_t n = 1; n <= 8; ++n) {
    for (std::uint32_t r = 0; r < n; ++r) {
      runs += every_crash_point(n, {.rank = r});
      ASSERT_FALSE(HasFailure());
    }
  }
  RecordProperty("runs", static_cast<int>(runs));
}

TEST(AgreementCrash, RightAfterDecidingBeforeOrDuringItsLastMessages) {
  for (std::uint32_t n = 1; n <= 8; ++n) {
    for (std::uint32_t r = 0; r < n; ++r) {
      every_crash_point(n, {.rank = r, .after_deciding = true});
      ASSERT_FALSE(HasFailure());
    }
  }
}

// The coordinator crashes at some point, then the next one at every point of its own.
TEST(AgreementCrash, TheCoordinatorAndThenTheSecondCoordinator) {
  for (std::uint32_t n = 3; n <= 8; ++n) {
    const std::uint32_t fast = 2 * ceil_log2(n);
    // Rank 0 crashes before it starts, during or after its fast path, or (when rank 1 crashed
    // first) during its own ballot; its leftovers dropped or delivered by turns.
    const std::vector<std::uint64_t> firsts = {0, 1, fast, fast + n - 1, fast + n + 1};
    for (std::size_t i = 0; i < firsts.size(); ++i) {
      every_crash_point(
          n, {.rank = 1},
          {{.rank = 0, .after_sent = firsts[i], .deliver_leftovers = ((n + i) % 2) == 1}});
      ASSERT_FALSE(HasFailure());
    }
  }
}

// Another rank's crash starts the recovery; then the coordinator crashes at every point of its
// ballot (and of its fast path before that).
TEST(AgreementCrash, TheCoordinatorDuringItsBallot) {
  for (std::uint32_t n = 2; n <= 8; ++n) {
    for (const std::uint64_t first : {std::uint64_t{0}, std::uint64_t{ceil_log2(n)}}) {
      every_crash_point(n, {.rank = 0}, {{.rank = n - 1, .after_sent = first}});
      ASSERT_FALSE(HasFailure());
    }
  }
}

// Two ranks crash, each at every pair of crash points in and shortly after the fast path.
TEST(AgreementCrash, TwoCrashesAtOnce) {
  for (std::uint32_t n = 2; n <= 6; ++n) {
    const std::uint64_t last = (2 * ceil_log2(n)) + 3;
    for (std::uint32_t a = 0; a < n; ++a) {
      for (std::uint32_t b = a + 1; b < n; ++b) {
        for (std::uint64_t ka = 0; ka <= last; ++ka) {
          for (std::uint64_t kb = 0; kb <= last; ++kb) {
            const auto& schedule = kSchedules[(ka + kb) % kSchedules.size()];
            const bool leftovers = ((a + b + ka) % 2) == 0;
            run_checked(
                {.world = n,
                 .known_failed = {},
                 .crashes = {{.rank = a, .after_sent = ka, .deliver_leftovers = leftovers},
                             {.rank = b, .after_sent = kb, .deliver_leftovers = !leftovers}},
                 .schedule = schedule,
                 .through_wire = false});
            ASSERT_FALSE(HasFailure());
          }
        }
      }
    }
  }
}

// Rank 2 crashes between its two barrier signals: rank 0 decides on the fast path, rank 1 learns
// of the crash while rank 0, its coordinator, has decided and runs no ballot. Rank 1's RECOVER
// makes rank 0 send its decision.
TEST(AgreementCrash, ADecidedCoordinatorAnswersARankThatIsStillWaiting) {
  const Scenario scenario{.world = 3,
                          .known_failed = {},
                          .crashes = {{.rank = 2, .after_sent = 3, .deliver_leftovers = true}},
                          .schedule = {.order = Order::oldest, .notices = Notices::late, .seed = 0},
                          .through_wire = true};
  const Simulation simulation = run_checked(scenario);
  EXPECT_FALSE(simulation.agent(0).recovering());
  EXPECT_TRUE(simulation.agent(1).recovering());
  ASSERT_TRUE(simulation.agent(1).decided().has_value());
  EXPECT_TRUE(simulation.agent(1).decided()->failed.empty());  // the fast path's value
  EXPECT_EQ(simulation.agent(0).messages_sent(), 4U + 1U);     // its fast path, one DECIDED
}

// ---------------------------------------------------------------------------------------------
// Views that differ at the start: some ranks already know of a failure the others learn later.
// ---------------------------------------------------------------------------------------------

TEST(AgreementViews, SomeRanksKnowAFailureTheOthersLearnLater) {
  for (std::uint32_t n = 2; n <= 7; ++n) {
    for (const std::uint32_t f : {0U, n / 2, n - 1}) {
      // Every subset of the other ranks as the ones that know (n <= 7: at most 64 subsets).
      for (std::uint32_t mask = 0; mask < (1U << (n - 1)); ++mask) {
        std::vector<RankSet> known(n);
        for (std::uint32_t i = 0, r = 0; r < n; ++r) {
          if (r == f) continue;
          if ((mask >> i++) & 1U) known[r].insert(f);
        }
        for (const Schedule& schedule : kSchedules) {
          run_checked({.world = n,
                       .known_failed = known,
                       .crashes = {},
                       .schedule = schedule,
                       .through_wire = false});
          ASSERT_FALSE(HasFailure());
        }
      }
    }
  }
}

TEST(AgreementViews, DifferingViewsAndACrashOfTheCoordinator) {
  for (std::uint32_t n = 3; n <= 6; ++n) {
    std::vector<RankSet> known(n);
    known[n - 2].insert(n - 1);  // only rank n-2 knows that rank n-1 failed
    for (std::uint64_t k = 0; k <= 2 * n + 4; ++k) {
      for (const Schedule& schedule : kSchedules) {
        run_checked({.world = n,
                     .known_failed = known,
                     .crashes = {{.rank = 0, .after_sent = k, .deliver_leftovers = k % 2 == 0}},
                     .schedule = schedule,
                     .through_wire = false});
        ASSERT_FALSE(HasFailure());
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Seeded random runs: up to 32 ranks, initial failures known to some, up to three crashes.
// ---------------------------------------------------------------------------------------------

// A world of 1..max_world ranks; up to two initial failures, each known to a random subset of
// the others; up to max_crashes scripted crashes at random points; a random schedule.
Scenario random_scenario(std::uint32_t seed, std::uint32_t max_world, std::uint32_t max_crashes) {
  std::mt19937 random(seed);
  const auto below = [&random](std::uint32_t bound) {
    return std::uniform_int_distribution<std::uint32_t>(0, bound - 1)(random);
  };
  const std::uint32_t n = 1 + below(max_world);
  Scenario scenario{.world = n,
                    .known_failed = std::vector<RankSet>(n),
                    .crashes = {},
                    .schedule = {},
                    .through_wire = true};
  RankSet used;
  for (std::uint32_t i = below(3); i > 0 && n > 2; --i) {
    const std::uint32_t f = below(n);
    if (!used.insert(f)) continue;
    for (std::uint32_t r = 0; r < n; ++r) {
      if (r != f && below(2) == 0) scenario.known_failed[r].insert(f);
    }
  }
  for (std::uint32_t i = below(max_crashes + 1); i > 0; --i) {
    const std::uint32_t r = below(n);
    if (!used.insert(r)) continue;
    const bool after_deciding = below(4) == 0;
    scenario.crashes.push_back({.rank = r,
                                .after_sent = after_deciding ? below(n + 1) : below((3 * n) + 8),
                                .after_deciding = after_deciding,
                                .deliver_leftovers = below(2) == 0});
  }
  scenario.schedule = {
      .order = Order::random,
      .notices = std::array{Notices::early, Notices::late, Notices::anytime}[below(3)],
      .seed = seed};
  return scenario;
}

TEST(AgreementRandom, SeededSchedulesOfUpTo32Ranks) {
  std::size_t recovered = 0;
  for (std::uint32_t seed = 1; seed <= 300; ++seed) {
    const Scenario scenario = random_scenario(seed, 32, 3);
    const Simulation simulation = run_checked(scenario);
    ASSERT_FALSE(HasFailure());
    for (std::uint32_t r = 0; r < scenario.world; ++r) {
      recovered += simulation.agent(r).recovering() ? 1U : 0U;
    }
  }
  EXPECT_GT(recovered, 0U);
}

TEST(AgreementRandom, SmallWorldsWithManyCrashes) {
  for (std::uint32_t seed = 1; seed <= 2000; ++seed) {
    (void)run_checked(random_scenario(seed, 8, 6));
    ASSERT_FALSE(HasFailure());
  }
}

// ---------------------------------------------------------------------------------------------
// The state machine's interface.
// ---------------------------------------------------------------------------------------------

AgreementMessage with(AgreementMessage::Body body, std::uint64_t instance = 3) {
  return {.instance = instance, .body = std::move(body)};
}

TEST(AgreementInterface, RejectsBadArguments) {
  const auto make = [](std::uint32_t rank, std::uint32_t world, const RankSet& known) {
    return [=] { const Agreement agent(rank, world, 1, known, {}); };
  };
  EXPECT_TRUE(throws_invalid_argument(make(0, 0, {}), {"world_size"}));
  EXPECT_TRUE(throws_invalid_argument(make(4, 4, {}), {"rank", "4"}));
  EXPECT_TRUE(throws_invalid_argument(make(0, 4, {5}), {"known_failed", "5"}));
  EXPECT_TRUE(throws_invalid_argument(make(2, 4, {2}), {"itself"}));
  Agreement agent(1, 4, 3, {}, {});
  agent.start();
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { agent.start(); }, {"started"}));
  EXPECT_TRUE(throws_invalid_argument([&] { agent.on_message(1, with(message::Recover{})); }));
  EXPECT_TRUE(throws_invalid_argument([&] { agent.on_message(4, with(message::Recover{})); }));
  EXPECT_TRUE(throws_invalid_argument([&] { agent.on_failure(1); }));
  EXPECT_TRUE(throws_invalid_argument([&] { agent.on_failure(9); }));
}

TEST(AgreementInterface, RejectsFastPathMessagesTheScheduleDoesNotAllow) {
  Agreement agent(0, 4, 3, {}, {});
  agent.start();
  const auto outbox = agent.take_outbox();
  ASSERT_EQ(outbox.size(), 1U);
  const auto fingerprint = std::get<message::Reduce>(outbox[0].message.body).fingerprint;
  // Round 0 comes from rank 3 (0 - 1 mod 4), round 1 from rank 2; there is no round 2.
  const auto reduce = [&](std::uint32_t round) {
    return with(message::Reduce{.round = round, .fingerprint = fingerprint, .partial = {}});
  };
  EXPECT_TRUE(throws_error(ErrorKind::protocol, [&] { agent.on_message(1, reduce(0)); },
                           {"rank 1", "round 0"}));
  EXPECT_TRUE(throws_error(ErrorKind::protocol, [&] { agent.on_message(2, reduce(2)); }));
  agent.on_message(3, reduce(0));
  EXPECT_TRUE(
      throws_error(ErrorKind::protocol, [&] { agent.on_message(3, reduce(0)); }, {"second"}));
  EXPECT_FALSE(agent.recovering());
  // Another fingerprint: another view, so the recovery (and a RECOVER to the coordinator).
  Agreement other(1, 4, 3, {}, {});
  other.on_message(
      0, with(message::Reduce{.round = 0, .fingerprint = fingerprint + 1, .partial = {}}));
  EXPECT_TRUE(other.recovering());
  const auto told = other.take_outbox();
  ASSERT_EQ(told.size(), 1U);
  EXPECT_EQ(told[0].to, 0U);
  EXPECT_TRUE(std::holds_alternative<message::Recover>(told[0].message.body));
}

TEST(AgreementInterface, IgnoresOtherInstancesAndFailedRanks) {
  Agreement agent(1, 3, 3, {}, {});
  agent.on_message(0, with(message::Prepare{{.round = 1, .rank = 0}}, 4));
  EXPECT_TRUE(agent.take_outbox().empty());
  EXPECT_FALSE(agent.recovering());
  agent.on_failure(2);
  EXPECT_TRUE(agent.recovering());
  EXPECT_EQ(agent.known_failed(), RankSet{2});
  (void)agent.take_outbox();
  agent.on_message(2, with(message::Prepare{{.round = 9, .rank = 2}}));
  EXPECT_TRUE(agent.take_outbox().empty());
}

TEST(AgreementInterface, KeepsAnsweringAfterDeciding) {
  Agreement agent(1, 2, 3, {}, {.flags = 6, .failed = {}});
  agent.on_message(0, with(message::Commit{.ballot = {.round = 1, .rank = 0},
                                           .value = {.flags = 2, .failed = {}}}));
  ASSERT_TRUE(agent.decided().has_value());
  agent.on_message(0, with(message::Prepare{{.round = 5, .rank = 0}}));
  const auto answer = agent.take_outbox();
  ASSERT_EQ(answer.size(), 1U);
  EXPECT_EQ(answer[0].message, with(message::Decided{AgreementValue{.flags = 2, .failed = {}}}));
}

TEST(AgreementInterface, RefusesBallotsBelowItsPromise) {
  Agreement agent(2, 3, 3, {}, {});
  const Ballot high{.round = 2, .rank = 1};
  const Ballot low{.round = 1, .rank = 0};
  agent.on_message(1, with(message::Prepare{high}));
  auto out = agent.take_outbox();  // RECOVER to rank 0, its coordinator, and the promise
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].to, 0U);
  EXPECT_TRUE(std::holds_alternative<message::Recover>(out[0].message.body));
  EXPECT_TRUE(std::holds_alternative<message::Promise>(out[1].message.body));
  agent.on_message(0, with(message::Accept{.ballot = low, .value = {}}));
  agent.on_message(0, with(message::Prepare{low}));
  out = agent.take_outbox();
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].message, with(message::Nack{.ballot = low, .promised = high}));
  EXPECT_EQ(out[1].message, with(message::Nack{.ballot = low, .promised = high}));
  // The promised ballot itself is accepted, and reported in the next promise.
  const AgreementValue value{.flags = 9, .failed = {0}};
  agent.on_message(1, with(message::Accept{.ballot = high, .value = value}));
  agent.on_message(1, with(message::Prepare{{.round = 3, .rank = 1}}));
  out = agent.take_outbox();
  ASSERT_EQ(out.size(), 2U);
  EXPECT_EQ(out[0].message, with(message::Accepted{high}));
  const auto& promise = std::get<message::Promise>(out[1].message.body);
  EXPECT_EQ(promise.accepted, (Proposal{.ballot = high, .value = value}));
}

TEST(AgreementInterface, ACoordinatorRetriesAfterANack) {
  Agreement agent(0, 3, 3, {}, {.flags = 1, .failed = {}});
  agent.on_failure(2);  // coordinator: PREPARE (1, 0) to rank 1
  auto out = agent.take_outbox();
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].message, with(message::Prepare{{.round = 1, .rank = 0}}));
  agent.on_message(1, with(message::Nack{.ballot = {.round = 1, .rank = 0},
                                         .promised = {.round = 4, .rank = 2}}));
  out = agent.take_outbox();
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].message, with(message::Prepare{{.round = 5, .rank = 0}}));
  // A promise with an accepted value makes that value the proposal.
  const AgreementValue accepted{.flags = 7, .failed = {2}};
  agent.on_message(1, with(message::Promise{.ballot = {.round = 5, .rank = 0},
                                            .accepted = Proposal{.ballot = {.round = 4, .rank = 2},
                                                                 .value = accepted},
                                            .contribution = {.flags = 3, .failed = {}}}));
  out = agent.take_outbox();
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].message,
            with(message::Accept{.ballot = {.round = 5, .rank = 0}, .value = accepted}));
  agent.on_message(1, with(message::Accepted{{.round = 5, .rank = 0}}));
  ASSERT_TRUE(agent.decided().has_value());
  EXPECT_EQ(*agent.decided(), accepted);
}

// ---------------------------------------------------------------------------------------------
// The wire form.
// ---------------------------------------------------------------------------------------------

std::vector<AgreementMessage> one_of_each_kind() {
  RankSet big;
  for (std::uint32_t r = 0; r < 4096; r += 3) big.insert(r);
  const AgreementValue small{.flags = 0xdeadbeef, .failed = {0, 7, 8, 300}};
  const AgreementValue large{.flags = 1, .failed = big};
  const Ballot ballot{.round = 3, .rank = 4095};
  return {
      with(message::Reduce{.round = 2, .fingerprint = 0x0123456789abcdefULL, .partial = small}),
      with(message::Confirm{.round = 11, .fingerprint = ~0ULL}),
      with(message::Recover{}, 0),
      with(message::Prepare{ballot}, ~0ULL),
      with(message::Promise{.ballot = ballot, .accepted = std::nullopt, .contribution = large}),
      with(message::Promise{.ballot = ballot,
                            .accepted = Proposal{.ballot = {.round = 1, .rank = 2}, .value = small},
                            .contribution = {}}),
      with(message::Nack{.ballot = ballot, .promised = {.round = 9, .rank = 1}}),
      with(message::Accept{.ballot = ballot, .value = large}),
      with(message::Accepted{ballot}),
      with(message::Commit{.ballot = ballot, .value = small}),
      with(message::Decided{large}),
  };
}

TEST(AgreementWire, RoundTripsEveryKind) {
  for (const AgreementMessage& original : one_of_each_kind()) {
    const std::vector<std::byte> bytes = encode_agreement_message(original);
    EXPECT_EQ(decode_agreement_message(bytes), original) << "kind " << original.body.index();
    EXPECT_EQ(std::to_integer<unsigned>(bytes[0]), Agreement::kWireVersion);
    EXPECT_EQ(std::to_integer<std::size_t>(bytes[1]), original.body.index() + 1);
  }
}

TEST(AgreementWire, IsLittleEndianWithABitmapOfTheFailedSet) {
  const auto bytes = encode_agreement_message(with(
      message::Decided{AgreementValue{.flags = 0x04030201, .failed = {1, 9}}}, 0x0807060504030201));
  const std::vector<unsigned> expected = {1,    10,  1, 2, 3,
                                          4,    5,   6, 7, 8,  // version, kind, instance
                                          1,    2,   3, 4,     // flags
                                          2,    0,   0, 0,     // bitmap length
                                          0x02, 0x02};         // ranks 1 and 9
  std::vector<unsigned> got(bytes.size());
  std::transform(bytes.begin(), bytes.end(), got.begin(),
                 [](std::byte b) { return std::to_integer<unsigned>(b); });
  EXPECT_EQ(got, expected);
}

TEST(AgreementWire, RejectsEveryTruncationAndLeftOverBytes) {
  for (const AgreementMessage& original : one_of_each_kind()) {
    const std::vector<std::byte> bytes = encode_agreement_message(original);
    for (std::size_t length = 0; length < bytes.size(); length += (length < 64 ? 1 : 97)) {
      EXPECT_TRUE(
          throws_error(ErrorKind::protocol,
                       [&] { (void)decode_agreement_message(std::span(bytes).first(length)); }))
          << "kind " << original.body.index() << ", " << length << " bytes";
    }
    std::vector<std::byte> longer = bytes;
    longer.push_back(std::byte{0});
    EXPECT_TRUE(throws_error(ErrorKind::protocol, [&] { (void)decode_agreement_message(longer); },
                             {"left over"}));
  }
}

TEST(AgreementWire, RejectsBadHeadersAndFields) {
  const auto decode = [](const std::vector<unsigned>& values) {
    std::vector<std::byte> bytes(values.size());
    std::transform(values.begin(), values.end(), bytes.begin(),
                   [](unsigned value) { return static_cast<std::byte>(value); });
    return [bytes] { (void)decode_agreement_message(bytes); };
  };
  const std::vector<unsigned> instance(8, 0);
  const auto message = [&](unsigned version, unsigned kind, const std::vector<unsigned>& rest) {
    std::vector<unsigned> values = {version, kind};
    values.insert(values.end(), instance.begin(), instance.end());
    values.insert(values.end(), rest.begin(), rest.end());
    return values;
  };
  EXPECT_TRUE(throws_error(ErrorKind::protocol, decode({}), {"version and a kind"}));
  EXPECT_TRUE(throws_error(ErrorKind::protocol, decode(message(2, 3, {})), {"version 2"}));
  EXPECT_TRUE(throws_error(ErrorKind::protocol, decode(message(1, 0, {})), {"unknown", "kind 0"}));
  EXPECT_TRUE(throws_error(ErrorKind::protocol, decode(message(1, 11, {})), {"kind 11"}));
  EXPECT_TRUE(throws_error(ErrorKind::protocol, decode({1, 3, 0, 0}), {"truncated", "instance"}));
  // A decided message whose bitmap claims 4 GiB: refused before anything is allocated.
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           decode(message(1, 10, {0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})),
                           {"truncated", "needs 4294967295 bytes"}));
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           decode(message(1, 10, {0, 0, 0, 0, 2, 0, 0, 0, 1, 0})), {"zero byte"}));
  // A promise whose accepted flag is 2.
  EXPECT_TRUE(throws_error(ErrorKind::protocol, decode(message(1, 5, {1, 0, 0, 0, 0, 0, 0, 0, 2})),
                           {"accepted flag is 2"}));
}

TEST(AgreementRankSet, KeepsItsRanksSortedAndUnique) {
  RankSet set{9, 2, 4096, 2};
  EXPECT_EQ(set.size(), 3U);
  EXPECT_TRUE(set.insert(5));
  EXPECT_FALSE(set.insert(5));
  EXPECT_TRUE(set.contains(4096));
  EXPECT_FALSE(set.contains(3));
  set.unite(RankSet{1, 9, 7000});
  EXPECT_EQ(std::vector<std::uint32_t>(set.begin(), set.end()),
            (std::vector<std::uint32_t>{1, 2, 5, 9, 4096, 7000}));
  EXPECT_TRUE(set.erase(9));
  EXPECT_FALSE(set.erase(9));
  EXPECT_EQ(set, (RankSet{7000, 4096, 5, 2, 1}));
}

}  // namespace agreement_test
}  // namespace
