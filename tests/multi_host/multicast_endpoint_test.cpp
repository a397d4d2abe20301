// SPDX-License-Identifier: MIT
// Multicast through DatagramEndpoints across hosts: every rank's endpoint joins one IP group on
// its own device and address (DatagramEndpoint::join); each rank in turn sends a stream of
// datagrams to the group, and every rank, the sender included (multicast loopback), receives
// every stream in order and counts no loss from any sender. The datagrams cross the testbed's
// bridge (tests/multi_host/multicast_test.cpp checks the veths' packet counters).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/cm/multicast_group.hpp"
#include "ibv/datagram/datagram_endpoint.hpp"
#include "ibv/verbs/device.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "multi_host.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kPerSender = 8;
constexpr std::size_t kPayload = 48;

/// Datagram `i` of rank `rank`: its bytes tell both.
std::vector<std::byte> datagram_of(std::uint32_t rank, std::uint32_t i) {
  std::vector<std::byte> bytes(kPayload);
  for (std::size_t k = 0; k < bytes.size(); ++k) {
    bytes[k] = static_cast<std::byte>((rank * 31U + i * 7U + k) & 0xFFU);
  }
  bytes[0] = static_cast<std::byte>(rank);
  bytes[1] = static_cast<std::byte>(i);
  return bytes;
}

TEST(MultiHostMulticastEndpoint, EveryEndpointReceivesEveryRanksStreamWithoutLoss) {
  auto& world = multi_host();
  if (world.ip(world.rank()).starts_with("127.")) {
    GTEST_SKIP() << "joins the group on each rank's RDMA device by its IP address; the ranks run "
                    "at 127.0.0.1 (one machine), where no RDMA device has an address: run it on "
                    "the testbed (testbed/run --hosts N)";
  }
  const std::uint32_t ranks = world.world_size();
  const std::shared_ptr<net::Bootstrap> meeting = world.bootstrap(60s);
  const Context context = world.open_device();
  const ProtectionDomain pd(context);
  DatagramSettings settings;
  settings.gid_index = world.gid_index();
  settings.qkey = QKey(MulticastGroup::kRdmaCmQkey);
  settings.receive_buffers = kPerSender * ranks + 8;
  settings.timeout = 10s;
  DatagramEndpoint endpoint(pd, settings);
  // One group per run of the program (the run's base port tells runs apart).
  const std::string group = "239.253." + std::to_string(world.base_port() % 250) + ".1";
  const UdAddress to_group = endpoint.join(group, world.ip(world.rank()));
  meeting->barrier();  // every rank has joined

  for (std::uint32_t sender = 0; sender < ranks; ++sender) {
    if (sender == world.rank()) {
      for (std::uint32_t i = 0; i < kPerSender; ++i) {
        endpoint.send(to_group, datagram_of(sender, i));
      }
    }
    meeting->barrier();  // one sender at a time
  }

  std::vector<std::uint32_t> next(ranks, 0);  // per sender, the datagram expected next
  for (std::uint32_t received = 0; received < kPerSender * ranks; ++received) {
    auto message = endpoint.receive(20s);
    ASSERT_TRUE(message.has_value()) << "received " << received << " of " << kPerSender * ranks;
    const auto data = message->data();
    ASSERT_EQ(data.size(), kPayload);
    const auto sender = std::to_integer<std::uint32_t>(data[0]);
    ASSERT_LT(sender, ranks);
    EXPECT_EQ(std::to_integer<std::uint32_t>(data[1]), next[sender]) << "from rank " << sender;
    const auto expected = datagram_of(sender, next[sender]);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), expected.begin())) << "from rank " << sender;
    EXPECT_EQ(message->sequence(), next[sender]);
    EXPECT_EQ(message->lost_before(), 0U);
    ++next[sender];
  }
  // One stream per rank, each whole.
  const auto counts = endpoint.counts();
  EXPECT_EQ(counts.size(), ranks);
  for (const auto& sender : counts) {
    EXPECT_EQ(sender.counts, (SequenceCounts{kPerSender, 0, 0, kPerSender}))
        << "sender QPN " << sender.sender.qp_number;
  }
  meeting->barrier();  // nobody leaves while another still receives
  EXPECT_TRUE(endpoint.leave(group));
}

}  // namespace
}  // namespace ibv::test
