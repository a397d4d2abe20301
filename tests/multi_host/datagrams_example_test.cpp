// SPDX-License-Identifier: MIT
// examples/datagrams across hosts, as `make demo` runs it: rank 0 sends a numbered multicast
// stream, every other rank receives it through its endpoint (the last one slowly, with a pool
// smaller than the stream's burst) and prints what its endpoint counted of the sender. Checks
// that each receiver's counts add up and that the receivers with room for the whole burst lost
// nothing (receives posted before the datagrams arrive: rxe does not drop those).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "multi_host.hpp"
#include "support/child_process.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint64_t kStream = 56;  // the example's stream: a burst of 48, then 8 more

/// Waits until `child` has printed `text`, or has ended, or `limit` passed.
bool wait_for_output(ChildProcess& child, const std::string& text, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (child.out().find(text) != std::string::npos) return true;
    if (!child.running()) return child.out().find(text) != std::string::npos;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST(MultiHostExample, TheDatagramsExampleCountsAMulticastStreamOnEveryHost) {
  auto& world = multi_host();
  if (world.ip(world.rank()).starts_with("127.") || world.world_size() < 2) {
    GTEST_SKIP() << "joins a multicast group on each rank's RDMA device by its IP address; the "
                    "ranks run at 127.0.0.1 (one machine): run it on the testbed "
                    "(testbed/run --hosts N)";
  }
  const std::filesystem::path example =
      std::filesystem::read_symlink("/proc/self/exe").parent_path() / "datagrams";
  ASSERT_TRUE(std::filesystem::exists(example)) << example << " was not built";
  const std::shared_ptr<net::Bootstrap> meeting = world.bootstrap(120s);
  const TemporaryDirectory files("ibv_datagrams_example");
  // One group per run of the program (the run's base port tells runs apart).
  const std::string group = "239.252." + std::to_string(world.base_port() % 250) + ".1";
  const bool sender = world.rank() == 0;
  const bool slow = !sender && world.world_size() > 2 && world.rank() + 1 == world.world_size();
  const std::string mode = sender ? "--send" : slow ? "--receive-slowly" : "--receive";
  const std::vector<std::string> args{example.string(), mode, group, world.ip(world.rank()),
                                      world.device()};

  std::unique_ptr<ChildProcess> receiver;
  if (!sender) {
    receiver = std::make_unique<ChildProcess>(args, 120s, files.path() / "receiver.txt");
    ASSERT_TRUE(wait_for_output(*receiver, "joined ", 60s)) << receiver->describe();
  }
  meeting->barrier();  // every receiver has joined: the stream may start
  if (sender) {
    ChildProcess sending(args, 60s, files.path() / "sender.txt");
    ASSERT_EQ(sending.wait(), 0) << sending.describe();
    EXPECT_NE(sending.out().find("sent 56 datagrams to " + group), std::string::npos)
        << sending.describe();
  } else {
    ASSERT_EQ(receiver->wait(), 0) << receiver->describe();
    const std::string output = receiver->out();
    std::printf("%s", output.c_str());  // into this rank's log
    std::smatch counts;
    ASSERT_TRUE(
        std::regex_search(output, counts,
                          std::regex("from " + world.ip(0) +
                                     " \\(queue pair [0-9]+\\): ([0-9]+) received, ([0-9]+) lost")))
        << receiver->describe();
    const std::uint64_t received = std::stoull(counts[1].str());
    const std::uint64_t lost = std::stoull(counts[2].str());
    EXPECT_GE(received, 1U) << output;
    EXPECT_LE(received + lost, kStream) << output;
    if (!slow) {
      EXPECT_EQ(received, kStream) << output;
      EXPECT_EQ(lost, 0U) << output;
    }
  }
  meeting->barrier();  // the sender's endpoint stays until every receiver is done
}

}  // namespace
}  // namespace ibv::test
