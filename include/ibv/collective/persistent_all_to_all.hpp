// SPDX-License-Identifier: MIT
// PersistentAllToAll: the all-to-all(v) of an event builder, on a connected Node. Built once
// (every rank at once) over the caller's registered send and receive memory; then every round
// each rank writes one part of 0 to slot_size bytes to every rank, straight from its send
// memory into the receiver's slots, on a shift schedule with a bounded number of peers in
// flight, with credits so that rounds pipeline and nothing is overwritten, and no barrier.
//
//   ibv::net::PersistentAllToAll all_to_all(node, bootstrap, send_mr, receive_mr,
//                                           {.slot_size = 64 * 1024, .peers_in_flight = 4});
//   for (;;) {
//     // parts[r]: the bytes for rank r, a span of send_mr (up to slot_size)
//     ibv::net::AllToAllRound round = all_to_all.run(parts);
//     for (std::uint32_t r = 0; r < node.world_size(); ++r) use(round.part(r));
//   }  // the round's slots go back to the senders here
//
// Not the bootstrap's Bootstrap::all_to_all (TCP, set-up time only). The contract in full:
// [docs/all-to-all.md](docs/all-to-all.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "ibv/collective/all_to_all_round.hpp"
#include "ibv/collective/all_to_all_settings.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/memory_region.hpp"

namespace ibv::net {

class Bootstrap;
class Node;

/// A persistent all-to-all(v) among the ranks of a Node. Move-only; not thread-safe.
///
/// - **Memory.** The caller's: `send_memory` (any registration on the Node's protection
///   domain) holds the parts a round sends; `receive_memory` (registered with remote write
///   access) holds world_size() x slots_per_peer slots of slot_size bytes, round n's part from
///   rank r at offset ((n mod slots_per_peer) x world_size() + r) x slot_size.
/// - **Registrations and memory: who keeps what.** The collective shares both registrations
///   (MemoryRegion::shared()) until it is destroyed or a failure fences it: destroying a
///   MemoryRegion handle meanwhile does not deregister it, so no request of the collective
///   names a dead key and the receive memory's remote key, which the peers know, names that
///   memory and nothing else. The memory itself stays the caller's: keep it allocated until
///   the collective is destroyed or has failed (a registration pins the pages; it does not
///   keep a freed buffer from being reused). [docs/all-to-all.md](docs/all-to-all.md)
/// - **A round.** start() (or run()) takes one span per rank; each part goes by one RDMA write
///   with immediate data (its size, the round modulo 32, credits) into its slot at the receiver,
///   the own part by a local copy. wait() returns the round once every rank's part for it has
///   landed here and this rank's writes of it are complete (so its send memory may be
///   changed). Several rounds may be in flight at once (started, not yet returned), as many as
///   the slots allow: wait() returns them in order. Parts from one rank arrive in round order;
///   a part of another round than the one expected is a protocol error, not data (untested:
///   `protocol`, no test sends the collective a part it did not expect).
/// - **Credits.** A rank writes round n into a slot only after the receiver released round
///   n - slots_per_peer (AllToAllRound::release): a slow reader holds the senders back, and
///   nothing is overwritten. Credits travel in this rank's next parts, or alone at its next
///   poll() or wait(): they move during calls. Starting a round whose slot this rank still
///   holds, or has in flight, is ibv::Error (state; test:
///   `AllToAll.ASlowReaderHoldsTheSendersBackAndNothingIsOverwritten`).
/// - **Schedule.** Round by round, this rank writes to rank + 1, rank + 2, ... (modulo the
///   world size), at most peers_in_flight at once.
/// - **Failures.** Every wait ends within the timeout. A failure (ibv::Error: peer_gone for a rank
///   gone (test: `MultiHostAllToAll.ARankWhoseLinkGoesDownIsNamedByEveryOther`); timeout for a
///   round not complete in time, naming the ranks awaited (test:
///   `AllToAllFault.ARankThatStopsCallingIsNamedWithinTheTimeoutAndCannotWriteAfterTheFence`);
///   protocol for a protocol violation (untested: `protocol`, as above)) first destroys every queue
///   pair of the collective (the fence: no peer writes into the caller's memory and no request
///   reads it any more), then throws; every later call throws ibv::Error (state) naming that first
///   failure (test:
///   `AllToAllFault.ARankThatStopsCallingIsNamedWithinTheTimeoutAndCannotWriteAfterTheFence`). The
///   peers' rounds then fail too. [docs/safety.md](docs/safety.md)
/// - **On a fault-tolerant Node** (NodeBuilder::fault_tolerance()) the collective shares the
///   Node's failure detector (and keeps it running while it lives): a rank known failed ends
///   the round with ibv::Error (peer_gone) naming it within the detection bound, a revoke of
///   the Node with (revoked), fenced as above (tests:
///   `FaultToleranceKill.ARankKilledMidAllToAllTheSurvivorsShrinkRebuildAndCheckEveryByte`,
///   `FaultTolerance.ARevokeEndsTheAllToAllsRoundOnEveryOtherRank`). To go on, shrink the Node
///   and build the collective again on it with its in_band_bootstrap(), over the same memory
///   ([docs/all-to-all.md](docs/all-to-all.md)).
/// - **Ending.** A rank's last wait() returns once its own parts have landed and its writes are
///   acknowledged, while a peer may still be in that round (waiting for the acknowledgement of
///   its last write, say). Pass a barrier on every rank (Node::barrier) before destroying the
///   collective, so that no peer's last round fails for want of this rank.
/// - **Bad input** (wrong count of parts, a part outside the send memory or over the slot
///   size) throws ibv::Error (invalid_argument) before anything is posted, and the collective
///   stays usable (test:
///   `AllToAllBadInput.BadPartsAreRefusedBeforeAnythingIsPostedAndTheRoundStillRuns`).
/// - **Moved from.** A moved-from collective may be destroyed or assigned to; every other call
///   throws ibv::Error (state) saying it was moved from (test:
///   `AllToAll.EveryCallOfAMovedFromCollectiveThrowsState`). Its rounds belong to the collective
///   it was moved to.
class PersistentAllToAll {
 public:
  /// A wait's timeout: unset means AllToAllSettings::timeout.
  using Timeout = std::optional<Duration>;

  /// Builds the collective on every rank at once: makes a queue pair per peer on the Node's
  /// protection domain (with its channels' queue pair settings), exchanges the slots' addresses
  /// and the queue pairs' endpoints over `bootstrap` (the one the Node was connected with),
  /// connects, posts the receives and ends in bootstrap.barrier(). Takes a share of each
  /// registration (the class comment says what that keeps and what it does not).
  ///
  /// Throws ibv::Error (state) for a moved-from Node or MemoryRegion (test:
  /// `AllToAll.EveryCallOfAMovedFromCollectiveThrowsState`), (invalid_argument) before
  /// anything is created: a setting out of range,
  /// memory of another protection domain, receive memory without remote write access or too
  /// small for the slots, a bootstrap of another rank or world size; queue depths or the
  /// completion queue over the device's max_qp_wr or max_cqe (naming the limit); then a rank
  /// whose slot_size, slots_per_peer or world differs (naming it), and the bootstrap's errors
  /// (tests: `AllToAllBadInput.EveryBuildSettingIsCheckedBeforeAnythingIsCreated`,
  /// `AllToAllBadInput.SettingsThatDifferBetweenRanksNameTheRank`).
  PersistentAllToAll(Node& node, Bootstrap& bootstrap, const MemoryRegion& send_memory,
                     const MemoryRegion& receive_memory, const AllToAllSettings& settings);
  /// Takes over the collective; the moved-from object may only be destroyed or assigned to
  /// (every other call throws ibv::Error, state; test:
  /// `AllToAll.EveryCallOfAMovedFromCollectiveThrowsState`).
  PersistentAllToAll(PersistentAllToAll&&) noexcept;
  /// Destroys this collective (as the destructor) and takes over `other`'s.
  PersistentAllToAll& operator=(PersistentAllToAll&&) noexcept;
  PersistentAllToAll(const PersistentAllToAll&) = delete;
  PersistentAllToAll& operator=(const PersistentAllToAll&) = delete;
  /// Destroys the queue pairs (the device touches neither memory afterwards). Rounds still
  /// held stop holding anything (AllToAllRound).
  ~PersistentAllToAll();

  /// Starts the next round: `parts[r]` (a span of the send memory, at most slot_size bytes,
  /// may be empty) goes to rank r; the own part is copied at once. Posts what the credits and
  /// peers_in_flight allow and returns; wait() or poll() take it on. The spans' bytes must stay
  /// unchanged until the round is returned. Rounds already in flight stay so: a round's parts
  /// go out once the rounds before it have posted theirs. Throws ibv::Error: invalid_argument
  /// for bad parts (nothing posted; test:
  /// `AllToAllBadInput.BadPartsAreRefusedBeforeAnythingIsPostedAndTheRoundStillRuns`); state when
  /// this rank still holds, or has in flight, the round whose slots this one needs (slots_per_peer
  /// rounds are held or in flight), or after a failure (tests:
  /// `AllToAll.ASlowReaderHoldsTheSendersBackAndNothingIsOverwritten`,
  /// `AllToAllFault.ARankThatStopsCallingIsNamedWithinTheTimeoutAndCannotWriteAfterTheFence`).
  void start(std::span<const std::span<const std::byte>> parts);
  /// Takes completions and posts what they allow, without waiting: the oldest round in flight
  /// once it is complete, else nothing. Throws as wait() does.
  [[nodiscard]] std::optional<AllToAllRound> poll();
  /// Waits for the oldest round in flight (by the wait mode), at most `timeout`. Throws
  /// ibv::Error: state when no round is in flight or after an earlier failure (tests:
  /// `AllToAllBadInput.BadPartsAreRefusedBeforeAnythingIsPostedAndTheRoundStillRuns`,
  /// `AllToAllFault.ARankWhoseQueuePairsVanishIsNamed`); timeout naming the ranks whose parts,
  /// credits or acknowledgements are missing (test:
  /// `AllToAllFault.ARankThatStopsCallingIsNamedWithinTheTimeoutAndCannotWriteAfterTheFence`);
  /// peer_gone naming a rank that vanished (and the failed completion's kind for other failures;
  /// test: `MultiHostAllToAll.ARankWhoseLinkGoesDownIsNamedByEveryOther`); protocol for a part of
  /// the wrong round or size (untested: `protocol`, no test sends the collective a part it did not
  /// expect). A failure fences the collective first (see the class comment).
  AllToAllRound wait(Timeout timeout = {});
  /// start(parts), then wait(timeout).
  AllToAllRound run(std::span<const std::span<const std::byte>> parts, Timeout timeout = {});

  // The getters throw ibv::Error (state) only for a moved-from collective.
  /// This rank.
  [[nodiscard]] std::uint32_t rank() const;
  /// The number of ranks.
  [[nodiscard]] std::uint32_t world_size() const;
  /// The settings, with peers_in_flight, timeout and wait_mode resolved.
  [[nodiscard]] const AllToAllSettings& settings() const;
  /// The number of rounds started so far (the next round's number).
  [[nodiscard]] std::uint64_t rounds_started() const;
  /// Whether a failure has ended the collective (every call but these getters then throws).
  [[nodiscard]] bool failed() const;

  /// The fd of the collective's completion channel, for the caller's poll / epoll loop:
  /// start(); then until poll() gives the round: arm_completion_fd(), poll(), sleep on the fd,
  /// consume_completion_events(). Throws ibv::Error (state) without a completion channel
  /// (AllToAllSettings::completion_channel, or a wait mode that sleeps; test:
  /// `AllToAll.WithoutACompletionChannelThereIsNoFd`).
  [[nodiscard]] int completion_fd() const;
  /// Arms the completion queue: the next completion makes completion_fd() readable. Poll
  /// after arming (a completion before it raises no event). Throws as completion_fd().
  void arm_completion_fd();
  /// Reads and acknowledges the events queued on completion_fd(), without blocking; returns
  /// how many. Throws as completion_fd().
  std::size_t consume_completion_events();

 private:
  std::shared_ptr<detail::AllToAllCore> core_;
};

}  // namespace ibv::net
