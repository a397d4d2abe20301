// SPDX-License-Identifier: MIT
// ChannelState: whether a channel still takes work, and if not, why (cancelled by a timeout, the
// peer gone, a failed completion). Channel::state() gives it, from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ibv/verbs/work_completion.hpp"

namespace ibv {

/// What a channel's state() says: usable, or why not. The first reason a channel stopped being
/// usable is kept (a timeout that cancelled it, the peer gone, a failed completion); later
/// ones (the flushes that follow any of them) do not replace it. A plain value: copy it freely.
///
/// - usable: nothing has broken the channel.
/// - cancelled: a timeout gave up on a request (Channel::execute and the named blocking calls,
///   a scope's drain, a PendingWork dropped unpolled, a co_await), so the channel moved its
///   queue pair to the error state and refuses further work (ErrorKind::state; test:
///   `ChannelStateTest.ATimedOutExecuteCancelsTheChannelAndTheErrorSaysSo`). operation() names the
///   call, e.g. "Channel::execute". The Error that call threw says channel_cancelled(). A
///   PendingWork::wait() that times out does not cancel anything.
/// - peer_gone: the peer vanished: a request it never acknowledged (retry_exceeded,
///   response_timeout: its process, queue pair, device or link is gone; ErrorKind::peer_gone; test:
///   `ChannelStateTest.APeerThatVanishesIsPeerGoneInTheErrorAndTheState`), or the rdma_cm
///   connection of a connected channel was disconnected. status() is the completion's status
///   (success when the disconnect said so, before any completion did).
/// - failed: a completion failed for another reason (remote_access_error, local_length_error,
///   rnr_retry_exceeded, ...), which moved the queue pair to the error state: every request
///   after it is flushed. status() is its status.
///
/// Only cancelled makes posts throw at once; on a channel whose state is peer_gone or failed the
/// device flushes what is posted (each request completes with work_request_flushed). Either way
/// the channel will not carry another message: build a new one.
class ChannelState {
 public:
  /// Which of the four a state is.
  enum class Condition : std::uint8_t { usable, cancelled, peer_gone, failed };

  /// A usable channel's state.
  constexpr ChannelState() noexcept = default;
  /// Cancelled by a timeout in `operation`, which must outlive every copy (a string literal).
  [[nodiscard]] static constexpr ChannelState cancelled_in(std::string_view operation) noexcept {
    return {Condition::cancelled, operation, WorkStatus::success};
  }
  /// Broken by a failed completion of `status`: peer_gone when its kind is peer_gone
  /// (retry_exceeded, response_timeout: ibv::kind_of), else failed. (A channel keeps only the
  /// status in its completion loops, and state() makes the ChannelState from it.)
  [[nodiscard]] static constexpr ChannelState broken_by(WorkStatus status) noexcept {
    const bool gone =
        status == WorkStatus::retry_exceeded || status == WorkStatus::response_timeout;
    return {gone ? Condition::peer_gone : Condition::failed, {}, status};
  }
  /// The peer disconnected (an rdma_cm disconnect), before any completion said why.
  [[nodiscard]] static constexpr ChannelState disconnected() noexcept {
    return {Condition::peer_gone, {}, WorkStatus::success};
  }

  /// Which of the four it is.
  [[nodiscard]] constexpr Condition condition() const noexcept { return condition_; }
  /// Whether the channel takes work: nothing has broken it.
  [[nodiscard]] constexpr bool usable() const noexcept { return condition_ == Condition::usable; }
  /// Whether a timeout cancelled it.
  [[nodiscard]] constexpr bool cancelled() const noexcept {
    return condition_ == Condition::cancelled;
  }
  /// Whether its peer vanished.
  [[nodiscard]] constexpr bool peer_gone() const noexcept {
    return condition_ == Condition::peer_gone;
  }
  /// Whether a completion failed (for a reason other than a vanished peer).
  [[nodiscard]] constexpr bool failed() const noexcept { return condition_ == Condition::failed; }
  /// The call whose timeout cancelled the channel ("Channel::execute", "Channel::scope",
  /// "MultiChannel::execute", ...); empty unless cancelled().
  [[nodiscard]] constexpr std::string_view operation() const noexcept { return operation_; }
  /// The status of the completion that broke the channel (peer_gone, failed); success otherwise.
  [[nodiscard]] constexpr WorkStatus status() const noexcept { return status_; }

  /// One line for a person: "usable", "cancelled by a timeout in Channel::execute", "peer gone
  /// (retry_exceeded)", "failed (remote_access_error)".
  [[nodiscard]] std::string to_string() const;

  friend constexpr bool operator==(const ChannelState&, const ChannelState&) noexcept = default;

 private:
  constexpr ChannelState(Condition condition, std::string_view operation,
                         WorkStatus status) noexcept
      : condition_(condition), operation_(operation), status_(status) {}

  Condition condition_ = Condition::usable;
  std::string_view operation_;
  WorkStatus status_ = WorkStatus::success;
};

/// Name of a Condition: "usable", "cancelled", "peer_gone", "failed".
[[nodiscard]] std::string_view to_string(ChannelState::Condition condition) noexcept;

}  // namespace ibv
