// SPDX-License-Identifier: MIT
// ibvcpp: RDMA devices and perftest-style benchmarks on ibverbs-cpp. See README.md here.
#include <cstdio>
#include <exception>
#include <string_view>
#include <variant>
#include <vector>

#include "ibvcpp/devices.hpp"
#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/options.hpp"
#include "ibvcpp/perf.hpp"

namespace {

int dispatch(const ibvcpp::Command& command) {
  if (const auto* help = std::get_if<ibvcpp::HelpRequest>(&command)) {
    std::fputs(help->text.c_str(), stdout);
    return 0;
  }
  if (const auto* devices = std::get_if<ibvcpp::DevicesOptions>(&command)) {
    return ibvcpp::run_devices(*devices);
  }
  return ibvcpp::run_perf(std::get<ibvcpp::PerfOptions>(command));
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines in order, also through a pipe
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  try {
    return dispatch(ibvcpp::parse_command_line(args));
  } catch (const ibvcpp::UsageError& error) {
    std::fprintf(stderr, "ibvcpp: %s\n(see 'ibvcpp -h')\n", error.what());
    return static_cast<int>(ibvcpp::ExitCode::usage);
  } catch (const ibvcpp::ToolError& error) {
    std::fprintf(stderr, "ibvcpp: %s\n", error.what());
    return static_cast<int>(error.code());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ibvcpp: %s\n", error.what());
    return static_cast<int>(ibvcpp::ExitCode::run_failed);
  }
}
