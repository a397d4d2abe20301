// SPDX-License-Identifier: MIT
// A Node's datagrams across hosts (NodeBuilder::datagrams(), Node::datagrams()): every rank, on
// its own device and address, learns every other rank's UD address in the Node's bootstrap
// exchange (the run's kind: hosts file, rendezvous or PMIx), sends datagrams to every other rank
// and receives every other rank's, each with its sender's rank, in order, none lost. On the
// testbed the datagrams leave the sender's veth and enter the receiver's (the packet counters
// are checked), so they cross the bridge between hosts: this is also the DatagramEndpoint's
// between-hosts test. Then a request/reply round: rank 0 asks every rank, every rank answers.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device/device_fixture.hpp"
#include "ibv/ibv.hpp"
#include "multi_host.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kDatagramRounds = 20;

/// A packet counter of `netdev` ("tx_packets", "rx_packets"); -1 when unreadable.
long long packets(const std::string& netdev, const std::string& name) {
  std::ifstream in("/sys/class/net/" + netdev + "/statistics/" + name);
  long long value = -1;
  in >> value;
  return value;
}

/// What `sender` sends `receiver` as its message number `index`.
std::vector<std::byte> datagram_payload(std::uint32_t sender, std::uint32_t receiver,
                                        std::uint32_t index) {
  std::vector<std::byte> bytes(96);
  fill_pattern(bytes, sender * 7919U + receiver * 104729U + index);
  const std::array<std::uint32_t, 3> head{sender, receiver, index};
  std::memcpy(bytes.data(), head.data(), sizeof(head));
  return bytes;
}

TEST(MultiHostNodeDatagrams, EveryRankSendsToEveryOtherRankAndReceivesFromAll) {
  auto& world = multi_host();
  const std::uint32_t me = world.rank();
  const std::uint32_t ranks = world.world_size();
  const std::shared_ptr<net::Bootstrap> bootstrap = world.bootstrap(60s);
  const Context context = world.open_device();
  const ProtectionDomain pd(context);
  QueuePairSettings settings;
  if (world.gid_index()) settings.gid_index = *world.gid_index();
  DatagramSettings datagram_settings;
  datagram_settings.receive_buffers = 256;  // every rank's datagrams fit: none dropped
  datagram_settings.timeout = 30s;
  net::Node node = net::NodeBuilder(pd, me, ranks)
                       .queue_pair(settings)
                       .barrier_timeout(60s)
                       .timeouts({.operation = 30s, .drop = 30s})
                       .datagrams(datagram_settings)
                       .build()
                       .connect(*bootstrap);
  ASSERT_TRUE(node.has_datagrams());
  net::NodeDatagrams& datagrams = node.datagrams();
  for (std::uint32_t rank = 0; rank < ranks; ++rank) {
    if (rank == me) continue;
    if (!world.ip(me).starts_with("127.")) {  // each rank on its own device and address
      EXPECT_NE(datagrams.address(rank).gid, datagrams.address(me).gid) << "rank " << rank;
    }
  }
  const std::string netdev =
      context.query_gid(datagrams.endpoint().queue_pair().gid_index()).netdev;
  const long long tx_before = packets(netdev, "tx_packets");
  const long long rx_before = packets(netdev, "rx_packets");
  bootstrap->barrier();  // every rank has read its counters before any rank sends

  for (std::uint32_t index = 0; index < kDatagramRounds; ++index) {
    for (std::uint32_t step = 1; step < ranks; ++step) {
      const std::uint32_t to = (me + step) % ranks;
      datagrams.post_to(to, datagram_payload(me, to, index));
    }
  }
  datagrams.flush(30s);
  std::vector<std::uint32_t> next(ranks, 0);
  for (std::uint32_t got = 0; got < (ranks - 1) * kDatagramRounds; ++got) {
    auto message = datagrams.receive(30s);
    ASSERT_TRUE(message.has_value()) << "rank " << me << " received " << got << " of "
                                     << (ranks - 1) * kDatagramRounds << " datagrams";
    const std::uint32_t from = message->rank;
    ASSERT_LT(from, ranks);
    ASSERT_NE(from, me);
    EXPECT_EQ(message->message.sequence(), next[from]) << "from rank " << from;
    EXPECT_TRUE(same_bytes(datagram_payload(from, me, next[from]), message->message.data()))
        << "from rank " << from;
    ++next[from];
  }
  for (std::uint32_t from = 0; from < ranks; ++from) {
    const SequenceCounts expected =
        from == me ? SequenceCounts{} : SequenceCounts{kDatagramRounds, 0, 0, kDatagramRounds};
    EXPECT_EQ(datagrams.counts(from), expected) << "from rank " << from;
  }
  EXPECT_EQ(datagrams.unknown_sender_datagrams(), 0U);
  EXPECT_EQ(datagrams.endpoint().foreign_datagrams(), 0U);
  if (!world.ip(me).starts_with("127.") && ranks > 1) {
    const long long crossed = static_cast<long long>(ranks - 1) * kDatagramRounds;
    EXPECT_GE(packets(netdev, "tx_packets") - tx_before, crossed) << netdev;
    EXPECT_GE(packets(netdev, "rx_packets") - rx_before, crossed) << netdev;
  }
  node.barrier();

  // Request and reply: rank 0 asks every other rank, each answers rank 0 with its rank.
  if (me == 0) {
    const std::array<std::byte, 1> ask{std::byte{'?'}};
    for (std::uint32_t rank = 1; rank < ranks; ++rank) datagrams.send_to(rank, ask);
    std::vector<bool> answered(ranks, false);
    for (std::uint32_t got = 1; got < ranks; ++got) {
      auto reply = datagrams.receive(30s);
      ASSERT_TRUE(reply.has_value()) << got - 1 << " of " << ranks - 1 << " ranks answered";
      std::uint32_t said = 0;
      ASSERT_EQ(reply->message.data().size(), sizeof(said));
      std::memcpy(&said, reply->message.data().data(), sizeof(said));
      EXPECT_EQ(said, reply->rank);
      answered.at(reply->rank) = true;
    }
    for (std::uint32_t rank = 1; rank < ranks; ++rank) EXPECT_TRUE(answered[rank]) << rank;
  } else {
    auto ask = datagrams.receive(30s);
    ASSERT_TRUE(ask.has_value());
    EXPECT_EQ(ask->rank, 0U);
    const std::array<std::uint32_t, 1> answer{me};
    datagrams.send_to(0, std::as_bytes(std::span(answer)));
  }
  node.barrier();
}

}  // namespace
}  // namespace ibv::test
