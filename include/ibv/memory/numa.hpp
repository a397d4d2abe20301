// SPDX-License-Identifier: MIT
// NUMA placement: which node an RDMA device sits on, pinning the calling thread to a node's
// CPUs, and allocation options for memory on the device's node.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/memory/allocation.hpp"
#include "ibv/verbs/context.hpp"

namespace ibv {

/// The NUMA node of an RDMA device as sysfs tells it, or "unknown" with the reason.
///
/// Looked up in `/sys/class/infiniband/<dev>/device/numa_node` (a PCI device). A software device
/// such as rxe has no device of its own: then the node of its network device
/// (`/sys/class/net/<netdev>/device/numa_node`, the netdev named in `<dev>/parent` or in the GID
/// table's ndevs) is used. A virtual netdev (dummy, veth, lo) has none either, and a PCI device
/// whose firmware reports -1 gives no affinity: both are "unknown", never a guess.
struct DeviceNumaNode {
  std::string device;       ///< The RDMA device's name.
  std::optional<int> node;  ///< nullopt: unknown.
  std::string source;       ///< The sysfs file the node was read from (empty when unknown).
  std::string reason;       ///< Why the node is unknown (empty when known).

  /// Whether the node is known.
  [[nodiscard]] bool known() const noexcept { return node.has_value(); }
  /// "rxe0: NUMA node 0 (from /sys/class/net/eth0/device/numa_node)" or
  /// "rxe0: NUMA node unknown: <reason>".
  [[nodiscard]] std::string to_string() const;
};

/// The NUMA node of the device called `device_name` (see DeviceNumaNode). Throws ibv::Error
/// (not_found) when /sys/class/infiniband has no such device; an unknown node is not an error.
[[nodiscard]] DeviceNumaNode device_numa_node(std::string_view device_name);
/// The NUMA node of an open device.
[[nodiscard]] DeviceNumaNode device_numa_node(const Context& context);

/// What pin_thread_to_node() did: the node, and the CPUs the thread may run on now.
struct ThreadPlacement {
  int node = 0;           ///< The NUMA node the thread is pinned to.
  std::vector<int> cpus;  ///< Read back with sched_getaffinity, ascending.
  /// "thread pinned to NUMA node 0: CPUs 0-3,8".
  [[nodiscard]] std::string to_string() const;
};

/// Restricts the calling thread to the CPUs of NUMA node `node` (the node's cpulist in sysfs,
/// set with sched_setaffinity on this thread only). Throws ibv::Error: not_found for a node that
/// does not exist (listing those that do); unsupported when the system has no NUMA information
/// (/sys/devices/system/node missing) or the node has no CPUs; permission / invalid_argument
/// when the kernel refuses the CPU set (e.g. none of the node's CPUs is in this process's
/// cpuset).
ThreadPlacement pin_thread_to_node(int node);

/// What pin_thread_to_device() did, for the caller to log.
struct DevicePlacement {
  /// The device's node, as device_numa_node() found it.
  DeviceNumaNode device;
  /// Set when the thread was pinned; nullopt when the device's node is unknown (nothing done).
  std::optional<ThreadPlacement> thread;
  /// "rxe0: NUMA node 0 (...); thread pinned to NUMA node 0: CPUs 0-1" or
  /// "rxe0: NUMA node unknown: <reason>; thread not pinned".
  [[nodiscard]] std::string to_string() const;
};

/// Pins the calling thread to the CPUs of the device's NUMA node, when that node is known;
/// otherwise leaves the thread alone and says so in the result (no exception).
DevicePlacement pin_thread_to_device(const Context& context);

/// `options` with numa_node set to the device's node when it is known (unchanged otherwise):
/// `Allocation(size, near_device(context))` allocates on the device's node where there is one.
[[nodiscard]] AllocationOptions near_device(const Context& context, AllocationOptions options = {});

/// The NUMA nodes memory can be allocated on (libnuma's numa_all_nodes), ascending. Throws
/// ibv::Error (unsupported) when NUMA is unavailable.
[[nodiscard]] std::vector<int> numa_nodes();

/// Parses a Linux CPU (or node) list as sysfs writes it: "0-3,8,10-11", optionally ending in a
/// newline; "" is the empty list. Ascending, duplicates removed. Throws ibv::Error
/// (invalid_argument) naming the offending part for anything else.
[[nodiscard]] std::vector<int> parse_cpu_list(std::string_view text);
/// The inverse: "0-3,8,10-11" for {0,1,2,3,8,10,11} (input ascending), "" for none.
[[nodiscard]] std::string format_cpu_list(std::span<const int> cpus);

}  // namespace ibv
