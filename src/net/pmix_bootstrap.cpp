// SPDX-License-Identifier: MIT
// PmixBootstrap: collectives through the launcher's PMIx server. Built with PMIx when CMake
// found it (IBV_HAVE_PMIX); otherwise every constructor says the support is not built in.
#include "ibv/net/pmix_bootstrap.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

#if IBV_HAVE_PMIX
#include <pmix.h>

#include <array>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#endif

namespace ibv::net {
namespace {

constexpr std::string_view kConstruct = "PmixBootstrap::PmixBootstrap";

}  // namespace

bool PmixBootstrap::launched_by_pmix(const EnvironmentLookup& lookup) {
  return lookup("PMIX_NAMESPACE").has_value() && lookup("PMIX_RANK").has_value();
}

bool PmixBootstrap::launched_by_pmix() { return launched_by_pmix(process_environment()); }

#if IBV_HAVE_PMIX

namespace {

constexpr std::string_view kAllGather = "PmixBootstrap::all_gather";
constexpr std::string_view kAllToAll = "PmixBootstrap::all_to_all";
constexpr std::string_view kBarrier = "PmixBootstrap::barrier";

// The key a rank puts when it closes its PmixBootstrap in good order: the number of
// collectives it completed. A rank whose collective failed puts nothing (see Session::leave).
constexpr const char* kLeftKey = "ibvcpp.left";
// How long the ranks that remain look for that key after a failed fence.
constexpr int kLeftScanSeconds = 1;
// The most ranks an error names one by one.
constexpr std::size_t kMaxNamedRanks = 8;

// Owns one pmix_info_t.
class Info {
 public:
  Info(const char* key, const void* data, pmix_data_type_t type) {
    std::memset(&info_, 0, sizeof info_);
    static_cast<void>(PMIx_Info_load(&info_, key, data, type));
  }
  Info(const Info&) = delete;
  Info& operator=(const Info&) = delete;
  ~Info() { PMIx_Value_destruct(&info_.value); }
  [[nodiscard]] pmix_info_t* get() noexcept { return &info_; }

 private:
  pmix_info_t info_{};
};

// Owns a pmix_value_t that PMIx_Get allocated.
struct ValueDeleter {
  void operator()(pmix_value_t* value) const noexcept {
    PMIx_Value_destruct(value);
    std::free(value);  // NOLINT(cppcoreguidelines-no-malloc): PMIx allocated it with malloc
  }
};
using Value = std::unique_ptr<pmix_value_t, ValueDeleter>;

ErrorKind kind_of(pmix_status_t status) {
  if (status == PMIX_ERR_TIMEOUT) return ErrorKind::timeout;
  if (status == PMIX_ERR_NOT_FOUND) return ErrorKind::protocol;
  return ErrorKind::connection;
}

int errno_of(pmix_status_t status) {
  if (status == PMIX_ERR_TIMEOUT) return ETIMEDOUT;
  if (status == PMIX_ERR_NOT_FOUND) return EPROTO;
  return ECONNABORTED;
}

// The ranks that closed their bootstrap before a collective that failed: those whose kLeftKey
// is there. A peer on this node is asked in the local data store (PMIX_OPTIONAL: at once, found
// or not). A peer on another node can only be asked through its server (direct modex), which
// waits for a key that is not there yet: one non-blocking PMIx_Get per such peer, all in flight
// at once and each bounded by kLeftScanSeconds, so that part costs about that long whatever the
// job size. PMIx keeps the committed values of a process that finalized until the job ends.
// (Ranks that wait here after a crash are often killed by the launcher; the shorter they wait,
// the more reliably Open MPI's mpirun reports the crash, hence no wait for the local ones.)
class LeftScan {
 public:
  // Returns "rank 1 after 0 collectives, rank 5 after 1 collective", or "" when no rank is
  // found to have left before collective `sequence`.
  static std::string run(const pmix_proc_t& self, std::uint32_t world_size,
                         std::uint32_t sequence) {
    auto scan = std::make_shared<LeftScan>(sequence);
    const std::vector<bool> local = local_ranks(self, world_size);
    std::size_t started = 0;
    for (std::uint32_t peer = 0; peer < world_size; ++peer) {
      if (peer == self.rank) continue;
      pmix_proc_t owner{};
      PMIX_LOAD_PROCID(&owner, self.nspace, peer);
      if (local[peer]) {
        pmix_value_t* raw = nullptr;
        const pmix_status_t status = PMIx_Get(&owner, kLeftKey, scan->optional_.get(), 1, &raw);
        const Value value(raw);
        scan->consider(peer, status, value.get());
        continue;
      }
      // Owned by the callback, which PMIx calls exactly once when the Get was accepted.
      auto request = std::make_unique<Request>(Request{scan, peer});
      if (PMIx_Get_nb(&owner, kLeftKey, scan->timeout_.get(), 1, &LeftScan::arrived,
                      request.get()) == PMIX_SUCCESS) {
        static_cast<void>(request.release());
        ++started;
      }
    }
    return scan->wait_for(started);
  }

  explicit LeftScan(std::uint32_t sequence)
      : sequence_(sequence),
        timeout_(PMIX_TIMEOUT, &kLeftScanSeconds, PMIX_INT),
        optional_(PMIX_OPTIONAL, &kTrue, PMIX_BOOL) {}

 private:
  struct Request {
    std::shared_ptr<LeftScan> scan;
    std::uint32_t peer;
  };
  static constexpr bool kTrue = true;

  // Which ranks run on this node (PMIX_LOCAL_PEERS, "0,1,2"); all false when PMIx does not say,
  // so that every peer is asked through its server.
  static std::vector<bool> local_ranks(const pmix_proc_t& self, std::uint32_t world_size) {
    std::vector<bool> local(world_size, false);
    pmix_proc_t job{};
    PMIX_LOAD_PROCID(&job, self.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* raw = nullptr;
    const pmix_status_t status = PMIx_Get(&job, PMIX_LOCAL_PEERS, nullptr, 0, &raw);
    const Value value(raw);
    if (status != PMIX_SUCCESS || !value || value->type != PMIX_STRING ||
        value->data.string == nullptr) {
      return local;
    }
    const std::string_view peers(value->data.string);
    std::size_t start = 0;
    while (start < peers.size()) {
      const std::size_t comma = std::min(peers.find(',', start), peers.size());
      std::uint32_t rank = 0;
      const auto* first = peers.data() + start;
      const auto* last = peers.data() + comma;
      if (const auto [end, error] = std::from_chars(first, last, rank);
          error == std::errc{} && end == last && rank < world_size) {
        local[rank] = true;
      }
      start = comma + 1;
    }
    return local;
  }

  static void arrived(pmix_status_t status, pmix_value_t* value, void* data) {
    const std::unique_ptr<Request> request(static_cast<Request*>(data));
    LeftScan& scan = *request->scan;
    scan.consider(request->peer, status, value);  // PMIx releases `value` after this returns
    const std::scoped_lock lock(scan.mutex_);
    ++scan.answered_;
    scan.changed_.notify_all();
  }

  // Counts `peer` as gone when its answer holds a mark from before collective sequence_.
  void consider(std::uint32_t peer, pmix_status_t status, const pmix_value_t* value) {
    if (status != PMIX_SUCCESS || value == nullptr || value->type != PMIX_UINT32 ||
        value->data.uint32 > sequence_) {
      return;
    }
    const std::scoped_lock lock(mutex_);
    left_.emplace_back(peer, value->data.uint32);
  }

  std::string wait_for(std::size_t started) {
    std::unique_lock lock(mutex_);
    // Each Get carries its own timeout; this bound only guards against a PMIx that never calls
    // back. Requests still out then keep this object alive through their shared_ptr.
    changed_.wait_for(lock, std::chrono::seconds(2 * kLeftScanSeconds + 1),
                      [&] { return answered_ >= started; });
    std::sort(left_.begin(), left_.end());
    std::string names;
    for (std::size_t i = 0; i < left_.size() && i < kMaxNamedRanks; ++i) {
      if (i > 0) names += ", ";
      const std::uint32_t done = left_[i].second;
      names += "rank " + std::to_string(left_[i].first) + " after " + std::to_string(done) +
               (done == 1 ? " collective" : " collectives");
    }
    if (left_.size() > kMaxNamedRanks) {
      names += " and " + std::to_string(left_.size() - kMaxNamedRanks) + " more";
    }
    return names;
  }

  std::uint32_t sequence_;
  Info timeout_;   // each Get through a server
  Info optional_;  // each look in the local data store
  std::mutex mutex_;
  std::condition_variable changed_;
  std::size_t answered_ = 0;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> left_;
};

// PMIx_Init bounded by the bootstrap's timeout. PMIx_Init has no timeout of its own, and now
// and then a client waits for the job information its server never sends (a known PMIx hang:
// about one job in 300 here on a loaded machine, Open MPI 4.1 with PMIx 4.2): a rank would then
// wait until the launcher kills the job. So PMIx_Init runs on a thread of its own and the
// constructor waits for it at most the timeout. A thread still stuck then is left behind
// (detached, with its state shared) and this process's PMIx is unusable, which the error says.
struct BoundedInit {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  pmix_status_t status = PMIX_ERR_TIMEOUT;
  pmix_proc_t self{};

  // PMIx_Init's status and, on success, the process's name; nullopt when it did not finish
  // within `timeout`.
  static std::optional<std::pair<pmix_status_t, pmix_proc_t>> run(std::chrono::seconds timeout) {
    auto init = std::make_shared<BoundedInit>();
    std::thread([init] {
      pmix_proc_t name{};
      const pmix_status_t result = PMIx_Init(&name, nullptr, 0);
      const std::scoped_lock lock(init->mutex);
      init->status = result;
      init->self = name;
      init->done = true;
      init->finished.notify_all();
    }).detach();
    std::unique_lock lock(init->mutex);
    if (!init->finished.wait_for(lock, timeout, [&] { return init->done; })) return std::nullopt;
    return std::pair{init->status, init->self};
  }
};

}  // namespace

struct PmixBootstrap::Session {
  pmix_proc_t self{};
  std::uint32_t world_size = 1;
  int timeout_seconds = 30;
  std::uint32_t sequence = 0;
  std::string poison;

  [[noreturn]] void fail(std::string_view operation, std::string_view call, pmix_status_t status,
                         const std::string& what, const std::string& left = {}) {
    std::string detail = std::string(call) + " failed for " + what + ": " +
                         PMIx_Error_string(status) + " (PMIx status " + std::to_string(status) +
                         ")";
    if (!left.empty()) detail += "; closed their PmixBootstrap and left the job before it: " + left;
    poison = std::string(operation) + ": " + detail;
    std::string_view hint;
    if (!left.empty()) {
      hint = "every rank must make the same bootstrap calls before it destroys its bootstrap";
    } else if (status == PMIX_ERR_TIMEOUT) {
      hint =
          "every rank must make the same bootstrap calls; raise PmixOptions::timeout when the "
          "ranks start further apart";
    } else if (status == PMIX_ERR_PARTIAL_SUCCESS) {
      // What PMIx's server answers when a participant of the fence has terminated.
      hint = "a rank of the job ended before entering it; the launcher's own message names it";
    }
    throw Error(kind_of(status), operation, errno_of(status), detail, hint);
  }

  void check_usable(std::string_view operation) const {
    if (!poison.empty()) {
      throw Error(ErrorKind::state, operation, EINVAL,
                  "an earlier call failed and poisoned this PmixBootstrap (the earlier failure: " +
                      poison + ")",
                  "end the job: the ranks no longer agree on how far they came");
    }
  }

  void put(std::string_view operation, const std::string& key, std::span<const std::byte> bytes) {
    pmix_value_t value{};
    pmix_byte_object_t object{};
    // PMIx copies the bytes; it takes a non-const pointer. NOLINTNEXTLINE
    object.bytes = const_cast<char*>(reinterpret_cast<const char*>(bytes.data()));
    object.size = bytes.size();
    static_cast<void>(PMIx_Value_load(&value, &object, PMIX_BYTE_OBJECT));
    const pmix_status_t status = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    PMIx_Value_destruct(&value);
    if (status != PMIX_SUCCESS) fail(operation, "PMIx_Put", status, "key " + key);
  }

  void fence(std::string_view operation, bool collect) {
    if (const pmix_status_t status = PMIx_Commit(); status != PMIX_SUCCESS) {
      fail(operation, "PMIx_Commit", status, "this rank's values");
    }
    pmix_proc_t everyone{};
    PMIX_LOAD_PROCID(&everyone, self.nspace, PMIX_RANK_WILDCARD);
    std::array<pmix_info_t, 2> info{};
    Info collect_info(PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    Info timeout_info(PMIX_TIMEOUT, &timeout_seconds, PMIX_INT);
    info[0] = *collect_info.get();
    info[1] = *timeout_info.get();
    const pmix_status_t status = PMIx_Fence(&everyone, 1, info.data(), info.size());
    if (status != PMIX_SUCCESS) {
      fail(operation, "PMIx_Fence", status,
           "collective " + std::to_string(sequence) + " (every rank must enter it)",
           LeftScan::run(self, world_size, sequence));
    }
  }

  // Before PMIx_Finalize: tells the ranks that remain how far this one came (kLeftKey), so
  // that their next fence, which fails without it, names it. A rank whose collective failed
  // says nothing: it did not leave the others behind, and its mark could reach a peer that is
  // still scanning for the ranks that left first.
  void leave() {
    if (poison.empty()) {
      pmix_value_t value{};
      static_cast<void>(PMIx_Value_load(&value, &sequence, PMIX_UINT32));
      if (PMIx_Put(PMIX_GLOBAL, kLeftKey, &value) == PMIX_SUCCESS) {
        static_cast<void>(PMIx_Commit());
      }
      PMIx_Value_destruct(&value);
    }
    static_cast<void>(PMIx_Finalize(nullptr, 0));
  }

  std::vector<std::byte> get(std::string_view operation, std::uint32_t rank,
                             const std::string& key) {
    pmix_proc_t owner{};
    PMIX_LOAD_PROCID(&owner, self.nspace, rank);
    Info timeout_info(PMIX_TIMEOUT, &timeout_seconds, PMIX_INT);
    pmix_value_t* raw = nullptr;
    const pmix_status_t status = PMIx_Get(&owner, key.c_str(), timeout_info.get(), 1, &raw);
    const Value value(raw);
    if (status != PMIX_SUCCESS || !value) {
      fail(operation, "PMIx_Get", status,
           "rank " + std::to_string(rank) + "'s key " + key +
               " (did that rank make the same call?)");
    }
    if (value->type != PMIX_BYTE_OBJECT) {
      const std::string detail = "rank " + std::to_string(rank) + "'s key " + key +
                                 " holds PMIx type " + PMIx_Data_type_string(value->type) +
                                 ", not bytes";
      poison = std::string(operation) + ": " + detail;
      throw Error(ErrorKind::protocol, operation, EPROTO, detail);
    }
    const auto* bytes = reinterpret_cast<const std::byte*>(value->data.bo.bytes);
    return {bytes, bytes + value->data.bo.size};
  }

  std::uint32_t job_number(const char* key, pmix_rank_t rank, std::uint32_t fallback) {
    pmix_proc_t proc{};
    PMIX_LOAD_PROCID(&proc, self.nspace, rank);
    pmix_value_t* raw = nullptr;
    const pmix_status_t status = PMIx_Get(&proc, key, nullptr, 0, &raw);
    const Value value(raw);
    if (status != PMIX_SUCCESS || !value) {
      if (fallback != 0) return fallback;
      fail(kConstruct, "PMIx_Get", status, std::string("the job's ") + key);
    }
    switch (value->type) {
      case PMIX_UINT32: return value->data.uint32;
      case PMIX_UINT16: return value->data.uint16;
      default: return fallback;
    }
  }
};

bool PmixBootstrap::built_in() noexcept { return true; }

PmixBootstrap::PmixBootstrap(PmixOptions options) : session_(std::make_unique<Session>()) {
  ibv::detail::check_positive(options.timeout, "options.timeout", kConstruct);
  const auto seconds = std::chrono::ceil<std::chrono::seconds>(
      static_cast<std::chrono::nanoseconds>(options.timeout));
  session_->timeout_seconds =
      static_cast<int>(std::clamp<std::chrono::seconds::rep>(seconds.count(), 1, 1'000'000'000));
  const auto init = BoundedInit::run(std::chrono::seconds(session_->timeout_seconds));
  if (!init) {
    throw Error(ErrorKind::timeout, kConstruct, ETIMEDOUT,
                "PMIx_Init did not finish within " + std::to_string(session_->timeout_seconds) +
                    " s: the launcher's PMIx server did not answer this process",
                "PMIx in this process is unusable now: end it; a rare hang of PMIx's client "
                "(or a launcher under heavy load) does this, so start the job again, or raise "
                "PmixOptions::timeout");
  }
  const pmix_status_t status = init->first;
  session_->self = init->second;
  if (status != PMIX_SUCCESS) {
    const bool launched = launched_by_pmix();
    throw Error(ErrorKind::connection, kConstruct, ECONNREFUSED,
                std::string("PMIx_Init failed: ") + PMIx_Error_string(status) + " (PMIx status " +
                    std::to_string(status) + ")",
                launched ? "the PMIx server of the launcher could not be reached"
                         : "this process was not started by a PMIx launcher (PMIX_NAMESPACE is "
                           "not set): start it with mpirun or srun --mpi=pmix, or use another "
                           "bootstrap (IBV_BOOTSTRAP=host:port, a hosts file)");
  }
  rank_ = session_->self.rank;
  world_size_ = session_->job_number(PMIX_JOB_SIZE, PMIX_RANK_WILDCARD, 0);
  session_->world_size = world_size_;
  local_size_ = session_->job_number(PMIX_LOCAL_SIZE, PMIX_RANK_WILDCARD, 1);
  local_rank_ = session_->job_number(PMIX_LOCAL_RANK, rank_, 0);
}

PmixBootstrap::PmixBootstrap(PmixBootstrap&& other) noexcept = default;
PmixBootstrap& PmixBootstrap::operator=(PmixBootstrap&& other) noexcept {
  if (this != &other) {
    if (session_) session_->leave();
    session_ = std::move(other.session_);
    rank_ = other.rank_;
    world_size_ = other.world_size_;
    local_rank_ = other.local_rank_;
    local_size_ = other.local_size_;
  }
  return *this;
}

PmixBootstrap::~PmixBootstrap() {
  if (session_) session_->leave();
}

std::string PmixBootstrap::description() const {
  const std::string space = session_ ? std::string(session_->self.nspace) : "moved from";
  return "PMIx (namespace " + space + ", rank " + std::to_string(rank_) + " of " +
         std::to_string(world_size_) + ")";
}

std::vector<std::vector<std::byte>> PmixBootstrap::all_gather_bytes(
    std::span<const std::byte> mine) {
  if (!session_) throw Error(ErrorKind::state, kAllGather, EINVAL, "moved from");
  Session& session = *session_;
  session.check_usable(kAllGather);
  const std::string key = "ibvcpp." + std::to_string(session.sequence);
  session.put(kAllGather, key, mine);
  session.fence(kAllGather, /*collect=*/true);
  std::vector<std::vector<std::byte>> entries(world_size_);
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    entries[peer] = peer == rank_ ? std::vector<std::byte>(mine.begin(), mine.end())
                                  : session.get(kAllGather, peer, key);
  }
  ++session.sequence;
  return entries;
}

std::vector<std::vector<std::byte>> PmixBootstrap::all_to_all_bytes(
    std::span<const std::vector<std::byte>> to_peer) {
  if (!session_) throw Error(ErrorKind::state, kAllToAll, EINVAL, "moved from");
  if (to_peer.size() != world_size_) {
    throw_invalid_argument(kAllToAll, "to_peer",
                           "has " + std::to_string(to_peer.size()) +
                               " entries; it needs one per rank: " + std::to_string(world_size_));
  }
  Session& session = *session_;
  session.check_usable(kAllToAll);
  const std::string prefix = "ibvcpp." + std::to_string(session.sequence) + ".to.";
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    if (peer != rank_) session.put(kAllToAll, prefix + std::to_string(peer), to_peer[peer]);
  }
  session.fence(kAllToAll, /*collect=*/false);
  const std::string mine = prefix + std::to_string(rank_);
  std::vector<std::vector<std::byte>> entries(world_size_);
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    entries[peer] = peer == rank_ ? to_peer[peer] : session.get(kAllToAll, peer, mine);
  }
  ++session.sequence;
  return entries;
}

void PmixBootstrap::barrier() {
  if (!session_) throw Error(ErrorKind::state, kBarrier, EINVAL, "moved from");
  session_->check_usable(kBarrier);
  session_->fence(kBarrier, /*collect=*/false);
  ++session_->sequence;
}

#else  // built without PMIx

struct PmixBootstrap::Session {};

bool PmixBootstrap::built_in() noexcept { return false; }

PmixBootstrap::PmixBootstrap(PmixOptions /*options*/) {
  throw Error(ErrorKind::unsupported, kConstruct, ENOTSUP,
              "this build of ibverbs-cpp has no PMIx support (libpmix-dev was not found when it "
              "was built)",
              "install libpmix-dev and rebuild (scripts/install-deps), or use another bootstrap: "
              "IBV_BOOTSTRAP=host:port with the root's address, or a hosts file");
}

PmixBootstrap::PmixBootstrap(PmixBootstrap&& other) noexcept = default;
PmixBootstrap& PmixBootstrap::operator=(PmixBootstrap&& other) noexcept = default;
PmixBootstrap::~PmixBootstrap() = default;

std::string PmixBootstrap::description() const { return "PMIx (not built in)"; }

std::vector<std::vector<std::byte>> PmixBootstrap::all_gather_bytes(
    std::span<const std::byte> /*mine*/) {
  throw Error(ErrorKind::unsupported, "PmixBootstrap::all_gather", ENOTSUP, "not built in");
}

std::vector<std::vector<std::byte>> PmixBootstrap::all_to_all_bytes(
    std::span<const std::vector<std::byte>> /*to_peer*/) {
  throw Error(ErrorKind::unsupported, "PmixBootstrap::all_to_all", ENOTSUP, "not built in");
}

void PmixBootstrap::barrier() {
  throw Error(ErrorKind::unsupported, "PmixBootstrap::barrier", ENOTSUP, "not built in");
}

#endif

}  // namespace ibv::net
