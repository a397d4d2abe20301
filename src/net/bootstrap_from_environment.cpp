// SPDX-License-Identifier: MIT
// bootstrap_from_environment() and open_device_from_environment(): the choices a rank makes
// from how it was started.
#include "ibv/net/bootstrap_from_environment.hpp"

#include <cerrno>
#include <string>
#include <string_view>
#include <vector>

#include "detail/brief_quote.hpp"
#include "ibv/error.hpp"
#include "ibv/net/exchanger.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/net/pmix_bootstrap.hpp"
#include "ibv/net/rendezvous.hpp"
#include "ibv/verbs/device.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kChoose = "bootstrap_from_environment";
constexpr std::string_view kDevice = "open_device_from_environment";

[[noreturn]] void nothing_applies() {
  throw Error(ErrorKind::invalid_argument, kChoose, EINVAL,
              "no way for the ranks to find each other: IBV_BOOTSTRAP is not set, no hosts file "
              "was given and no PMIx launcher started this process",
              "start the job with mpirun or srun --mpi=pmix; or set IBV_BOOTSTRAP=host:port (the "
              "address rank 0 listens on) on every rank; or give a hosts file");
}

// This rank and the world size: what the caller gave (an explicit --rank means what it says),
// else the launcher's variables.
LauncherRank rank_and_size(const BootstrapChoice& choice, const EnvironmentLookup& lookup,
                           std::string_view needed_by) {
  const auto launcher = rank_from_launcher(lookup);
  const auto rank = choice.rank ? choice.rank
                    : launcher  ? std::optional(launcher->rank)
                                : std::nullopt;
  const auto size = choice.world_size ? choice.world_size
                    : launcher        ? std::optional(launcher->size)
                                      : std::nullopt;
  if (!rank || !size) {
    throw Error(ErrorKind::invalid_argument, kChoose, EINVAL,
                std::string(needed_by) +
                    " needs this process's rank and the world size, and neither a launcher "
                    "variable (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS) nor "
                    "the caller gave them",
                "start the job with a launcher, or pass the rank and the world size");
  }
  if (*rank >= *size) {
    throw_invalid_argument(kChoose, "rank " + std::to_string(*rank),
                           "is not below the world size " + std::to_string(*size));
  }
  if (!launcher) return {.rank = *rank, .size = *size, .source = "the caller"};
  const bool overridden = choice.rank || choice.world_size;
  return {.rank = *rank,
          .size = *size,
          .source = overridden ? "the caller (over " + launcher->source + ")" : launcher->source};
}

std::unique_ptr<Bootstrap> hosts_file(const BootstrapChoice& choice,
                                      const EnvironmentLookup& lookup) {
  if (!choice.hosts_file) {
    throw Error(ErrorKind::invalid_argument, kChoose, EINVAL,
                "IBV_BOOTSTRAP=hosts asks for a hosts file, and none was given",
                "give the program its hosts file (e.g. --config FILE)");
  }
  NetworkConfig config = NetworkConfig::from_file(*choice.hosts_file);
  std::uint32_t rank = 0;
  if (auto launcher = rank_from_launcher(lookup)) {
    if (choice.rank) {  // the caller's rank wins; the launcher's world size is still checked
      launcher->rank = *choice.rank;
      launcher->source = "the caller (over " + launcher->source + ")";
    }
    check_against(*launcher, config);
    rank = launcher->rank;
  } else if (choice.rank) {
    rank = *choice.rank;
  } else if (config.world_size() != 1) {
    throw Error(ErrorKind::invalid_argument, kChoose, EINVAL,
                "the hosts file has " + std::to_string(config.world_size()) +
                    " ranks and nothing says which one this process is",
                "start the job with a launcher (mpirun, srun), or pass the rank");
  }
  return std::make_unique<Exchanger>(std::move(config), rank,
                                     ExchangerOptions{.timeout = choice.timeout});
}

std::unique_ptr<Bootstrap> pmix(const BootstrapChoice& choice) {
  return std::make_unique<PmixBootstrap>(PmixOptions{.timeout = choice.timeout});
}

}  // namespace

std::unique_ptr<Bootstrap> bootstrap_from_environment(const BootstrapChoice& choice) {
  return bootstrap_from_environment(choice, process_environment());
}

std::unique_ptr<Bootstrap> bootstrap_from_environment(const BootstrapChoice& choice,
                                                      const EnvironmentLookup& lookup) {
  if (const auto variable = lookup("IBV_BOOTSTRAP")) {
    const std::string_view value = *variable;
    if (value == "pmix") return pmix(choice);
    if (value == "hosts") return hosts_file(choice, lookup);
    if (value.find(':') == std::string_view::npos) {
      throw_invalid_argument(kChoose, "IBV_BOOTSTRAP=" + ibv::detail::quote_briefly(value),
                             "is none of host:port (the rendezvous root's address), pmix and "
                             "hosts");
    }
    RootAddress root = RootAddress::parse(value);
    const LauncherRank me = rank_and_size(choice, lookup, "IBV_BOOTSTRAP=" + root.to_string());
    return std::make_unique<Rendezvous>(std::move(root), me.rank, me.size,
                                        RendezvousOptions{.timeout = choice.timeout});
  }
  if (choice.hosts_file) return hosts_file(choice, lookup);
  if (PmixBootstrap::launched_by_pmix(lookup)) return pmix(choice);
  nothing_applies();
}

std::optional<std::string> device_name_from_environment(std::optional<std::uint32_t> local_rank,
                                                        const EnvironmentLookup& lookup) {
  const auto variable = lookup("IBV_DEVICE");
  if (!variable) return std::nullopt;
  std::vector<std::string> names;
  std::string_view rest = *variable;
  while (true) {
    const auto comma = rest.find(',');
    names.emplace_back(rest.substr(0, comma));
    if (names.back().empty()) {
      throw_invalid_argument(kDevice, "IBV_DEVICE=" + ibv::detail::quote_briefly(*variable),
                             "has an empty entry: give one device name, or a comma-separated "
                             "list of them (one per local rank)");
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  const std::uint32_t local = local_rank.value_or(local_rank_from_launcher(lookup).value_or(0));
  return names[local % names.size()];
}

Context open_device_from_environment(std::optional<std::uint32_t> local_rank) {
  return open_device_from_environment(local_rank, process_environment());
}

Context open_device_from_environment(std::optional<std::uint32_t> local_rank,
                                     const EnvironmentLookup& lookup) {
  if (const auto name = device_name_from_environment(local_rank, lookup)) {
    return open_device(*name);
  }
  return open_first_active_device();
}

}  // namespace ibv::net
