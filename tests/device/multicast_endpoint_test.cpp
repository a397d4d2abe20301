// SPDX-License-Identifier: MIT
// Device tests of DatagramEndpoint::join on the test device's IP address (IBV_TEST_IP): the
// endpoints that joined a group receive what is sent to it (the sender too: loopback), with
// their loss counted per sender; a send-only join gives the address without a membership;
// a wrong Q_Key is refused and leaves nothing joined; leave(), a second join and the
// endpoint's end undo the membership (read from /proc/net/igmp, not from the library).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/cm/multicast_group.hpp"
#include "ibv/datagram/datagram_endpoint.hpp"
#include "multicast_helpers.hpp"
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

class MulticastEndpoint : public ::testing::Test {
 protected:
  /// An endpoint with rdma_cm's group Q_Key (`qkey` to override).
  [[nodiscard]] DatagramEndpoint endpoint(std::uint32_t qkey = MulticastGroup::kRdmaCmQkey) const {
    DatagramSettings s;
    s.gid_index = test_gid_index(context);
    s.qkey = QKey(qkey);
    s.receive_buffers = 32;
    s.timeout = 5s;
    return DatagramEndpoint(pd, s);
  }

  /// The next datagram, failing the test when none comes within 5 s.
  static DatagramMessage next(DatagramEndpoint& at) {
    auto message = at.receive(5s);
    if (!message) throw std::runtime_error("no datagram within 5 s");
    return std::move(*message);
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::string netdev = test_netdev();
};

TEST_F(MulticastEndpoint, MembersReceiveEveryDatagramWithTheirLossCountedPerSender) {
  const std::string group = test_group(31);
  DatagramEndpoint a = endpoint();
  DatagramEndpoint b = endpoint();
  const UdAddress to_group = a.join(group, test_ip());
  EXPECT_EQ(b.join(group, test_ip()), to_group);
  EXPECT_EQ(igmp_users(netdev, group), 2);
  EXPECT_EQ(a.groups(), std::vector<std::string>{group});
  EXPECT_EQ(to_group.qp_number, MulticastGroup::kQpNumber);
  EXPECT_EQ(to_group.qkey, MulticastGroup::kRdmaCmQkey);

  // A sender that joined send-only: the address, no membership, nothing attached.
  DatagramEndpoint sender = endpoint();
  MulticastOptions send_only;
  send_only.send_only = true;
  EXPECT_EQ(sender.join(group, test_ip(), send_only), to_group);
  EXPECT_EQ(igmp_users(netdev, group), 2);

  constexpr unsigned kCount = 5;
  for (unsigned i = 0; i < kCount; ++i) sender.send(to_group, pattern(200, i));
  for (DatagramEndpoint* member : {&a, &b}) {
    for (unsigned i = 0; i < kCount; ++i) {
      const auto message = next(*member);
      EXPECT_TRUE(same_bytes(pattern(200, i), message.data()));
      EXPECT_EQ(message.sequence(), i);
      EXPECT_EQ(message.source().qp_number, sender.address().qp_number);
    }
    EXPECT_EQ(member->counts(sender.address()), (SequenceCounts{kCount, 0, 0, kCount}));
  }
  EXPECT_FALSE(sender.try_receive().has_value()) << "a send-only member received";

  // A member that sends to the group receives its own datagram too (multicast loopback).
  a.send(to_group, pattern(10, 9));
  EXPECT_TRUE(same_bytes(pattern(10, 9), next(a).data()));
  EXPECT_TRUE(same_bytes(pattern(10, 9), next(b).data()));
  EXPECT_EQ(b.counts(a.address()).received, 1U);
}

TEST_F(MulticastEndpoint, LeaveAndTheEndpointsEndUndoTheMembership) {
  const std::string group = test_group(32);
  DatagramEndpoint a = endpoint();
  DatagramEndpoint witness = endpoint();
  const UdAddress to_group = a.join(group, test_ip());
  (void)witness.join(group, test_ip());
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)a.join(group, test_ip()); },
                           {"is joined already"}));
  EXPECT_EQ(igmp_users(netdev, group), 2);

  EXPECT_TRUE(a.leave(group));
  EXPECT_FALSE(a.leave(group));
  EXPECT_TRUE(a.groups().empty());
  EXPECT_EQ(igmp_users(netdev, group), 1);
  witness.send(to_group, pattern(16, 1));
  EXPECT_TRUE(same_bytes(pattern(16, 1), next(witness).data()));  // it was sent and delivered
  EXPECT_FALSE(a.receive(300ms).has_value()) << "an endpoint that left received";

  // Joined again, then destroyed while a message it lent is still held: the membership goes
  // with the endpoint, not with the message.
  std::optional<DatagramMessage> held;
  {
    DatagramEndpoint again = endpoint();
    (void)again.join(group, test_ip());
    EXPECT_EQ(igmp_users(netdev, group), 2);
    witness.send(to_group, pattern(16, 2));
    held = next(again);
    (void)next(witness);
  }
  EXPECT_EQ(igmp_users(netdev, group), 1);
  EXPECT_TRUE(same_bytes(pattern(16, 2), held->data()));
  held.reset();
  EXPECT_TRUE(witness.leave(group));
  EXPECT_EQ(igmp_users(netdev, group), 0);
}

TEST_F(MulticastEndpoint, AnotherQkeyOrBadInputIsRefusedAndNothingStaysJoined) {
  const std::string group = test_group(33);
  DatagramEndpoint wrong = endpoint(0x11111111);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)wrong.join(group, test_ip()); },
      {"has Q_Key 0x11111111, but group", "0x01234567", "DatagramSettings::qkey"}));
  EXPECT_TRUE(wrong.groups().empty());
  EXPECT_EQ(igmp_users(netdev, group), 0);
  // A send-only join attaches nothing, so any Q_Key may send to the group.
  MulticastOptions send_only;
  send_only.send_only = true;
  EXPECT_EQ(wrong.join(group, test_ip(), send_only).qkey, MulticastGroup::kRdmaCmQkey);

  DatagramEndpoint a = endpoint();
  EXPECT_TRUE(throws_invalid_argument([&] { (void)a.join("10.0.0.1", test_ip()); }, {"10.0.0.1"}));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)a.join(group, "0.0.0.0"); }, {"wildcard"}));
  EXPECT_TRUE(a.groups().empty());
}

}  // namespace
}  // namespace ibv::test
