// SPDX-License-Identifier: MIT
// Child roles: device tests that need a second process (a peer to kill -9, a rank that dies in
// a barrier) run this same test binary again as `ibv_device_tests --child-role NAME ARGS...`.
// A role is a function registered under a name; main() runs it instead of the tests when asked.
// No second binary to build or find, and the child shares the test's helpers.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ibv::test {

/// A child role: gets the arguments after `--child-role NAME`, returns the process's exit code.
using ChildRole = std::function<int(const std::vector<std::string>& args)>;

/// All registered roles by name.
inline std::map<std::string, ChildRole>& child_roles() {
  static std::map<std::string, ChildRole> roles;
  return roles;
}

/// Registers `role` under `name` at static initialisation:
///   const bool registered = ibv::test::register_child_role("peer", run_peer);
inline bool register_child_role(std::string name, ChildRole role) {
  return child_roles().emplace(std::move(name), std::move(role)).second;
}

/// The command line that runs role `name` with `args` in a new process of this binary, for
/// ChildProcess (tests/support/child_process.hpp).
inline std::vector<std::string> child_role_command(const std::string& name,
                                                   std::vector<std::string> args = {}) {
  std::vector<std::string> argv{"/proc/self/exe", "--child-role", name};
  for (auto& arg : args) argv.push_back(std::move(arg));
  return argv;
}

}  // namespace ibv::test
