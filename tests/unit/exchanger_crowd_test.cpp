// SPDX-License-Identifier: MIT
// Tests ibv::net::Exchanger against 16 raw clients that reach its port at once, on loopback: 16
// that connect and hang up or stay silent do not hold up an exchange with the real peer; 16 that
// each send a different kind of garbage fail the exchange promptly with a protocol error that
// names a connection, close every one of them, and leak no descriptor. And 99 lower ranks that
// are all connected before any of them says hello (more than kMaxStrays at once) are all heard.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <latch>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/error.hpp"
#include "ibv/net/exchange_message.hpp"
#include "ibv/net/exchanger.hpp"
#include "ibv/net/network_config.hpp"
#include "loopback_exchange.hpp"

namespace {

using namespace std::chrono_literals;
using ibv::ErrorKind;
using ibv::net::Exchanger;
using ibv::net::NetworkConfig;
using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace ibv_test::loopback;

constexpr std::size_t kClients = 16;

// A client of 127.0.0.1:port; an empty Socket when the connection was refused or reset (the
// victim may have failed and closed its port while the crowd was still arriving: a connection
// still in the listen backlog when the port closes is reset, one arriving after is refused).
Socket connect_or_refused(std::uint16_t port) {
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in address = ipv4(INADDR_LOOPBACK, port);
  if (::connect(socket.get(), as_sockaddr(address), sizeof address) == 0) return socket;
  const int error = errno;
  EXPECT_TRUE(error == ECONNREFUSED || error == ECONNRESET)
      << "connect to port " << port << ": " << std::strerror(error);
  return Socket();
}

// Sends what it can: the victim may already have closed the connection, which is allowed here.
void send_best_effort(const Socket& socket, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(socket.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) return;
    bytes = bytes.subspan(static_cast<std::size_t>(sent));
  }
}

Bytes text(std::string_view characters) {
  const auto bytes = std::as_bytes(std::span(characters.data(), characters.size()));
  return {bytes.begin(), bytes.end()};
}

// One exchange of `exchanger` on a thread of its own: how it ended and how long it took.
struct Exchange {
  std::optional<std::vector<Bytes>> received;
  std::optional<ibv::Error> error;
  std::string other;
  milliseconds elapsed{};
};

// A jthread, so that a test that fails before joining it still joins it.
std::jthread start_exchange(Exchanger& exchanger, Bytes mine, Exchange& result) {
  return std::jthread([&exchanger, mine = std::move(mine), &result] {
    const auto start = Clock::now();
    try {
      result.received = exchanger.exchange_bytes(mine);
    } catch (const ibv::Error& error) {
      result.error = error;
    } catch (const std::exception& error) {
      result.other = error.what();
    }
    result.elapsed = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  });
}

// Runs attack(i, port) on kClients threads that start together, and waits for them.
template <typename Attack>
void crowd(std::uint16_t port, Attack attack) {
  std::latch start(static_cast<std::ptrdiff_t>(kClients));
  std::vector<std::jthread> clients;
  clients.reserve(kClients);
  for (std::size_t i = 0; i < kClients; ++i) {
    clients.emplace_back([&start, &attack, i, port] {
      start.arrive_and_wait();
      attack(i, port);
    });
  }
  for (std::jthread& client : clients) client.join();
}

TEST(ExchangerCrowd, NinetyNineLowerRanksConnectedBeforeAnyHelloAreAllHeard) {
  // The highest rank of 100: every other rank dials it. Here they are raw clients that all
  // connect, wait until it has accepted every connection, and only then say hello and send
  // their data, as hundreds of ranks starting at once on a busy machine may.
  constexpr std::uint32_t kWorld = 100;
  const NetworkConfig config = loopback_network(kWorld);
  const std::uint16_t port = config.host(kWorld - 1).port;
  Exchanger highest(config, kWorld - 1, test_options());
  Exchange result;
  std::jthread exchange = start_exchange(highest, text("from the top"), result);
  std::vector<Socket> lower;
  for (std::uint32_t rank = 0; rank + 1 < kWorld; ++rank) lower.push_back(connect_to(port));
  const auto accepted_by = Clock::now() + kPrompt;
  while (pending_connections(port) > 0 && Clock::now() < accepted_by) std::this_thread::yield();
  ASSERT_EQ(pending_connections(port), 0U) << "the exchanger did not accept the connections";
  for (std::uint32_t rank = 0; rank + 1 < kWorld; ++rank) {
    const Bytes payload = text("rank " + std::to_string(rank));
    send_all(lower[rank],
             concat({hello(rank, kWorld),
                     data(rank, kWorld, 0, static_cast<std::uint32_t>(payload.size())), payload}));
  }
  exchange.join();
  ASSERT_FALSE(result.error.has_value()) << result.error->what();
  ASSERT_TRUE(result.other.empty()) << result.other;
  ASSERT_TRUE(result.received.has_value());
  for (std::uint32_t rank = 0; rank + 1 < kWorld; ++rank) {
    EXPECT_EQ(result.received->at(rank), text("rank " + std::to_string(rank))) << rank;
  }
}

TEST(ExchangerCrowd, SixteenProbesAndSilentClientsAtOnceDoNotHoldUpTheExchange) {
  const std::size_t descriptors = open_descriptors();
  const NetworkConfig config = loopback_network(2);
  std::vector<Socket> silent(kClients);  // the odd clients stay connected without a word
  Exchange victim;
  {
    Exchanger rank1(config, 1, test_options());
    std::jthread exchange = start_exchange(rank1, text("from rank 1"), victim);
    crowd(config.host(1).port, [&silent](std::size_t i, std::uint16_t port) {
      Socket client = connect_to(port);
      if (i % 2 == 1) silent[i] = std::move(client);  // else: a port probe, closed at once
    });
    Exchanger rank0(config, 0, test_options());
    const std::vector<Bytes> at_rank0 = rank0.exchange_bytes(text("from rank 0"));
    exchange.join();
    EXPECT_EQ(at_rank0.at(1), text("from rank 1"));

    ASSERT_FALSE(victim.error.has_value()) << victim.error->what();
    ASSERT_TRUE(victim.other.empty()) << victim.other;
    ASSERT_TRUE(victim.received.has_value());
    EXPECT_EQ(victim.received->at(0), text("from rank 0"));
    EXPECT_LT(victim.elapsed, kPrompt) << "the crowd held the exchange up";
  }
  for (std::size_t i = 1; i < kClients; i += 2) {
    EXPECT_TRUE(closed_by_peer(silent[i])) << "silent client " << i << " was left open";
  }
  silent.clear();
  EXPECT_EQ(open_descriptors(), descriptors) << "descriptors leaked";
}

// Sixteen different kinds of garbage, for a victim of rank 2 in a world of 4.
Bytes garbage(std::size_t i) {
  constexpr std::uint32_t kWorld = 4;
  Bytes wrong_magic = hello(0, kWorld);
  wrong_magic[0] = std::byte{'X'};
  switch (i) {
    case 0: return text("GET / HTTP/1.1\r\nHost: node02\r\n\r\n");
    case 1: return wrong_magic;
    case 2: return hello(7, kWorld);       // an unknown rank
    case 3: return hello(3, kWorld);       // a higher rank, which we dial ourselves
    case 4: return hello(0, 5);            // another world size
    case 5: return data(0, kWorld, 0, 0);  // data before a hello
    case 6: return concat({hello(0, kWorld), data(0, kWorld, 0, 0xFFFFFFFF)});  // oversized
    case 7: return concat({hello(1, kWorld), data(1, kWorld, 9, 0)});           // another sequence
    case 8: return text("SSH-2.0-OpenSSH_9.2p1\r\n");
    case 9: return Bytes(64, std::byte{0});
    case 10: return Bytes(64, std::byte{0xFF});
    case 11: return text("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS client hello....");
    case 12: return hello(99, 1000);
    case 13: return concat({wrong_magic, wrong_magic});
    case 14: return text("IBVX but not really a header at all, just text");
    default: return hello(2, kWorld);  // claims to be the victim itself
  }
}

TEST(ExchangerCrowd, SixteenHostileClientsAtOnceFailTheExchangePromptlyAndAreAllClosed) {
  const std::size_t descriptors = open_descriptors();
  const NetworkConfig config = loopback_network(4);
  std::vector<Socket> clients(kClients);
  Exchange victim;
  std::optional<ibv::Error> next;
  {
    Exchanger rank2(config, 2, test_options());
    std::jthread exchange = start_exchange(rank2, text("from rank 2"), victim);
    crowd(config.host(2).port, [&clients](std::size_t i, std::uint16_t port) {
      clients[i] = connect_or_refused(port);
      if (clients[i].get() >= 0) send_best_effort(clients[i], garbage(i));
    });
    exchange.join();
    try {
      static_cast<void>(rank2.exchange_bytes(text("again")));
    } catch (const ibv::Error& error) {
      next = error;
    }
    // Every hostile connection is closed once the exchange failed, before the Exchanger goes.
    for (std::size_t i = 0; i < kClients; ++i) {
      EXPECT_TRUE(closed_by_peer(clients[i])) << "hostile client " << i << " was left open";
    }
  }

  EXPECT_TRUE(victim.other.empty()) << victim.other;
  ASSERT_TRUE(victim.error.has_value()) << "the exchange succeeded among 16 hostile clients";
  EXPECT_EQ(victim.error->kind(), ErrorKind::protocol) << victim.error->what();
  const std::string what = victim.error->what();
  EXPECT_NE(what.find("127.0.0.1:"), std::string::npos) << "names no connection: " << what;
  EXPECT_LT(victim.elapsed, kPrompt) << "not rejected promptly: " << what;
  ASSERT_TRUE(next.has_value()) << "the next exchange succeeded after the failure";
  EXPECT_EQ(next->kind(), ErrorKind::state) << next->what();
  clients.clear();
  EXPECT_EQ(open_descriptors(), descriptors) << "descriptors leaked";
}

}  // namespace
