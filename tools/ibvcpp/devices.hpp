// SPDX-License-Identifier: MIT
// ibvcpp devices: what ibv_devices and (with -v) a condensed ibv_devinfo -v show a person,
// from the library's device, port and GID-table queries; as text or JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ibv/verbs/context.hpp"
#include "ibv/verbs/device.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/port.hpp"
#include "ibvcpp/options.hpp"

namespace ibvcpp {

/// One port of a device as -v shows it.
struct PortReport {
  ibv::PortAttributes attributes;
  std::vector<ibv::GidEntry> gids;
};

/// One device; `attributes` and `ports` are filled for -v, `error` when the device could not be
/// opened or queried (the listing goes on with the other devices).
struct DeviceReport {
  ibv::DeviceInfo info;
  std::optional<ibv::DeviceAttributes> attributes;
  std::vector<PortReport> ports;
  std::string error;
};

/// Queries every device (and, when `verbose`, its ports and GID tables).
[[nodiscard]] std::vector<DeviceReport> collect_devices(bool verbose);

/// The table (or, verbose, the per-device blocks) for people.
[[nodiscard]] std::string format_devices_text(const std::vector<DeviceReport>& devices,
                                              bool verbose);
/// The JSON document (schema in tools/ibvcpp/README.md), with newline.
[[nodiscard]] std::string format_devices_json(const std::vector<DeviceReport>& devices,
                                              bool verbose);

/// Runs `ibvcpp devices`: prints, returns the exit status (3 when a device could not be
/// queried).
int run_devices(const DevicesOptions& options);

}  // namespace ibvcpp
