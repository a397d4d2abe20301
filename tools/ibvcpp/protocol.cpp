// SPDX-License-Identifier: MIT
// ibvcpp perf's out-of-band messages: settings, addresses and results.
#include "ibvcpp/protocol.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "ibvcpp/exit_code.hpp"

namespace ibvcpp {
namespace {

std::string join(const std::vector<std::uint64_t>& values) {
  std::string text;
  for (const auto value : values) {
    if (!text.empty()) text += ",";
    text += std::to_string(value);
  }
  return text;
}

/// "this client runs X, the server Y" / "this server runs X, the client Y".
std::string both(bool i_am_client, const std::string& mine, const std::string& peer) {
  return i_am_client ? "this client has " + mine + ", the server " + peer
                     : "this server has " + mine + ", the client " + peer;
}

}  // namespace

PeerSettings settings_of(const PerfOptions& options, std::uint32_t mtu) {
  return {options.test.name(),
          options.sizes,
          options.iterations,
          options.tx_depth,
          options.qps,
          mtu,
          options.post_list,
          options.cq_mod.value_or(0),
          std::string(transport_name(options.connection))};
}

std::string encode_settings(const PeerSettings& settings) {
  const nlohmann::ordered_json doc = {
      {"tool", "ibvcpp"},
      {"protocol", kProtocolVersion},
      {"test", settings.test},
      {"sizes", settings.sizes},
      {"iterations", settings.iterations},
      {"tx_depth", settings.tx_depth},
      {"qps", settings.qps},
      {"mtu", settings.mtu},
      {"post_list", settings.post_list},
      {"cq_mod", settings.cq_mod},
      {"connection", settings.connection},
  };
  return doc.dump();
}

PeerSettings decode_settings(std::string_view text) {
  try {
    const auto doc = nlohmann::ordered_json::parse(text);
    if (doc.at("tool") != "ibvcpp") throw std::runtime_error("not ibvcpp");
    if (doc.at("protocol") != kProtocolVersion) {
      throw ToolError(ExitCode::connection, "the peer speaks ibvcpp protocol " +
                                                doc.at("protocol").dump() + ", this side " +
                                                std::to_string(kProtocolVersion) +
                                                ": run the same ibvcpp version on both sides");
    }
    PeerSettings settings;
    settings.test = doc.at("test").get<std::string>();
    settings.sizes = doc.at("sizes").get<std::vector<std::uint64_t>>();
    settings.iterations = doc.at("iterations").get<std::uint32_t>();
    settings.tx_depth = doc.at("tx_depth").get<std::uint32_t>();
    settings.qps = doc.at("qps").get<std::uint32_t>();
    settings.mtu = doc.at("mtu").get<std::uint32_t>();
    settings.post_list = doc.value("post_list", std::uint32_t{1});
    settings.cq_mod = doc.value("cq_mod", std::uint32_t{0});
    settings.connection = doc.value("connection", std::string("RC"));
    return settings;
  } catch (const ToolError&) {
    throw;
  } catch (const std::exception&) {
    throw ToolError(ExitCode::connection,
                    "the peer does not speak ibvcpp's protocol (is it perftest or another "
                    "program on that port? run ibvcpp perf on both sides)");
  }
}

std::optional<std::string> settings_mismatch(const PeerSettings& mine, const PeerSettings& peer,
                                             bool i_am_client) {
  const std::string prefix = "settings differ: ";
  if (mine.test != peer.test) {
    return prefix + "the test (" + both(i_am_client, mine.test, peer.test) + ")";
  }
  if (mine.connection != peer.connection) {
    return prefix + "the transport (-c; " + both(i_am_client, mine.connection, peer.connection) +
           ")";
  }
  if (mine.sizes != peer.sizes) {
    return prefix + "the message sizes (-s/-a/--sizes; " +
           both(i_am_client, join(mine.sizes), join(peer.sizes)) + ")";
  }
  if (mine.iterations != peer.iterations) {
    return prefix + "the iterations (-n; " +
           both(i_am_client, std::to_string(mine.iterations), std::to_string(peer.iterations)) +
           ")";
  }
  if (mine.tx_depth != peer.tx_depth) {
    return prefix + "the TX depth (-t; " +
           both(i_am_client, std::to_string(mine.tx_depth), std::to_string(peer.tx_depth)) + ")";
  }
  if (mine.qps != peer.qps) {
    return prefix + "the number of QPs (-q; " +
           both(i_am_client, std::to_string(mine.qps), std::to_string(peer.qps)) + ")";
  }
  if (mine.post_list != peer.post_list) {
    return prefix + "the post list (-l; " +
           both(i_am_client, std::to_string(mine.post_list), std::to_string(peer.post_list)) + ")";
  }
  if (mine.cq_mod != peer.cq_mod) {
    const auto text = [](std::uint32_t value) {
      return value == 0 ? std::string("none") : std::to_string(value);
    };
    return prefix + "the CQ moderation (-Q; " +
           both(i_am_client, text(mine.cq_mod), text(peer.cq_mod)) + ")";
  }
  return std::nullopt;
}

std::vector<std::byte> encode_addresses(std::span<const QpAddress> addresses) {
  std::vector<std::byte> bytes;
  bytes.reserve(addresses.size() * kQpAddressSize);
  for (const auto& address : addresses) {
    const auto endpoint =
        address.datagram ? address.datagram->to_bytes() : address.endpoint.to_bytes();
    const auto inbox = address.inbox.to_bytes();
    const auto outbox = address.outbox.to_bytes();
    bytes.insert(bytes.end(), endpoint.begin(), endpoint.end());
    bytes.insert(bytes.end(), inbox.begin(), inbox.end());
    bytes.insert(bytes.end(), outbox.begin(), outbox.end());
  }
  return bytes;
}

std::vector<QpAddress> decode_addresses(std::span<const std::byte> bytes, std::size_t count,
                                        Transport transport) {
  if (bytes.size() != count * kQpAddressSize) {
    throw ToolError(ExitCode::connection, "the peer sent " + std::to_string(bytes.size()) +
                                              " bytes of addresses for " + std::to_string(count) +
                                              " QPs (expected " +
                                              std::to_string(count * kQpAddressSize) + ")");
  }
  std::vector<QpAddress> addresses;
  try {
    for (std::size_t i = 0; i < count; ++i) {
      auto rest = bytes.subspan(i * kQpAddressSize, kQpAddressSize);
      QpAddress address;
      if (transport == Transport::ud) {
        address.datagram = ibv::UdAddress::from_bytes(rest.first(ibv::UdAddress::kWireSize));
      } else {
        address.endpoint = ibv::Endpoint::from_bytes(rest.first(ibv::Endpoint::kWireSize));
      }
      rest = rest.subspan(ibv::Endpoint::kWireSize);
      address.inbox =
          ibv::RemoteMemoryRegion::from_bytes(rest.first(ibv::RemoteMemoryRegion::kWireSize));
      address.outbox =
          ibv::RemoteMemoryRegion::from_bytes(rest.subspan(ibv::RemoteMemoryRegion::kWireSize));
      addresses.push_back(address);
    }
  } catch (const std::exception& error) {
    throw ToolError(ExitCode::connection,
                    std::string("the peer sent an invalid address: ") + error.what());
  }
  return addresses;
}

std::string encode_result(const BwResult& result) {
  const nlohmann::ordered_json doc = {
      {"bytes", result.bytes},
      {"iterations", result.iterations},
      {"peak_bytes_per_s", result.stats.peak_bytes_per_s},
      {"avg_bytes_per_s", result.stats.avg_bytes_per_s},
      {"msg_rate_per_s", result.stats.msg_rate_per_s},
  };
  return doc.dump();
}

std::string encode_result(const LatResult& result) {
  const auto& s = result.stats;
  const nlohmann::ordered_json doc = {
      {"bytes", result.bytes},          {"iterations", result.iterations},
      {"t_min_us", s.t_min_us},         {"t_max_us", s.t_max_us},
      {"t_typical_us", s.t_typical_us}, {"t_avg_us", s.t_avg_us},
      {"t_stdev_us", s.t_stdev_us},     {"p99_us", s.p99_us},
      {"p999_us", s.p999_us},
  };
  return doc.dump();
}

BwResult decode_bw_result(std::string_view text) {
  try {
    const auto doc = nlohmann::ordered_json::parse(text);
    BwResult result;
    result.bytes = doc.at("bytes").get<std::uint64_t>();
    result.iterations = doc.at("iterations").get<std::uint64_t>();
    result.stats.peak_bytes_per_s = doc.at("peak_bytes_per_s").get<double>();
    result.stats.avg_bytes_per_s = doc.at("avg_bytes_per_s").get<double>();
    result.stats.msg_rate_per_s = doc.at("msg_rate_per_s").get<double>();
    return result;
  } catch (const std::exception& error) {
    throw ToolError(ExitCode::run_failed,
                    std::string("the client sent a malformed result: ") + error.what());
  }
}

LatResult decode_lat_result(std::string_view text) {
  try {
    const auto doc = nlohmann::ordered_json::parse(text);
    LatResult result;
    result.bytes = doc.at("bytes").get<std::uint64_t>();
    result.iterations = doc.at("iterations").get<std::uint64_t>();
    auto& s = result.stats;
    s.t_min_us = doc.at("t_min_us").get<double>();
    s.t_max_us = doc.at("t_max_us").get<double>();
    s.t_typical_us = doc.at("t_typical_us").get<double>();
    s.t_avg_us = doc.at("t_avg_us").get<double>();
    s.t_stdev_us = doc.at("t_stdev_us").get<double>();
    s.p99_us = doc.at("p99_us").get<double>();
    s.p999_us = doc.at("p999_us").get<double>();
    return result;
  } catch (const std::exception& error) {
    throw ToolError(ExitCode::run_failed,
                    std::string("the client sent a malformed result: ") + error.what());
  }
}

}  // namespace ibvcpp
