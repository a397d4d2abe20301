// SPDX-License-Identifier: MIT
// What a rank learns from how it was started: which Bootstrap to use (PMIx under a PMIx
// launcher, a rendezvous when IBV_BOOTSTRAP names its root, else a hosts file) and which RDMA
// device to open when no hosts file names one. With these, `mpirun -np 8 network` needs no
// configuration at all. docs/bootstrap.md tells the story.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "ibv/duration.hpp"
#include "ibv/net/bootstrap.hpp"
#include "ibv/net/launcher.hpp"
#include "ibv/verbs/context.hpp"

namespace ibv::net {

/// What bootstrap_from_environment() may use besides the environment.
struct BootstrapChoice {
  /// A hosts file (NetworkConfig JSON) given by the user: used unless IBV_BOOTSTRAP says
  /// otherwise.
  std::optional<std::filesystem::path> hosts_file{};
  /// This rank (the hosts file and the rendezvous need it). When set it wins over the
  /// launcher's variables, as an explicit `--rank` should; unset, the launcher's rank is used.
  /// PMIx ignores it (the launcher's PMIx server knows every rank).
  std::optional<std::uint32_t> rank{};
  /// The world size (the rendezvous needs it); set, it wins over the launcher's like `rank`.
  std::optional<std::uint32_t> world_size{};
  /// Bound of every collective of the bootstrap made (and of reaching the others); positive.
  Duration timeout{std::chrono::seconds(30)};
};

/// The Bootstrap this process was started for, first match wins:
///  1. IBV_BOOTSTRAP=host:port (or [v6]:port): a Rendezvous with that root; rank and world
///     size from `choice`, else from the launcher's variables (rank_from_launcher()).
///  2. IBV_BOOTSTRAP=pmix: a PmixBootstrap.
///  3. IBV_BOOTSTRAP=hosts, or unset with choice.hosts_file: the Exchanger of that hosts file;
///     the rank from `choice`, else from the launcher, checked against the file (and the
///     launcher's world size against its number of ranks).
///  4. unset, and a PMIx launcher started this process (PmixBootstrap::launched_by_pmix()):
///     a PmixBootstrap.
/// Throws ibv::Error: invalid_argument when nothing applies (the message lists the three
/// ways), for an IBV_BOOTSTRAP value that is none of these (quoted briefly), or when a rank or
/// world size is needed and nobody says it (tests: `BootstrapChoice.NothingAtAllListsTheWaysThere`,
/// `BootstrapChoice.AnIbvBootstrapValueThatIsNoneOfTheWaysIsQuotedBriefly`,
/// `BootstrapChoice.ARendezvousWithoutALauncherTakesTheCallersRankOrSaysWhatIsMissing`);
/// unsupported when PMIx is asked for or the process runs under a PMIx launcher and the library was
/// built without PMIx (test: `BootstrapChoice.PmixWithoutAPmixServerOrWithoutPmixBuiltInSaysWhich`,
/// in a build without PMIx); and the errors of the chosen bootstrap's constructor.
[[nodiscard]] std::unique_ptr<Bootstrap> bootstrap_from_environment(
    const BootstrapChoice& choice = {});
/// The same with the environment read through `lookup` (tests; a launcher's saved environment).
[[nodiscard]] std::unique_ptr<Bootstrap> bootstrap_from_environment(
    const BootstrapChoice& choice, const EnvironmentLookup& lookup);

/// The RDMA device a rank opens when no hosts file names one: IBV_DEVICE when set, either one
/// name or a comma-separated list from which the process with local rank L takes entry
/// L mod count (one rail per local rank; L is `local_rank`, else the launcher's
/// local_rank_from_launcher(), else 0); else the first device with an active port. Set IBV_DEVICE
/// differently per host (e.g. in the job script) where hosts differ. Throws ibv::Error: not_found
/// naming the devices that exist (test:
/// `DeviceFromEnvironment.OpeningADeviceThatDoesNotExistNamesIt`); invalid_argument for an empty
/// entry in IBV_DEVICE (test: `DeviceFromEnvironment.IbvDeviceNamesOneDeviceOrOnePerLocalRank`).
[[nodiscard]] Context open_device_from_environment(std::optional<std::uint32_t> local_rank = {});
/// The same with the environment read through `lookup`.
[[nodiscard]] Context open_device_from_environment(std::optional<std::uint32_t> local_rank,
                                                   const EnvironmentLookup& lookup);

/// The device open_device_from_environment() would open by name, without opening it: the
/// IBV_DEVICE entry for `local_rank`, or nullopt when IBV_DEVICE is not set (the first active
/// device then). Pure; throws like open_device_from_environment() for a bad IBV_DEVICE.
[[nodiscard]] std::optional<std::string> device_name_from_environment(
    std::optional<std::uint32_t> local_rank, const EnvironmentLookup& lookup);

}  // namespace ibv::net
