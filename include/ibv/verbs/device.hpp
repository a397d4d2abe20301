// SPDX-License-Identifier: MIT
// Device discovery: list the RDMA devices of this host and open one by name or the first
// active one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/verbs/context.hpp"

namespace ibv {

/// A 64-bit GUID (node or port) in host byte order, printed as "0011:2233:4455:6677".
struct Guid {
  std::uint64_t value = 0;  ///< The GUID, host byte order.

  /// "0011:2233:4455:6677".
  [[nodiscard]] std::string to_string() const;
  friend constexpr bool operator==(Guid, Guid) noexcept = default;
};

/// What kind of node a device is.
enum class NodeType : std::uint8_t {
  unknown,
  ca,
  switch_node,
  router,
  rnic,
  usnic,
  usnic_udp,
  unspecified
};
/// The transport a device speaks (RoCE devices report infiniband: see Context::port for the
/// link layer).
enum class Transport : std::uint8_t { unknown, infiniband, iwarp, usnic, usnic_udp, unspecified };

/// A name for people: "CA", "switch", "router", "RNIC", "usNIC", ...
[[nodiscard]] std::string_view to_string(NodeType type) noexcept;
/// A name for people: "InfiniBand", "iWARP", "usNIC", ...
[[nodiscard]] std::string_view to_string(Transport transport) noexcept;

/// One entry of the device list, as ibv_devices shows it.
struct DeviceInfo {
  std::string name;                          ///< e.g. "rxe0", "mlx5_0": for open_device().
  Guid node_guid;                            ///< The node GUID.
  NodeType node_type = NodeType::unknown;    ///< What kind of node.
  Transport transport = Transport::unknown;  ///< What it speaks.

  /// "rxe0  node GUID 5054:00ff:fe12:3456  RNIC  InfiniBand".
  [[nodiscard]] std::string to_string() const;
};

/// The RDMA devices of this host (empty when there are none; throws ibv::Error only when the
/// kernel's verbs support itself is missing or unreadable).
[[nodiscard]] std::vector<DeviceInfo> list_devices();

/// Opens the device called `name`. Throws ibv::Error (not_found) naming the devices that do
/// exist when there is none of that name.
[[nodiscard]] Context open_device(std::string_view name);

/// Opens the first device (in list order) that has a port in the ACTIVE state. Throws
/// ibv::Error (not_found) saying what was found when none has.
[[nodiscard]] Context open_first_active_device();

}  // namespace ibv
