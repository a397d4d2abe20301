// SPDX-License-Identifier: MIT
// The event builder example (examples/event_builder.cpp) across hosts, one rank per host over a
// hosts file: every rank must exit 0 (every fragment of every event arrived and checked out),
// and rank 0 must print its figures: each rank's events and bytes per second, the whole job's
// events per second for the exact number of events, the fragment sizes' spread.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "multi_host.hpp"
#include "support/child_process.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ::testing::ContainsRegex;

/// What one rank's run of the example gave: its exit status (none when a signal ended it),
/// its output and how it ran.
struct ExampleRun {
  std::optional<int> status;
  std::string output;
  std::string described;
};

/// Runs the event builder example as this rank over a hosts file of the world, with `options`
/// after --config, --rank and --timeout-ms 60000; prints its output into this rank's log.
ExampleRun run_event_builder(const std::vector<std::string>& options) {
  auto& world = multi_host();
  const auto config = world.config(world.fresh_port_offset());
  const std::filesystem::path example =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / "event_builder";
  if (!std::filesystem::exists(example))
    return {std::nullopt, "", example.string() + " was not built"};
  const TemporaryDirectory files("ibv_event_builder");
  const std::filesystem::path hosts = files.path() / "hosts.json";
  std::ofstream(hosts) << config.to_json();
  std::vector<std::string> args{
      example.string(), "--config", hosts.string(), "--rank", std::to_string(world.rank()),
      "--timeout-ms",   "60000"};
  args.insert(args.end(), options.begin(), options.end());
  if (world.gid_index()) {
    args.emplace_back("--gid-index");
    args.push_back(std::to_string(*world.gid_index()));
  }
  ChildProcess example_rank(args, 300s, files.path() / "output.txt");
  ExampleRun run{.status = example_rank.wait(), .output = example_rank.out(), .described = {}};
  run.described = example_rank.describe();
  std::printf("%s", run.output.c_str());  // into this rank's log
  return run;
}

TEST(MultiHostExample, TheEventBuilderBuildsEveryEventOneRankPerHost) {
  auto& world = multi_host();
  constexpr std::uint32_t kRounds = 100;
  constexpr std::uint32_t kEventsPerBuilder = 3;
  const ExampleRun run =
      run_event_builder({"--rounds", std::to_string(kRounds), "--events-per-round",
                         std::to_string(kEventsPerBuilder), "--fragment-size", "700,1500"});
  const std::string& output = run.output;
  ASSERT_EQ(run.status, 0) << run.described;
  if (world.rank() != 0) return;

  const std::uint32_t ranks = world.world_size();
  for (std::uint32_t r = 0; r < ranks; ++r) {
    EXPECT_THAT(output, ContainsRegex("rank " + std::to_string(r) + " \\(" + world.device(r) +
                                      "\\): built " + std::to_string(kRounds * kEventsPerBuilder) +
                                      " events, sent [0-9]+\\.[0-9]+ MB/s to the other ranks"));
  }
  EXPECT_THAT(output,
              ContainsRegex("all ranks: " + std::to_string(kRounds * kEventsPerBuilder * ranks) +
                            " events in [0-9.]+ s, [0-9]+ events/s; every fragment's"));
  // min <= mean <= max <= MAX (1500), over every fragment of every event.
  std::smatch sizes;
  ASSERT_TRUE(std::regex_search(
      output, sizes,
      std::regex("fragment payloads \\(bytes\\): min ([0-9]+), mean ([0-9.]+), p50 <= [0-9]+, "
                 "p99 <= [0-9]+, max ([0-9]+) \\(([0-9]+) fragments\\)")))
      << output;
  EXPECT_LE(std::stod(sizes[1].str()), std::stod(sizes[2].str()));
  EXPECT_LE(std::stod(sizes[2].str()), std::stod(sizes[3].str()));
  EXPECT_LE(std::stoul(sizes[3].str()), 1500U);
  EXPECT_EQ(sizes[4].str(), std::to_string(kRounds * kEventsPerBuilder * ranks * ranks));
}

TEST(MultiHostExample, TheEventBuilderSurvivesALostRankAndBuildsOn) {
  // --survive, and the last rank kills itself before round 40 of 100: every other rank names
  // it, shrinks, rebuilds the all-to-all and goes on to the last round, every fragment checked.
  auto& world = multi_host();
  const std::uint32_t ranks = world.world_size();
  const std::uint32_t victim = ranks - 1;
  const ExampleRun run =
      run_event_builder({"--rounds", "100", "--survive", "--kill", std::to_string(victim) + "@40"});
  const std::string& output = run.output;
  if (world.rank() == victim) {
    EXPECT_EQ(run.status, std::nullopt) << run.described;  // it died of its SIGKILL
    EXPECT_THAT(output, ContainsRegex("killing itself \\(SIGKILL\\) before round 40"));
    return;
  }
  ASSERT_EQ(run.status, 0) << run.described;
  EXPECT_THAT(output, ContainsRegex("lost rank\\(s\\) " + std::to_string(victim) + "; now rank " +
                                    std::to_string(world.rank()) + " of " +
                                    std::to_string(ranks - 1) + ", the all-to-all rebuilt"));
  if (world.rank() == 0) {
    EXPECT_THAT(output, ContainsRegex("all ranks: [0-9]+ events in [0-9.]+ s, [0-9]+ events/s; "
                                      "every fragment's"));
  }
}

}  // namespace
}  // namespace ibv::test
