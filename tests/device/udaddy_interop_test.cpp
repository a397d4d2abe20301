// SPDX-License-Identifier: MIT
// Interop of the UD verbs layer (UdQueuePair, AddressHandle, UdReceived) with rdmacm-utils'
// udaddy, client and server. udaddy finds its peer through rdma_cm's UDP port space (a SIDR
// exchange: the answer carries the peer's QP number, Q_Key and address vector); the library has
// no rdma_cm front end for UD yet, so this test does that exchange itself with librdmacm, and
// everything on the data path is the library's: the queue pair, the address handles (from
// rdma_cm's attributes, and back to a sender from its completion and GRH), the sends with
// immediate data and the receives. udaddy's protocol: the client sends its datagrams with its
// QP number as immediate data; the server receives all of them, then answers each client with as
// many datagrams, to the address it read from the first completion, with its own Q_Key
// (rdma_cm's 0x01234567), which the client's queue pair must accept.
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/verbs/ud_queue_pair.hpp"
#include "ibv/verbs/ud_received.hpp"
#include "ibv/verbs/ud_send_request.hpp"
#include "support/child_process.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kUdaddyTimeout = 60s;
constexpr int kUdaddyMessages = 5;
constexpr std::size_t kUdaddySize = 100;  // udaddy's default message size
constexpr std::size_t kUdaddySlot = GlobalRouteHeader::kSize + kUdaddySize;
constexpr const char* kUdaddyPort = "7174";  // udaddy's fixed port
constexpr std::uint32_t kRdmaUdpQkey = 0x01234567;

/// An rdma_cm event channel and id of the UDP port space, destroyed in the right order.
struct UdCmId {
  UdCmId() : channel(rdma_create_event_channel()) {
    if (channel == nullptr) throw std::runtime_error("rdma_create_event_channel failed");
    if (rdma_create_id(channel, &id, nullptr, RDMA_PS_UDP) != 0) {
      rdma_destroy_event_channel(channel);
      throw std::runtime_error("rdma_create_id failed");
    }
  }
  UdCmId(const UdCmId&) = delete;
  UdCmId& operator=(const UdCmId&) = delete;
  UdCmId(UdCmId&&) = delete;
  UdCmId& operator=(UdCmId&&) = delete;
  ~UdCmId() {
    if (accepted != nullptr) rdma_destroy_id(accepted);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(channel);
  }

  /// The next event within `timeout` (its type, status and UD parameters copied, acknowledged),
  /// or nullopt. A CONNECT_REQUEST's new id is kept in `accepted`.
  struct Event {
    rdma_cm_event_type type{};
    int status = 0;
    rdma_ud_param ud{};
  };
  std::optional<Event> next(std::chrono::milliseconds timeout) {
    pollfd fd{channel->fd, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    rdma_cm_event* raw = nullptr;
    if (rdma_get_cm_event(channel, &raw) != 0) return std::nullopt;
    Event event{raw->event, raw->status, raw->param.ud};
    if (raw->event == RDMA_CM_EVENT_CONNECT_REQUEST) accepted = raw->id;
    rdma_ack_cm_event(raw);
    return event;
  }

  rdma_event_channel* channel = nullptr;
  rdma_cm_id* id = nullptr;
  rdma_cm_id* accepted = nullptr;
};

sockaddr_in ipv4(const std::string& ip, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  EXPECT_EQ(inet_pton(AF_INET, ip.c_str(), &address.sin_addr), 1) << ip;
  return address;
}

/// Our side: a UD queue pair with rdma_cm's Q_Key, receive slots for udaddy's datagrams.
struct UdaddyPeer {
  explicit UdaddyPeer(Context device)
      : context(std::move(device)),
        pd(context),
        send_cq(context, 64),
        cq(context, 64),
        buffer(kUdaddyMessages * kUdaddySlot),
        mr(pd.register_local(buffer)),
        qp(UdQueuePairBuilder(pd, send_cq, cq).qkey(QKey(kRdmaUdpQkey)).build()) {
    for (std::size_t i = 0; i < kUdaddyMessages; ++i) {
      const std::array elements{
          mr.scatter(std::span(buffer).subspan(i * kUdaddySlot, kUdaddySlot))};
      ReceiveRequest request(i, elements);
      qp.post_receive(request);
    }
  }

  /// Sends kUdaddyMessages datagrams of kUdaddySize bytes through `ah` to `qpn` / `qkey`, with
  /// our QP number as immediate data (what udaddy's server replies to); waits for completions.
  void send_all(const AddressHandle& ah, std::uint32_t qpn, std::uint32_t qkey) const {
    std::vector<std::byte> data(kUdaddySize, std::byte{0x5a});
    const MemoryRegion data_mr = pd.register_local(data);
    for (int i = 0; i < kUdaddyMessages; ++i) {
      const std::array elements{data_mr.gather(std::span<const std::byte>(data))};
      auto request = UdSendRequest::send_with_immediate(100 + static_cast<std::uint64_t>(i),
                                                        elements, ah, qpn, qkey, qp.qp_number());
      qp.post_send(request);
      // Sends complete on their own queue: udaddy's replies to the first datagrams may land
      // while later ones are still being sent.
      const auto done = poll_completions(send_cq, 1);
      ASSERT_EQ(done.size(), 1U);
      ASSERT_TRUE(done.front().ok()) << done.front().to_string();
      ASSERT_FALSE(done.front().is_receive()) << done.front().to_string();
    }
  }

  /// The kUdaddyMessages datagrams udaddy sends (20 s at most).
  std::vector<UdReceived> receive_all() {
    std::vector<UdReceived> result;
    for (const auto& completion : poll_completions(cq, kUdaddyMessages, 20s)) {
      EXPECT_TRUE(completion.ok()) << completion.to_string();
      if (!completion.ok()) continue;
      result.emplace_back(completion,
                          std::span(buffer).subspan(completion.wr_id() * kUdaddySlot, kUdaddySlot));
      last = completion;
    }
    return result;
  }

  Context context;
  ProtectionDomain pd;
  CompletionQueue send_cq;  // our sends' completions
  CompletionQueue cq;       // the receives' completions
  std::vector<std::byte> buffer;
  MemoryRegion mr;
  UdQueuePair qp;
  WorkCompletion last;
};

TEST(UdaddyInterop, OurQueuePairIsAClientOfUdaddysServer) {
  TemporaryDirectory dir("udaddy");
  ChildProcess server({"udaddy", "-b", test_ip(), "-C", std::to_string(kUdaddyMessages), "-S",
                       std::to_string(kUdaddySize)},
                      kUdaddyTimeout, dir.path() / "udaddy.out");
  // Resolve the server's address and route, then the SIDR request; retry until it listens.
  std::optional<UdCmId::Event> established;
  std::unique_ptr<UdCmId> cm;
  std::optional<UdaddyPeer> peer;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!established && server.running() && std::chrono::steady_clock::now() < deadline) {
    cm = std::make_unique<UdCmId>();
    sockaddr_in source = ipv4(test_ip(), 0);
    sockaddr_in destination = ipv4(test_ip(), static_cast<std::uint16_t>(std::stoi(kUdaddyPort)));
    ASSERT_EQ(rdma_resolve_addr(cm->id, reinterpret_cast<sockaddr*>(&source),
                                reinterpret_cast<sockaddr*>(&destination), 2000),
              0);
    auto event = cm->next(5s);
    ASSERT_TRUE(event && event->type == RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_EQ(rdma_resolve_route(cm->id, 2000), 0);
    event = cm->next(5s);
    ASSERT_TRUE(event && event->type == RDMA_CM_EVENT_ROUTE_RESOLVED);
    peer.emplace(open_device(ibv_get_device_name(cm->id->verbs->device)));
    rdma_conn_param param{};
    param.qp_num = peer->qp.qp_number();
    ASSERT_EQ(rdma_connect(cm->id, &param), 0);
    event = cm->next(10s);
    if (event && event->type == RDMA_CM_EVENT_ESTABLISHED) {
      established = event;
    } else {
      peer.reset();
      std::this_thread::sleep_for(200ms);  // not listening yet (REJECTED / UNREACHABLE)
    }
  }
  ASSERT_TRUE(established.has_value()) << server.describe();
  EXPECT_EQ(established->ud.qkey, kRdmaUdpQkey);
  const AddressHandle ah = AddressHandle::from_attributes(peer->pd, established->ud.ah_attr);
  peer->send_all(ah, established->ud.qp_num, established->ud.qkey);
  const auto replies = peer->receive_all();
  ASSERT_EQ(replies.size(), static_cast<std::size_t>(kUdaddyMessages)) << server.describe();
  for (const auto& reply : replies) {
    EXPECT_EQ(reply.payload().size(), kUdaddySize);
    EXPECT_EQ(reply.source().qp_number, established->ud.qp_num);
  }
  EXPECT_EQ(server.wait(), 0) << server.describe();
  EXPECT_NE(server.out().find("data transfers complete"), std::string::npos) << server.describe();
}

TEST(UdaddyInterop, UdaddysClientIsServedByOurQueuePair) {
  TemporaryDirectory dir("udaddy");
  UdCmId cm;
  sockaddr_in local = ipv4(test_ip(), static_cast<std::uint16_t>(std::stoi(kUdaddyPort)));
  ASSERT_EQ(rdma_bind_addr(cm.id, reinterpret_cast<sockaddr*>(&local)), 0)
      << "port " << kUdaddyPort << " of the UDP port space is taken";
  ASSERT_EQ(rdma_listen(cm.id, 4), 0);
  ChildProcess client({"udaddy", "-s", test_ip(), "-b", test_ip(), "-C",
                       std::to_string(kUdaddyMessages), "-S", std::to_string(kUdaddySize)},
                      kUdaddyTimeout, dir.path() / "udaddy.out");
  const auto request = cm.next(20s);
  ASSERT_TRUE(request && request->type == RDMA_CM_EVENT_CONNECT_REQUEST) << client.describe();
  UdaddyPeer peer(open_device(ibv_get_device_name(cm.accepted->verbs->device)));
  rdma_conn_param param{};
  param.qp_num = peer.qp.qp_number();
  ASSERT_EQ(rdma_accept(cm.accepted, &param), 0);
  // The client's datagrams; then the reply to the client, as udaddy's server does: an address
  // handle from the first completion and its GRH, the QP number from the immediate data, the
  // client's Q_Key (rdma_cm's).
  const auto received = peer.receive_all();
  ASSERT_EQ(received.size(), static_cast<std::size_t>(kUdaddyMessages)) << client.describe();
  for (const auto& datagram : received) {
    EXPECT_EQ(datagram.payload().size(), kUdaddySize);
    EXPECT_EQ(datagram.immediate(), std::optional<std::uint32_t>(datagram.source().qp_number))
        << "udaddy's immediate data is its QP number";
  }
  const AddressHandle back =
      AddressHandle::reply_to(peer.pd, peer.last, received.back().grh_area());
  peer.send_all(back, received.back().source().qp_number, kRdmaUdpQkey);
  EXPECT_EQ(client.wait(), 0) << client.describe();
  EXPECT_NE(client.out().find("data transfers complete"), std::string::npos) << client.describe();
}

}  // namespace
}  // namespace ibv::test
