// SPDX-License-Identifier: MIT
// bench/bootstrap/bootstrap_rank.cpp: one rank of the bootstrap benchmark (bench/bootstrap/run).
// It does with dummy data exactly what PreparedNode::connect(Bootstrap&) does with a Node's
// connection data: a personalized all_to_all_bytes of one PeerEndpoint::kWireSize-byte entry per
// rank, then a barrier. No RDMA device is involved: the exchange is TCP (the hosts file's mesh,
// the rendezvous) or the launcher's PMIx server.
//
// Usage: bootstrap_rank --method mesh|rendezvous|pmix [--rank R --world N] [--base-port P]
//                       [--repeat K] [--timeout-ms T]
//   mesh: rank r listens on 127.0.0.1:P+r (a NetworkConfig of N hosts made with
//   NetworkConfigBuilder). rendezvous: the root (rank 0) listens on 127.0.0.1:P. pmix: rank and
//   world size come from the launcher (mpirun); --rank and --world, when given, must agree.
//   K (default 3): exchanges after the first, timed separately. T (default 30000): the
//   bootstrap's timeout for each collective.
// Prints one JSON line: method, world, rank; first_ms: construction, connecting, the first
// all_to_all and its barrier (steady_clock); repeat_ms: the median of the K later exchanges
// (all_to_all + barrier each); sockets: the entries of /proc/self/fd that are sockets, after the
// first exchange; bytes_received: after the first exchange, the sum of TCP_INFO's
// tcpi_bytes_received over this process's TCP sockets less what is still unread in them
// (bytes_unread: faster peers' messages of the next exchange) (mesh, rendezvous), or for pmix
// the bytes of the entries the other ranks sent this one (bytes_basis says which;
// tcp_bytes_received has the TCP figure for pmix too, the PMIx client's traffic with its
// server, which passes local peers' data through shared memory instead); ok: every entry of
// every exchange had the expected content (the entry from rank s to rank r in exchange e is a
// pattern of s, r and e); error: what went wrong, when something did. Exit status 0 only when ok.
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "../json_string.hpp"
#include "ibv/net/bootstrap.hpp"
#include "ibv/net/exchanger.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/net/node_endpoint.hpp"
#include "ibv/net/pmix_bootstrap.hpp"
#include "ibv/net/rendezvous.hpp"

namespace {

using ibv::bench::json_string;

using Clock = std::chrono::steady_clock;
constexpr std::size_t kEntrySize = ibv::net::PeerEndpoint::kWireSize;

struct Options {
  std::string method;
  std::optional<std::uint32_t> rank;
  std::optional<std::uint32_t> world;
  std::uint32_t base_port = 0;
  std::uint32_t repeat = 3;
  std::uint32_t timeout_ms = 30000;
};

struct Result {
  std::string method;
  std::optional<std::uint32_t> world;
  std::optional<std::uint32_t> rank;
  std::optional<double> first_ms;
  std::optional<double> repeat_ms;
  std::optional<std::size_t> sockets;
  std::optional<std::uint64_t> bytes_received;
  std::optional<std::uint64_t> tcp_bytes_received;
  std::optional<std::uint64_t> bytes_unread;
  bool ok = false;
  std::string error;
};

constexpr std::string_view kUsage =
    "usage: bootstrap_rank --method mesh|rendezvous|pmix [--rank R --world N] [--base-port P]\n"
    "                      [--repeat K] [--timeout-ms T]\n";

std::uint32_t parse_number(std::string_view option, std::string_view text, std::uint32_t low,
                           std::uint32_t high) {
  std::uint64_t value = 0;
  if (text.empty() || text.size() > 10) {
    throw std::invalid_argument(std::string(option) + " needs a number");
  }
  for (const char c : text) {
    if (c < '0' || c > '9') throw std::invalid_argument(std::string(option) + " needs a number");
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (value < low || value > high) {
    throw std::invalid_argument(std::string(option) + " must be " + std::to_string(low) + ".." +
                                std::to_string(high));
  }
  return static_cast<std::uint32_t>(value);
}

Options parse_options(std::span<char*> args) {
  Options options;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string_view option = args[i];
    if (i + 1 >= args.size()) throw std::invalid_argument(std::string(option) + " needs a value");
    const std::string_view value = args[++i];
    if (option == "--method") {
      if (value != "mesh" && value != "rendezvous" && value != "pmix") {
        throw std::invalid_argument("--method must be mesh, rendezvous or pmix");
      }
      options.method = value;
    } else if (option == "--rank") {
      options.rank = parse_number(option, value, 0, 65535);
    } else if (option == "--world") {
      options.world = parse_number(option, value, 1, 65536);
    } else if (option == "--base-port") {
      options.base_port = parse_number(option, value, 1024, 65535);
    } else if (option == "--repeat") {
      options.repeat = parse_number(option, value, 0, 1000);
    } else if (option == "--timeout-ms") {
      options.timeout_ms = parse_number(option, value, 1, 3'600'000);
    } else {
      throw std::invalid_argument("unknown option " + std::string(option));
    }
  }
  if (options.method.empty()) throw std::invalid_argument("--method is required");
  if (options.method != "pmix") {
    if (!options.rank || !options.world || options.base_port == 0) {
      throw std::invalid_argument("--rank, --world and --base-port are required for " +
                                  options.method);
    }
    if (*options.rank >= *options.world) {
      throw std::invalid_argument("--rank must be below --world");
    }
    const std::uint32_t ports = options.method == "mesh" ? *options.world : 1;
    if (options.base_port + ports - 1 > 65535) {
      throw std::invalid_argument("--base-port + --world - 1 exceeds 65535");
    }
  }
  return options;
}

/// The entry rank `sender` sends rank `receiver` in exchange `exchange`.
std::vector<std::byte> pattern(std::uint32_t sender, std::uint32_t receiver,
                               std::uint32_t exchange) {
  std::vector<std::byte> entry(kEntrySize);
  const auto put = [&](std::size_t at, std::uint32_t value) {
    for (std::size_t i = 0; i < 4; ++i) {
      entry[at + i] = static_cast<std::byte>((value >> (24 - 8 * i)) & 0xffU);
    }
  };
  put(0, sender);
  put(4, receiver);
  put(8, exchange);
  for (std::size_t i = 12; i < kEntrySize; ++i) {
    entry[i] = static_cast<std::byte>(
        (sender * 131U + receiver * 31U + exchange * 7U + static_cast<std::uint32_t>(i) * 13U) &
        0xffU);
  }
  return entry;
}

/// One exchange as PreparedNode::connect does it: all_to_all, then barrier. Throws
/// std::runtime_error naming the first entry with unexpected content.
void exchange(ibv::net::Bootstrap& bootstrap, std::uint32_t number) {
  const std::uint32_t world = bootstrap.world_size();
  const std::uint32_t me = bootstrap.rank();
  std::vector<std::vector<std::byte>> to_peer;
  to_peer.reserve(world);
  for (std::uint32_t peer = 0; peer < world; ++peer) to_peer.push_back(pattern(me, peer, number));
  const std::vector<std::vector<std::byte>> entries = bootstrap.all_to_all_bytes(to_peer);
  bootstrap.barrier();
  if (entries.size() != world) {
    throw std::runtime_error("exchange " + std::to_string(number) + " returned " +
                             std::to_string(entries.size()) + " entries for a world of " +
                             std::to_string(world));
  }
  for (std::uint32_t sender = 0; sender < world; ++sender) {
    if (entries[sender] != pattern(sender, me, number)) {
      throw std::runtime_error(
          "exchange " + std::to_string(number) + ": the entry from rank " + std::to_string(sender) +
          " (" + std::to_string(entries[sender].size()) + " bytes) is not what that rank sent");
    }
  }
}

struct SocketCount {
  std::size_t sockets = 0;
  std::uint64_t tcp_bytes_received = 0;  // read by this process
  std::uint64_t tcp_bytes_unread = 0;    // received, still queued in the sockets
};

/// The sockets this process holds, and what its TCP sockets have received: TCP_INFO's
/// tcpi_bytes_received less what is still unread in the receive queue (FIONREAD). The unread
/// part is what faster peers have already sent for the next exchange: it arrives while this
/// rank is still finishing the first one (the rendezvous root above all, which answers the
/// barrier last), so it is counted apart.
SocketCount count_sockets() {
  SocketCount count;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const std::filesystem::path target = std::filesystem::read_symlink(entry.path(), error);
    if (error || !target.native().starts_with("socket:[")) continue;
    ++count.sockets;
    int fd = 0;
    try {
      fd = std::stoi(entry.path().filename().native());
    } catch (const std::exception&) {
      continue;
    }
    tcp_info info{};
    socklen_t length = sizeof info;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) continue;  // not TCP
    if (length < offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received) {
      continue;
    }
    int queued = 0;
    constexpr std::uint8_t kListening = 10;  // TCP_LISTEN of the kernel's TCP states
    if (info.tcpi_state == kListening || ::ioctl(fd, FIONREAD, &queued) != 0 || queued < 0) {
      queued = 0;
    }
    const std::uint64_t unread =
        std::min<std::uint64_t>(static_cast<std::uint64_t>(queued), info.tcpi_bytes_received);
    count.tcp_bytes_received += info.tcpi_bytes_received - unread;
    count.tcp_bytes_unread += unread;
  }
  return count;
}

std::unique_ptr<ibv::net::Bootstrap> make_bootstrap(const Options& options) {
  const std::chrono::milliseconds timeout(options.timeout_ms);
  if (options.method == "mesh") {
    ibv::net::NetworkConfigBuilder builder;
    for (std::uint32_t rank = 0; rank < *options.world; ++rank) {
      builder.add_host({.rank = rank,
                        .hostname = "127.0.0.1",
                        .port = static_cast<std::uint16_t>(options.base_port + rank),
                        .ibdev = "none",
                        .comment = {}});
    }
    return std::make_unique<ibv::net::Exchanger>(
        builder.build(), *options.rank,
        ibv::net::ExchangerOptions{.timeout = timeout, .listen_address = "127.0.0.1"});
  }
  if (options.method == "rendezvous") {
    return std::make_unique<ibv::net::Rendezvous>(
        ibv::net::RootAddress{.host = "127.0.0.1",
                              .port = static_cast<std::uint16_t>(options.base_port)},
        *options.rank, *options.world,
        ibv::net::RendezvousOptions{.timeout = timeout, .listen_address = "127.0.0.1"});
  }
  auto pmix = std::make_unique<ibv::net::PmixBootstrap>(ibv::net::PmixOptions{.timeout = timeout});
  if ((options.rank && *options.rank != pmix->rank()) ||
      (options.world && *options.world != pmix->world_size())) {
    throw std::invalid_argument("--rank/--world disagree with the launcher: " +
                                pmix->description());
  }
  return pmix;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double milliseconds_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void run(const Options& options, Result& result) {
  std::string phase = "construction";
  try {
    const Clock::time_point start = Clock::now();
    const std::unique_ptr<ibv::net::Bootstrap> bootstrap = make_bootstrap(options);
    result.world = bootstrap->world_size();
    result.rank = bootstrap->rank();
    phase = "first exchange";
    exchange(*bootstrap, 0);
    result.first_ms = milliseconds_since(start);
    const SocketCount count = count_sockets();
    result.sockets = count.sockets;
    result.tcp_bytes_received = count.tcp_bytes_received;
    result.bytes_unread = count.tcp_bytes_unread;
    result.bytes_received = options.method == "pmix"
                                ? std::uint64_t{bootstrap->world_size() - 1U} * kEntrySize
                                : count.tcp_bytes_received;
    std::vector<double> repeats;
    for (std::uint32_t i = 1; i <= options.repeat; ++i) {
      phase = "exchange " + std::to_string(i);
      const Clock::time_point begin = Clock::now();
      exchange(*bootstrap, i);
      repeats.push_back(milliseconds_since(begin));
    }
    if (!repeats.empty()) result.repeat_ms = median(repeats);
    result.ok = true;
  } catch (const std::exception& error) {
    result.error = phase + ": " + error.what();
  }
}

template <typename T>
std::string json_number(const std::optional<T>& value) {
  if (!value) return "null";
  if constexpr (std::is_floating_point_v<T>) {
    std::array<char, 32> text{};
    std::snprintf(text.data(), text.size(), "%.3f", *value);
    return text.data();
  } else {
    return std::to_string(*value);
  }
}

void print(const Result& result) {
  const bool pmix = result.method == "pmix";
  std::string line = "{\"method\": " + json_string(result.method) +
                     ", \"world\": " + json_number(result.world) +
                     ", \"rank\": " + json_number(result.rank) +
                     ", \"first_ms\": " + json_number(result.first_ms) +
                     ", \"repeat_ms\": " + json_number(result.repeat_ms) +
                     ", \"sockets\": " + json_number(result.sockets) +
                     ", \"bytes_received\": " + json_number(result.bytes_received) +
                     ", \"bytes_basis\": " + json_string(pmix ? "entries" : "tcp_info") +
                     ", \"bytes_unread\": " + json_number(result.bytes_unread);
  if (pmix) line += ", \"tcp_bytes_received\": " + json_number(result.tcp_bytes_received);
  line += std::string(", \"ok\": ") + (result.ok ? "true" : "false");
  if (!result.ok) line += ", \"error\": " + json_string(result.error);
  line += "}\n";
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  try {
    options = parse_options(std::span(argv, static_cast<std::size_t>(argc)));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bootstrap_rank: %s\n%.*s", error.what(), static_cast<int>(kUsage.size()),
                 kUsage.data());
    return 2;
  }
  Result result;
  result.method = options.method;
  result.world = options.world;
  result.rank = options.rank;
  run(options, result);
  print(result);
  return result.ok ? 0 : 1;
}
