// SPDX-License-Identifier: MIT
// Tests rank_from_launcher() (each launcher, precedence, partial pairs, malformed values, rank
// not below size, nothing set) through a fake environment, and check_against().
#include "ibv/net/launcher.hpp"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "ibv/net/network_config.hpp"
#include "support/error_matchers.hpp"

namespace {

using ibv::net::LauncherRank;
using ibv::net::rank_from_launcher;
using ibv_test::throws_invalid_argument;

using Environment = std::map<std::string, std::string, std::less<>>;

// rank_from_launcher() over a fake environment.
std::optional<LauncherRank> from(const Environment& environment) {
  return rank_from_launcher([&](std::string_view name) -> std::optional<std::string> {
    const auto it = environment.find(name);
    if (it == environment.end()) return std::nullopt;
    return it->second;
  });
}

LauncherRank expected(std::uint32_t rank, std::uint32_t size, std::string source) {
  return LauncherRank{.rank = rank, .size = size, .source = std::move(source)};
}

ibv::net::NetworkConfig network_of(std::uint32_t size) {
  ibv::net::NetworkConfigBuilder builder;
  for (std::uint32_t rank = 0; rank < size; ++rank) {
    builder.add_host({.rank = rank,
                      .hostname = "node" + std::to_string(rank),
                      .port = 18515,
                      .ibdev = "rxe0",
                      .comment = ""});
  }
  return builder.build();
}

// --- Each launcher ---------------------------------------------------------------------------

TEST(LauncherRank, NothingSetIsNullopt) {
  EXPECT_EQ(from({}), std::nullopt);
  EXPECT_EQ(from({{"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"SLURM_JOB_ID", "7"}}), std::nullopt);
}

TEST(LauncherRank, ReadsOpenMpi) {
  EXPECT_EQ(from({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}}),
            expected(3, 8, "OMPI_COMM_WORLD_RANK/SIZE"));
}

TEST(LauncherRank, ReadsSlurm) {
  EXPECT_EQ(from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}),
            expected(0, 1, "SLURM_PROCID/NTASKS"));
}

TEST(LauncherRank, ReadsPmi) {
  EXPECT_EQ(from({{"PMI_RANK", "15"}, {"PMI_SIZE", "16"}}), expected(15, 16, "PMI_RANK/SIZE"));
}

TEST(LauncherRank, AcceptsTheLargest32BitValues) {
  EXPECT_EQ(from({{"PMI_RANK", "4294967294"}, {"PMI_SIZE", "4294967295"}}),
            expected(4294967294U, 4294967295U, "PMI_RANK/SIZE"));
}

TEST(LauncherRank, ReadsTheRealEnvironmentWithoutThrowing) {
  // Under mpirun or srun this finds the launcher; elsewhere it is nullopt. Either way the
  // result, if any, is consistent.
  const auto launcher = rank_from_launcher();
  if (launcher) {
    EXPECT_LT(launcher->rank, launcher->size);
  }
}

// --- Precedence ------------------------------------------------------------------------------

TEST(LauncherRank, OpenMpiComesBeforePmiAndSlurm) {
  EXPECT_EQ(from({{"OMPI_COMM_WORLD_RANK", "1"},
                  {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"SLURM_PROCID", "0"},
                  {"SLURM_NTASKS", "1"},
                  {"PMI_RANK", "5"},
                  {"PMI_SIZE", "9"}}),
            expected(1, 2, "OMPI_COMM_WORLD_RANK/SIZE"));
}

TEST(LauncherRank, PmiComesBeforeSlurm) {
  // mpiexec inside a Slurm allocation: SLURM_* are inherited from the allocation, PMI_* are
  // this process's own.
  EXPECT_EQ(
      from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"PMI_RANK", "5"}, {"PMI_SIZE", "9"}}),
      expected(5, 9, "PMI_RANK/SIZE"));
}

TEST(LauncherRank, AHalfSetEarlierPairIsAnErrorNotSkipped) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)from({{"PMI_RANK", "0"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
      },
      {"PMI_RANK is set but PMI_SIZE is missing"}));
}

// --- Partial pairs ---------------------------------------------------------------------------

TEST(LauncherRank, APairWithOneVariableNamesTheMissingOne) {
  struct Pair {
    std::string rank;
    std::string size;
  };
  const std::array<Pair, 3> pairs = {{{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                      {"SLURM_PROCID", "SLURM_NTASKS"},
                                      {"PMI_RANK", "PMI_SIZE"}}};
  for (const Pair& pair : pairs) {
    const std::string rank_only = pair.rank + " is set but " + pair.size + " is missing";
    EXPECT_TRUE(throws_invalid_argument(
        [&] {
          (void)from({{pair.rank, "0"}});
        },
        {"rank_from_launcher", rank_only}));
    const std::string size_only = pair.size + " is set but " + pair.rank + " is missing";
    EXPECT_TRUE(throws_invalid_argument([&] { (void)from({{pair.size, "4"}}); }, {size_only}));
  }
}

// --- Bad values ------------------------------------------------------------------------------

TEST(LauncherRank, RejectsValuesThatAreNotPlainDecimalIntegers) {
  for (const char* value : {"", "-1", "3x", " 3", "3 ", "+3", "0x10", "1.0", "three"}) {
    EXPECT_TRUE(throws_invalid_argument(
        [&] {
          (void)from({{"OMPI_COMM_WORLD_RANK", value}, {"OMPI_COMM_WORLD_SIZE", "4"}});
        },
        {"OMPI_COMM_WORLD_RANK=\"" + std::string(value) + "\"",
         "not a non-negative decimal integer"}))
        << '"' << value << '"';
    EXPECT_TRUE(throws_invalid_argument(
        [&] {
          (void)from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", value}});
        },
        {"SLURM_NTASKS=\"" + std::string(value) + "\""}))
        << '"' << value << '"';
  }
}

TEST(LauncherRank, RejectsValuesThatOverflow32Bits) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)from({{"PMI_RANK", "0"}, {"PMI_SIZE", "4294967296"}});
      },
      {"PMI_SIZE=\"4294967296\"", "too large"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)from({{"PMI_RANK", "99999999999999999999999"}, {"PMI_SIZE", "4"}});
      },
      {"PMI_RANK=\"99999999999999999999999\"", "too large"}));
}

TEST(LauncherRank, RejectsARankNotBelowTheSize) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)from({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
      },
      {"OMPI_COMM_WORLD_RANK=\"4\" is not below OMPI_COMM_WORLD_SIZE=\"4\""}));
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)from({{"PMI_RANK", "9"}, {"PMI_SIZE", "2"}});
      },
      {"PMI_RANK=\"9\""}));
}

TEST(LauncherRank, RejectsASizeOfZero) {
  EXPECT_TRUE(throws_invalid_argument(
      [] {
        (void)from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "0"}});
      },
      {"SLURM_NTASKS=\"0\"", "the size is 0"}));
}

// --- check_against ---------------------------------------------------------------------------

TEST(LauncherCheck, AcceptsAMatchingSize) {
  EXPECT_NO_THROW(ibv::net::check_against(expected(2, 3, "PMI_RANK/SIZE"), network_of(3)));
}

TEST(LauncherCheck, ADifferentSizeNamesBothAndTheSource) {
  EXPECT_TRUE(throws_invalid_argument(
      [] { ibv::net::check_against(expected(0, 4, "SLURM_PROCID/NTASKS"), network_of(3)); },
      {"check_against", "SLURM_PROCID/NTASKS", "started 4 processes", "has 3 hosts"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { ibv::net::check_against(expected(0, 2, "PMI_RANK/SIZE"), network_of(1)); },
      {"started 2 processes", "has 1 host"}));
}

TEST(LauncherCheck, ARankOutsideTheConfigurationIsRejected) {
  EXPECT_TRUE(throws_invalid_argument(
      [] { ibv::net::check_against(expected(5, 3, "PMI_RANK/SIZE"), network_of(3)); },
      {"rank 5", "PMI_RANK/SIZE", "0..2"}));
}

}  // namespace
