// SPDX-License-Identifier: MIT
// Private: the control plane of a Node built with NodeBuilder::fault_tolerance(). A control
// queue pair per peer with a short retry budget, a registered control block per rank (the
// revoke word, a doorbell, the detector's heartbeat, and one report slot per sender holding the
// sender's bitmap of failed ranks), and a detector thread that probes the ring successor, reads
// what lands in the block and tells every peer what it learned. The caller's thread asks what is
// known (lock-free in the common case: generation()), reports failures it saw in completions, and
// revokes.
//
// Ranks: inside, every rank is the one it had when the Node was built (the queue pairs, the
// block's slots and the agreements use those). Outside, ranks are the current view's: after
// Node::shrink() the survivors numbered densely (shrink_view()), and the ranks not in the view
// are failed for good and no longer named. The revoke mark carries the view's epoch, so that a
// revoke of an earlier view never revokes a later one.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "ibv/channel/pending_work.hpp"
#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"
#include "ibv/net/fault_tolerance.hpp"
#include "ibv/verbs/completion_channel.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair_settings.hpp"
#include "net/agreement.hpp"

namespace ibv::net::detail {

class ControlPlane {
 public:
  /// Makes the control queue pairs (in `pd`, on the port and GID `base` names, with the probe
  /// timeouts of `settings`) and registers the control block.
  ControlPlane(const ProtectionDomain& pd, std::uint32_t rank, std::uint32_t world_size,
               const FaultToleranceSettings& settings, const QueuePairSettings& base);
  /// Stops the detector and tells every peer still reachable that this rank left.
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;
  ControlPlane(ControlPlane&&) = delete;
  ControlPlane& operator=(ControlPlane&&) = delete;

  /// The bytes a control block of a world of `world_size` ranks takes.
  [[nodiscard]] static std::size_t block_bytes(std::uint32_t world_size) noexcept;

  /// The control queue pair meant for `peer` (before handshake()).
  [[nodiscard]] Endpoint endpoint_for(std::uint32_t peer) const;
  /// Where the peers read and write this rank's control block.
  [[nodiscard]] RemoteMemoryRegion block() const { return block_mr_.remote(); }

  /// Connects the control queue pairs: `queue_pairs[p]` and `blocks[p]` are peer p's (the
  /// entries at this rank are ignored). Does not start the detector (start()).
  void handshake(std::span<const std::optional<Endpoint>> queue_pairs,
                 std::span<const RemoteMemoryRegion> blocks);
  /// Starts the detector thread; every peer must have connected its control queue pairs by
  /// then (a probe of a peer that has not is taken for a failure). Later calls do nothing.
  void start();
  /// Whether start() was called.
  [[nodiscard]] bool started() const noexcept { return detector_.joinable(); }

  /// A counter that changes whenever something new is known (a failure, a revocation): a
  /// waiter compares it with what it saw last and only then asks more.
  [[nodiscard]] std::uint64_t generation() const noexcept {
    return generation_.load(std::memory_order_acquire);
  }
  /// Every rank of the view known to have failed, by rank.
  [[nodiscard]] std::vector<RankFailure> failures() const;
  /// What is known of `rank`'s failure, if anything.
  [[nodiscard]] std::optional<RankFailure> failure_of(std::uint32_t rank) const;
  /// The rank that revoked the view, if one did.
  [[nodiscard]] std::optional<std::uint32_t> revoked_by() const;
  /// The view's epoch: 0 as built, one more with every shrink_view().
  [[nodiscard]] std::uint32_t epoch() const;
  /// Makes the ranks `survivors` of the view (ascending; this rank among them) the new view,
  /// numbered densely in that order, in the next epoch; every other rank of the view is
  /// recorded failed (as `cause`, when it was not known) and fenced. The new view is not
  /// revoked (unless a rank of it revoked it already).
  void shrink_view(std::span<const std::uint32_t> survivors, FailureCause cause);

  /// Revokes the Node: writes this rank's revoke mark into every reachable peer's block (each
  /// peer passes it on to every other once, so it arrives even if this rank dies now).
  void revoke();
  /// Records that `rank` (of the view) failed as `cause` says (a completion the caller saw),
  /// and tells the peers. Nothing when it was known already.
  void declare_failed(std::uint32_t rank, FailureCause cause);

  /// Runs this rank's part of the next agreement (every rank calls agree() in the same order):
  /// `flags` and the failures known now go in; every survivor gets the same value back. The
  /// calling thread and the detector thread carry it (SENDs over the control queue pairs); the
  /// detector keeps answering for it after this returns. Throws ibv::Error (timeout) when it did
  /// not decide in `timeout`. The failed ranks of the value are the view's (ranks out of the view
  /// are left out).
  [[nodiscard]] AgreementValue agree(std::uint32_t flags, Duration timeout);

  /// The in-band exchange under ControlBootstrap: sends `bytes` to `peer` (of the view) as
  /// entry `sequence` of this rank, in control messages (SENDs) of a few dozen bytes each.
  void exchange_send(std::uint64_t sequence, std::uint32_t peer, std::span<const std::byte> bytes);
  /// Entry `sequence` of `peer` (of the view), waiting until `deadline`: none when it did not
  /// come by then or `peer` is known failed. Taking it forgets it.
  [[nodiscard]] std::optional<std::vector<std::byte>> exchange_receive(
      std::uint64_t sequence, std::uint32_t peer, std::chrono::steady_clock::time_point deadline);
  /// Waits (until `deadline`) until every message this rank sent to a peer not known failed
  /// has landed there: an exchange's entries reach the others even if this rank leaves next.
  void exchange_flush(std::chrono::steady_clock::time_point deadline);
  /// The settings it was made with.
  [[nodiscard]] const FaultToleranceSettings& settings() const noexcept { return settings_; }
  /// The number of ranks of the view, and this rank's rank in it.
  [[nodiscard]] std::uint32_t view_size() const;
  [[nodiscard]] std::uint32_t view_rank() const;

 private:
  using Clock = std::chrono::steady_clock;

  // Leaving (the destructor; agreement_mutex_ and post_mutex_ held): the messages still
  // waiting for a send slot, then this rank's mark that it left (after them: the same queue
  // pairs, in order), then every control queue pair flushed and its handles taken.
  void send_backlogs();
  void tell_peers_left();
  void end_queue_pairs();
  /// Waits up to the detection bound for `work` to end, whatever its outcome (leaving: a
  /// failure or a flush is expected), so that its handle is not dropped unpolled.
  void settle(PendingWork& work) const noexcept;

  /// The detector thread's loop.
  void run();
  /// One round of the loop: the probe, completions, the block, telling the peers.
  void tick(bool probe_due);
  /// Takes the completions of the requests in flight; a failed one declares its peer failed.
  void reap();
  /// A probe of `peer` read `heartbeat`: a successor whose heartbeat has not moved for the
  /// stall timeout is declared failed (its process stopped, though its device answers).
  void watch_heartbeat(std::uint32_t peer, std::uint64_t heartbeat);
  /// Moves the control queue pair of every rank known failed to the error state, once each,
  /// so that nothing it still writes lands in the control block (post_mutex_ held).
  void fence_control();
  /// Reads the revoke word, the doorbell and (when it rang, or `full`) every report slot.
  void read_block(bool full);
  /// Records a failure under state_mutex_; true when it is new.
  bool record(std::uint32_t rank, FailureCause cause, std::uint32_t reported_by);
  /// Records a revoke mark (the epoch in the high half, the revoker's rank + 1 in the low one)
  /// under state_mutex_, unless it is of an earlier epoch or the view has one; true when new.
  bool record_revocation(std::uint64_t mark);
  /// The view's rank of `rank`, if it is in the view (state_mutex_ held).
  [[nodiscard]] std::optional<std::uint32_t> view_rank(std::uint32_t rank) const;
  /// `failure` with its ranks the view's (state_mutex_ held); a reporter out of the view is
  /// given as the failed rank itself.
  [[nodiscard]] RankFailure in_view(RankFailure failure) const;
  /// Posts this rank's report (its bitmap, then the doorbell) to every live peer that has not
  /// got the latest one, and the revoke mark when there is one to pass on.
  void send_news();
  /// The next rank of the ring after this one that is not known failed, if any.
  [[nodiscard]] std::optional<std::uint32_t> ring_successor() const;
  /// Posts one write or read to `peer` (post_mutex_ held); false when the peer is failed or its
  /// send queue is full (it is tried again next tick).
  bool post(std::uint32_t peer, const op::PeerWrite& write);
  /// Until `done()` (called with agreement_mutex_ held by `lock`) or `deadline`: takes and
  /// sends control messages on this thread (drive_agreements()), without pausing while they
  /// come, then sleeping until the next completion (the detector thread drives them too,
  /// each tick). Returns done().
  bool drive_until(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                   const std::function<bool()>& done);
  /// Sleeps until a control queue completes something, a tick or `deadline` (no lock held).
  void sleep_until_completion(Clock::time_point deadline);
  /// Takes the agreement messages that arrived, tells the agreements of new failures, sends
  /// what they queued (post_mutex_ held). True when a message came, a send landed or an
  /// agreement learned of a failure.
  bool drive_agreements();
  /// Hands every agreement message that arrived to its instance (or keeps it for an instance
  /// not started yet), every exchange chunk to its entry, and reposts its receive; true when
  /// a message came.
  bool take_messages();
  /// Sends one encoded message to `peer`, or keeps it for later (after those kept already)
  /// when its send slots are busy.
  void send_message(std::uint32_t peer, std::vector<std::byte> bytes);
  /// Frees the send slots of `peer`'s completed messages and posts what waits in its backlog
  /// into the free ones (post_mutex_ held); true when a send completed.
  bool pump_messages(std::uint32_t peer);
  /// Posts one encoded message to `peer` into its next send slot (one must be free).
  void post_message(std::uint32_t peer, std::span<const std::byte> bytes);
  /// Posts the receive of slot `slot` of `peer`'s receive buffers.
  void post_receive(std::uint32_t peer, std::size_t slot);
  /// Every rank known failed, as a RankSet.
  [[nodiscard]] RankSet failed_set() const;
  [[nodiscard]] bool known_failed(std::uint32_t rank) const noexcept;
  [[nodiscard]] std::uint64_t word(std::size_t index) const noexcept;

  std::uint32_t rank_;
  std::uint32_t world_size_;
  std::size_t words_per_set_;  // 64-bit words of one bitmap of world_size_ ranks
  FaultToleranceSettings settings_;

  // Memory: the block peers write (word 0: revoke mark, word 1: doorbell, word 2: this
  // detector's heartbeat, then one bitmap per sender), this rank's outgoing report and marks
  // (the same layout: word 2 unused), and where a probe lands (words 0 to 2 of the successor's).
  std::vector<std::uint64_t> block_;
  std::vector<std::uint64_t> outgoing_;
  std::vector<std::uint64_t> probe_landing_;
  MemoryRegion block_mr_;
  MemoryRegion outgoing_mr_;
  MemoryRegion probe_mr_;

  // Every control queue pair's completion queue raises its events here: an agree() or an
  // exchange that waits long sleeps on it (drive_until()).
  CompletionChannel completion_channel_;
  std::optional<PreparedMultiChannel> prepared_;
  std::optional<MultiChannel> channels_;
  std::vector<PeerRemoteMemoryRegion> peer_blocks_;

  // What is known; failures_ and revoked_by_ under state_mutex_, mirrored lock-free by
  // failed_bits_ (one atomic bit per rank) and generation_.
  mutable std::mutex state_mutex_;
  std::vector<std::optional<RankFailure>> failures_;
  std::uint64_t revoke_mark_ = 0;       // the latest epoch's (see record_revocation())
  std::uint32_t epoch_ = 0;             // the view's
  std::vector<std::uint32_t> members_;  // [view rank]: its rank as built
  std::vector<std::uint32_t> view_of_;  // [rank as built]: its view rank, or kNotInView
  static constexpr std::uint32_t kNotInView = ~std::uint32_t{0};
  std::vector<std::atomic<std::uint64_t>> failed_bits_;
  std::atomic<std::uint64_t> generation_{0};

  // Posting (the detector and revoke() from the caller's thread) under post_mutex_.
  std::mutex post_mutex_;
  std::vector<std::vector<PendingWork>> in_flight_;  // [peer]
  std::vector<std::uint64_t> told_;                  // [peer]: the report generation it has
  std::vector<std::uint64_t> told_revoked_;          // [peer]: the revoke mark it has
  std::uint64_t report_generation_ = 0;              // bumps with every new failure
  std::optional<std::uint32_t> probing_;             // the peer of the probe in flight
  std::optional<PendingWork> probe_;
  std::uint64_t doorbell_seen_ = 0;
  std::vector<bool> left_;  // [rank]: recorded as left in good order (the detector's only)
  std::vector<bool> control_fenced_;  // [rank]: its control queue pair moved to the error state
  // The successor whose heartbeat the probes watch, its last value and since when it is that.
  std::optional<std::uint32_t> watched_;
  std::uint64_t watched_heartbeat_ = 0;
  Clock::time_point watched_since_{};

  // Agreements: started by agree() under agreement_mutex_, driven by the detector thread.
  // Kept after deciding (they keep answering ranks still in them); messages for an instance
  // this rank has not started yet wait in early_.
  struct Instance {
    Agreement agreement;
    std::vector<bool> told_failed;  // [rank]: on_failure() given
  };
  std::mutex agreement_mutex_;
  std::uint64_t next_instance_ = 0;
  std::map<std::uint64_t, Instance> instances_;
  std::map<std::uint64_t, std::vector<std::pair<std::uint32_t, AgreementMessage>>> early_;
  std::uint64_t agreements_generation_ = 0;  // generation_ the instances were told of

  // In-band exchange entries (ControlBootstrap) by (sequence, sender as built), as they arrive
  // (under agreement_mutex_; a waiter drives them in, drive_until()).
  struct Entry {
    std::vector<std::byte> bytes;
    std::size_t received = 0;
    bool sized = false;
  };
  std::map<std::pair<std::uint64_t, std::uint32_t>, Entry> entries_;
  /// Takes one exchange chunk from `peer` (agreement_mutex_ held); a chunk that does not fit
  /// the entry it names is dropped, and that entry never completes.
  void take_chunk(std::uint32_t peer, std::span<const std::byte> chunk);

  // Agreement messages: per peer kMessageSlots receive and send buffers of message_bytes_.
  std::size_t message_bytes_;
  std::vector<std::byte> receive_buffers_;
  std::vector<std::byte> send_buffers_;
  MemoryRegion receive_mr_;
  MemoryRegion send_mr_;
  std::vector<std::deque<std::pair<std::size_t, PendingWork>>> receives_;  // [peer], in order
  std::vector<std::deque<PendingWork>> sends_;                             // [peer], in order
  std::vector<std::size_t> next_send_slot_;                                // [peer]
  std::vector<std::deque<std::vector<std::byte>>> backlog_;                // [peer]

  std::mutex stop_mutex_;
  std::condition_variable stop_changed_;
  bool stopping_ = false;
  std::thread detector_;
};

}  // namespace ibv::net::detail
