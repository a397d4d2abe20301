// SPDX-License-Identifier: MIT
// Completion queue: where the device reports finished work requests; polled into a
// caller-owned array, so the hot path allocates nothing. Optionally attached to a completion
// channel, so that a thread can sleep until the next completion instead of spinning.
#pragma once

#include <infiniband/verbs.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>

#include "ibv/verbs/completion_channel.hpp"
#include "ibv/verbs/context.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

namespace detail {
/// Throws the Error of a failed ibv_poll_cq (a broken queue, not a failed request).
[[noreturn, gnu::cold]] void throw_poll_failure();
}  // namespace detail

/// Which completions raise an event once a completion queue is armed (request_notification).
enum class NotifyOn : std::uint8_t {
  any_completion,  ///< The next completion of any kind.
  solicited_only,  ///< The next received message sent with the solicited flag, or a failure.
};

/// A completion queue. Cheap-to-copy handle: queue pairs that report into it keep it alive,
/// and it keeps its Context open.
class CompletionQueue {
 public:
  /// Creates a CQ with room for at least `min_entries` completions (ibv_create_cq). Throws
  /// ibv::Error (invalid_argument) for 0 or more than the device's max_cqe.
  CompletionQueue(const Context& context, int min_entries);
  /// The same, attached to `channel` (which must be on the same device): once armed with
  /// request_notification(), the next completion makes channel.fd() readable. Several queues
  /// may share a channel. Events read from the channel are acknowledged on this queue in
  /// batches, the rest when it is destroyed, so destroying it never waits for them.
  CompletionQueue(const Context& context, int min_entries, const CompletionChannel& channel);

  /// Polls up to `out.size()` completions into `out` and returns the filled prefix (empty when
  /// none are ready). Never blocks, never allocates. Throws ibv::Error if the device reports a
  /// polling failure (a broken CQ, not a failed work request: those are values in `out`).
  /// Inline: nothing between the caller and the provider's poll.
  std::span<WorkCompletion> poll(std::span<WorkCompletion> out) const {
    const auto capacity =
        static_cast<int>(std::min<std::size_t>(out.size(), std::numeric_limits<int>::max()));
    // WorkCompletion is standard-layout with a single ibv_wc member: pointer-interconvertible.
    auto* raw = reinterpret_cast<ibv_wc*>(  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
        out.data());
    const int polled = ibv_poll_cq(cq_.get(), capacity, raw);
    if (polled < 0) [[unlikely]]
      detail::throw_poll_failure();
    return out.first(static_cast<std::size_t>(polled));
  }

  /// Arms the queue (ibv_req_notify_cq): the next completion (of the kind `on` says) after
  /// this call raises one event on the completion channel; completions already in the queue
  /// raise none, so poll after arming (see CompletionChannel). One event per arming: arm again
  /// after consuming it. Throws ibv::Error (state) when the queue has no channel, and the
  /// driver's error if arming fails.
  void request_notification(NotifyOn on = NotifyOn::any_completion) const;
  /// The channel the queue is attached to, if any.
  [[nodiscard]] const std::optional<CompletionChannel>& channel() const noexcept {
    return channel_;
  }

  /// The number of entries the device actually allocated (at least what was asked).
  [[nodiscard]] int capacity() const noexcept;
  /// The device it was created on.
  [[nodiscard]] const Context& context() const noexcept { return context_; }
  /// The libibverbs CQ, owned by this handle (do not destroy it).
  [[nodiscard]] ibv_cq* native() const noexcept { return cq_.get(); }
  /// The owning pointer its copies share, for objects that must keep it alive.
  [[nodiscard]] const std::shared_ptr<ibv_cq>& shared() const noexcept { return cq_; }

  friend bool operator==(const CompletionQueue& a, const CompletionQueue& b) noexcept {
    return a.cq_ == b.cq_;
  }

 private:
  Context context_;
  std::optional<CompletionChannel> channel_;
  std::shared_ptr<ibv_cq> cq_;
};

}  // namespace ibv
