// SPDX-License-Identifier: MIT
// Helpers of the fault-injection device tests (fault_test.cpp): commands run with a bound
// (ip, rdma), a command that may block in the kernel (removing an rxe device that a process
// still holds), a private netdev + rxe device to break without touching the device every other
// test uses, and the verbs async events of a context.
#pragma once

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ibv/ibv.hpp"
#include "support/child_process.hpp"

namespace ibv::test {

/// How a bounded command ended: its exit code (nullopt if it was killed or never started) and
/// a description with its output, for failure messages.
struct CommandResult {
  std::optional<int> exit_code;
  std::string description;
  [[nodiscard]] bool ok() const { return exit_code == 0; }
};

/// Runs `argv` (looked up on PATH), killed after `timeout`.
inline CommandResult run_command(std::vector<std::string> argv,
                                 std::chrono::seconds timeout = std::chrono::seconds(20)) {
  const TemporaryDirectory dir("ibv_fault_cmd");
  ChildProcess child(std::move(argv), timeout, dir.path() / "out");
  const auto code = child.wait();
  return {code, child.describe()};
}

/// A command that may block uninterruptibly in the kernel (`rdma link delete` of an rxe device
/// waits there until every process has closed the device: rxe cannot disassociate user
/// contexts), so it must never be waited for without a bound, nor killed and then reaped:
/// running() and wait_for() only look, and a command still blocked when this object goes is
/// left to the system (logged), instead of hanging the test.
class BackgroundCommand {
 public:
  explicit BackgroundCommand(std::vector<std::string> argv) : argv_(std::move(argv)) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    std::vector<char*> args;
    for (auto& arg : argv_) args.push_back(arg.data());
    args.push_back(nullptr);
    if (posix_spawnp(&pid_, args.front(), &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  BackgroundCommand(const BackgroundCommand&) = delete;
  BackgroundCommand& operator=(const BackgroundCommand&) = delete;
  BackgroundCommand(BackgroundCommand&&) = delete;
  BackgroundCommand& operator=(BackgroundCommand&&) = delete;
  ~BackgroundCommand() {
    if (running()) {
      std::fprintf(stderr, "fault test: '%s' (pid %d) still running; left to the system\n",
                   command().c_str(), static_cast<int>(pid_));
    }
  }

  /// Whether it still runs (reaps it once it has ended).
  bool running() {
    if (pid_ <= 0 || status_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return !status_;
  }
  /// Waits up to `timeout` for the end; its exit code, or nullopt (still running, or killed).
  std::optional<int> wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (running() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (status_ && WIFEXITED(*status_)) return WEXITSTATUS(*status_);
    return std::nullopt;
  }
  /// The process's state letter from /proc (R, S, D: blocked uninterruptibly in the kernel),
  /// or '?' once it has ended.
  char kernel_state() {
    if (!running()) return '?';
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string text;
    std::getline(stat, text);
    const auto paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() ? text[paren + 2] : '?';
  }
  [[nodiscard]] std::string command() const {
    std::string text;
    for (const auto& arg : argv_) text += (text.empty() ? "" : " ") + arg;
    return text;
  }

 private:
  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// Why the link-fault tests can not run here, or nullopt when they can: they need root and the
/// Soft-RoCE driver (always the case in the testbed).
inline std::optional<std::string> link_faults_unavailable() {
  if (::geteuid() != 0) return "needs root to add and break a netdev and an rxe device";
  if (!std::filesystem::exists("/sys/module/rdma_rxe")) {
    return "the rdma_rxe module is not loaded (no 'rdma link add ... type rxe' here)";
  }
  if (!run_command({"rdma", "link", "help"}, std::chrono::seconds(10)).exit_code) {
    return "the 'rdma' tool (iproute2) does not run";
  }
  return std::nullopt;
}

/// A private dummy netdev with an IPv4 address and an rxe device on it, made for one test and
/// removed with it (also when the test fails): faults are injected here, never on the device
/// the other tests use. Objects opened on device() must be closed before this goes (rxe waits
/// for them before it can be removed).
class FaultLink {
 public:
  FaultLink(std::string netdev, std::string device, std::string address)
      : netdev_(std::move(netdev)), device_(std::move(device)), address_(std::move(address)) {
    remove();  // leftovers of an earlier run that crashed
    for (const auto& command : std::vector<std::vector<std::string>>{
             {"ip", "link", "add", netdev_, "type", "dummy"},
             {"ip", "addr", "add", address_ + "/24", "dev", netdev_},
             {"ip", "link", "set", netdev_, "up"},
             {"rdma", "link", "add", device_, "type", "rxe", "netdev", netdev_}}) {
      const auto result = run_command(command);
      if (!result.ok()) {
        remove();
        throw std::runtime_error("FaultLink set-up failed:\n" + result.description);
      }
    }
  }
  FaultLink(const FaultLink&) = delete;
  FaultLink& operator=(const FaultLink&) = delete;
  FaultLink(FaultLink&&) = delete;
  FaultLink& operator=(FaultLink&&) = delete;
  ~FaultLink() {
    try {
      remove();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "fault test: could not remove %s: %s\n", device_.c_str(), error.what());
    }
  }

  [[nodiscard]] const std::string& netdev() const { return netdev_; }
  [[nodiscard]] const std::string& device() const { return device_; }
  [[nodiscard]] const std::string& address() const { return address_; }
  [[nodiscard]] bool device_exists() const {
    return std::filesystem::exists("/sys/class/infiniband/" + device_);
  }

  /// Waits (bounded) until port 1 of device() is ACTIVE and its GID table holds address() as
  /// an IPv4-mapped RoCE v2 entry; returns that entry's index, nullopt on timeout.
  std::optional<std::uint32_t> wait_until_usable(const Context& context,
                                                 std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (context.query_port().state == PortState::active) {
        for (const auto& entry : context.gid_table()) {
          if (entry.type == GidType::roce_v2 && entry.gid.ipv4() == address_) return entry.index;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }

 private:
  /// Removes the rxe device, then the netdev, each if it exists; bounded, never blocking the
  /// test for good (see BackgroundCommand).
  void remove() const {
    if (device_exists()) {
      BackgroundCommand remove_device({"rdma", "link", "delete", device_});
      if (remove_device.wait_for(std::chrono::seconds(30)) != 0) {
        std::fprintf(stderr, "fault test: could not remove %s\n", device_.c_str());
      }
    }
    if (std::filesystem::exists("/sys/class/net/" + netdev_)) {
      const auto result = run_command({"ip", "link", "del", netdev_});
      if (!result.ok()) std::fprintf(stderr, "fault test: %s\n", result.description.c_str());
    }
  }

  std::string netdev_;
  std::string device_;
  std::string address_;
};

/// The async events the device has reported on `context` so far (IBV_EVENT_PORT_ERR, ...), by
/// name, each acknowledged (an event read and not acknowledged would make destroying its QP or
/// CQ wait forever). Reads without blocking.
inline std::vector<std::string> drain_async_events(const Context& context) {
  ibv_context* native = context.native();
  const int flags = ::fcntl(native->async_fd, F_GETFL);
  ::fcntl(native->async_fd, F_SETFL, flags | O_NONBLOCK);
  std::vector<std::string> names;
  ibv_async_event event{};
  while (::ibv_get_async_event(native, &event) == 0) {
    names.emplace_back(::ibv_event_type_str(event.event_type));
    ::ibv_ack_async_event(&event);
  }
  return names;
}

}  // namespace ibv::test
