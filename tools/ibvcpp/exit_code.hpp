// SPDX-License-Identifier: MIT
// Exit codes of ibvcpp and the error that carries one up to main().
#pragma once

#include <stdexcept>
#include <string>

namespace ibvcpp {

/// What the process exit status says (documented in tools/ibvcpp/README.md).
enum class ExitCode : int {
  ok = 0,          ///< Success.
  run_failed = 1,  ///< The test failed at run time: a work completion error, the peer vanished
                   ///< or stalled.
  usage = 2,       ///< Bad command line, a size the buffers can not hold, or client and server
                   ///< settings that disagree.
  device = 3,      ///< Unknown device, no such port or GID index, or the device refused a setting.
  connection = 4,  ///< No server at the address (or it did not answer in time), the TCP port is
                   ///< in use, or the peer broke the connection before the test started.
};

/// A failure that ends the program with `code`; what() is the one-line message for stderr.
class ToolError : public std::runtime_error {
 public:
  ToolError(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  [[nodiscard]] ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

/// A usage error (exit status 2).
class UsageError : public ToolError {
 public:
  explicit UsageError(const std::string& message) : ToolError(ExitCode::usage, message) {}
};

}  // namespace ibvcpp
