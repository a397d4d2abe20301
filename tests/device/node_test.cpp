// SPDX-License-Identifier: MIT
// Device tests of ibv::net::Node on one device: every rank is a thread of this process with its
// own Context, protection domain and Exchanger (TCP on 127.0.0.1, a port per rank), so the
// whole path runs: NodeBuilder -> PreparedNode -> connect() over the exchanger -> barriers and
// MultiChannel operations. Barriers are checked by counting: a rank that left a barrier before
// every participant entered it would see a count below the group size.
// The same across hosts, one rank per host, is in tests/multi_host/. A moved-from Node or
// PreparedNode refuses every call that needs what it gave away.
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "node_ranks.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::throws_error;
using net::BarrierAlgorithm;
using net::Node;

constexpr std::array kAlgorithms{BarrierAlgorithm::centralized, BarrierAlgorithm::binary_tree,
                                 BarrierAlgorithm::dissemination};

TEST(NodeBarrier, NoRankLeavesBeforeAllArrivedForEveryAlgorithm) {
  constexpr std::uint32_t kWorld = 4;
  constexpr std::size_t kRounds = 200;
  for (const auto algorithm : kAlgorithms) {
    SCOPED_TRACE(std::string(to_string(algorithm)));
    std::vector<std::atomic<std::uint32_t>> arrived(kRounds);
    run_ranks(
        kWorld,
        [&](Node& node, net::Bootstrap&) {
          EXPECT_EQ(node.barrier_algorithm(), algorithm);
          for (std::size_t i = 0; i < kRounds; ++i) {
            arrived[i].fetch_add(1);
            node.barrier();
            ASSERT_EQ(arrived[i].load(), kWorld)
                << "rank " << node.rank() << " left barrier " << i << " early";
          }
        },
        [&](net::NodeBuilder& builder) { builder.barrier_algorithm(algorithm); });
  }
}

TEST(NodeBarrier, SubsetsAndAllRanksInterleaved) {
  constexpr std::uint32_t kWorld = 4;
  constexpr std::size_t kRounds = 100;
  const std::vector<std::uint32_t> odd_group{0, 2, 3};
  const std::vector<std::uint32_t> pair{1, 2};
  std::vector<std::atomic<std::uint32_t>> in_odd(kRounds);
  std::vector<std::atomic<std::uint32_t>> in_pair(kRounds);
  std::vector<std::atomic<std::uint32_t>> in_all(kRounds);
  run_ranks(kWorld, [&](Node& node, net::Bootstrap&) {
    const auto me = node.rank();
    for (std::size_t i = 0; i < kRounds; ++i) {
      const auto round_algorithm = kAlgorithms.at(i % 3);
      if (std::find(odd_group.begin(), odd_group.end(), me) != odd_group.end()) {
        in_odd[i].fetch_add(1);
        node.barrier(odd_group, {.algorithm = round_algorithm});
        ASSERT_EQ(in_odd[i].load(), odd_group.size());
      }
      if (std::find(pair.begin(), pair.end(), me) != pair.end()) {
        in_pair[i].fetch_add(1);
        node.barrier(pair, {.algorithm = round_algorithm});
        ASSERT_EQ(in_pair[i].load(), pair.size());
      }
      in_all[i].fetch_add(1);
      node.barrier({.algorithm = BarrierAlgorithm::binary_tree});
      ASSERT_EQ(in_all[i].load(), kWorld);
    }
  });
}

TEST(NodeBarrier, ABadSubsetIsRejectedAndPoisonsNothing) {
  run_ranks(3, [&](Node& node, net::Bootstrap&) {
    const std::vector<std::uint32_t> unsorted{2, 0, 1};
    EXPECT_TRUE(
        throws_error(ErrorKind::invalid_argument, [&] { node.barrier(unsorted); }, {"order"}));
    const std::vector<std::uint32_t> twice{0, 1, 1, 2};
    EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { node.barrier(twice); }, {"twice"}));
    const std::vector<std::uint32_t> outside{0, 1, 2, 3};
    EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { node.barrier(outside); }, {"3"}));
    std::vector<std::uint32_t> without_me;
    for (std::uint32_t r = 0; r < 3; ++r) {
      if (r != node.rank()) without_me.push_back(r);
    }
    EXPECT_TRUE(
        throws_error(ErrorKind::invalid_argument, [&] { node.barrier(without_me); }, {"not"}));
    EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { node.barrier({.timeout = 0ms}); },
                             {"timeout"}));
    EXPECT_FALSE(node.barrier_poisoned());
    node.barrier();  // still works, on every rank
  });
}

// The waiting ranks sleep on their completion channels (WaitMode::block): what is tested is the
// timeout and the poisoning, not the spinning, which RankFaultBarrier's spinning cases cover.
TEST(NodeBarrier, TimesOutWhenARankNeverArrivesAndIsPoisonedAfter) {
  const auto blocking = [](net::NodeBuilder& builder) { builder.wait_mode(WaitMode::block()); };
  for (const auto algorithm : kAlgorithms) {
    SCOPED_TRACE(std::string(to_string(algorithm)));
    std::atomic<int> finished{0};
    const auto rank = [&](Node& node, net::Bootstrap&) {
      if (node.rank() == 2) {  // never enters; stays alive until the others are done
        while (finished.load() < 2) std::this_thread::sleep_for(10ms);
        return;
      }
      EXPECT_TRUE(node.channel(2).wait_mode() == WaitMode::block());
      const auto started = std::chrono::steady_clock::now();
      EXPECT_TRUE(throws_error(ErrorKind::timeout,
                               [&] { node.barrier({.algorithm = algorithm, .timeout = 300ms}); },
                               {"Node::barrier", std::string(to_string(algorithm)),
                                "timed out after 300 ms", "rank(s)"}));
      EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
      EXPECT_TRUE(node.barrier_poisoned());
      EXPECT_TRUE(
          throws_error(ErrorKind::state, [&] { node.barrier(); }, {"poisoned", "timed out"}));
      finished.fetch_add(1);
    };
    run_ranks(3, rank, blocking);
  }
}

class NodeOverEachBootstrap : public ::testing::TestWithParam<BootstrapKind> {};

TEST_P(NodeOverEachBootstrap, NeighboursWriteAndSendWithExchangedRegions) {
  constexpr std::uint32_t kWorld = 4;
  constexpr std::size_t kHalf = 2048;
  run_ranks(
      kWorld,
      [&](Node& node, net::Bootstrap& bootstrap) {
        const std::uint32_t me = node.rank();
        const std::uint32_t right = (me + 1) % kWorld;
        const std::uint32_t left = (me + kWorld - 1) % kWorld;
        EXPECT_EQ(node.peers().size(), kWorld - 1);
        std::vector<std::byte> inbox(2 * kHalf, std::byte{0});
        std::vector<std::byte> outbox(2 * kHalf);
        fill_pattern(outbox, me);
        const MemoryRegion in_mr =
            node.protection_domain().register_remote_accessible(inbox, RemoteAccess::write());
        const MemoryRegion out_mr = node.protection_domain().register_local(outbox);
        const auto inboxes = tag_with_ranks(bootstrap.all_gather(in_mr.remote()));
        ASSERT_EQ(inboxes.size(), kWorld);

        const std::array first_half{out_mr.gather(std::span(outbox).first(kHalf))};
        const std::array second_half{out_mr.gather(std::span(outbox).last(kHalf))};
        EXPECT_TRUE(
            throws_error(ErrorKind::invalid_argument,
                         [&] {
                           node.execute(right, ibv::op::PeerWrite{first_half, inboxes[left]});
                         },
                         {"belongs to peer " + std::to_string(left)}));

        PendingWork receive = node.post(
            right, ibv::op::Receive{std::array{in_mr.scatter(std::span(inbox).last(kHalf))}});
        node.barrier();  // every receive is posted before anyone sends
        node.execute(left, ibv::op::Send{second_half});
        node.execute(right, ibv::op::PeerWrite{first_half, inboxes[right].sub_region(0, kHalf)});
        EXPECT_EQ(receive.wait().byte_length(), kHalf);
        node.barrier();  // every write has completed, so every inbox is whole

        std::vector<std::byte> from_left(2 * kHalf);
        std::vector<std::byte> from_right(2 * kHalf);
        fill_pattern(from_left, left);
        fill_pattern(from_right, right);
        EXPECT_TRUE(same_bytes(std::span(from_left).first(kHalf), std::span(inbox).first(kHalf)));
        EXPECT_TRUE(same_bytes(std::span(from_right).last(kHalf), std::span(inbox).last(kHalf)));
      },
      {}, GetParam());
}

INSTANTIATE_TEST_SUITE_P(NodeOperations, NodeOverEachBootstrap,
                         ::testing::Values(BootstrapKind::hosts_file, BootstrapKind::rendezvous),
                         [](const auto& kind) { return to_string(kind.param); });

TEST(NodeMovedFrom, EveryCallThatNeedsItsChannelsOrBarrierThrowsState) {
  // Each rank moves its Node away and calls everything on the moved-from one: a state error
  // saying so, nothing posted; the Node it moved to still works.
  run_ranks(2, [&](Node& node, net::Bootstrap&) {
    const std::uint32_t peer = 1 - node.rank();
    Node moved = std::move(node);
    std::vector<std::byte> bytes(64);
    const MemoryRegion mr = moved.protection_domain().register_local(bytes);
    const std::array data{mr.gather(std::span(bytes))};
    const ibv::op::Send send{data};
    const std::array peers{peer};
    const std::array group{0U, 1U};
    const auto moved_from = [](auto&& call) {
      return throws_error(ErrorKind::state, call, {"moved from"});
    };
    // NOLINTBEGIN(bugprone-use-after-move): what a moved-from Node does is the point
    EXPECT_TRUE(moved_from([&] { node.barrier(); }));
    EXPECT_TRUE(moved_from([&] { node.barrier(group); }));
    EXPECT_TRUE(moved_from([&] { (void)node.datagrams(); }));
    EXPECT_TRUE(moved_from([&] { (void)node.channel(peer); }));
    EXPECT_TRUE(moved_from([&] { (void)std::as_const(node).channel(peer); }));
    EXPECT_TRUE(moved_from([&] { (void)node.execute(peer, send); }));
    EXPECT_TRUE(moved_from([&] { (void)node.post(peer, send); }));
    EXPECT_TRUE(moved_from([&] { (void)node.post_all(ibv::op::to_each(peers, send)); }));
    EXPECT_TRUE(moved_from(
        [&] { node.scope([&](ibv::MultiChannelScope& scope) { (void)scope.post(peer, send); }); }));
    EXPECT_TRUE(moved_from([&] { (void)node.peers(); }));
    EXPECT_TRUE(moved_from([&] { (void)node.peer_of(WorkCompletion{}); }));
    EXPECT_TRUE(moved_from([&] { (void)node.completion_fd(); }));
    EXPECT_TRUE(moved_from([&] { node.arm_completion_fd(); }));
    EXPECT_TRUE(moved_from([&] { (void)node.consume_completion_events(); }));
    EXPECT_TRUE(moved_from([&] { (void)node.receive_shared_any(); }));
    EXPECT_TRUE(moved_from([&] { (void)node.poll_shared_any(); }));
    EXPECT_TRUE(moved_from([&] { (void)node.receive_message_any(); }));
    EXPECT_TRUE(moved_from([&] { (void)node.poll_message_any(); }));
    EXPECT_EQ(node.world_size(), 0U);
    EXPECT_FALSE(node.barrier_poisoned());
    // NOLINTEND(bugprone-use-after-move)
    EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)moved.datagrams(); },
                             {"built without datagrams"}));
    moved.barrier();          // the Node it moved to is whole, on both ranks
    node = std::move(moved);  // assigning to a moved-from Node is fine
    node.barrier();
  });
}

/// A Bootstrap that is never reached: connect() on a moved-from PreparedNode throws first.
class UnusedBootstrap final : public net::Bootstrap {
 public:
  [[nodiscard]] std::uint32_t rank() const noexcept override { return 0; }
  [[nodiscard]] std::uint32_t world_size() const noexcept override { return 2; }
  [[nodiscard]] std::string description() const override { return "unused"; }
  [[nodiscard]] std::vector<std::vector<std::byte>> all_gather_bytes(
      std::span<const std::byte> /*mine*/) override {
    throw std::logic_error("reached");
  }
  [[nodiscard]] std::vector<std::vector<std::byte>> all_to_all_bytes(
      std::span<const std::vector<std::byte>> /*to_peer*/) override {
    throw std::logic_error("reached");
  }
  void barrier() override { throw std::logic_error("reached"); }
};

TEST(PreparedNodeHandshake, AMovedFromOrHandshakenOneThrowsState) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  net::PreparedNode zero = net::NodeBuilder(pd, 0, 2).queue_pair(settings).build();
  net::PreparedNode one = net::NodeBuilder(pd, 1, 2).queue_pair(settings).build();
  const std::vector<net::NodeEndpoint> endpoints{zero.endpoint(), one.endpoint()};
  const std::vector<net::PeerEndpoint> for_zero{zero.endpoint_for(0), one.endpoint_for(0)};
  net::PreparedNode taken = std::move(zero);
  UnusedBootstrap bootstrap;
  const auto moved_from = [](auto&& call) {
    return throws_error(ErrorKind::state, call, {"this PreparedNode was moved from"});
  };
  // NOLINTBEGIN(bugprone-use-after-move): what a moved-from PreparedNode does is the point
  EXPECT_TRUE(moved_from([&] { (void)zero.endpoint(); }));
  EXPECT_TRUE(moved_from([&] { (void)zero.endpoint_for(1); }));
  EXPECT_TRUE(moved_from([&] { (void)std::move(zero).handshake(endpoints); }));
  EXPECT_TRUE(moved_from([&] { (void)std::move(zero).handshake(for_zero); }));
  EXPECT_TRUE(moved_from([&] { (void)std::move(zero).connect(bootstrap); }));
  // Handshaking moves from it too (both queue pairs on one device: no exchange needed).
  const Node node = std::move(taken).handshake(endpoints);
  EXPECT_TRUE(moved_from([&] { (void)taken.endpoint(); }));
  // NOLINTEND(bugprone-use-after-move)
  EXPECT_EQ(node.world_size(), 2U);
}

TEST(PreparedNodeHandshake, ChecksEveryEndpointFirst) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  net::PreparedNode zero = net::NodeBuilder(pd, 0, 2).build();
  net::PreparedNode one = net::NodeBuilder(pd, 1, 2).build();
  const net::NodeEndpoint from_one = one.endpoint();
  EXPECT_EQ(from_one.rank, 1U);
  EXPECT_EQ(from_one.queue_pairs.size(), 2U);
  EXPECT_EQ(net::NodeEndpoint::from_bytes(from_one.to_bytes()), from_one);

  const std::vector<net::NodeEndpoint> too_few{zero.endpoint()};
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)std::move(zero).handshake(too_few); }, {"1 entries", "2"}));
  const std::vector<net::NodeEndpoint> wrong_rank{zero.endpoint(), zero.endpoint()};
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)std::move(zero).handshake(wrong_rank); },
                           {"remote[1]", "rank 0's endpoint"}));
  net::NodeEndpoint other_world = from_one;
  other_world.world_size = 3;
  const std::vector<net::NodeEndpoint> mismatched{zero.endpoint(), other_world};
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)std::move(zero).handshake(mismatched); }, {"world of 3"}));
}

}  // namespace
}  // namespace ibv::test
