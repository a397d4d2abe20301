// SPDX-License-Identifier: MIT
// Loopback TCP helpers of the exchanger's unit tests (exchanger_test.cpp,
// exchanger_crowd_test.cpp): the tests' own raw clients and servers, hand-made protocol messages,
// and loopback networks of free ports.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/net/exchange_message.hpp"
#include "ibv/net/exchanger.hpp"
#include "ibv/net/network_config.hpp"

namespace ibv_test::loopback {

using namespace std::chrono_literals;
using ibv::net::ExchangerOptions;
using ibv::net::MessageHeader;
using ibv::net::MessageKind;
using ibv::net::NetworkConfig;
using ibv::net::NetworkConfigBuilder;
using Bytes = std::vector<std::byte>;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The deadline of the exchanges in these tests: short, and far above what loopback needs.
inline constexpr milliseconds kTimeout = 3000ms;
// A failure that must come promptly, not at the deadline, comes within this.
inline constexpr milliseconds kPrompt = 1500ms;

// --- sockets of the tests' own raw clients and servers -----------------------------------------

// Owns one socket.
class Socket {
 public:
  explicit Socket(int fd = -1) noexcept : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    if (this != &other) {
      close();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Socket() { close(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

inline sockaddr_in ipv4(std::uint32_t host_order_address, std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(host_order_address);
  address.sin_port = htons(port);
  return address;
}

inline const sockaddr* as_sockaddr(const sockaddr_in& address) {
  return reinterpret_cast<const sockaddr*>(&address);
}

// True when `port` can be bound on the IPv4 wildcard address, so nobody listens on it.
inline bool port_is_free(std::uint16_t port) {
  const Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int on = 1;
  static_cast<void>(::setsockopt(socket.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on));
  const sockaddr_in address = ipv4(INADDR_ANY, port);
  return ::bind(socket.get(), as_sockaddr(address), sizeof address) == 0;
}

// `count` free ports: below Linux's ephemeral range (from 32768), so that no outgoing connection
// of this machine holds one as its local port; from an offset derived from the process id, so
// that test processes running in parallel start far apart; each checked by binding it.
inline std::vector<std::uint16_t> free_ports(std::size_t count) {
  static std::atomic<unsigned> next{static_cast<unsigned>(::getpid()) * 61U};
  std::vector<std::uint16_t> ports;
  while (ports.size() < count) {
    const auto port = static_cast<std::uint16_t>(20000U + next.fetch_add(1) % 12000U);
    if (port_is_free(port)) ports.push_back(port);
  }
  return ports;
}

// A raw TCP client connected to 127.0.0.1:port (blocking).
inline Socket connect_to(std::uint16_t port) {
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in address = ipv4(INADDR_LOOPBACK, port);
  EXPECT_EQ(::connect(socket.get(), as_sockaddr(address), sizeof address), 0)
      << "connect to port " << port << ": " << std::strerror(errno);
  return socket;
}

// A raw TCP server listening on 127.0.0.1:port.
inline Socket listen_on(std::uint16_t port) {
  Socket socket(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int on = 1;
  static_cast<void>(::setsockopt(socket.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on));
  const sockaddr_in address = ipv4(INADDR_LOOPBACK, port);
  EXPECT_EQ(::bind(socket.get(), as_sockaddr(address), sizeof address), 0) << std::strerror(errno);
  EXPECT_EQ(::listen(socket.get(), 16), 0);
  return socket;
}

// The next connection of `server`, waiting at most 5 s.
inline Socket accept_from(const Socket& server) {
  pollfd entry{.fd = server.get(), .events = POLLIN, .revents = 0};
  if (::poll(&entry, 1, 5000) != 1) {
    ADD_FAILURE() << "nobody connected within 5 s";
    return Socket();
  }
  return Socket(::accept(server.get(), nullptr, nullptr));
}

inline void send_all(const Socket& socket, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(socket.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent <= 0) {
      ADD_FAILURE() << "send: " << std::strerror(errno);
      return;
    }
    bytes = bytes.subspan(static_cast<std::size_t>(sent));
  }
}

inline void send_text(const Socket& socket, std::string_view text) {
  send_all(socket, std::as_bytes(std::span(text.data(), text.size())));
}

// Exactly `count` bytes from `socket`, waiting at most 5 s; fewer if it closes.
inline Bytes receive_exactly(const Socket& socket, std::size_t count) {
  Bytes bytes(count);
  std::size_t got = 0;
  while (got < count) {
    pollfd entry{.fd = socket.get(), .events = POLLIN, .revents = 0};
    if (::poll(&entry, 1, 5000) != 1) break;
    const ssize_t n = ::recv(socket.get(), bytes.data() + got, count - got, 0);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

// How many connections wait in the accept queue of the TCP listener on `port` (from
// /proc/net/tcp: for a listening socket, rx_queue is the accept-queue length); 0 when there
// is no such listener.
inline std::size_t pending_connections(std::uint16_t port) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  std::getline(table, line);  // the column names
  while (std::getline(table, line)) {
    // "  0: 0100007F:4E20 00000000:0000 0A 00000000:00000001 ..."
    std::istringstream fields(line);
    std::string slot;
    std::string local;
    std::string remote;
    std::string state;
    std::string queues;
    fields >> slot >> local >> remote >> state >> queues;
    const auto colon = local.find(':');
    if (colon == std::string::npos || state != "0A") continue;  // 0A: TCP_LISTEN
    if (std::stoul(local.substr(colon + 1), nullptr, 16) != port) continue;
    return std::stoul(queues.substr(queues.find(':') + 1), nullptr, 16);
  }
  return 0;
}

// True when the other end closes the connection within 5 s (anything it sends is skipped), or
// when there is no connection (an empty Socket).
inline bool closed_by_peer(const Socket& socket) {
  if (socket.get() < 0) return true;
  const auto deadline = Clock::now() + 5s;
  std::array<std::byte, 4096> sink{};
  while (Clock::now() < deadline) {
    pollfd entry{.fd = socket.get(), .events = POLLIN, .revents = 0};
    if (::poll(&entry, 1, 100) != 1) continue;
    const ssize_t n = ::recv(socket.get(), sink.data(), sink.size(), 0);
    if (n <= 0) return true;
  }
  return false;
}

inline Bytes header(const MessageHeader& fields) {
  const auto bytes = fields.encode();
  return {bytes.begin(), bytes.end()};
}

inline Bytes hello(std::uint32_t sender, std::uint32_t world) {
  return header({.kind = MessageKind::hello, .sender_rank = sender, .world_size = world});
}

inline Bytes data(std::uint32_t sender, std::uint32_t world, std::uint32_t sequence,
                  std::uint32_t length) {
  return header({.kind = MessageKind::data,
                 .sender_rank = sender,
                 .world_size = world,
                 .sequence = sequence,
                 .payload_length = length});
}

inline Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes all;
  for (const Bytes& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

// --- networks and ranks ------------------------------------------------------------------------

inline NetworkConfig loopback_network(std::size_t world) {
  const std::vector<std::uint16_t> ports = free_ports(world);
  NetworkConfigBuilder builder;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    builder.add_host({.rank = rank,
                      .hostname = "127.0.0.1",
                      .port = ports[rank],
                      .ibdev = "rxe0",
                      .comment = ""});
  }
  return builder.build();
}

inline ExchangerOptions test_options() {
  return {.timeout = kTimeout,
          .retry_interval = 20ms,
          .max_message_size = std::size_t{1} << 20,
          .listen_address = "127.0.0.1"};
}

// How many file descriptors this process has open.
inline std::size_t open_descriptors() {
  return static_cast<std::size_t>(std::distance(
      std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator()));
}

}  // namespace ibv_test::loopback
