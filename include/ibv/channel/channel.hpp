// Channel: one safe point-to-point RDMA connection (a reliable-connected queue pair with its
// own completion queue), built in two phases like the QP, with three ways to post work:
// blocking, scoped and unpolled.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/channel/scope.hpp"
#include "ibv/channel/wait_mode.hpp"
#include "ibv/verbs/completion_channel.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

class PreparedChannel;
class Channel;

/// How long the Channel's waits may take, unless a call says otherwise.
struct ChannelTimeouts {
  /// Blocking calls without a timeout of their own, PendingWork::wait(), and a scope's drain.
  std::chrono::milliseconds operation{10'000};
  /// How long a PendingWork destroyed unpolled waits for its completion before it gives up
  /// and logs.
  std::chrono::milliseconds drop{10'000};
};

/// Settings of a Channel: the queue pair's (every knob of QueuePairBuilder), the completion
/// queue's size, the timeouts and the wait mode (with its completion channel). The completion queue
/// holds at least max_send_wr + max_recv_wr entries, so that it can not overflow.
///
/// build() checks everything before it creates anything: both timeouts positive, every queue
/// pair setting against the device (see QueuePairSettings), the completion queue size between
/// max_send_wr + max_recv_wr and the device's max_cqe. Errors name the setting.
class ChannelBuilder {
 public:
  explicit ChannelBuilder(ProtectionDomain pd);

  ChannelBuilder& queue_pair(const QueuePairSettings& settings) noexcept;
  ChannelBuilder& timeouts(const ChannelTimeouts& timeouts) noexcept;
  /// Entries of the completion queue; default and minimum: max_send_wr + max_recv_wr (build()
  /// rejects less, since the queue could then overflow).
  ChannelBuilder& completion_queue_size(int entries) noexcept;
  /// How the channel waits for completions (see wait_mode.hpp). Default: spin. A mode that
  /// sleeps gets the completion channel given to completion_channel(), or a new one.
  ChannelBuilder& wait_mode(const WaitMode& mode) noexcept;
  /// Attaches the completion queue to `channel` (shared: several channels may use one, so one
  /// fd covers them all). Also with WaitMode::spin: then the channel's own waits spin, and
  /// completion_fd() is there for the caller's event loop.
  ChannelBuilder& completion_channel(const CompletionChannel& channel);

  [[nodiscard]] const QueuePairSettings& queue_pair_settings() const noexcept { return qp_; }
  [[nodiscard]] const ChannelTimeouts& timeout_settings() const noexcept { return timeouts_; }
  [[nodiscard]] const WaitMode& wait_mode_setting() const noexcept { return wait_; }
  [[nodiscard]] const std::optional<CompletionChannel>& completion_channel_setting()
      const noexcept {
    return channel_;
  }
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return pd_; }

  /// Creates the completion queue and the queue pair (see QueuePairBuilder::build).
  [[nodiscard]] PreparedChannel build() const;

 private:
  ProtectionDomain pd_;
  QueuePairSettings qp_;
  ChannelTimeouts timeouts_;
  std::optional<int> cq_size_;
  WaitMode wait_;
  std::optional<CompletionChannel> channel_;
};

/// A channel whose queue pair exists but is not connected: send endpoint() to the peer, then
/// handshake() with the peer's. Handshaking with its own endpoint gives a loopback channel.
class PreparedChannel {
 public:
  PreparedChannel(PreparedQueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts,
                  WaitMode wait = {});

  [[nodiscard]] Endpoint endpoint() const { return qp_.endpoint(); }
  [[nodiscard]] Channel handshake(const Endpoint& remote) &&;

 private:
  PreparedQueuePair qp_;
  CompletionQueue cq_;
  ChannelTimeouts timeouts_;
  WaitMode wait_;
};

/// One connected RDMA channel. Move-only; not thread-safe (one thread uses a channel at a
/// time; channels on one protection domain may be used by different threads).
///
/// Three ways to post, from the most to the least guarded:
/// - blocking: `send`, `receive`, `write`, `read` (and the immediate forms) post one request
///   and wait for its completion, throwing ibv::WorkError if it failed. With a timeout, a
///   request that does not complete in time throws ibv::Error (timeout) and is orphaned: it
///   stays posted, so its buffers remain in use until it completes or the channel is
///   destroyed (a timed-out receive takes the next message that arrives), and the channel
///   stays usable for everything else.
/// - scoped: `scope([&](ibv::ChannelScope& s) { ... })` returns only after every request
///   posted through `s` has completed, also when the body throws (see scope.hpp).
/// - unpolled: `post_*` return a PendingWork to poll or wait on; its destructor waits.
///
/// wr_ids are assigned by the channel (unique per channel); completions of other requests
/// that arrive while one is awaited are kept for their own handles.
///
/// Bad input is rejected before anything is posted, with ibv::Error (invalid_argument) naming
/// it, and leaves the channel usable: a blocking call's timeout must be positive; a request is
/// checked against the queue pair (QueuePair::check: element count, inline size, max message
/// size, local length against the remote region's). Elements made with MemoryRegion::gather()
/// / scatter() are inside their region by construction; the *_unchecked / from_raw ones are
/// not checked (the device reports them as a failed completion).
///
/// Waiting. Every wait (blocking calls, PendingWork::wait, the end of a scope, waiting for
/// room in the send queue) runs by the channel's WaitMode: spinning (the default), sleeping on
/// the completion channel, or spinning and then sleeping; all end at their deadline.
///
/// Your own event loop. A channel with a completion channel (a WaitMode that sleeps, or
/// ChannelBuilder::completion_channel) exposes its fd. The race-free sequence, for epoll,
/// poll or a coroutine scheduler:
///
///   int epfd = epoll_create1(0);
///   epoll_event interest{.events = EPOLLIN, .data = {}};
///   epoll_ctl(epfd, EPOLL_CTL_ADD, channel.completion_fd(), &interest);
///   ibv::PendingWork work = channel.post_receive(buffer);
///   for (;;) {
///     channel.arm_completion_fd();         // 1. arm, and take in what already completed
///     if (work.poll()) break;              // 2. check every PendingWork you wait for
///     epoll_event ready{};
///     epoll_wait(epfd, &ready, 1, -1);     // 3. sleep until a completion arrives
///     channel.consume_completion_events(); // 4. read and acknowledge the events
///   }
///
/// A completion that arrives after step 1 makes the fd readable; one that arrived before it
/// is found in step 2. Step 4 before re-arming keeps the fd from staying readable. Arming is
/// per completion queue and one-shot: it covers the next completion after it, so arm again on
/// every round. The channel's own waits (blocking calls, a sleeping WaitMode) read and
/// acknowledge events of the fd too; that is harmless, as the loop re-arms and re-checks.
class Channel {
 public:
  using Timeout = std::optional<std::chrono::nanoseconds>;

  /// Throws ibv::Error (invalid_argument) when `wait` sleeps and `cq` has no completion
  /// channel.
  Channel(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts, WaitMode wait = {});

  // Blocking: post one request and wait for it (default: the channel's operation timeout).
  WorkCompletion send(std::span<const GatherElement> data, Timeout timeout = {});
  WorkCompletion send_with_immediate(std::span<const GatherElement> data, std::uint32_t immediate,
                                     Timeout timeout = {});
  /// Receives one message into `into` (empty for immediate-only messages).
  WorkCompletion receive(std::span<const ScatterElement> into, Timeout timeout = {});
  WorkCompletion write(std::span<const GatherElement> data, const RemoteMemoryRegion& destination,
                       Timeout timeout = {});
  WorkCompletion write_with_immediate(std::span<const GatherElement> data,
                                      const RemoteMemoryRegion& destination,
                                      std::uint32_t immediate, Timeout timeout = {});
  WorkCompletion read(std::span<const ScatterElement> into, const RemoteMemoryRegion& source,
                      Timeout timeout = {});

  // Unpolled: post one request; the returned handle tracks it. PostOptions choose unsignaled
  // (see post_options.hpp) and inline posting.
  PendingWork post_send(std::span<const GatherElement> data, PostOptions options = {});
  PendingWork post_send_with_immediate(std::span<const GatherElement> data, std::uint32_t immediate,
                                       PostOptions options = {});
  PendingWork post_receive(std::span<const ScatterElement> into);
  PendingWork post_write(std::span<const GatherElement> data, const RemoteMemoryRegion& destination,
                         PostOptions options = {});
  PendingWork post_write_with_immediate(std::span<const GatherElement> data,
                                        const RemoteMemoryRegion& destination,
                                        std::uint32_t immediate, PostOptions options = {});
  PendingWork post_read(std::span<const ScatterElement> into, const RemoteMemoryRegion& source,
                        PostOptions options = {});

  /// A scope without a body: see ManualScope.
  [[nodiscard]] ManualScope manual_scope() { return ManualScope(core_); }

  /// Runs `body` with a ChannelScope and returns what it returns (by value), after every
  /// request posted through the scope has completed, also when the body throws. If nothing
  /// failed but the body, its own exception comes out unchanged; if completions failed, a
  /// ScopeError lists them (and carries the body's exception, if any).
  template <typename Body>
  requires std::is_invocable_v<Body, ChannelScope&>
  auto scope(Body&& body) -> std::decay_t<std::invoke_result_t<Body, ChannelScope&>> {
    ChannelScope scope(core_);
    return detail::run_scope(scope, std::forward<Body>(body));
  }

  [[nodiscard]] const QueuePair& queue_pair() const noexcept;
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept;
  [[nodiscard]] const ChannelTimeouts& timeouts() const noexcept;
  [[nodiscard]] const WaitMode& wait_mode() const noexcept;
  /// The completion channel the channel's completion queue is attached to, if any (shared
  /// by every peer of a MultiChannel).
  [[nodiscard]] const std::optional<CompletionChannel>& completion_channel() const noexcept;

  /// The fd of the channel's completion channel, for the caller's own poll / epoll loop (see
  /// above): readable once a completion arrives after arm_completion_fd(). Owned by the
  /// channel's completion channel (do not close it). Throws ibv::Error (state) when the
  /// channel was built without a completion channel (WaitMode::spin and no
  /// ChannelBuilder::completion_channel).
  [[nodiscard]] int completion_fd() const;
  /// Arms the completion queue (the next completion makes completion_fd() readable), then
  /// takes every completion already in the queue into the channel, so that PendingWork::poll
  /// finds them. Call it, then check your PendingWorks, then sleep on the fd. Throws
  /// ibv::Error (state) without a completion channel.
  void arm_completion_fd();
  /// Reads and acknowledges every event queued on completion_fd() now, without blocking;
  /// returns how many. Call it when the fd is readable, before arming again. Throws
  /// ibv::Error (state) without a completion channel.
  std::size_t consume_completion_events();

 private:
  std::shared_ptr<detail::ChannelCore> core_;
};

}  // namespace ibv
