// SPDX-License-Identifier: MIT
// The TCP connection of ibvcpp perf: a listener for the server, a dialler with bounded retries
// for the client, and framed messages (protocol.hpp) with deadlines. Failures are ToolErrors
// with the exit status of the phase they happen in.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/protocol.hpp"

namespace ibvcpp {

/// An owned file descriptor.
class FileDescriptor {
 public:
  FileDescriptor() noexcept = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept;
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  void reset() noexcept;

 private:
  int fd_ = -1;
};

/// One received frame.
struct Message {
  MessageType type = MessageType::ready;
  std::vector<std::byte> payload;

  [[nodiscard]] std::string text() const;
};

/// A connected TCP stream carrying frames.
class Connection {
 public:
  /// Connects to `host`:`port`, retrying refused or unreachable attempts for `retry_for`.
  /// Throws ToolError (connection) naming the address and the last error.
  [[nodiscard]] static Connection dial(const std::string& host, std::uint16_t port,
                                       std::chrono::milliseconds retry_for);

  Connection(FileDescriptor fd, std::string peer_name);

  /// Sends one frame (blocking, bounded by the I/O timeout).
  void send(MessageType type, std::span<const std::byte> payload = {});
  void send(MessageType type, std::string_view payload);
  /// Receives the next frame that is not a heartbeat; every heartbeat restarts the wait.
  /// Throws ToolError when `timeout` passes without a frame, or the peer closed the
  /// connection or sent garbage.
  [[nodiscard]] Message receive(std::chrono::milliseconds timeout);
  /// Without waiting: the next frame if one has begun to arrive (a heartbeat is read and
  /// gives nullopt), else nullopt. For loops that must keep polling a device meanwhile.
  [[nodiscard]] std::optional<Message> try_receive();
  /// receive(), and checks the type: `what` names the expected message in errors.
  [[nodiscard]] Message expect(MessageType type, std::chrono::milliseconds timeout,
                               std::string_view what);

  /// The exit status of failures from now on (connection during set-up, run_failed later).
  void set_failure_code(ExitCode code) noexcept { failure_code_ = code; }
  /// How long a send may block; also the timeout of set-up messages.
  void set_io_timeout(std::chrono::milliseconds timeout) noexcept { io_timeout_ = timeout; }

 private:
  [[noreturn]] void fail(const std::string& message) const;
  /// The next frame that is not a heartbeat.
  [[nodiscard]] Message next(std::chrono::milliseconds timeout, std::string_view what);
  /// The next frame, whatever it is.
  [[nodiscard]] Message read_frame(std::chrono::milliseconds timeout, std::string_view what);
  void read_exactly(std::span<std::byte> out, std::chrono::steady_clock::time_point deadline,
                    std::chrono::milliseconds timeout, std::string_view what);

  FileDescriptor fd_;
  std::string peer_name_;  // "the server" / "the client"
  ExitCode failure_code_ = ExitCode::connection;
  std::chrono::milliseconds io_timeout_{30'000};
};

/// A listening socket on every address of this host.
class Listener {
 public:
  /// Listens on `port`. Throws ToolError (connection) when the port is in use or not allowed.
  [[nodiscard]] static Listener open(std::uint16_t port);
  /// Waits at most `timeout` for one client and returns its connection.
  [[nodiscard]] Connection accept(std::chrono::milliseconds timeout);

 private:
  explicit Listener(FileDescriptor fd, std::uint16_t port) : fd_(std::move(fd)), port_(port) {}
  FileDescriptor fd_;
  std::uint16_t port_;
};

}  // namespace ibvcpp
