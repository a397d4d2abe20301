// SPDX-License-Identifier: MIT
// Helpers for device tests that run other programs (ibv_rc_pingpong, our rc_pingpong example,
// the ibvcpp tool): a child process under a hard timeout with its output in files, a temporary
// directory for those files, and whether a TCP port has a listener yet.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

extern char** environ;  // NOLINT(readability-redundant-declaration): for posix_spawn

namespace ibv::test {

/// A fresh directory under the system's temporary directory, removed with everything in it.
class TemporaryDirectory {
 public:
  /// `prefix` starts the directory's name (e.g. "ibvcpp_tool").
  explicit TemporaryDirectory(std::string_view prefix) {
    std::string pattern =
        (std::filesystem::temp_directory_path() / (std::string(prefix) + ".XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
    }
    path_ = pattern;
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  TemporaryDirectory(TemporaryDirectory&&) = delete;
  TemporaryDirectory& operator=(TemporaryDirectory&&) = delete;
  ~TemporaryDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

/// The whole content of a file ("" if it can not be read).
inline std::string read_file(const std::filesystem::path& path) {
  // rdbuf() into a stringstream: istreambuf_iterator trips GCC 12's -Wnull-dereference at -O2.
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Whether some socket listens on TCP `port` (IPv4 or IPv6), from /proc/net/tcp{,6}: a test
/// connection would be taken by a server for its client, so tests look instead of connecting.
inline bool is_listening(std::uint16_t port) {
  std::array<char, 8> suffix{};
  std::snprintf(suffix.data(), suffix.size(), ":%04X", static_cast<unsigned>(port));
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot;
      std::string local;
      std::string remote;
      std::string state;
      fields >> slot >> local >> remote >> state;
      if (local.ends_with(suffix.data()) && state == "0A") return true;  // 0A: LISTEN
    }
  }
  return false;
}

/// A child process started with posix_spawnp (argv[0] is looked up on PATH unless it has a
/// slash), stdin from /dev/null, stdout to `out` and stderr to `err` (or to `out` as well when
/// `err` is not given). wait() kills it once `timeout` has passed since its start; the
/// destructor kills and reaps it if it still runs.
class ChildProcess {
 public:
  using Clock = std::chrono::steady_clock;

  ChildProcess(std::vector<std::string> argv, std::chrono::seconds timeout,
               std::filesystem::path out, std::optional<std::filesystem::path> err = {})
      : argv_(std::move(argv)),
        timeout_(timeout),
        out_(std::move(out)),
        err_(std::move(err)),
        started_(Clock::now()) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (err_) {
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_->c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
    } else {
      posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    }
    std::vector<char*> args;
    args.reserve(argv_.size() + 1);
    for (auto& arg : argv_) args.push_back(arg.data());
    args.push_back(nullptr);
    const int rc = posix_spawnp(&pid_, args.front(), &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      pid_ = -1;
      spawn_error_ = "posix_spawnp failed: " + std::string(std::strerror(rc));
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&&) = delete;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess() {
    if (running()) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  /// Whether the process is still running (reaps it when it has ended).
  bool running() {
    if (pid_ <= 0 || status_) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
    return !status_;
  }

  /// Sends `signal` (SIGKILL by default) to the process if it still runs; wait() then reports
  /// how it ended.
  void kill(int signal = SIGKILL) {
    if (running()) ::kill(pid_, signal);
  }

  /// Waits until the process ends or its timeout (counted from its start) passes, then kills
  /// it. Returns its exit code; nullopt when it was killed, died of a signal or never started.
  std::optional<int> wait() {
    while (running()) {
      if (Clock::now() - started_ > timeout_) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        timed_out_ = true;
        pid_ = -1;
        return std::nullopt;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ended_ = Clock::now();
    if (status_ && WIFEXITED(*status_)) return WEXITSTATUS(*status_);
    return std::nullopt;
  }

  /// From the start until wait() saw the end.
  [[nodiscard]] std::chrono::duration<double> elapsed() const { return ended_ - started_; }
  /// What it wrote to stdout (and to stderr, when that was not given its own file).
  [[nodiscard]] std::string out() const { return read_file(out_); }
  /// What it wrote to stderr, when that has its own file ("" otherwise).
  [[nodiscard]] std::string err() const { return err_ ? read_file(*err_) : std::string(); }

  /// The command line, how it ended and its output, for failure messages.
  [[nodiscard]] std::string describe() const {
    std::string text = "$";
    for (const auto& arg : argv_) text += " " + arg;
    text += "\n";
    if (!spawn_error_.empty()) text += "  (" + spawn_error_ + ")\n";
    if (timed_out_) {
      text += "  (killed after " + std::to_string(timeout_.count()) + " s)\n";
    } else if (status_ && WIFEXITED(*status_)) {
      text += "  (exit status " + std::to_string(WEXITSTATUS(*status_)) + ")\n";
    } else if (status_ && WIFSIGNALED(*status_)) {
      text += "  (killed by signal " + std::to_string(WTERMSIG(*status_)) + ")\n";
    }
    if (!err_) return text + out();
    return text + "  stdout:\n" + out() + "  stderr:\n" + err();
  }

 private:
  std::vector<std::string> argv_;
  std::chrono::seconds timeout_;
  std::filesystem::path out_;
  std::optional<std::filesystem::path> err_;
  Clock::time_point started_;
  Clock::time_point ended_;
  pid_t pid_ = -1;
  std::optional<int> status_;  // waitpid status once the process has ended
  bool timed_out_ = false;
  std::string spawn_error_;
};

}  // namespace ibv::test
