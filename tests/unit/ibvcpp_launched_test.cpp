// SPDX-License-Identifier: MIT
// ibvcpp perf as a launched pair (tools/ibvcpp/launched.hpp), without a device: which processes
// run as a pair, the address message rank 0 publishes and its checks, and dialing the published
// addresses in turn. A real mpirun run is in tests/device/ibvcpp_tool_test.cpp.
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ibv/error.hpp"
#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/launched.hpp"
#include "support/text.hpp"

namespace {
namespace launched_test {

using ibv_test::contains;
using ibvcpp::ServerAddresses;
using namespace std::chrono_literals;

/// An environment of exactly `variables`.
ibv::net::EnvironmentLookup environment(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](std::string_view name) -> std::optional<std::string> {
    const auto found = variables.find(std::string(name));
    if (found == variables.end()) return std::nullopt;
    return found->second;
  };
}

ibvcpp::PerfOptions server_options() { return {}; }

ibvcpp::PerfOptions client_options() {
  ibvcpp::PerfOptions options;
  options.server = "node01";
  return options;
}

TEST(IbvcppLaunched, AddressesRoundTrip) {
  const ServerAddresses addresses{18515, {"10.0.0.1", "fd00::1", "127.0.0.1"}};
  const std::string text = ibvcpp::encode_server_addresses(addresses);
  EXPECT_EQ(text, "18515 10.0.0.1 fd00::1 127.0.0.1");
  EXPECT_EQ(ibvcpp::decode_server_addresses(text), addresses);
}

TEST(IbvcppLaunched, MalformedAddressesAreAConnectionErrorQuotedBriefly) {
  for (const std::string_view text :
       {"", "18515", "x 10.0.0.1", "0 10.0.0.1", "70000 10.0.0.1", "18515x 10.0.0.1"}) {
    try {
      (void)ibvcpp::decode_server_addresses(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const ibvcpp::ToolError& error) {
      EXPECT_EQ(error.code(), ibvcpp::ExitCode::connection) << text;
      EXPECT_TRUE(contains(error.what(), "no usable server address")) << error.what();
    }
  }
  try {
    (void)ibvcpp::decode_server_addresses(std::string(500, 'z'));
    ADD_FAILURE() << "accepted 500 bytes of z";
  } catch (const ibvcpp::ToolError& error) {
    EXPECT_LT(std::string_view(error.what()).size(), 200U) << error.what();
  }
}

TEST(IbvcppLaunched, WhichProcessesRunAsAPair) {
  using ibvcpp::runs_as_launched_pair;
  EXPECT_FALSE(runs_as_launched_pair(server_options(), environment({})));
  EXPECT_TRUE(
      runs_as_launched_pair(server_options(), environment({{"IBV_BOOTSTRAP", "10.0.0.1:18600"}})));
  EXPECT_TRUE(runs_as_launched_pair(
      server_options(),
      environment({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}})));
  EXPECT_TRUE(runs_as_launched_pair(
      server_options(), environment({{"PMIX_NAMESPACE", "job@1"}, {"PMIX_RANK", "0"}})));
  // A job of one process runs alone (srun -n 1 in each of two jobs).
  EXPECT_FALSE(runs_as_launched_pair(server_options(),
                                     environment({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})));
  // A named server wins over everything: the process is that server's client.
  EXPECT_FALSE(
      runs_as_launched_pair(client_options(), environment({{"IBV_BOOTSTRAP", "10.0.0.1:18600"},
                                                           {"OMPI_COMM_WORLD_RANK", "1"},
                                                           {"OMPI_COMM_WORLD_SIZE", "2"}})));
  EXPECT_THROW(
      (void)runs_as_launched_pair(server_options(), environment({{"OMPI_COMM_WORLD_RANK", "1"}})),
      ibv::Error);
}

TEST(IbvcppLaunched, DialFirstReachesAListeningAddress) {
  constexpr std::uint16_t kPort = 18691;
  ibvcpp::Listener listener = ibvcpp::Listener::open(kPort);
  std::string reached;
  const ibvcpp::Connection connection =
      ibvcpp::dial_first(ServerAddresses{kPort, {"127.0.0.1"}}, 2000ms, reached);
  EXPECT_EQ(reached, "127.0.0.1");
}

TEST(IbvcppLaunched, DialFirstNamesEveryAddressWhenNoneAnswers) {
  constexpr std::uint16_t kPort = 18692;  // nothing listens here
  std::string reached;
  try {
    (void)ibvcpp::dial_first(ServerAddresses{kPort, {"127.0.0.1", "127.0.0.2"}}, 200ms, reached);
    ADD_FAILURE() << "connected to a port nothing listens on";
  } catch (const ibvcpp::ToolError& error) {
    EXPECT_EQ(error.code(), ibvcpp::ExitCode::connection);
    EXPECT_TRUE(contains(error.what(), "2 address(es) and none answered")) << error.what();
    EXPECT_TRUE(contains(error.what(), "127.0.0.1:18692")) << error.what();
    EXPECT_TRUE(contains(error.what(), "127.0.0.2:18692")) << error.what();
  }
  EXPECT_TRUE(reached.empty());
}

}  // namespace launched_test
}  // namespace
