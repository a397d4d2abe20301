// SPDX-License-Identifier: MIT
// ChannelCore: completion caching, send-queue accounting with unsignaled requests, cancelling,
// and waiting by spinning or sleeping on the completion channel.
#include "channel/channel_core.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "channel/shared_receive_pool_core.hpp"
#include "channel/wait_loop.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv::detail {
namespace {

/// The completion an unsignaled request would have had, known because a later request on the
/// same queue pair completed: success, or flushed once the queue pair has failed.
WorkCompletion retired_completion(std::uint64_t wr_id, SendOpcode opcode, std::uint32_t qp_number,
                                  bool flushed) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = flushed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS;
  wc.opcode = static_cast<ibv_wc_opcode>(send_opcode_traits(opcode).completion);
  wc.qp_num = qp_number;
  return WorkCompletion(wc);
}

/// The slot ring's size: a power of two (the slot is wr_id & mask), at least as many as can be
/// outstanding at once (the channel's own flush writes count in the send queue: they wait for
/// room like any other request).
std::size_t ring_size(const QueuePairSettings& settings) {
  const std::size_t outstanding =
      std::size_t{settings.max_send_wr.value()} + settings.max_recv_wr.value();
  return std::bit_ceil(std::max<std::size_t>(outstanding, 2));
}

/// The shared ring's size: as many receives as the shared receive queue holds (0 without one).
std::size_t shared_ring_size(const QueuePair& qp) {
  const SharedReceiveQueue* srq = qp.shared_receive_queue();
  return srq == nullptr ? 0 : std::max<std::size_t>(srq->max_wr(), 1);
}

}  // namespace

ChannelCore::ChannelCore(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts, WaitMode wait,
                         std::optional<SharedReceivePool> pool)
    : qp_(std::move(qp)),
      cq_(std::move(cq)),
      timeouts_(timeouts),
      wait_mode_(wait),
      max_inline_data_(qp_.max_inline_data()),
      pool_(std::move(pool)),
      shared_(qp_.shared_receive_queue() != nullptr),
      next_wr_id_(shared_ ? kChannelTag | 1U : 1U),
      slots_(ring_size(qp_.settings())),
      slot_mask_(slots_.size() - 1),
      send_queue_(std::bit_ceil(std::max<std::size_t>(qp_.settings().max_send_wr.value(), 1))),
      send_capacity_(std::max<std::size_t>(qp_.settings().max_send_wr.value(), 1)),
      receive_capacity_(qp_.settings().max_recv_wr.value()),
      signal_run_(std::max<std::uint32_t>(1, qp_.settings().max_send_wr.value() / 2)),
      send_mask_(send_queue_.size() - 1),
      shared_ring_(shared_ring_size(qp_)),
      send_list_(std::min(list_part(Queue::send), kListCapacity),
                 SendRequest::write(0, {}, RemoteMemoryRegion(0, 0, 0))),
      receive_list_(std::min(list_part(Queue::receive), kListCapacity), ReceiveRequest(0, {})) {
  if (wait_mode_.sleeps() && !cq_.channel()) {
    throw_invalid_argument("Channel", "wait mode " + std::string(to_string(wait_mode_.strategy)),
                           "sleeps on a completion channel, and the completion queue has none");
  }
}

/// The longest a sleeping wait sleeps between looks at a connection monitor.
constexpr std::chrono::milliseconds kMonitorSlice{10};

template <typename Done>
bool ChannelCore::wait_until(Clock::time_point deadline, Done&& done) {
  return wait_by_mode(
      wait_mode_, deadline, done,
      [this] {
        cq_.request_notification();
        drain();
      },
      [this](Clock::duration left) {
        // With a connection monitor (rdma_cm), sleep in slices so that a peer's disconnect,
        // which raises no completion, is still seen within a slice.
        cq_.channel()->wait_and_consume(monitor_ ? std::min<Clock::duration>(left, kMonitorSlice)
                                                 : left);
      },
      [this](Clock::time_point now) { watch(now); });
}

void ChannelCore::drain() {
  while (poll_once() == batch_.size()) {
  }
}

int ChannelCore::completion_fd() const {
  if (!cq_.channel()) {
    throw Error(ErrorKind::state, "Channel::completion_fd", EINVAL,
                "the channel has no completion channel",
                "build it with a WaitMode that blocks, or give the builder a CompletionChannel");
  }
  return cq_.channel()->fd();
}

void ChannelCore::arm_completion_fd() {
  (void)completion_fd();  // throws without a channel
  cq_.request_notification();
  drain();
}

std::size_t ChannelCore::consume_completion_events() {
  (void)completion_fd();
  return cq_.channel()->consume_events();
}

void destroy_core(ChannelCore* core) noexcept {
  delete core;  // NOLINT(cppcoreguidelines-owning-memory): new_core() made it
}

ChannelCore::~ChannelCore() {
  if (monitor_) monitor_->disconnect();
}

bool ChannelCore::settle_slowly(Slot& ring, std::uint64_t wr_id) {
  Slot* slot = find(ring, wr_id);
  if (slot != nullptr && slot->state == State::arrived && !slot->orphaned) {
    if (!slot->completion.ok()) return false;
    release(slot, wr_id);
    return true;
  }
  return poll_if_succeeded(slot, wr_id);
}

void ChannelCore::set_monitor(std::unique_ptr<ConnectionMonitor> monitor) noexcept {
  monitor_ = std::move(monitor);
}

void ChannelCore::watch(std::chrono::steady_clock::time_point now) noexcept {
  if (!monitor_ || now < next_watch_) return;
  if (monitor_->poll(qp_.native())) note_broken(ChannelState::disconnected());
  next_watch_ = now + std::chrono::milliseconds(1);
}

ChannelCore::Slot* ChannelCore::find_spilled(std::uint64_t wr_id) noexcept {
  const auto it = overflow_.find(wr_id);
  return it == overflow_.end() ? nullptr : &it->second;
}

void ChannelCore::spill(Slot& slot, std::uint64_t wr_id) {
  // wr_ids are assigned once, in increasing order: the occupant must be an older request.
  if (slot.wr_id >= wr_id) {
    throw Error(ErrorKind::state, "Channel", EINVAL,
                "wr_id " + std::to_string(wr_id) + " is already in use (by wr_id " +
                    std::to_string(slot.wr_id) + ")",
                "this is a bug in ibverbs-cpp: please report it");
  }
  // Only a request posted a whole ring of wr_ids ago is still in the slot: one that waits long
  // (a receive for a message that comes late) or whose completion nobody has taken yet.
  if (!overflow_.emplace(slot.wr_id, slot).second) {
    throw Error(ErrorKind::state, "Channel", EINVAL,
                "wr_id " + std::to_string(slot.wr_id) + " is tracked twice",
                "this is a bug in ibverbs-cpp: please report it");
  }
  slot.state = State::free;
}

void ChannelCore::throw_receive_on_shared() const {
  throw Error(ErrorKind::state, "Channel::post_receive", EINVAL,
              "this channel (QP " + std::to_string(qp_.qp_number()) +
                  ") takes its receives from a shared receive queue; nothing was posted",
              pool_ ? "messages arrive in the SharedReceivePool's buffers: take them with "
                      "receive_message()"
                    : "post receives to the SharedReceiveQueue and take their completions "
                      "with receive_shared()");
}

void ChannelCore::throw_send_queue_overrun() const {
  throw Error(ErrorKind::state, "Channel::post", EINVAL,
              "more send-queue requests in flight than max_send_wr (" +
                  std::to_string(send_capacity_) + ")",
              "this is a bug in ibverbs-cpp: please report it");
}

void ChannelCore::wait_for_room_slowly(Queue queue, std::size_t count) {
  const bool send = queue == Queue::send;
  const std::size_t capacity = send ? send_capacity_ : receive_capacity_;
  auto room = [&] {
    return (send ? send_count_ : std::size_t{in_flight_receive_}) + count <= capacity;
  };
  // A full send queue holds a signaled request (must_signal() sees to it): its completion
  // retires those before it and makes room.
  const auto deadline = Clock::now() + timeouts_.operation;
  const bool made_room = wait_until(deadline, [&] {
    if (room()) return true;
    poll_once();
    return room();
  });
  if (!made_room) {
    throw Error(ErrorKind::timeout, send ? "Channel::post (send queue)" : "Channel::post_receive",
                ETIMEDOUT,
                std::string(send ? "the send queue" : "the receive queue") +
                    (count == 1 ? " is full (" + std::to_string(capacity) + " requests in flight)"
                                : " has no room for " + std::to_string(count) + " more requests (" +
                                      std::to_string(capacity) + " at most in flight)") +
                    std::string(count == 1 ? " and none" : " and too few") + " completed within " +
                    detail::duration_text(timeouts_.operation),
                send ? "the peer is not acknowledging: is it alive and connected?"
                     : "no messages arrive to complete posted receives; build the channel "
                       "with a larger max_recv_wr or post fewer receives ahead");
  }
}

void ChannelCore::ensure_retirement(std::uint64_t wr_id) {
  track_untracked();  // before this posts
  const Slot* slot = find(wr_id);
  if (slot == nullptr || slot->state != State::send) return;  // completed, or a receive
  if (slot->signaled) return;                                 // it will complete by itself
  if (last_signaled_ > wr_id) return;  // a signaled request after it retires it
  wait_for_room(Queue::send);          // may poll, and retire wr_id on the way
  slot = find(wr_id);
  if (slot == nullptr || slot->state != State::send) return;
  // A zero-length RDMA write needs no remote address or key (IBTA C9-88); its completion
  // retires every request before it. Its own completion is discarded.
  const std::uint64_t flush = next_wr_id_++;
  SendRequest request = SendRequest::write(flush, {}, RemoteMemoryRegion(0, 0, 0));
  qp_.post_send(request);
  track_send(flush, true, SendOpcode::rdma_write, true);
}

void ChannelCore::report_orphan_failure(const WorkCompletion& completion) {
  std::fprintf(stderr, "ibverbs-cpp: Channel: orphaned request failed: %s\n",
               completion.to_string().c_str());
}

void ChannelCore::report_unknown(const WorkCompletion& completion) {
  std::fprintf(stderr, "ibverbs-cpp: Channel: completion for unknown %s\n",
               completion.to_string().c_str());
}

void ChannelCore::retire_through(std::uint64_t wr_id, std::uint32_t qp_number) {
  while (send_entries_ > 0) {
    const SendEntry entry = send_queue_[send_head_ & send_mask_];
    if (entry.wr_id > wr_id) break;
    pop_oldest_send();
    if (entry.wr_id == wr_id) break;
    // Requests before a completed one completed too (in order). A failed one reports itself,
    // so before the first failure these succeeded; after it, the QP flushed them.
    Slot* slot = find(entry.wr_id);
    if (slot == nullptr || slot->state != State::send) [[unlikely]] {
      throw Error(ErrorKind::state, "Channel", EINVAL,
                  "send-queue wr_id " + std::to_string(entry.wr_id) + " is not outstanding",
                  "this is a bug in ibverbs-cpp: please report it");
    }
    finish(*slot, entry.wr_id,
           retired_completion(entry.wr_id, entry.opcode, qp_number, send_failed_));
  }
}

bool ChannelCore::accept_folded(const WorkCompletion& completion) {
  const std::uint64_t wr_id = completion.wr_id();
  // The entry it is folded into: the first, in posting order, past it.
  for (std::size_t i = 0; i < send_entries_; ++i) {
    const SendEntry& entry = send_queue_[(send_head_ + i) & send_mask_];
    if (entry.wr_id <= wr_id) continue;
    if (entry.wr_id - entry.folded > wr_id) return false;  // before its part: not the channel's
    if (completion.ok()) return true;  // folded requests ask for none; nothing to record
    const std::uint64_t holder = entry.wr_id;
    // The entries before it have completed (in order), before the first failure: successfully.
    retire_through(wr_id, completion.qp_number());
    note_send_failure(completion);
    Slot* slot = find(holder);
    if (slot != nullptr && !slot->folded_failed) {
      slot->folded_failed = true;  // the first failure; the rest of the part is flushed after it
      slot->completion = completion;
    }
    return true;
  }
  return false;
}

void ChannelCore::accept_unslotted(const WorkCompletion& completion, const Slot* slot) {
  if (slot == nullptr && (completion.wr_id() & kFoldedReceive) != 0) [[likely]] {
    --in_flight_receive_;  // a receive of a list, before the last of its unit
    if (!completion.ok()) [[unlikely]]
      note_folded_receive_failure(completion);
    return;
  }
  if (slot != nullptr || !accept_folded(completion)) report_unknown(completion);
}

void ChannelCore::note_folded_receive_failure(const WorkCompletion& completion) {
  note_failure(completion);
  ibv_wc own = completion.native();
  own.wr_id &= ~kFoldedReceive;
  // The unit's slot: the receives between this one and it are of the same unit (consecutive
  // wr_ids, folded, without slots); a unit cut short has its tag.
  for (std::uint64_t id = own.wr_id + 1; id < next_wr_id_ && id <= own.wr_id + receive_capacity_;
       ++id) {
    Slot* slot = find(id);
    if (slot == nullptr) slot = find(id | kFoldedReceive);
    if (slot == nullptr) continue;
    if (slot->state == State::receive && !slot->folded_failed) {
      slot->folded_failed = true;  // the first failure; the rest of the unit is flushed after it
      slot->completion = WorkCompletion(own);
    }
    return;
  }
}

void ChannelCore::finish_rarely(Slot& slot, std::uint64_t wr_id, const WorkCompletion& completion,
                                const WorkCompletion** handoff) {
  // A failure folded into the slot is what went wrong; this request's own completion (flushed
  // after it) says less.
  const WorkCompletion result = slot.folded_failed ? slot.completion : completion;
  if (slot.orphaned) {
    release(&slot, wr_id);
    if (!result.ok()) report_orphan_failure(result);
    return;
  }
  if (handoff != nullptr) {
    handed_out_ = result;  // valid until the next post or poll, as the batch it stands for
    release(&slot, wr_id);
    *handoff = &handed_out_;
    return;
  }
  slot.state = State::arrived;
  slot.completion = result;
}

void ChannelCore::keep_shared(const WorkCompletion& completion) {
  if (!completion.ok()) [[unlikely]]
    note_failure(completion);
  if (shared_count_ == shared_ring_.size()) [[unlikely]] {
    // More receives completed than the queue holds: the user posted again while these waited.
    std::vector<WorkCompletion> grown(shared_ring_.size() * 2);
    for (std::size_t i = 0; i < shared_count_; ++i) {
      grown[i] = shared_ring_[(shared_head_ + i) % shared_ring_.size()];
    }
    shared_ring_ = std::move(grown);
    shared_head_ = 0;
  }
  shared_ring_[(shared_head_ + shared_count_) % shared_ring_.size()] = completion;
  ++shared_count_;
  if (pool_) pool_->core()->taken();
}

std::optional<WorkCompletion> ChannelCore::take_shared() {
  if (shared_count_ == 0) poll_once();
  if (shared_count_ == 0) return std::nullopt;
  const WorkCompletion completion = shared_ring_[shared_head_];
  if (++shared_head_ == shared_ring_.size()) shared_head_ = 0;
  --shared_count_;
  return completion;
}

std::optional<WorkCompletion> ChannelCore::wait_shared(std::chrono::nanoseconds timeout) {
  if (auto completion = take_shared()) return completion;
  std::optional<WorkCompletion> completion;
  wait_until(Clock::now() + timeout, [&] {  // by the channel's WaitMode
    completion = take_shared();
    return completion.has_value();
  });
  return completion;
}

std::optional<WorkCompletion> ChannelCore::wait(std::uint64_t wr_id,
                                                std::chrono::nanoseconds timeout) {
  // Once before reading the clock: a blocking request has often completed by the first poll.
  bool tracked = false;
  if (const WorkCompletion* completion = try_take(wr_id, tracked)) return *completion;
  if (!tracked || timeout <= std::chrono::nanoseconds::zero()) return std::nullopt;
  std::optional<WorkCompletion> completion;
  wait_until(Clock::now() + timeout, [&] {
    if (const WorkCompletion* taken = try_take(wr_id, tracked)) completion = *taken;
    return completion.has_value() || !tracked;
  });
  return completion;
}

void ChannelCore::note_broken(ChannelState state) noexcept {
  if (condition_.load(std::memory_order_relaxed) != ChannelState::Condition::usable ||
      failed_status_.load(std::memory_order_relaxed) != WorkStatus::success)
    return;
  broken_ = state;
  condition_.store(state.condition(), std::memory_order_release);
}

void ChannelCore::note_failure(const WorkCompletion& completion) noexcept {
  note_failed_status(completion);
}

void ChannelCore::note_send_failure(const WorkCompletion& completion) noexcept {
  note_send_failure_inline(completion);
}

void ChannelCore::cancel(std::uint64_t wr_id, std::string_view operation,
                         std::string_view reason) noexcept {
  note_broken(ChannelState::cancelled_in(operation));
  try {
    track_untracked();  // it is outstanding too
    if (!cancelled()) cancel_reason_ = reason;
    qp_.move_to_error();  // the device flushes everything outstanding
    const auto outstanding = [this] { return send_count_ + in_flight_receive_; };
    const bool flushed = wait_until(Clock::now() + timeouts_.drop, [&] {
      poll_once();
      return outstanding() == 0;
    });
    if (!flushed) {
      std::fprintf(stderr,
                   "ibverbs-cpp: Channel: QP %u moved to the error state, and %zu request(s) "
                   "were still not flushed after %s; their completions will be discarded\n",
                   qp_.qp_number(), outstanding(), detail::duration_text(timeouts_.drop).c_str());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ibverbs-cpp: Channel: cancelling QP %u: %s\n", qp_.qp_number(),
                 error.what());
  }
  if (Slot* slot = find(wr_id)) {
    if (slot->state == State::arrived) {
      release(slot, wr_id);  // completed or flushed: nothing left in flight
    } else {
      slot->orphaned = true;  // the device did not flush it in time: discard it when it comes
    }
  }
}

std::string timed_out(std::string_view what, std::uint64_t wr_id, std::chrono::nanoseconds waited) {
  return std::string(what) + " wr_id " + std::to_string(wr_id) + " did not complete within " +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()) +
         " ms";
}

void give_up(ChannelCore& core, std::uint64_t wr_id, std::string_view cancelled_in,
             std::string_view operation, const std::string& reason) {
  core.cancel(wr_id, cancelled_in, reason);
  throw_given_up(operation, reason);
}

void throw_given_up(std::string_view operation, const std::string& reason) {
  throw Error::cancelled_channel(
      operation,
      reason +
          "; the channel cancelled it (its queue pair is now in the error state, so "
          "the device touches none of its buffers) and refuses further work",
      "build a new channel; to wait for messages with a timeout and go on, take them "
      "from a SharedReceivePool (Channel::receive_message), where a timeout costs "
      "nothing");
}

void ChannelCore::throw_cancelled() const {
  throw Error(ErrorKind::state, "Channel::post", ECANCELED,
              "the channel (QP " + std::to_string(qp_.qp_number()) + ") was cancelled when " +
                  cancel_reason_ + "; nothing was posted",
              "giving up on a request moves its channel's queue pair to the error state, so "
              "that the device touches none of its buffers afterwards: build a new channel "
              "(docs/safety.md, \"Giving up\")");
}

}  // namespace ibv::detail
