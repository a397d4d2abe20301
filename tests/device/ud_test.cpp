// SPDX-License-Identifier: MIT
// Device tests of the verbs layer's unreliable datagrams on the test device: UD queue pairs
// built to RTS, address handles from a GID, from a received completion and from attributes
// made elsewhere (as rdma_cm makes them), sends to one and to many queue pairs (and from
// threads), immediates, post lists, inline data, the GRH area, the MTU limit, a wrong Q_Key
// (dropped, nothing overwritten), UD over a shared receive queue, and the checks that refuse
// bad input before anything is posted.
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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

constexpr std::size_t kGrh = GlobalRouteHeader::kSize;

// Polls `cq` for up to `wait`; returns what arrived (no test failure when nothing did).
std::vector<WorkCompletion> poll_for(const CompletionQueue& cq, std::chrono::milliseconds wait) {
  std::vector<WorkCompletion> result;
  std::array<WorkCompletion, 16> batch{};
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const auto& completion : cq.poll(batch)) result.push_back(completion);
  }
  return result;
}

/// One UD queue pair with its own CQ and a registered buffer of `slots` receive slots of
/// GRH + MTU bytes, and a send area.
struct UdSide {
  UdSide(const ProtectionDomain& pd, std::size_t slots = 16,
         UdQueuePairSettings settings = UdQueuePairSettings{})
      : cq(pd.context(), 256),
        qp(UdQueuePairBuilder(pd, cq, cq).settings(with_gid(pd, settings)).build()),
        slot_size(kGrh + qp.max_message_size()),
        memory(slot_size * (slots + 1)),
        mr(pd.register_local(memory)) {}

  static UdQueuePairSettings with_gid(const ProtectionDomain& pd, UdQueuePairSettings settings) {
    settings.gid_index = test_gid_index(pd.context());
    return settings;
  }

  std::span<std::byte> slot(std::size_t index) {
    return std::span(memory).subspan(index * slot_size, slot_size);
  }
  // The last slot is where this side's sends come from.
  std::span<std::byte> send_area() { return slot(memory.size() / slot_size - 1); }

  void post_receive(std::size_t index) {
    const std::array elements{mr.scatter(slot(index))};
    ReceiveRequest request(index, elements);
    qp.post_receive(request);
  }

  CompletionQueue cq;
  UdQueuePair qp;
  std::size_t slot_size;
  std::vector<std::byte> memory;
  MemoryRegion mr;
};

class UdTest : public ::testing::Test {
 protected:
  AddressHandleSettings route() const {
    AddressHandleSettings settings;
    settings.gid_index = test_gid_index(context);
    return settings;
  }

  // Sends `payload` from `from` to `to` (signaled), waiting for the send completion.
  void send(UdSide& from, const UdAddress& to, std::span<const std::byte> payload,
            std::optional<std::uint32_t> immediate = std::nullopt) {
    auto area = from.send_area().first(payload.size());
    std::copy(payload.begin(), payload.end(), area.begin());
    const std::array elements{from.mr.gather(std::span<const std::byte>(area))};
    const auto ah = AddressHandle::to(pd, to, route());
    auto request = immediate ? UdSendRequest::send_with_immediate(1, elements, ah, to.qp_number,
                                                                  to.qkey, *immediate)
                             : UdSendRequest::to(1, elements, ah, to);
    from.qp.post_send(request);
    const auto completion = poll_one(from.cq);
    EXPECT_TRUE(completion.ok()) << completion.to_string();
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
};

std::vector<std::byte> pattern(std::size_t size, unsigned seed) {
  std::vector<std::byte> bytes(size);
  fill_pattern(bytes, seed);
  return bytes;
}

TEST_F(UdTest, BuildsToReadyToSendWithItsAddress) {
  UdSide side(pd);
  EXPECT_EQ(side.qp.query_state(), "RTS");
  const auto address = side.qp.address();
  EXPECT_EQ(address.qp_number, side.qp.qp_number());
  EXPECT_LE(address.qp_number, 0xFFFFFFU);
  EXPECT_EQ(address.qkey, 0x11111111U);
  EXPECT_EQ(address.gid, context.query_gid(test_gid_index(context)).gid);
  EXPECT_EQ(address.mtu.bytes(), side.qp.max_message_size());
  EXPECT_EQ(UdAddress::from_bytes(address.to_bytes()), address);
  EXPECT_NE(side.qp.native_handle(), nullptr);
}

TEST_F(UdTest, SendsADatagramWhosePayloadFollowsTheGrhAndNamesItsSource) {
  UdSide a(pd);
  UdSide b(pd);
  b.post_receive(0);
  const auto payload = pattern(100, 1);
  send(a, b.qp.address(), payload);
  const auto completion = poll_one(b.cq);
  ASSERT_TRUE(completion.ok()) << completion.to_string();
  EXPECT_EQ(completion.byte_length(), kGrh + payload.size());
  EXPECT_TRUE(completion.has_grh());
  const UdReceived received(completion, b.slot(0));
  EXPECT_TRUE(same_bytes(payload, received.payload()));
  EXPECT_EQ(received.source().qp_number, a.qp.qp_number());
  ASSERT_TRUE(received.source().gid.has_value());
  EXPECT_EQ(*received.source().gid, a.qp.address().gid);
  ASSERT_TRUE(received.grh().has_value());
  EXPECT_EQ(received.grh()->destination_gid(), b.qp.address().gid);
  // The testbed's GID is RoCE v2 with an IPv4 address: the IPv4 header is the GRH's last 20.
  if (b.qp.address().gid.is_ipv4_mapped()) {
    EXPECT_TRUE(received.grh()->is_ipv4());
    EXPECT_EQ(received.grh()->ipv4_header().size(), 20U);
  }
  EXPECT_FALSE(received.immediate().has_value());
}

TEST_F(UdTest, CarriesImmediateData) {
  UdSide a(pd);
  UdSide b(pd);
  b.post_receive(0);
  send(a, b.qp.address(), pattern(8, 2), 0xCAFEF00D);
  const auto completion = poll_one(b.cq);
  ASSERT_TRUE(completion.ok()) << completion.to_string();
  EXPECT_EQ(UdReceived(completion, b.slot(0)).immediate(), 0xCAFEF00DU);
}

TEST_F(UdTest, RepliesThroughTheAddressOfTheCompletion) {
  UdSide a(pd);
  UdSide b(pd);
  a.post_receive(0);
  b.post_receive(0);
  send(a, b.qp.address(), pattern(16, 3));
  const auto request = poll_one(b.cq);
  ASSERT_TRUE(request.ok()) << request.to_string();
  const UdReceived received(request, b.slot(0));
  const auto back = AddressHandle::reply_to(pd, request, received.grh_area());
  EXPECT_EQ(back.destination_gid(), a.qp.address().gid);
  const auto answer = pattern(32, 4);
  auto area = b.send_area().first(answer.size());
  std::copy(answer.begin(), answer.end(), area.begin());
  const std::array elements{b.mr.gather(std::span<const std::byte>(area))};
  auto reply =
      UdSendRequest::send(9, elements, back, received.source().qp_number, a.qp.qkey().value());
  b.qp.post_send(reply);
  EXPECT_TRUE(poll_one(b.cq).ok());
  const auto completion = poll_one(a.cq);
  ASSERT_TRUE(completion.ok()) << completion.to_string();
  EXPECT_TRUE(same_bytes(answer, UdReceived(completion, a.slot(0)).payload()));
  EXPECT_EQ(completion.source_qp(), b.qp.qp_number());
}

TEST_F(UdTest, PostsAListOfUnsignaledAndInlineSends) {
  UdSide a(pd);
  UdSide b(pd);
  for (std::size_t i = 0; i < 3; ++i) b.post_receive(i);
  const auto to = b.qp.address();
  const auto ah = AddressHandle::to(pd, to, route());
  std::array<std::byte, 3> bytes{std::byte{1}, std::byte{2}, std::byte{3}};
  std::vector<std::array<GatherElement, 1>> elements;
  std::vector<UdSendRequest> requests;
  elements.reserve(3);
  for (std::size_t i = 0; i < 3; ++i) {
    elements.push_back({a.mr.gather(std::span<const std::byte>(a.slot(i).first(4 + i)))});
    requests.push_back(UdSendRequest::to(i, elements.back(), ah, to).unsignaled());
  }
  const std::array inline_element{
      GatherElement::from_raw(reinterpret_cast<std::uintptr_t>(bytes.data()), bytes.size(), 0)};
  requests.back() = UdSendRequest::to(2, inline_element, ah, to);
  // Inline data needs no registration; the last request is inline and signaled.
  ASSERT_GE(a.qp.max_inline_data(), bytes.size());
  requests.back().inline_data();
  a.qp.post_send(requests);
  const auto sent = poll_completions(a.cq, 1);
  ASSERT_EQ(sent.size(), 1U);
  EXPECT_EQ(sent[0].wr_id(), 2U);
  const auto received = poll_completions(b.cq, 3);
  ASSERT_EQ(received.size(), 3U);
  for (const auto& completion : received) EXPECT_TRUE(completion.ok()) << completion.to_string();
  EXPECT_EQ(received[0].byte_length(), kGrh + 4);
  EXPECT_EQ(received[1].byte_length(), kGrh + 5);
  EXPECT_EQ(received[2].byte_length(), kGrh + 3);
  EXPECT_EQ(std::to_integer<int>(b.slot(2)[kGrh + 2]), 3);
}

TEST_F(UdTest, TakesADatagramAtTheMtuAndRefusesOneByteMoreBeforePosting) {
  UdSide a(pd);
  UdSide b(pd);
  b.post_receive(0);
  const auto mtu = a.qp.max_message_size();
  const auto full = pattern(mtu, 5);
  send(a, b.qp.address(), full);
  const auto completion = poll_one(b.cq);
  ASSERT_TRUE(completion.ok()) << completion.to_string();
  EXPECT_TRUE(same_bytes(full, UdReceived(completion, b.slot(0)).payload()));

  std::vector<std::byte> over(mtu + 1);
  const auto over_mr = pd.register_local(over);
  const std::array elements{over_mr.gather(std::span<const std::byte>(over))};
  auto request = UdSendRequest::to(1, elements, AddressHandle::to(pd, b.qp.address(), route()),
                                   b.qp.address());
  EXPECT_TRUE(throws_invalid_argument([&] { a.qp.post_send(request); },
                                      {std::to_string(mtu + 1), "MTU", "one packet"}));
  EXPECT_TRUE(poll_for(a.cq, std::chrono::milliseconds(100)).empty());
}

TEST_F(UdTest, DropsADatagramWithAWrongQkeyWithoutTouchingTheReceive) {
  UdSide a(pd);
  UdSide b(pd);
  b.post_receive(0);
  fill_pattern(b.slot(0), 9);
  const auto before = std::vector<std::byte>(b.slot(0).begin(), b.slot(0).end());
  auto wrong = b.qp.address();
  wrong.qkey = 0x2222;
  send(a, wrong, pattern(64, 6));  // the send completes: UD has no acknowledgement
  EXPECT_TRUE(poll_for(b.cq, std::chrono::milliseconds(300)).empty());
  EXPECT_TRUE(same_bytes(before, b.slot(0)));
  // The receive is still there for the next datagram with the right Q_Key.
  const auto right = pattern(64, 7);
  send(a, b.qp.address(), right);
  const auto completion = poll_one(b.cq);
  ASSERT_TRUE(completion.ok()) << completion.to_string();
  EXPECT_EQ(completion.wr_id(), 0U);
  EXPECT_TRUE(same_bytes(right, UdReceived(completion, b.slot(0)).payload()));
}

TEST_F(UdTest, OneQueuePairSendsToManyAndManyThreadsSendToOne) {
  UdSide hub(pd, 32);
  std::vector<std::unique_ptr<UdSide>> peers;
  peers.reserve(4);
  for (int i = 0; i < 4; ++i) peers.push_back(std::make_unique<UdSide>(pd));
  for (std::size_t i = 0; i < peers.size(); ++i) {
    peers[i]->post_receive(0);
    send(hub, peers[i]->qp.address(), pattern(50 + i, 10 + static_cast<unsigned>(i)));
  }
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const auto completion = poll_one(peers[i]->cq);
    ASSERT_TRUE(completion.ok()) << completion.to_string();
    EXPECT_TRUE(same_bytes(pattern(50 + i, 10 + static_cast<unsigned>(i)),
                           UdReceived(completion, peers[i]->slot(0)).payload()));
  }
  // Each thread sends 8 datagrams from its own queue pair to the hub.
  constexpr int kPerThread = 8;
  for (std::size_t i = 0; i < peers.size() * kPerThread; ++i) hub.post_receive(i);
  const auto hub_address = hub.qp.address();
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kPerThread; ++n) {
        send(*peers[i], hub_address, pattern(20, static_cast<unsigned>(i)));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const auto received = poll_completions(hub.cq, peers.size() * kPerThread);
  ASSERT_EQ(received.size(), peers.size() * kPerThread);
  std::map<std::uint32_t, int> per_source;
  for (const auto& completion : received) {
    ASSERT_TRUE(completion.ok()) << completion.to_string();
    ++per_source[completion.source_qp()];
  }
  for (const auto& peer : peers) EXPECT_EQ(per_source[peer->qp.qp_number()], kPerThread);
}

TEST_F(UdTest, ReceivesThroughASharedReceiveQueue) {
  SharedReceiveQueue srq(pd, QueueDepth(16));
  CompletionQueue cq(context, 64);
  UdQueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  auto qp1 = UdQueuePairBuilder(pd, cq, cq).settings(settings).shared_receive_queue(srq).build();
  auto qp2 = UdQueuePairBuilder(pd, cq, cq).settings(settings).shared_receive_queue(srq).build();
  std::vector<std::byte> memory(2 * (kGrh + qp1.max_message_size()));
  const auto mr = pd.register_local(memory);
  const std::size_t slot = memory.size() / 2;
  for (std::size_t i = 0; i < 2; ++i) {
    const std::array elements{mr.scatter(std::span(memory).subspan(i * slot, slot))};
    srq.post_receive(i, elements);
  }
  std::array<std::byte, kGrh> small{};
  const auto small_mr = pd.register_local(small);
  const std::array small_elements{small_mr.scatter(std::span(small))};
  ReceiveRequest direct(7, small_elements);
  EXPECT_TRUE(
      throws_error(ErrorKind::state, [&] { qp1.post_receive(direct); }, {"shared receive queue"}));
  UdSide sender(pd);
  send(sender, qp1.address(), pattern(10, 1));
  send(sender, qp2.address(), pattern(11, 2));
  const auto received = poll_completions(cq, 2);
  ASSERT_EQ(received.size(), 2U);
  EXPECT_NE(received[0].qp_number(), received[1].qp_number());
  for (const auto& completion : received) {
    ASSERT_TRUE(completion.ok()) << completion.to_string();
    EXPECT_EQ(completion.source_qp(), sender.qp.qp_number());
  }
}

TEST_F(UdTest, RefusesBadInputBeforeAnythingIsPosted) {
  UdSide a(pd);
  UdSide b(pd);
  const auto to = b.qp.address();
  const auto ah = AddressHandle::to(pd, to, route());
  const std::array elements{a.mr.gather(std::span<const std::byte>(a.slot(0).first(8)))};

  auto bad_qpn = UdSendRequest::send(1, elements, ah, 0x1000000, to.qkey);
  EXPECT_TRUE(throws_invalid_argument([&] { a.qp.post_send(bad_qpn); }, {"QPN", "24 bits"}));
  auto bad_qkey = UdSendRequest::send(1, elements, ah, to.qp_number, 0x80000001U);
  EXPECT_TRUE(throws_invalid_argument([&] { a.qp.post_send(bad_qkey); }, {"controlled"}));
  ProtectionDomain other(context);
  auto other_ah = UdSendRequest::to(1, elements, AddressHandle::to(other, to, route()), to);
  EXPECT_TRUE(
      throws_invalid_argument([&] { a.qp.post_send(other_ah); }, {"another protection domain"}));
  const std::array two{elements[0], elements[0]};
  auto too_many = UdSendRequest::to(1, two, ah, to);
  EXPECT_TRUE(throws_invalid_argument([&] { a.qp.post_send(too_many); }, {"max_send_sge"}));
  // A list with one bad request posts none of them.
  std::vector<UdSendRequest> list{UdSendRequest::to(1, elements, ah, to), bad_qpn};
  EXPECT_TRUE(throws_invalid_argument([&] { a.qp.post_send(list); }, {"QPN"}));
  EXPECT_TRUE(poll_for(a.cq, std::chrono::milliseconds(100)).empty());

  const std::array short_receive{b.mr.scatter(b.slot(0).first(kGrh - 1))};
  ReceiveRequest too_short(1, short_receive);
  EXPECT_TRUE(throws_invalid_argument([&] { b.qp.post_receive(too_short); }, {"40 bytes", "GRH"}));

  AddressHandleSettings bad_index;
  bad_index.gid_index = 200;
  EXPECT_TRUE(throws_error(ErrorKind::not_found,
                           [&] { (void)AddressHandle::to_gid(pd, to.gid, bad_index); },
                           {"gid_index 200"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)AddressHandle::to_gid(pd, Gid{}); }, {"all zero"}));
  AddressHandleSettings bad_sl = route();
  bad_sl.service_level = 16;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)AddressHandle::to_gid(pd, to.gid, bad_sl); },
                                      {"service_level 16"}));
  AddressHandleSettings bad_port = route();
  bad_port.port = PortNumber{9};
  EXPECT_TRUE(throws_error(ErrorKind::not_found,
                           [&] { (void)AddressHandle::to_gid(pd, to.gid, bad_port); }, {"port 9"}));
  if (context.query_port().link_layer == LinkLayer::ethernet) {
    EXPECT_TRUE(throws_invalid_argument([&] { (void)AddressHandle::to_lid(pd, 5); }, {"RoCE"}));
    auto no_gid = to;
    no_gid.gid = Gid{};
    EXPECT_TRUE(throws_invalid_argument([&] { (void)AddressHandle::to(pd, no_gid); }, {"no GID"}));
  }
  UdQueuePairSettings bad_pkey;
  bad_pkey.pkey_index = 999;
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)UdQueuePairBuilder(pd, a.cq, a.cq).settings(bad_pkey).build(); },
      {"pkey_index 999"}));
  UdQueuePairSettings bad_gid;
  bad_gid.gid_index = 200;
  EXPECT_TRUE(
      throws_error(ErrorKind::not_found,
                   [&] { (void)UdQueuePairBuilder(pd, a.cq, a.cq).settings(bad_gid).build(); },
                   {"gid_index 200"}));
  // A receive completion is what reply_to needs.
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)AddressHandle::reply_to(pd, WorkCompletion{}, b.slot(0)); }, {"receive"}));
}

TEST_F(UdTest, BuildsAnAddressHandleFromAttributesMadeElsewhere) {
  UdSide a(pd);
  UdSide b(pd);
  b.post_receive(0);
  // What rdma_cm hands over for a multicast group, here for b's unicast GID.
  ibv_ah_attr attributes{};
  attributes.is_global = 1;
  attributes.grh.dgid = b.qp.address().gid.to_native();
  attributes.grh.sgid_index = static_cast<std::uint8_t>(test_gid_index(context));
  attributes.grh.hop_limit = 64;
  attributes.port_num = 1;
  const auto ah = AddressHandle::from_attributes(pd, attributes);
  EXPECT_TRUE(ah.is_global());
  EXPECT_EQ(ah.destination_gid(), b.qp.address().gid);
  const auto payload = pattern(24, 8);
  auto area = a.send_area().first(payload.size());
  std::copy(payload.begin(), payload.end(), area.begin());
  const std::array elements{a.mr.gather(std::span<const std::byte>(area))};
  auto request = UdSendRequest::to(3, elements, ah, b.qp.address());
  a.qp.post_send(request);
  EXPECT_TRUE(poll_one(a.cq).ok());
  const auto completion = poll_one(b.cq);
  ASSERT_TRUE(completion.ok()) << completion.to_string();
  EXPECT_TRUE(same_bytes(payload, UdReceived(completion, b.slot(0)).payload()));

  auto bad = attributes;
  bad.port_num = 9;
  EXPECT_TRUE(throws_error(ErrorKind::not_found,
                           [&] { (void)AddressHandle::from_attributes(pd, bad); }, {"port 9"}));
  bad = attributes;
  bad.sl = 16;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)AddressHandle::from_attributes(pd, bad); },
                                      {"service_level 16"}));
  bad = attributes;
  bad.grh.sgid_index = 200;
  EXPECT_TRUE(throws_error(ErrorKind::not_found,
                           [&] { (void)AddressHandle::from_attributes(pd, bad); },
                           {"gid_index 200"}));
}

TEST_F(UdTest, AnAddressHandleKeepsItsProtectionDomainAlive) {
  UdSide b(pd);
  std::optional<AddressHandle> ah;
  {
    ProtectionDomain scoped(context);
    ah.emplace(AddressHandle::to(scoped, b.qp.address(), route()));
  }
  EXPECT_NE(ah->native(), nullptr);
  EXPECT_NE(ah->protection_domain().native(), nullptr);
  ah.reset();  // destroys the AH, then the PD: no leak (the resource check counts both)
}

}  // namespace
}  // namespace ibv::test
