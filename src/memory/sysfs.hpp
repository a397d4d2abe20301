// SPDX-License-Identifier: MIT
// Private: reading the small text files of sysfs and procfs that the memory helpers consult
// (huge page counts, NUMA nodes, device links), with an injectable root for the unit tests.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "ibv/memory/numa.hpp"

namespace ibv::detail {

/// The whole content of a small file, nullopt when it can not be read.
[[nodiscard]] std::optional<std::string> read_text_file(const std::string& path);
/// The file's content as a non-negative integer (surrounding white space allowed), nullopt
/// when unreadable or not a number.
[[nodiscard]] std::optional<long long> read_integer_file(const std::string& path);

/// "2 MiB", "1 GiB", "4 KiB", "5000 B": exact binary units where the size is a multiple.
[[nodiscard]] std::string size_text(std::size_t bytes);

/// device_numa_node() with the sysfs tree at `sys_root` ("/sys" in production).
[[nodiscard]] DeviceNumaNode device_numa_node_in(const std::string& sys_root,
                                                 std::string_view device_name);
/// The CPUs of NUMA node `node` from `<sys_root>/devices/system/node/node<N>/cpulist`. Throws
/// ibv::Error: unsupported when there is no node directory at all, not_found for a missing
/// node (listing the online ones).
[[nodiscard]] std::vector<int> node_cpus_in(const std::string& sys_root, int node);

}  // namespace ibv::detail
