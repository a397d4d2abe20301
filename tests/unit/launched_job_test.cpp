// Jobs started by Open MPI's mpirun (3 ranks of tests/support/launched_rank.cpp on this host, no
// RDMA device needed), in which one rank leaves during the bootstrap. With PMIx built in: a rank
// that crashes ends the job within seconds and the launcher's report names it; a rank that
// closes its bootstrap and exits fails every other rank's collective within the timeout (PMIx
// does not say which rank is missing). Without PMIx (the asan tree): every rank of a PMIx launch
// says that this build has no PMIx support, and how to get it.
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

/// mpirun -np 3 launched_rank, rank 1 leaving as `how` ("crash", "finalize").
Job run_job(std::string_view how) {
  const fs::path rank_program =
      fs::read_symlink("/proc/self/exe").parent_path() / "ibv_launched_rank";
  EXPECT_EQ(::access(rank_program.c_str(), X_OK), 0) << rank_program << " is not built";
  const TemporaryDirectory logs("launched_job");
  const auto started = std::chrono::steady_clock::now();
  ChildProcess mpirun(
      {"env", "IBV_TEST_LEAVING_RANK=1", "IBV_TEST_LEAVING=" + std::string(how), "mpirun",
       "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "IBV_TEST_LEAVING_RANK",
       "-x", "IBV_TEST_LEAVING", "-np", std::to_string(kRanks), rank_program.string()},
      kJobLimit, logs.path() / "mpirun.out");
  Job job;
  job.status = mpirun.wait().value_or(-1);  // -1: killed at kJobLimit
  job.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  job.output = mpirun.out();
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
  EXPECT_NE(job.status, 0) << job.output;
  EXPECT_LT(job.elapsed, kWithinTimeout) << job.output;
  // Open MPI names a process [[jobid,1],rank]: rank 1, with the status it ended with.
  EXPECT_TRUE(contains(job.output, ",1],1]")) << job.output;
  EXPECT_TRUE(contains(job.output, "Exit code:    3")) << job.output;
  EXPECT_FALSE(contains(job.output, "gathered")) << job.output;
}

TEST(LaunchedJob, ARankThatLeavesCleanlyFailsTheOthersCollectiveWithinTheTimeout) {
  const Job job = run_job("finalize");
  if (!ibv::net::PmixBootstrap::built_in()) {
    expect_no_pmix_everywhere(job);
    return;
  }
  EXPECT_LT(job.elapsed, kWithinTimeout) << job.output;
  EXPECT_TRUE(contains(job.output, "rank 1: left")) << job.output;
  // The PMIx server either sees rank 1 end and fails the fence at once ("a rank of the job
  // ended before entering it"), or waits for it until the fence's timeout: which one depends on
  // when rank 1 ends. Neither names rank 1 (PMIx does not say which rank is missing).
  for (const std::string_view rank : {"rank 0: error: ", "rank 2: error: "}) {
    const auto line = job.output.find(rank);
    ASSERT_NE(line, std::string::npos) << job.output;
    const std::string text = job.output.substr(line, job.output.find('\n', line) - line);
    EXPECT_TRUE(contains(text, "PMIx_Fence failed for collective 0")) << text;
    EXPECT_TRUE(contains(text, "a rank of the job ended before entering it") ||
                contains(text, "TIMEOUT"))
        << text;
  }
  EXPECT_FALSE(contains(job.output, "gathered")) << job.output;
}

}  // namespace launched_job_test
}  // namespace
