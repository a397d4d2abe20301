// SPDX-License-Identifier: MIT
// Completion channel: a file descriptor that becomes readable when an armed completion queue
// attached to it gets a completion, so a thread can sleep (poll, epoll) instead of spinning.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "ibv/duration.hpp"
#include "ibv/verbs/context.hpp"

struct ibv_comp_channel;

namespace ibv {

/// A completion channel (ibv_create_comp_channel). Cheap-to-copy handle: the completion queues
/// attached to it keep it alive, and it keeps its Context open. Several completion queues may
/// share one channel (one fd then covers all of them).
///
/// Its fd is non-blocking. The race-free way to sleep until a completion of an attached queue
/// `cq` arrives:
///
///   for (;;) {
///     cq.request_notification();              // 1. arm: the NEXT completion raises an event
///     if (!cq.poll(batch).empty()) break;     // 2. check what arrived before arming
///     channel.wait(timeout);                  // 3. sleep until the fd is readable (or timeout)
///     channel.consume_events();               // 4. read and acknowledge the events
///   }
///
/// Step 2 must poll until the queue is empty (or until what is awaited is found): a completion
/// already in the queue when it was armed raises no event.
///
/// Acknowledgement: every event read is acknowledged on its queue (ibv_ack_cq_events), in
/// batches; the rest when the queue is destroyed, so that destroying a queue never waits for
/// events (ibv_destroy_cq would otherwise block forever). Events still unread in the channel
/// when a queue is destroyed are dropped by the kernel.
class CompletionChannel {
 public:
  /// Creates a channel on `context` and makes its fd non-blocking. Throws ibv::Error.
  explicit CompletionChannel(const Context& context);

  /// The file descriptor: readable while events are queued. Owned by the channel (do not
  /// close it); for poll / epoll / an event loop. Stays valid while any copy of this handle or
  /// an attached completion queue exists.
  [[nodiscard]] int fd() const noexcept;

  /// Waits until the fd is readable, at most `timeout` (0: only checks). Returns whether it
  /// is. Never blocks longer than `timeout` (poll(), restarted with the time left after a
  /// signal). Consumes nothing. Throws ibv::Error (invalid_argument) for a negative timeout.
  bool wait(Duration timeout) const;

  /// Reads every event queued now, without blocking, and acknowledges each on its completion
  /// queue (batched). Returns how many were read (0 when none were queued). After it, the
  /// queues whose events were read are no longer armed: arm them again before sleeping.
  /// Safe to call from several threads at once.
  std::size_t consume_events() const;

  /// wait(timeout), then consume_events() if the fd became readable: the number of events
  /// read (0: timed out, or another thread took the events first).
  std::size_t wait_and_consume(Duration timeout) const;

  /// The device it was created on.
  [[nodiscard]] const Context& context() const noexcept { return context_; }
  /// The libibverbs completion channel, owned by this handle (do not destroy it).
  [[nodiscard]] ibv_comp_channel* native() const noexcept { return channel_.get(); }
  /// The owning pointer its copies share, for objects that must keep it alive.
  [[nodiscard]] const std::shared_ptr<ibv_comp_channel>& shared() const noexcept {
    return channel_;
  }

  friend bool operator==(const CompletionChannel& a, const CompletionChannel& b) noexcept {
    return a.channel_ == b.channel_;
  }

 private:
  Context context_;
  std::shared_ptr<ibv_comp_channel> channel_;
};

}  // namespace ibv
