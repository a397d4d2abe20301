// SPDX-License-Identifier: MIT
// Device tests of the DatagramEndpoint on the test device: datagrams to one and to many
// endpoints (and from threads), replies, the MTU limit (at it, and one byte over: refused
// before posting), a receive pool that runs dry and a wrong Q_Key (loss counted from the
// sequence gap, nothing overwritten), foreign datagrams, the wait modes' bounded waits, and
// bad settings and addresses refused with clear errors.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/ibv.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using ibv_test::throws_error;
using ibv_test::throws_invalid_argument;
using namespace std::chrono_literals;

std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
  std::vector<std::byte> bytes(size);
  fill_pattern(bytes, seed);
  return bytes;
}

class DatagramTest : public ::testing::Test {
 protected:
  DatagramSettings settings(std::uint32_t receive_buffers = 64) const {
    DatagramSettings s;
    s.gid_index = test_gid_index(context);
    s.receive_buffers = receive_buffers;
    s.timeout = 5s;
    return s;
  }

  // The next datagram, failing the test when none comes within 5 s.
  static DatagramMessage next(DatagramEndpoint& endpoint) {
    auto message = endpoint.receive(5s);
    if (!message) throw std::runtime_error("no datagram within 5 s");
    return std::move(*message);
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
};

TEST_F(DatagramTest, SendsToAPeerThatSeesTheSenderAndTheSequence) {
  DatagramEndpoint a(pd, settings());
  DatagramEndpoint b(pd, settings());
  for (unsigned i = 0; i < 3; ++i) a.send(b.address(), pattern(100 + i, i));
  for (unsigned i = 0; i < 3; ++i) {
    const auto message = next(b);
    EXPECT_TRUE(same_bytes(pattern(100 + i, i), message.data()));
    EXPECT_EQ(message.sequence(), i);
    EXPECT_EQ(message.lost_before(), 0U);
    EXPECT_EQ(message.source().qp_number, a.address().qp_number);
    EXPECT_EQ(message.sender().qp_number, a.address().qp_number);
    EXPECT_EQ(message.sender().gid, a.address().gid);
  }
  EXPECT_EQ(b.counts(a.address()), (SequenceCounts{3, 0, 0, 3}));
  EXPECT_EQ(a.sends_in_flight(), 0U);
  EXPECT_EQ(b.receive_buffers_posted(), 64U);
  EXPECT_FALSE(b.try_receive().has_value());
}

TEST_F(DatagramTest, RepliesToTheSenderOfAMessage) {
  DatagramEndpoint a(pd, settings());
  DatagramEndpoint b(pd, settings());
  a.send(b.address(), pattern(10, 1));
  {
    const auto request = next(b);
    b.send(request.sender(), pattern(20, 2));
  }
  const auto reply = next(a);
  EXPECT_TRUE(same_bytes(pattern(20, 2), reply.data()));
  EXPECT_EQ(reply.source().qp_number, b.address().qp_number);
}

TEST_F(DatagramTest, TakesAPayloadAtTheLimitAndRefusesOneByteMoreBeforePosting) {
  DatagramEndpoint a(pd, settings());
  DatagramEndpoint b(pd, settings());
  const auto limit = a.max_payload(b.address());
  EXPECT_EQ(limit, a.queue_pair().max_message_size() - DatagramHeader::kSize);
  a.send(b.address(), pattern(limit, 3));
  EXPECT_TRUE(same_bytes(pattern(limit, 3), next(b).data()));
  EXPECT_TRUE(
      throws_invalid_argument([&] { a.send(b.address(), pattern(limit + 1, 4)); },
                              {std::to_string(limit + 1), "path MTU", "nothing was posted"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { a.post(b.address(), pattern(limit + 1, 4)); }, {"path MTU"}));
  EXPECT_EQ(a.sends_in_flight(), 0U);
  EXPECT_FALSE(b.receive(200ms).has_value());
  // A peer with a smaller MTU lowers the limit.
  auto small = b.address();
  small.mtu = Mtu::mtu256();
  EXPECT_EQ(a.max_payload(small), 256U - DatagramHeader::kSize);
  EXPECT_TRUE(throws_invalid_argument([&] { a.send(small, pattern(256, 5)); }, {"MTU 256"}));
}

TEST_F(DatagramTest, CountsTheLossOfAPoolThatRanDryWithoutOverwritingHeldMessages) {
  DatagramEndpoint a(pd, settings());
  DatagramEndpoint b(pd, settings(4));
  std::vector<DatagramMessage> held;
  for (unsigned i = 0; i < 4; ++i) a.send(b.address(), pattern(64, i));
  for (unsigned i = 0; i < 4; ++i) held.push_back(next(b));
  EXPECT_EQ(b.receive_buffers_posted(), 0U);
  for (unsigned i = 4; i < 7; ++i) a.send(b.address(), pattern(64, i));  // no receive: dropped
  EXPECT_FALSE(b.receive(300ms).has_value());
  for (unsigned i = 0; i < 4; ++i) EXPECT_TRUE(same_bytes(pattern(64, i), held[i].data()));
  held.clear();  // releases: the buffers are posted again
  EXPECT_EQ(b.receive_buffers_posted(), 4U);
  a.send(b.address(), pattern(64, 7));
  const auto after = next(b);
  EXPECT_EQ(after.sequence(), 7U);
  EXPECT_EQ(after.lost_before(), 3U);
  EXPECT_TRUE(same_bytes(pattern(64, 7), after.data()));
  EXPECT_EQ(b.counts(a.address()), (SequenceCounts{5, 3, 0, 8}));
}

TEST_F(DatagramTest, CountsDatagramsWithAWrongQkeyAsLost) {
  DatagramEndpoint a(pd, settings());
  DatagramEndpoint b(pd, settings());
  auto wrong = b.address();
  wrong.qkey = 0x2222;
  a.send(wrong, pattern(32, 1));  // completes: UD has no acknowledgement
  a.send(wrong, pattern(32, 2));
  EXPECT_FALSE(b.receive(300ms).has_value());
  a.send(b.address(), pattern(32, 3));
  const auto message = next(b);
  EXPECT_EQ(message.sequence(), 2U);
  EXPECT_EQ(message.lost_before(), 2U);
  EXPECT_TRUE(same_bytes(pattern(32, 3), message.data()));
}

TEST_F(DatagramTest, OneEndpointSendsToManyAndManyThreadsSendToOne) {
  DatagramEndpoint hub(pd, settings(128));
  std::vector<std::unique_ptr<DatagramEndpoint>> peers;
  peers.reserve(4);
  for (int i = 0; i < 4; ++i) peers.push_back(std::make_unique<DatagramEndpoint>(pd, settings()));
  for (std::size_t i = 0; i < peers.size(); ++i) {
    hub.post(peers[i]->address(), pattern(40, static_cast<unsigned>(i)));
  }
  hub.flush(5s);
  // All four are on this one device: one route, one address handle.
  EXPECT_EQ(hub.cached_destinations(), 1U);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    EXPECT_TRUE(same_bytes(pattern(40, static_cast<unsigned>(i)), next(*peers[i]).data()));
  }
  constexpr unsigned kPerThread = 20;
  const auto hub_address = hub.address();
  std::vector<std::thread> threads;
  threads.reserve(peers.size());
  for (auto& peer : peers) {
    threads.emplace_back([&peer, hub_address] {
      for (unsigned n = 0; n < kPerThread; ++n) peer->post(hub_address, pattern(30, n));
      peer->flush(5s);
    });
  }
  for (auto& thread : threads) thread.join();
  for (unsigned n = 0; n < peers.size() * kPerThread; ++n) (void)next(hub);
  for (const auto& peer : peers) {
    EXPECT_EQ(hub.counts(peer->address()), (SequenceCounts{kPerThread, 0, 0, kPerThread}));
  }
  EXPECT_EQ(hub.counts().size(), peers.size());
}

TEST_F(DatagramTest, DropsAndCountsDatagramsWithoutItsHeader) {
  DatagramEndpoint b(pd, settings());
  CompletionQueue cq(context, 16);
  UdQueuePairSettings raw_settings;
  raw_settings.gid_index = test_gid_index(context);
  auto raw = UdQueuePairBuilder(pd, cq, cq).settings(raw_settings).build();
  std::vector<std::byte> bytes = pattern(20, 9);
  const auto mr = pd.register_local(bytes);
  const std::array elements{mr.gather(std::span<const std::byte>(bytes))};
  AddressHandleSettings route;
  route.gid_index = test_gid_index(context);
  auto request =
      UdSendRequest::to(1, elements, AddressHandle::to(pd, b.address(), route), b.address());
  raw.post_send(request);
  EXPECT_TRUE(poll_one(cq).ok());
  EXPECT_FALSE(b.receive(300ms).has_value());
  EXPECT_EQ(b.foreign_datagrams(), 1U);
  EXPECT_EQ(b.receive_buffers_posted(), 64U);
}

TEST_F(DatagramTest, BlockingWaitsEndAtTheirDeadlineOrWithTheDatagram) {
  auto blocking = settings();
  blocking.wait_mode = WaitMode::block();
  DatagramEndpoint a(pd, blocking);
  DatagramEndpoint b(pd, blocking);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(b.receive(200ms).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  std::thread sender([&] {
    std::this_thread::sleep_for(100ms);
    a.send(b.address(), pattern(8, 1));
  });
  const auto message = b.receive(5s);
  sender.join();
  ASSERT_TRUE(message.has_value());
  EXPECT_TRUE(same_bytes(pattern(8, 1), message->data()));
}

TEST_F(DatagramTest, RefusesBadSettingsAndAddresses) {
  auto zero = settings(0);
  EXPECT_TRUE(
      throws_invalid_argument([&] { DatagramEndpoint e(pd, zero); }, {"receive_buffers 0"}));
  auto no_time = settings();
  no_time.timeout = 0ms;
  EXPECT_TRUE(throws_invalid_argument([&] { DatagramEndpoint e(pd, no_time); }, {"timeout"}));
  auto bad_level = settings();
  bad_level.service_level = 16;
  EXPECT_TRUE(
      throws_invalid_argument([&] { DatagramEndpoint e(pd, bad_level); }, {"service_level 16"}));
  DatagramEndpoint a(pd, settings());
  EXPECT_TRUE(throws_invalid_argument([&] { (void)a.receive(0ms); }, {"timeout"}));
  auto bad = a.address();
  bad.qp_number = 0x1000000;
  EXPECT_TRUE(throws_invalid_argument([&] { a.send(bad, pattern(4, 1)); }, {"24 bits"}));
  bad = a.address();
  bad.qkey = 0x80000000U;
  EXPECT_TRUE(throws_invalid_argument([&] { a.send(bad, pattern(4, 1)); }, {"bit 31"}));
  bad = a.address();
  bad.gid = Gid{};
  if (context.query_port().link_layer == LinkLayer::ethernet) {
    EXPECT_TRUE(throws_invalid_argument([&] { a.send(bad, pattern(4, 1)); }, {"no GID"}));
  }
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)UdAddress::from_json("{\"qpn\":1}"); }, {"missing"}));
  auto bytes = a.address().to_bytes();
  bytes[4] = std::byte{0xFF};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)UdAddress::from_bytes(bytes); }, {"24 bits"}));
  auto bad_index = settings();
  bad_index.gid_index = 200;
  EXPECT_TRUE(throws_error(ErrorKind::not_found, [&] { DatagramEndpoint e(pd, bad_index); },
                           {"gid_index 200"}));
  EXPECT_EQ(a.sends_in_flight(), 0U);
}

TEST_F(DatagramTest, AMessageMayOutliveItsEndpoint) {
  std::optional<DatagramMessage> kept;
  {
    DatagramEndpoint a(pd, settings());
    DatagramEndpoint b(pd, settings());
    a.send(b.address(), pattern(16, 1));
    kept.emplace(next(b));
  }
  EXPECT_TRUE(same_bytes(pattern(16, 1), kept->data()));
  kept.reset();  // the last owner: buffers, queue pair and CQs go now (the leak check looks)
}

}  // namespace
}  // namespace ibv::test
