// SPDX-License-Identifier: MIT
// ibvcpp perf's out-of-band protocol over its TCP connection: the messages, the settings both
// sides compare before they run, the addresses of the queue pairs, and the results the client
// hands to the server. Pure encoding and checking; the socket is in tcp.hpp.
//
// Every message is a frame: a 4-byte big-endian length n, then n bytes: one type byte and the
// payload. The conversation (client C, server S):
//   1. C -> S and S -> C: settings (JSON). Each side compares, and both stop with exit status
//      2 naming the first setting that differs.
//   2. both: addresses (binary: per QP an Endpoint, or with -c UD a UdAddress, and two remote
//      regions), then the handshake (RC; a UD queue pair needs none).
//   3. both: ready. Then per size: both ready (after posting receives and clearing buffers),
//      the measurement, and C -> S: result (JSON). C sends heartbeats while it measures so that
//      a server that waits knows it is alive.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/ud_address.hpp"
#include "ibvcpp/options.hpp"
#include "ibvcpp/report.hpp"

namespace ibvcpp {

/// The type byte of a frame.
enum class MessageType : std::uint8_t {
  settings = 'S',
  addresses = 'A',
  ready = 'R',
  heartbeat = 'H',
  result = 'B',
};

/// The version of this protocol, in the settings.
inline constexpr int kProtocolVersion = 1;
/// The largest frame either side accepts.
inline constexpr std::size_t kMaxFrame = std::size_t{1} << 20;

/// The settings a side announces. test, connection, sizes, iterations, tx_depth, qps, post_list
/// and cq_mod must agree; the path MTU is negotiated (both use the smaller). post_list, cq_mod
/// and connection are optional in the message (a peer from before -l, -Q and -c sends none of
/// them: 1, none and RC).
struct PeerSettings {
  std::string test;  ///< TestKind::name()
  std::vector<std::uint64_t> sizes;
  std::uint32_t iterations = 0;
  std::uint32_t tx_depth = 0;
  std::uint32_t qps = 0;
  std::uint32_t mtu = 0;
  std::uint32_t post_list = 1;    ///< -l
  std::uint32_t cq_mod = 0;       ///< -Q as given; 0: not given
  std::string connection = "RC";  ///< -c: transport_name()

  friend bool operator==(const PeerSettings&, const PeerSettings&) = default;
};

[[nodiscard]] PeerSettings settings_of(const PerfOptions& options, std::uint32_t mtu);
/// JSON: {"tool":"ibvcpp","protocol":1,"test":"write_bw","sizes":[65536],...}.
[[nodiscard]] std::string encode_settings(const PeerSettings& settings);
/// Throws ToolError (connection) when `text` is not ibvcpp's settings message (another program
/// on the port, another protocol version).
[[nodiscard]] PeerSettings decode_settings(std::string_view text);
/// nullopt when the settings that must agree do; else one sentence naming the first that
/// differs and both values, from the point of view of the side whose settings are `mine`
/// ("this client" / "the server").
[[nodiscard]] std::optional<std::string> settings_mismatch(const PeerSettings& mine,
                                                           const PeerSettings& peer,
                                                           bool i_am_client);

/// Where the peer reaches one of this side's queue pairs and buffers: an RC queue pair's
/// endpoint, or with -c UD the UD queue pair's address (`datagram`; `endpoint` then unused).
struct QpAddress {
  ibv::Endpoint endpoint;
  std::optional<ibv::UdAddress> datagram;
  ibv::RemoteMemoryRegion inbox;   ///< Where the peer writes (write tests).
  ibv::RemoteMemoryRegion outbox;  ///< Where the peer reads from (read tests).

  friend bool operator==(const QpAddress&, const QpAddress&) = default;
};

static_assert(ibv::Endpoint::kWireSize == ibv::UdAddress::kWireSize,
              "an address's first field holds either form");
inline constexpr std::size_t kQpAddressSize =
    ibv::Endpoint::kWireSize + 2 * ibv::RemoteMemoryRegion::kWireSize;

/// Each address: its datagram address if it has one, else its endpoint; then both regions.
[[nodiscard]] std::vector<std::byte> encode_addresses(std::span<const QpAddress> addresses);
/// Throws ToolError (connection) unless `bytes` holds exactly `count` addresses of the form
/// `transport` uses (UD: a UdAddress first, which it sets in `datagram`).
[[nodiscard]] std::vector<QpAddress> decode_addresses(std::span<const std::byte> bytes,
                                                      std::size_t count,
                                                      Transport transport = Transport::rc);

/// Results as JSON, for the result message.
[[nodiscard]] std::string encode_result(const BwResult& result);
[[nodiscard]] std::string encode_result(const LatResult& result);
/// Throw ToolError (run_failed) for a malformed result.
[[nodiscard]] BwResult decode_bw_result(std::string_view text);
[[nodiscard]] LatResult decode_lat_result(std::string_view text);

}  // namespace ibvcpp
