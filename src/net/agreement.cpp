// SPDX-License-Identifier: MIT
// The agreement state machine: fast path and Paxos-like recovery (the protocol and why it is
// safe are described in agreement.hpp); the wire form is in agreement_wire.cpp.
#include "net/agreement.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ibv/error.hpp"

namespace ibv::net::detail {
namespace {

// FNV-1a (64 bits) over the world size, the participant count and the participants.
std::uint64_t fingerprint_of(std::uint32_t world_size,
                             const std::vector<std::uint32_t>& participants) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  const auto mix = [&hash](std::uint64_t word) {
    for (unsigned byte = 0; byte < 4; ++byte) {
      hash ^= (word >> (8U * byte)) & 0xffU;
      hash *= 0x100000001b3ULL;
    }
  };
  mix(world_size);
  mix(participants.size());
  for (const std::uint32_t rank : participants) mix(rank);
  return hash;
}

}  // namespace

// --- RankSet ----------------------------------------------------------------------------------

RankSet::RankSet(std::initializer_list<std::uint32_t> ranks) {
  for (const std::uint32_t rank : ranks) insert(rank);
}

bool RankSet::insert(std::uint32_t rank) {
  const auto at = std::lower_bound(ranks_.begin(), ranks_.end(), rank);
  if (at != ranks_.end() && *at == rank) return false;
  ranks_.insert(at, rank);
  return true;
}

bool RankSet::erase(std::uint32_t rank) {
  const auto at = std::lower_bound(ranks_.begin(), ranks_.end(), rank);
  if (at == ranks_.end() || *at != rank) return false;
  ranks_.erase(at);
  return true;
}

bool RankSet::contains(std::uint32_t rank) const noexcept {
  return std::binary_search(ranks_.begin(), ranks_.end(), rank);
}

void RankSet::unite(const RankSet& other) {
  if (std::includes(ranks_.begin(), ranks_.end(), other.ranks_.begin(), other.ranks_.end())) {
    return;
  }
  std::vector<std::uint32_t> both;
  both.reserve(ranks_.size() + other.ranks_.size());
  std::set_union(ranks_.begin(), ranks_.end(), other.ranks_.begin(), other.ranks_.end(),
                 std::back_inserter(both));
  ranks_ = std::move(both);
}

// --- Agreement --------------------------------------------------------------------------------

Agreement::Agreement(std::uint32_t rank, std::uint32_t world_size, std::uint64_t instance,
                     RankSet known_failed, AgreementValue mine)
    : rank_(rank),
      world_size_(world_size),
      instance_(instance),
      failed_(std::move(known_failed)),
      mine_(std::move(mine)) {
  constexpr std::string_view kOperation = "Agreement";
  if (world_size == 0) throw_invalid_argument(kOperation, "world_size", "is 0");
  if (rank >= world_size) {
    throw_invalid_argument(
        kOperation, "rank",
        std::to_string(rank) + " is outside the world of " + std::to_string(world_size) + " ranks");
  }
  if (!failed_.empty() && failed_.ranks().back() >= world_size) {
    throw_invalid_argument(kOperation, "known_failed",
                           "names rank " + std::to_string(failed_.ranks().back()) +
                               ", outside the world of " + std::to_string(world_size) + " ranks");
  }
  if (failed_.contains(rank)) {
    throw_invalid_argument(kOperation, "known_failed",
                           "names this rank (" + std::to_string(rank) + ") itself");
  }
  mine_.failed.unite(failed_);
  for (std::uint32_t r = 0; r < world_size; ++r) {
    if (r == rank) position_ = participants_.size();
    if (!failed_.contains(r)) participants_.push_back(r);
  }
  fingerprint_ = fingerprint_of(world_size, participants_);
  rounds_ = rounds_for(participants_.size());
  partial_ = mine_;
  reduce_in_.resize(rounds_);
  confirm_in_.resize(rounds_);
}

std::uint32_t Agreement::rounds_for(std::size_t participants) noexcept {
  return participants <= 1 ? 0 : static_cast<std::uint32_t>(std::bit_width(participants - 1));
}

std::uint32_t Agreement::coordinator() const noexcept {
  std::uint32_t lowest = 0;
  for (const std::uint32_t failed : failed_) {
    if (failed != lowest) break;
    ++lowest;
  }
  return lowest;
}

std::vector<AgreementOutgoing> Agreement::take_outbox() { return std::exchange(outbox_, {}); }

void Agreement::send(std::uint32_t to, AgreementMessage::Body body) {
  outbox_.push_back({.to = to, .message = {.instance = instance_, .body = std::move(body)}});
  ++sent_;
}

RankSet Agreement::live_others() const {
  RankSet others;
  for (std::uint32_t r = 0; r < world_size_; ++r) {
    if (r != rank_ && !failed_.contains(r)) others.insert(r);
  }
  return others;
}

void Agreement::send_to_all(const AgreementMessage::Body& body) {
  for (const std::uint32_t to : live_others()) send(to, body);
}

AgreementValue Agreement::contribution() const {
  AgreementValue value = mine_;
  value.failed.unite(failed_);
  return value;
}

void Agreement::start() {
  if (started_) {
    throw Error(ErrorKind::state, "Agreement::start", EINVAL, "the agreement was started before");
  }
  started_ = true;
  advance_fast_path();
}

void Agreement::on_message(std::uint32_t from, const AgreementMessage& message) {
  if (from >= world_size_ || from == rank_) {
    throw_invalid_argument("Agreement::on_message", "from",
                           "is rank " + std::to_string(from) +
                               ": not another rank of the world of " + std::to_string(world_size_));
  }
  // Another instance's message is not ours; a rank known failed is fenced.
  if (message.instance != instance_ || failed_.contains(from)) return;
  std::visit(
      [this, from](const auto& m) {
        using namespace agreement;  // NOLINT(google-build-using-namespace): the message structs
        using Kind = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<Kind, Reduce>) {
          on_fast_path(from, true, m.round, m.fingerprint, &m.partial);
        } else if constexpr (std::is_same_v<Kind, Confirm>) {
          on_fast_path(from, false, m.round, m.fingerprint, nullptr);
        } else if constexpr (std::is_same_v<Kind, Recover>) {
          on_recover(from);
        } else if constexpr (std::is_same_v<Kind, Prepare>) {
          on_prepare(from, m);
        } else if constexpr (std::is_same_v<Kind, Promise>) {
          on_promise(from, m);
        } else if constexpr (std::is_same_v<Kind, Nack>) {
          on_nack(m);
        } else if constexpr (std::is_same_v<Kind, Accept>) {
          on_accept(from, m);
        } else if constexpr (std::is_same_v<Kind, Accepted>) {
          if (phase_ == Phase::accepting && m.ballot == ballot_ && waiting_.erase(from)) {
            check_ballot();
          }
        } else {  // Commit and Decided: a decision
          decide(m.value);
        }
      },
      message.body);
}

void Agreement::on_failure(std::uint32_t rank) {
  if (rank >= world_size_ || rank == rank_) {
    throw_invalid_argument("Agreement::on_failure", "rank",
                           "is rank " + std::to_string(rank) +
                               ": not another rank of the world of " + std::to_string(world_size_));
  }
  if (!failed_.insert(rank) || decided_) return;
  if (phase_ != Phase::idle && waiting_.erase(rank)) check_ballot();
  enter_recovery(std::nullopt);  // a new failure is always one of a participant
}

// --- fast path --------------------------------------------------------------------------------

void Agreement::on_fast_path(std::uint32_t from, bool reduce, std::uint32_t round,
                             std::uint64_t fingerprint, const AgreementValue* partial) {
  if (fingerprint != fingerprint_) {  // the sender has another participant set
    enter_recovery(std::nullopt);
    return;
  }
  const std::size_t count = participants_.size();
  const std::string_view what = reduce ? "reduce" : "confirm";
  if (round >= rounds_ ||
      participants_[(position_ + count - ((std::size_t{1} << round) % count)) % count] != from) {
    throw Error(ErrorKind::protocol, "Agreement::on_message", EPROTO,
                "rank " + std::to_string(from) + " sent a " + std::string(what) +
                    " message for round " + std::to_string(round) +
                    " that its place in the dissemination schedule does not allow");
  }
  if (reduce ? reduce_in_[round].has_value() : static_cast<bool>(confirm_in_[round])) {
    throw Error(ErrorKind::protocol, "Agreement::on_message", EPROTO,
                "rank " + std::to_string(from) + " sent a second " + std::string(what) +
                    " message for round " + std::to_string(round));
  }
  if (reduce) {
    reduce_in_[round] = *partial;
  } else {
    confirm_in_[round] = true;
  }
  advance_fast_path();
}

void Agreement::advance_fast_path() {
  if (!started_ || recovering_ || decided_) return;
  const std::size_t count = participants_.size();
  for (;;) {
    if (step_ == rounds_ && !accepted_) accepted_ = Proposal{.ballot = {}, .value = partial_};
    if (step_ == 2 * rounds_) {
      decide(partial_);  // the barrier completed: every participant accepted (0, partial_)
      return;
    }
    const bool reduce = step_ < rounds_;
    const std::uint32_t round = reduce ? step_ : step_ - rounds_;
    if (!step_sent_) {
      const std::uint32_t to = participants_[(position_ + (std::size_t{1} << round)) % count];
      if (reduce) {
        send(to,
             agreement::Reduce{.round = round, .fingerprint = fingerprint_, .partial = partial_});
      } else {
        send(to, agreement::Confirm{.round = round, .fingerprint = fingerprint_});
      }
      ++fast_sent_;
      step_sent_ = true;
    }
    if (reduce) {
      if (!reduce_in_[round]) return;
      partial_.combine(*reduce_in_[round]);
    } else if (!confirm_in_[round]) {
      return;
    }
    ++step_;
    step_sent_ = false;
  }
}

// --- recovery ---------------------------------------------------------------------------------

void Agreement::enter_recovery(std::optional<std::uint32_t> prompted_by) {
  if (decided_) return;
  if (!recovering_) {
    recovering_ = true;
    // Prompted by its coordinator's message, the rank need not tell the coordinator.
    if (prompted_by == coordinator()) told_ = prompted_by;
  }
  drive_recovery();
}

void Agreement::drive_recovery() {
  if (decided_ || !recovering_) return;
  const std::uint32_t lowest = coordinator();
  if (lowest == rank_) {
    if (phase_ == Phase::idle) start_ballot();
  } else if (told_ != lowest) {
    told_ = lowest;
    send(lowest, agreement::Recover{});
  }
}

void Agreement::start_ballot() {
  highest_round_ = std::max(highest_round_, promised_.round) + 1;
  ballot_ = {.round = highest_round_, .rank = rank_};
  promised_ = ballot_;
  phase_ = Phase::preparing;
  waiting_ = live_others();
  best_ = accepted_;
  gathered_ = contribution();
  send_to_all(agreement::Prepare{ballot_});
  check_ballot();
}

void Agreement::on_promise(std::uint32_t from, const agreement::Promise& promise) {
  if (phase_ != Phase::preparing || promise.ballot != ballot_ || !waiting_.erase(from)) return;
  gathered_.combine(promise.contribution);
  if (promise.accepted && (!best_ || best_->ballot < promise.accepted->ballot)) {
    best_ = promise.accepted;
  }
  check_ballot();
}

void Agreement::on_nack(const agreement::Nack& nack) {
  highest_round_ = std::max(highest_round_, nack.promised.round);
  if (phase_ != Phase::idle && nack.ballot == ballot_ && ballot_ < nack.promised) {
    phase_ = Phase::idle;  // retry with a higher round
    drive_recovery();
  }
}

// Moves the coordinator's ballot on once every rank it does not know failed has answered.
void Agreement::check_ballot() {
  if (!waiting_.empty() || decided_) return;
  if (phase_ == Phase::preparing) {
    if (best_) {
      proposal_ = best_->value;
    } else {
      proposal_ = gathered_;
      proposal_.failed.unite(failed_);
    }
    accepted_ = Proposal{.ballot = ballot_, .value = proposal_};
    phase_ = Phase::accepting;
    waiting_ = live_others();
    send_to_all(agreement::Accept{.ballot = ballot_, .value = proposal_});
  }
  if (phase_ == Phase::accepting && waiting_.empty()) {
    send_to_all(agreement::Commit{.ballot = ballot_, .value = proposal_});
    announced_ = true;
    phase_ = Phase::idle;
    decide(proposal_);
  }
}

void Agreement::promise(const Ballot& ballot) {
  promised_ = ballot;
  if (phase_ != Phase::idle && ballot_ < ballot) phase_ = Phase::idle;  // ours lost
}

void Agreement::on_prepare(std::uint32_t from, const agreement::Prepare& prepare) {
  highest_round_ = std::max(highest_round_, prepare.ballot.round);
  if (decided_) {
    send(from, agreement::Decided{*decided_});
    return;
  }
  enter_recovery(from);
  if (prepare.ballot < promised_) {
    send(from, agreement::Nack{.ballot = prepare.ballot, .promised = promised_});
    return;
  }
  promise(prepare.ballot);
  send(from, agreement::Promise{
                 .ballot = prepare.ballot, .accepted = accepted_, .contribution = contribution()});
}

void Agreement::on_accept(std::uint32_t from, const agreement::Accept& accept) {
  highest_round_ = std::max(highest_round_, accept.ballot.round);
  if (decided_) {
    send(from, agreement::Decided{*decided_});
    return;
  }
  enter_recovery(from);
  if (accept.ballot < promised_) {
    send(from, agreement::Nack{.ballot = accept.ballot, .promised = promised_});
    return;
  }
  promise(accept.ballot);
  accepted_ = Proposal{.ballot = accept.ballot, .value = accept.value};
  send(from, agreement::Accepted{accept.ballot});
}

void Agreement::on_recover(std::uint32_t from) {
  if (!decided_) {
    // The sender takes this rank for its coordinator: it knows of failures this rank does not
    // know yet. Once this rank decides (maybe by a COMMIT already on its way), it must tell.
    asked_ = true;
    enter_recovery(std::nullopt);
  } else if (!announced_) {
    announce();  // reaches `from` too
  } else {
    send(from, agreement::Decided{*decided_});
  }
}

void Agreement::decide(const AgreementValue& value) {
  if (decided_) return;
  decided_ = value;
  const bool coordinating = phase_ != Phase::idle;
  phase_ = Phase::idle;
  waiting_ = {};
  // The ranks that answered its ballot, or asked it to recover, wait for it.
  if ((coordinating || asked_) && !announced_) announce();
}

void Agreement::announce() {
  announced_ = true;
  send_to_all(agreement::Decided{*decided_});
}

}  // namespace ibv::net::detail
