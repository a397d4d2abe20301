// SPDX-License-Identifier: MIT
// Smoke tests of the multi-host harness itself: each rank's environment is coherent (its
// device, GID and IP belong together), and the ranks reach each other over TCP at the
// addresses MultiHost hands out.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "multi_host.hpp"

namespace ibv::test {
namespace {

using Clock = std::chrono::steady_clock;

/// How long the ranks wait for each other in one test. They start at slightly different times
/// (under TCG, loading eight processes can take seconds), so this is a bound, not a delay.
constexpr auto kRendezvous = std::chrono::seconds(20);

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

/// An owned socket file descriptor.
class Socket {
 public:
  Socket() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error(errno_text("socket"));
  }
  explicit Socket(int fd) : fd_(fd) {}
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  Socket(Socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Socket& operator=(Socket&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int fd() const noexcept { return fd_; }

 private:
  int fd_;
};

sockaddr_in address(const std::string& ip, std::uint16_t port) {
  sockaddr_in result{};
  result.sin_family = AF_INET;
  result.sin_port = htons(port);
  if (::inet_pton(AF_INET, ip.c_str(), &result.sin_addr) != 1) {
    throw std::invalid_argument("'" + ip + "' is not an IPv4 address");
  }
  return result;
}

/// Binds `socket` to ip:port; throws naming the address when the kernel refuses.
void bind_to(const Socket& socket, const std::string& ip, std::uint16_t port) {
  const sockaddr_in local = address(ip, port);
  if (::bind(socket.fd(), reinterpret_cast<const sockaddr*>(&local), sizeof local) != 0) {
    throw std::runtime_error(errno_text("bind to " + ip + ":" + std::to_string(port)));
  }
}

void set_io_timeout(const Socket& socket, std::chrono::seconds timeout) {
  const timeval tv{.tv_sec = static_cast<time_t>(timeout.count()), .tv_usec = 0};
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void send_rank(const Socket& socket, std::uint32_t rank) {
  const std::uint32_t wire = htonl(rank);
  if (::send(socket.fd(), &wire, sizeof wire, MSG_NOSIGNAL) != sizeof wire) {
    throw std::runtime_error(errno_text("send"));
  }
}

std::uint32_t receive_rank(const Socket& socket) {
  std::uint32_t wire = 0;
  if (::recv(socket.fd(), &wire, sizeof wire, MSG_WAITALL) != sizeof wire) {
    throw std::runtime_error(errno_text("receive a rank"));
  }
  return ntohl(wire);
}

/// Accepts connections on `listener` until every other rank has said hello (its rank, answered
/// with ours) or the deadline passes; returns the ranks that did, in arrival order.
std::vector<std::uint32_t> accept_peers(const Socket& listener, const MultiHost& world,
                                        Clock::time_point deadline) {
  std::vector<std::uint32_t> seen;
  while (seen.size() + 1 < world.world_size() && Clock::now() < deadline) {
    pollfd ready{.fd = listener.fd(), .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, 100) <= 0) continue;
    const Socket connection(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (connection.fd() < 0) continue;
    set_io_timeout(connection, std::chrono::seconds(5));
    try {
      const std::uint32_t peer = receive_rank(connection);
      send_rank(connection, world.rank());
      seen.push_back(peer);
    } catch (const std::runtime_error&) {
      continue;  // a peer that hangs up is reported as missing
    }
  }
  return seen;
}

/// Connects from our IP to rank `peer`'s port, retrying while it is not listening yet, says
/// hello and returns the rank the peer answers with.
std::uint32_t hello(const MultiHost& world, std::uint32_t peer, std::uint16_t offset,
                    Clock::time_point deadline) {
  const sockaddr_in remote = address(world.ip(peer), world.port(peer, offset));
  while (true) {
    const Socket socket;
    bind_to(socket, world.ip(world.rank()), 0);
    if (::connect(socket.fd(), reinterpret_cast<const sockaddr*>(&remote), sizeof remote) == 0) {
      set_io_timeout(socket, std::chrono::seconds(5));
      send_rank(socket, world.rank());
      return receive_rank(socket);
    }
    if (Clock::now() >= deadline) {
      throw std::runtime_error(errno_text("rank " + std::to_string(peer) + " at " + world.ip(peer) +
                                          ":" + std::to_string(world.port(peer, offset)) +
                                          " did not answer in time; last connect"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST(Smoke, EnvironmentIsCoherent) {
  const auto& world = multi_host();
  ASSERT_GE(world.world_size(), 1U);
  ASSERT_LT(world.rank(), world.world_size());
  EXPECT_EQ(world.device(), world.device(world.rank()))
      << "IBV_TEST_DEVICE differs from IBV_TEST_RANK" << world.rank() << "_DEVICE";
  const std::string own_ip = world.ip(world.rank());
  if (const char* testbed_ip = std::getenv("IBV_TEST_IP"); testbed_ip != nullptr) {
    EXPECT_EQ(std::string(testbed_ip), own_ip) << "IBV_TEST_IP (testbed/on-host) vs our rank's IP";
  }

  // The device opens and its port 1 is up.
  const Context context = world.open_device();
  EXPECT_EQ(context.name(), world.device());
  const PortAttributes port = context.query_port();
  EXPECT_EQ(port.state, PortState::active) << port.to_string();

  // The GID to use exists; on RoCE with a routable IP, it is that IP's IPv4-mapped GID (so the
  // RDMA traffic leaves from the same host the IP belongs to).
  const std::uint32_t gid_index = world.gid_index().value_or(context.default_gid_index());
  const GidEntry gid = context.query_gid(gid_index);
  if (port.link_layer == LinkLayer::ethernet && !own_ip.starts_with("127.")) {
    EXPECT_EQ(gid.gid.ipv4().value_or("(not IPv4-mapped)"), own_ip) << gid.to_string();
  }

  // Our IP is an address of this machine: a socket binds to it.
  const Socket socket;
  EXPECT_NO_THROW(bind_to(socket, own_ip, 0));

  // The configuration names every rank once, at distinct addresses, with its own device; two
  // port offsets never share a port.
  const auto first = world.config(0);
  const auto second = world.config(1);
  ASSERT_EQ(first.world_size(), world.world_size());
  std::set<std::pair<std::string, std::uint16_t>> addresses;
  for (std::uint32_t k = 0; k < world.world_size(); ++k) {
    const auto& host = first.host(k);
    EXPECT_EQ(host.hostname, world.ip(k));
    EXPECT_EQ(host.ibdev, world.device(k));
    EXPECT_GE(host.port, world.base_port());
    addresses.emplace(host.hostname, host.port);
    addresses.emplace(second.host(k).hostname, second.host(k).port);
  }
  EXPECT_EQ(addresses.size(), 2 * std::size_t{world.world_size()});
  EXPECT_EQ(first.host(world.rank()).ibdev, world.device());
}

TEST(Smoke, RanksReachEachOtherOverTcp) {
  auto& world = multi_host();
  const std::uint16_t offset = world.fresh_port_offset();
  const auto deadline = Clock::now() + kRendezvous;

  // Listen before dialling anyone, so that no two ranks wait for each other.
  const Socket listener;
  const int yes = 1;
  ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  ASSERT_NO_THROW(bind_to(listener, world.ip(world.rank()), world.port(world.rank(), offset)));
  ASSERT_EQ(::listen(listener.fd(), static_cast<int>(world.world_size())), 0)
      << errno_text("listen");
  auto accepted =
      std::async(std::launch::async, [&] { return accept_peers(listener, world, deadline); });

  for (std::uint32_t peer = 0; peer < world.world_size(); ++peer) {
    if (peer == world.rank()) continue;
    try {
      EXPECT_EQ(hello(world, peer, offset, deadline), peer) << "rank " << peer << " answered";
    } catch (const std::exception& error) {
      ADD_FAILURE() << error.what();
    }
  }

  std::vector<std::uint32_t> seen;
  ASSERT_NO_THROW(seen = accepted.get());
  const std::set<std::uint32_t> distinct(seen.begin(), seen.end());
  EXPECT_EQ(seen.size(), distinct.size()) << "a rank said hello twice";
  for (std::uint32_t peer = 0; peer < world.world_size(); ++peer) {
    if (peer == world.rank()) continue;
    EXPECT_TRUE(distinct.contains(peer)) << "rank " << peer << " never connected to us";
  }
  EXPECT_FALSE(distinct.contains(world.rank())) << "we connected to ourselves";
}

}  // namespace
}  // namespace ibv::test
