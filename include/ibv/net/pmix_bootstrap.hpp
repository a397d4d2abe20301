// SPDX-License-Identifier: MIT
// PmixBootstrap: the Bootstrap of a job started by a PMIx launcher (Open MPI's mpirun, Slurm's
// srun --mpi=pmix, PRRTE's prterun). Rank, world size and local rank come from the launcher's
// PMIx server; collectives are put / commit / fence / get. PMIx support is optional at build
// time (Debian's libpmix-dev, found with pkg-config); without it this class exists and its
// constructor says so.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ibv/duration.hpp"
#include "ibv/net/bootstrap.hpp"
#include "ibv/net/launcher.hpp"

namespace ibv::net {

/// How a PmixBootstrap waits.
struct PmixOptions {
  /// Bound of PMIx_Init and of each fence and get (PMIx's PMIX_TIMEOUT attribute), in whole
  /// seconds, rounded up; positive.
  Duration timeout{std::chrono::seconds(30)};
};

/// A Bootstrap through the PMIx server of the launcher that started this process.
///
/// all_gather: every rank puts one value and the fence collects them all (every rank receives
/// O(N) bytes). all_to_all: every rank puts one value per peer, the fence does not collect,
/// and each rank gets only the values addressed to it from their owners' servers (PMIx's
/// direct modex), so a rank receives O(N) bytes. barrier: a fence without data. Every call is
/// bounded by PmixOptions::timeout; a PMIx error throws ibv::Error (timeout for PMIX_ERR_TIMEOUT,
/// protocol when a value is missing, connection otherwise; untested: `timeout`, `protocol`,
/// `connection`, no test makes a PMIx collective fail) naming the call, the rank and PMIx's own
/// text, and leaves the object unusable (ErrorKind::state; untested: `state`, likewise).
///
/// When a rank dies the launcher usually ends the whole job (mpirun and srun do by default):
/// the other ranks may be killed before any error reaches them; the launcher names the rank.
/// A rank that destroys its PmixBootstrap in good order while the others go on is named, with
/// how many collectives it completed, in the error of their next collective, which fails
/// (docs/bootstrap.md).
///
/// One per process at a time is the intended use (PMIx_Init and PMIx_Finalize are counted, so
/// more work too). Move-only; not thread-safe.
class PmixBootstrap final : public Bootstrap {
 public:
  /// Whether this build of the library has PMIx support.
  [[nodiscard]] static bool built_in() noexcept;
  /// Whether a PMIx launcher started this process: PMIX_NAMESPACE and PMIX_RANK are set.
  [[nodiscard]] static bool launched_by_pmix(const EnvironmentLookup& lookup);
  /// launched_by_pmix() on this process's environment.
  [[nodiscard]] static bool launched_by_pmix();

  /// Connects to the launcher's PMIx server (PMIx_Init) and reads rank, world size, local
  /// rank and local size. Throws ibv::Error: unsupported when the library was built without
  /// PMIx (naming libpmix-dev); connection when PMIx_Init fails (e.g. no PMIx launcher started this
  /// process) (test: `BootstrapChoice.PmixWithoutAPmixServerOrWithoutPmixBuiltInSaysWhich`, each
  /// where it applies); timeout when PMIx_Init does not finish within the timeout (the server
  /// never answered; PMIx is unusable in this process then; untested: `timeout`, no test can
  /// make a PMIx server hang); invalid_argument for a timeout that is not positive (untested:
  /// `invalid_argument`, no test gives PMIx a timeout).
  explicit PmixBootstrap(PmixOptions options = {});

  PmixBootstrap(const PmixBootstrap&) = delete;
  PmixBootstrap& operator=(const PmixBootstrap&) = delete;
  /// Takes over the PMIx session; `other` may then only be destroyed or assigned to.
  PmixBootstrap(PmixBootstrap&& other) noexcept;
  /// Finalizes this object's session (if any), then takes over `other`'s.
  PmixBootstrap& operator=(PmixBootstrap&& other) noexcept;
  /// Unless a collective of this object failed, puts a mark that names this rank in the
  /// others' errors should they go on without it; then PMIx_Finalize.
  ~PmixBootstrap() override;

  [[nodiscard]] std::uint32_t rank() const noexcept override { return rank_; }
  [[nodiscard]] std::uint32_t world_size() const noexcept override { return world_size_; }
  /// This rank's index among the job's ranks on its node (PMIX_LOCAL_RANK).
  [[nodiscard]] std::uint32_t local_rank() const noexcept { return local_rank_; }
  /// The number of the job's ranks on this node (PMIX_LOCAL_SIZE).
  [[nodiscard]] std::uint32_t local_size() const noexcept { return local_size_; }
  /// "PMIx (namespace prterun-node01-1234@1, rank 3 of 64)".
  [[nodiscard]] std::string description() const override;

  [[nodiscard]] std::vector<std::vector<std::byte>> all_gather_bytes(
      std::span<const std::byte> mine) override;
  [[nodiscard]] std::vector<std::vector<std::byte>> all_to_all_bytes(
      std::span<const std::vector<std::byte>> to_peer) override;
  void barrier() override;

 private:
  struct Session;  // the PMIx handles, in src/net/pmix_bootstrap.cpp

  std::unique_ptr<Session> session_;
  std::uint32_t rank_ = 0;
  std::uint32_t world_size_ = 1;
  std::uint32_t local_rank_ = 0;
  std::uint32_t local_size_ = 1;
};

}  // namespace ibv::net
