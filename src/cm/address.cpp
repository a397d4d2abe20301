// SPDX-License-Identifier: MIT
// Address parsing and option checks of the rdma_cm layer (pure: no device, no rdma_cm call).
#include "cm/address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cstring>

#include "detail/brief_quote.hpp"
#include "ibv/error.hpp"

namespace ibv::detail {

bool is_any_address(std::string_view address) noexcept {
  return address.empty() || address == "0.0.0.0" || address == "::" || address == "*";
}

SocketAddress parse_address(std::string_view address, std::uint16_t port,
                            std::string_view operation, bool allow_any) {
  SocketAddress result;
  const std::string text(address);
  if (allow_any && (address.empty() || address == "*")) {
    auto* in = reinterpret_cast<sockaddr_in*>(&result.storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(INADDR_ANY);
    result.text = "0.0.0.0:" + std::to_string(port);
    return result;
  }
  if (text.empty() || text.find('\0') != std::string::npos) {
    throw_invalid_argument(operation, "address \"" + text + "\"",
                           "is empty: give the server's IPv4 or IPv6 address, e.g. 10.0.0.1");
  }
  auto* in4 = reinterpret_cast<sockaddr_in*>(&result.storage);
  if (::inet_pton(AF_INET, text.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons(port);
    result.text = text + ":" + std::to_string(port);
    return result;
  }
  // "[::1]" is accepted as well as "::1".
  std::string v6 = text;
  if (v6.size() > 2 && v6.front() == '[' && v6.back() == ']') v6 = v6.substr(1, v6.size() - 2);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&result.storage);
  if (::inet_pton(AF_INET6, v6.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    result.text = "[" + v6 + "]:" + std::to_string(port);
    return result;
  }
  throw_invalid_argument(operation, "address \"" + text + "\"",
                         "is not an IPv4 or IPv6 address literal (e.g. 10.0.0.1 or fe80::1; "
                         "host names are not resolved, and the port is a separate argument)");
}

SocketAddress parse_multicast_group(std::string_view group, std::string_view operation) {
  SocketAddress result;
  const std::string argument = "group " + quote_briefly(group);
  const std::string text(group);
  if (text.empty()) {
    throw_invalid_argument(operation, argument,
                           "is empty: give an IPv4 multicast address (224.0.0.0 to "
                           "239.255.255.255, e.g. 239.1.2.3)");
  }
  auto* in4 = reinterpret_cast<sockaddr_in*>(&result.storage);
  if (text.find('\0') == std::string::npos &&
      ::inet_pton(AF_INET, text.c_str(), &in4->sin_addr) == 1) {
    // 224.0.0.0/4 (class D): the top four bits are 1110.
    if ((ntohl(in4->sin_addr.s_addr) >> 28U) != 0xEU) {
      throw_invalid_argument(operation, argument,
                             "is not a multicast address: IPv4 groups are 224.0.0.0 to "
                             "239.255.255.255 (239.0.0.0/8 for groups of one organisation)");
    }
    in4->sin_family = AF_INET;
    result.text = text;
    return result;
  }
  std::string v6 = text;
  if (v6.size() > 2 && v6.front() == '[' && v6.back() == ']') v6 = v6.substr(1, v6.size() - 2);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&result.storage);
  if (v6.find('\0') == std::string::npos &&
      ::inet_pton(AF_INET6, v6.c_str(), &in6->sin6_addr) == 1) {
    if (in6->sin6_addr.s6_addr[0] != 0xFF) {
      throw_invalid_argument(operation, argument,
                             "is not a multicast address: IPv6 groups start with ff (ff00::/8)");
    }
    in6->sin6_family = AF_INET6;
    result.text = v6;
    return result;
  }
  throw_invalid_argument(operation, argument,
                         "is not an IPv4 or IPv6 multicast address literal (e.g. 239.1.2.3; "
                         "host names are not resolved)");
}

void check_options(const ConnectOptions& options, std::string_view operation) {
  check_positive(options.address_timeout, "address_timeout", operation);
  check_positive(options.route_timeout, "route_timeout", operation);
  check_positive(options.connect_timeout, "connect_timeout", operation);
  const ChannelSettings& channel = options.channel;
  check_positive(channel.timeouts.operation, "channel.timeouts.operation", operation);
  check_positive(channel.timeouts.drop, "channel.timeouts.drop", operation);
  if (channel.queue_pair.gid_index) {
    throw_invalid_argument(
        operation, "channel.queue_pair.gid_index " + std::to_string(*channel.queue_pair.gid_index),
        "is set, but with rdma_cm the GID comes from the address: leave it unset (rdma_cm picks "
        "the RoCE v2 entry of the address's netdev)");
  }
  if (channel.completion_queue_size && *channel.completion_queue_size <= 0) {
    throw_invalid_argument(
        operation,
        "channel.completion_queue_size " + std::to_string(*channel.completion_queue_size),
        "is not positive");
  }
}

}  // namespace ibv::detail
