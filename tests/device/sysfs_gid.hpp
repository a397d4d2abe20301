// SPDX-License-Identifier: MIT
// Device-test helper: the GID index a test expects the library to choose, read from the kernel's
// sysfs GID table (/sys/class/infiniband/<dev>/ports/<port>/gids/<i> and gid_attrs/types/<i>)
// instead of through the library, so that a test of Context::default_gid_index does not compare
// the library's choice with itself.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

namespace ibv::test {

/// One line of a sysfs file, or nullopt when it can not be read (the kernel refuses to read
/// the type of an unused entry).
inline std::optional<std::string> read_sysfs_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  return line;
}

/// The lowest index of the port's sysfs GID table whose entry is RoCE v2 and holds an
/// IPv4-mapped address ("0000:0000:0000:0000:0000:ffff:xxxx:xxxx"): the entry
/// Context::default_gid_index documents that it prefers on Ethernet. nullopt when there is none.
inline std::optional<std::uint32_t> sysfs_roce_v2_ipv4_gid_index(const std::string& device,
                                                                 std::uint32_t port = 1) {
  const std::filesystem::path dir =
      std::filesystem::path("/sys/class/infiniband") / device / "ports" / std::to_string(port);
  for (std::uint32_t index = 0;; ++index) {
    const auto gid = read_sysfs_line(dir / "gids" / std::to_string(index));
    if (!gid) return std::nullopt;  // past the end of the table
    const auto type = read_sysfs_line(dir / "gid_attrs" / "types" / std::to_string(index));
    if (type == "RoCE v2" && gid->starts_with("0000:0000:0000:0000:0000:ffff:")) return index;
  }
}

/// Index 0, which Context::default_gid_index documents as its choice on InfiniBand, when the
/// sysfs table holds a GID there (a port's first GID is its subnet prefix and port GUID).
inline std::optional<std::uint32_t> sysfs_infiniband_gid_index(const std::string& device,
                                                               std::uint32_t port = 1) {
  const auto gid = read_sysfs_line(std::filesystem::path("/sys/class/infiniband") / device /
                                   "ports" / std::to_string(port) / "gids" / "0");
  if (!gid || *gid == "0000:0000:0000:0000:0000:0000:0000:0000") return std::nullopt;
  return 0;
}

}  // namespace ibv::test
