// SPDX-License-Identifier: MIT
// Port-level facts: state, link layer, MTU, and the port attributes a person or the queue pair
// handshake needs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ibv/verbs/mtu.hpp"

namespace ibv {

/// Logical state of a port; only `active` ports carry traffic.
enum class PortState : std::uint8_t { nop, down, init, armed, active, active_defer };
/// Link layer of a port: decides whether a QP is addressed by LID (InfiniBand) or by GID with a
/// global route header (Ethernet, i.e. RoCE).
enum class LinkLayer : std::uint8_t { unspecified, infiniband, ethernet };

/// The verbs name in capitals: "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER", "NOP".
[[nodiscard]] std::string_view to_string(PortState state) noexcept;
/// "InfiniBand", "Ethernet" or "unspecified".
[[nodiscard]] std::string_view to_string(LinkLayer layer) noexcept;

/// Port number, 1-based as in verbs. Validated against the device when used.
struct PortNumber {
  std::uint8_t value = 1;  ///< 1..the device's physical_port_count.
  friend constexpr bool operator==(PortNumber, PortNumber) noexcept = default;
};

/// The attributes of one port, as ibv_query_port reports them.
struct PortAttributes {
  std::uint8_t port = 1;                          ///< The port number, 1-based.
  PortState state = PortState::nop;               ///< Active when it can carry traffic.
  LinkLayer link_layer = LinkLayer::unspecified;  ///< InfiniBand, or Ethernet (RoCE).
  Mtu max_mtu = Mtu::mtu1024();                   ///< The largest path MTU it supports.
  Mtu active_mtu = Mtu::mtu1024();                ///< The MTU in use (the QP default).
  std::uint16_t lid = 0;                          ///< Its LID (InfiniBand; 0 on RoCE).
  std::uint16_t sm_lid = 0;                       ///< The subnet manager's LID (InfiniBand).
  std::uint8_t lmc = 0;                           ///< LID mask control (InfiniBand).
  std::uint32_t gid_table_length = 0;             ///< Entries of its GID table.
  std::uint32_t max_message_size = 0;             ///< Largest message, in bytes.
  std::uint8_t active_width = 0;  ///< Raw IB width code (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x).
  std::uint8_t active_speed = 0;  ///< Raw IB speed code.

  /// A few lines for people: state, link layer, MTUs, LID, GID table size.
  [[nodiscard]] std::string to_string() const;
};

}  // namespace ibv
