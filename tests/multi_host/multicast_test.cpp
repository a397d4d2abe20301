// SPDX-License-Identifier: MIT
// Multicast across hosts: every rank joins one IP multicast group through MulticastGroup on its
// own device and address and attaches a UD queue pair; each rank in turn sends datagrams to the
// group, and every rank, the sender included (multicast loopback), receives all of them. On the
// testbed the datagrams leave the sender's veth, and the bridge floods them to every other
// host's veth (its tx and rx packet counters are checked), so they do not stay inside one rxe.
// And a group refuses queue pairs and protection domains of another host's device.
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/cm/multicast_group.hpp"
#include "ibv/error.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/device.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/ud_queue_pair.hpp"
#include "ibv/verbs/ud_received.hpp"
#include "ibv/verbs/ud_send_request.hpp"
#include "multi_host.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kGroupPayload = 32;
constexpr std::size_t kGroupSlot = GlobalRouteHeader::kSize + kGroupPayload;
constexpr int kGroupPerSender = 4;

/// A packet counter of `netdev` ("tx_packets", "rx_packets"); -1 when unreadable.
long long netdev_counter(const std::string& netdev, const std::string& name) {
  std::ifstream in("/sys/class/net/" + netdev + "/statistics/" + name);
  long long value = -1;
  in >> value;
  return value;
}

TEST(MultiHostMulticast, EveryRankReceivesEveryRanksDatagrams) {
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
  const std::uint32_t gid_index = world.gid_index().value_or(context.default_gid_index());
  const std::string netdev = context.query_gid(gid_index).netdev;
  // One group per run of the program (the run's base port tells runs apart).
  const std::string address = "239.254." + std::to_string(world.base_port() % 250) + ".1";

  MulticastGroup group(address, world.ip(world.rank()));
  const std::size_t slots = static_cast<std::size_t>(kGroupPerSender) * ranks;
  const CompletionQueue recv_cq(context, static_cast<int>(slots) + 8);
  const CompletionQueue send_cq(context, 16);
  std::vector<std::byte> buffer(slots * kGroupSlot);
  const MemoryRegion mr = pd.register_local(buffer);
  UdQueuePair& qp =
      group.attach(UdQueuePairBuilder(pd, send_cq, recv_cq).qkey(QKey(group.qkey())).build());
  for (std::size_t i = 0; i < slots; ++i) {
    const std::array elements{mr.scatter(std::span(buffer).subspan(i * kGroupSlot, kGroupSlot))};
    ReceiveRequest request(i, elements);
    qp.post_receive(request);
  }
  const AddressHandle ah = group.address_handle(pd);
  std::vector<std::byte> out(kGroupPayload);
  const MemoryRegion out_mr = pd.register_local(out);
  const long long tx_before = netdev_counter(netdev, "tx_packets");
  const long long rx_before = netdev_counter(netdev, "rx_packets");
  meeting->barrier();  // every rank has joined, attached and posted its receives

  for (std::uint32_t sender = 0; sender < ranks; ++sender) {
    if (sender == world.rank()) {
      for (int i = 0; i < kGroupPerSender; ++i) {
        std::fill(out.begin(), out.end(), std::byte{0});
        const std::string text = "rank " + std::to_string(sender) + " #" + std::to_string(i);
        std::memcpy(out.data(), text.data(), text.size());
        const std::array elements{out_mr.gather(std::span<const std::byte>(out))};
        auto request =
            UdSendRequest::to(static_cast<std::uint64_t>(i), elements, ah, group.destination());
        qp.post_send(request);
        std::array<WorkCompletion, 1> done{};
        const auto deadline = std::chrono::steady_clock::now() + 10s;
        std::size_t n = 0;
        while (n == 0 && std::chrono::steady_clock::now() < deadline) n = send_cq.poll(done).size();
        ASSERT_EQ(n, 1U) << "send " << i << " did not complete";
        ASSERT_TRUE(done[0].ok()) << done[0].to_string();
      }
    }
    meeting->barrier();  // one sender at a time
  }

  // Every rank's datagrams, the own ones included.
  std::vector<int> from(ranks, 0);
  std::array<WorkCompletion, 16> batch{};
  std::size_t received = 0;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (received < slots && std::chrono::steady_clock::now() < deadline) {
    for (const auto& completion : recv_cq.poll(batch)) {
      ASSERT_TRUE(completion.ok()) << completion.to_string();
      const UdReceived datagram(
          completion, std::span(buffer).subspan(completion.wr_id() * kGroupSlot, kGroupSlot));
      const std::string text(reinterpret_cast<const char*>(datagram.payload().data()));
      const auto space = text.find(' ', 5);
      ASSERT_TRUE(text.starts_with("rank ") && space != std::string::npos) << text;
      const auto sender = std::stoul(text.substr(5, space - 5));
      ASSERT_LT(sender, ranks) << text;
      ++from[sender];
      ++received;
      ASSERT_TRUE(datagram.grh().has_value());
      EXPECT_EQ(datagram.grh()->destination_gid(), group.mgid());
    }
    std::this_thread::sleep_for(1ms);
  }
  for (std::uint32_t sender = 0; sender < ranks; ++sender) {
    EXPECT_EQ(from[sender], kGroupPerSender) << "datagrams from rank " << sender;
  }
  // On the testbed, proof that the datagrams crossed the bridge: this host's veth sent its own
  // and received the others'.
  if (const char* testbed = std::getenv("IBV_TESTBED"); testbed != nullptr && *testbed == '1') {
    EXPECT_GE(netdev_counter(netdev, "tx_packets") - tx_before, kGroupPerSender) << netdev;
    EXPECT_GE(netdev_counter(netdev, "rx_packets") - rx_before,
              static_cast<long long>(kGroupPerSender) * (ranks - 1))
        << netdev;
  }
  meeting->barrier();  // nobody leaves while another still counts
}

// Every rank's process sees every host's device (one kernel): a queue pair or protection domain
// of the next rank's device is refused by this rank's group, naming both devices.
TEST(MultiHostMulticast, QueuePairsAndProtectionDomainsOfAnotherDeviceAreRefused) {
  auto& world = multi_host();
  const std::uint32_t next = (world.rank() + 1) % world.world_size();
  if (world.ip(world.rank()).starts_with("127.") || world.device(next) == world.device()) {
    GTEST_SKIP() << "needs the ranks on different RDMA devices, each with its own IP address "
                    "(the testbed's --hosts N); here they share "
                 << world.device();
  }
  MulticastGroup group("239.254." + std::to_string(world.base_port() % 250) + ".2",
                       world.ip(world.rank()));
  const Context other = open_device(world.device(next));
  const ProtectionDomain other_pd(other);
  const CompletionQueue cq(other, 4);
  try {
    (void)group.attach(UdQueuePairBuilder(other_pd, cq, cq).qkey(QKey(group.qkey())).build());
    ADD_FAILURE() << "attached a queue pair of " << world.device(next);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("is on device " + world.device(next)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("joined on " + world.device()), std::string::npos)
        << e.what();
  }
  try {
    (void)group.address_handle(other_pd);
    ADD_FAILURE() << "made an address handle on " << world.device(next);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("protection domain"), std::string::npos) << e.what();
  }
  EXPECT_EQ(group.attached_count(), 0U);
}

}  // namespace
}  // namespace ibv::test
