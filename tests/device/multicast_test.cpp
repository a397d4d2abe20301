// SPDX-License-Identifier: MIT
// Device tests of MulticastGroup on the test device's IP address (IBV_TEST_IP): the join and the
// leave, seen in the kernel's IGMP membership table (/proc/net/igmp) of the device's netdev, the
// answer of the join (MGID, Q_Key, address vector), send-only joins, bad input refused with
// clear errors. Datagrams to the group: multicast_datagram_test.cpp.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/cm/multicast_group.hpp"
#include "multicast_helpers.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::throws_error;

TEST(Multicast, JoinAnswersWithTheGroupsAddressAndJoinsTheIpGroup) {
  const std::string netdev = test_netdev();
  const std::string address = test_group(1);
  ASSERT_EQ(igmp_users(netdev, address), 0) << address << " is joined before the test";
  {
    MulticastGroup group(address, test_ip());
    EXPECT_TRUE(group.joined());
    EXPECT_EQ(group.group(), address);
    EXPECT_EQ(group.local_address(), test_ip());
    const Context context = open_test_device();
    EXPECT_EQ(group.device_name(), context.name());
    EXPECT_EQ(group.port(), PortNumber{1});
    // RoCE v2: the IPv4-mapped group address, no LID, rdma_cm's UDP Q_Key.
    EXPECT_EQ(group.mgid().to_string(), "::ffff:" + address);
    EXPECT_EQ(group.mlid(), 0);
    EXPECT_EQ(group.qkey(), 0x01234567U);
    EXPECT_FALSE(group.send_only());
    const ibv_ah_attr& av = group.address_vector();
    EXPECT_EQ(av.is_global, 1);
    EXPECT_EQ(Gid(av.grh.dgid), group.mgid());
    EXPECT_EQ(av.grh.sgid_index, test_gid_index(context));
    EXPECT_EQ(av.port_num, 1);
    // The kernel joined the IP group on the device's netdev: that is what makes the network
    // (and the host's own IP stack) deliver the group's packets to it.
    EXPECT_EQ(igmp_users(netdev, address), 1) << netdev;
    group.leave();
    EXPECT_FALSE(group.joined());
    EXPECT_EQ(igmp_users(netdev, address), 0) << "leave() did not leave the IP group";
    EXPECT_EQ(group.group(), address);  // what the join said stays readable
    group.leave();                      // a second leave does nothing
  }
  EXPECT_EQ(igmp_users(netdev, address), 0);
}

TEST(Multicast, EveryMembershipCountsAndTheLastOneLeaves) {
  const std::string netdev = test_netdev();
  const std::string address = test_group(2);
  std::optional<MulticastGroup> first(std::in_place, address, test_ip());
  {
    MulticastGroup second(address, test_ip());
    EXPECT_EQ(igmp_users(netdev, address), 2);
    EXPECT_EQ(second.mgid(), first->mgid());
    EXPECT_EQ(second.qkey(), first->qkey());
  }
  EXPECT_EQ(igmp_users(netdev, address), 1);
  // Moving keeps the one membership; assigning over a group leaves the old one.
  MulticastGroup moved = std::move(*first);
  // What a moved-from group says:
  // NOLINTBEGIN(bugprone-use-after-move)
  EXPECT_FALSE(first->joined());
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)first->group(); }, {"moved from"}));
  // NOLINTEND(bugprone-use-after-move)
  EXPECT_TRUE(moved.joined());
  EXPECT_EQ(igmp_users(netdev, address), 1);
  moved = MulticastGroup(test_group(3), test_ip());
  EXPECT_EQ(igmp_users(netdev, address), 0);
  EXPECT_EQ(igmp_users(netdev, test_group(3)), 1);
  first.reset();
}

TEST(Multicast, SendOnlyJoinGivesTheAddressButNoMembership) {
  const std::string netdev = test_netdev();
  const std::string address = test_group(4);
  MulticastOptions options;
  options.send_only = true;
  MulticastGroup group(address, test_ip(), options);
  EXPECT_TRUE(group.send_only());
  EXPECT_EQ(group.mgid().to_string(), "::ffff:" + address);
  EXPECT_EQ(group.qkey(), 0x01234567U);
  EXPECT_EQ(igmp_users(netdev, address), 0) << "a send-only join sent an IGMP report";
}

TEST(Multicast, BadInputIsRefusedWithAClearError) {
  const std::string good = test_group(5);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)MulticastGroup("10.0.0.7", test_ip()); },
                           {"MulticastGroup", "group \"10.0.0.7\"", "not a multicast address"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)MulticastGroup("240.0.0.1", test_ip()); },
                           {"240.0.0.1", "224.0.0.0 to 239.255.255.255"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)MulticastGroup("group.example", test_ip()); },
                           {"group.example", "not resolved"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)MulticastGroup("", test_ip()); }, {"is empty"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)MulticastGroup(good, "0.0.0.0"); },
                           {"local_address \"0.0.0.0\"", "wildcard"}));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)MulticastGroup(good, "10.0.0.x"); }, {"10.0.0.x"}));
  MulticastOptions zero;
  zero.join_timeout = 0ms;
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { (void)MulticastGroup(good, test_ip(), zero); },
                           {"join_timeout 0 ms", "not positive"}));
  // An address that is not this host's: refused by the bind, naming it.
  EXPECT_TRUE(throws_error(ErrorKind::not_found, [&] { (void)MulticastGroup(good, "192.0.2.77"); },
                           {"rdma_bind_addr", "192.0.2.77", "one of this host's addresses"}));
  // IPv6 groups: the kernel's rdma_cm joins only IPv4 groups on RoCE v2.
  if (open_test_device().query_port().link_layer == LinkLayer::ethernet) {
    EXPECT_TRUE(throws_error(ErrorKind::unsupported,
                             [&] { (void)MulticastGroup("ff0e::1:2", test_ip()); },
                             {"ff0e::1:2", "only IPv4 groups on RoCE v2"}));
  }
  EXPECT_EQ(igmp_users(test_netdev(), good), 0) << "a refused join left a membership behind";
}

}  // namespace
}  // namespace ibv::test
