// SPDX-License-Identifier: MIT
// The RDMA barrier of a Node: signals are RDMA writes of per-peer counters into the receiver's
// (round, sender) slot; a receiver checks its own slots until each holds the count it expects:
// spinning, or (a channel wait mode that sleeps) sleeping between checks.
#include "net/rdma_barrier.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <numeric>
#include <thread>

#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "net/control_plane.hpp"
#include "net/unanswered_rank.hpp"

namespace ibv::net::detail {
namespace {

constexpr std::string_view kOperation = "Node::barrier";
// Waiting for a signal: spin on the slots, yielding the processor every kSpinsBeforeYield
// checks; once a round has waited longer than kSleepAfter (a rank is late, or more processes
// than cores), sleep kSleep between checks instead, so that the processes and the kernel's
// network work (Soft-RoCE runs there) that the barrier waits for get the processor.
constexpr unsigned kSpinsBeforeYield = 64;
constexpr auto kSleepAfter = std::chrono::milliseconds(1);
constexpr auto kSleep = std::chrono::microseconds(20);
// With a wait mode that sleeps: an RDMA write raises no completion at its target, so nothing
// can wake a receiver when a signal lands; it sleeps between checks instead, from kFirstNap
// doubling up to kLongestNap (the latency a late signal may cost, for little CPU time).
constexpr auto kFirstNap = std::chrono::microseconds(50);
constexpr auto kLongestNap = std::chrono::microseconds(1000);

std::size_t most_rounds(std::uint32_t world_size) {
  std::size_t rounds = 1;  // a world of one has no rounds; keep the region non-empty anyway
  for (const auto algorithm : {BarrierAlgorithm::centralized, BarrierAlgorithm::binary_tree,
                               BarrierAlgorithm::dissemination}) {
    rounds = std::max(rounds, round_count(algorithm, world_size));
  }
  return rounds;
}

std::string ranks_text(std::span<const std::uint32_t> ranks) {
  constexpr std::size_t kShown = 16;
  std::string text;
  for (std::size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kShown) text += ", ... (" + std::to_string(ranks.size()) + " ranks)";
  return text;
}

// Where a counter's epoch starts (see sent_).
constexpr unsigned kEpochShift = 48;

constexpr std::string_view kPoisonHint =
    "the barrier is poisoned now: the ranks' signal counters no longer agree, so every later "
    "barrier of this Node fails at once; rebuild the Node on every rank to synchronize again";

}  // namespace

RdmaBarrier::RdmaBarrier(const ProtectionDomain& pd, std::uint32_t rank, std::uint32_t world_size,
                         WaitMode wait)
    : rank_(rank),
      world_size_(world_size),
      slot_world_(world_size),
      slot_rank_(world_size),
      wait_(wait),
      all_ranks_(BarrierGroup::all(world_size)),
      max_rounds_(most_rounds(world_size)),
      slots_(max_rounds_ * world_size, 0),
      outgoing_(world_size, 0),
      slots_mr_(pd.register_remote_accessible(std::as_writable_bytes(std::span(slots_)),
                                              RemoteAccess::write())),
      outgoing_mr_(pd.register_local(std::as_writable_bytes(std::span(outgoing_)))),
      sent_(world_size, 0),
      received_(world_size, 0),
      in_flight_(world_size) {
  std::iota(slot_rank_.begin(), slot_rank_.end(), 0U);
}

void RdmaBarrier::set_peer_slots(std::vector<PeerRemoteMemoryRegion> peer_slots) {
  peer_slots_ = std::move(peer_slots);
}

std::uint64_t RdmaBarrier::slot(std::size_t round, std::uint32_t sender) noexcept {
  return std::atomic_ref<std::uint64_t>(slots_[round * slot_world_ + slot_rank_[sender]])
      .load(std::memory_order_acquire);
}

std::string RdmaBarrier::current() const {
  std::string text(to_string(algorithm_));
  text += " barrier";
  if (group_ != nullptr) {
    text += group_->size() == world_size_ ? " over all " + std::to_string(world_size_) + " ranks"
                                          : " over ranks " + ranks_text(group_->ranks());
  }
  return text;
}

const std::vector<BarrierStep>& RdmaBarrier::schedule(const BarrierGroup& group,
                                                      BarrierAlgorithm algorithm) {
  if (group.size() != world_size_) {
    subset_schedule_ = barrier_schedule(algorithm, group, rank_);
    return subset_schedule_;
  }
  auto& cached = all_ranks_schedules_.at(static_cast<std::size_t>(algorithm));
  if (!cached) cached = barrier_schedule(algorithm, group, rank_);
  return *cached;
}

void RdmaBarrier::run(MultiChannel& channels, const BarrierGroup& group, BarrierAlgorithm algorithm,
                      Duration timeout, ControlPlane* control) {
  if (control != nullptr) {
    if (const auto revoker = control->revoked_by()) {
      throw Error(ErrorKind::revoked, kOperation, ECANCELED,
                  "this Node was revoked by rank " + std::to_string(*revoker),
                  "no barrier of this Node passes any more: agree with the survivors and build "
                  "the Node again");
    }
  }
  if (poison_) {
    throw Error(ErrorKind::state, kOperation, EIO,
                "the barrier is poisoned by an earlier failure: " + *poison_,
                "rebuild the Node on every rank to synchronize again");
  }
  group_ = &group;
  algorithm_ = algorithm;
  timeout_ = timeout;
  channels_ = &channels;
  control_ = control;
  control_seen_ = 0;
  const auto deadline = Clock::now() + timeout;
  try {
    const auto& steps = schedule(group, algorithm);
    rounds_ = steps.size();
    for (std::size_t round = 0; round < steps.size(); ++round) {
      for (const std::uint32_t peer : steps[round].signal) signal(channels, round, peer, deadline);
      await(round, steps[round].wait_for, deadline);
    }
    reap(deadline);
  } catch (const std::exception& error) {
    poison_ = error.what();
    group_ = nullptr;
    channels_ = nullptr;
    control_ = nullptr;
    throw;
  }
  group_ = nullptr;
  channels_ = nullptr;
  control_ = nullptr;
}

std::optional<RankFailure> RdmaBarrier::check_control(std::size_t round,
                                                      std::span<const std::uint32_t> waiting) {
  if (control_ == nullptr) return std::nullopt;
  if (const std::uint64_t generation = control_->generation(); generation != control_seen_) {
    control_seen_ = generation;
    if (const auto revoker = control_->revoked_by()) {
      throw Error(ErrorKind::revoked, kOperation, ECANCELED,
                  current() + ", round " + std::to_string(round + 1) + " of " +
                      std::to_string(rounds_) + ": the Node was revoked by rank " +
                      std::to_string(*revoker),
                  "no barrier of this Node passes any more: agree with the survivors and build "
                  "the Node again");
    }
    known_failures_ = control_->failures();
  }
  // A rank this round waits for, or any member of the group that crashed (its part of the
  // barrier may never come, and the ranks waiting for it hold up the others). A member that
  // destroyed its Node in good order only left after its barriers, so only waiting for it
  // counts: a later round may, so the failures known are kept, not only the news.
  std::optional<RankFailure> culprit;
  for (const RankFailure& failure : known_failures_) {
    const bool awaited = std::ranges::find(waiting, failure.rank) != waiting.end();
    const bool member = std::ranges::binary_search(group_->ranks(), failure.rank);
    if (awaited || (member && failure.cause != FailureCause::left)) {
      culprit = failure;
      if (awaited) break;
    }
  }
  return culprit;
}

void RdmaBarrier::fail_for(std::size_t round, const RankFailure& culprit) {
  channels_->channel(culprit.rank).queue_pair().move_to_error();  // fenced: nothing more lands
  throw Error(ErrorKind::peer_gone, kOperation, EIO,
              current() + ", round " + std::to_string(round + 1) + " of " +
                  std::to_string(rounds_) + ": " + culprit.to_string() +
                  " has failed, and this barrier needs it",
              "the rank is out of this Node for good; " + std::string(kPoisonHint));
}

void RdmaBarrier::signal(MultiChannel& channels, std::size_t round, std::uint32_t peer,
                         Clock::time_point deadline) {
  if (in_flight_[peer]) reap(deadline);  // its counter's buffer is about to be rewritten
  std::uint64_t& counter = outgoing_[slot_rank_[peer]];
  counter = ++sent_[peer];
  const auto destination =
      peer_slots_.at(peer).element<std::uint64_t>(round * slot_world_ + slot_rank_[rank_]);
  const std::array source{outgoing_mr_.gather(std::span(&counter, 1))};
  in_flight_[peer].emplace(channels.post(peer, op::PeerWrite{source, destination}));
  in_flight_peers_.push_back(peer);
}

void RdmaBarrier::await(std::size_t round, std::span<const std::uint32_t> senders,
                        Clock::time_point deadline) {
  std::vector<std::uint32_t> waiting(senders.begin(), senders.end());
  unsigned spins = 0;
  const auto entered = Clock::now();
  // Sleeping modes: spin for spin_for (spin_then_block) or not at all (block), then nap.
  const auto spin_until =
      wait_.strategy == WaitStrategy::spin_then_block ? entered + wait_.spin_for : entered;
  auto nap = std::chrono::duration_cast<Clock::duration>(kFirstNap);
  std::optional<RankFailure> culprit;
  for (;;) {
    // What the control plane knows first, the signals second: a rank that left in good order
    // had its signals land before its mark, so they are seen here when the mark was.
    if (auto news = check_control(round, waiting)) culprit = std::move(news);
    std::erase_if(waiting, [&](std::uint32_t sender) {
      if (slot(round, sender) <= received_[sender]) return false;
      ++received_[sender];
      return true;
    });
    if (waiting.empty()) return;
    if (culprit && (culprit->cause != FailureCause::left ||
                    std::ranges::find(waiting, culprit->rank) != waiting.end())) {
      fail_for(round, *culprit);
    }
    reap(std::nullopt);
    if (Clock::now() >= deadline) {
      throw Error(ErrorKind::timeout, kOperation, ETIMEDOUT,
                  current() + " timed out after " + ibv::detail::duration_text(timeout_) +
                      " in round " + std::to_string(round + 1) + " of " + std::to_string(rounds_) +
                      ", still waiting for rank(s) " + ranks_text(waiting),
                  "a rank that never arrives (exited, stuck, or in another barrier or subset) "
                  "holds everyone up; " +
                      std::string(kPoisonHint));
    }
    if (wait_.sleeps() && Clock::now() >= spin_until) {
      std::this_thread::sleep_for(std::min(nap, deadline - Clock::now()));
      nap = std::min(nap * 2, std::chrono::duration_cast<Clock::duration>(kLongestNap));
      continue;
    }
    if (++spins >= kSpinsBeforeYield) {
      spins = 0;
      if (Clock::now() - entered > kSleepAfter) {
        std::this_thread::sleep_for(kSleep);
      } else {
        std::this_thread::yield();
      }
    }
  }
}

void RdmaBarrier::reap(std::optional<Clock::time_point> deadline) {
  std::erase_if(in_flight_peers_, [&](std::uint32_t peer) {
    auto& work = in_flight_[peer];
    std::optional<WorkCompletion> completion = work->poll();
    if (!completion && deadline) {
      const auto left = std::max(Clock::duration::zero(), *deadline - Clock::now());
      try {
        completion = work->wait_for(left);
      } catch (const WorkError& error) {
        completion = error.completion();
      }
      if (!completion) {
        throw Error(ErrorKind::timeout, kOperation, ETIMEDOUT,
                    current() + ": the signal to rank " + std::to_string(peer) +
                        " did not complete within " + ibv::detail::duration_text(timeout_),
                    "rank " + std::to_string(peer) + " may have exited or its device failed; " +
                        std::string(kPoisonHint));
      }
    }
    if (!completion) return false;
    work.reset();
    if (!completion->ok()) {
      // A signal to a rank known failed (its channel fenced, so the signal was flushed): that
      // failure is the news, not the flush.
      if (control_ != nullptr) {
        if (const auto failure = control_->failure_of(peer)) {
          throw Error(
              ErrorKind::peer_gone, kOperation, EIO,
              current() + ": " + failure->to_string() + " has failed, and this barrier signals it",
              "the rank is out of this Node for good; " + std::string(kPoisonHint));
        }
      }
      // A signal the peer never acknowledged (retry_exceeded: it vanished, or is too busy to
      // answer in time) is peer_gone, as on a channel; any other failure has its completion's
      // kind.
      const ErrorKind kind = kind_of(completion->status());
      if (kind == ErrorKind::peer_gone && control_ != nullptr) {
        control_->declare_failed(peer, FailureCause::completion);
      }
      const std::string who =
          kind == ErrorKind::peer_gone
              ? unanswered_rank_text(peer, channels_->channel(peer).queue_pair().settings())
              : "rank " + std::to_string(peer) + " may have exited or its device failed";
      throw Error(kind, kOperation, EIO,
                  current() + ": the signal to rank " + std::to_string(peer) +
                      " failed: " + completion->to_string(),
                  who + "; " + std::string(kPoisonHint));
    }
    return true;
  });
}

void RdmaBarrier::shrink(std::span<const std::uint32_t> survivors, std::uint32_t epoch,
                         Clock::time_point deadline) {
  // A signal still in flight writes the slot it was meant for; waiting here keeps its handle
  // from being dropped unpolled. Its outcome no longer matters: a failed rank's was flushed.
  for (const std::uint32_t peer : in_flight_peers_) {
    // A failed barrier may leave a peer listed whose signal it already took (it threw after).
    if (!in_flight_[peer]) continue;
    try {
      static_cast<void>(
          in_flight_[peer]->wait_for(std::max(Clock::duration::zero(), deadline - Clock::now())));
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): failed, so it is over
    }
  }
  in_flight_peers_.clear();
  const auto new_rank =
      static_cast<std::uint32_t>(std::ranges::lower_bound(survivors, rank_) - survivors.begin());
  std::vector<std::uint32_t> slot_rank;
  std::vector<PeerRemoteMemoryRegion> peer_slots;
  for (std::uint32_t rank = 0; rank < survivors.size(); ++rank) {
    slot_rank.push_back(slot_rank_.at(survivors[rank]));
    if (survivors[rank] == rank_) {
      peer_slots.emplace_back(rank, slots());
    } else {
      peer_slots.emplace_back(rank, peer_slots_.at(survivors[rank]).region());
    }
  }
  const auto world = static_cast<std::uint32_t>(survivors.size());
  rank_ = new_rank;
  world_size_ = world;
  slot_rank_ = std::move(slot_rank);
  peer_slots_ = std::move(peer_slots);
  all_ranks_ = BarrierGroup::all(world);
  for (auto& cached : all_ranks_schedules_) cached.reset();
  const std::uint64_t first = std::uint64_t{epoch} << kEpochShift;
  sent_.assign(world, first);
  received_.assign(world, first);
  in_flight_.clear();
  in_flight_.resize(world);
  poison_.reset();
}

}  // namespace ibv::net::detail
