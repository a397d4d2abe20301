// SPDX-License-Identifier: MIT
// ibvcpp devices.
#include "ibvcpp/devices.hpp"

#include <array>
#include <cstdio>
#include <exception>

#include <nlohmann/json.hpp>

#include "ibv/version.hpp"
#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/text.hpp"

namespace ibvcpp {
namespace {

std::string hex(std::uint32_t value) { return format_text("0x%x", value); }

nlohmann::ordered_json port_json(const PortReport& port) {
  const auto& a = port.attributes;
  nlohmann::ordered_json gids = nlohmann::ordered_json::array();
  for (const auto& gid : port.gids) {
    gids.push_back({{"index", gid.index},
                    {"gid", gid.gid.to_string()},
                    {"type", std::string(ibv::to_string(gid.type))},
                    {"netdev", gid.netdev}});
  }
  return {{"port", a.port},
          {"state", std::string(ibv::to_string(a.state))},
          {"link_layer", std::string(ibv::to_string(a.link_layer))},
          {"active_mtu", a.active_mtu.bytes()},
          {"max_mtu", a.max_mtu.bytes()},
          {"lid", a.lid},
          {"gids", gids}};
}

}  // namespace

std::vector<DeviceReport> collect_devices(bool verbose) {
  std::vector<DeviceReport> reports;
  for (auto& info : ibv::list_devices()) {
    DeviceReport report{std::move(info), std::nullopt, {}, {}};
    if (verbose) {
      try {
        const ibv::Context context = ibv::open_device(report.info.name);
        report.attributes = context.query_device();
        for (std::uint8_t port = 1; port <= report.attributes->physical_port_count; ++port) {
          const ibv::PortNumber number{port};
          report.ports.push_back({context.query_port(number), context.gid_table(number)});
        }
      } catch (const std::exception& error) {
        report.error = error.what();
      }
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

std::string format_devices_text(const std::vector<DeviceReport>& devices, bool verbose) {
  std::string text;
  if (!verbose) {
    text += format_text("    %-16s  %-19s  %-10s  %s\n", "device", "node GUID", "node type",
                        "transport");
    text += format_text("    %-16s  %-19s  %-10s  %s\n", "------", "-------------------",
                        "----------", "----------");
    for (const auto& d : devices) {
      text += format_text("    %-16s  %-19s  %-10s  %s\n", d.info.name.c_str(),
                          d.info.node_guid.to_string().c_str(),
                          std::string(ibv::to_string(d.info.node_type)).c_str(),
                          std::string(ibv::to_string(d.info.transport)).c_str());
    }
    return text;
  }
  for (const auto& d : devices) {
    text += d.info.name + ": node GUID " + d.info.node_guid.to_string() + ", " +
            std::string(ibv::to_string(d.info.node_type)) + ", " +
            std::string(ibv::to_string(d.info.transport)) + "\n";
    if (!d.error.empty()) {
      text += "  error: " + d.error + "\n";
      continue;
    }
    if (d.attributes) {
      const auto& a = *d.attributes;
      text += "  firmware " + (a.firmware_version.empty() ? std::string("-") : a.firmware_version) +
              ", vendor " + hex(a.vendor_id) + " part " + std::to_string(a.vendor_part_id) + ", " +
              std::to_string(a.physical_port_count) + " port(s), max QPs " +
              std::to_string(a.max_qp) + ", max QP WRs " + std::to_string(a.max_qp_wr) + "\n";
    }
    for (const auto& port : d.ports) {
      const auto& p = port.attributes;
      text +=
          format_text("  port %u: %s, link layer %s, active MTU %u (max %u), LID %u\n",
                      static_cast<unsigned>(p.port), std::string(ibv::to_string(p.state)).c_str(),
                      std::string(ibv::to_string(p.link_layer)).c_str(), p.active_mtu.bytes(),
                      p.max_mtu.bytes(), static_cast<unsigned>(p.lid));
      if (port.gids.empty()) {
        text += "    no GID entries\n";
        continue;
      }
      text += format_text("    %-5s  %-39s  %-7s  %s\n", "index", "GID", "type", "netdev");
      for (const auto& gid : port.gids) {
        text += format_text("    %-5u  %-39s  %-7s  %s\n", gid.index, gid.gid.to_string().c_str(),
                            std::string(ibv::to_string(gid.type)).c_str(),
                            gid.netdev.empty() ? "-" : gid.netdev.c_str());
      }
    }
  }
  return text;
}

std::string format_devices_json(const std::vector<DeviceReport>& devices, bool verbose) {
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const auto& d : devices) {
    nlohmann::ordered_json device = {{"name", d.info.name},
                                     {"node_guid", d.info.node_guid.to_string()},
                                     {"node_type", std::string(ibv::to_string(d.info.node_type))},
                                     {"transport", std::string(ibv::to_string(d.info.transport))}};
    if (verbose) {
      if (!d.error.empty()) device["error"] = d.error;
      if (d.attributes) {
        device["firmware_version"] = d.attributes->firmware_version;
        device["vendor_id"] = d.attributes->vendor_id;
        device["vendor_part_id"] = d.attributes->vendor_part_id;
      }
      nlohmann::ordered_json ports = nlohmann::ordered_json::array();
      for (const auto& port : d.ports) ports.push_back(port_json(port));
      device["ports"] = ports;
    }
    list.push_back(device);
  }
  const nlohmann::ordered_json doc = {
      {"tool", "ibvcpp"}, {"version", std::string(ibv::version())}, {"devices", list}};
  return doc.dump() + "\n";
}

int run_devices(const DevicesOptions& options) {
  std::vector<DeviceReport> devices;
  try {
    devices = collect_devices(options.verbose);
  } catch (const std::exception& error) {
    throw ToolError(ExitCode::device, error.what());
  }
  const std::string out = options.json ? format_devices_json(devices, options.verbose)
                                       : format_devices_text(devices, options.verbose);
  std::fputs(out.c_str(), stdout);
  if (devices.empty()) std::fputs("ibvcpp: no RDMA devices found\n", stderr);
  bool failed = false;
  for (const auto& d : devices) {
    if (!d.error.empty()) {
      std::fprintf(stderr, "ibvcpp: %s: %s\n", d.info.name.c_str(), d.error.c_str());
      failed = true;
    }
  }
  return failed ? static_cast<int>(ExitCode::device) : static_cast<int>(ExitCode::ok);
}

}  // namespace ibvcpp
