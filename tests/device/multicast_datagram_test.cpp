// SPDX-License-Identifier: MIT
// Device tests of datagrams to a MulticastGroup on the test device: sent through the group's
// address handle and received on every attached UD queue pair (several in one process), none
// after a detach or a leave, queue pairs that could not receive refused by attach, the group
// and its queue pairs freed when an exception passes; and interop with rdmacm-utils' mckey as
// receiver and as sender (other processes on the same device), run as child processes under a
// hard timeout.
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
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/cm/multicast_group.hpp"
#include "ibv/verbs/ud_queue_pair.hpp"
#include "ibv/verbs/ud_received.hpp"
#include "ibv/verbs/ud_send_request.hpp"
#include "multicast_helpers.hpp"
#include "support/child_process.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::throws_error;

// ---- datagrams to the group ----------------------------------------------------------------

constexpr std::size_t kGroupPayload = 64;
constexpr std::size_t kGroupSlot = GlobalRouteHeader::kSize + kGroupPayload;

/// A UD queue pair with its own CQ and `slots` receive buffers of kGroupSlot bytes posted: built
/// here, then handed to a group (attach) or kept (a sender, or a queue pair never attached).
struct GroupReceiver {
  GroupReceiver(const ProtectionDomain& pd, std::uint32_t qkey, std::size_t slots)
      : cq(pd.context(), 64), buffer(slots * kGroupSlot), mr(pd.register_local(buffer)) {
    qp.emplace(UdQueuePairBuilder(pd, cq, cq).qkey(QKey(qkey)).build());
  }

  /// Posts a receive into every slot.
  void post_all(UdQueuePair& on) {
    for (std::size_t i = 0; i < buffer.size() / kGroupSlot; ++i) {
      const std::array elements{mr.scatter(std::span(buffer).subspan(i * kGroupSlot, kGroupSlot))};
      ReceiveRequest request(i, elements);
      on.post_receive(request);
    }
  }

  /// The datagrams that arrive within `timeout`, stopping early once `count` have.
  std::vector<std::string> take(std::size_t count, std::chrono::milliseconds timeout) {
    std::vector<std::string> result;
    std::array<WorkCompletion, 16> batch{};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (result.size() < count && std::chrono::steady_clock::now() < deadline) {
      for (const auto& completion : cq.poll(batch)) {
        EXPECT_TRUE(completion.ok()) << completion.to_string();
        if (!completion.ok()) continue;
        const auto slot = std::span(buffer).subspan(completion.wr_id() * kGroupSlot, kGroupSlot);
        const UdReceived received(completion, slot);
        last_source = received.source();
        last_immediate = received.immediate();
        if (received.grh()) last_destination = received.grh()->destination_gid();
        const auto payload = received.payload();
        result.emplace_back(reinterpret_cast<const char*>(payload.data()), payload.size());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return result;
  }

  CompletionQueue cq;
  std::vector<std::byte> buffer;
  MemoryRegion mr;
  std::optional<UdQueuePair> qp;
  UdSource last_source;
  std::optional<std::uint32_t> last_immediate;
  std::optional<Gid> last_destination;
};

/// `count` datagrams "<tag> #i" (padded to kGroupPayload bytes) from `sender` to the group, with
/// immediate data i; waits for their send completions.
void send_to_group(GroupReceiver& sender, const MulticastGroup& group, const std::string& tag,
                   int count) {
  const ProtectionDomain& pd = sender.qp->protection_domain();
  const AddressHandle ah = group.address_handle(pd);
  std::vector<std::byte> data(kGroupPayload);
  const MemoryRegion mr = pd.register_local(data);
  for (int i = 0; i < count; ++i) {
    std::fill(data.begin(), data.end(), std::byte{0});
    const std::string text = tag + " #" + std::to_string(i);
    std::memcpy(data.data(), text.data(), text.size());
    const std::array elements{mr.gather(std::span<const std::byte>(data))};
    auto request = UdSendRequest::send_with_immediate(static_cast<std::uint64_t>(i), elements, ah,
                                                      MulticastGroup::kQpNumber, group.qkey(),
                                                      static_cast<std::uint32_t>(i));
    sender.qp->post_send(request);
    const auto done = poll_completions(sender.cq, 1);
    ASSERT_EQ(done.size(), 1U);
    ASSERT_TRUE(done.front().ok()) << done.front().to_string();
  }
}

/// "<tag> #i" as a kGroupPayload-byte datagram reads back.
std::string group_datagram(const std::string& tag, int i) {
  std::string text = tag + " #" + std::to_string(i);
  text.resize(kGroupPayload, '\0');
  return text;
}

class MulticastDatagrams : public ::testing::Test {
 protected:
  Context context = open_test_device();
  ProtectionDomain pd{context};
};

TEST_F(MulticastDatagrams, EveryAttachedQueuePairReceivesEveryDatagram) {
  MulticastGroup group(test_group(10), test_ip());
  constexpr int kCount = 8;
  std::vector<GroupReceiver> receivers;
  receivers.reserve(3);
  std::vector<UdQueuePair*> attached;
  for (int i = 0; i < 3; ++i) {
    GroupReceiver& r = receivers.emplace_back(pd, group.qkey(), kCount);
    UdQueuePair& qp = group.attach(std::move(*r.qp));
    r.qp.reset();
    r.post_all(qp);
    attached.push_back(&qp);
  }
  EXPECT_EQ(group.attached_count(), 3U);
  // The sender is not attached, and has a Q_Key of its own: a datagram carries the one its
  // send names (the group's).
  GroupReceiver sender(pd, 0x2222, 1);
  send_to_group(sender, group, "to all", kCount);
  for (std::size_t r = 0; r < receivers.size(); ++r) {
    const auto got = receivers[r].take(kCount, 10s);
    ASSERT_EQ(got.size(), static_cast<std::size_t>(kCount)) << "receiver " << r;
    for (int i = 0; i < kCount; ++i)
      EXPECT_EQ(got[static_cast<std::size_t>(i)], group_datagram("to all", i)) << r;
    EXPECT_EQ(receivers[r].last_source.qp_number, sender.qp->qp_number());
    EXPECT_EQ(receivers[r].last_immediate, std::optional<std::uint32_t>(kCount - 1));
    // The global route header names the group as the destination, the sender as the source.
    EXPECT_EQ(receivers[r].last_destination, std::optional<Gid>(group.mgid()));
    EXPECT_EQ(receivers[r].last_source.gid, std::optional<Gid>(sender.qp->address().gid));
  }
  // The destination as a UdAddress routes the same way.
  const UdAddress destination = group.destination();
  EXPECT_EQ(destination.qp_number, 0xFFFFFFU);
  EXPECT_EQ(destination.qkey, group.qkey());
  EXPECT_EQ(destination.gid, group.mgid());
  EXPECT_EQ(destination.mtu, context.query_port().active_mtu);
}

TEST_F(MulticastDatagrams, NothingArrivesAfterADetachOrALeave) {
  const std::string address = test_group(11);
  MulticastGroup group(address, test_ip());
  // A second membership of the group keeps the host in the IP group after the first leaves, and
  // its queue pair proves that the datagrams were sent and delivered.
  MulticastGroup witness_group(address, test_ip());
  GroupReceiver a(pd, group.qkey(), 4);
  GroupReceiver b(pd, group.qkey(), 4);
  GroupReceiver witness(pd, group.qkey(), 8);
  UdQueuePair& qp_a = group.attach(std::move(*a.qp));
  UdQueuePair& qp_b = group.attach(std::move(*b.qp));
  UdQueuePair& qp_w = witness_group.attach(std::move(*witness.qp));
  a.post_all(qp_a);
  b.post_all(qp_b);
  witness.post_all(qp_w);
  GroupReceiver sender(pd, group.qkey(), 1);

  // Detached: a keeps its receives posted, and gets nothing.
  UdQueuePair detached = group.detach(qp_a);
  EXPECT_EQ(group.attached_count(), 1U);
  send_to_group(sender, group, "after detach", 2);
  EXPECT_EQ(witness.take(2, 10s).size(), 2U);
  EXPECT_EQ(b.take(2, 10s).size(), 2U);
  EXPECT_TRUE(a.take(1, 500ms).empty()) << "a detached queue pair received";

  // Left: b (still held by the group) gets nothing; the witness still does.
  group.leave();
  EXPECT_EQ(group.attached_count(), 1U);
  send_to_group(sender, witness_group, "after leave", 2);
  EXPECT_EQ(witness.take(2, 10s).size(), 2U);
  EXPECT_TRUE(b.take(1, 500ms).empty()) << "a queue pair of a left group received";
  EXPECT_TRUE(a.take(1, 100ms).empty());
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)group.attach(std::move(detached)); },
                           {"was left"}));
}

TEST_F(MulticastDatagrams, AttachRefusesQueuePairsThatCouldNotReceive) {
  MulticastGroup group(test_group(12), test_ip());
  GroupReceiver wrong_key(pd, 0x11111111, 1);
  const auto qpn = std::to_string(wrong_key.qp->qp_number());
  EXPECT_TRUE(throws_error(
      ErrorKind::invalid_argument, [&] { (void)group.attach(std::move(*wrong_key.qp)); },
      {"queue pair " + qpn, "Q_Key 0x11111111", "0x01234567", "would drop every datagram"}));
  EXPECT_EQ(group.attached_count(), 0U);
  MulticastOptions send_only;
  send_only.send_only = true;
  MulticastGroup sender_group(test_group(12), test_ip(), send_only);
  GroupReceiver fine(pd, group.qkey(), 1);
  EXPECT_TRUE(throws_error(ErrorKind::state,
                           [&] { (void)sender_group.attach(std::move(*fine.qp)); }, {"send-only"}));
  // Detaching a queue pair the group does not hold.
  GroupReceiver stranger(pd, group.qkey(), 1);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)group.detach(*stranger.qp); },
                           {"is not attached"}));
}

/// Whether the kernel still has queue pair `qpn` (rdma's resource tracking).
bool kernel_has_qp(std::uint32_t qpn) {
  TemporaryDirectory dir("multicast");
  ChildProcess rdma({"rdma", "resource", "show", "qp", "lqpn", std::to_string(qpn)}, 20s,
                    dir.path() / "rdma.out");
  const auto status = rdma.wait();
  EXPECT_TRUE(status.has_value()) << rdma.describe();
  return rdma.out().find("lqpn " + std::to_string(qpn)) != std::string::npos;
}

TEST_F(MulticastDatagrams, AnExceptionLeavesTheGroupAndFreesItsQueuePairs) {
  const std::string address = test_group(13);
  std::uint32_t qpn = 0;
  try {
    MulticastGroup group(address, test_ip());
    GroupReceiver r(pd, group.qkey(), 2);
    UdQueuePair& qp = group.attach(std::move(*r.qp));
    r.post_all(qp);
    qpn = qp.qp_number();
    EXPECT_EQ(igmp_users(test_netdev(), address), 1);
    ASSERT_TRUE(kernel_has_qp(qpn));
    throw std::runtime_error("the body fails");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(igmp_users(test_netdev(), address), 0) << "the membership outlived the exception";
  // Destroyed after its detach: a queue pair still attached could not have been (EBUSY).
  EXPECT_FALSE(kernel_has_qp(qpn)) << "queue pair " << qpn << " was not destroyed";
}

// ---- interop with rdmacm-utils' mckey --------------------------------------------------------

constexpr auto kMckeyTimeout = 40s;

TEST_F(MulticastDatagrams, MckeyReceivesWhatWeSend) {
  TemporaryDirectory dir("multicast");
  const std::string address = test_group(20);
  constexpr int kCount = 5;
  ChildProcess mckey({"mckey", "-m", address, "-b", test_ip(), "-C", std::to_string(kCount), "-S",
                      std::to_string(kGroupPayload)},
                     kMckeyTimeout, dir.path() / "mckey.out");
  // It posts its receives before it joins, and attaches its queue pair when it sees the join.
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (igmp_users(test_netdev(), address) == 0 && mckey.running() &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_GT(igmp_users(test_netdev(), address), 0) << mckey.describe();
  std::this_thread::sleep_for(300ms);  // from the kernel's join to mckey's attach
  MulticastOptions send_only;
  send_only.send_only = true;
  MulticastGroup group(address, test_ip(), send_only);
  GroupReceiver sender(pd, group.qkey(), 1);
  // mckey takes the first kCount datagrams; should a round arrive before its attach, the next
  // one is taken.
  for (int round = 0; round < 5 && mckey.running(); ++round) {
    send_to_group(sender, group, "ours", kCount);
    for (int i = 0; i < 100 && mckey.running(); ++i) std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(mckey.wait(), 0) << mckey.describe();
  EXPECT_NE(mckey.out().find("data transfers complete"), std::string::npos) << mckey.describe();
  EXPECT_NE(mckey.out().find("joined dgid: ::ffff:" + address), std::string::npos)
      << mckey.describe();
}

TEST_F(MulticastDatagrams, WeReceiveWhatMckeySends) {
  TemporaryDirectory dir("multicast");
  const std::string address = test_group(21);
  constexpr int kCount = 5;
  MulticastGroup group(address, test_ip());
  std::vector<GroupReceiver> receivers;
  receivers.reserve(2);
  for (int i = 0; i < 2; ++i) {
    GroupReceiver& r = receivers.emplace_back(pd, group.qkey(), kCount);
    r.post_all(group.attach(std::move(*r.qp)));
  }
  // mckey's sender joins, waits 3 s, sends kCount SEND_WITH_IMM (immediate: its QP number).
  ChildProcess mckey({"mckey", "-m", address, "-s", "-b", test_ip(), "-C", std::to_string(kCount),
                      "-S", std::to_string(kGroupPayload)},
                     kMckeyTimeout, dir.path() / "mckey.out");
  for (std::size_t r = 0; r < receivers.size(); ++r) {
    const auto got = receivers[r].take(kCount, 30s);
    EXPECT_EQ(got.size(), static_cast<std::size_t>(kCount)) << r << "\n" << mckey.describe();
    for (const auto& datagram : got) EXPECT_EQ(datagram.size(), kGroupPayload);
    EXPECT_EQ(receivers[r].last_immediate,
              std::optional<std::uint32_t>(receivers[r].last_source.qp_number))
        << "mckey's immediate data is its QP number";
    EXPECT_EQ(receivers[r].last_destination, std::optional<Gid>(group.mgid()));
  }
  EXPECT_EQ(mckey.wait(), 0) << mckey.describe();
}

}  // namespace
}  // namespace ibv::test
