// SPDX-License-Identifier: MIT
// Tests NetworkConfig: loading the JSON form (any order, sorted by rank), the round trip, every
// validation error and its message, host() bounds, from_file() and NetworkConfigBuilder.
#include "ibv/net/network_config.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/error_matchers.hpp"

namespace {

using ibv::ErrorKind;
using ibv::net::HostConfig;
using ibv::net::NetworkConfig;
using ibv::net::NetworkConfigBuilder;
using ibv_test::throws_error;
using nlohmann::json;

constexpr auto kInvalid = ErrorKind::invalid_argument;

json host_json(std::uint32_t rank, std::string hostname = "", std::uint16_t port = 18515) {
  if (hostname.empty()) hostname = "node0" + std::to_string(rank);
  return {{"hostname", hostname}, {"port", port}, {"ibdev", "mlx5_0"}, {"rankid", rank}};
}

// A valid three-host network, for tests that then break one thing.
json three_hosts() { return {{"hosts", {host_json(0), host_json(1), host_json(2)}}}; }

NetworkConfig load(const json& document) { return NetworkConfig::from_json(document.dump()); }

HostConfig host(std::uint32_t rank, std::string hostname, std::uint16_t port = 18515) {
  return HostConfig{
      .rank = rank, .hostname = std::move(hostname), .port = port, .ibdev = "rxe0", .comment = ""};
}

// --- Loading ---------------------------------------------------------------------------------

TEST(NetworkConfigJson, LoadsTheDocumentedForm) {
  const auto config = NetworkConfig::from_json(R"({"hosts":[
      {"hostname":"node01","port":18515,"ibdev":"mlx5_0","rankid":0,"comment":"rack 3"},
      {"hostname":"node02","port":18516,"ibdev":"mlx5_1","rankid":1}]})");
  ASSERT_EQ(config.world_size(), 2U);
  EXPECT_EQ(
      config.host(0),
      (HostConfig{
          .rank = 0, .hostname = "node01", .port = 18515, .ibdev = "mlx5_0", .comment = "rack 3"}));
  EXPECT_EQ(config.host(1),
            (HostConfig{
                .rank = 1, .hostname = "node02", .port = 18516, .ibdev = "mlx5_1", .comment = ""}));
}

TEST(NetworkConfigJson, SortsEntriesGivenInAnyOrderByRank) {
  const auto config = load({{"hosts", {host_json(2), host_json(0), host_json(3), host_json(1)}}});
  ASSERT_EQ(config.world_size(), 4U);
  ASSERT_EQ(config.hosts().size(), 4U);
  for (std::uint32_t rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(config.hosts()[rank].rank, rank);
    EXPECT_EQ(config.hosts()[rank].hostname, "node0" + std::to_string(rank));
    EXPECT_EQ(&config.host(rank), &config.hosts()[rank]);
  }
}

TEST(NetworkConfigJson, AcceptsOneHostAndTheExtremePorts) {
  EXPECT_EQ(load({{"hosts", {host_json(0, "a", 1)}}}).host(0).port, 1);
  EXPECT_EQ(load({{"hosts", {host_json(0, "a", 65535)}}}).host(0).port, 65535);
}

TEST(NetworkConfigJson, SeveralRanksMayShareAHostOnDifferentPorts) {
  const auto config =
      load({{"hosts", {host_json(0, "localhost", 18515), host_json(1, "localhost", 18516)}}});
  EXPECT_EQ(config.world_size(), 2U);
}

TEST(NetworkConfigJson, RoundTrips) {
  json document = {{"hosts", {host_json(1), host_json(0), host_json(2)}}};
  document["hosts"][1]["comment"] = "the leader \"quoted\" \u00e9";
  const auto config = load(document);
  const std::string text = config.to_json();
  EXPECT_EQ(NetworkConfig::from_json(text), config);
  EXPECT_EQ(NetworkConfig::from_json(text).to_json(), text);
}

TEST(NetworkConfigJson, WritesTheDocumentedFieldsInRankOrder) {
  const auto config = load({{"hosts", {host_json(1), host_json(0)}}});
  const json written = json::parse(config.to_json());
  ASSERT_EQ(written.size(), 1U);
  ASSERT_EQ(written.at("hosts").size(), 2U);
  EXPECT_EQ(written["hosts"][0], host_json(0));  // no "comment" where it is empty
  EXPECT_EQ(written["hosts"][1], host_json(1));
}

// --- Errors: the document --------------------------------------------------------------------

TEST(NetworkConfigErrors, TextThatIsNotJsonGivesTheBytePosition) {
  EXPECT_TRUE(throws_error(kInvalid, [] { (void)NetworkConfig::from_json(R"({"hosts": [x]})"); },
                           {"NetworkConfig::from_json", "not JSON", "byte 12"}));
  EXPECT_TRUE(throws_error(kInvalid, [] { (void)NetworkConfig::from_json(""); }, {"not JSON"}));
}

TEST(NetworkConfigErrors, TheDocumentMustBeAnObject) {
  EXPECT_TRUE(throws_error(kInvalid, [] { (void)NetworkConfig::from_json("[]"); },
                           {"an array", "not an object"}));
}

TEST(NetworkConfigErrors, HostsMustBePresent) {
  EXPECT_TRUE(
      throws_error(kInvalid, [] { (void)NetworkConfig::from_json("{}"); }, {"no \"hosts\" field"}));
}

TEST(NetworkConfigErrors, UnknownTopLevelFieldsAreNamed) {
  json document = three_hosts();
  document["host"] = json::array();
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); }, {"unknown field \"host\""}));
}

TEST(NetworkConfigErrors, HostsMustBeAnArray) {
  EXPECT_TRUE(throws_error(kInvalid, [] { (void)NetworkConfig::from_json(R"({"hosts":{}})"); },
                           {"\"hosts\" is an object, not an array"}));
}

TEST(NetworkConfigErrors, AnEmptyNetworkIsRejected) {
  EXPECT_TRUE(throws_error(kInvalid, [] { (void)NetworkConfig::from_json(R"({"hosts":[]})"); },
                           {"the network has no hosts"}));
}

TEST(NetworkConfigErrors, TooManyHostsAreRejected) {
  // The size is checked before the entries, so empty objects will do.
  std::string text = R"({"hosts":[{})";
  for (std::size_t i = 1; i <= NetworkConfig::kMaxHosts; ++i) text += ",{}";
  text += "]}";
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)NetworkConfig::from_json(text); },
                           {"65537 hosts", "maximum 65536"}));
}

TEST(NetworkConfigErrors, AnEntryMustBeAnObject) {
  json document = three_hosts();
  document["hosts"][1] = "node01";
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                           {"hosts[1] is a string, not an object"}));
}

// --- Errors: fields --------------------------------------------------------------------------

TEST(NetworkConfigErrors, EachMissingFieldIsNamed) {
  for (const char* field : {"hostname", "port", "ibdev", "rankid"}) {
    json document = three_hosts();
    document["hosts"][2].erase(field);
    EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                             {"hosts[2]." + std::string(field) + " is missing"}))
        << field;
  }
}

TEST(NetworkConfigErrors, CommentIsOptional) {
  json document = three_hosts();
  document["hosts"][0]["comment"] = "";
  EXPECT_EQ(load(document).host(0).comment, "");
}

TEST(NetworkConfigErrors, StringFieldsMustBeStrings) {
  for (const char* field : {"hostname", "ibdev", "comment"}) {
    json document = three_hosts();
    document["hosts"][1][field] = 7;
    EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                             {"hosts[1]." + std::string(field) + " is an integer, not a string"}))
        << field;
  }
}

TEST(NetworkConfigErrors, NamesMustBeNonEmptyWithoutBlanks) {
  for (const char* field : {"hostname", "ibdev"}) {
    json document = three_hosts();
    document["hosts"][1][field] = "";
    EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                             {"hosts[1]." + std::string(field) + " is empty"}))
        << field;
    document["hosts"][1][field] = "node 01";
    EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                             {"hosts[1]." + std::string(field), "space or control character"}))
        << field;
  }
}

TEST(NetworkConfigErrors, PortMustBeAnIntegerIn1To65535) {
  const auto with_port = [](json port) {
    json document = three_hosts();
    document["hosts"][2]["port"] = std::move(port);
    return document;
  };
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_port(0)); },
                           {"hosts[2].port is 0", "1..65535"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_port(65536)); },
                           {"hosts[2].port is 65536", "1..65535"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_port(-1)); },
                           {"hosts[2].port is -1", "1..65535"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_port(18515.5)); },
                           {"hosts[2].port is a fractional number", "not an integer"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_port("18515")); },
                           {"hosts[2].port is a string, not an integer"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_port(true)); },
                           {"hosts[2].port is a boolean, not an integer"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_port(nullptr)); },
                           {"hosts[2].port is a null, not an integer"}));
}

TEST(NetworkConfigErrors, RankMustBeANonNegativeInteger) {
  const auto with_rank = [](json rank) {
    json document = three_hosts();
    document["hosts"][0]["rankid"] = std::move(rank);
    return document;
  };
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_rank(-1)); },
                           {"hosts[0].rankid is -1", "non-negative integer"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_rank(0.5)); },
                           {"hosts[0].rankid", "not an integer"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_rank("0")); },
                           {"hosts[0].rankid is a string, not an integer"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(with_rank(5000000000)); },
                           {"hosts[0].rankid is 5000000000", "up to 65535"}));
}

TEST(NetworkConfigErrors, UnknownFieldsAreNamedWithASuggestion) {
  json document = three_hosts();
  document["hosts"][1].erase("rankid");
  document["hosts"][1]["rankId"] = 1;
  EXPECT_TRUE(
      throws_error(kInvalid, [&] { (void)load(document); },
                   {"hosts[1] has an unknown field \"rankId\"", "did you mean \"rankid\""}));

  document = three_hosts();
  document["hosts"][2]["rack"] = 3;
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                           {"hosts[2] has an unknown field \"rack\"", "comment"}));
}

// --- Errors: ranks and listeners -------------------------------------------------------------

TEST(NetworkConfigErrors, RanksMustStartAtZero) {
  const json document = {{"hosts", {host_json(1), host_json(2)}}};
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                           {"the lowest rank is 1", "ranks must start at 0"}));
}

TEST(NetworkConfigErrors, AGapInTheRanksNamesTheMissingRank) {
  const json document = {
      {"hosts", {host_json(0), host_json(4), host_json(1), host_json(2), host_json(5)}}};
  EXPECT_TRUE(
      throws_error(kInvalid, [&] { (void)load(document); },
                   {"rank 3 is missing", "ranks must be 0..4 for 5 hosts", "hosts[1] has rank 4"}));
}

TEST(NetworkConfigErrors, ADuplicateRankNamesBothEntries) {
  const json document = {{"hosts", {host_json(0), host_json(1), host_json(2), host_json(1)}}};
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                           {"hosts[1] and hosts[3] both have rank 1"}));
}

TEST(NetworkConfigErrors, TwoRanksOnOneHostAndPortNameBothRanks) {
  const json document = {{"hosts",
                          {host_json(0, "node01", 18515), host_json(1, "node02", 18515),
                           host_json(2, "NODE01", 18515)}}};
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)load(document); },
                           {"ranks 0 (hosts[0]) and 2 (hosts[2])", "NODE01:18515",
                            "two ranks can not listen on one port"}));
}

// --- host() ----------------------------------------------------------------------------------

TEST(NetworkConfigHost, OutOfRangeNamesTheRankAndTheWorldSize) {
  const auto config = load(three_hosts());
  EXPECT_EQ(config.host(2).hostname, "node02");
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)config.host(3); },
                           {"NetworkConfig::host", "rank 3", "world size is 3", "0..2"}));
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)config.host(UINT32_MAX); }, {"rank 4294967295"}));
}

// --- from_file() -----------------------------------------------------------------------------

// A file in the temporary directory, removed at the end of the test.
class NetworkConfigFile : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }

  void write(const std::string& text) const {
    std::ofstream out(path_, std::ios::binary);
    out << text;
    ASSERT_TRUE(out.good());
  }

  std::filesystem::path path_ = std::filesystem::temp_directory_path() /
                                ("ibv_network_config_test_" + std::to_string(getpid()) + ".json");
};

TEST_F(NetworkConfigFile, LoadsAFile) {
  write(three_hosts().dump(2));
  const auto config = NetworkConfig::from_file(path_);
  EXPECT_EQ(config, load(three_hosts()));
}

TEST_F(NetworkConfigFile, ErrorsInTheContentNameTheFile) {
  json document = three_hosts();
  document["hosts"][2]["port"] = 0;
  write(document.dump());
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)NetworkConfig::from_file(path_); },
                           {"NetworkConfig::from_file", path_.string(), "hosts[2].port is 0"}));
}

TEST_F(NetworkConfigFile, AMissingFileIsNamed) {
  const auto missing = path_.string() + ".missing";
  EXPECT_TRUE(throws_error(ErrorKind::not_found, [&] { (void)NetworkConfig::from_file(missing); },
                           {"NetworkConfig::from_file", missing}));
}

TEST_F(NetworkConfigFile, ADirectoryIsNamed) {
  const auto directory = std::filesystem::temp_directory_path();
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)NetworkConfig::from_file(directory); },
                           {directory.string(), "is a directory"}));
}

// --- NetworkConfigBuilder --------------------------------------------------------------------

TEST(NetworkConfigBuilder, BuildsASortedConfigEqualToTheParsedOne) {
  const auto config = NetworkConfigBuilder()
                          .add_host(host(1, "node01"))
                          .add_host(host(0, "node00"))
                          .add_host(host(2, "node02"))
                          .build();
  ASSERT_EQ(config.world_size(), 3U);
  EXPECT_EQ(config.host(0).hostname, "node00");
  EXPECT_EQ(config.host(1).hostname, "node01");
  EXPECT_EQ(NetworkConfig::from_json(config.to_json()), config);
}

TEST(NetworkConfigBuilder, CanBeBuiltAgainAndExtended) {
  NetworkConfigBuilder builder;
  builder.add_host(host(0, "a"));
  const auto one = builder.build();
  builder.add_host(host(1, "b"));
  EXPECT_EQ(one.world_size(), 1U);
  EXPECT_EQ(builder.build().world_size(), 2U);
}

TEST(NetworkConfigBuilder, RunsTheSameValidation) {
  constexpr std::string_view kBuild = "NetworkConfigBuilder::build";
  EXPECT_TRUE(throws_error(kInvalid, [] { (void)NetworkConfigBuilder().build(); },
                           {kBuild, "the network has no hosts"}));
  EXPECT_TRUE(throws_error(kInvalid,
                           [] { (void)NetworkConfigBuilder().add_host(host(0, "a", 0)).build(); },
                           {kBuild, "hosts[0].port is 0"}));
  EXPECT_TRUE(throws_error(kInvalid,
                           [] { (void)NetworkConfigBuilder().add_host(host(0, "")).build(); },
                           {"hosts[0].hostname is empty"}));
  EXPECT_TRUE(throws_error(kInvalid,
                           [] {
                             auto no_device = host(0, "a");
                             no_device.ibdev.clear();
                             (void)NetworkConfigBuilder().add_host(no_device).build();
                           },
                           {"hosts[0].ibdev is empty"}));
  EXPECT_TRUE(throws_error(kInvalid,
                           [] { (void)NetworkConfigBuilder().add_host(host(1, "a")).build(); },
                           {"ranks must start at 0"}));
  EXPECT_TRUE(throws_error(
      kInvalid,
      [] { (void)NetworkConfigBuilder().add_host(host(0, "a")).add_host(host(2, "b")).build(); },
      {"rank 1 is missing"}));
  EXPECT_TRUE(throws_error(
      kInvalid,
      [] { (void)NetworkConfigBuilder().add_host(host(0, "a")).add_host(host(0, "b")).build(); },
      {"hosts[0] and hosts[1] both have rank 0"}));
  EXPECT_TRUE(throws_error(
      kInvalid,
      [] { (void)NetworkConfigBuilder().add_host(host(0, "a")).add_host(host(1, "a")).build(); },
      {"ranks 0 (hosts[0]) and 1 (hosts[1]) both use a:18515"}));
}

TEST(NetworkConfigBuilder, TooManyHostsAreRejected) {
  NetworkConfigBuilder builder;
  for (std::uint32_t rank = 0; rank <= NetworkConfig::kMaxHosts; ++rank) {
    builder.add_host(host(rank, "h", 1));
  }
  EXPECT_TRUE(throws_error(kInvalid, [&] { (void)builder.build(); }, {"65537 hosts"}));
}

}  // namespace
