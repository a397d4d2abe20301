// SPDX-License-Identifier: MIT
// Tests how a rank chooses its bootstrap and device from a fake environment:
// bootstrap_from_environment() (IBV_BOOTSTRAP=host:port / pmix / hosts, a hosts file, a PMIx
// launcher, nothing at all, and the errors of each), device_name_from_environment(),
// local_rank_from_launcher() and PmixBootstrap::launched_by_pmix(). Whether PMIx is built in
// decides which error a PMIx request gets; this binary checks the branch it was built with
// (the ci tree has PMIx, the asan tree is built without it).
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ibv/error.hpp"
#include "ibv/net/bootstrap_from_environment.hpp"
#include "ibv/net/exchanger.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/net/pmix_bootstrap.hpp"
#include "ibv/net/rendezvous.hpp"
#include "loopback_exchange.hpp"
#include "support/error_matchers.hpp"

// A named namespace inside the anonymous one: in a unity build (several test files in one
// translation unit) its helpers can not collide with another file's.
namespace {
namespace bootstrap_choice_tests {

using ibv::ErrorKind;
using ibv::net::BootstrapChoice;
using ibv::net::PmixBootstrap;
using ibv_test::throws_error;
using ibv_test::throws_invalid_argument;
using Environment = std::map<std::string, std::string, std::less<>>;

ibv::net::EnvironmentLookup lookup_in(const Environment& environment) {
  return [&environment](std::string_view name) -> std::optional<std::string> {
    const auto it = environment.find(name);
    if (it == environment.end()) return std::nullopt;
    return it->second;
  };
}

std::unique_ptr<ibv::net::Bootstrap> choose(const Environment& environment,
                                            const BootstrapChoice& choice = {}) {
  return ibv::net::bootstrap_from_environment(choice, lookup_in(environment));
}

// A hosts file of `world` ranks on 127.0.0.1 (free ports), removed at the end of the test.
class HostsFile {
 public:
  explicit HostsFile(std::uint32_t world)
      : path_(std::filesystem::temp_directory_path() /
              ("bootstrap_choice_" + std::to_string(::getpid()) + ".json")) {
    std::ofstream(path_) << ibv_test::loopback::loopback_network(world).to_json();
  }
  HostsFile(const HostsFile&) = delete;
  HostsFile& operator=(const HostsFile&) = delete;
  ~HostsFile() { std::filesystem::remove(path_); }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

const Environment kOpenMpiRank1Of3{{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}};

TEST(BootstrapChoice, IbvBootstrapHostPortIsARendezvousWithTheLaunchersRank) {
  Environment environment = kOpenMpiRank1Of3;
  environment["IBV_BOOTSTRAP"] = "node01:18515";
  const auto bootstrap = choose(environment);
  const auto* rendezvous = dynamic_cast<const ibv::net::Rendezvous*>(bootstrap.get());
  ASSERT_NE(rendezvous, nullptr) << bootstrap->description();
  EXPECT_EQ(rendezvous->root(), (ibv::net::RootAddress{.host = "node01", .port = 18515}));
  EXPECT_EQ(bootstrap->rank(), 1U);
  EXPECT_EQ(bootstrap->world_size(), 3U);
}

TEST(BootstrapChoice, ARendezvousWithoutALauncherTakesTheCallersRankOrSaysWhatIsMissing) {
  const Environment environment{{"IBV_BOOTSTRAP", "[::1]:18515"}};
  const auto bootstrap = choose(environment, {.rank = 2, .world_size = 4});
  EXPECT_EQ(bootstrap->rank(), 2U);
  EXPECT_EQ(bootstrap->world_size(), 4U);
  EXPECT_TRUE(throws_invalid_argument([&] { (void)choose(environment); },
                                      {"needs this process's rank and the world size"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)choose(environment, {.rank = 4, .world_size = 4}); }, {"rank 4"}));
}

TEST(BootstrapChoice, TheCallersRankAndWorldSizeWinOverTheLaunchers) {
  Environment environment = kOpenMpiRank1Of3;
  environment["IBV_BOOTSTRAP"] = "node01:18515";
  const auto both = choose(environment, {.rank = 2, .world_size = 4});
  EXPECT_EQ(both->rank(), 2U);
  EXPECT_EQ(both->world_size(), 4U);
  const auto rank_only = choose(environment, {.rank = 0});
  EXPECT_EQ(rank_only->rank(), 0U);
  EXPECT_EQ(rank_only->world_size(), 3U);  // the launcher's
  EXPECT_TRUE(throws_invalid_argument([&] { (void)choose(environment, {.rank = 3}); },
                                      {"rank 3", "world size 3"}));
  // With a hosts file: the caller's rank, and the launcher's world size still checked.
  const HostsFile hosts(3);
  {
    const auto exchanger = choose(kOpenMpiRank1Of3, {.hosts_file = hosts.path(), .rank = 2});
    EXPECT_EQ(exchanger->rank(), 2U);
  }
  const HostsFile two_hosts(2);
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)choose(kOpenMpiRank1Of3, {.hosts_file = two_hosts.path(), .rank = 0}); },
      {"started 3 processes", "2 hosts"}));
}

TEST(BootstrapChoice, AnIbvBootstrapValueThatIsNoneOfTheWaysIsQuotedBriefly) {
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        (void)choose({{"IBV_BOOTSTRAP", "tcp"}});
      },
      {"IBV_BOOTSTRAP=\"tcp\"", "host:port", "pmix", "hosts"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        (void)choose({{"IBV_BOOTSTRAP", "node01:0"}});
      },
      {"1..65535"}));
  const auto error = ibv_test::error_of([&] {
    (void)choose({{"IBV_BOOTSTRAP", std::string(1'000'000, 'x')}});
  });
  ASSERT_TRUE(error.has_value());
  EXPECT_LT(std::string(error->what()).size(), 500U);
}

TEST(BootstrapChoice, AHostsFileIsTheExchangerOfTheLaunchersRank) {
  const HostsFile hosts(3);
  {
    const auto bootstrap = choose(kOpenMpiRank1Of3, {.hosts_file = hosts.path()});
    const auto* exchanger = dynamic_cast<const ibv::net::Exchanger*>(bootstrap.get());
    ASSERT_NE(exchanger, nullptr) << bootstrap->description();
    EXPECT_EQ(exchanger->rank(), 1U);
    EXPECT_EQ(exchanger->world_size(), 3U);
  }  // closes rank 1's port for the next one
  // IBV_BOOTSTRAP=hosts asks for it explicitly; without a file that is an error.
  Environment explicit_hosts = kOpenMpiRank1Of3;
  explicit_hosts["IBV_BOOTSTRAP"] = "hosts";
  EXPECT_NE(dynamic_cast<const ibv::net::Exchanger*>(
                choose(explicit_hosts, {.hosts_file = hosts.path()}).get()),
            nullptr);
  EXPECT_TRUE(throws_invalid_argument([&] { (void)choose(explicit_hosts); },
                                      {"IBV_BOOTSTRAP=hosts", "none was given"}));
}

TEST(BootstrapChoice, AHostsFileAndALauncherThatDisagreeAreRefused) {
  const HostsFile hosts(2);
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)choose(kOpenMpiRank1Of3, {.hosts_file = hosts.path()}); },
                              {"started 3 processes", "2 hosts"}));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)choose({}, {.hosts_file = hosts.path()}); },
                                      {"2 ranks", "nothing says which one"}));
  const auto bootstrap = choose({}, {.hosts_file = hosts.path(), .rank = 1});
  EXPECT_EQ(bootstrap->rank(), 1U);
}

TEST(BootstrapChoice, AnExplicitHostsFileWinsOverAPmixLauncher) {
  const HostsFile hosts(3);
  Environment environment = kOpenMpiRank1Of3;
  environment["PMIX_NAMESPACE"] = "prterun-node01-1@1";
  environment["PMIX_RANK"] = "1";
  EXPECT_NE(dynamic_cast<const ibv::net::Exchanger*>(
                choose(environment, {.hosts_file = hosts.path()}).get()),
            nullptr);
}

TEST(BootstrapChoice, NothingAtAllListsTheWaysThere) {
  EXPECT_TRUE(throws_invalid_argument([&] { (void)choose(kOpenMpiRank1Of3); },
                                      {"IBV_BOOTSTRAP is not set", "mpirun", "hosts file"}));
}

// A PMIx request in a process no PMIx launcher started: with PMIx built in, PMIx_Init fails
// (connection: no server); without it, the library says it is not built in (unsupported),
// naming the package. Both are how "a PMIx launch of a binary built without PMIx" and "PMIx
// asked for outside a PMIx job" look to the user.
TEST(BootstrapChoice, PmixWithoutAPmixServerOrWithoutPmixBuiltInSaysWhich) {
  const Environment launched{{"PMIX_NAMESPACE", "prterun-node01-1@1"}, {"PMIX_RANK", "0"}};
  const Environment asked{{"IBV_BOOTSTRAP", "pmix"}};
  for (const Environment* environment : {&launched, &asked}) {
    if (PmixBootstrap::built_in()) {
      EXPECT_TRUE(
          throws_error(ErrorKind::connection, [&] { (void)choose(*environment); }, {"PMIx_Init"}));
    } else {
      EXPECT_TRUE(throws_error(ErrorKind::unsupported, [&] { (void)choose(*environment); },
                               {"no PMIx support", "libpmix-dev", "IBV_BOOTSTRAP=host:port"}));
    }
  }
}

TEST(BootstrapChoice, LaunchedByPmixNeedsBothVariables) {
  EXPECT_TRUE(
      PmixBootstrap::launched_by_pmix(lookup_in({{"PMIX_NAMESPACE", "n"}, {"PMIX_RANK", "0"}})));
  EXPECT_FALSE(PmixBootstrap::launched_by_pmix(lookup_in({{"PMIX_NAMESPACE", "n"}})));
  EXPECT_FALSE(PmixBootstrap::launched_by_pmix(lookup_in({{"PMIX_RANK", "0"}})));
  EXPECT_FALSE(PmixBootstrap::launched_by_pmix(lookup_in({})));
}

TEST(DeviceFromEnvironment, IbvDeviceNamesOneDeviceOrOnePerLocalRank) {
  using ibv::net::device_name_from_environment;
  EXPECT_EQ(device_name_from_environment(std::nullopt, lookup_in({})), std::nullopt);
  EXPECT_EQ(device_name_from_environment(3, lookup_in({{"IBV_DEVICE", "mlx5_0"}})), "mlx5_0");
  const Environment rails{{"IBV_DEVICE", "mlx5_0,mlx5_1"}};
  EXPECT_EQ(device_name_from_environment(0, lookup_in(rails)), "mlx5_0");
  EXPECT_EQ(device_name_from_environment(1, lookup_in(rails)), "mlx5_1");
  EXPECT_EQ(device_name_from_environment(2, lookup_in(rails)), "mlx5_0");
  // No local rank given: the launcher's, else 0.
  EXPECT_EQ(device_name_from_environment(std::nullopt, lookup_in(rails)), "mlx5_0");
  Environment with_launcher = rails;
  with_launcher["OMPI_COMM_WORLD_LOCAL_RANK"] = "3";
  EXPECT_EQ(device_name_from_environment(std::nullopt, lookup_in(with_launcher)), "mlx5_1");
  for (const std::string_view bad : {"", ",", "mlx5_0,", ",mlx5_0", "a,,b"}) {
    const Environment environment{{"IBV_DEVICE", std::string(bad)}};
    EXPECT_TRUE(throws_invalid_argument(
        [&] { (void)device_name_from_environment(0, lookup_in(environment)); },
        {"IBV_DEVICE=", "empty entry"}))
        << bad;
  }
}

TEST(DeviceFromEnvironment, OpeningADeviceThatDoesNotExistNamesIt) {
  EXPECT_TRUE(throws_error(ErrorKind::not_found,
                           [&] {
                             (void)ibv::net::open_device_from_environment(
                                 0, lookup_in({{"IBV_DEVICE", "no_such_device_here"}}));
                           },
                           {"no_such_device_here"}));
}

TEST(LocalRankFromLauncher, ReadsTheFirstLaunchersVariable) {
  using ibv::net::local_rank_from_launcher;
  EXPECT_EQ(local_rank_from_launcher(lookup_in({})), std::nullopt);
  EXPECT_EQ(local_rank_from_launcher(lookup_in({{"SLURM_LOCALID", "2"}})), 2U);
  EXPECT_EQ(local_rank_from_launcher(lookup_in({{"MPI_LOCALRANKID", "5"}})), 5U);
  EXPECT_EQ(local_rank_from_launcher(
                lookup_in({{"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"SLURM_LOCALID", "2"}})),
            1U);
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        (void)local_rank_from_launcher(lookup_in({{"SLURM_LOCALID", "x1"}}));
      },
      {"SLURM_LOCALID=\"x1\""}));
}

}  // namespace bootstrap_choice_tests
}  // namespace
