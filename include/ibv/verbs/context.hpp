// SPDX-License-Identifier: MIT
// An open RDMA device (ibv_context): device, port and GID-table queries, and the parent of
// every other verbs object.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/port.hpp"

struct ibv_context;

namespace ibv {

/// Capabilities of a device (the subset of ibv_device_attr that users size things by).
struct DeviceAttributes {
  std::string firmware_version;          ///< As the driver reports it.
  std::uint64_t node_guid = 0;           ///< The node GUID, host byte order.
  std::uint32_t vendor_id = 0;           ///< IEEE vendor id (0x02c9: Mellanox/NVIDIA).
  std::uint32_t vendor_part_id = 0;      ///< The vendor's device id.
  std::uint64_t max_mr_size = 0;         ///< Largest memory region, in bytes.
  std::int32_t max_qp = 0;               ///< Most queue pairs.
  std::int32_t max_qp_wr = 0;            ///< Largest send or receive queue depth.
  std::int32_t max_sge = 0;              ///< Most scatter/gather elements per work request.
  std::int32_t max_cq = 0;               ///< Most completion queues.
  std::int32_t max_cqe = 0;              ///< Largest completion queue.
  std::int32_t max_mr = 0;               ///< Most memory regions.
  std::int32_t max_pd = 0;               ///< Most protection domains.
  std::int32_t max_qp_rd_atom = 0;       ///< Outstanding RDMA reads/atomics a QP may answer.
  std::int32_t max_qp_init_rd_atom = 0;  ///< Outstanding RDMA reads/atomics a QP may start.
  std::int32_t max_srq = 0;              ///< Shared receive queues (0: the device has none).
  std::int32_t max_srq_wr = 0;           ///< Largest shared receive queue.
  std::int32_t max_srq_sge = 0;          ///< Most scatter elements per shared receive.
  std::uint8_t physical_port_count = 0;  ///< Ports, numbered 1..physical_port_count.
  bool atomics = false;                  ///< Whether the device implements RDMA atomics at all.

  /// One line for people: "firmware ..., vendor 0x..., N port(s), max QP ..., max QP WR ...,
  /// max SGE ..., max CQE ..., max MR size ..., atomics yes|no".
  [[nodiscard]] std::string to_string() const;
};

/// An open device. A cheap-to-copy handle: copies share one ibv_context, which is closed when
/// the last copy and the last object created from it (PD, CQ, QP, MR) are gone.
class Context {
 public:
  /// Wraps an ibv_context this handle now owns (closes it). Normally use ibv::open_device.
  explicit Context(ibv_context* owned);

  /// The device's name, e.g. "rxe0" or "mlx5_0".
  [[nodiscard]] std::string name() const;
  /// The device's capabilities (ibv_query_device). Throws ibv::Error when the verb fails.
  [[nodiscard]] DeviceAttributes query_device() const;
  /// Throws ibv::Error (not_found) for a port the device does not have.
  [[nodiscard]] PortAttributes query_port(PortNumber port = {}) const;
  /// The valid entries of a port's GID table, in index order, with type and netdev.
  [[nodiscard]] std::vector<GidEntry> gid_table(PortNumber port = {}) const;
  /// One GID table entry. Throws ibv::Error (not_found) for an index past the table or an
  /// unused entry, listing the valid ones.
  [[nodiscard]] GidEntry query_gid(std::uint32_t index, PortNumber port = {}) const;
  /// The GID index a RoCE connection should use by default: the RoCE v2 entry holding an
  /// IPv4-mapped address, else any RoCE v2 entry, else RoCE v1; on InfiniBand, index 0.
  /// Throws ibv::Error (not_found) with a hint when the port has no usable entry.
  [[nodiscard]] std::uint32_t default_gid_index(PortNumber port = {}) const;

  /// The underlying handle, for verbs this library does not wrap. Stays owned by Context.
  [[nodiscard]] ibv_context* native() const noexcept { return context_.get(); }
  /// The shared owner, for objects that must keep the device open.
  [[nodiscard]] const std::shared_ptr<ibv_context>& shared() const noexcept { return context_; }

 private:
  std::shared_ptr<ibv_context> context_;
};

}  // namespace ibv
