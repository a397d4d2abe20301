// SPDX-License-Identifier: MIT
// Helpers of the multicast device tests: group addresses per test program, the test device's
// netdev, and the kernel's IGMP membership count of a group (/proc/net/igmp), read without the
// library so that a test of MulticastGroup does not check the library against itself.
#pragma once

#include <arpa/inet.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "device_fixture.hpp"

namespace ibv::test {

/// Groups of this test program: 239.255.<pid-derived>.N, so that test programs running at once
/// do not share groups.
inline std::string test_group(int n) {
  const int pid_part = static_cast<int>(::getpid() % 250);
  return "239.255." + std::to_string(pid_part) + "." + std::to_string(n);
}

/// The netdev of the test device's GID (dummy0, rh0, ...).
inline std::string test_netdev() {
  const Context context = open_test_device();
  return context.query_gid(test_gid_index(context)).netdev;
}

/// How many memberships the kernel counts for IPv4 `group` on `netdev` (the "Users" column of
/// /proc/net/igmp), 0 when the interface has not joined it.
inline int igmp_users(const std::string& netdev, const std::string& group) {
  std::uint32_t wanted = 0;  // /proc/net/igmp prints the address as the host reads its bytes
  if (inet_pton(AF_INET, group.c_str(), &wanted) != 1) return -1;
  std::array<char, 9> hex{};
  std::snprintf(hex.data(), hex.size(), "%08X", wanted);
  std::ifstream in("/proc/net/igmp");
  std::string line;
  bool in_device = false;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!line.empty() && line[0] != '\t' && line[0] != ' ') {
      std::string index;
      std::string device;
      fields >> index >> device;  // "2	dummy0    :     1      V3"
      in_device = device == netdev;
      continue;
    }
    std::string address;
    int users = 0;
    fields >> address >>
        users;  // "				010000E0     1 0:00000000		0"
    if (in_device && address == hex.data()) return users;
  }
  return 0;
}

}  // namespace ibv::test
