// SPDX-License-Identifier: MIT
// TCP for ibvcpp perf: listen, dial with retries, framed messages with deadlines.
#include "ibvcpp/tcp.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

namespace ibvcpp {
namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text(int error) { return std::strerror(error); }

using AddressList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

AddressList resolve(const char* host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host == nullptr ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host, service.c_str(), &hints, &list); rc != 0) {
    throw ToolError(ExitCode::connection, "cannot resolve '" +
                                              std::string(host != nullptr ? host : "*") +
                                              "': " + ::gai_strerror(rc));
  }
  return {list, &::freeaddrinfo};
}

/// Milliseconds left until `deadline` (at least 0), for poll().
int millis_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<std::int64_t>(0, left.count()));
}

/// Waits for `events` on `fd` until `deadline`; false on timeout.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, millis_left(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) return false;
  }
}

void set_no_delay(int fd) {
  const int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

/// One connection attempt to `address` within `deadline`; 0 or the errno of the failure.
int try_connect(const addrinfo& address, Clock::time_point deadline, FileDescriptor& out) {
  FileDescriptor fd(::socket(address.ai_family, address.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                             address.ai_protocol));
  if (!fd.valid()) return errno;
  if (::connect(fd.get(), address.ai_addr, address.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno;
    if (!wait_ready(fd.get(), POLLOUT, deadline)) return ETIMEDOUT;
    int error = 0;
    socklen_t length = sizeof error;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
    if (error != 0) return error;
  }
  set_no_delay(fd.get());
  out = std::move(fd);
  return 0;
}

}  // namespace

FileDescriptor::FileDescriptor(FileDescriptor&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

FileDescriptor::~FileDescriptor() { reset(); }

void FileDescriptor::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string Message::text() const {
  std::string text(payload.size(), '\0');
  std::memcpy(text.data(), payload.data(), payload.size());
  return text;
}

Connection Connection::dial(const std::string& host, std::uint16_t port,
                            std::chrono::milliseconds retry_for) {
  const auto deadline = Clock::now() + retry_for;
  const AddressList addresses = resolve(host.c_str(), port);
  int last_error = 0;
  int attempts = 0;
  while (true) {
    for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
      FileDescriptor fd;
      ++attempts;
      last_error = try_connect(*a, std::min(deadline, Clock::now() + std::chrono::seconds(2)), fd);
      if (last_error == 0) return {std::move(fd), "the server"};
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(retry_for).count();
  throw ToolError(ExitCode::connection,
                  "no ibvcpp server at " + host + ":" + std::to_string(port) + ": " +
                      errno_text(last_error) + " (" + std::to_string(attempts) + " attempts in " +
                      std::to_string(seconds) + " s; is the server running, with the same -p?)");
}

Connection::Connection(FileDescriptor fd, std::string peer_name)
    : fd_(std::move(fd)), peer_name_(std::move(peer_name)) {}

void Connection::fail(const std::string& message) const { throw ToolError(failure_code_, message); }

void Connection::send(MessageType type, std::string_view payload) {
  send(type, std::as_bytes(std::span(payload.data(), payload.size())));
}

void Connection::send(MessageType type, std::span<const std::byte> payload) {
  if (payload.size() + 1 > kMaxFrame) fail("internal: message too large");
  std::vector<std::byte> frame(5 + payload.size());
  const auto length = static_cast<std::uint32_t>(payload.size() + 1);
  frame[0] = static_cast<std::byte>(length >> 24U);
  frame[1] = static_cast<std::byte>(length >> 16U);
  frame[2] = static_cast<std::byte>(length >> 8U);
  frame[3] = static_cast<std::byte>(length);
  frame[4] = static_cast<std::byte>(type);
  std::copy(payload.begin(), payload.end(), frame.begin() + 5);
  const auto deadline = Clock::now() + io_timeout_;
  std::size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::send(fd_.get(), frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_ready(fd_.get(), POLLOUT, deadline)) {
        fail(peer_name_ + " has not read from the connection for " +
             std::to_string(io_timeout_.count() / 1000) + " s");
      }
      continue;
    }
    fail(peer_name_ + " closed the connection (" + errno_text(errno) + "; see its output)");
  }
}

void Connection::read_exactly(std::span<std::byte> out, Clock::time_point deadline,
                              std::chrono::milliseconds timeout, std::string_view what) {
  std::size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::recv(fd_.get(), out.data() + done, out.size() - done, 0);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n == 0) {
      fail(peer_name_ + " closed the connection while this side waited for " + std::string(what) +
           " (see its output)");
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      fail("the connection to " + peer_name_ + " failed: " + errno_text(errno));
    }
    if (!wait_ready(fd_.get(), POLLIN, deadline)) {
      fail("no word from " + peer_name_ + " for " + std::to_string(timeout.count() / 1000) +
           " s while waiting for " + std::string(what) + " (is it stuck? see --timeout)");
    }
  }
}

Message Connection::read_frame(std::chrono::milliseconds timeout, std::string_view what) {
  const auto deadline = Clock::now() + timeout;
  std::array<std::byte, 4> header{};
  read_exactly(header, deadline, timeout, what);
  std::uint32_t length = 0;
  for (const auto b : header) length = (length << 8U) | std::to_integer<std::uint32_t>(b);
  if (length == 0 || length > kMaxFrame) {
    fail(peer_name_ + " sent a frame of " + std::to_string(length) +
         " bytes: not ibvcpp's protocol (is another program on that port?)");
  }
  std::vector<std::byte> body(length);
  read_exactly(body, deadline, timeout, what);
  const auto type = static_cast<MessageType>(body.front());
  return {type, std::vector<std::byte>(body.begin() + 1, body.end())};
}

Message Connection::next(std::chrono::milliseconds timeout, std::string_view what) {
  while (true) {
    Message message = read_frame(timeout, what);
    if (message.type == MessageType::heartbeat) continue;  // the peer is alive: wait again
    return message;
  }
}

std::optional<Message> Connection::try_receive() {
  if (!wait_ready(fd_.get(), POLLIN, Clock::now())) return std::nullopt;
  Message message = read_frame(io_timeout_, "the rest of a message");
  if (message.type == MessageType::heartbeat) return std::nullopt;
  return message;
}

Message Connection::receive(std::chrono::milliseconds timeout) {
  return next(timeout, "a message");
}

Message Connection::expect(MessageType type, std::chrono::milliseconds timeout,
                           std::string_view what) {
  Message message = next(timeout, what);
  if (message.type != type) {
    fail(peer_name_ + " sent message '" + std::string(1, static_cast<char>(message.type)) +
         "' while this side waited for " + std::string(what) +
         " (do both sides run the same test and ibvcpp version?)");
  }
  return message;
}

Listener Listener::open(std::uint16_t port) {
  const AddressList addresses = resolve(nullptr, port);
  int first_error = 0;
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    FileDescriptor fd(
        ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    const int on = 1;
    if (fd.valid() && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
        ::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 1) == 0) {
      return Listener(std::move(fd), port);
    }
    if (first_error == 0) first_error = errno;
  }
  if (first_error == EADDRINUSE) {
    throw ToolError(ExitCode::connection,
                    "TCP port " + std::to_string(port) +
                        " is in use (another ibvcpp or perftest server?); choose another with -p");
  }
  throw ToolError(ExitCode::connection, "cannot listen on TCP port " + std::to_string(port) + ": " +
                                            errno_text(first_error));
}

Connection Listener::accept(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    if (!wait_ready(fd_.get(), POLLIN, deadline)) {
      throw ToolError(ExitCode::connection,
                      "no client connected to TCP port " + std::to_string(port_) + " within " +
                          std::to_string(timeout.count() / 1000) + " s (see --timeout)");
    }
    FileDescriptor client(::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (client.valid()) {
      set_no_delay(client.get());
      return {std::move(client), "the client"};
    }
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      throw ToolError(ExitCode::connection, "accept on TCP port " + std::to_string(port_) +
                                                " failed: " + errno_text(errno));
    }
  }
}

}  // namespace ibvcpp
