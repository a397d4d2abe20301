// SPDX-License-Identifier: MIT
// Private: the pure checks of the rdma_cm layer, done before anything is created: parsing an
// IP address literal into a socket address, and validating ConnectOptions.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "detail/positive_timeout.hpp"
#include "ibv/cm/connect_options.hpp"

namespace ibv::detail {

/// An IPv4 or IPv6 socket address with its port, as rdma_cm takes it.
struct SocketAddress {
  sockaddr_storage storage{};
  /// "10.0.0.1:7471" or "[fe80::1]:7471".
  std::string text;

  [[nodiscard]] sockaddr* native() noexcept { return reinterpret_cast<sockaddr*>(&storage); }
};

/// Whether a listener's address means "every address": "", "0.0.0.0", "::" or "*".
[[nodiscard]] bool is_any_address(std::string_view address) noexcept;

/// Parses an IPv4 (dotted quad) or IPv6 literal; names are not resolved. With `allow_any`
/// (listeners), is_any_address() strings give the IPv4 wildcard ("::" the IPv6 one). Throws
/// ibv::Error (invalid_argument) naming `operation` and the address, with a hint.
[[nodiscard]] SocketAddress parse_address(std::string_view address, std::uint16_t port,
                                          std::string_view operation, bool allow_any);

/// Parses a multicast group's address: an IPv4 literal in 224.0.0.0/4 or an IPv6 literal in
/// ff00::/8 (port 0; names are not resolved). Throws ibv::Error (invalid_argument) naming
/// `operation` and the text (quoted briefly), saying what a group address is: a unicast, the
/// wildcard or broadcast address, a name or anything else is refused.
[[nodiscard]] SocketAddress parse_multicast_group(std::string_view group,
                                                  std::string_view operation);

/// Checks what can be checked without a device: every timeout positive, gid_index unset, a
/// completion queue size positive if given. Throws ibv::Error (invalid_argument).
void check_options(const ConnectOptions& options, std::string_view operation);

}  // namespace ibv::detail
