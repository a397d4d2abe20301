// SPDX-License-Identifier: MIT
// Jobs started by Open MPI's mpirun (3 ranks of tests/support/launched_rank.cpp on this host, no
// RDMA device needed), in which one rank leaves during the bootstrap. With PMIx built in: a rank
// that crashes ends the job within seconds with its exit status, and the launcher's report
// (when Open MPI prints one) names it; a rank that closes its bootstrap and exits fails every
// other rank's collective within the timeout, and their errors name it. Without PMIx (the asan
// tree): every rank of a PMIx launch says that this build has no PMIx support, and how to get it.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/net/pmix_bootstrap.hpp"
#include "support/child_process.hpp"
#include "support/text.hpp"

namespace {
namespace launched_job_test {

namespace fs = std::filesystem;
using ibv::test::ChildProcess;
using ibv::test::TemporaryDirectory;
using namespace std::chrono_literals;
using ibv_test::contains;

constexpr int kRanks = 3;
constexpr auto kJobLimit = 60s;       // the whole mpirun job, hard
constexpr auto kWithinTimeout = 15s;  // the ranks' bootstrap timeout (3 s) and a margin

struct Job {
  int status = -1;
  std::string output;
  std::chrono::milliseconds elapsed{};
};

/// mpirun -np 3 launched_rank, rank 1 leaving as `how` ("crash", "finalize") before the last of
/// `collectives` all_gathers.
Job run_job(std::string_view how, int collectives = 1) {
  const fs::path rank_program =
      fs::read_symlink("/proc/self/exe").parent_path() / "ibv_launched_rank";
  EXPECT_EQ(::access(rank_program.c_str(), X_OK), 0) << rank_program << " is not built";
  const TemporaryDirectory logs("launched_job");
  const auto started = std::chrono::steady_clock::now();
  ChildProcess mpirun(
      {"env", "IBV_TEST_LEAVING_RANK=1", "IBV_TEST_LEAVING=" + std::string(how),
       "IBV_TEST_COLLECTIVES=" + std::to_string(collectives), "mpirun", "--allow-run-as-root",
       "--oversubscribe", "--bind-to", "none", "-x", "IBV_TEST_LEAVING_RANK", "-x",
       "IBV_TEST_LEAVING", "-x", "IBV_TEST_COLLECTIVES", "-np", std::to_string(kRanks),
       rank_program.string()},
      kJobLimit, logs.path() / "mpirun.out");
  Job job;
  job.status = mpirun.wait().value_or(-1);  // -1: killed at kJobLimit
  job.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  job.output = mpirun.out();
  return job;
}

/// run_job(), run again (up to twice) when a rank met PMIx's own rare hang in PMIx_Init (about
/// one job in 300 on a loaded machine), which that rank then reports within its timeout: the
/// bound is checked, and the job that did not hang is the one these tests judge.
Job run_job_past_init_hangs(std::string_view how, int collectives) {
  Job job = run_job(how, collectives);
  for (int again = 0; again < 2 && contains(job.output, "PMIx_Init did not finish"); ++again) {
    EXPECT_LT(job.elapsed, kWithinTimeout) << job.output;
    job = run_job(how, collectives);
  }
  return job;
}

/// Every rank said this build has no PMIx support, naming the package and the other ways.
void expect_no_pmix_everywhere(const Job& job) {
  std::size_t errors = 0;
  for (auto at = job.output.find("rank ?: error: "); at != std::string::npos;
       at = job.output.find("rank ?: error: ", at + 1)) {
    ++errors;
  }
  EXPECT_EQ(errors, static_cast<std::size_t>(kRanks)) << job.output;
  EXPECT_TRUE(contains(job.output, "no PMIx support")) << job.output;
  EXPECT_TRUE(contains(job.output, "libpmix-dev")) << job.output;
  EXPECT_TRUE(contains(job.output, "IBV_BOOTSTRAP=host:port")) << job.output;
  EXPECT_FALSE(contains(job.output, "gathered")) << job.output;
}

TEST(LaunchedJob, ARankThatCrashesDuringTheBootstrapIsNamedByTheLauncherWithinSeconds) {
  const Job job = run_job("crash");
  if (!ibv::net::PmixBootstrap::built_in()) {
    expect_no_pmix_everywhere(job);
    return;
  }
  // mpirun ends the job and exits with the status the crashed rank ended with.
  EXPECT_EQ(job.status, 3) << job.output;
  EXPECT_LT(job.elapsed, kWithinTimeout) << job.output;
  // Its report names the process [[jobid,1],rank]: rank 1, with that status. Open MPI 4.1.4
  // leaves that report out now and then on a loaded machine (3 of 160 jobs here, the exit
  // status 3 all the same), printing only "1 process returned a non-zero exit code": so the
  // report, when there is one, must name rank 1.
  if (contains(job.output, "Process name:")) {
    EXPECT_TRUE(contains(job.output, ",1],1]")) << job.output;
    EXPECT_TRUE(contains(job.output, "Exit code:    3")) << job.output;
  } else {
    EXPECT_TRUE(contains(job.output, "1 process returned")) << job.output;
  }
  EXPECT_FALSE(contains(job.output, "gathered")) << job.output;
}

/// Rank 1 leaves cleanly before the last of `collectives` all_gathers: ranks 0 and 2 must fail
/// that collective within the timeout, naming rank 1 and how far it came.
void expect_the_leaver_named(int collectives) {
  const Job job = run_job_past_init_hangs("finalize", collectives);
  if (!ibv::net::PmixBootstrap::built_in()) {
    expect_no_pmix_everywhere(job);
    return;
  }
  EXPECT_LT(job.elapsed, kWithinTimeout) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 1: left")) << job.output;
  const int last = collectives - 1;
  const std::string named = "left the job before it: rank 1 after " + std::to_string(last) +
                            (last == 1 ? " collective" : " collectives");
  for (const std::string_view rank : {"rank 0: error: ", "rank 2: error: "}) {
    const auto line = job.output.find(rank);
    ASSERT_NE(line, std::string::npos) << job.output;
    const std::string text = job.output.substr(line, job.output.find('\n', line) - line);
    EXPECT_TRUE(contains(text, "PMIx_Fence failed for collective " + std::to_string(last))) << text;
    EXPECT_TRUE(contains(text, named)) << text;
    EXPECT_FALSE(contains(text, "rank 0 after") || contains(text, "rank 2 after")) << text;
  }
  EXPECT_FALSE(contains(job.output, "gathered")) << job.output;
}

TEST(LaunchedJob, ARankThatLeavesCleanlyIsNamedInTheOthersErrorsWithinTheTimeout) {
  expect_the_leaver_named(1);
}

TEST(LaunchedJob, ARankThatLeavesCleanlyAfterACollectiveIsNamedWithHowFarItCame) {
  expect_the_leaver_named(2);
}

}  // namespace launched_job_test
}  // namespace
