// SPDX-License-Identifier: MIT
// A fault-tolerant job across hosts loses rank 0 and goes on: every rank runs the recovery
// benchmark's rank (bench/recovery/recovery_rank.cpp) as a child, bootstrapped as this run's
// ranks are where a child can be (the hosts file; the rendezvous, whose root is rank 0's
// process), and rank 0 kills itself at the start of a round. The survivors' round must end,
// they shrink, build the all-to-all again over the same memory and run a round with every
// byte checked: nothing of the bootstrap, the rendezvous's root included, is needed after the
// start. Under PMIx (mpirun) the children use the hosts file: the test process is the rank's
// PMIx client.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "multi_host.hpp"
#include "support/child_process.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

TEST(MultiHostRecovery, RankZeroKilledTheSurvivorsShrinkAndRunTheAllToAllAgain) {
  auto& world = multi_host();
  const std::uint16_t offset = world.fresh_port_offset();
  const std::filesystem::path program =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / "recovery_rank";
  ASSERT_TRUE(std::filesystem::exists(program))
      << program << " was not built (cmake --build BUILD_DIR --target recovery_rank)";
  const TemporaryDirectory files("ibv_recovery");
  // The child's bootstrap is what IBV_BOOTSTRAP says, else its hosts file.
  std::vector<std::string> args{"/usr/bin/env", "-u", "IBV_BOOTSTRAP",
                                "IBV_DEVICE=" + world.device()};
  const bool rendezvous = world.bootstrap_kind() == "rendezvous";
  if (rendezvous) {
    args.push_back("IBV_BOOTSTRAP=" + world.ip(0) + ":" + std::to_string(world.port(0, offset)));
  }
  args.insert(args.end(), {program.string(), "--rank", std::to_string(world.rank()), "--world",
                           std::to_string(world.world_size()), "--victim", "0", "--kill-round", "5",
                           "--repeat", "3", "--timeout-ms", "60000"});
  if (!rendezvous) {
    const std::filesystem::path hosts = files.path() / "hosts.json";
    std::ofstream(hosts) << world.config(offset).to_json();
    args.insert(args.end(), {"--config", hosts.string()});
  }
  if (world.gid_index()) {
    args.insert(args.end(), {"--gid-index", std::to_string(*world.gid_index())});
  }
  ChildProcess rank(args, 180s, files.path() / "output.txt");
  const auto status = rank.wait();
  const std::string output = rank.out();
  std::printf("%s", output.c_str());  // into this rank's log
  if (world.rank() == 0) {
    EXPECT_EQ(status, std::nullopt) << rank.describe();  // it died of its SIGKILL
    EXPECT_THAT(output, HasSubstr("\"kill_ns\": "));
    return;
  }
  ASSERT_EQ(status, 0) << rank.describe();
  // Its round failed (round 5, the first rank 0 did not run), it holds a Node of the others and
  // ran a round on the rebuilt collective with every byte checked ("ok": true).
  EXPECT_THAT(output, HasSubstr("\"error_round\": 5,"));
  EXPECT_THAT(output, HasSubstr("\"round_ns\": "));
  EXPECT_THAT(output, HasSubstr("\"survivors\": " + std::to_string(world.world_size() - 1) + ","));
  EXPECT_THAT(output, HasSubstr("\"ok\": true}"));
}

}  // namespace
}  // namespace ibv::test
