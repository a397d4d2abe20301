// SPDX-License-Identifier: MIT
// Device tests of a Node's datagrams (NodeBuilder::datagrams(), Node::datagrams()) on one
// device: every rank a thread with its own Context, protection domain and Bootstrap (as
// node_test.cpp). Every rank sends to every rank, itself included, over both exchange paths
// (the all_to_all of PeerEndpoints in connect(), and an all-gather of NodeEndpoints) and both
// bootstraps; received datagrams carry the sender's rank; loss is counted per rank. A world in
// which one rank did not opt in, or took another Q_Key, fails at the handshake on every rank with
// an error naming a rank (no hang); a datagram from a queue pair that is no rank's is dropped
// and counted. The same across hosts: tests/multi_host/datagram_test.cpp.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/ibv.hpp"
#include "node_ranks.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::throws_error;

/// The settings every rank's datagram endpoint gets in these tests.
DatagramSettings node_datagram_settings() {
  DatagramSettings settings;
  settings.timeout = 5s;
  return settings;
}

/// What `sender` sends `receiver` as its message number `index`: the three numbers, then a
/// pattern that depends on them.
std::vector<std::byte> control_message(std::uint32_t sender, std::uint32_t receiver,
                                       std::uint32_t index, std::size_t size = 64) {
  std::vector<std::byte> bytes(size);
  fill_pattern(bytes, sender * 1000U + receiver * 10U + index);
  const std::array<std::uint32_t, 3> head{sender, receiver, index};
  std::memcpy(bytes.data(), head.data(), sizeof(head));
  return bytes;
}

/// Sends messages number `first` .. `first + rounds - 1` from this rank to every rank (itself
/// included), then receives world * rounds, checking sender, content and per-sender order, then
/// the counts (`first` datagrams from each rank came before).
void every_rank_to_every_rank(net::Node& node, std::uint32_t first, std::uint32_t rounds) {
  net::NodeDatagrams& datagrams = node.datagrams();
  const std::uint32_t me = node.rank();
  const std::uint32_t world = node.world_size();
  ASSERT_EQ(datagrams.rank(), me);
  ASSERT_EQ(datagrams.world_size(), world);
  EXPECT_EQ(datagrams.address(me), datagrams.endpoint().address());
  for (std::uint32_t index = first; index < first + rounds; ++index) {
    for (std::uint32_t step = 0; step < world; ++step) {
      const std::uint32_t to = (me + step) % world;  // each rank starts with itself
      datagrams.send_to(to, control_message(me, to, index));
    }
  }
  std::vector<std::uint32_t> next(world, first);
  for (std::uint32_t got = 0; got < world * rounds; ++got) {
    auto message = datagrams.receive(10s);
    ASSERT_TRUE(message.has_value())
        << "rank " << me << " received " << got << " of " << world * rounds << " datagrams";
    const std::uint32_t from = message->rank;
    ASSERT_LT(from, world);
    EXPECT_EQ(message->message.sequence(), next[from]);
    EXPECT_TRUE(same_bytes(control_message(from, me, next[from]), message->message.data()))
        << "from rank " << from << " to rank " << me;
    ++next[from];
  }
  for (std::uint32_t from = 0; from < world; ++from) {
    const std::uint64_t total = first + rounds;
    EXPECT_EQ(datagrams.counts(from), (SequenceCounts{total, 0, 0, total})) << "from " << from;
  }
  EXPECT_EQ(datagrams.unknown_sender_datagrams(), 0U);
  EXPECT_EQ(datagrams.endpoint().foreign_datagrams(), 0U);
  EXPECT_FALSE(datagrams.try_receive().has_value());
}

class NodeDatagramPaths : public ::testing::TestWithParam<std::tuple<ExchangePath, BootstrapKind>> {
};

TEST_P(NodeDatagramPaths, EveryRankSendsToEveryRankAndSeesTheSendersRank) {
  const auto [path, kind] = GetParam();
  run_ranks_over(
      4, path, kind,
      [](std::uint32_t, net::NodeBuilder& builder) { builder.datagrams(node_datagram_settings()); },
      [](net::Node& node, net::Bootstrap&) {
        ASSERT_TRUE(node.has_datagrams());
        every_rank_to_every_rank(node, 0, 5);
        node.barrier();  // a second exchange after everyone has checked the first
        every_rank_to_every_rank(node, 5, 3);
      });
}

INSTANTIATE_TEST_SUITE_P(
    NodeDatagrams, NodeDatagramPaths,
    ::testing::Combine(::testing::Values(ExchangePath::all_to_all, ExchangePath::all_gather),
                       ::testing::Values(BootstrapKind::hosts_file, BootstrapKind::rendezvous)),
    [](const auto& test) {
      return std::string(std::get<0>(test.param) == ExchangePath::all_to_all ? "AllToAll"
                                                                             : "AllGather") +
             "_" + to_string(std::get<1>(test.param));
    });

TEST(NodeDatagrams, SizesAndRanksAreCheckedBeforeAnythingIsPosted) {
  run_ranks(
      2,
      [](net::Node& node, net::Bootstrap&) {
        net::NodeDatagrams& datagrams = node.datagrams();
        const std::uint32_t me = node.rank();
        const std::uint32_t other = 1 - me;
        const std::uint32_t most = datagrams.max_payload(other);
        EXPECT_EQ(most, datagrams.endpoint().max_payload(datagrams.address(other)));
        EXPECT_EQ(datagrams.max_payload(), std::min(most, datagrams.max_payload(me)));
        EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                                 [&] { datagrams.send_to(2, control_message(me, 2, 0)); },
                                 {"send_to", "rank 2"}));
        EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)datagrams.address(7); },
                                 {"rank 7", "world size 2"}));
        EXPECT_TRUE(
            throws_error(ErrorKind::invalid_argument,
                         [&] { datagrams.send_to(other, std::vector<std::byte>(most + 1)); },
                         {std::to_string(most + 1) + " bytes", "nothing was posted"}));
        EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)datagrams.receive(0ms); },
                                 {"NodeDatagrams::receive"}));
        datagrams.post_to(other, control_message(me, other, 0, most));  // at the limit: fine
        datagrams.flush(5s);
        auto message = datagrams.receive(10s);
        ASSERT_TRUE(message.has_value());
        EXPECT_EQ(message->rank, other);
        EXPECT_TRUE(same_bytes(control_message(other, me, 0, most), message->message.data()));
      },
      [](net::NodeBuilder& builder) { builder.datagrams(node_datagram_settings()); });
}

TEST(NodeDatagrams, ANodeWithoutThemHasNoneAndSendsVersionOneEndpoints) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  net::NodeBuilder plain(pd, 0, 2);
  EXPECT_FALSE(plain.datagram_settings().has_value());
  const net::PreparedNode prepared = plain.build();
  EXPECT_FALSE(prepared.endpoint().datagram.has_value());
  EXPECT_EQ(prepared.endpoint_for(1).to_bytes().size(), net::PeerEndpoint::kWireSize);
  EXPECT_EQ(prepared.endpoint_for(1).to_bytes()[0], std::byte{1});

  net::NodeBuilder with(pd, 0, 2);
  DatagramSettings settings = node_datagram_settings();
  QueuePairSettings queue_pair;
  queue_pair.gid_index = test_gid_index(context);
  with.queue_pair(queue_pair).datagrams(settings);
  ASSERT_TRUE(with.datagram_settings().has_value());
  const net::PreparedNode prepared_with = with.build();
  const auto endpoint = prepared_with.endpoint();
  ASSERT_TRUE(endpoint.datagram.has_value());
  EXPECT_EQ(prepared_with.endpoint_for(1).datagram, endpoint.datagram);
  EXPECT_EQ(prepared_with.endpoint_for(1).to_bytes().size(), net::PeerEndpoint::kDatagramWireSize);
  EXPECT_EQ(endpoint.datagram->qkey, settings.qkey.value());

  run_ranks(2, [](net::Node& node, net::Bootstrap&) {
    EXPECT_FALSE(node.has_datagrams());
    EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)node.datagrams(); },
                             {"Node::datagrams", "without datagrams"}));
  });
}

TEST(NodeDatagrams, ARankThatDidNotOptInFailsTheHandshakeOnEveryRankNamingARank) {
  for (const auto path : {ExchangePath::all_to_all, ExchangePath::all_gather}) {
    SCOPED_TRACE(path == ExchangePath::all_to_all ? "all_to_all" : "all_gather");
    constexpr std::uint32_t kWorld = 3;
    std::mutex mutex;
    std::vector<std::string> errors(kWorld);
    const auto started = std::chrono::steady_clock::now();
    run_ranks_over(
        kWorld, path, BootstrapKind::hosts_file,
        [](std::uint32_t rank, net::NodeBuilder& builder) {
          if (rank != 2) builder.datagrams(node_datagram_settings());
        },
        [](net::Node& node, net::Bootstrap&) {
          ADD_FAILURE() << "rank " << node.rank() << " connected";
        },
        [&](std::uint32_t rank, const Error& error) {
          EXPECT_EQ(error.kind(), ErrorKind::invalid_argument) << error.what();
          const std::lock_guard lock(mutex);
          errors[rank] = error.what();
        });
    EXPECT_LT(std::chrono::steady_clock::now() - started, 15s);
    for (std::uint32_t rank = 0; rank < 2; ++rank) {
      EXPECT_NE(errors[rank].find("rank 2 sent no datagram address"), std::string::npos)
          << errors[rank];
    }
    EXPECT_NE(errors[2].find("has datagrams on, and this rank has them off"), std::string::npos)
        << errors[2];
    EXPECT_NE(errors[2].find("NodeBuilder::datagrams()"), std::string::npos) << errors[2];
  }
}

TEST(NodeDatagrams, ARankWithAnotherQKeyFailsTheHandshake) {
  std::mutex mutex;
  std::vector<std::string> errors(2);
  run_ranks_over(
      2, ExchangePath::all_to_all, BootstrapKind::rendezvous,
      [](std::uint32_t rank, net::NodeBuilder& builder) {
        DatagramSettings settings = node_datagram_settings();
        if (rank == 1) settings.qkey = QKey(0x2222);
        builder.datagrams(settings);
      },
      [](net::Node& node, net::Bootstrap&) {
        ADD_FAILURE() << "rank " << node.rank() << " connected";
      },
      [&](std::uint32_t rank, const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::invalid_argument) << error.what();
        const std::lock_guard lock(mutex);
        errors[rank] = error.what();
      });
  EXPECT_NE(
      errors[0].find("rank 1 takes datagrams with Q_Key 0x00002222, this rank with 0x11111111"),
      std::string::npos)
      << errors[0];
  EXPECT_NE(
      errors[1].find("rank 0 takes datagrams with Q_Key 0x11111111, this rank with 0x00002222"),
      std::string::npos)
      << errors[1];
}

TEST(NodeDatagrams, ADatagramFromAQueuePairThatIsNoRanksIsDroppedAndCounted) {
  run_ranks(
      2,
      [](net::Node& node, net::Bootstrap& bootstrap) {
        net::NodeDatagrams& datagrams = node.datagrams();
        if (node.rank() == 1) {
          DatagramSettings settings = node_datagram_settings();
          settings.gid_index = test_gid_index(node.protection_domain().context());
          DatagramEndpoint stray(node.protection_domain(), settings);
          stray.send(datagrams.address(0), control_message(9, 0, 0));
        }
        bootstrap.barrier();
        if (node.rank() == 1) datagrams.send_to(0, control_message(1, 0, 0));
        if (node.rank() == 0) {
          auto message = datagrams.receive(10s);
          ASSERT_TRUE(message.has_value());
          EXPECT_EQ(message->rank, 1U);
          EXPECT_TRUE(same_bytes(control_message(1, 0, 0), message->message.data()));
          EXPECT_FALSE(datagrams.receive(200ms).has_value());
          EXPECT_EQ(datagrams.unknown_sender_datagrams(), 1U);
        }
        bootstrap.barrier();
      },
      [](net::NodeBuilder& builder) { builder.datagrams(node_datagram_settings()); });
}

}  // namespace
}  // namespace ibv::test
