// SPDX-License-Identifier: MIT
// PersistentAllToAll across hosts: every rank a process on its own (emulated) host, the Node
// connected over the run's bootstrap (hosts file, rendezvous or PMIx: each multi-host suite
// runs one), so the collective's build is tested over every bootstrap.
// - every byte of every part, mixed sizes, many rounds;
// - a rank whose link goes down (testbed only: its bridge port is cut, as a cable pulled at the
//   switch): every other rank's round fails naming it, within the timeout.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/collective/persistent_all_to_all.hpp"
#include "multi_host.hpp"
#include "support/error_matchers.hpp"
#include "test_rank.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::error_of;

/// The byte `index` of what `source` sends `destination` in `round`.
std::byte part_byte(std::uint64_t round, std::uint32_t source, std::uint32_t destination,
                    std::size_t index) {
  return static_cast<std::byte>(
      (round * 29U + std::uint64_t{source} * 131U + std::uint64_t{destination} * 7U + index) &
      0xffU);
}

/// The size of that part: every size from 0 to the slot over the rounds and pairs.
std::size_t part_size(std::uint64_t round, std::uint32_t source, std::uint32_t destination,
                      std::size_t slot) {
  return static_cast<std::size_t>(
      (round * 7919U + std::uint64_t{source} * 104729U + std::uint64_t{destination} * 15485863U) %
      (slot + 1));
}

/// This rank's memory and collective, over the Node of `me`.
struct AllToAllRank {
  static constexpr std::size_t kSlot = std::size_t{16} * 1024;
  AllToAllRank(Rank& me, std::chrono::milliseconds timeout)
      : world(me.node.world_size()),
        rank(me.node.rank()),
        send(std::size_t{world} * kSlot),
        receive(std::size_t{world} * 2 * kSlot),
        send_mr(me.pd.register_local(send)),
        receive_mr(me.pd.register_remote_accessible(receive, RemoteAccess::write())),
        all_to_all(me.node, *me.bootstrap, send_mr, receive_mr,
                   {.slot_size = kSlot, .timeout = timeout}),
        parts(world) {}

  /// Runs round `n` and checks every byte that arrived.
  void round(std::uint64_t n) {
    for (std::uint32_t to = 0; to < world; ++to) {
      std::byte* base = send.data() + std::size_t{to} * kSlot;
      const std::size_t size = part_size(n, rank, to, kSlot);
      for (std::size_t i = 0; i < size; ++i) base[i] = part_byte(n, rank, to, i);
      parts[to] = std::span<const std::byte>(base, size);
    }
    const net::AllToAllRound done = all_to_all.run(parts);
    for (std::uint32_t from = 0; from < world; ++from) {
      const std::span<const std::byte> part = done.part(from);
      ASSERT_EQ(part.size(), part_size(n, from, rank, kSlot))
          << "round " << n << ", from rank " << from;
      for (std::size_t i = 0; i < part.size(); ++i) {
        ASSERT_EQ(part[i], part_byte(n, from, rank, i))
            << "round " << n << ", from rank " << from << ", byte " << i;
      }
    }
  }

  std::uint32_t world;
  std::uint32_t rank;
  std::vector<std::byte> send;
  std::vector<std::byte> receive;
  MemoryRegion send_mr;
  MemoryRegion receive_mr;
  net::PersistentAllToAll all_to_all;
  std::vector<std::span<const std::byte>> parts;
};

TEST(MultiHostAllToAll, EveryByteOfEveryRoundAcrossHosts) {
  Rank me(60s, WaitMode::spin_then_block(50us));
  AllToAllRank rank(me, 30s);
  for (std::uint64_t n = 0; n < 40; ++n) {
    rank.round(n);
    if (::testing::Test::HasFatalFailure()) return;
  }
  me.bootstrap->barrier();
}

/// Cuts the testbed host `host` off the bridge (its veth's bridge side down) until destroyed.
class CutLink {
 public:
  explicit CutLink(std::uint32_t host) : port_("br-rh" + std::to_string(host)) {
    ok_ = std::system(("ip link set " + port_ + " down").c_str()) == 0;
  }
  CutLink(const CutLink&) = delete;
  CutLink& operator=(const CutLink&) = delete;
  ~CutLink() { static_cast<void>(std::system(("ip link set " + port_ + " up").c_str())); }
  [[nodiscard]] bool ok() const noexcept { return ok_; }

 private:
  std::string port_;
  bool ok_ = false;
};

TEST(MultiHostAllToAll, ARankWhoseLinkGoesDownIsNamedByEveryOther) {
  auto& world = multi_host();
  const char* testbed = std::getenv("IBV_TESTBED");
  const char* hosts = std::getenv("IBV_TEST_HOSTS");
  if (testbed == nullptr || std::string(testbed) != "1" || hosts == nullptr ||
      std::stoul(hosts) != world.world_size()) {
    GTEST_SKIP() << "cuts a host's link on the testbed's bridge: runs only with one rank per "
                    "testbed host (testbed/run --hosts N)";
  }
  Rank me(60s, WaitMode::block());
  AllToAllRank rank(me, 3s);
  for (std::uint64_t n = 0; n < 3; ++n) rank.round(n);
  me.bootstrap->barrier();
  const std::uint32_t cut = world.world_size() - 1;
  if (world.rank() == cut) {
    const CutLink link(cut);
    ASSERT_TRUE(link.ok()) << "ip link set br-rh" << cut << " down failed";
    const auto error = error_of([&] { rank.round(3); });
    ASSERT_TRUE(error.has_value()) << "a round passed with this host's link down";
    EXPECT_TRUE(error->kind() == ErrorKind::peer_gone || error->kind() == ErrorKind::timeout)
        << error->what();
    std::this_thread::sleep_for(1s);  // the others see their failures with the link still down
  } else {
    std::this_thread::sleep_for(200ms);  // the link is down by now
    const auto started = std::chrono::steady_clock::now();
    const auto error = error_of([&] { rank.round(3); });
    const auto took = std::chrono::steady_clock::now() - started;
    ASSERT_TRUE(error.has_value()) << "a round passed with rank " << cut << "'s link down";
    EXPECT_TRUE(error->kind() == ErrorKind::peer_gone || error->kind() == ErrorKind::timeout)
        << error->what();
    EXPECT_NE(std::string(error->what()).find("rank " + std::to_string(cut)), std::string::npos)
        << error->what();
    if (error->kind() == ErrorKind::peer_gone) {  // gone or slow: the message cannot tell which
      EXPECT_NE(std::string(error->what()).find(" gone, or too slow to answer within "),
                std::string::npos)
          << error->what();
    }
    EXPECT_LT(took, 3s + 10s);  // the timeout, plus slack for emulation: not a speed test
    EXPECT_TRUE(rank.all_to_all.failed());
  }
  me.bootstrap->barrier();  // over TCP, once the link is back
}

}  // namespace
}  // namespace ibv::test
