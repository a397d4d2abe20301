// SPDX-License-Identifier: MIT
// ibvcpp perf as a launched pair: which processes are one, the bootstrap they meet through, the
// addresses rank 0 publishes and how rank 1 dials them.
#include "ibvcpp/launched.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <exception>
#include <memory>
#include <utility>

#include "ibv/error.hpp"
#include "ibv/net/bootstrap_from_environment.hpp"
#include "ibv/net/pmix_bootstrap.hpp"
#include "ibv/verbs/gid.hpp"

namespace ibvcpp {
namespace {

/// At most this many addresses are published (a host with many interfaces).
constexpr std::size_t kMaxPublishedHosts = 16;

/// The numeric text of an interface address; nullopt for other families and IPv6 link-local.
std::optional<std::string> numeric(const sockaddr* address) {
  std::array<char, INET6_ADDRSTRLEN> text{};
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);  // NOLINT: sockaddr family
    if (::inet_ntop(AF_INET, &v4->sin_addr, text.data(), text.size()) == nullptr) return {};
    return text.data();
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);  // NOLINT: sockaddr family
    if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) return {};
    if (::inet_ntop(AF_INET6, &v6->sin6_addr, text.data(), text.size()) == nullptr) return {};
    return text.data();
  }
  return {};
}

void add_once(std::vector<std::string>& hosts, std::string host) {
  if (hosts.size() < kMaxPublishedHosts && std::ranges::find(hosts, host) == hosts.end()) {
    hosts.push_back(std::move(host));
  }
}

}  // namespace

std::string encode_server_addresses(const ServerAddresses& addresses) {
  std::string text = std::to_string(addresses.port);
  for (const auto& host : addresses.hosts) text += " " + host;
  return text;
}

ServerAddresses decode_server_addresses(std::string_view text) {
  ServerAddresses addresses;
  std::vector<std::string_view> words;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find(' ', start), text.size());
    if (end > start) words.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  const auto bad = [&] {
    return ToolError(ExitCode::connection, "rank 0 published no usable server address ('" +
                                               std::string(text.substr(0, 40)) +
                                               (text.size() > 40 ? "...'" : "'") +
                                               "): is it ibvcpp of the same version?");
  };
  if (words.size() < 2) throw bad();
  const auto [end, error] =
      std::from_chars(words[0].data(), words[0].data() + words[0].size(), addresses.port);
  if (error != std::errc{} || end != words[0].data() + words[0].size() || addresses.port == 0) {
    throw bad();
  }
  for (std::size_t i = 1; i < words.size(); ++i) addresses.hosts.emplace_back(words[i]);
  return addresses;
}

bool runs_as_launched_pair(const PerfOptions& options, const ibv::net::EnvironmentLookup& lookup) {
  if (options.server) return false;
  if (lookup("IBV_BOOTSTRAP")) return true;
  if (const auto launcher = ibv::net::rank_from_launcher(lookup)) return launcher->size >= 2;
  return ibv::net::PmixBootstrap::launched_by_pmix(lookup);
}

LaunchedPair::LaunchedPair(const PerfOptions& options) {
  try {
    bootstrap_ = ibv::net::bootstrap_from_environment({.timeout = options.timeout});
  } catch (const std::exception& error) {
    throw ToolError(
        ExitCode::connection,
        std::string("started by a launcher, but its ranks cannot meet: ") + error.what());
  }
  if (bootstrap_->world_size() != 2) {
    throw UsageError(
        "ibvcpp perf under a launcher runs as 2 ranks (rank 0 the server, rank 1 "
        "its client), but this job has " +
        std::to_string(bootstrap_->world_size()) + ": start it with -np 2, or name the server");
  }
}

ServerAddresses LaunchedPair::exchange(const std::optional<ServerAddresses>& mine) {
  std::vector<std::string> entries;
  try {
    entries = bootstrap_->all_gather(mine ? encode_server_addresses(*mine) : std::string());
  } catch (const std::exception& error) {
    throw ToolError(ExitCode::connection, std::string("exchanging the server's address through ") +
                                              bootstrap_->description() + ": " + error.what());
  }
  return mine ? *mine : decode_server_addresses(entries.at(0));
}

std::vector<std::string> local_addresses(const ibv::Context& context, std::uint8_t port) {
  std::vector<std::string> hosts;
  try {
    for (const auto& entry : context.gid_table(ibv::PortNumber{port})) {
      if (auto ipv4 = entry.gid.ipv4()) {
        add_once(hosts, std::move(*ipv4));
      } else if (entry.gid.bytes()[0] != 0xfe || (entry.gid.bytes()[1] & 0xc0) != 0x80) {
        if (!entry.netdev.empty()) add_once(hosts, entry.gid.to_string());  // RoCE, not fe80::/10
      }
    }
  } catch (const ibv::Error&) {
    // No GID table to read (an old kernel): the interfaces below still give every address.
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return hosts;
  const std::unique_ptr<ifaddrs, decltype(&::freeifaddrs)> owner(list, &::freeifaddrs);
  std::vector<std::string> loopback;
  for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_UP) == 0) continue;
    if (auto host = numeric(entry->ifa_addr)) {
      if ((entry->ifa_flags & IFF_LOOPBACK) != 0) {
        loopback.push_back(std::move(*host));
      } else {
        add_once(hosts, std::move(*host));
      }
    }
  }
  for (auto& host : loopback) add_once(hosts, std::move(host));
  return hosts;
}

Connection dial_first(const ServerAddresses& server, std::chrono::milliseconds per_host,
                      std::string& reached) {
  std::string failures;
  for (const auto& host : server.hosts) {
    try {
      Connection connection = Connection::dial(host, server.port, per_host);
      reached = host;
      return connection;
    } catch (const ToolError& error) {
      failures += failures.empty() ? "" : "; ";
      failures += error.what();
    }
  }
  throw ToolError(ExitCode::connection, "rank 0 published " + std::to_string(server.hosts.size()) +
                                            " address(es) and none answered: " + failures);
}

}  // namespace ibvcpp
