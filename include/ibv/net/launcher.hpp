// SPDX-License-Identifier: MIT
// The rank and world size a process launcher (mpirun, srun, a PMI launcher) gave this process,
// read from its environment variables, and the check that it agrees with a NetworkConfig.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ibv/net/network_config.hpp"

namespace ibv::net {

/// This process's place in the job as the launcher set it.
struct LauncherRank {
  std::uint32_t rank = 0;  ///< This process's rank: below size.
  std::uint32_t size = 0;  ///< Number of processes the launcher started: at least 1.
  /// The variables read: "OMPI_COMM_WORLD_RANK/SIZE", "SLURM_PROCID/NTASKS" or "PMI_RANK/SIZE".
  std::string source;

  friend bool operator==(const LauncherRank&, const LauncherRank&) = default;
};

/// Looks up one environment variable by name: its value, or nullopt when it is not set (a
/// variable set to the empty string is set, to "").
using EnvironmentLookup = std::function<std::optional<std::string>(std::string_view name)>;

/// Looks variables up in this process's environment (std::getenv).
[[nodiscard]] EnvironmentLookup process_environment();

/// This process's index among the job's processes on its node, from the first launcher variable
/// that is set: OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID (MPICH, Intel MPI), SLURM_LOCALID.
/// nullopt when none is. Throws ibv::Error (invalid_argument) naming the variable when its
/// value is not a plain decimal 32-bit integer (test:
/// `LocalRankFromLauncher.ReadsTheFirstLaunchersVariable`).
[[nodiscard]] std::optional<std::uint32_t> local_rank_from_launcher(
    const EnvironmentLookup& lookup);

/// rank_from_launcher(lookup) on this process's environment (std::getenv).
[[nodiscard]] std::optional<LauncherRank> rank_from_launcher();

/// The rank and size from the first launcher whose variables are set, in this order:
/// Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), PMI (PMI_RANK, PMI_SIZE), Slurm
/// (SLURM_PROCID, SLURM_NTASKS). nullopt when none of them is set. Throws ibv::Error
/// (invalid_argument) naming the variable when only one of a pair is set, a value is not a
/// plain decimal integer that fits 32 bits ("", "-1", "3x", " 3" are rejected), the size is 0 or
/// the rank is not below the size (tests: `LauncherRank.APairWithOneVariableNamesTheMissingOne`,
/// `LauncherRank.RejectsValuesThatAreNotPlainDecimalIntegers`, `LauncherRank.RejectsASizeOfZero`,
/// `LauncherRank.RejectsARankNotBelowTheSize`).
///
/// The first launcher with any variable set decides. PMI comes before Slurm because PMI_* are
/// set by whatever started this very process: an MPICH or Intel MPI mpiexec inside a Slurm
/// allocation passes on the allocation's SLURM_* variables (SLURM_PROCID is then a proxy's
/// index, not this rank), while srun with a PMI plugin sets both to the same values.
[[nodiscard]] std::optional<LauncherRank> rank_from_launcher(const EnvironmentLookup& lookup);

/// Throws ibv::Error (invalid_argument) when the launcher started a different number of
/// processes than `config` has hosts (the message names both numbers and launcher.source), or when
/// launcher.rank is not a rank of `config` (tests:
/// `LauncherCheck.ADifferentSizeNamesBothAndTheSource`,
/// `LauncherCheck.ARankOutsideTheConfigurationIsRejected`).
void check_against(const LauncherRank& launcher, const NetworkConfig& config);

}  // namespace ibv::net
