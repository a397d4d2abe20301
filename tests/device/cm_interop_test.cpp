// SPDX-License-Identifier: MIT
// Interoperability of Channel::connect and ChannelListener with rdma-core's rdma_cm programs
// (package rdmacm-utils): our client completes rping's protocol against `rping -s`, our
// listener serves `rping -c` (reading and writing back its pings), and our side exchanges
// ucmatose's sends with `ucmatose` as server and as client of our listener. Each program runs
// as a child process under a hard timeout; on failure its output is printed.
#include <endian.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "support/child_process.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kInteropProcessTimeout = 60s;
constexpr int kPings = 5;
constexpr std::size_t kInteropMessages = 10;
constexpr std::size_t kMessageSize = 100;  // ucmatose's default
constexpr std::size_t kPingSize = 64;      // rping's default

ConnectOptions interop_options() {
  ConnectOptions options;
  options.channel.queue_pair.max_send_wr = QueueDepth(16);
  options.channel.queue_pair.max_recv_wr = QueueDepth(16);
  // Their side may send before our receives are posted: the peer retries receiver-not-ready
  // (the count we send it) until they are; our timeouts bound every wait.
  options.channel.queue_pair.rnr_retry = RnrRetryCount::infinite();
  options.channel.timeouts.operation = 10s;
  return options;
}

/// Connects to a server started as a child process, retrying while it is not listening yet.
Channel connect_when_listening(std::uint16_t port, ChildProcess& server) {
  const auto deadline = std::chrono::steady_clock::now() + 15s;
  for (;;) {
    try {
      return Channel::connect(test_ip(), port, interop_options());
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::connection || !server.running() ||
          std::chrono::steady_clock::now() > deadline) {
        throw;
      }
      std::this_thread::sleep_for(100ms);
    }
  }
}

/// A port number for this run of the program (several test binaries may run at once).
std::uint16_t port_for(int offset) {
  return static_cast<std::uint16_t>(20000 + (::getpid() % 10000) * 3 + offset);
}

/// rping's advertisement of a buffer: address, rkey, length, big-endian.
struct RpingInfo {
  std::uint64_t buf;
  std::uint32_t rkey;
  std::uint32_t size;
};

void advertise(Channel& channel, const MemoryRegion& info_mr, std::span<std::byte> info,
               const MemoryRegion& buffer) {
  const RpingInfo wire{htobe64(reinterpret_cast<std::uintptr_t>(buffer.bytes().data())),
                       htobe32(buffer.remote().rkey()),
                       htobe32(static_cast<std::uint32_t>(buffer.bytes().size()))};
  std::memcpy(info.data(), &wire, sizeof wire);
  channel.send(std::vector{info_mr.gather(info)});
}

TEST(CmInterop, OurClientPingsRpingServer) {
  TemporaryDirectory dir("cm_interop");
  const auto port = port_for(0);
  ChildProcess server({"rping", "-s", "-v", "-a", test_ip(), "-p", std::to_string(port), "-C",
                       std::to_string(kPings)},
                      kInteropProcessTimeout, dir.path() / "rping.out");
  {
    Channel channel = connect_when_listening(port, server);
    const auto& pd = channel.protection_domain();
    std::vector<std::byte> start(kPingSize);
    std::vector<std::byte> echo(kPingSize);
    std::vector<std::byte> info(sizeof(RpingInfo));
    std::vector<std::byte> reply(sizeof(RpingInfo));
    const auto start_mr = pd.register_remote_accessible(start, RemoteAccess::all());
    const auto echo_mr = pd.register_remote_accessible(echo, RemoteAccess::all());
    const auto info_mr = pd.register_local(info);
    const auto reply_mr = pd.register_local(reply);
    for (int ping = 0; ping < kPings; ++ping) {
      // rping's client: advertise the ping (the server reads it), wait for its go-ahead,
      // advertise the echo buffer (the server writes the ping back), wait for its go-ahead.
      const std::string text = "rdma-ping-" + std::to_string(ping) + ": ibverbs-cpp";
      std::fill(start.begin(), start.end(), std::byte{0});
      std::fill(echo.begin(), echo.end(), std::byte{0});
      std::memcpy(start.data(), text.c_str(), text.size() + 1);
      auto go_ahead = channel.post_receive(std::vector{reply_mr.scatter_all()});
      advertise(channel, info_mr, info, start_mr);
      (void)go_ahead.wait();
      auto written = channel.post_receive(std::vector{reply_mr.scatter_all()});
      advertise(channel, info_mr, info, echo_mr);
      (void)written.wait();
      ASSERT_EQ(std::string(reinterpret_cast<const char*>(echo.data())), text) << server.describe();
    }
  }  // destroyed: disconnects, and rping's server ends
  EXPECT_EQ(server.wait(), 0) << server.describe();
  EXPECT_NE(server.out().find("server ping data: rdma-ping-" + std::to_string(kPings - 1)),
            std::string::npos)
      << server.describe();
}

/// ucmatose's exchange: kInteropMessages receives posted, kInteropMessages sends of kMessageSize,
/// all completed, on either side.
void exchange_messages(Channel& channel) {
  const auto& pd = channel.protection_domain();
  std::vector<std::byte> in(kInteropMessages * kMessageSize);
  std::vector<std::byte> out(kInteropMessages * kMessageSize);
  fill_pattern(out, 3);
  const auto in_mr = pd.register_local(in);
  const auto out_mr = pd.register_local(out);
  std::vector<PendingWork> receives;
  for (std::size_t i = 0; i < kInteropMessages; ++i) {
    receives.push_back(channel.post_receive(
        std::vector{in_mr.scatter(std::span(in).subspan(i * kMessageSize, kMessageSize))}));
  }
  for (std::size_t i = 0; i < kInteropMessages; ++i) {
    channel.send(
        std::vector{out_mr.gather(std::span(out).subspan(i * kMessageSize, kMessageSize))});
  }
  for (auto& receive : receives) EXPECT_EQ(receive.wait().byte_length(), kMessageSize);
}

TEST(CmInterop, OurClientExchangesWithUcmatoseServer) {
  TemporaryDirectory dir("cm_interop");
  const auto port = port_for(1);
  ChildProcess server({"ucmatose", "-b", test_ip(), "-p", std::to_string(port), "-C",
                       std::to_string(kInteropMessages), "-S", std::to_string(kMessageSize)},
                      kInteropProcessTimeout, dir.path() / "ucmatose.out");
  {
    Channel channel = connect_when_listening(port, server);
    exchange_messages(channel);
  }  // destroyed: disconnects (ucmatose's server disconnects too, and waits for our reply)
  EXPECT_EQ(server.wait(), 0) << server.describe();
  EXPECT_NE(server.out().find("receiving data transfers"), std::string::npos) << server.describe();
}

TEST(CmInterop, UcmatoseClientExchangesWithOurListener) {
  TemporaryDirectory dir("cm_interop");
  ChannelListener listener(test_ip(), 0, interop_options());
  ChildProcess client({"ucmatose", "-s", test_ip(), "-p", std::to_string(listener.port()), "-C",
                       std::to_string(kInteropMessages), "-S", std::to_string(kMessageSize)},
                      kInteropProcessTimeout, dir.path() / "ucmatose.out");
  {
    Channel channel = listener.accept(20s);
    exchange_messages(channel);
  }  // destroyed: disconnects, as ucmatose's server does, and the client ends
  EXPECT_EQ(client.wait(), 0) << client.describe();
  EXPECT_NE(client.out().find("receiving data transfers"), std::string::npos) << client.describe();
}

TEST(CmInterop, RpingClientPingsOurListener) {
  TemporaryDirectory dir("cm_interop");
  ChannelListener listener(test_ip(), 0, interop_options());
  ChildProcess client(
      {"rping", "-c", "-v", "-V", "-a", test_ip(), "-p", std::to_string(listener.port()), "-C",
       std::to_string(kPings), "-S", std::to_string(kPingSize)},
      kInteropProcessTimeout, dir.path() / "rping.out");
  {
    Channel channel = listener.accept(20s);
    const auto& pd = channel.protection_domain();
    std::vector<std::byte> data(kPingSize);
    std::vector<std::byte> info(sizeof(RpingInfo));
    std::vector<std::byte> go_ahead(sizeof(RpingInfo));
    const auto data_mr = pd.register_local(data);
    const auto info_mr = pd.register_local(info);
    const auto go_mr = pd.register_local(go_ahead);
    auto advertised = [&] {
      channel.receive(std::vector{info_mr.scatter_all()});
      RpingInfo wire{};
      std::memcpy(&wire, info.data(), sizeof wire);
      return RemoteMemoryRegion(be64toh(wire.buf), be32toh(wire.size), be32toh(wire.rkey));
    };
    for (int ping = 0; ping < kPings; ++ping) {
      // rping's server: read the advertised ping, say go ahead, write it back into the second
      // advertised buffer, say go ahead.
      const RemoteMemoryRegion source = advertised();
      ASSERT_LE(source.length(), data.size());
      const auto ping_bytes = std::span(data).first(source.length());
      channel.read(std::vector{data_mr.scatter(ping_bytes)}, source);
      channel.send(std::vector{go_mr.gather_all()});
      const RemoteMemoryRegion target = advertised();
      const std::string text(reinterpret_cast<const char*>(data.data()));
      EXPECT_NE(text.find("rdma-ping-" + std::to_string(ping)), std::string::npos) << text;
      channel.write(std::vector{data_mr.gather(std::span(data).first(
                        std::min<std::size_t>(text.size() + 1, target.length())))},
                    target);
      channel.send(std::vector{go_mr.gather_all()});
    }
    EXPECT_EQ(client.wait(), 0) << client.describe();  // -V: it validated every echo
  }
  EXPECT_NE(client.out().find("ping data: rdma-ping-" + std::to_string(kPings - 1)),
            std::string::npos)
      << client.describe();
}

}  // namespace
}  // namespace ibv::test
