// SPDX-License-Identifier: MIT
// Device discovery and opening by name or by the first active port.
#include "ibv/verbs/device.hpp"

#include <endian.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "ibv/error.hpp"

namespace ibv {
namespace {

constexpr std::string_view kNoDeviceHint =
    "list the devices with `ibvcpp devices` or `ibv_devices`; with none at all, load a driver "
    "(for Soft-RoCE: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0`)";

struct DeviceList {
  DeviceList() {
    errno = 0;
    devices = ibv_get_device_list(&count);
    if (devices == nullptr) {
      const int error = errno != 0 ? errno : ENOSYS;
      // No uverbs support at all reads as "no devices" for listing; opening reports it.
      if (error == ENOSYS) count = 0;
      else throw_verb_error("ibv_get_device_list", error);
    }
  }
  ~DeviceList() {
    if (devices != nullptr) ibv_free_device_list(devices);
  }
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  DeviceList(DeviceList&&) = delete;
  DeviceList& operator=(DeviceList&&) = delete;

  [[nodiscard]] std::span<ibv_device*> view() const {
    if (devices == nullptr) return {};
    return {devices, static_cast<std::size_t>(count)};
  }

  ibv_device** devices = nullptr;
  int count = 0;
};

NodeType node_type_of(ibv_node_type type) {
  switch (type) {
    case IBV_NODE_CA: return NodeType::ca;
    case IBV_NODE_SWITCH: return NodeType::switch_node;
    case IBV_NODE_ROUTER: return NodeType::router;
    case IBV_NODE_RNIC: return NodeType::rnic;
    case IBV_NODE_USNIC: return NodeType::usnic;
    case IBV_NODE_USNIC_UDP: return NodeType::usnic_udp;
    case IBV_NODE_UNSPECIFIED: return NodeType::unspecified;
    case IBV_NODE_UNKNOWN: break;
  }
  return NodeType::unknown;
}

Transport transport_of(ibv_transport_type type) {
  switch (type) {
    case IBV_TRANSPORT_IB: return Transport::infiniband;
    case IBV_TRANSPORT_IWARP: return Transport::iwarp;
    case IBV_TRANSPORT_USNIC: return Transport::usnic;
    case IBV_TRANSPORT_USNIC_UDP: return Transport::usnic_udp;
    case IBV_TRANSPORT_UNSPECIFIED: return Transport::unspecified;
    case IBV_TRANSPORT_UNKNOWN: break;
  }
  return Transport::unknown;
}

Context open(ibv_device* device) {
  ibv_context* context = ibv_open_device(device);
  if (context == nullptr) {
    throw_verb_error("ibv_open_device", errno != 0 ? errno : ENODEV, ibv_get_device_name(device));
  }
  return Context(context);
}

std::string names_of(const DeviceList& list) {
  std::string names;
  for (ibv_device* device : list.view()) {
    if (!names.empty()) names += ", ";
    names += ibv_get_device_name(device);
  }
  return names.empty() ? "none" : names;
}

}  // namespace

std::string Guid::to_string() const {
  std::array<char, 20> text{};
  std::snprintf(text.data(), text.size(), "%04x:%04x:%04x:%04x",
                static_cast<unsigned>((value >> 48U) & 0xffffU),
                static_cast<unsigned>((value >> 32U) & 0xffffU),
                static_cast<unsigned>((value >> 16U) & 0xffffU),
                static_cast<unsigned>(value & 0xffffU));
  return text.data();
}

std::string_view to_string(NodeType type) noexcept {
  switch (type) {
    case NodeType::ca: return "CA";
    case NodeType::switch_node: return "switch";
    case NodeType::router: return "router";
    case NodeType::rnic: return "RNIC";
    case NodeType::usnic: return "usNIC";
    case NodeType::usnic_udp: return "usNIC UDP";
    case NodeType::unspecified: return "unspecified";
    case NodeType::unknown: break;
  }
  return "unknown";
}

std::string_view to_string(Transport transport) noexcept {
  switch (transport) {
    case Transport::infiniband: return "InfiniBand";
    case Transport::iwarp: return "iWARP";
    case Transport::usnic: return "usNIC";
    case Transport::usnic_udp: return "usNIC UDP";
    case Transport::unspecified: return "unspecified";
    case Transport::unknown: break;
  }
  return "unknown";
}

std::string DeviceInfo::to_string() const {
  return name + "  node GUID " + node_guid.to_string() + "  " +
         std::string(ibv::to_string(node_type)) + "  " + std::string(ibv::to_string(transport));
}

std::vector<DeviceInfo> list_devices() {
  const DeviceList list;
  std::vector<DeviceInfo> result;
  for (ibv_device* device : list.view()) {
    result.push_back(
        DeviceInfo{ibv_get_device_name(device), Guid{be64toh(ibv_get_device_guid(device))},
                   node_type_of(device->node_type), transport_of(device->transport_type)});
  }
  return result;
}

Context open_device(std::string_view name) {
  const DeviceList list;
  for (ibv_device* device : list.view()) {
    if (name == ibv_get_device_name(device)) return open(device);
  }
  throw Error(
      ErrorKind::not_found, "open_device", ENODEV,
      "no RDMA device named \"" + std::string(name) + "\" (devices here: " + names_of(list) + ")",
      kNoDeviceHint);
}

Context open_first_active_device() {
  const DeviceList list;
  std::string seen;
  for (ibv_device* device : list.view()) {
    Context context = open(device);
    const auto attributes = context.query_device();
    for (std::uint8_t port = 1; port <= attributes.physical_port_count; ++port) {
      const auto state = context.query_port(PortNumber{port}).state;
      if (state == PortState::active) return context;
      if (!seen.empty()) seen += ", ";
      seen +=
          context.name() + " port " + std::to_string(port) + " " + std::string(to_string(state));
    }
  }
  throw Error(ErrorKind::not_found, "open_first_active_device", ENODEV,
              "no RDMA device has an active port (" +
                  (seen.empty() ? std::string("no devices") : seen) + ")",
              kNoDeviceHint);
}

}  // namespace ibv
