// SPDX-License-Identifier: MIT
// The config loader fuzz target: NetworkConfig::from_json, then the promises of an accepted
// configuration checked one by one and its round trip through to_json() and the builder.
#include "network_config_target.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "fuzz_check.hpp"
#include "ibv/error.hpp"
#include "ibv/net/network_config.hpp"

namespace ibv_fuzz {
namespace {

using ibv::net::HostConfig;
using ibv::net::NetworkConfig;

bool is_name(std::string_view text) {
  return !text.empty() && std::none_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte <= 0x20 || byte == 0x7F;
  });
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  });
  return lower;
}

void check_valid(const NetworkConfig& config) {
  const auto hosts = config.hosts();
  check(config.world_size() == hosts.size(), "world_size() is not the number of hosts");
  check(!hosts.empty() && hosts.size() <= NetworkConfig::kMaxHosts,
        "accepted a host count out of range");
  std::set<std::pair<std::string, std::uint16_t>> listeners;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const HostConfig& host = hosts[i];
    const std::string where = "hosts()[" + std::to_string(i) + "]";
    check(host.rank == i, where + " has rank " + std::to_string(host.rank));
    check(&config.host(host.rank) == &host, where + " is not host(rank)");
    check(is_name(host.hostname), where + " has an invalid host name");
    check(is_name(host.ibdev), where + " has an invalid device name");
    check(host.port != 0, where + " has port 0");
    check(listeners.emplace(lowercase(host.hostname), host.port).second,
          where + " shares its host and port with another rank");
  }
}

}  // namespace

void network_config_target(std::span<const std::uint8_t> input) {
  const std::string text(input.begin(), input.end());
  std::optional<NetworkConfig> config;
  try {
    config = NetworkConfig::from_json(text);
  } catch (const ibv::Error& error) {
    check(std::strlen(error.what()) > 0, "from_json threw an ibv::Error with no message");
    check(error.kind() == ibv::ErrorKind::invalid_argument && error.errno_value() == EINVAL,
          "from_json threw " + std::string(ibv::to_string(error.kind())) +
              " instead of invalid_argument/EINVAL: " + error.what());
    return;
  }
  check_valid(*config);

  const std::string json = config->to_json();
  std::optional<NetworkConfig> again;
  try {
    again = NetworkConfig::from_json(json);
  } catch (const ibv::Error& error) {
    throw InvariantViolation(std::string("from_json rejects to_json of an accepted config: ") +
                             error.what() + "\n" + json);
  }
  check(*again == *config, "from_json(to_json(c)) != c:\n" + json);
  check(again->to_json() == json, "to_json is not stable across a round trip");

  ibv::net::NetworkConfigBuilder builder;
  // Backwards, so that the builder has to sort them.
  const auto hosts = config->hosts();
  for (std::size_t i = hosts.size(); i-- > 0;) builder.add_host(hosts[i]);
  try {
    check(builder.build() == *config, "NetworkConfigBuilder builds another config from the hosts");
  } catch (const ibv::Error& error) {
    throw InvariantViolation(
        std::string("NetworkConfigBuilder rejects the hosts of an accepted config: ") +
        error.what());
  }
}

}  // namespace ibv_fuzz
