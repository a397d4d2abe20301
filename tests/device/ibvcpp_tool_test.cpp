// SPDX-License-Identifier: MIT
// The ibvcpp command-line tool (tools/ibvcpp) on a real device: its errors and exit statuses
// (unknown device 3, no server 4, TCP port in use 4, a size over the limit 2, settings that
// differ 2 on both sides), `devices`, and a short real run of each of the six perf tests,
// server and client on the test device over 127.0.0.1, with the JSON report checked, a run
// with -R (queue pairs connected by rdma_cm at IBV_TEST_IP), runs over UD (-c UD: send bw
// and lat, with a post list too; a size above the path MTU refused on both sides), runs with a
// post list (-l) and CQ moderation (-Q), runs of each post interface (--post-interface, chosen
// per side), and runs started by Open MPI's mpirun as a launched pair (the ranks meet through
// PMIx, or the rendezvous in a build without PMIx; only rank 0 reports).
//
// The binary is looked up next to this test binary (build/<preset>/bin); the tests skip when it
// was not built (IBV_BUILD_TOOLS=OFF). Every process runs under a hard timeout.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "device_fixture.hpp"
#include "ibv/net/pmix_bootstrap.hpp"
#include "support/child_process.hpp"
#include "support/text.hpp"

namespace ibv::test {
namespace {

using ibv_test::contains;

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kToolProcessTimeout = 45s;  // hard limit for each ibvcpp process
constexpr auto kToolListenTimeout = 15s;   // for a server to set up and listen
constexpr auto kMpirunTimeout = 90s;       // mpirun with its ranks (launch costs seconds here)

/// An ibvcpp process, stdout and stderr to their own files in `logs`, under kToolProcessTimeout.
class Tool : public ChildProcess {
 public:
  Tool(std::vector<std::string> argv, const fs::path& logs, const std::string& name)
      : ChildProcess(std::move(argv), kToolProcessTimeout, logs / (name + ".out"),
                     logs / (name + ".err")) {}
};

class IbvcppTool : public ::testing::Test {
 protected:
  void SetUp() override {
    tool_ = fs::read_symlink("/proc/self/exe").parent_path() / "ibvcpp";
    if (::access(tool_.c_str(), X_OK) != 0) {
      GTEST_SKIP() << tool_ << " not found: the tool is not built (IBV_BUILD_TOOLS=OFF?)";
    }
    const char* device = std::getenv("IBV_TEST_DEVICE");
    device_ = device != nullptr && *device != '\0' ? device : open_test_device().name();
    gid_index_ = std::to_string(test_gid_index(open_device(device_)));
  }

  /// ibvcpp perf `test` (e.g. {"write", "bw"}) on the test device and TCP `port`, with `extra`
  /// options, as client of 127.0.0.1 when `client`.
  [[nodiscard]] std::vector<std::string> perf(const std::vector<std::string>& test,
                                              std::uint16_t port,
                                              const std::vector<std::string>& extra,
                                              bool client) const {
    std::vector<std::string> argv{tool_.string(), "perf"};
    argv.insert(argv.end(), test.begin(), test.end());
    for (const auto& arg : {std::string("-d"), device_, std::string("-x"), gid_index_,
                            std::string("-p"), std::to_string(port)}) {
      argv.push_back(arg);
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    if (client) argv.emplace_back("127.0.0.1");
    return argv;
  }

  /// Starts a server and waits until it listens (failing the test if it does not).
  std::unique_ptr<Tool> start_server(std::vector<std::string> argv, std::uint16_t port) {
    EXPECT_FALSE(is_listening(port)) << "TCP port " << port << " is already in use";
    auto server = std::make_unique<Tool>(std::move(argv), logs_.path(), "server");
    const auto deadline = Clock::now() + kToolListenTimeout;
    while (!is_listening(port) && server->running() && Clock::now() < deadline) {
      std::this_thread::sleep_for(10ms);
    }
    EXPECT_TRUE(is_listening(port)) << "the server does not listen on TCP port " << port << "\n"
                                    << server->describe();
    return server;
  }

  /// Runs a server (`server_argv`, on TCP `port`) and then a client (`client_argv`) to their
  /// ends, and parses the JSON document each printed: docs[0] the client's, docs[1] the
  /// server's. A non-zero exit or a document that does not parse fails the test; `both` gets
  /// both sides' logs, for the caller's messages.
  void run_json_pair(const std::vector<std::string>& server_argv, std::uint16_t port,
                     const std::vector<std::string>& client_argv,
                     std::array<nlohmann::json, 2>& docs, std::string& both) {
    auto server = start_server(server_argv, port);
    Tool client(client_argv, logs_.path(), "client");
    const auto client_status = client.wait();
    const auto server_status = server->wait();
    both = "---- server ----\n" + server->describe() + "---- client ----\n" + client.describe();
    ASSERT_EQ(client_status, 0) << both;
    ASSERT_EQ(server_status, 0) << both;
    ASSERT_NO_THROW(docs[0] = nlohmann::json::parse(client.out())) << both;
    ASSERT_NO_THROW(docs[1] = nlohmann::json::parse(server->out())) << both;
  }

  fs::path tool_;
  std::string device_;
  std::string gid_index_;
  TemporaryDirectory logs_{"ibvcpp_tool"};
};

// --- errors and exit statuses ----------------------------------------------------------------

TEST_F(IbvcppTool, UnknownDeviceExits3NamingIt) {
  Tool tool({tool_.string(), "perf", "write", "bw", "-d", "no_such_rdma_device"}, logs_.path(),
            "client");
  EXPECT_EQ(tool.wait(), 3) << tool.describe();
  EXPECT_TRUE(contains(tool.err(), "no_such_rdma_device")) << tool.describe();
  EXPECT_TRUE(contains(tool.err(), device_)) << "the message lists the devices that exist\n"
                                             << tool.describe();
}

TEST_F(IbvcppTool, UnknownGidIndexExits3) {
  Tool tool({tool_.string(), "perf", "write", "bw", "-d", device_, "-x", "999"}, logs_.path(),
            "client");
  EXPECT_EQ(tool.wait(), 3) << tool.describe();
  EXPECT_TRUE(contains(tool.err(), "GID index 999")) << tool.describe();
}

TEST_F(IbvcppTool, ClientWithoutServerExits4WithinSeconds) {
  constexpr std::uint16_t kPort = 18641;
  ASSERT_FALSE(is_listening(kPort));
  Tool client(perf({"write", "bw"}, kPort, {}, true), logs_.path(), "client");
  EXPECT_EQ(client.wait(), 4) << client.describe();
  EXPECT_LT(client.elapsed().count(), 15.0) << client.describe();
  EXPECT_TRUE(contains(client.err(), "no ibvcpp server at 127.0.0.1:18641")) << client.describe();
}

TEST_F(IbvcppTool, ServerOnAPortInUseExits4) {
  constexpr std::uint16_t kPort = 18642;
  // Hold the port with a listening socket of our own.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(holder, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(kPort);
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(holder, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(holder, 1), 0);
  Tool server(perf({"write", "bw"}, kPort, {}, false), logs_.path(), "server");
  EXPECT_EQ(server.wait(), 4) << server.describe();
  EXPECT_TRUE(contains(server.err(), "TCP port 18642 is in use")) << server.describe();
  ::close(holder);
}

TEST_F(IbvcppTool, SizeOverTheLimitExits2) {
  Tool tool(perf({"write", "bw"}, 18643, {"-s", "8388609"}, true), logs_.path(), "client");
  EXPECT_EQ(tool.wait(), 2) << tool.describe();
  EXPECT_TRUE(contains(tool.err(), "8388608")) << tool.describe();
  Tool list(perf({"read", "lat"}, 18643, {"--sizes", "2,16777216"}, false), logs_.path(), "list");
  EXPECT_EQ(list.wait(), 2) << list.describe();
}

TEST_F(IbvcppTool, SettingsMismatchExits2OnBothSides) {
  constexpr std::uint16_t kPort = 18644;
  auto server = start_server(perf({"write", "bw"}, kPort, {"-n", "100", "-s", "64"}, false), kPort);
  Tool client(perf({"write", "bw"}, kPort, {"-n", "200", "-s", "64"}, true), logs_.path(),
              "client");
  const auto client_status = client.wait();
  const auto server_status = server->wait();
  const std::string both = server->describe() + client.describe();
  EXPECT_EQ(client_status, 2) << both;
  EXPECT_EQ(server_status, 2) << both;
  EXPECT_TRUE(contains(client.err(), "the iterations (-n; this client has 200, the server 100)"))
      << both;
  EXPECT_TRUE(contains(server->err(), "the iterations (-n; this server has 100, the client 200)"))
      << both;
}

TEST_F(IbvcppTool, DevicesListsTheTestDevice) {
  Tool plain({tool_.string(), "devices"}, logs_.path(), "plain");
  EXPECT_EQ(plain.wait(), 0) << plain.describe();
  EXPECT_TRUE(contains(plain.out(), device_)) << plain.describe();

  Tool verbose({tool_.string(), "devices", "-v", "--json"}, logs_.path(), "verbose");
  ASSERT_EQ(verbose.wait(), 0) << verbose.describe();
  const auto doc = nlohmann::json::parse(verbose.out());
  bool found = false;
  for (const auto& device : doc.at("devices")) {
    if (device.at("name") != device_) continue;
    found = true;
    const auto& port = device.at("ports").at(0);
    EXPECT_EQ(port.at("state"), "ACTIVE");
    bool has_gid = false;
    for (const auto& gid : port.at("gids")) {
      if (std::to_string(gid.at("index").get<unsigned>()) == gid_index_) has_gid = true;
    }
    EXPECT_TRUE(has_gid) << "GID index " << gid_index_ << " missing: " << verbose.out();
  }
  EXPECT_TRUE(found) << verbose.out();
}

// --- a real run of each test -----------------------------------------------------------------

struct RunCase {
  std::string verb;
  std::string measure;
  std::vector<std::string> options;
  std::vector<std::uint64_t> sizes;
  std::uint16_t port;
};

class IbvcppToolRun : public IbvcppTool, public ::testing::WithParamInterface<RunCase> {};

void check_report(const nlohmann::json& doc, const RunCase& run, const std::string& role,
                  const std::string& device) {
  EXPECT_EQ(doc.at("tool"), "ibvcpp");
  EXPECT_EQ(doc.at("test"), run.verb + "_" + run.measure);
  EXPECT_EQ(doc.at("role"), role);
  EXPECT_EQ(doc.at("device"), device);
  EXPECT_GE(doc.at("mtu").get<int>(), 256);
  EXPECT_EQ(doc.at("qps"), 1);
  const bool datagrams = std::ranges::find(run.options, "UD") != run.options.end();
  EXPECT_EQ(doc.at("connection"), datagrams ? "UD" : "RC");
  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), run.sizes.size());
  for (std::size_t i = 0; i < run.sizes.size(); ++i) {
    const auto& r = results[i];
    EXPECT_EQ(r.at("bytes"), run.sizes[i]);
    EXPECT_EQ(r.at("iterations"), 50);
    if (run.measure == "bw") {
      const double average = r.at("bw_avg_MBps");
      const double peak = r.at("bw_peak_MBps");
      EXPECT_GT(average, 0.0);
      EXPECT_LT(average, 1e6);  // below a terabyte per second
      if (role == "client" || run.verb != "send") {
        EXPECT_GE(peak, average * 0.99);  // the send server computes no peak, as perftest's
      }
      EXPECT_GT(r.at("msg_rate_Mpps").get<double>(), 0.0);
      // The server of a UD test counts what never arrived (every receive was posted first).
      if (datagrams && role == "server") {
        EXPECT_EQ(r.at("datagrams_lost"), 0);
      } else {
        EXPECT_FALSE(r.contains("datagrams_lost"));
      }
    } else {
      const double t_min = r.at("t_min_us");
      const double typical = r.at("t_typical_us");
      const double t_max = r.at("t_max_us");
      EXPECT_GT(t_min, 0.0);
      EXPECT_LE(t_min, typical);
      EXPECT_LE(typical, t_max);
      EXPECT_LE(r.at("p99_us").get<double>(), r.at("p999_us").get<double>());
      EXPECT_LE(t_min, r.at("t_avg_us").get<double>());
      EXPECT_GE(r.at("t_stdev_us").get<double>(), 0.0);
      EXPECT_LT(t_max, 1e7);  // below 10 s
    }
  }
}

TEST_P(IbvcppToolRun, BothSidesReportJson) {
  const RunCase& run = GetParam();
  std::vector<std::string> options = run.options;
  options.insert(options.end(), {"-n", "50", "--json"});
  auto server = start_server(perf({run.verb, run.measure}, run.port, options, false), run.port);
  Tool client(perf({run.verb, run.measure}, run.port, options, true), logs_.path(), "client");
  const auto client_status = client.wait();
  const auto server_status = server->wait();
  const std::string both =
      "---- server ----\n" + server->describe() + "---- client ----\n" + client.describe();
  ASSERT_EQ(client_status, 0) << both;
  ASSERT_EQ(server_status, 0) << both;
  for (auto* side : {&client, server.get()}) {
    const std::string role = side == &client ? "client" : "server";
    nlohmann::json doc;
    ASSERT_NO_THROW(doc = nlohmann::json::parse(side->out())) << both;
    check_report(doc, run, role, device_);
    if (run.sizes.size() > 1) {
      EXPECT_TRUE(contains(side->err(), "bytes done (2 of 2)")) << both;  // progress
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ibvcpp, IbvcppToolRun,
    ::testing::Values(RunCase{"write", "bw", {"--sizes", "4096,65537"}, {4096, 65537}, 18651},
                      RunCase{"read", "bw", {"-s", "65536", "-t", "16"}, {65536}, 18652},
                      RunCase{"send", "bw", {"-s", "8192"}, {8192}, 18653},
                      RunCase{"write", "lat", {"--sizes", "2,4096"}, {2, 4096}, 18654},
                      RunCase{"send", "lat", {"-s", "64"}, {64}, 18655},
                      RunCase{"read", "lat", {"-s", "2"}, {2}, 18656},
                      RunCase{"send", "bw", {"-c", "UD", "--sizes", "2,1024"}, {2, 1024}, 18657},
                      RunCase{"send", "bw", {"-c", "UD", "-s", "256", "-l", "10"}, {256}, 18658},
                      RunCase{"send", "lat", {"-c", "UD", "--sizes", "2,1024"}, {2, 1024}, 18659}),
    [](const ::testing::TestParamInfo<RunCase>& test) {
      std::string name = test.param.verb + "_" + test.param.measure;
      if (std::ranges::find(test.param.options, "UD") != test.param.options.end()) name += "_ud";
      if (std::ranges::find(test.param.options, "-l") != test.param.options.end()) name += "_list";
      return name;
    });

TEST_F(IbvcppTool, DatagramAboveThePathMtuExits2OnBothSides) {
  // The testbed's path MTU is 1024 (an Ethernet MTU of 1500); 4097 is above every path MTU.
  const std::vector<std::string> options{"-c", "UD", "-s", "4097", "-n", "50"};
  auto server = start_server(perf({"send", "bw"}, 18660, options, false), 18660);
  Tool client(perf({"send", "bw"}, 18660, options, true), logs_.path(), "client");
  const auto client_status = client.wait();
  const auto server_status = server->wait();
  const std::string both =
      "---- server ----\n" + server->describe() + "---- client ----\n" + client.describe();
  EXPECT_EQ(client_status, 2) << both;
  EXPECT_EQ(server_status, 2) << both;
  EXPECT_TRUE(contains(client.err(), "size 4097 is above the path MTU")) << both;
  EXPECT_TRUE(contains(client.err(), "a UD message is one packet")) << both;
}

// --- -R: the queue pairs connected with rdma_cm ----------------------------------------------

TEST_F(IbvcppTool, RdmaCmConnectsTheQueuePairs) {
  const char* ip = std::getenv("IBV_TEST_IP");
  ASSERT_TRUE(ip != nullptr && *ip != '\0') << "IBV_TEST_IP is not set (the testbed sets it)";
  struct Case {
    std::vector<std::string> test;
    std::vector<std::string> options;
    int qps;
    std::uint16_t port;
  };
  // One run, with two queue pairs (each connected by its own rdma_cm request); the other tests'
  // code paths after the connection are the same with and without -R.
  for (const Case& run : {Case{{"write", "bw"}, {"-s", "4096", "-q", "2"}, 2, 18661}}) {
    std::vector<std::string> argv{tool_.string(), "perf"};
    argv.insert(argv.end(), run.test.begin(), run.test.end());
    argv.insert(argv.end(),
                {"-d", device_, "-p", std::to_string(run.port), "-R", "-n", "50", "--json"});
    argv.insert(argv.end(), run.options.begin(), run.options.end());
    std::vector<std::string> client_argv = argv;
    client_argv.emplace_back(ip);
    std::array<nlohmann::json, 2> docs;
    std::string both;
    run_json_pair(argv, run.port, client_argv, docs, both);
    if (HasFatalFailure()) return;
    for (const auto& doc : docs) {
      EXPECT_EQ(doc.at("test"), run.test[0] + "_" + run.test[1]) << both;
      EXPECT_EQ(doc.at("qps"), run.qps) << both;
      EXPECT_EQ(doc.at("device"), device_) << both;
      EXPECT_EQ(std::to_string(doc.at("gid_index").get<int>()), gid_index_) << both;
      ASSERT_EQ(doc.at("results").size(), 1U) << both;
      EXPECT_EQ(doc.at("results")[0].at("iterations"), 50 * run.qps) << both;  // all QPs
    }
  }
}

// --- -l and -Q: post lists and CQ moderation --------------------------------------------------

TEST_F(IbvcppTool, PostListAndCqModerationRun) {
  // Write: two QPs, lists of 16 with one request in 8 signaled (two completions per list).
  constexpr std::uint16_t kWritePort = 18671;
  const std::vector<std::string> write_options{"-s", "8",  "-n", "320", "-q",    "2",
                                               "-l", "16", "-Q", "8",   "--json"};
  std::array<nlohmann::json, 2> docs;
  std::string both;
  run_json_pair(perf({"write", "bw"}, kWritePort, write_options, false), kWritePort,
                perf({"write", "bw"}, kWritePort, write_options, true), docs, both);
  if (HasFatalFailure()) return;
  for (const auto& doc : docs) {
    EXPECT_EQ(doc.at("post_list"), 16) << both;
    EXPECT_EQ(doc.at("cq_moderation"), 8) << both;
    ASSERT_EQ(doc.at("results").size(), 1U) << both;
    const auto& result = doc.at("results")[0];
    EXPECT_EQ(result.at("iterations"), 640) << both;  // both QPs
    EXPECT_GT(result.at("msg_rate_Mpps").get<double>(), 0.0) << both;
    EXPECT_GE(result.at("bw_peak_MBps").get<double>(),
              result.at("bw_avg_MBps").get<double>() * 0.99)
        << both;
  }

  // Send, as text: lists of 8 and, without -Q, one signaled request per list (perftest's rule).
  constexpr std::uint16_t kSendPort = 18672;
  const std::vector<std::string> send_options{"-s", "64", "-n", "200", "-l", "8"};
  auto server = start_server(perf({"send", "bw"}, kSendPort, send_options, false), kSendPort);
  Tool sender(perf({"send", "bw"}, kSendPort, send_options, true), logs_.path(), "sender");
  const auto client_status = sender.wait();
  const auto server_status = server->wait();
  both = "---- server ----\n" + server->describe() + "---- client ----\n" + sender.describe();
  ASSERT_EQ(client_status, 0) << both;
  ASSERT_EQ(server_status, 0) << both;
  EXPECT_TRUE(contains(sender.out(), " Post List       : 8\n CQ Moderation   : 8\n")) << both;
  EXPECT_TRUE(contains(sender.out(), " 64         200")) << both;  // the row: size, iterations
}

// --- --post-interface: each side posts its own way ---------------------------------------------

TEST_F(IbvcppTool, PostInterfacesRunAndAreReportedPerSide) {
  struct Case {
    std::vector<std::string> test;
    std::vector<std::string> options;
    std::string client_interface;
    std::string server_interface;
    std::uint16_t port;
  };
  // A write latency run inline (single extended posts against a classic peer), and a send
  // bandwidth run with lists of 8 (extended batches) on both sides.
  for (const Case& run :
       {Case{{"write", "lat"}, {"-s", "2", "-I", "64"}, "extended", "classic", 18673},
        Case{{"send", "bw"}, {"-s", "64", "-l", "8"}, "extended", "extended", 18674}}) {
    std::vector<std::string> options = run.options;
    options.insert(options.end(), {"-n", "200", "--json"});
    std::vector<std::string> server_options = options;
    server_options.insert(server_options.end(), {"--post-interface", run.server_interface});
    options.push_back("--post-interface=" + run.client_interface);
    std::array<nlohmann::json, 2> docs;
    std::string both;
    run_json_pair(perf(run.test, run.port, server_options, false), run.port,
                  perf(run.test, run.port, options, true), docs, both);
    if (HasFatalFailure()) return;
    for (std::size_t side = 0; side < docs.size(); ++side) {
      const auto& doc = docs[side];
      EXPECT_EQ(doc.at("post_interface"), side == 0 ? run.client_interface : run.server_interface)
          << both;
      ASSERT_EQ(doc.at("results").size(), 1U) << both;
      EXPECT_EQ(doc.at("results")[0].at("iterations"), 200) << both;
    }
  }
}

// --- started by a launcher: mpirun -np 2 ibvcpp perf ... --------------------------------------

/// `mpirun -np <ranks> ibvcpp perf <test> -d <device> -p <port> <extra>`, as root, with no
/// server named: the ranks meet through PMIx, or, in a build without PMIx (the asan tree),
/// through the rendezvous (IBV_BOOTSTRAP=127.0.0.1:<port + 100>).
std::vector<std::string> mpirun_perf(const fs::path& tool, int ranks,
                                     const std::vector<std::string>& test,
                                     const std::string& device, std::uint16_t port,
                                     const std::vector<std::string>& extra) {
  std::vector<std::string> argv{"mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to",
                                "none"};
  if (!ibv::net::PmixBootstrap::built_in()) {
    argv.insert(argv.begin(), {"env", "IBV_BOOTSTRAP=127.0.0.1:" + std::to_string(port + 100)});
    argv.insert(argv.end(), {"-x", "IBV_BOOTSTRAP"});
  }
  argv.insert(argv.end(), {"-np", std::to_string(ranks), tool.string(), "perf"});
  argv.insert(argv.end(), test.begin(), test.end());
  argv.insert(argv.end(), {"-d", device, "-p", std::to_string(port)});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

TEST_F(IbvcppTool, MpirunRunsAPairThatReportsOnce) {
  constexpr std::uint16_t kPort = 18681;
  ChildProcess job(mpirun_perf(tool_, 2, {"write", "lat"}, device_, kPort,
                               {"-x", gid_index_, "-n", "50", "--sizes", "2,4096", "--json"}),
                   kMpirunTimeout, logs_.path() / "mpirun.out", logs_.path() / "mpirun.err");
  ASSERT_EQ(job.wait(), 0) << job.describe();
  // One JSON document: rank 0's (the server's); rank 1 prints nothing on stdout.
  nlohmann::json doc;
  ASSERT_NO_THROW(doc = nlohmann::json::parse(job.out())) << job.describe();
  check_report(doc, RunCase{"write", "lat", {}, {2, 4096}, kPort}, "server", device_);
  const std::string err = job.err();
  const auto progress = err.find("bytes done (2 of 2)");
  EXPECT_NE(progress, std::string::npos) << job.describe();
  EXPECT_EQ(progress, err.rfind("bytes done (2 of 2)")) << "progress from both ranks\n"
                                                        << job.describe();
}

TEST_F(IbvcppTool, MpirunPairConnectsWithRdmaCmAtAPublishedAddress) {
  constexpr std::uint16_t kPort = 18682;
  ChildProcess job(
      mpirun_perf(tool_, 2, {"write", "bw"}, device_, kPort, {"-R", "-n", "50", "-s", "4096"}),
      kMpirunTimeout, logs_.path() / "mpirun.out", logs_.path() / "mpirun.err");
  ASSERT_EQ(job.wait(), 0) << job.describe();
  EXPECT_TRUE(contains(job.out(), " rdma_cm QPs\t : ON\n")) << job.describe();
  // The report is printed once: one header, one row.
  const std::string out = job.out();
  EXPECT_EQ(out.find("RDMA_Write BW Test"), out.rfind("RDMA_Write BW Test")) << job.describe();
  EXPECT_TRUE(contains(out, " 4096       50 ")) << job.describe();
}

TEST_F(IbvcppTool, MpirunOfThreeRanksExits2NamingTheCount) {
  ChildProcess job(mpirun_perf(tool_, 3, {"write", "bw"}, device_, 18683, {"-n", "50"}),
                   kMpirunTimeout, logs_.path() / "mpirun.out", logs_.path() / "mpirun.err");
  EXPECT_EQ(job.wait(), 2) << job.describe();
  EXPECT_TRUE(contains(job.err(), "runs as 2 ranks")) << job.describe();
  EXPECT_TRUE(contains(job.err(), "this job has 3")) << job.describe();
}

}  // namespace
}  // namespace ibv::test
