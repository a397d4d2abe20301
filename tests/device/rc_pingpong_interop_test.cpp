// SPDX-License-Identifier: MIT
// Interoperability of examples/rc_pingpong with rdma-core's ibv_rc_pingpong (package
// ibverbs-utils): their server with our client, our server with their client, and ours on both
// sides, each pair on its own TCP port with the same options. Every process runs under a hard
// timeout; on failure both outputs are printed.
//
// The device and GID index come from IBV_TEST_DEVICE and IBV_TEST_GID_INDEX (the testbed sets
// both); our rc_pingpong is looked up next to this test binary (build/<preset>/bin).
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "support/child_process.hpp"

namespace ibv::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kPingpongProcessTimeout = 60s;  // hard limit for each server and client process
constexpr auto kPingpongListenTimeout = 15s;   // for the server to set up and listen
constexpr auto kConnectRetryTime = 5s;         // how long a refused client is started again
const char* const kIters = "200";
const char* const kPingpongSize = "4096";

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
    std::vector<std::string> argv{program.string(), "-d", device_, "-g",
                                  gid_index_,       "-n", kIters,  "-s",
                                  kPingpongSize,    "-c", "-p",    std::to_string(port)};
    if (client) argv.emplace_back("127.0.0.1");
    return argv;
  }

  /// Runs `server` and then `client` on TCP `port` and checks that both finished the
  /// ping-pong: exit status 0, the "bytes in" result line, no "invalid data" from -c.
  void run_pingpong(const fs::path& server_program, const fs::path& client_program,
                    std::uint16_t port) {
    ASSERT_FALSE(is_listening(port)) << "TCP port " << port << " is already in use";
    const TemporaryDirectory logs("rc_pingpong_interop");
    ChildProcess server(command(server_program, port, false), kPingpongProcessTimeout,
                        logs.path() / "server.log");

    const auto listen_deadline = Clock::now() + kPingpongListenTimeout;
    while (!is_listening(port) && server.running() && Clock::now() < listen_deadline) {
      std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(is_listening(port)) << "the server does not listen on TCP port " << port
                                    << " after " << kPingpongListenTimeout.count() << " s\n"
                                    << server.describe();

    // The client is started again while its connection is refused (a listener that is not
    // quite ready yet), for a few seconds.
    std::optional<ChildProcess> client;
    std::optional<int> client_status;
    const auto retry_deadline = Clock::now() + kConnectRetryTime;
    for (int attempt = 1;; ++attempt) {
      client.emplace(command(client_program, port, true), kPingpongProcessTimeout,
                     logs.path() / ("client" + std::to_string(attempt) + ".log"));
      client_status = client->wait();
      const bool refused =
          client_status != 0 && client->out().find("ouldn't connect to") != std::string::npos;
      if (!refused || !server.running() || Clock::now() > retry_deadline) break;
      std::this_thread::sleep_for(200ms);
    }
    const std::optional<int> server_status = server.wait();

    const std::string both =
        "---- server ----\n" + server.describe() + "---- client ----\n" + client->describe();
    EXPECT_EQ(server_status, 0) << both;
    EXPECT_EQ(client_status, 0) << both;
    for (const std::string& output : {server.out(), client->out()}) {
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
