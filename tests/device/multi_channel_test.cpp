// SPDX-License-Identifier: MIT
// Device tests of the MultiChannel layer on one device: three ranks (three MultiChannels on
// one protection domain, connected in this process), each with its own registered buffer.
// - building and handshaking: argument checks, endpoints per peer, a missing peer;
// - every peer-addressed operation in the three styles, and scatter send, gather receive,
//   scatter write, gather read and multicast, data checked byte by byte; PostOptions on the
//   blocking calls;
// - remote regions tagged with their peer: using one with another peer is an error and posts
//   nothing, also when it is one element of a batch;
// - failures of a batch name the peer they came from; a batch that times out cancels its
//   request (a late message never lands in the canary-filled buffer) and breaks only the
//   channel to that peer.
// The same operations across hosts (one rank per host) are in tests/multi_host/.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::throws_error;

constexpr std::uint32_t kPeers = 3;
constexpr std::size_t kPeerBufferSize = std::size_t{16} * 1024;
constexpr std::uint64_t kChunk = 1024;  // bytes of one chunk(rank, index)

class MultiChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QueuePairSettings settings;
    settings.rnr_retry = RnrRetryCount::infinite();  // one thread posts receives after sends
    settings.gid_index = test_gid_index(context);
    std::vector<PreparedMultiChannel> prepared;
    for (std::uint32_t rank = 0; rank < kPeers; ++rank) {
      prepared.push_back(MultiChannelBuilder(pd, rank, kPeers)
                             .queue_pair(settings)
                             .timeouts({.operation = operation_timeout, .drop = 5s})
                             .build());
    }
    // remote[r][p]: what peer p made for rank r, gathered before any handshake consumes p
    std::vector<std::vector<std::optional<Endpoint>>> remote(
        kPeers, std::vector<std::optional<Endpoint>>(kPeers));
    for (std::uint32_t rank = 0; rank < kPeers; ++rank) {
      for (std::uint32_t peer = 0; peer < kPeers; ++peer) {
        if (peer != rank) remote[rank][peer] = prepared[peer].endpoint_for(rank);
      }
    }
    for (std::uint32_t rank = 0; rank < kPeers; ++rank) {
      nodes.push_back(std::move(prepared[rank]).handshake(remote[rank]));
    }
    EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state, [&] { (void)prepared[0].endpoints(); },
                                       {"already handshaken"}));
    for (std::uint32_t rank = 0; rank < kPeers; ++rank) {
      buffers.emplace_back(kPeerBufferSize);
      mrs.push_back(pd.register_remote_accessible(buffers[rank], RemoteAccess::all()));
      remote_of.emplace_back(rank, mrs[rank].remote());
    }
  }

  std::span<std::byte> chunk(std::uint32_t rank, std::size_t index, std::size_t size = 1024) {
    return std::span(buffers[rank]).subspan(index * size, size);
  }

  Duration operation_timeout = 5s;  // the default of every blocking call and scope
  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::vector<MultiChannel> nodes;
  std::vector<std::vector<std::byte>> buffers;
  std::vector<MemoryRegion> mrs;
  std::vector<PeerRemoteMemoryRegion> remote_of;  // rank r's buffer, tagged with r
};

TEST(MultiChannelBuild, RejectsABadRankOrWorldSize) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { MultiChannelBuilder(pd, 0, 0); },
                           {"world_size"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { MultiChannelBuilder(pd, 3, 3); },
                           {"rank 3", "world size 3"}));
}

TEST(MultiChannelBuild, WorldOfOneHasNoPeers) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  auto prepared = MultiChannelBuilder(pd, 0, 1).build();
  EXPECT_EQ(prepared.endpoints(), std::vector<std::optional<Endpoint>>(1));
  const std::vector<std::optional<Endpoint>> none(1);
  MultiChannel alone = std::move(prepared).handshake(none);
  EXPECT_TRUE(alone.peers().empty());
  EXPECT_TRUE(
      throws_error(ErrorKind::invalid_argument, [&] { (void)alone.channel(0); }, {"itself"}));
}

TEST(MultiChannelBuild, EndpointsArePerPeerAndHandshakeChecksThemFirst) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  auto prepared = MultiChannelBuilder(pd, 1, 3).build();
  const auto endpoints = prepared.endpoints();
  ASSERT_EQ(endpoints.size(), 3U);
  EXPECT_FALSE(endpoints[1].has_value());
  ASSERT_TRUE(endpoints[0] && endpoints[2]);
  EXPECT_NE(endpoints[0]->qp_number, endpoints[2]->qp_number);
  EXPECT_EQ(*endpoints[2], prepared.endpoint_for(2));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)prepared.endpoint_for(1); },
                           {"itself"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)prepared.endpoint_for(3); },
                           {"world size 3"}));

  const std::vector<std::optional<Endpoint>> too_short(2);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)std::move(prepared).handshake(too_short); },
                           {"2 entries", "3"}));
  std::vector<std::optional<Endpoint>> missing(3);
  missing[0] = endpoints[0];  // peer 2's entry is missing
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)std::move(prepared).handshake(missing); },
                           {"remote[2]", "missing"}));
}

TEST_F(MultiChannelTest, KnowsItsPeersAndTheirChannels) {
  EXPECT_EQ(nodes[1].peers(), (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(nodes[1].rank(), 1U);
  EXPECT_EQ(nodes[1].world_size(), kPeers);
  EXPECT_TRUE(
      throws_error(ErrorKind::invalid_argument, [&] { (void)nodes[1].channel(1); }, {"itself"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)nodes[1].channel(7); },
                           {"world size 3"}));
}

TEST_F(MultiChannelTest, BlockingSendReceiveWriteReadWithEachPeer) {
  fill_pattern(buffers[0], 1);
  for (const std::uint32_t peer : {1U, 2U}) {
    // send / receive
    const std::array into{mrs[peer].scatter(chunk(peer, 0))};
    PendingWork receive = nodes[peer].post(0, ibv::op::Receive{into});
    const std::array from{mrs[0].gather(chunk(0, peer))};
    const WorkCompletion sent = nodes[0].execute(peer, ibv::op::Send{from});
    EXPECT_EQ(sent.opcode(), WorkOpcode::send);
    EXPECT_EQ(receive.wait().byte_length(), 1024U);
    EXPECT_TRUE(same_bytes(chunk(0, peer), chunk(peer, 0)));
    EXPECT_EQ(nodes[0].peer_of(sent), peer);

    // write into the peer's chunk 2, read it back into rank 0's chunk 5 + peer
    nodes[0].execute(peer, ibv::op::PeerWrite{from, remote_of[peer].sub_region(kChunk * 2, 1024)});
    EXPECT_TRUE(same_bytes(chunk(0, peer), chunk(peer, 2)));
    const std::array back{mrs[0].scatter(chunk(0, 5 + peer))};
    nodes[0].execute(peer, ibv::op::PeerRead{back, remote_of[peer].sub_region(kChunk * 2, 1024)});
    EXPECT_TRUE(same_bytes(chunk(0, peer), chunk(0, 5 + peer)));
  }
}

TEST_F(MultiChannelTest, BlockingCallsTakeInlineOptionsAsTheChannelsDo) {
  fill_pattern(buffers[0], 9);
  const std::array from{mrs[0].gather(chunk(0, 0, 64))};
  const auto destination = remote_of[1].sub_region(kChunk * 3, 64);
  const Channel& to_peer = nodes[0].channel(1);
  EXPECT_TRUE(
      nodes[0]
          .execute(1, op::PeerWrite{from, destination}, {.inline_data = InlinePolicy::never})
          .ok());
  EXPECT_EQ(to_peer.inline_posts(), 0U);
  EXPECT_TRUE(
      nodes[0]
          .execute(1, op::PeerWrite{from, destination}, {.inline_data = InlinePolicy::always}, 5s)
          .ok());
  EXPECT_EQ(to_peer.inline_posts(), 1U);
  EXPECT_TRUE(same_bytes(chunk(0, 0, 64), chunk(1, 3).first(64)));
  // unsignaled options do not compile for a blocking call (InlineOptions have no `signaled`):
  // tests/unit/operation_safety_test.cpp
}

TEST_F(MultiChannelTest, ImmediatesArriveFromTheRightPeer) {
  const std::array<ScatterElement, 0> nothing{};
  PendingWork from_zero = nodes[2].post(0, ibv::op::Receive{nothing});
  PendingWork from_one = nodes[2].post(1, ibv::op::Receive{nothing});
  nodes[1].execute(2, ibv::op::Send{{}, 0x1111});
  nodes[0].execute(2, ibv::op::PeerWrite{{}, remote_of[2].sub_region(0, 0), 0x2222});
  EXPECT_EQ(from_one.wait().immediate(), 0x1111U);
  EXPECT_EQ(from_zero.wait().immediate(), 0x2222U);
}

TEST_F(MultiChannelTest, UnpolledSinglePeerPosts) {
  fill_pattern(buffers[1], 3);
  const std::array into{mrs[0].scatter(chunk(0, 0))};
  PendingWork receive = nodes[0].post(1, ibv::op::Receive{into});
  const std::array from{mrs[1].gather(chunk(1, 0))};
  PendingWork send = nodes[1].post(0, ibv::op::Send{from});
  PendingWork immediate_receive = nodes[0].post(1, ibv::op::Receive{{}});
  PendingWork immediate = nodes[1].post(0, ibv::op::Send{{}, 42});
  PendingWork write = nodes[1].post(0, ibv::op::PeerWrite{std::array{mrs[1].gather(chunk(1, 1))},
                                                          remote_of[0].sub_region(1024, 1024)});
  PendingWork write_immediate_receive = nodes[0].post(1, ibv::op::Receive{{}});
  PendingWork write_immediate =
      nodes[1].post(0, ibv::op::PeerWrite{{}, remote_of[0].sub_region(0, 0), 43});
  EXPECT_TRUE(send.wait().ok());
  EXPECT_TRUE(receive.wait().ok());
  EXPECT_TRUE(immediate.wait().ok());
  EXPECT_EQ(immediate_receive.wait().immediate(), 42U);
  EXPECT_TRUE(write.wait().ok());
  EXPECT_TRUE(write_immediate.wait().ok());
  EXPECT_EQ(write_immediate_receive.wait().immediate(), 43U);
  PendingWork read = nodes[1].post(0, ibv::op::PeerRead{std::array{mrs[1].scatter(chunk(1, 9))},
                                                        remote_of[0].sub_region(1024, 1024)});
  EXPECT_TRUE(read.wait().ok());
  EXPECT_TRUE(same_bytes(chunk(1, 0), chunk(0, 0)));
  EXPECT_TRUE(same_bytes(chunk(1, 1), chunk(0, 1)));
  EXPECT_TRUE(same_bytes(chunk(1, 1), chunk(1, 9)));
}

TEST_F(MultiChannelTest, ScatterSendAndGatherReceive) {
  fill_pattern(buffers[0], 5);
  fill_pattern(buffers[2], 6);
  // rank 0 scatters chunk 1 to rank 1 and chunk 2 to rank 2
  const std::array into_1{mrs[1].scatter(chunk(1, 0))};
  const std::array into_2{mrs[2].scatter(chunk(2, 8))};
  PendingWork at_1 = nodes[1].post(0, ibv::op::Receive{into_1});
  PendingWork at_2 = nodes[2].post(0, ibv::op::Receive{into_2});
  const std::array from_1{mrs[0].gather(chunk(0, 1))};
  const std::array from_2{mrs[0].gather(chunk(0, 2))};
  const std::array sends{op::ToPeer{1U, op::Send{from_1}}, op::ToPeer{2U, op::Send{from_2}}};
  std::vector<PendingWork> sent = nodes[0].post_all(sends);
  ASSERT_EQ(sent.size(), 2U);
  EXPECT_EQ(nodes[0].peer_of(sent[0].wait()), 1U);
  EXPECT_EQ(nodes[0].peer_of(sent[1].wait()), 2U);
  at_1.wait();
  at_2.wait();
  EXPECT_TRUE(same_bytes(chunk(0, 1), chunk(1, 0)));
  EXPECT_TRUE(same_bytes(chunk(0, 2), chunk(2, 8)));

  // rank 1 gathers a message from rank 0 and one from rank 2 into two chunks
  const std::array g0{mrs[1].scatter(chunk(1, 4))};
  const std::array g2{mrs[1].scatter(chunk(1, 5, 512))};
  const std::array receives{op::ToPeer{0U, op::Receive{g0}}, op::ToPeer{2U, op::Receive{g2}}};
  auto posted = nodes[1].post_all(receives);
  nodes[2].execute(1, ibv::op::Send{std::array{mrs[2].gather(chunk(2, 3, 512))}});
  nodes[0].execute(1, ibv::op::Send{std::array{mrs[0].gather(chunk(0, 3))}});
  ASSERT_EQ(posted.size(), 2U);
  EXPECT_EQ(posted[0].wait().byte_length(), 1024U);
  EXPECT_EQ(posted[1].wait().byte_length(), 512U);
  EXPECT_TRUE(same_bytes(chunk(0, 3), chunk(1, 4)));
  EXPECT_TRUE(same_bytes(chunk(2, 3, 512), chunk(1, 5, 512)));

  // and in a scope, which waits for all of them
  std::vector<PendingWork> senders;
  const std::array h0{mrs[1].scatter(chunk(1, 10))};
  const std::array h2{mrs[1].scatter(chunk(1, 11))};
  senders.push_back(nodes[0].post(1, ibv::op::Send{std::array{mrs[0].gather(chunk(0, 6))}}));
  senders.push_back(nodes[2].post(1, ibv::op::Send{std::array{mrs[2].gather(chunk(2, 6))}}));
  const std::size_t kept = nodes[1].scope([&](MultiChannelScope& scope) {
    scope.post_all(std::array{op::ToPeer{0U, op::Receive{h0}}, op::ToPeer{2U, op::Receive{h2}}});
    return scope.size();
  });
  EXPECT_EQ(kept, 2U);
  for (auto& sender : senders) sender.wait();
  EXPECT_TRUE(same_bytes(chunk(0, 6), chunk(1, 10)));
  EXPECT_TRUE(same_bytes(chunk(2, 6), chunk(1, 11)));
}

TEST_F(MultiChannelTest, ScatterWriteAndGatherRead) {
  fill_pattern(buffers[0], 9);
  fill_pattern(buffers[1], 10);
  fill_pattern(buffers[2], 11);
  const std::array a{mrs[0].gather(chunk(0, 1))};
  const std::array b{mrs[0].gather(chunk(0, 2))};
  const std::array writes{
      op::ToPeer{1U, op::PeerWrite{a, remote_of[1].sub_region(kChunk * 7, 1024)}},
      op::ToPeer{2U, op::PeerWrite{b, remote_of[2].sub_region(kChunk * 9, 1024)}}};
  nodes[0].scope([&](MultiChannelScope& scope) { scope.post_all(writes); });
  EXPECT_TRUE(same_bytes(chunk(0, 1), chunk(1, 7)));
  EXPECT_TRUE(same_bytes(chunk(0, 2), chunk(2, 9)));

  const std::array r1{mrs[0].scatter(chunk(0, 12))};
  const std::array r2{mrs[0].scatter(chunk(0, 13))};
  const std::array reads{
      op::ToPeer{1U, op::PeerRead{r1, remote_of[1].sub_region(kChunk * 3, 1024)}},
      op::ToPeer{2U, op::PeerRead{r2, remote_of[2].sub_region(kChunk * 4, 1024)}}};
  auto handles = nodes[0].post_all(reads);
  for (auto& handle : handles) EXPECT_TRUE(handle.wait().ok());
  EXPECT_TRUE(same_bytes(chunk(1, 3), chunk(0, 12)));
  EXPECT_TRUE(same_bytes(chunk(2, 4), chunk(0, 13)));

  fill_pattern(chunk(0, 14), 12);
  auto write_handles = nodes[0].post_all(std::array{
      op::ToPeer{2U, op::PeerWrite{std::array{mrs[0].gather(chunk(0, 14))}, remote_of[2]}}});
  write_handles.at(0).wait();
  EXPECT_TRUE(same_bytes(chunk(0, 14), chunk(2, 0)));
  const std::array r3{mrs[0].scatter(chunk(0, 15))};
  std::vector<PendingWork> read = nodes[0].post_all(
      std::array{op::ToPeer{1U, op::PeerRead{r3, remote_of[1].sub_region(0, 1024)}}});
  ASSERT_EQ(read.size(), 1U);
  EXPECT_TRUE(read[0].wait().ok());
  EXPECT_TRUE(same_bytes(chunk(1, 0), chunk(0, 15)));
}

TEST_F(MultiChannelTest, MulticastSendsOneBufferToEveryListedPeer) {
  fill_pattern(chunk(2, 0), 13);
  const std::array at_0{mrs[0].scatter(chunk(0, 3))};
  const std::array at_1{mrs[1].scatter(chunk(1, 4))};
  PendingWork r0 = nodes[0].post(2, ibv::op::Receive{at_0});
  PendingWork r1 = nodes[1].post(2, ibv::op::Receive{at_1});
  const std::array from{mrs[2].gather(chunk(2, 0))};
  const std::array peers{0U, 1U};
  nodes[2].scope(
      [&](MultiChannelScope& scope) { scope.post_all(op::to_each(peers, op::Send{from})); });
  r0.wait();
  r1.wait();
  EXPECT_TRUE(same_bytes(chunk(2, 0), chunk(0, 3)));
  EXPECT_TRUE(same_bytes(chunk(2, 0), chunk(1, 4)));

  PendingWork again = nodes[1].post(2, ibv::op::Receive{at_1});
  auto handles = nodes[2].post_all(op::to_each(std::array{1U}, op::Send{from}));
  handles.at(0).wait();
  again.wait();

  EXPECT_TRUE(
      throws_error(ErrorKind::invalid_argument,
                   [&] {
                     (void)nodes[2].post_all(op::to_each(std::array{1U, 0U, 1U}, op::Send{from}));
                   },
                   {"to_each", "peer 1", "twice"}));
  EXPECT_TRUE(
      throws_error(ErrorKind::invalid_argument,
                   [&] { (void)nodes[2].post_all(op::to_each(std::array{2U}, op::Send{from})); },
                   {"operations[0]", "itself", "nothing was posted"}));
}

TEST_F(MultiChannelTest, ARegionOfAnotherPeerIsRejectedAndNothingIsWritten) {
  fill_pattern(chunk(0, 0), 14);
  const std::array from{mrs[0].gather(chunk(0, 0))};
  // rank 2's region, used with peer 1: both buffers are on this one device, so without the tag
  // this write would succeed and land in rank 2's buffer.
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] {
                             nodes[0].execute(1, ibv::op::PeerWrite{from, remote_of[2]});
                           },
                           {"MultiChannel::execute", "peer 2", "not to peer 1"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] {
                             (void)nodes[0].post(
                                 1, ibv::op::PeerRead{std::array{mrs[0].scatter(chunk(0, 1))},
                                                      remote_of[2]});
                           },
                           {"MultiChannel::post", "peer 2"}));
  // a batch whose second element is wrong posts nothing, not even its first element
  const std::array writes{op::ToPeer{1U, op::PeerWrite{from, remote_of[1]}},
                          op::ToPeer{2U, op::PeerWrite{from, remote_of[1]}}};
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)nodes[0].post_all(writes); },
                           {"MultiChannel::post_all", "operations[1]", "peer 1", "not to peer 2",
                            "nothing was posted"}));
  EXPECT_TRUE(throws_error(
      ErrorKind::invalid_argument,
      [&] { nodes[0].scope([&](MultiChannelScope& scope) { scope.post_all(writes); }); },
      {"MultiChannelScope::post_all", "operations[1]"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] {
                             (void)nodes[0].post_all(std::array{op::ToPeer{1U, op::Send{from}},
                                                                op::ToPeer{5U, op::Send{from}}});
                           },
                           {"operations[1]", "peer 5", "world size is 3"}));
  EXPECT_TRUE(all_zero(buffers[1]));
  EXPECT_TRUE(all_zero(buffers[2]));
}

// The generic calls take an operation's peer form (op::PeerWrite ...), whose region carries its
// peer: a region of another peer is refused by every style before anything is posted (a plain
// RemoteMemoryRegion does not compile: tests/unit/operation_safety_test.cpp).
TEST_F(MultiChannelTest, TheGenericCallsRefuseARegionOfAnotherPeerToo) {
  fill_pattern(chunk(0, 0), 15);
  const std::array from{mrs[0].gather(chunk(0, 0))};
  const op::PeerWrite foreign{from, remote_of[2].sub_region(0, kChunk)};
  EXPECT_TRUE(
      throws_error(ErrorKind::invalid_argument, [&] { (void)nodes[0].execute(1, foreign); },
                   {"MultiChannel::execute", "peer 2", "not to peer 1", "nothing was posted"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)nodes[0].execute(1, foreign, InlineOptions{}); },
                           {"MultiChannel::execute", "peer 2", "not to peer 1"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)nodes[0].post(1, foreign); },
                           {"MultiChannel::post", "peer 2", "not to peer 1"}));
  EXPECT_TRUE(
      throws_error(ErrorKind::invalid_argument,
                   [&] {
                     (void)nodes[0].execute(
                         1, op::PeerRead{std::array{mrs[0].scatter(chunk(0, 1))}, remote_of[2]});
                   },
                   {"peer 2", "not to peer 1"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] {
                             (void)nodes[0].execute(
                                 1, op::PeerFetchAdd{mrs[0].scatter(chunk(0, 1).first(8)),
                                                     remote_of[2].sub_region(0, 8), 1});
                           },
                           {"peer 2", "not to peer 1"}));
  // a list whose second element is another peer's posts nothing, not even its first element
  const std::vector<op::PeerAnySend> list{op::PeerWrite{from, remote_of[1].sub_region(0, kChunk)},
                                          foreign};
  std::size_t posted = 1;
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] {
                             nodes[0].scope([&](MultiChannelScope& scope) {
                               try {
                                 scope.post_all(1, list);
                               } catch (...) {
                                 posted = scope.size();
                                 throw;
                               }
                             });
                           },
                           {"MultiChannelScope::post_all", "peer 2", "not to peer 1"}));
  EXPECT_EQ(posted, 0U);
  EXPECT_TRUE(throws_error(
      ErrorKind::invalid_argument,
      [&] { nodes[0].scope([&](MultiChannelScope& scope) { (void)scope.post(1, foreign); }); },
      {"MultiChannelScope::post", "peer 2"}));
  EXPECT_TRUE(all_zero(buffers[1]));
  EXPECT_TRUE(all_zero(buffers[2]));
  // the right peer's region goes through every style
  EXPECT_TRUE(nodes[0].execute(2, foreign).ok());
  EXPECT_TRUE(same_bytes(chunk(0, 0), chunk(2, 0)));
}

TEST_F(MultiChannelTest, ScopeWaitsForWorkOnEveryPeer) {
  fill_pattern(chunk(1, 0), 15);
  const std::array at_0{mrs[0].scatter(chunk(0, 0))};
  const std::array at_2{mrs[2].scatter(chunk(2, 0))};
  const std::array from{mrs[1].gather(chunk(1, 0))};
  nodes[0].scope([&](MultiChannelScope& receivers) {
    receivers.post(1, ibv::op::Receive{at_0});
    nodes[2].scope([&](MultiChannelScope& other) {
      other.post_all(std::array{op::ToPeer{1U, op::Receive{at_2}}});
      nodes[1].scope([&](MultiChannelScope& sender) {
        sender.post_all(op::to_each(std::array{0U, 2U}, op::Send{from}));
        sender.post(0, op::PeerWrite{from, remote_of[0].sub_region(4096, 1024)});
        sender.post_all(std::vector<op::ToPeer<op::Send>>{});
        EXPECT_EQ(sender.size(), 3U);
      });
    });
  });
  EXPECT_TRUE(same_bytes(chunk(1, 0), chunk(0, 0)));
  EXPECT_TRUE(same_bytes(chunk(1, 0), chunk(2, 0)));
  EXPECT_TRUE(same_bytes(chunk(1, 0), chunk(0, 4)));
}

// post_all(peer, ...) posts a list on that peer's channel: a receive list on one side, a mixed
// list (a write, then the send that tells) on the other.
TEST_F(MultiChannelTest, PostAllToAPeerPostsTheListOnThatPeersChannel) {
  fill_pattern(chunk(0, 0), 17);
  fill_pattern(chunk(0, 1), 18);
  const std::array data{mrs[0].gather(chunk(0, 0))};
  const std::array note{mrs[0].gather(chunk(0, 1))};
  const std::array into{mrs[1].scatter(chunk(1, 0))};
  const std::vector<op::Receive> receives{op::Receive{into}};
  const std::vector<op::PeerAnySend> list{
      op::PeerWrite{data, remote_of[1].sub_region(kChunk * 3, kChunk)}, op::Send{note}};
  nodes[1].scope([&](MultiChannelScope& receiver) {
    receiver.post_all(0, receives);
    nodes[0].scope([&](MultiChannelScope& sender) {
      sender.post_all(1, list);
      EXPECT_EQ(sender.size(), 2U);
    });
  });
  EXPECT_TRUE(same_bytes(chunk(0, 0), chunk(1, 3)));
  EXPECT_TRUE(same_bytes(chunk(0, 1), chunk(1, 0)));
}

TEST_F(MultiChannelTest, AFailureInAScopeNamesItsPeer) {
  const std::array from{mrs[0].gather(chunk(0, 0))};
  const RemoteMemoryRegion bad_key(remote_of[2].region().address(), 1024,
                                   remote_of[2].region().rkey() ^ 0x5a5a5a5aU);
  try {
    nodes[0].scope([&](MultiChannelScope& scope) {
      scope.post(1, ibv::op::PeerWrite{from, remote_of[1].sub_region(0, 1024)});
      scope.post(2, ibv::op::PeerWrite{from, PeerRemoteMemoryRegion(2, bad_key)});
    });
    FAIL() << "a write with a wrong rkey succeeded";
  } catch (const BatchError& error) {
    ASSERT_EQ(error.failed_completions().size(), 1U) << error.what();
    EXPECT_EQ(error.failed_completions()[0].status(), WorkStatus::remote_access_error);
    EXPECT_EQ(nodes[0].peer_of(error.failed_completions()[0]), 2U);
    EXPECT_THAT(error.what(), ::testing::HasSubstr("MultiChannel::scope"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr("peer 2: "));
  }
}

TEST_F(MultiChannelTest, ABatchFailureNamesItsPeerAfterTheRestCompleted) {
  fill_pattern(chunk(0, 0), 16);
  const std::array from{mrs[0].gather(chunk(0, 0))};
  const RemoteMemoryRegion bad_key(remote_of[1].region().address(), 1024,
                                   remote_of[1].region().rkey() ^ 0x1234U);
  const std::array writes{op::ToPeer{1U, op::PeerWrite{from, PeerRemoteMemoryRegion(1, bad_key)}},
                          op::ToPeer{2U, op::PeerWrite{from, remote_of[2].sub_region(0, 1024)}}};
  try {
    nodes[0].scope([&](MultiChannelScope& scope) { scope.post_all(writes); });
    FAIL() << "a write with a wrong rkey succeeded";
  } catch (const BatchError& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("MultiChannel::scope"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr("peer 1: "));
    ASSERT_EQ(error.failed_completions().size(), 1U);
  }
  EXPECT_TRUE(same_bytes(chunk(0, 0), chunk(2, 0)));  // the other write went through
}

TEST_F(MultiChannelTest, ManualScopeComplainsAboutUnpolledWorkNamingThePeer) {
  const std::array at_1{mrs[1].scatter(chunk(1, 0))};
  const std::array from{mrs[0].gather(chunk(0, 0))};
  PendingWork receive = nodes[1].post(0, ibv::op::Receive{at_1});
  MultiManualScope scope = nodes[0].manual_scope();
  PendingWork& polled = scope.post(2, ibv::op::PeerWrite{from, remote_of[2].sub_region(0, 1024)});
  scope.post(1, ibv::op::Send{from});
  EXPECT_TRUE(polled.wait().ok());
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { scope.close(); },
                           {"MultiManualScope::close", "peer 1: wr_id"}));
  EXPECT_TRUE(receive.wait().ok());
}

/// MultiChannelTest whose requests time out after 200 ms.
class MultiChannelShortTimeoutTest : public MultiChannelTest {
 protected:
  MultiChannelShortTimeoutTest() { operation_timeout = 200ms; }
};

TEST_F(MultiChannelShortTimeoutTest, TimedOutScopeIsABatchErrorNamingThePeer) {
  std::ranges::fill(chunk(0, 0), std::byte{0xC5});  // a canary
  const std::array at{mrs[0].scatter(chunk(0, 0))};
  try {
    nodes[0].scope([&](MultiChannelScope& scope) {
      scope.post_all(std::array{op::ToPeer{2U, op::Receive{at}}});
    });
    FAIL() << "a receive completed with no sender";
  } catch (const BatchError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    EXPECT_EQ(error.timed_out().size(), 1U);
    EXPECT_THAT(error.what(), ::testing::HasSubstr("peer 2: wr_id"));
  }
  // The receive was cancelled: rank 2's late message never lands in its buffer, the channel
  // to rank 2 refuses further work, naming the timeout, and the channels to the other peers
  // are untouched.
  {
    PendingWork late = nodes[2].post(0, ibv::op::Send{std::array{mrs[2].gather(chunk(2, 0))}});
    try {
      (void)late.wait_for(1s);
    } catch (const WorkError&) {
      // retries exhausted: rank 0's queue pair to rank 2 takes nothing
    }
  }
  EXPECT_TRUE(std::ranges::all_of(chunk(0, 0), [](std::byte b) { return b == std::byte{0xC5}; }));
  const std::array next{mrs[0].scatter(chunk(0, 1))};
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state,
                                     [&] { (void)nodes[0].post(2, ibv::op::Receive{next}); },
                                     {"cancelled", "200 ms"}));
  PendingWork receive = nodes[0].post(1, ibv::op::Receive{next});
  nodes[1].execute(0, ibv::op::Send{std::array{mrs[1].gather(chunk(1, 1))}});
  EXPECT_TRUE(receive.wait().ok());
}

}  // namespace
}  // namespace ibv::test
