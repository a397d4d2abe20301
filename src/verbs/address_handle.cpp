// SPDX-License-Identifier: MIT
// AddressHandle: the address vector built and checked from a GID, a LID, a UdAddress or a
// received completion, then ibv_create_ah; the handle keeps its protection domain alive.
#include "ibv/verbs/address_handle.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "ibv/error.hpp"
#include "verbs/queue_pair_resolve.hpp"

namespace ibv {
namespace {

constexpr std::uint8_t kMaxServiceLevel = 15;
constexpr std::uint32_t kMaxFlowLabel = 0xFFFFF;
constexpr std::size_t kGrhSize = 40;

// The port's attributes; not_found (from query_port) for a port the device does not have.
PortAttributes checked_port(const Context& context, PortNumber port, std::string_view operation) {
  const auto device = context.query_device();
  if (port.value == 0 || port.value > device.physical_port_count) {
    throw Error(ErrorKind::not_found, operation, EINVAL,
                "port " + std::to_string(port.value) + " does not exist on " + context.name() +
                    " (ports 1.." + std::to_string(device.physical_port_count) + ")",
                "ports are numbered from 1; `ibvcpp devices -v` lists them");
  }
  return context.query_port(port);
}

void check_route_settings(const AddressHandleSettings& settings, std::string_view operation) {
  if (settings.service_level > kMaxServiceLevel) {
    throw_invalid_argument(operation, "service_level " + std::to_string(settings.service_level),
                           "is out of range 0..15 (the 4-bit InfiniBand service level)");
  }
  if (settings.flow_label > kMaxFlowLabel) {
    throw_invalid_argument(operation, "flow_label " + std::to_string(settings.flow_label),
                           "does not fit 20 bits (max 1048575)");
  }
}

// The address vector's global route to `gid` from the settings' GID index (checked, or the
// port's default).
void set_global(ibv_ah_attr& attr, const Context& context, const Gid& gid,
                const AddressHandleSettings& settings, LinkLayer link_layer,
                std::string_view operation) {
  std::uint32_t index = 0;
  if (settings.gid_index) {
    (void)detail::checked_gid(context, settings.port, *settings.gid_index, operation);
    index = *settings.gid_index;
  } else if (link_layer == LinkLayer::ethernet) {
    index = context.default_gid_index(settings.port);
  }
  attr.is_global = 1;
  attr.grh.dgid = gid.to_native();
  attr.grh.sgid_index = static_cast<std::uint8_t>(index);
  attr.grh.hop_limit = settings.hop_limit;
  attr.grh.traffic_class = settings.traffic_class;
  attr.grh.flow_label = settings.flow_label;
}

ibv_ah_attr base_attributes(const AddressHandleSettings& settings) {
  ibv_ah_attr attr{};
  attr.port_num = settings.port.value;
  attr.sl = settings.service_level;
  return attr;
}

}  // namespace

detail::AddressHandleState::~AddressHandleState() {
  if (const int rc = ibv_destroy_ah(ah); rc != 0) {
    std::fprintf(stderr, "ibverbs-cpp: ibv_destroy_ah failed (errno %d)\n", rc);
  }
}

namespace {
std::string describe(const ibv_ah_attr& attr) {
  std::string text = "AH to ";
  if (attr.is_global != 0) {
    text += "GID " + Gid(attr.grh.dgid).to_string() + " from GID index " +
            std::to_string(attr.grh.sgid_index);
    if (attr.dlid != 0) text += " LID " + std::to_string(attr.dlid);
  } else {
    text += "LID " + std::to_string(attr.dlid);
  }
  return text + " port " + std::to_string(attr.port_num);
}
}  // namespace

AddressHandle::AddressHandle(const ProtectionDomain& pd, const ibv_ah_attr& attributes,
                             std::string_view operation) {
  auto attr = attributes;
  errno = 0;
  ibv_ah* raw = ibv_create_ah(pd.native(), &attr);
  if (raw == nullptr) {
    throw_verb_error(
        "ibv_create_ah", errno != 0 ? errno : EINVAL,
        std::string(operation) + ": " + describe(attributes) +
            (attributes.is_global != 0 ? " (on RoCE the destination must be reachable from the GID "
                                         "index's netdev)"
                                       : ""));
  }
  std::shared_ptr<detail::AddressHandleState> state;
  try {
    state = std::make_shared<detail::AddressHandleState>(pd, raw);  // owns raw from here
  } catch (...) {
    ibv_destroy_ah(raw);
    throw;
  }
  state->gid = attributes.is_global != 0 ? Gid(attributes.grh.dgid) : Gid{};
  state->lid = attributes.dlid;
  state->global = attributes.is_global != 0;
  state->gid_index = attributes.grh.sgid_index;
  state->port = attributes.port_num;
  state_ = std::move(state);
  ah_ = raw;
}

AddressHandle AddressHandle::to_gid(const ProtectionDomain& pd, const Gid& gid,
                                    const AddressHandleSettings& settings) {
  constexpr std::string_view kOperation = "AddressHandle::to_gid";
  check_route_settings(settings, kOperation);
  const auto port = checked_port(pd.context(), settings.port, kOperation);
  if (gid.is_zero()) {
    throw_invalid_argument(kOperation,
                           "destination GID ::", "is all zero: an unset GID addresses nobody");
  }
  auto attr = base_attributes(settings);
  set_global(attr, pd.context(), gid, settings, port.link_layer, kOperation);
  return {pd, attr, kOperation};
}

AddressHandle AddressHandle::to_lid(const ProtectionDomain& pd, std::uint16_t lid,
                                    const AddressHandleSettings& settings) {
  constexpr std::string_view kOperation = "AddressHandle::to_lid";
  check_route_settings(settings, kOperation);
  const auto port = checked_port(pd.context(), settings.port, kOperation);
  if (port.link_layer == LinkLayer::ethernet) {
    throw_invalid_argument(kOperation, "destination LID " + std::to_string(lid),
                           "can not address anything on a RoCE (Ethernet) port, where LIDs are "
                           "0: address by GID (AddressHandle::to_gid)");
  }
  if (lid == 0) {
    throw_invalid_argument(kOperation, "destination LID 0",
                           "is no unicast LID (is the subnet manager running?)");
  }
  auto attr = base_attributes(settings);
  attr.dlid = lid;
  return {pd, attr, kOperation};
}

AddressHandle AddressHandle::to(const ProtectionDomain& pd, const UdAddress& address,
                                const AddressHandleSettings& settings) {
  constexpr std::string_view kOperation = "AddressHandle::to";
  check_route_settings(settings, kOperation);
  const auto port = checked_port(pd.context(), settings.port, kOperation);
  auto attr = base_attributes(settings);
  if (port.link_layer == LinkLayer::ethernet) {
    if (address.gid.is_zero()) {
      throw_invalid_argument(kOperation, address.to_string(),
                             "has no GID, but this port is RoCE (Ethernet), where the GID is the "
                             "address");
    }
    set_global(attr, pd.context(), address.gid, settings, port.link_layer, kOperation);
    return {pd, attr, kOperation};
  }
  if (address.lid == 0 && (address.gid.is_zero() || !settings.gid_index)) {
    throw_invalid_argument(kOperation, address.to_string(),
                           "has LID 0 on an InfiniBand port; set a GID index to route by GID");
  }
  attr.dlid = address.lid;
  if (settings.gid_index && !address.gid.is_zero()) {
    set_global(attr, pd.context(), address.gid, settings, port.link_layer, kOperation);
  }
  return {pd, attr, kOperation};
}

AddressHandle AddressHandle::reply_to(const ProtectionDomain& pd, const WorkCompletion& received,
                                      std::span<const std::byte> grh, PortNumber port) {
  constexpr std::string_view kOperation = "AddressHandle::reply_to";
  if (!received.ok() || !received.is_receive()) {
    throw_invalid_argument(kOperation, "completion " + received.to_string(),
                           "is not a successful receive: only a received datagram names a "
                           "sender to reply to");
  }
  if (grh.size() < kGrhSize) {
    throw_invalid_argument(kOperation, "GRH area of " + std::to_string(grh.size()) + " bytes",
                           "is shorter than the 40 bytes a UD receive starts with");
  }
  const auto attributes = checked_port(pd.context(), port, kOperation);
  if (attributes.link_layer == LinkLayer::ethernet && !received.has_grh()) {
    throw_invalid_argument(kOperation, "completion " + received.to_string(),
                           "has no GRH, but this port is RoCE (Ethernet), where every datagram "
                           "arrives with one");
  }
  ibv_grh header{};
  std::memcpy(&header, grh.data(), sizeof(header));  // the buffer need not be aligned
  ibv_ah_attr attr{};
  ibv_wc wc = received.native();
  if (const int rc = ibv_init_ah_from_wc(pd.context().native(), port.value, &wc, &header, &attr);
      rc != 0) {
    throw_verb_error("ibv_init_ah_from_wc", errno != 0 ? errno : EINVAL,
                     "from " + received.to_string() + " (source QPN " +
                         std::to_string(received.source_qp()) + ")");
  }
  return {pd, attr, kOperation};
}

AddressHandle AddressHandle::from_attributes(const ProtectionDomain& pd,
                                             const ibv_ah_attr& attributes) {
  constexpr std::string_view kOperation = "AddressHandle::from_attributes";
  AddressHandleSettings settings;
  settings.port = PortNumber{attributes.port_num};
  settings.service_level = attributes.sl;
  settings.flow_label = attributes.is_global != 0 ? attributes.grh.flow_label : 0;
  check_route_settings(settings, kOperation);
  (void)checked_port(pd.context(), settings.port, kOperation);
  if (attributes.is_global != 0) {
    (void)detail::checked_gid(pd.context(), settings.port, attributes.grh.sgid_index, kOperation);
  }
  return {pd, attributes, kOperation};
}

std::string AddressHandle::to_string() const {
  ibv_ah_attr attr{};
  attr.is_global = static_cast<std::uint8_t>(state_->global ? 1 : 0);
  attr.grh.dgid = state_->gid.to_native();
  attr.grh.sgid_index = static_cast<std::uint8_t>(state_->gid_index);
  attr.dlid = state_->lid;
  attr.port_num = state_->port;
  return describe(attr);
}

}  // namespace ibv
