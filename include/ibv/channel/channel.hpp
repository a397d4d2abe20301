// SPDX-License-Identifier: MIT
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

#include "ibv/channel/channel_settings.hpp"
#include "ibv/channel/channel_state.hpp"
#include "ibv/channel/channel_timeouts.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/channel/received_message.hpp"
#include "ibv/channel/scope.hpp"
#include "ibv/channel/shared_receive_pool.hpp"
#include "ibv/channel/wait_mode.hpp"
#include "ibv/cm/connect_options.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/completion_channel.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"

namespace ibv {

class PreparedChannel;
class Channel;
class ChannelListener;

namespace detail {
struct ChannelAccess;  // src/cm: builds channels whose queue pair rdma_cm connects
class MultiScopeBase;  // posts a list on a peer's channel (MultiChannelScope::post_all)
struct CoroutinePost;  // ibv/coro/async_channel.hpp: posts with a first look (post_and_look)
}  // namespace detail

/// Builds a Channel on a protection domain from ChannelSettings (channel_settings.hpp: queue
/// pair, timeouts, completion queue size, wait mode and completion channel, shared receive
/// queue or pool). Each named setter sets one field of them; settings() sets or gives them
/// all. build() checks everything before it creates anything; errors name the setting.
class ChannelBuilder {
 public:
  /// A builder with the default ChannelSettings; the channel keeps `pd` alive.
  explicit ChannelBuilder(ProtectionDomain pd);

  /// All of them at once.
  ChannelBuilder& settings(const ChannelSettings& settings);
  /// ChannelSettings::queue_pair (checked against the device in build()).
  ChannelBuilder& queue_pair(const QueuePairSettings& settings) noexcept;
  /// ChannelSettings::timeouts.
  ChannelBuilder& timeouts(const ChannelTimeouts& timeouts) noexcept;
  /// ChannelSettings::completion_queue_size.
  ChannelBuilder& completion_queue_size(int entries) noexcept;
  /// ChannelSettings::wait_mode.
  ChannelBuilder& wait_mode(const WaitMode& mode) noexcept;
  /// ChannelSettings::completion_channel (also with WaitMode::spin: then the channel's own
  /// waits spin, and completion_fd() is there for the caller's event loop).
  ChannelBuilder& completion_channel(const CompletionChannel& channel);
  /// ChannelSettings::shared_receive_queue (and no pool).
  ChannelBuilder& shared_receive_queue(SharedReceiveQueue srq) noexcept;
  /// ChannelSettings::shared_receive_pool (and no other shared receive queue).
  ChannelBuilder& shared_receive_pool(SharedReceivePool pool) noexcept;

  /// The settings as set so far.
  [[nodiscard]] const ChannelSettings& settings() const noexcept { return settings_; }
  /// The protection domain the channel will be built on.
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return pd_; }

  /// Creates the completion queue and the queue pair (see QueuePairBuilder::build).
  [[nodiscard]] PreparedChannel build() const;

 private:
  ProtectionDomain pd_;
  ChannelSettings settings_;
};

/// A channel whose queue pair exists but is not connected: send endpoint() to the peer, then
/// handshake() with the peer's. Handshaking with its own endpoint gives a loopback channel.
class PreparedChannel {
 public:
  /// `pool`: the SharedReceivePool whose queue `qp` was built on, if any.
  PreparedChannel(PreparedQueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts,
                  WaitMode wait = {}, std::optional<SharedReceivePool> pool = std::nullopt);

  /// This side's endpoint, for the peer (PreparedQueuePair::endpoint()).
  [[nodiscard]] Endpoint endpoint() const { return qp_.endpoint(); }
  /// Connects to the peer's endpoint (PreparedQueuePair::handshake(), which says what it
  /// throws) and gives the channel; this object is used up.
  [[nodiscard]] Channel handshake(const Endpoint& remote) &&;

 private:
  friend struct detail::ChannelAccess;
  PreparedQueuePair qp_;
  CompletionQueue cq_;
  ChannelTimeouts timeouts_;
  WaitMode wait_;
  std::optional<SharedReceivePool> pool_;
};

/// One connected RDMA channel: a reliable-connected queue pair with its own completion queue.
/// Move-only; not thread-safe (one thread uses a channel at a time; channels on one protection
/// domain may be used by different threads).
///
/// The contract, in short:
/// - Every operation is a value (op::Send, op::Receive, op::Write, op::Read, op::FetchAdd,
///   op::CompareSwap), posted in one of three styles: blocking, execute(), which waits and
///   throws ibv::WorkError if the request failed; scoped, scope(), which returns only after
///   every request posted through the scope has completed, also when the body throws; and
///   unpolled, post(), whose PendingWork waits in its destructor. The named calls
///   (`write(data, remote)`, `post_write(data, remote)`, ...) are these, spelled out.
///   [docs/operations.md](docs/operations.md)
/// - No request outlives the buffers it uses. One that does not complete in time is cancelled
///   (the queue pair goes to the error state, its flushed completions are taken in) before the
///   call throws ibv::Error (timeout, channel_cancelled(); test:
///   `ChannelStateTest.ATimedOutExecuteCancelsTheChannelAndTheErrorSaysSo`), and the channel then
///   refuses further work; state() says so, naming the call. [docs/safety.md](docs/safety.md)
/// - Bad input is rejected before anything is posted, with ibv::Error (invalid_argument)
///   naming it, and the channel stays usable (QueuePair::check lists the checks; test:
///   `BadInputChannel.RejectedPostsPostNothingAndLeaveTheChannelUsable`).
///   [docs/bad-input.md](docs/bad-input.md)
/// - The channel assigns the wr_ids; completions of other requests that arrive while one is
///   awaited are kept for their own handles.
/// - Sends and writes that fit the queue pair's granted max_inline_data go inline by default
///   (PostOptions::inline_data). [docs/atomics-and-inline.md](docs/atomics-and-inline.md)
/// - Every wait runs by the channel's WaitMode and ends at its deadline; with a completion
///   channel, completion_fd(), arm_completion_fd() and consume_completion_events() let your
///   own event loop do the waiting. [docs/wait-modes.md](docs/wait-modes.md)
/// - On a shared receive queue or pool the channel posts no receives of its own; messages
///   come through receive_shared() / receive_message().
///   [docs/shared-receive-queues.md](docs/shared-receive-queues.md)
class Channel {
 public:
  /// A blocking call's timeout: unset means the channel's ChannelTimeouts::operation; a set
  /// one must be positive.
  using Timeout = std::optional<Duration>;

  /// Throws ibv::Error (invalid_argument) when `wait` sleeps and `cq` has no completion
  /// channel, or when `pool` is not the SharedReceivePool whose queue `qp` was built on (untested:
  /// `invalid_argument`, the tests build their channels with ChannelBuilder, which makes these
  /// agree).
  Channel(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts, WaitMode wait = {},
          std::optional<SharedReceivePool> pool = std::nullopt);

  /// Connects to a ChannelListener (or any rdma_cm server, e.g. rdma-core's rping or
  /// ucmatose) at an IPv4 or IPv6 address and port, instead of exchanging endpoints out of
  /// band. rdma_cm resolves the address to the local device, port and GID (RoCE v2 on
  /// Ethernet) and does the connection handshake; the queue pair, completion queue and
  /// protection domain are this library's own (see ibv/cm/connect_options.hpp for how, and
  /// for the options). Every wait is bounded by the options' timeouts.
  ///
  /// Throws ibv::Error: invalid_argument for a bad address string, port 0, a timeout that is
  /// not positive or a gid_index in the settings (checked before anything is created; test:
  /// `Cm.BadInputIsRejectedBeforeAnythingIsCreated`), and for a protection domain on another device
  /// than the address resolves to; timeout when address or route resolution or the peer's answer
  /// takes longer than its timeout (untested: `timeout`, an unreachable address gives timeout or
  /// connection as the network has it, and its test takes either); connection when the address can
  /// not be reached through an RDMA device, no one listens on the port, or the server rejects the
  /// connection (the message says which, with the reject reason; tests:
  /// `Cm.NoListenerIsRejectedNotTimedOut`, `Cm.ListenerRejectsAndTheClientSaysSo`).
  ///
  /// The channel keeps the rdma_cm connection: destroying it disconnects (the peer sees
  /// RDMA_CM_EVENT_DISCONNECTED), and when the peer disconnects first, the channel's queue
  /// pair is moved to the error state the next time the channel waits, so that outstanding and
  /// later requests fail (flushed) instead of waiting for their timeout.
  [[nodiscard]] static Channel connect(std::string_view address, std::uint16_t port,
                                       const ConnectOptions& options = {});

  /// Blocking: posts `operation` (any of ibv/channel/operation.hpp) and waits for its
  /// completion, at most `timeout` (default: the channel's operation timeout). Returns the
  /// completion; throws ibv::WorkError if it failed, ibv::Error (timeout) if it did not arrive
  /// (test: `ChannelStateTest.ATimedOutExecuteCancelsTheChannelAndTheErrorSaysSo`).
  template <op::SendOperation Operation>
  WorkCompletion execute(const Operation& operation, Timeout timeout = {}) {
    SendRequest request = operation.request(0);
    return execute_request<false>(request, {}, timeout);
  }
  /// execute() of a send or write posted as `options` say (InlineOptions: a blocking call is
  /// always signaled, so there is no `signaled` to set; other operations take no options).
  template <op::InlineCapable Operation>
  WorkCompletion execute(const Operation& operation, InlineOptions options, Timeout timeout = {}) {
    SendRequest request = operation.request(0);
    return execute_request<true>(request, detail::as_post_options(options), timeout);
  }
  /// Blocking receive: posts op::Receive and waits for the message, as execute() above.
  WorkCompletion execute(const op::Receive& operation, Timeout timeout = {});

  /// Unpolled: posts `operation`; the returned handle tracks it. `options` (op::options_t of the
  /// operation: PostOptions for a send or write, SignalingOptions for a read or atomic) choose
  /// unsignaled and inline posting (see post_options.hpp).
  template <op::SendOperation Operation>
  PendingWork post(const Operation& operation, op::options_t<Operation> options = {}) {
    SendRequest request = operation.request(0);
    return post_request(request, detail::as_post_options(options));
  }
  /// A receive: always signaled, never inline (ReceiveOptions has nothing to set).
  PendingWork post(const op::Receive& operation, ReceiveOptions options = {});

  // The operations by name: execute() and post() of the operation.
  /// Sends `data` into the peer's next receive and waits: execute(op::Send{data}).
  WorkCompletion send(std::span<const GatherElement> data, Timeout timeout = {}) {
    return execute(op::Send{data}, timeout);
  }
  /// Sends `data` with 32 bits of immediate data the peer's receive completion carries.
  WorkCompletion send_with_immediate(std::span<const GatherElement> data, std::uint32_t immediate,
                                     Timeout timeout = {}) {
    return execute(op::Send{data, immediate}, timeout);
  }
  /// Receives one message into `into` (empty for immediate-only messages).
  WorkCompletion receive(std::span<const ScatterElement> into, Timeout timeout = {}) {
    return execute(op::Receive{into}, timeout);
  }
  /// Writes `data` into the peer's memory at `destination` and waits; no completion at the
  /// peer (execute(op::Write{data, destination})).
  WorkCompletion write(std::span<const GatherElement> data, const RemoteMemoryRegion& destination,
                       Timeout timeout = {}) {
    return execute(op::Write{data, destination}, timeout);
  }
  /// Writes `data` to `destination` and consumes a receive at the peer, whose completion
  /// carries `immediate` (the data goes to `destination`, not into the receive's buffer).
  WorkCompletion write_with_immediate(std::span<const GatherElement> data,
                                      const RemoteMemoryRegion& destination,
                                      std::uint32_t immediate, Timeout timeout = {}) {
    return execute(op::Write{data, destination, immediate}, timeout);
  }
  /// Reads the peer's memory at `source` into `into` and waits (execute(op::Read{into, source})).
  WorkCompletion read(std::span<const ScatterElement> into, const RemoteMemoryRegion& source,
                      Timeout timeout = {}) {
    return execute(op::Read{into, source}, timeout);
  }

  /// Atomic fetch-and-add: adds `add` (modulo 2^64) to the 8-byte word at the start of
  /// `target` on the peer and writes the word's value from before into `result`, one
  /// registered element of exactly 8 bytes (e.g. `mr.scatter(std::span(&word, 1))` of a
  /// std::uint64_t). Atomic against the other atomics on that word from any queue pair of the
  /// peer's device, not against its CPU or its RDMA writes. `add` is in host byte order; the
  /// result arrives in host byte order on rxe (tested) and as the device writes it elsewhere.
  /// Checked before posting (ibv::Error, invalid_argument, naming the problem; test:
  /// `Atomics.BadInputIsRejectedBeforePosting`): the target address 8-byte aligned, the target
  /// region at least 8 bytes and, when its rights are known (RemoteMemoryRegion::access), with
  /// atomic access, the result one element of 8 bytes, the device able to do atomics. A target the
  /// peer registered without atomic access fails on the device: ibv::WorkError with
  /// remote_access_error.
  WorkCompletion fetch_add(const ScatterElement& result, const RemoteMemoryRegion& target,
                           std::uint64_t add, Timeout timeout = {}) {
    return execute(op::FetchAdd{result, target, add}, timeout);
  }
  /// Atomic compare-and-swap: if the 8-byte word at the start of `target` equals `expected`,
  /// replaces it with `desired`; either way writes the word's value from before into `result`
  /// (so the swap happened iff the result equals `expected`). As fetch_add() otherwise.
  WorkCompletion compare_swap(const ScatterElement& result, const RemoteMemoryRegion& target,
                              std::uint64_t expected, std::uint64_t desired, Timeout timeout = {}) {
    return execute(op::CompareSwap{result, target, expected, desired}, timeout);
  }

  /// send() unpolled: post(op::Send{data}, options).
  PendingWork post_send(std::span<const GatherElement> data, PostOptions options = {}) {
    return post(op::Send{data}, options);
  }
  /// send_with_immediate() unpolled.
  PendingWork post_send_with_immediate(std::span<const GatherElement> data, std::uint32_t immediate,
                                       PostOptions options = {}) {
    return post(op::Send{data, immediate}, options);
  }
  /// receive() unpolled: post(op::Receive{into}).
  PendingWork post_receive(std::span<const ScatterElement> into) { return post(op::Receive{into}); }
  /// write() unpolled.
  PendingWork post_write(std::span<const GatherElement> data, const RemoteMemoryRegion& destination,
                         PostOptions options = {}) {
    return post(op::Write{data, destination}, options);
  }
  /// write_with_immediate() unpolled.
  PendingWork post_write_with_immediate(std::span<const GatherElement> data,
                                        const RemoteMemoryRegion& destination,
                                        std::uint32_t immediate, PostOptions options = {}) {
    return post(op::Write{data, destination, immediate}, options);
  }
  /// read() unpolled. Never inline.
  PendingWork post_read(std::span<const ScatterElement> into, const RemoteMemoryRegion& source,
                        SignalingOptions options = {}) {
    return post(op::Read{into, source}, options);
  }
  /// fetch_add() unpolled: `result` holds the old value once the handle completes. Never
  /// inline.
  PendingWork post_fetch_add(const ScatterElement& result, const RemoteMemoryRegion& target,
                             std::uint64_t add, SignalingOptions options = {}) {
    return post(op::FetchAdd{result, target, add}, options);
  }
  /// compare_swap() unpolled, as post_fetch_add().
  PendingWork post_compare_swap(const ScatterElement& result, const RemoteMemoryRegion& target,
                                std::uint64_t expected, std::uint64_t desired,
                                SignalingOptions options = {}) {
    return post(op::CompareSwap{result, target, expected, desired}, options);
  }

  // Shared receives (channels built on a shared receive queue or pool).
  /// The oldest completion of a shared receive that took a message on this channel, waiting
  /// (default: the operation timeout). Throws ibv::WorkError when it failed (the completion,
  /// with the receive's wr_id, is in the error), ibv::Error (timeout) when none came (test:
  /// `SharedReceiveTest.ChannelOnAPlainQueueUsesReceiveShared`), (state) when the channel is not on
  /// a shared receive queue (test: `SharedReceiveTest.BadInputIsRejectedClearly`).
  WorkCompletion receive_shared(Timeout timeout = {});
  /// The oldest such completion if one is there (failed or not), without waiting.
  [[nodiscard]] std::optional<WorkCompletion> poll_shared();
  /// On a SharedReceivePool: the oldest message that arrived on this channel, waiting
  /// (default: the operation timeout). A failed receive (e.g. a message longer than the
  /// pool's buffer_size: local_length_error, on rxe local_qp_operation_error) posts its buffer
  /// back and throws ibv::WorkError, whose message names the buffer size.
  /// Throws ibv::Error (timeout) when none came (untested: `timeout`, only MultiChannel's
  /// receive_message_any is made to time out), (state) when the channel has no pool (test:
  /// `SharedReceiveTest.BadInputIsRejectedClearly`).
  ReceivedMessage receive_message(Timeout timeout = {});
  /// The oldest message if one is there, without waiting; failures as receive_message().
  [[nodiscard]] std::optional<ReceivedMessage> poll_message();
  /// The shared receive queue the channel takes its receives from, or null.
  [[nodiscard]] const SharedReceiveQueue* shared_receive_queue() const noexcept;
  /// The pool the channel takes its receives from, or null.
  [[nodiscard]] const SharedReceivePool* shared_receive_pool() const noexcept;

  /// A scope without a body: see ManualScope.
  [[nodiscard]] ManualScope manual_scope() { return ManualScope(core_); }

  /// Runs `body` with a ChannelScope and returns what it returns (by value), after every
  /// request posted through the scope has completed, also when the body throws. If nothing
  /// failed but the body, its own exception comes out unchanged; if completions failed, a
  /// BatchError lists them (and carries the body's exception, if any).
  template <typename Body>
  requires std::is_invocable_v<Body, ChannelScope&>
  auto scope(Body&& body) -> std::decay_t<std::invoke_result_t<Body, ChannelScope&>> {
    ChannelScope scope(core_);
    return detail::run_scope(scope, std::forward<Body>(body));
  }

  /// The channel's connected queue pair (for its settings and limits; posting on it directly
  /// bypasses the channel's wr_ids and completion tracking).
  [[nodiscard]] const QueuePair& queue_pair() const noexcept;
  /// The protection domain the channel's memory must be registered on.
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept;
  /// The timeouts it was built with.
  [[nodiscard]] const ChannelTimeouts& timeouts() const noexcept;
  /// How its waits wait.
  [[nodiscard]] const WaitMode& wait_mode() const noexcept;
  /// The completion channel the channel's completion queue is attached to, if any (shared
  /// by every peer of a MultiChannel).
  [[nodiscard]] const std::optional<CompletionChannel>& completion_channel() const noexcept;

  /// The fd of the channel's completion channel, for the caller's own poll / epoll loop (the
  /// sequence is in [docs/wait-modes.md](docs/wait-modes.md)): readable once a completion
  /// arrives after arm_completion_fd(). Owned by the channel's completion channel (do not close
  /// it). Throws ibv::Error (state) when the channel was built without a completion channel
  /// (WaitMode::spin and no ChannelBuilder::completion_channel; test:
  /// `CompletionChannelTest.MisuseIsReported`).
  [[nodiscard]] int completion_fd() const;
  /// Arms the completion queue (the next completion makes completion_fd() readable), then
  /// takes every completion already in the queue into the channel, so that PendingWork::poll
  /// finds them. Call it, then check your PendingWorks, then sleep on the fd. Throws ibv::Error
  /// (state) without a completion channel (test: `CompletionChannelTest.MisuseIsReported`).
  void arm_completion_fd();
  /// Reads and acknowledges every event queued on completion_fd() now, without blocking;
  /// returns how many. Call it when the fd is readable, before arming again. Throws ibv::Error
  /// (state) without a completion channel (test: `CompletionChannelTest.MisuseIsReported`).
  std::size_t consume_completion_events();
  /// Send-queue requests this channel has posted inline so far (by InlinePolicy::automatic or
  /// always): how to see which requests went inline.
  [[nodiscard]] std::uint64_t inline_posts() const noexcept;
  /// Whether the channel is usable, or why not: cancelled by a timeout (naming the call), its
  /// peer gone, or a failed completion (with its status); see ChannelState. The first reason
  /// is kept. Safe to call from any thread, also while another thread uses the channel (it
  /// reads what that thread has seen so far: a completion the channel has not polled yet is
  /// not in it).
  [[nodiscard]] ChannelState state() const noexcept;

 private:
  friend struct detail::ChannelAccess;
  friend class detail::MultiScopeBase;
  friend struct detail::CoroutinePost;
  /// The one blocking path and the one unpolled path of every send-queue operation: `request`
  /// (made by the operation under wr_id 0) gets the channel's wr_id, is checked once and posted.
  ///
  /// `with_options` false (every call but the ones given options): `options` are the
  /// default ones, known when compiled, so those calls pay nothing for the options they do not
  /// take.
  template <bool with_options>
  WorkCompletion execute_request(SendRequest& request, PostOptions options, Timeout timeout);
  PendingWork post_request(SendRequest& request, PostOptions options);
  /// post_request() with a first look for the completion: one poll at once, as
  /// execute_request() makes, so the handle is complete already if that poll brought it, and
  /// then never took a slot in the channel's books. The coroutine calls' post, whose co_await
  /// follows at once (a plain post() polls nothing: code that overlaps work with its requests
  /// would pay an empty poll per post). `options` are signaled: the caller has checked them;
  /// `with_options` as execute_request()'s.
  template <bool with_options>
  PendingWork post_and_look(SendRequest& request, PostOptions options);

  detail::CoreOwner core_;
};

}  // namespace ibv
