// SPDX-License-Identifier: MIT
// AllToAllRound: one finished round of a PersistentAllToAll, holding its receive slots until
// it is released (or destroyed), so that no sender overwrites what the caller still reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>

namespace ibv::net {

namespace detail {
class AllToAllCore;
}  // namespace detail

/// A round whose parts have all landed. part(r) is what rank r sent this rank, in this rank's
/// receive memory; it stays there, untouched by the senders, until release() (or the
/// destructor) gives the round's slots back, which lets the senders write the round
/// slots_per_peer later into them. Move-only.
///
/// Release rounds in any order: slots go back in round order (a round released early waits for
/// the ones before it). A round outliving its PersistentAllToAll holds nothing any more:
/// release() does nothing, part() throws ibv::Error (state; test:
/// `AllToAll.ARoundOutlivingItsCollectiveHoldsNothing`).
class AllToAllRound {
 public:
  /// An empty handle (number() 0, holds no slots).
  AllToAllRound() noexcept = default;
  /// Takes over `other`'s slots; `other` is left empty.
  AllToAllRound(AllToAllRound&& other) noexcept;
  /// Releases this round's slots, then takes over `other`'s.
  AllToAllRound& operator=(AllToAllRound&& other) noexcept;
  AllToAllRound(const AllToAllRound&) = delete;
  AllToAllRound& operator=(const AllToAllRound&) = delete;
  /// release().
  ~AllToAllRound();

  /// The round's number: 0 for the first round the collective ran, then 1, 2, ...
  [[nodiscard]] std::uint64_t number() const noexcept { return number_; }
  /// Whether it still holds its slots (not released, not moved from, not empty).
  [[nodiscard]] bool holds_slots() const noexcept { return !core_.expired(); }
  /// The bytes rank `source` sent this rank this round (this rank's own part included), of
  /// the size the sender gave. Throws ibv::Error: invalid_argument for a rank not below the world
  /// size (test: `AllToAllBadInput.BadPartsAreRefusedBeforeAnythingIsPostedAndTheRoundStillRuns`),
  /// state when the round was released or its collective is gone (tests:
  /// `AllToAll.ASlowReaderHoldsTheSendersBackAndNothingIsOverwritten`,
  /// `AllToAll.ARoundOutlivingItsCollectiveHoldsNothing`).
  [[nodiscard]] std::span<const std::byte> part(std::uint32_t source) const;
  /// Gives the slots back; the senders are told by credits, carried by this rank's next parts
  /// to them or sent alone by its next poll() or wait(). Nothing if it holds none.
  /// Never throws: it posts nothing itself (a failure to tell a sender shows at the call that
  /// sends the credit).
  void release() noexcept;

 private:
  friend class detail::AllToAllCore;  // makes every round
  AllToAllRound(std::weak_ptr<detail::AllToAllCore> core, std::uint64_t number) noexcept
      : core_(std::move(core)), number_(number) {}
  std::weak_ptr<detail::AllToAllCore> core_;
  std::uint64_t number_ = 0;
};

}  // namespace ibv::net
