// SPDX-License-Identifier: MIT
// Context: device, port and GID table queries, and the default GID index choice.
#include "ibv/verbs/context.hpp"

#include <infiniband/verbs.h>
#include <net/if.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <string>

#include "ibv/error.hpp"

namespace ibv {
namespace {

PortState port_state_of(ibv_port_state state) {
  switch (state) {
    case IBV_PORT_DOWN: return PortState::down;
    case IBV_PORT_INIT: return PortState::init;
    case IBV_PORT_ARMED: return PortState::armed;
    case IBV_PORT_ACTIVE: return PortState::active;
    case IBV_PORT_ACTIVE_DEFER: return PortState::active_defer;
    case IBV_PORT_NOP: break;
  }
  return PortState::nop;
}

LinkLayer link_layer_of(std::uint8_t layer) {
  switch (layer) {
    case IBV_LINK_LAYER_INFINIBAND: return LinkLayer::infiniband;
    case IBV_LINK_LAYER_ETHERNET: return LinkLayer::ethernet;
    default: return LinkLayer::unspecified;
  }
}

GidType gid_type_of(std::uint32_t type) {
  switch (type) {
    case IBV_GID_TYPE_ROCE_V1: return GidType::roce_v1;
    case IBV_GID_TYPE_ROCE_V2: return GidType::roce_v2;
    default: return GidType::infiniband;
  }
}

GidEntry entry_of(const ibv_gid_entry& raw) {
  GidEntry entry{Gid(raw.gid),
                 raw.gid_index,
                 static_cast<std::uint8_t>(raw.port_num),
                 gid_type_of(raw.gid_type),
                 {}};
  if (raw.ndev_ifindex != 0) {
    std::array<char, IF_NAMESIZE> name{};
    if (if_indextoname(raw.ndev_ifindex, name.data()) != nullptr) entry.netdev = name.data();
  }
  return entry;
}

std::string list_entries(const std::vector<GidEntry>& entries) {
  if (entries.empty()) return "none";
  std::string text;
  for (const auto& entry : entries) {
    if (!text.empty()) text += "; ";
    text += entry.to_string();
  }
  return text;
}

}  // namespace

namespace {
// Checked before the shared_ptr exists: its deleter must never see a null context.
ibv_context* non_null(ibv_context* context) {
  if (context == nullptr) throw_invalid_argument("Context", "context", "is null");
  return context;
}
}  // namespace

Context::Context(ibv_context* owned)
    : context_(non_null(owned), [](ibv_context* context) {
        if (ibv_close_device(context) != 0) {
          std::fprintf(stderr, "ibverbs-cpp: ibv_close_device failed (errno %d)\n", errno);
        }
      }) {}

std::string Context::name() const { return ibv_get_device_name(context_->device); }

DeviceAttributes Context::query_device() const {
  ibv_device_attr raw{};
  if (const int rc = ibv_query_device(context_.get(), &raw); rc != 0) {
    throw_verb_error("ibv_query_device", rc, name());
  }
  DeviceAttributes attributes;
  attributes.firmware_version = raw.fw_ver;
  attributes.node_guid = raw.node_guid;
  attributes.vendor_id = raw.vendor_id;
  attributes.vendor_part_id = raw.vendor_part_id;
  attributes.max_mr_size = raw.max_mr_size;
  attributes.max_qp = raw.max_qp;
  attributes.max_qp_wr = raw.max_qp_wr;
  attributes.max_sge = raw.max_sge;
  attributes.max_cq = raw.max_cq;
  attributes.max_cqe = raw.max_cqe;
  attributes.max_mr = raw.max_mr;
  attributes.max_pd = raw.max_pd;
  attributes.max_qp_rd_atom = raw.max_qp_rd_atom;
  attributes.max_qp_init_rd_atom = raw.max_qp_init_rd_atom;
  attributes.max_srq = raw.max_srq;
  attributes.max_srq_wr = raw.max_srq_wr;
  attributes.max_srq_sge = raw.max_srq_sge;
  attributes.physical_port_count = raw.phys_port_cnt;
  attributes.atomics = raw.atomic_cap != IBV_ATOMIC_NONE;
  return attributes;
}

PortAttributes Context::query_port(PortNumber port) const {
  ibv_port_attr raw{};
  if (const int rc = ibv_query_port(context_.get(), port.value, &raw); rc != 0) {
    throw Error(rc == EINVAL ? ErrorKind::not_found : ErrorKind::driver, "ibv_query_port", rc,
                name() + " has no port " + std::to_string(port.value),
                "ports are numbered from 1; `ibvcpp devices -v` lists them");
  }
  PortAttributes attributes;
  attributes.port = port.value;
  attributes.state = port_state_of(raw.state);
  attributes.link_layer = link_layer_of(raw.link_layer);
  attributes.max_mtu = Mtu::from_native(raw.max_mtu);
  attributes.active_mtu = Mtu::from_native(raw.active_mtu);
  attributes.lid = raw.lid;
  attributes.sm_lid = raw.sm_lid;
  attributes.lmc = raw.lmc;
  attributes.gid_table_length = static_cast<std::uint32_t>(raw.gid_tbl_len);
  attributes.max_message_size = raw.max_msg_sz;
  attributes.active_width = raw.active_width;
  attributes.active_speed = raw.active_speed;
  return attributes;
}

std::vector<GidEntry> Context::gid_table(PortNumber port) const {
  const auto length = query_port(port).gid_table_length;
  std::vector<GidEntry> entries;
  // The device's valid entries in one call (one ioctl), kept for this port. Its size must
  // cover every port's table.
  std::size_t capacity = length;
  const auto ports = query_device().physical_port_count;
  for (unsigned other = 1; other <= ports; ++other) {
    if (other != port.value) {
      capacity += query_port(PortNumber{static_cast<std::uint8_t>(other)}).gid_table_length;
    }
  }
  std::vector<ibv_gid_entry> raw(capacity);
  const ssize_t valid = ibv_query_gid_table(context_.get(), raw.data(), raw.size(), 0);
  if (valid >= 0) {
    raw.resize(static_cast<std::size_t>(valid));
    std::sort(raw.begin(), raw.end(), [](const ibv_gid_entry& a, const ibv_gid_entry& b) {
      return a.gid_index < b.gid_index;
    });
    for (const auto& entry : raw) {
      if (entry.port_num == port.value) entries.push_back(entry_of(entry));
    }
    return entries;
  }
  // Kernels without the table query (before 5.9): one query per index (1024 on rxe).
  for (std::uint32_t index = 0; index < length; ++index) {
    ibv_gid_entry one{};
    const int rc = ibv_query_gid_ex(context_.get(), port.value, index, &one, 0);
    if (rc == ENODATA || rc == EINVAL) continue;  // unused entry
    if (rc != 0) throw_verb_error("ibv_query_gid_ex", rc, name());
    entries.push_back(entry_of(one));
  }
  return entries;
}

GidEntry Context::query_gid(std::uint32_t index, PortNumber port) const {
  const auto length = query_port(port).gid_table_length;
  ibv_gid_entry raw{};
  const int rc =
      index < length ? ibv_query_gid_ex(context_.get(), port.value, index, &raw, 0) : ENODATA;
  if (rc == 0) return entry_of(raw);
  if (rc != ENODATA && rc != EINVAL) throw_verb_error("ibv_query_gid_ex", rc, name());
  throw Error(ErrorKind::not_found, "query_gid", rc,
              "GID index " + std::to_string(index) + " is not a valid entry of " + name() +
                  " port " + std::to_string(port.value) + " (table length " +
                  std::to_string(length) + "; valid entries: " + list_entries(gid_table(port)) +
                  ")",
              "leave the GID index unset to choose the RoCE v2 IPv4 entry automatically");
}

std::uint32_t Context::default_gid_index(PortNumber port) const {
  const auto attributes = query_port(port);
  const auto entries = gid_table(port);
  if (attributes.link_layer != LinkLayer::ethernet) {
    return entries.empty() ? 0 : entries.front().index;
  }
  const GidEntry* best = nullptr;
  auto rank = [](const GidEntry& e) {
    if (e.type == GidType::roce_v2 && e.gid.is_ipv4_mapped()) return 3;
    if (e.type == GidType::roce_v2) return 2;
    if (e.type == GidType::roce_v1) return 1;
    return 0;
  };
  for (const auto& entry : entries) {
    if (best == nullptr || rank(entry) > rank(*best)) best = &entry;
  }
  if (best == nullptr) {
    throw Error(ErrorKind::not_found, "default_gid_index", ENODATA,
                name() + " port " + std::to_string(port.value) + " has no GID entries",
                "a RoCE port gets its GIDs from the IP addresses of its netdev: bring the "
                "interface up and give it an address");
  }
  return best->index;
}

std::string_view to_string(PortState state) noexcept {
  switch (state) {
    case PortState::down: return "DOWN";
    case PortState::init: return "INIT";
    case PortState::armed: return "ARMED";
    case PortState::active: return "ACTIVE";
    case PortState::active_defer: return "ACTIVE_DEFER";
    case PortState::nop: break;
  }
  return "NOP";
}

std::string_view to_string(LinkLayer layer) noexcept {
  switch (layer) {
    case LinkLayer::infiniband: return "InfiniBand";
    case LinkLayer::ethernet: return "Ethernet";
    case LinkLayer::unspecified: break;
  }
  return "unspecified";
}

std::string PortAttributes::to_string() const {
  return "port " + std::to_string(port) + ": " + std::string(ibv::to_string(state)) + ", " +
         std::string(ibv::to_string(link_layer)) + ", active MTU " +
         std::to_string(active_mtu.bytes()) + " (max " + std::to_string(max_mtu.bytes()) +
         "), LID " + std::to_string(lid) + ", " + std::to_string(gid_table_length) +
         " GID table entries";
}

std::string DeviceAttributes::to_string() const {
  return "firmware " + (firmware_version.empty() ? std::string("-") : firmware_version) +
         ", vendor 0x" +
         [this] {
           std::array<char, 12> hex{};
           std::snprintf(hex.data(), hex.size(), "%x", vendor_id);
           return std::string(hex.data());
         }() +
         ", " + std::to_string(physical_port_count) + " port(s), max QP " + std::to_string(max_qp) +
         ", max QP WR " + std::to_string(max_qp_wr) + ", max SGE " + std::to_string(max_sge) +
         ", max CQE " + std::to_string(max_cqe) + ", max MR size " + std::to_string(max_mr_size) +
         ", atomics " + (atomics ? "yes" : "no");
}

}  // namespace ibv
