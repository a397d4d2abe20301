// SPDX-License-Identifier: MIT
// Reading the rank and world size a launcher (Open MPI, Slurm, PMI) put in the environment, and
// checking them against a NetworkConfig.
#include "ibv/net/launcher.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>
#include <system_error>

#include "detail/brief_quote.hpp"
#include "ibv/error.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kOperation = "rank_from_launcher";

// The environment variables of one launcher.
struct Launcher {
  std::string_view rank_variable;
  std::string_view size_variable;
  std::string_view source;
};

// In order of precedence.
constexpr std::array<Launcher, 3> kLaunchers = {{
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK/SIZE"},
    {"PMI_RANK", "PMI_SIZE", "PMI_RANK/SIZE"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_PROCID/NTASKS"},
}};

[[noreturn]] void fail(const std::string& problem) {
  throw Error(ErrorKind::invalid_argument, kOperation, EINVAL, problem);
}

// "NAME=\"value\"" for messages.
std::string setting(std::string_view variable, std::string_view value) {
  return std::string(variable) + "=" + ibv::detail::quote_briefly(value);
}

// A plain decimal integer: digits only, fitting 32 bits.
std::uint32_t parse_number(std::string_view variable, std::string_view value) {
  const bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                    [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    fail(setting(variable, value) + " is not a non-negative decimal integer");
  }
  std::uint32_t number = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (error == std::errc::result_out_of_range) {
    fail(setting(variable, value) + " is too large: above " +
         std::to_string(std::numeric_limits<std::uint32_t>::max()));
  }
  if (error != std::errc{} || end != value.data() + value.size()) {
    fail(setting(variable, value) + " is not a non-negative decimal integer");
  }
  return number;
}

LauncherRank read(const Launcher& launcher, const std::optional<std::string>& rank_value,
                  const std::optional<std::string>& size_value) {
  if (!rank_value) {
    fail(std::string(launcher.size_variable) + " is set but " +
         std::string(launcher.rank_variable) + " is missing: a launcher sets both");
  }
  if (!size_value) {
    fail(std::string(launcher.rank_variable) + " is set but " +
         std::string(launcher.size_variable) + " is missing: a launcher sets both");
  }
  LauncherRank result;
  result.rank = parse_number(launcher.rank_variable, *rank_value);
  result.size = parse_number(launcher.size_variable, *size_value);
  result.source = launcher.source;
  if (result.size == 0) fail(setting(launcher.size_variable, *size_value) + ": the size is 0");
  if (result.rank >= result.size) {
    fail(setting(launcher.rank_variable, *rank_value) + " is not below " +
         setting(launcher.size_variable, *size_value) + ": ranks must be 0..size-1");
  }
  return result;
}

}  // namespace

EnvironmentLookup process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

std::optional<std::uint32_t> local_rank_from_launcher(const EnvironmentLookup& lookup) {
  for (const std::string_view variable :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const auto value = lookup(variable)) return parse_number(variable, *value);
  }
  return std::nullopt;
}

std::optional<LauncherRank> rank_from_launcher() {
  return rank_from_launcher(process_environment());
}

std::optional<LauncherRank> rank_from_launcher(const EnvironmentLookup& lookup) {
  for (const Launcher& launcher : kLaunchers) {
    const auto rank_value = lookup(launcher.rank_variable);
    const auto size_value = lookup(launcher.size_variable);
    if (rank_value || size_value) return read(launcher, rank_value, size_value);
  }
  return std::nullopt;
}

void check_against(const LauncherRank& launcher, const NetworkConfig& config) {
  const std::string source = "the launcher (" + launcher.source + ")";
  const std::size_t hosts = config.world_size();
  if (launcher.size != hosts) {
    throw Error(ErrorKind::invalid_argument, "check_against", EINVAL,
                source + " started " + std::to_string(launcher.size) +
                    " processes but the network configuration has " + std::to_string(hosts) +
                    (hosts == 1 ? " host" : " hosts"),
                "start one process per host of the configuration, or use a configuration with "
                "one host per process");
  }
  if (launcher.rank >= hosts) {
    throw Error(ErrorKind::invalid_argument, "check_against", EINVAL,
                "rank " + std::to_string(launcher.rank) + " from " + source +
                    " is not a rank of the network configuration (0.." + std::to_string(hosts - 1) +
                    ")");
  }
}

}  // namespace ibv::net
