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
#include <string_view>
#include <type_traits>
#include <utility>

#include "ibv/channel/channel_timeouts.hpp"
#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/channel/scope.hpp"
#include "ibv/cm/connect_options.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

class PreparedChannel;
class Channel;
class ChannelListener;

namespace detail {
struct ChannelAccess;  // src/cm: builds channels whose queue pair rdma_cm connects
}  // namespace detail

/// Settings of a Channel: the queue pair's (every knob of QueuePairBuilder), the completion
/// queue's size and the timeouts. The completion queue holds at least max_send_wr +
/// max_recv_wr entries, so that it can not overflow.
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

  [[nodiscard]] const QueuePairSettings& queue_pair_settings() const noexcept { return qp_; }
  [[nodiscard]] const ChannelTimeouts& timeout_settings() const noexcept { return timeouts_; }
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return pd_; }

  /// Creates the completion queue and the queue pair (see QueuePairBuilder::build).
  [[nodiscard]] PreparedChannel build() const;

 private:
  ProtectionDomain pd_;
  QueuePairSettings qp_;
  ChannelTimeouts timeouts_;
  std::optional<int> cq_size_;
};

/// A channel whose queue pair exists but is not connected: send endpoint() to the peer, then
/// handshake() with the peer's. Handshaking with its own endpoint gives a loopback channel.
class PreparedChannel {
 public:
  PreparedChannel(PreparedQueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts);

  [[nodiscard]] Endpoint endpoint() const { return qp_.endpoint(); }
  [[nodiscard]] Channel handshake(const Endpoint& remote) &&;

 private:
  friend struct detail::ChannelAccess;
  PreparedQueuePair qp_;
  CompletionQueue cq_;
  ChannelTimeouts timeouts_;
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
class Channel {
 public:
  using Timeout = std::optional<std::chrono::nanoseconds>;

  Channel(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts);

  /// Connects to a ChannelListener (or any rdma_cm server, e.g. rdma-core's rping or
  /// ucmatose) at an IPv4 or IPv6 address and port, instead of exchanging endpoints out of
  /// band. rdma_cm resolves the address to the local device, port and GID (RoCE v2 on
  /// Ethernet) and does the connection handshake; the queue pair, completion queue and
  /// protection domain are this library's own (see ibv/cm/connect_options.hpp for how, and
  /// for the options). Every wait is bounded by the options' timeouts.
  ///
  /// Throws ibv::Error: invalid_argument for a bad address string, port 0, a timeout that is
  /// not positive or a gid_index in the settings (checked before anything is created), and for
  /// a protection domain on another device than the address resolves to; timeout when address
  /// or route resolution or the peer's answer takes longer than its timeout; connection when
  /// the address can not be reached through an RDMA device, no one listens on the port, or the
  /// server rejects the connection (the message says which, with the reject reason).
  ///
  /// The channel keeps the rdma_cm connection: destroying it disconnects (the peer sees
  /// RDMA_CM_EVENT_DISCONNECTED), and when the peer disconnects first, the channel's queue
  /// pair is moved to the error state the next time the channel waits, so that outstanding and
  /// later requests fail (flushed) instead of waiting for their timeout.
  [[nodiscard]] static Channel connect(std::string_view address, std::uint16_t port,
                                       const ConnectOptions& options = {});

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

 private:
  friend struct detail::ChannelAccess;
  explicit Channel(std::shared_ptr<detail::ChannelCore> core) noexcept;

  std::shared_ptr<detail::ChannelCore> core_;
};

}  // namespace ibv
