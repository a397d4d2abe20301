// Interoperability of examples/rc_pingpong with rdma-core's ibv_rc_pingpong (package
// ibverbs-utils): their server with our client, our server with their client, and ours on both
// sides, each pair on its own TCP port with the same options. Every process runs under a hard
// timeout; on failure both outputs are printed.
//
// The device and GID index come from IBV_TEST_DEVICE and IBV_TEST_GID_INDEX (the testbed sets
// both); our rc_pingpong is looked up next to this test binary (build/<preset>/bin).
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
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"

extern char** environ;  // NOLINT(readability-redundant-declaration): for posix_spawn

namespace ibv::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kProcessTimeout = 60s;   // hard limit for each server and client process
constexpr auto kListenTimeout = 15s;    // for the server to set up and listen
constexpr auto kConnectRetryTime = 5s;  // how long a refused client is started again
const char* const kIters = "200";
const char* const kSize = "4096";

/// A child process started with posix_spawn, stdout and stderr going to `log`. Killed and
/// reaped by the destructor if it is still running.
class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, fs::path log)
      : argv_(std::move(argv)), log_(std::move(log)), started_(Clock::now()) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    std::vector<char*> args;
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

  /// Waits until the process ends or its hard timeout (counted from its start) passes, then
  /// kills it. Returns its exit code; nullopt when it was killed or died of a signal.
  std::optional<int> wait() {
    while (running()) {
      if (Clock::now() - started_ > kProcessTimeout) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        timed_out_ = true;
        pid_ = -1;
        return std::nullopt;
      }
      std::this_thread::sleep_for(20ms);
    }
    if (status_ && WIFEXITED(*status_)) return WEXITSTATUS(*status_);
    return std::nullopt;
  }

  [[nodiscard]] std::string output() const {
    // rdbuf() into a stringstream: istreambuf_iterator trips GCC 12's -Wnull-dereference at -O2.
    std::ifstream in(log_);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  /// The command line, how it ended and its output, for failure messages.
  [[nodiscard]] std::string describe() const {
    std::string text = "$";
    for (const auto& arg : argv_) text += " " + arg;
    text += "\n";
    if (!spawn_error_.empty()) text += "  (" + spawn_error_ + ")\n";
    if (timed_out_) {
      text += "  (killed after " + std::to_string(kProcessTimeout.count()) + " s)\n";
    } else if (status_ && WIFEXITED(*status_)) {
      text += "  (exit status " + std::to_string(WEXITSTATUS(*status_)) + ")\n";
    } else if (status_ && WIFSIGNALED(*status_)) {
      text += "  (killed by signal " + std::to_string(WTERMSIG(*status_)) + ")\n";
    }
    return text + output();
  }

 private:
  std::vector<std::string> argv_;
  fs::path log_;
  Clock::time_point started_;
  pid_t pid_ = -1;
  std::optional<int> status_;  // waitpid status once the process has ended
  bool timed_out_ = false;
  std::string spawn_error_;
};

/// Whether some socket listens on TCP `port` (IPv4 or IPv6), from /proc/net/tcp{,6}: a test
/// connection would be taken by the server for its client.
bool is_listening(std::uint16_t port) {
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

std::optional<fs::path> find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

/// A fresh directory for the logs, removed with everything in it.
class TemporaryDirectory {
 public:
  TemporaryDirectory() {
    std::string pattern = (fs::temp_directory_path() / "rc_pingpong_interop.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
    }
    path_ = pattern;
  }
  TemporaryDirectory(const TemporaryDirectory&) = delete;
  TemporaryDirectory& operator=(const TemporaryDirectory&) = delete;
  ~TemporaryDirectory() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  [[nodiscard]] const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

class RcPingpongInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* device = std::getenv("IBV_TEST_DEVICE");
    ASSERT_TRUE(device != nullptr && *device != '\0')
        << "IBV_TEST_DEVICE is not set: run the device tests in the testbed "
           "(testbed/run -- ...), or set it to an RDMA device such as rxe0";
    device_ = device;
    const char* gid_index = std::getenv("IBV_TEST_GID_INDEX");
    gid_index_ = gid_index != nullptr && *gid_index != '\0'
                     ? std::string(gid_index)
                     : std::to_string(test_gid_index(open_device(device_)));

    ours_ = fs::read_symlink("/proc/self/exe").parent_path() / "rc_pingpong";
    ASSERT_EQ(::access(ours_.c_str(), X_OK), 0)
        << ours_ << " not found: build the examples (every examples/*.cpp becomes an executable "
        << "next to ibv_device_tests)";
    theirs_ = find_on_path("ibv_rc_pingpong");
  }

  /// ibv_rc_pingpong, or a test failure naming the package that has it.
  [[nodiscard]] fs::path theirs() const {
    if (!theirs_) {
      ADD_FAILURE() << "ibv_rc_pingpong is not on PATH: install the Debian package ibverbs-utils";
      return {};
    }
    return *theirs_;
  }

  /// The same options for both sides; the client adds the server's address.
  [[nodiscard]] std::vector<std::string> command(const fs::path& program, std::uint16_t port,
                                                 bool client) const {
    std::vector<std::string> argv{
        program.string(), "-d", device_, "-g", gid_index_, "-n",
        kIters,           "-s", kSize,   "-c", "-p",       std::to_string(port)};
    if (client) argv.emplace_back("127.0.0.1");
    return argv;
  }

  /// Runs `server` and then `client` on TCP `port` and checks that both finished the
  /// ping-pong: exit status 0, the "bytes in" result line, no "invalid data" from -c.
  void run_pingpong(const fs::path& server_program, const fs::path& client_program,
                    std::uint16_t port) {
    ASSERT_FALSE(is_listening(port)) << "TCP port " << port << " is already in use";
    const TemporaryDirectory logs;
    ChildProcess server(command(server_program, port, false), logs.path() / "server.log");

    const auto listen_deadline = Clock::now() + kListenTimeout;
    while (!is_listening(port) && server.running() && Clock::now() < listen_deadline) {
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(is_listening(port)) << "the server does not listen on TCP port " << port
                                    << " after " << kListenTimeout.count() << " s\n"
                                    << server.describe();

    // The client is started again while its connection is refused (a listener that is not
    // quite ready yet), for a few seconds.
    std::optional<ChildProcess> client;
    std::optional<int> client_status;
    const auto retry_deadline = Clock::now() + kConnectRetryTime;
    for (int attempt = 1;; ++attempt) {
      client.emplace(command(client_program, port, true),
                     logs.path() / ("client" + std::to_string(attempt) + ".log"));
      client_status = client->wait();
      const bool refused =
          client_status != 0 && client->output().find("ouldn't connect to") != std::string::npos;
      if (!refused || !server.running() || Clock::now() > retry_deadline) break;
      std::this_thread::sleep_for(200ms);
    }
    const std::optional<int> server_status = server.wait();

    const std::string both =
        "---- server ----\n" + server.describe() + "---- client ----\n" + client->describe();
    EXPECT_EQ(server_status, 0) << both;
    EXPECT_EQ(client_status, 0) << both;
    for (const std::string& output : {server.output(), client->output()}) {
      EXPECT_NE(output.find(" bytes in "), std::string::npos) << both;
      EXPECT_EQ(output.find("invalid data"), std::string::npos) << both;
    }
  }

  std::string device_;
  std::string gid_index_;
  fs::path ours_;
  std::optional<fs::path> theirs_;
};

TEST_F(RcPingpongInterop, TheirServerOurClient) {
  const fs::path theirs = this->theirs();
  if (theirs.empty()) return;
  run_pingpong(theirs, ours_, 18531);
}

TEST_F(RcPingpongInterop, OurServerTheirClient) {
  const fs::path theirs = this->theirs();
  if (theirs.empty()) return;
  run_pingpong(ours_, theirs, 18532);
}

TEST_F(RcPingpongInterop, OurServerOurClient) { run_pingpong(ours_, ours_, 18533); }

}  // namespace
}  // namespace ibv::test
