// SPDX-License-Identifier: MIT
// Device tests of connection management with rdma_cm: Channel::connect and ChannelListener on
// the test device's IP address (IBV_TEST_IP, which the testbed sets): data both ways, several
// channels on one listener sharing one protection domain, and every way a connection can fail
// (no listener, unreachable address, rejected, accept timeout, peer disconnect, also while the
// wait sleeps, bad input) as a clear ibv::Error within its timeout.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/cm/channel_listener.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

/// Whether thread `tid` of this process is asleep in the kernel (state S in /proc): a thread
/// that is still on its way to a wait shows R, preempted or not.
bool thread_sleeps(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto name_end = line.rfind(')');  // "tid (name) S ..."
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'S';
}

/// Options with short set-up timeouts, so that a failure shows quickly.
ConnectOptions quick_options() {
  ConnectOptions options;
  options.address_timeout = 1000ms;
  options.route_timeout = 1000ms;
  options.connect_timeout = 3000ms;
  options.channel.timeouts.operation = 5000ms;
  options.channel.timeouts.drop = 5000ms;
  options.channel.queue_pair.max_send_wr = QueueDepth(8);
  options.channel.queue_pair.max_recv_wr = QueueDepth(8);
  return options;
}

/// Connects a client to `listener` while the listener accepts: {client, server}.
std::pair<Channel, Channel> connect_to(ChannelListener& listener,
                                       const ConnectOptions& options = quick_options()) {
  auto server = std::async(std::launch::async, [&] { return listener.accept(5s); });
  Channel client = Channel::connect(test_ip(), listener.port(), options);
  return {std::move(client), server.get()};
}

/// Sends `text` from `from` to `to` and checks that it arrives whole.
void send_text(Channel& from, Channel& to, const std::string& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  std::vector<std::byte> in(64);
  const auto out_mr = from.protection_domain().register_local(out);
  const auto in_mr = to.protection_domain().register_local(in);
  auto receive = to.post_receive(std::vector{in_mr.scatter_all()});
  from.send(std::vector{out_mr.gather_all()});
  const auto completion = receive.wait();
  ASSERT_EQ(completion.byte_length(), text.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(in.data()), text.size()), text);
}

TEST(Cm, ConnectAcceptMovesDataBothWays) {
  ChannelListener listener(test_ip(), 0, quick_options());
  ASSERT_NE(listener.port(), 0);
  auto [client, server] = connect_to(listener);
  EXPECT_EQ(client.queue_pair().query_state(), "RTS");
  EXPECT_EQ(server.queue_pair().query_state(), "RTS");
  EXPECT_EQ(client.queue_pair().remote_endpoint().qp_number, server.queue_pair().qp_number());
  EXPECT_EQ(server.queue_pair().remote_endpoint().qp_number, client.queue_pair().qp_number());
  send_text(client, server, "hello from the client");
  send_text(server, client, "hello from the server");

  // RDMA write and read into the server's memory, with its region's key sent over the channel.
  std::vector<std::byte> target(256);
  const auto target_mr =
      server.protection_domain().register_remote_accessible(target, RemoteAccess::all());
  std::vector<std::byte> source(256);
  fill_pattern(source, 7);
  const auto source_mr = client.protection_domain().register_local(source);
  client.write(std::vector{source_mr.gather_all()}, target_mr.remote());
  std::vector<std::byte> back(256);
  const auto back_mr = client.protection_domain().register_local(back);
  client.read(std::vector{back_mr.scatter_all()}, target_mr.remote());
  EXPECT_TRUE(same_bytes(source, target));
  EXPECT_TRUE(same_bytes(source, back));
}

TEST(Cm, AcceptedChannelsShareTheListenersProtectionDomain) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  ConnectOptions options = quick_options();
  options.protection_domain = pd;
  ChannelListener listener("", 0, options);
  EXPECT_EQ(listener.address(), "0.0.0.0");
  std::vector<Channel> clients;
  std::vector<Channel> servers;
  for (int i = 0; i < 3; ++i) {
    auto [client, server] = connect_to(listener);
    EXPECT_EQ(server.protection_domain().native(), pd.native()) << "channel " << i;
    EXPECT_NE(client.protection_domain().native(), pd.native()) << "channel " << i;
    clients.push_back(std::move(client));
    servers.push_back(std::move(server));
  }
  // One region of the shared PD serves every accepted channel.
  std::vector<std::byte> shared(std::size_t{3} * 64);
  const auto shared_mr = pd.register_remote_accessible(shared, RemoteAccess::all());
  for (std::size_t i = 0; i < clients.size(); ++i) {
    std::vector<std::byte> data(64, std::byte{static_cast<unsigned char>(0x10 + i)});
    const auto data_mr = clients[i].protection_domain().register_local(data);
    clients[i].write(std::vector{data_mr.gather_all()}, shared_mr.remote().sub_region(i * 64, 64));
    send_text(servers[i], clients[i], "channel " + std::to_string(i));
  }
  for (std::size_t i = 0; i < shared.size(); ++i) {
    ASSERT_EQ(shared[i], std::byte{static_cast<unsigned char>(0x10 + i / 64)}) << "byte " << i;
  }
}

TEST(Cm, NoListenerIsRejectedNotTimedOut) {
  std::uint16_t port = 0;
  {
    ChannelListener gone(test_ip(), 0, quick_options());  // a port that was free a moment ago
    port = gone.port();
  }
  try {
    (void)Channel::connect(test_ip(), port, quick_options());
    FAIL() << "connected to a port without a listener";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::connection) << e.what();
    EXPECT_NE(std::string(e.what()).find("no listener"), std::string::npos) << e.what();
  }
}

TEST(Cm, UnreachableAddressFailsWithinItsTimeouts) {
  ConnectOptions options = quick_options();
  options.address_timeout = 500ms;
  options.route_timeout = 500ms;
  options.connect_timeout = 1000ms;
  // In the test device's subnet, where no host answers (on the testbed's dummy0, which does
  // no ARP, the address resolves and the connection request goes unanswered), and outside
  // every subnet (TEST-NET-1: no route through an RDMA device).
  std::string ip = test_ip();
  ip = ip.substr(0, ip.rfind('.')) + ".213";
  for (const std::string& address : {ip, std::string("192.0.2.1")}) {
    try {
      (void)Channel::connect(address, 7471, options);
      ADD_FAILURE() << "connected to " << address;
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::timeout || e.kind() == ErrorKind::connection ||
                  e.kind() == ErrorKind::not_found)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(address), std::string::npos) << e.what();
      std::printf("[ info     ] %s\n", e.what());
    }
  }
}

TEST(Cm, ListenerRejectsAndTheClientSaysSo) {
  ChannelListener listener(test_ip(), 0, quick_options());
  auto rejected = std::async(std::launch::async, [&] { return listener.reject(5s); });
  try {
    (void)Channel::connect(test_ip(), listener.port(), quick_options());
    FAIL() << "a rejected connection connected";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::connection) << e.what();
    EXPECT_NE(std::string(e.what()).find("rejected by the server"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(rejected.get());
}

TEST(Cm, AcceptTimesOutWithoutARequest) {
  ChannelListener listener(test_ip(), 0, quick_options());
  try {
    (void)listener.accept(200ms);
    FAIL() << "accepted without a client";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::timeout) << e.what();
  }
  EXPECT_FALSE(listener.reject(50ms));
}

TEST(Cm, PeerDisconnectFailsAWaitingReceive) {
  ChannelListener listener(test_ip(), 0, quick_options());
  auto pair = connect_to(listener);
  Channel client = std::move(pair.first);
  std::vector<std::byte> in(64);
  const auto in_mr = client.protection_domain().register_local(in);
  { const Channel server = std::move(pair.second); }  // destroyed: it disconnects
  try {
    (void)client.receive(std::vector{in_mr.scatter_all()}, 4s);
    FAIL() << "received after the peer disconnected";
  } catch (const WorkError& e) {
    EXPECT_EQ(e.status(), WorkStatus::work_request_flushed) << e.what();
  }
  // The disconnect, not the flush it caused, is why the channel is broken.
  EXPECT_TRUE(client.state().peer_gone()) << client.state().to_string();
  EXPECT_EQ(client.state().status(), WorkStatus::success);
}

TEST(Cm, PeerDisconnectFailsAReceiveThatSleeps) {
  // A sleeping wait is woken by completions only; the disconnect is an rdma_cm event, which the
  // channel looks for between slices of its sleep.
  auto options = quick_options();
  options.channel.wait_mode = WaitMode::block();
  ChannelListener listener(test_ip(), 0, quick_options());
  auto pair = connect_to(listener, options);
  Channel client = std::move(pair.first);
  ASSERT_EQ(client.wait_mode().strategy, WaitStrategy::block);
  std::vector<std::byte> in(64);
  const auto in_mr = client.protection_domain().register_local(in);
  auto receive = client.post_receive(std::vector{in_mr.scatter_all()});
  // The peer disconnects once the receive below is asleep, not after a delay hoped to be long
  // enough for it to get there. A jthread, so that a throw below still joins it.
  const pid_t waiter = ::gettid();
  std::jthread disconnect([server = std::move(pair.second), waiter]() mutable {
    const auto asleep_by = std::chrono::steady_clock::now() + 5s;
    bool asleep = thread_sleeps(waiter);
    while (!asleep && std::chrono::steady_clock::now() < asleep_by) {
      std::this_thread::sleep_for(1ms);  // polling the waiter's state, not hoping for it
      asleep = thread_sleeps(waiter);
    }
    EXPECT_TRUE(asleep) << "the receive never went to sleep";
    const Channel gone = std::move(server);  // destroyed at the end of the scope: disconnects
  });
  const auto started = std::chrono::steady_clock::now();
  try {
    const auto completion = receive.wait_for(4s);
    ADD_FAILURE() << (completion ? "received after the peer disconnected"
                                 : "the receive waited out its timeout");
  } catch (const WorkError& e) {
    EXPECT_EQ(e.status(), WorkStatus::work_request_flushed) << e.what();
  }
  disconnect.join();
  EXPECT_LT(std::chrono::steady_clock::now() - started, 3s);
  EXPECT_TRUE(client.state().peer_gone()) << client.state().to_string();
}

TEST(Cm, BadInputIsRejectedBeforeAnythingIsCreated) {
  auto expect_invalid = [](auto&& call, const std::string& names) {
    try {
      call();
      ADD_FAILURE() << "accepted: " << names;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
  };
  expect_invalid([] { (void)Channel::connect("server.example", 7471); }, "server.example");
  expect_invalid([] { (void)Channel::connect("10.0.0.256", 7471); }, "10.0.0.256");
  expect_invalid([] { (void)Channel::connect("", 7471); }, "address");
  expect_invalid([] { (void)Channel::connect(test_ip(), 0); }, "port 0");
  auto options = quick_options();
  options.connect_timeout = 0ms;
  expect_invalid([&] { (void)Channel::connect(test_ip(), 7471, options); }, "connect_timeout");
  options = quick_options();
  options.address_timeout = -1ms;
  expect_invalid([&] { (void)ChannelListener(test_ip(), 0, options); }, "address_timeout");
  options = quick_options();
  options.channel.queue_pair.gid_index = 1;
  expect_invalid([&] { (void)Channel::connect(test_ip(), 7471, options); }, "gid_index");
  expect_invalid([] { (void)ChannelListener("10.0.0.x", 0); }, "10.0.0.x");
  expect_invalid([] { (void)ChannelListener(test_ip(), 0, quick_options(), 0); }, "backlog 0");
  ChannelListener listener(test_ip(), 0, quick_options());
  expect_invalid([&] { (void)listener.accept(0ms); }, "timeout");
}

}  // namespace
}  // namespace ibv::test
