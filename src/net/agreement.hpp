// SPDX-License-Identifier: MIT
// Private: a uniform, fault-tolerant agreement among the ranks of a world (what ULFM's
// MPI_Comm_agree does), as a pure state machine without transport, threads or clocks. The
// caller feeds it messages and failure notices and sends what take_outbox() returns; every
// survivor of the crashes decides the same AgreementValue: the bitwise AND of the flags and the
// union of the failed sets of the contributions.
//
// Model: fail-stop ranks; reliable FIFO channels between live ranks; a failure detector that
// eventually reports every crash to every survivor and reports only ranks that stopped (or that
// are fenced everywhere, see below). Messages from a rank this rank knows failed are dropped. A
// rank named in any rank's initial known_failed takes no step in the instance.
//
// Protocol.
//  Fast path (ballot 0), failure-free: the participants (ranks not initially known failed, in
//  rank order, positions 0..M-1) run a dissemination all-reduce (R = ceil(log2 M) rounds; in
//  round k position i sends its partial value to i + 2^k and combines the one of i - 2^k, mod M).
//  AND and union are idempotent, so every participant that completes holds v, the combination of
//  every contribution. It accepts (0, v) and runs a dissemination barrier (R rounds) over the
//  same participants; completing it means every participant accepted (0, v): it decides v.
//  2R messages per rank. Fast-path messages carry a fingerprint of the participant set; a
//  mismatch means the views differ and starts the recovery.
//  Recovery (Paxos with "every rank not known failed" for a majority): a rank that has not
//  decided enters it when it learns of a failure, sees a mismatched fingerprint or receives a
//  recovery message, and leaves the fast path for good (it neither accepts ballot 0 nor sends
//  fast-path messages any more). Its coordinator is the lowest rank it does not know failed.
//  The coordinator runs ballots (round >= 1, its rank): PREPARE to every rank it does not know
//  failed; each answers PROMISE(accepted ballot and value if any, its contribution with the
//  failures it knows) and ignores lower ballots from then on, or NACK(its promise) if that is
//  higher, which makes the coordinator retry with a higher round. With a promise from every rank
//  it does not know failed (a failure while waiting takes that rank off the wait), it proposes
//  the value of the highest accepted ballot, else the combination of the promised contributions
//  with every failure it knows; ACCEPT to all, ACCEPTED back (or NACK), then COMMIT to all;
//  whoever receives COMMIT decides.
//  Beyond the outline it was built from (both needed for termination; the tests fail without):
//  - RECOVER: a rank that enters the recovery on its own (a failure notice, a mismatch) and is
//    not the coordinator tells its coordinator so, and tells the next one when the coordinator
//    fails. Without it nothing wakes a coordinator that decided on the fast path: with 3 ranks,
//    rank 2 crashes between its two barrier signals, rank 0 decides, rank 1 learns of the crash
//    and waits for a PREPARE that rank 0, decided, would never send.
//  - DECIDED(v): a decided rank answers every PREPARE, ACCEPT and RECOVER with its decision
//    (instead of a promise). A rank that a RECOVER reached, or that decides while running a
//    ballot, sends its decision once to every rank it does not know failed: ranks still waiting
//    in the fast path for a rank that left it hear of it, and so do ranks that asked a rank for
//    a ballot which then decided by a COMMIT whose copies to them died with its sender (they
//    had already learned of that crash, so they drop the copies).
//
// Uniform agreement (also of ranks that crash right after deciding). Call (b, v) chosen when
// every rank of a set A accepted it: for ballot 0 A is every participant (the barrier completed
// somewhere), for b >= 1 every rank the coordinator did not know failed when it committed.
// Every decision is of a chosen value (COMMIT, barrier) or copies one (DECIDED). Ballot 0 has
// one value: completing the all-reduce needs every participant to share the view (fingerprint),
// and two disjoint views cannot both contain the ranks that take steps. If (b0, v) is chosen,
// every ballot b > b0 proposes v: its coordinator heard promises from the set Q of ranks it did
// not know failed; A and Q share the coordinator that acted later, which was alive then (so in
// neither failure set); that rank accepted b0 before promising b (after promising it would have
// refused b0), so the highest accepted ballot reported is >= b0 and carries v by induction.
// Termination: a survivor stuck in the fast path waits for a rank that crashed (it learns so)
// or for one that left the fast path, which woke its coordinator (RECOVER); a woken rank either
// runs ballots, which reach every rank, or sends its decision to every rank. Once every crash
// is known, only the lowest survivor coordinates; stale higher promises cost it finitely many
// NACKs and every live rank answers it, so its ballot commits. Validity: a proposal combines
// the promised contributions (every survivor promises) or is ballot 0's (every contribution).
//
// False suspicions: the argument needs a failure detector that reports only ranks that no longer
// take steps with anyone. If a suspected rank is only fenced by the ranks that suspect it, two
// sides that suspect each other (a partition) each decide alone, possibly differently.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <variant>
#include <vector>

namespace ibv::net::detail {

/// A set of ranks, kept as a sorted vector (failed sets are small; any rank fits).
class RankSet {
 public:
  RankSet() = default;
  RankSet(std::initializer_list<std::uint32_t> ranks);

  /// Adds `rank`; false when it was already there.
  bool insert(std::uint32_t rank);
  /// Removes `rank`; false when it was not there.
  bool erase(std::uint32_t rank);
  [[nodiscard]] bool contains(std::uint32_t rank) const noexcept;
  /// Adds every rank of `other`.
  void unite(const RankSet& other);
  [[nodiscard]] std::size_t size() const noexcept { return ranks_.size(); }
  [[nodiscard]] bool empty() const noexcept { return ranks_.empty(); }
  /// The ranks in ascending order.
  [[nodiscard]] std::span<const std::uint32_t> ranks() const noexcept { return ranks_; }
  [[nodiscard]] auto begin() const noexcept { return ranks_.begin(); }
  [[nodiscard]] auto end() const noexcept { return ranks_.end(); }

  friend bool operator==(const RankSet&, const RankSet&) = default;

 private:
  std::vector<std::uint32_t> ranks_;
};

/// What the ranks agree on; contributions combine by AND of the flags and union of the sets.
struct AgreementValue {
  std::uint32_t flags = 0;
  RankSet failed;

  void combine(const AgreementValue& other) {
    flags &= other.flags;
    failed.unite(other.failed);
  }
  friend bool operator==(const AgreementValue&, const AgreementValue&) = default;
};

/// A ballot: round 0 is the fast path; recovery ballots have round >= 1 and their coordinator's
/// rank. Ordered by round, then rank.
struct Ballot {
  std::uint32_t round = 0;
  std::uint32_t rank = 0;
  friend bool operator==(const Ballot&, const Ballot&) = default;
  friend std::strong_ordering operator<=>(const Ballot& a, const Ballot& b) noexcept {
    if (const auto by_round = a.round <=> b.round; std::is_neq(by_round)) return by_round;
    return a.rank <=> b.rank;
  }
};

/// A value accepted (or proposed) in a ballot.
struct Proposal {
  Ballot ballot;
  AgreementValue value;
  friend bool operator==(const Proposal&, const Proposal&) = default;
};

/// The messages, one struct per kind (see the protocol above).
namespace agreement {
struct Reduce {  // fast path, all-reduce round `round`: the sender's partial value
  std::uint32_t round = 0;
  std::uint64_t fingerprint = 0;
  AgreementValue partial;
  friend bool operator==(const Reduce&, const Reduce&) = default;
};
struct Confirm {  // fast path, barrier round `round`: the sender accepted (0, v)
  std::uint32_t round = 0;
  std::uint64_t fingerprint = 0;
  friend bool operator==(const Confirm&, const Confirm&) = default;
};
struct Recover {  // to the coordinator: the sender is in the recovery
  friend bool operator==(const Recover&, const Recover&) = default;
};
struct Prepare {
  Ballot ballot;
  friend bool operator==(const Prepare&, const Prepare&) = default;
};
struct Promise {
  Ballot ballot;
  std::optional<Proposal> accepted;  // the sender's highest accepted ballot and value
  AgreementValue contribution;       // its own value, with every failure it knows
  friend bool operator==(const Promise&, const Promise&) = default;
};
struct Nack {
  Ballot ballot;    // the refused ballot
  Ballot promised;  // the higher ballot the sender promised
  friend bool operator==(const Nack&, const Nack&) = default;
};
struct Accept {
  Ballot ballot;
  AgreementValue value;
  friend bool operator==(const Accept&, const Accept&) = default;
};
struct Accepted {
  Ballot ballot;
  friend bool operator==(const Accepted&, const Accepted&) = default;
};
struct Commit {
  Ballot ballot;
  AgreementValue value;
  friend bool operator==(const Commit&, const Commit&) = default;
};
struct Decided {  // from a rank that decided: its decision
  AgreementValue value;
  friend bool operator==(const Decided&, const Decided&) = default;
};
}  // namespace agreement

struct AgreementMessage {
  using Body =
      std::variant<agreement::Reduce, agreement::Confirm, agreement::Recover, agreement::Prepare,
                   agreement::Promise, agreement::Nack, agreement::Accept, agreement::Accepted,
                   agreement::Commit, agreement::Decided>;
  std::uint64_t instance = 0;
  Body body;
  friend bool operator==(const AgreementMessage&, const AgreementMessage&) = default;
};

/// A message to send to rank `to`.
struct AgreementOutgoing {
  std::uint32_t to = 0;
  AgreementMessage message;
};

/// The wire form, little-endian: a version byte, the kind (the variant's index + 1), the
/// instance (8 bytes), then the kind's fields; a failed set is a 4-byte length and a bitmap
/// (bit r % 8 of byte r / 8 is rank r).
[[nodiscard]] std::vector<std::byte> encode_agreement_message(const AgreementMessage& message);
/// The message `bytes` encode; throws ibv::Error (protocol) naming what is wrong when they are
/// not exactly one message of this version.
[[nodiscard]] AgreementMessage decode_agreement_message(std::span<const std::byte> bytes);

/// One rank's side of one agreement instance. Lives on after deciding: it keeps answering.
class Agreement {
 public:
  static constexpr std::uint8_t kWireVersion = 1;

  /// `known_failed` (ranks this rank knows failed; not `rank`) joins `mine.failed`. Every rank
  /// of one agreement must use the same `instance`; messages of another instance are ignored.
  Agreement(std::uint32_t rank, std::uint32_t world_size, std::uint64_t instance,
            RankSet known_failed, AgreementValue mine);

  /// Starts the fast path (queues its first messages); with one participant, decides.
  void start();
  /// A message from rank `from`.
  void on_message(std::uint32_t from, const AgreementMessage& message);
  /// The failure detector's report that `rank` failed.
  void on_failure(std::uint32_t rank);
  /// The messages queued since the last call, in the order they must be sent.
  [[nodiscard]] std::vector<AgreementOutgoing> take_outbox();

  [[nodiscard]] const std::optional<AgreementValue>& decided() const noexcept { return decided_; }
  /// Whether this rank left the fast path for the recovery.
  [[nodiscard]] bool recovering() const noexcept { return recovering_; }
  /// Every rank this rank knows failed.
  [[nodiscard]] const RankSet& known_failed() const noexcept { return failed_; }
  /// The lowest rank this rank does not know failed.
  [[nodiscard]] std::uint32_t coordinator() const noexcept;
  /// Messages queued so far, all kinds and the fast path's alone.
  [[nodiscard]] std::uint64_t messages_sent() const noexcept { return sent_; }
  [[nodiscard]] std::uint64_t fast_path_messages_sent() const noexcept { return fast_sent_; }
  /// Rounds of each fast-path phase for `participants` ranks: ceil(log2 participants).
  [[nodiscard]] static std::uint32_t rounds_for(std::size_t participants) noexcept;

 private:
  enum class Phase : std::uint8_t { idle, preparing, accepting };

  void send(std::uint32_t to, AgreementMessage::Body body);
  void send_to_all(const AgreementMessage::Body& body);
  [[nodiscard]] RankSet live_others() const;

  void on_fast_path(std::uint32_t from, bool reduce, std::uint32_t round, std::uint64_t fingerprint,
                    const AgreementValue* partial);
  void advance_fast_path();
  void enter_recovery(std::optional<std::uint32_t> prompted_by);
  void drive_recovery();
  void start_ballot();
  void on_promise(std::uint32_t from, const agreement::Promise& promise);
  void on_nack(const agreement::Nack& nack);
  void check_ballot();
  void on_prepare(std::uint32_t from, const agreement::Prepare& prepare);
  void on_accept(std::uint32_t from, const agreement::Accept& accept);
  void on_recover(std::uint32_t from);
  void decide(const AgreementValue& value);
  void announce();
  void promise(const Ballot& ballot);
  [[nodiscard]] AgreementValue contribution() const;

  std::uint32_t rank_;
  std::uint32_t world_size_;
  std::uint64_t instance_;
  RankSet failed_;
  AgreementValue mine_;

  // Fast path: positions are indices into participants_.
  std::vector<std::uint32_t> participants_;
  std::size_t position_ = 0;
  std::uint64_t fingerprint_ = 0;
  std::uint32_t rounds_ = 0;
  bool started_ = false;
  std::uint32_t step_ = 0;  // steps 0..R-1 reduce, R..2R-1 confirm, 2R done
  bool step_sent_ = false;
  AgreementValue partial_;
  std::vector<std::optional<AgreementValue>> reduce_in_;
  std::vector<bool> confirm_in_;

  // Acceptor.
  bool recovering_ = false;
  Ballot promised_{};
  std::optional<Proposal> accepted_;
  std::uint32_t highest_round_ = 0;
  std::optional<std::uint32_t> told_;  // the coordinator this rank last sent RECOVER

  // Coordinator.
  Phase phase_ = Phase::idle;
  Ballot ballot_{};
  RankSet waiting_;
  std::optional<Proposal> best_;
  AgreementValue gathered_;
  AgreementValue proposal_;
  bool announced_ = false;
  bool asked_ = false;  // a RECOVER reached this rank

  std::optional<AgreementValue> decided_;
  std::vector<AgreementOutgoing> outbox_;
  std::uint64_t sent_ = 0;
  std::uint64_t fast_sent_ = 0;
};

}  // namespace ibv::net::detail
