// SPDX-License-Identifier: MIT
// Private: the state a Channel shares with its PendingWork handles and scopes: the queue pair,
// its completion queue, wr_id allocation, the cache of completions that arrived for other
// requests than the one awaited, send-queue accounting (signaled and unsignaled requests in
// posting order), and cancelling (giving up on a request breaks the channel; see cancel()). All of
// it lives in arrays allocated when the channel is built: posting, accepting a completion and
// taking it allocate nothing.
//
// On a shared receive queue the channel posts no receives of its own; its own wr_ids carry
// kChannelTag, and every completion without the tag is a receive from the shared queue, kept
// in posting order for receive_shared() / receive_message() (the shared ring).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ibv/channel/channel.hpp"
#include "ibv/channel/channel_state.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/channel/shared_receive_pool.hpp"
#include "ibv/channel/wait_mode.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/work_request.hpp"

namespace ibv::detail {

/// Marks `request` inline as `policy` says: automatic inlines sends and writes whose data fits
/// `max_inline_data` (what the device granted the QP); always inlines whatever it is (the QP's
/// check rejects what can not be); never leaves it. Compares only: it runs on every post.
inline void apply_inline(SendRequest& request, InlinePolicy policy,
                         std::uint32_t max_inline_data) noexcept {
  if (policy == InlinePolicy::automatic) [[likely]] {
    if (request.byte_length() <= max_inline_data && may_be_inline(request.opcode())) {
      request.inline_data();
    }
  } else if (policy == InlinePolicy::always) {
    request.inline_data();
  }
}

/// Something besides the completion queue that can end a channel's connection: the rdma_cm
/// connection of a channel made by Channel::connect or ChannelListener::accept. The channel
/// polls it while it waits, and tells it to disconnect before its queue pair is destroyed.
class ConnectionMonitor {
 public:
  ConnectionMonitor() = default;
  ConnectionMonitor(const ConnectionMonitor&) = delete;
  ConnectionMonitor& operator=(const ConnectionMonitor&) = delete;
  ConnectionMonitor(ConnectionMonitor&&) = delete;
  ConnectionMonitor& operator=(ConnectionMonitor&&) = delete;
  virtual ~ConnectionMonitor() = default;
  /// Looks for connection events without blocking; when the peer has disconnected, moves `qp`
  /// to the error state so that its outstanding requests are flushed, and returns true.
  virtual bool poll(ibv_qp* qp) noexcept = 0;
  /// Starts the disconnection (the channel is being destroyed); must not block.
  virtual void disconnect() noexcept = 0;
};

class ChannelCore : public CoreCount {
 public:
  /// The bit set in every wr_id of a channel on a shared receive queue, telling its own
  /// requests from the queue's receives (whose wr_ids must leave it clear).
  static constexpr std::uint64_t kChannelTag = SharedReceiveQueue::kReservedWrIdBit;
  /// The bit set in the wr_id of every receive of a list but the last of its unit
  /// (post_receive_list): such a receive has no slot; its completion is only counted.
  static constexpr std::uint64_t kFoldedReceive = std::uint64_t{1} << 62U;
  /// untracked_ when post_send() has left no request untracked.
  static constexpr std::uint64_t kNoneUntracked = ~std::uint64_t{0};

  /// `pool` is the SharedReceivePool the queue pair's shared receive queue belongs to, if any.
  /// Throws ibv::Error (invalid_argument) when `wait` sleeps and `cq` has no completion channel.
  ChannelCore(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts, WaitMode wait,
              std::optional<SharedReceivePool> pool);
  ChannelCore(const ChannelCore&) = delete;
  ChannelCore& operator=(const ChannelCore&) = delete;
  ChannelCore(ChannelCore&&) = delete;
  ChannelCore& operator=(ChannelCore&&) = delete;
  /// Disconnects the monitor's connection (if any) before the queue pair is destroyed.
  ~ChannelCore();

  /// Lets the channel watch (and on destruction disconnect) a connection besides its CQ.
  void set_monitor(std::unique_ptr<ConnectionMonitor> monitor) noexcept;

  /// Posts `request` under a fresh wr_id (which it sets), after checking it once
  /// (QueuePair::check: bad input throws before anything waits or is posted, and leaves the
  /// channel as it was) and waiting (bounded) for room in the send queue. Returns the wr_id.
  ///
  /// A signaled request is not tracked yet (untracked_): the first look for its completion
  /// (take(), settle_if_succeeded(), take_first()) matches it by wr_id alone and, when it is
  /// there (the common case of a request awaited at once), never gives it a slot or a
  /// send-queue entry. Anything else that posts or polls on the channel first tracks it, as
  /// does a first look that misses it.
  [[gnu::always_inline]] std::uint64_t post_send(SendRequest& request, PostOptions options) {
    if (cancelled()) [[unlikely]]
      throw_cancelled();
    track_untracked();
    const std::uint64_t id = next_wr_id_++;
    request.native().wr_id = id;
    apply_inline(request, options.inline_data, max_inline_data_);
    const bool signaled = options.signaled || must_signal();
    if (!signaled) request.unsignaled();
    // Bad input throws here, before the post waits for room or touches the QP.
    const Checked<SendRequest> checked = qp_.checked(request);
    wait_for_room(Queue::send);  // polls, which changes nothing must_signal() depends on
    qp_.post(checked);
    if (signaled) {
      note_signaling(id, true);
      untracked_ = id;
      untracked_opcode_ = request.opcode();
    } else {
      track_send(id, false, request.opcode(), false);
    }
    if (request.is_inline()) ++inline_posts_;
    return id;
  }
  /// Posts a receive into `into` under a fresh wr_id. Returns the wr_id. Inline, as
  /// post_send(): it is half of every message's cost.
  [[gnu::always_inline]] std::uint64_t post_receive(std::span<const ScatterElement> into) {
    if (cancelled()) [[unlikely]]
      throw_cancelled();
    if (shared_) [[unlikely]]
      throw_receive_on_shared();
    const std::uint64_t id = next_wr_id_++;
    ReceiveRequest request(id, into);
    const Checked<ReceiveRequest> checked = qp_.checked(request);  // bad input throws first
    wait_for_room(Queue::receive);
    qp_.post(checked);
    occupy(id, State::receive, true, false);
    ++in_flight_receive_;
    return id;
  }

  /// Posts `requests` under fresh consecutive wr_ids as linked lists: one doorbell for as many
  /// as the send queue has room for (all of them when it has room: a part). Every request is
  /// checked before any is posted (bad input throws and posts nothing).
  ///
  /// Signaled (`options`), a part is one unit: only its last request asks for a completion, and
  /// only it is tracked (a slot, a send-queue entry); the others are folded into its entry
  /// (track_send's `folded`), and a failure among them becomes its completion. Unsignaled,
  /// each request is tracked as post_send() tracks one.
  ///
  /// `posted(wr_id, folded)` is called for every tracked request once it is posted, in order
  /// (`folded`: how many requests before it it stands for), so that a failure afterwards (the
  /// send queue stayed full, the device refused one) throws with every posted request known.
  /// The requests of a part the device cut short are each tracked on their own.
  template <typename Posted>
  void post_send_list(std::span<SendRequest> requests, PostOptions options, Posted&& posted) {
    if (cancelled()) [[unlikely]]
      throw_cancelled();
    track_untracked();
    const std::size_t part = list_part(Queue::send);  // as post_in_parts() cuts the list
    const std::uint64_t first_id = next_wr_id_;
    std::uint64_t inline_count = 0;
    // Each request's wr_id, inline data and signaling, then its checks (bad input throws
    // here, before anything is posted), in one pass; a signaled list's part ends after it.
    const auto prepare = [&](SendRequest& request, std::size_t i) {
      request.native().wr_id = first_id + i;
      apply_inline(request, options.inline_data, max_inline_data_);
      inline_count += request.is_inline() ? 1U : 0U;
    };
    std::uint32_t run = unsignaled_run_;
    const CheckedList<SendRequest> checked =
        options.signaled ? qp_.checked(requests,
                                       [&](SendRequest& request, std::size_t i) {
                                         prepare(request, i);
                                         request.unsignaled();  // but the last of each part
                                       })
                         : qp_.checked(requests, [&](SendRequest& request, std::size_t i) {
                             prepare(request, i);
                             const bool signaled = must_signal(run);
                             if (!signaled) request.unsignaled();
                             run = signaled ? 0 : run + 1;
                           });
    if (options.signaled) {  // the last of each part asks for the completion of its part
      for (std::size_t end = part; end - part < requests.size(); end += part) {
        requests[std::min(end, requests.size()) - 1].native().send_flags |= IBV_SEND_SIGNALED;
      }
    }
    next_wr_id_ += requests.size();
    std::size_t taken_end = 0;  // the device has taken requests[0, taken_end)
    try {
      post_in_parts(checked, Queue::send, "ibv_post_send",
                    [&](std::span<SendRequest> taken, bool whole) {
                      taken_end += taken.size();
                      if (options.signaled && whole) [[likely]] {
                        const SendRequest& last = taken.back();
                        const auto folded = static_cast<std::uint32_t>(taken.size() - 1);
                        track_send(last.wr_id(), true, last.opcode(), false, folded);
                        posted(last.wr_id(), folded);
                        return;
                      }
                      for (const SendRequest& request : taken) {
                        track_send(request.wr_id(), request.is_signaled(), request.opcode(), false);
                        posted(request.wr_id(), std::uint32_t{0});
                      }
                    });
    } catch (...) {
      // Cut short (a post failed, or there was no room in time): count what was posted.
      inline_count = 0;
      for (const SendRequest& request : requests.first(taken_end)) {
        inline_count += request.is_inline() ? 1U : 0U;
      }
      inline_posts_ += inline_count;
      throw;
    }
    inline_posts_ += inline_count;
  }
  /// Posts a receive into each of `requests` as linked lists, one doorbell for as many as the
  /// receive queue has room for (a part); every request is checked before any is posted.
  ///
  /// A part is one unit: only its last receive is tracked (a slot); the others carry
  /// kFoldedReceive in their wr_ids and are only counted, as they complete (in posting order, as
  /// every receive queue of a reliable connection completes), with no slot, no copy of their
  /// completion and nothing to settle. A failure among them becomes the unit's completion
  /// (note_folded_receive_failure). `posted(wr_id, folded)` is called for every unit once it is
  /// posted (`folded`: how many receives before it it stands for); a part the device cut short
  /// is a unit of the receives it took, and then this throws.
  template <typename Posted>
  void post_receive_list(std::span<ReceiveRequest> requests, Posted&& posted) {
    if (cancelled()) [[unlikely]]
      throw_cancelled();
    if (shared_) [[unlikely]]
      throw_receive_on_shared();
    const std::size_t part = list_part(Queue::receive);  // as post_in_parts() cuts the list
    std::size_t left_in_part = part;                     // counted down: no division per receive
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const bool last_of_part = --left_in_part == 0 || i + 1 == requests.size();
      requests[i].native().wr_id = (next_wr_id_ + i) | (last_of_part ? 0U : kFoldedReceive);
      if (left_in_part == 0) left_in_part = part;
    }
    const CheckedList<ReceiveRequest> checked = qp_.checked(requests);
    next_wr_id_ += requests.size();
    post_in_parts(checked, Queue::receive, "ibv_post_recv",
                  [&](std::span<ReceiveRequest> taken, bool /*whole*/) {
                    if (taken.empty()) [[unlikely]]
                      return;
                    // Cut short, the last receive taken stands for the unit (its wr_id tagged:
                    // accept() finds its slot before it looks at the tag).
                    const std::uint64_t unit = taken.back().wr_id();
                    occupy(unit, State::receive, true, false);
                    in_flight_receive_ += static_cast<std::uint32_t>(taken.size());
                    posted(unit, static_cast<std::uint32_t>(taken.size() - 1));
                  });
  }
  /// Room for building the requests of a list in place (list_part() of its queue, at most
  /// kListCapacity): a list post then allocates nothing. One user at a time.
  [[nodiscard]] std::span<SendRequest> send_list_storage() noexcept { return send_list_; }
  [[nodiscard]] std::span<ReceiveRequest> receive_list_storage() noexcept { return receive_list_; }
  static constexpr std::size_t kListCapacity = 64;

  /// The completion of `wr_id` if it has arrived (polling the CQ once if it is not cached
  /// yet), else null, and forgets it: each completion is handed out once. The pointer is valid
  /// until the next post or poll on this channel: copy it at once.
  [[gnu::always_inline]] const WorkCompletion* take(std::uint64_t wr_id) {
    bool tracked = false;
    return try_take(wr_id, tracked);
  }
  /// For a scope's drain: if the completion of `wr_id` has arrived, or one poll (as take()
  /// polls) brings it, and it succeeded, forgets it and returns true, copying nothing. False
  /// when it is outstanding, failed (kept for its handle), orphaned, unsignaled or not
  /// tracked: the caller then settles it the usual way (take() or wait()).
  [[gnu::always_inline]] bool settle_if_succeeded(std::uint64_t wr_id) {
    if (wr_id == untracked_) return settle_untracked(wr_id);  // posted last, not polled since
    // The common case of a scope's drain, inline in its loop: arrived, in its ring slot.
    Slot& slot = slots_[wr_id & slot_mask_];
    if (slot.wr_id == wr_id && slot.state == State::arrived && !slot.orphaned &&
        slot.completion.ok()) [[likely]] {
      slot.state = State::free;
      return true;
    }
    return settle_slowly(slot, wr_id);
  }
  /// take() until it succeeds or `timeout` has passed.
  std::optional<WorkCompletion> wait(std::uint64_t wr_id, std::chrono::nanoseconds timeout);
  /// The completion of `wr_id`, a signaled request just posted, if one poll of the CQ brings
  /// it (often: Soft-RoCE and fast NICs complete small requests by then), else null; matched
  /// once, as it is polled, and handed out (forgotten here). The pointer is into the poll
  /// batch: valid until the next poll of this channel. The blocking calls' first look, before
  /// wait().
  [[gnu::always_inline]] const WorkCompletion* take_fresh(std::uint64_t wr_id) {
    const WorkCompletion* handed = nullptr;
    poll_once(wr_id, &handed);
    return handed;
  }
  /// take_fresh() for `wr_id`, the signaled send-queue request post_send() left untracked
  /// (untracked_): its completion is matched by wr_id alone; if this poll does not bring it,
  /// the request is tracked now (its send-queue entry and slot) as any other from here on.
  /// Nothing else has posted or polled since it was posted (that would have tracked it).
  [[gnu::always_inline]] const WorkCompletion* take_first(std::uint64_t wr_id) {
    untracked_ = kNoneUntracked;
    const SendOpcode opcode = untracked_opcode_;
    const WorkCompletion* handed = nullptr;
    try {
      for (const auto& completion : cq_.poll(batch_)) {
        if (completion.wr_id() == wr_id) [[likely]] {
          retire_before(wr_id, completion.qp_number());
          if (!completion.ok()) [[unlikely]]
            note_send_failure_inline(completion);
          handed = &completion;
        } else {
          accept(completion, 0, nullptr);
        }
      }
    } catch (...) {
      track_send(wr_id, true, opcode, false);  // a failed poll: tracked, as if posted so
      throw;
    }
    if (handed == nullptr) track_send(wr_id, true, opcode, false);
    return handed;
  }
  /// Gives up on `wr_id`, and with it on the channel: moves the queue pair to the error state,
  /// takes in the flushed completions of every outstanding request (at most the drop timeout),
  /// then forgets `wr_id`. Afterwards the device touches no buffer of any request posted here
  /// (unless it ignored the error state for the whole drop timeout: then this is logged and
  /// the rest are discarded when they come), and every post throws ibv::Error (state) saying
  /// `reason` (e.g. "write wr_id 7 did not complete within 5000 ms"). `operation` names the
  /// call that gave up ("Channel::execute") for state(): a string literal (it is kept). Never
  /// throws.
  void cancel(std::uint64_t wr_id, std::string_view operation, std::string_view reason) noexcept;
  /// Whether cancel() has broken the channel.
  [[nodiscard]] bool cancelled() const noexcept { return !cancel_reason_.empty(); }
  /// Usable, or the first reason it is not (Channel::state()). Any thread may call it.
  [[nodiscard]] ChannelState state() const noexcept {
    if (condition_.load(std::memory_order_acquire) != ChannelState::Condition::usable)
      return broken_;
    if (const WorkStatus failed = failed_status_.load(std::memory_order_acquire);
        failed != WorkStatus::success)
      return ChannelState::broken_by(failed);
    return {};
  }

  /// The completion channel's fd. Throws ibv::Error (state) when the queue has none.
  [[nodiscard]] int completion_fd() const;
  /// Arms the completion queue, then takes every completion already in it into the cache: a
  /// completion not taken in by this call raises an event on the fd.
  void arm_completion_fd();
  /// Reads and acknowledges the events queued on the fd (of every queue sharing it).
  std::size_t consume_completion_events();
  /// The oldest receive completion from the shared receive queue not handed out yet (polling
  /// the CQ once if none is cached), and forgets it.
  std::optional<WorkCompletion> take_shared();
  /// take_shared() until it succeeds or `timeout` has passed.
  std::optional<WorkCompletion> wait_shared(std::chrono::nanoseconds timeout);
  /// Whether the queue pair takes its receives from a shared receive queue.
  [[nodiscard]] bool shared() const noexcept { return shared_; }
  [[nodiscard]] const std::optional<SharedReceivePool>& pool() const noexcept { return pool_; }

  [[nodiscard]] const QueuePair& queue_pair() const noexcept { return qp_; }
  [[nodiscard]] const CompletionQueue& completion_queue() const noexcept { return cq_; }
  [[nodiscard]] const ChannelTimeouts& timeouts() const noexcept { return timeouts_; }
  [[nodiscard]] const WaitMode& wait_mode() const noexcept { return wait_mode_; }
  /// Send-queue requests posted inline so far.
  [[nodiscard]] std::uint64_t inline_posts() const noexcept { return inline_posts_; }

 private:
  enum class Queue : std::uint8_t { send, receive };
  enum class State : std::uint8_t {
    free,     // nothing (or a request handed out / discarded)
    send,     // a send-queue request posted, not completed
    receive,  // a receive posted, not completed
    arrived,  // completed, its completion not handed out yet
  };
  /// One request the channel tracks, from posting until its completion is handed out (or,
  /// orphaned, discarded).
  struct Slot {
    std::uint64_t wr_id = 0;
    State state = State::free;
    bool orphaned = false;       // its completion is discarded (a failure is logged)
    bool signaled = false;       // a send-queue request posted signaled
    bool folded_failed = false;  // a request folded into it failed: `completion` holds that
    WorkCompletion completion;   // when arrived (or folded_failed)
  };
  /// A send-queue request not retired yet, in posting order, with the unsignaled requests of
  /// its list part folded into it (post_send_list): wr_ids wr_id - folded .. wr_id - 1, which
  /// have no entry or slot of their own.
  struct SendEntry {
    std::uint64_t wr_id;
    bool signaled;
    SendOpcode opcode;
    std::uint32_t folded;
  };

  // The hot path (find, release, occupy, track_send, wait_for_room's look, poll_once, accept,
  // retire_before's common case, finish) is defined inline below the class, so that a blocking
  // call compiles into one function; what is rare lives in channel_core.cpp.

  /// The list posts' one loop: posts `checked` on `queue` in parts of list_part(), each after
  /// waiting for its room, and calls `track(taken, whole)` with the requests of each part the
  /// device took (`whole`: all of the part), in order, before it throws for a part that `verb`
  /// cut short.
  template <typename Request, typename Track>
  void post_in_parts(const CheckedList<Request>& checked, Queue queue, const char* verb,
                     Track&& track) {
    const std::size_t total = checked.size();
    const std::size_t chunk = list_part(queue);
    for (std::size_t done = 0; done < total;) {
      const auto part = checked.part(done, std::min(chunk, total - done));
      wait_for_room(queue, part.size());
      // The lists are built in the channel's storage afresh for every post: no unlinking.
      const ListPosted result = qp_.post(part, AfterPost::leave_linked);
      track(part.requests().first(result.posted), result.posted == part.size());
      if (result.error != 0) [[unlikely]] {
        throw_post_failure(verb, qp_.qp_number(), result.error,
                           part.requests()[result.posted].wr_id());
      }
      done += part.size();
    }
  }
  /// The slot of `wr_id` while the channel tracks it (outstanding, arrived or orphaned), else
  /// null: handed out already, or never posted.
  Slot* find(std::uint64_t wr_id) noexcept { return find(slots_[wr_id & slot_mask_], wr_id); }
  /// find() given `ring`, the ring slot of `wr_id` (which may hold another request).
  Slot* find(Slot& ring, std::uint64_t wr_id) noexcept;
  /// find() outside the ring: in overflow_.
  Slot* find_spilled(std::uint64_t wr_id) noexcept;
  /// Frees `slot` (the slot of `wr_id`).
  void release(Slot* slot, std::uint64_t wr_id);
  /// Takes the ring slot of the fresh `wr_id` into use as `state`.
  Slot& occupy(std::uint64_t wr_id, State state, bool signaled, bool orphaned);
  /// Makes ring slot `slot` free for the fresh `wr_id`: moves its request out to overflow_
  /// (rare: it was posted a whole ring ago and is still outstanding, or its completion has not
  /// been taken).
  void spill(Slot& slot, std::uint64_t wr_id);

  using Clock = std::chrono::steady_clock;

  /// Polls one batch from the CQ into the cache; returns how many arrived. The completion of
  /// `awaited` (a request still tracked for its handle), if among them, is pointed to by
  /// `*handoff` (in the batch, valid until the next poll) instead of being kept in its slot,
  /// which is freed: the awaited completion is matched once and copied at most once.
  std::size_t poll_once(std::uint64_t awaited = 0, const WorkCompletion** handoff = nullptr);
  /// Polls until the CQ is empty.
  void drain();
  /// Runs `done()` (which polls) until it returns true or `deadline` passes, waiting between
  /// calls by the wait mode: spinning, or (block) arm, drain, check again, sleep on the fd
  /// until the deadline, take the events, repeat. Whether `done()` returned true.
  template <typename Done>
  bool wait_until(Clock::time_point deadline, Done&& done);
  /// Takes a polled completion into account: counts, retirement, orphans, the cache.
  void accept(const WorkCompletion& completion, std::uint64_t awaited,
              const WorkCompletion** handoff);
  /// accept() of the completion of the request post_send() left untracked (poll_once: nothing
  /// polled since it was posted): handed off if awaited, else kept in a slot, as accept() does
  /// for a tracked one.
  void accept_untracked(const WorkCompletion& completion, std::uint64_t awaited,
                        const WorkCompletion** handoff) {
    const std::uint64_t wr_id = completion.wr_id();
    untracked_ = kNoneUntracked;
    retire_before(wr_id, completion.qp_number());  // the unsignaled requests before it
    if (!completion.ok()) [[unlikely]]
      note_send_failure(completion);
    if (wr_id == awaited && handoff != nullptr) {
      *handoff = &completion;
      return;
    }
    occupy(wr_id, State::arrived, true, false).completion = completion;
  }
  /// accept() of a completion with no slot: if it is of a request folded into a send-queue
  /// entry (only a failure, or a flush, makes one), records a failure on that entry's slot
  /// and returns true; false for a request the channel does not know.
  bool accept_folded(const WorkCompletion& completion);
  /// accept() of a completion whose request has no slot in the send or receive state (`slot`:
  /// what find() gave): a receive folded into a unit (counted), one folded into a send-queue
  /// entry (accept_folded), or an unknown one (logged). Out of line: inline, its code cost
  /// every blocking send 10 instructions.
  [[gnu::noinline]] void accept_unslotted(const WorkCompletion& completion, const Slot* slot);
  /// A receive folded into a unit (post_receive_list) failed: the channel is broken, and the
  /// unit's slot (the first tracked receive after it) keeps this failure as its completion,
  /// under the receive's own wr_id without the tag, unless it has one already.
  [[gnu::cold, gnu::noinline]] void note_folded_receive_failure(const WorkCompletion& completion);
  /// Retires the unsignaled requests posted before the send-queue request `wr_id`.
  void retire_before(std::uint64_t wr_id, std::uint32_t qp_number);
  /// retire_before() when `wr_id` is not the oldest: retires each request before it.
  void retire_through(std::uint64_t wr_id, std::uint32_t qp_number);
  /// Logs a completion for a request the channel does not track.
  static void report_unknown(const WorkCompletion& completion);
  /// Logs the failure of an orphaned request (its completion is discarded).
  static void report_orphan_failure(const WorkCompletion& completion);
  /// Throws: more send-queue requests in flight than max_send_wr (a bug).
  [[noreturn]] void throw_send_queue_overrun() const;
  /// Records `completion` of the request in `slot`: discarded if orphaned, else pointed to by
  /// `*handoff` (freeing the slot) when given, else kept in the slot for its handle. A
  /// failure folded into the slot (accept_folded) stands in for `completion`.
  void finish(Slot& slot, std::uint64_t wr_id, const WorkCompletion& completion,
              const WorkCompletion** handoff = nullptr);
  /// finish() of an orphaned slot or one with a folded failure.
  void finish_rarely(Slot& slot, std::uint64_t wr_id, const WorkCompletion& completion,
                     const WorkCompletion** handoff);
  /// Records a posted send-queue request: its send-queue entry and its slot, and
  /// note_signaling(). `folded`: the unsignaled requests just before it that its entry stands
  /// for (a list part, see post_send_list).
  void track_send(std::uint64_t wr_id, bool signaled, SendOpcode opcode, bool orphaned,
                  std::uint32_t folded = 0);
  /// Removes the oldest send-queue entry (with the requests folded into it).
  void pop_oldest_send() noexcept {
    send_count_ -= 1 + send_queue_[send_head_ & send_mask_].folded;
    ++send_head_;
    --send_entries_;
  }
  /// What must_signal() and the unsignaled retirement read of a posted send-queue request.
  void note_signaling(std::uint64_t wr_id, bool signaled) noexcept {
    if (signaled) last_signaled_ = wr_id;
    unsignaled_run_ = signaled ? 0 : unsignaled_run_ + 1;
  }
  /// Waits (bounded by the operation timeout) until `count` more requests fit `queue`.
  void wait_for_room(Queue queue, std::size_t count = 1) {
    const bool send = queue == Queue::send;
    const std::size_t in_flight = send ? send_count_ : std::size_t{in_flight_receive_};
    const std::size_t capacity = send ? send_capacity_ : receive_capacity_;
    if (in_flight + count <= capacity) [[likely]]
      return;
    wait_for_room_slowly(queue, count);
  }
  /// wait_for_room() once the queue has no room: polls (by the wait mode) until it has.
  void wait_for_room_slowly(Queue queue, std::size_t count);
  /// Whether the next send must be signaled so that the send queue keeps being retired, after
  /// `run` unsignaled ones in a row.
  [[nodiscard]] bool must_signal(std::uint32_t run) const noexcept {
    return run + 1 >= signal_run_;
  }
  [[nodiscard]] bool must_signal() const noexcept { return must_signal(unsignaled_run_); }
  /// How many requests one doorbell of a list post carries on `queue`: the whole receive
  /// queue, or half the send queue, because the unsignaled requests at the end of a part (fewer
  /// than half the queue, see must_signal) may stay in it until a later signaled one, so a
  /// whole queue's worth of room might never come.
  [[nodiscard]] std::size_t list_part(Queue queue) const noexcept {
    return queue == Queue::send ? std::max<std::size_t>(send_capacity_ / 2, 1)
                                : std::max<std::size_t>(receive_capacity_, 1);
  }
  /// Throws the state Error of a receive posted on a channel with a shared receive queue.
  [[noreturn]] void throw_receive_on_shared() const;
  /// If `wr_id` is an unsignaled request with nothing signaled after it, posts a zero-length
  /// signaled RDMA write whose completion retires it.
  void ensure_retirement(std::uint64_t wr_id);
  /// Keeps a receive completion from the shared receive queue for take_shared().
  void keep_shared(const WorkCompletion& completion);
  /// settle_if_succeeded() for a request whose completion has not arrived (`slot`: its slot,
  /// or null): one poll for it.
  bool poll_if_succeeded(Slot* slot, std::uint64_t wr_id);
  /// settle_if_succeeded() past its common case (`ring`: the ring slot of `wr_id`, which may
  /// hold another request): the request spilled out of the ring, failed, orphaned, or not
  /// arrived yet (then one poll for it).
  bool settle_slowly(Slot& ring, std::uint64_t wr_id);
  /// take() that also says whether `wr_id` is still tracked (false: handed out, or unknown).
  const WorkCompletion* try_take(std::uint64_t wr_id, bool& tracked);
  /// Tracks the request post_send() left untracked, if any: before anything else posts or
  /// polls on the channel.
  void track_untracked() {
    if (untracked_ != kNoneUntracked) [[unlikely]]
      track_send(std::exchange(untracked_, kNoneUntracked), true, untracked_opcode_, false);
  }
  /// settle_if_succeeded() of the request post_send() left untracked: take_first(), a
  /// failure kept in a slot for the handle.
  bool settle_untracked(std::uint64_t wr_id);
  /// Frees `slot` (the slot of `wr_id`, arrived) and points to its completion, which stays
  /// readable until the next post or poll (a spilled slot's is copied to handed_out_ first).
  const WorkCompletion* hand_out(Slot* slot, std::uint64_t wr_id);
  /// Throws the state Error of a post on a cancelled channel (naming why it was cancelled).
  [[noreturn]] void throw_cancelled() const;
  /// Records `state` as why the channel is no longer usable, unless a reason is recorded
  /// already (the first one is kept, a failed completion's too). Only the thread that uses the
  /// channel calls it.
  void note_broken(ChannelState state) noexcept;
  /// A completion failed (the queue pair is in error now): keeps its status as why the channel
  /// broke, unless a reason is recorded already. One load and one store: state() makes the
  /// ChannelState when asked.
  [[gnu::always_inline]] void note_failed_status(const WorkCompletion& completion) noexcept {
    if (failed_status_.load(std::memory_order_relaxed) == WorkStatus::success &&
        condition_.load(std::memory_order_relaxed) == ChannelState::Condition::usable)
      failed_status_.store(completion.status(), std::memory_order_release);
  }
  /// note_failed_status() of a send-queue request, which also marks the send queue failed.
  /// Inline, with no call, in settle_untracked(): there a call (even a cold one) cost a scope 3
  /// instructions of register saves per request (bench/hot_path/guard).
  [[gnu::always_inline]] void note_send_failure_inline(const WorkCompletion& completion) noexcept {
    send_failed_ = true;
    note_failed_status(completion);
  }
  /// note_send_failure_inline() out of line and cold: in the other completion loops, inline,
  /// it cost a scoped send with its receive 22 instructions.
  [[gnu::cold, gnu::noinline]] void note_send_failure(const WorkCompletion& completion) noexcept;
  /// note_failed_status() of a receive, out of line and cold as note_send_failure().
  [[gnu::cold, gnu::noinline]] void note_failure(const WorkCompletion& completion) noexcept;
  /// Polls the monitor, at most once a millisecond, while a wait goes on (`now`: its clock).
  void watch(std::chrono::steady_clock::time_point now) noexcept;

  // Declared before the queue pair: destroyed after it (the rdma_cm id outlives the QP).
  std::unique_ptr<ConnectionMonitor> monitor_;
  std::chrono::steady_clock::time_point next_watch_{};
  QueuePair qp_;
  CompletionQueue cq_;
  ChannelTimeouts timeouts_;
  WaitMode wait_mode_;
  std::uint32_t max_inline_data_ = 0;  // what the device granted the QP (automatic inlining)
  std::uint64_t inline_posts_ = 0;
  std::optional<SharedReceivePool> pool_;
  bool shared_ = false;
  std::string cancel_reason_;  // why cancel() broke the channel; empty while it works
  // state(): usable until note_broken() writes broken_ (once) and then publishes its condition
  // here (release), so that another thread that reads a condition (acquire) reads broken_ too.
  std::atomic<ChannelState::Condition> condition_{ChannelState::Condition::usable};
  ChannelState broken_;
  // Or the status of the first failed completion (note_failure), if that came first.
  std::atomic<WorkStatus> failed_status_{WorkStatus::success};
  std::uint64_t next_wr_id_ = 1;
  // Every request the channel tracks, in the slot wr_id & slot_mask_ (wr_ids are consecutive,
  // so the requests of the last slots_.size() wr_ids never share a slot). The ring holds at
  // least max_send_wr + max_recv_wr slots, as many as can be outstanding at once; a request
  // still tracked when its slot comes round again moves to overflow_.
  std::vector<Slot> slots_;
  std::uint64_t slot_mask_ = 0;
  std::unordered_map<std::uint64_t, Slot> overflow_;  // tracked requests moved out of the ring
  // Send-queue requests in posting order, not retired: a ring of at least max_send_wr entries,
  // a power of two (posting waits for room in the send queue, so no more are ever outstanding).
  std::vector<SendEntry> send_queue_;
  std::size_t send_capacity_ = 0;     // max_send_wr (at least 1): how many may be outstanding
  std::size_t receive_capacity_ = 0;  // max_recv_wr
  std::uint32_t signal_run_ = 1;      // must_signal(): unsignaled runs are shorter than this
  std::size_t send_mask_ = 0;         // send_queue_.size() - 1
  std::size_t send_head_ = 0;         // the oldest is send_queue_[send_head_ & send_mask_]
  std::size_t send_entries_ = 0;      // how many entries
  std::size_t send_count_ = 0;        // how many requests they stand for (the queue's use)
  std::uint64_t last_signaled_ = 0;   // wr_id of the last signaled send-queue request posted
  // A signaled request posted, tracked only when need be; kNoneUntracked when there is none
  // (never a wr_id: the channel's count up from 1, a shared receive queue's leave the tag clear).
  std::uint64_t untracked_ = kNoneUntracked;
  SendOpcode untracked_opcode_{};     // its opcode
  std::uint32_t unsignaled_run_ = 0;  // unsignaled requests posted since the last signaled one
  bool send_failed_ = false;          // a send-queue request failed: the QP is in error
  std::uint32_t in_flight_receive_ = 0;
  // Receive completions from the shared receive queue, oldest at shared_head_: a ring of the
  // queue's max_wr entries (as many receives as can complete before any is handed out; grown
  // only if the user posts more to the queue while completions wait here).
  std::vector<WorkCompletion> shared_ring_;
  std::size_t shared_head_ = 0;
  std::size_t shared_count_ = 0;
  std::array<WorkCompletion, 32> batch_{};
  WorkCompletion handed_out_;  // hand_out()'s and finish_rarely()'s copy of what a slot hands out
  std::vector<SendRequest> send_list_;        // send_list_storage()
  std::vector<ReceiveRequest> receive_list_;  // receive_list_storage()
};

/// A new ChannelCore, held by its first owner (destroy_core() deletes it after its last).
template <typename... Args>
[[nodiscard]] CoreOwner new_core(Args&&... args) {
  // NOLINTNEXTLINE(cppcoreguidelines-owning-memory): destroy_core() deletes it
  auto* core = new ChannelCore(std::forward<Args>(args)...);
  return {core, core};
}

inline ChannelCore::Slot* ChannelCore::find(Slot& ring, std::uint64_t wr_id) noexcept {
  if (ring.state != State::free && ring.wr_id == wr_id) [[likely]]
    return &ring;
  return overflow_.empty() ? nullptr : find_spilled(wr_id);
}

inline void ChannelCore::release(Slot* slot, std::uint64_t wr_id) {
  if (slot == &slots_[wr_id & slot_mask_]) [[likely]] {
    slot->state = State::free;
  } else {
    overflow_.erase(wr_id);
  }
}

inline ChannelCore::Slot& ChannelCore::occupy(std::uint64_t wr_id, State state, bool signaled,
                                              bool orphaned) {
  Slot& slot = slots_[wr_id & slot_mask_];
  if (slot.state != State::free) [[unlikely]]
    spill(slot, wr_id);
  slot.wr_id = wr_id;
  slot.state = state;
  slot.signaled = signaled;
  slot.orphaned = orphaned;
  slot.folded_failed = false;
  return slot;
}

inline void ChannelCore::track_send(std::uint64_t wr_id, bool signaled, SendOpcode opcode,
                                    bool orphaned, std::uint32_t folded) {
  // wait_for_room() keeps it within max_send_wr before every post.
  if (send_count_ + folded >= send_capacity_) [[unlikely]]
    throw_send_queue_overrun();
  occupy(wr_id, State::send, signaled, orphaned);
  send_queue_[(send_head_ + send_entries_) & send_mask_] = {wr_id, signaled, opcode, folded};
  ++send_entries_;
  send_count_ += 1 + folded;
  note_signaling(wr_id, signaled);
}

[[gnu::always_inline]] inline std::size_t ChannelCore::poll_once(std::uint64_t awaited,
                                                                 const WorkCompletion** handoff) {
  const auto polled = cq_.poll(batch_);
  for (const auto& completion : polled) {
    if (completion.wr_id() == untracked_) [[unlikely]] {
      accept_untracked(completion, awaited, handoff);
    } else {
      accept(completion, awaited, handoff);
    }
  }
  track_untracked();  // its completion was not in this batch: tracked from now on
  return polled.size();
}

[[gnu::always_inline]] inline void ChannelCore::accept(const WorkCompletion& completion,
                                                       std::uint64_t awaited,
                                                       const WorkCompletion** handoff) {
  const std::uint64_t wr_id = completion.wr_id();
  if (shared_ && (wr_id & kChannelTag) == 0) {
    keep_shared(completion);  // a receive from the shared queue: not the channel's to track
    return;
  }
  Slot* slot = find(wr_id);
  if (slot == nullptr || (slot->state != State::send && slot->state != State::receive))
      [[unlikely]] {
    accept_unslotted(completion, slot);
    return;
  }
  if (slot->state == State::send) {
    // Retired before the failure is noted: retired_completion() reads send_failed_.
    retire_before(wr_id, completion.qp_number());  // touches other slots only
    if (!completion.ok()) [[unlikely]]
      note_send_failure(completion);
  } else if (!completion.ok()) [[unlikely]] {
    note_failure(completion);  // a receive: the queue pair is in error too
  }
  finish(*slot, wr_id, completion, wr_id == awaited ? handoff : nullptr);
}

[[gnu::always_inline]] inline bool ChannelCore::poll_if_succeeded(Slot* slot, std::uint64_t wr_id) {
  if (slot == nullptr || slot->orphaned || slot->state == State::arrived) return false;
  if (slot->state == State::send && !slot->signaled) return false;  // may need a flush write
  const WorkCompletion* handed = nullptr;
  poll_once(wr_id, &handed);
  if (handed == nullptr) return false;
  if (handed->ok()) [[likely]]
    return true;
  // Failed: back into a slot, for the handle's owner to take (`handed` points into the poll
  // batch, which only the next poll overwrites).
  occupy(wr_id, State::arrived, true, false).completion = *handed;
  return false;
}

[[gnu::always_inline]] inline bool ChannelCore::settle_untracked(std::uint64_t wr_id) {
  const WorkCompletion* handed = take_first(wr_id);
  if (handed == nullptr) return false;
  if (handed->ok()) [[likely]]
    return true;
  // Failed: into a slot, for the handle's owner to take (`handed` points into the poll batch,
  // which only the next poll overwrites).
  occupy(wr_id, State::arrived, true, false).completion = *handed;
  return false;
}

[[gnu::always_inline]] inline const WorkCompletion* ChannelCore::try_take(std::uint64_t wr_id,
                                                                          bool& tracked) {
  if (wr_id == untracked_) {  // posted last, not polled since: the blocking calls' first look
    const WorkCompletion* handed = take_first(wr_id);
    tracked = handed == nullptr;  // take_first() tracks it when it misses
    return handed;
  }
  Slot* slot = find(wr_id);
  tracked = slot != nullptr && !slot->orphaned;
  if (!tracked) [[unlikely]]
    return nullptr;  // handed out already, or unknown
  if (slot->state != State::arrived) {
    // A signaled request completes by itself; an unsignaled one may need a flush write.
    if (slot->state == State::send && !slot->signaled) [[unlikely]]
      ensure_retirement(wr_id);
    const WorkCompletion* handed = nullptr;
    poll_once(wr_id, &handed);
    if (handed != nullptr) {
      tracked = false;
      return handed;
    }
    slot = find(wr_id);  // ensure_retirement may have moved it
    if (slot == nullptr || slot->state != State::arrived) return nullptr;
  }
  tracked = false;
  return hand_out(slot, wr_id);
}

inline const WorkCompletion* ChannelCore::hand_out(Slot* slot, std::uint64_t wr_id) {
  if (slot == &slots_[wr_id & slot_mask_]) [[likely]] {
    slot->state = State::free;
    return &slot->completion;
  }
  handed_out_ = slot->completion;
  overflow_.erase(wr_id);
  return &handed_out_;
}

[[gnu::always_inline]] inline void ChannelCore::retire_before(std::uint64_t wr_id,
                                                              std::uint32_t qp_number) {
  // The send queue is in posting order, so in increasing wr_id order.
  if (send_entries_ == 0) return;  // retired already
  const std::uint64_t oldest = send_queue_[send_head_ & send_mask_].wr_id;
  if (oldest == wr_id) [[likely]] {  // the oldest: nothing before it
    pop_oldest_send();
    return;
  }
  if (wr_id < oldest) return;  // retired already
  retire_through(wr_id, qp_number);
}

[[gnu::always_inline]] inline void ChannelCore::finish(Slot& slot, std::uint64_t wr_id,
                                                       const WorkCompletion& completion,
                                                       const WorkCompletion** handoff) {
  if (slot.state == State::receive) --in_flight_receive_;
  if (slot.orphaned || slot.folded_failed) [[unlikely]] {
    finish_rarely(slot, wr_id, completion, handoff);
    return;
  }
  if (handoff != nullptr) {
    release(&slot, wr_id);
    *handoff = &completion;
    return;
  }
  slot.state = State::arrived;
  slot.completion = completion;
}

/// Why an owner gave up on a request: "write wr_id 7 did not complete within 5000 ms".
[[nodiscard]] std::string timed_out(std::string_view what, std::uint64_t wr_id,
                                    std::chrono::nanoseconds waited);
/// Gives up on `wr_id` of `core` because of `reason` (made by timed_out()): cancels it (see
/// ChannelCore::cancel; `cancelled_in`, a string literal, is the call state() names, e.g.
/// "Channel::execute"), then throws the timeout Error of `operation` (e.g. "Channel::write"),
/// which says that the channel is cancelled (Error::channel_cancelled()) and what to do.
[[noreturn]] void give_up(ChannelCore& core, std::uint64_t wr_id, std::string_view cancelled_in,
                          std::string_view operation, const std::string& reason);
/// The timeout Error of give_up(), for an owner that has cancelled already.
[[noreturn]] void throw_given_up(std::string_view operation, const std::string& reason);

/// The name of a send-queue operation in the channel's messages ("write", "fetch_add").
[[nodiscard]] constexpr std::string_view operation_name(SendOpcode opcode) noexcept {
  return send_opcode_traits(opcode).operation;
}

}  // namespace ibv::detail
