// Private: the state a Channel shares with its PendingWork handles and scopes: the queue pair,
// its completion queue, wr_id allocation, the cache of completions that arrived for other
// requests than the one awaited, send-queue accounting (signaled and unsignaled requests in
// posting order), and orphaned requests.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ibv/channel/channel.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/work_request.hpp"

namespace ibv::detail {

class ChannelCore {
 public:
  ChannelCore(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts);

  /// Posts the send-queue request `make(wr_id)` builds, under a fresh wr_id, after waiting
  /// (bounded) for room in the send queue. Returns the wr_id.
  template <typename MakeRequest>
  std::uint64_t post_send(MakeRequest&& make, PostOptions options) {
    const std::uint64_t id = next_wr_id_++;
    wait_for_room(Queue::send);
    SendRequest request = make(id);
    if (options.inline_data) request.inline_data();
    const bool signaled = options.signaled || must_signal();
    if (!signaled) request.unsignaled();
    qp_.post_send(request);
    track_send(id, signaled, request.opcode());
    return id;
  }
  /// Posts a receive into `into` under a fresh wr_id. Returns the wr_id.
  std::uint64_t post_receive(std::span<const ScatterElement> into);

  /// The completion of `wr_id` if it has arrived (polling the CQ once if it is not cached
  /// yet), and forgets it: each completion is handed out once.
  std::optional<WorkCompletion> take(std::uint64_t wr_id);
  /// take() until it succeeds or `timeout` has passed.
  std::optional<WorkCompletion> wait(std::uint64_t wr_id, std::chrono::nanoseconds timeout);
  /// Gives up on `wr_id`: its completion, when it comes, is discarded (a failure is logged).
  void orphan(std::uint64_t wr_id);

  [[nodiscard]] const QueuePair& queue_pair() const noexcept { return qp_; }
  [[nodiscard]] const ChannelTimeouts& timeouts() const noexcept { return timeouts_; }

 private:
  enum class Queue : std::uint8_t { send, receive };
  struct SendSlot {
    std::uint64_t wr_id;
    bool signaled;
    SendOpcode opcode;
  };

  /// Polls one batch from the CQ into the cache; returns how many arrived.
  std::size_t poll_once();
  /// Takes a polled completion into account: counts, retirement, orphans, the cache.
  void accept(const WorkCompletion& completion);
  /// Retires the unsignaled requests posted before the send-queue request `wr_id`.
  void retire_before(std::uint64_t wr_id, std::uint32_t qp_number);
  void finish(std::uint64_t wr_id, Queue queue, const WorkCompletion& completion);
  void track_send(std::uint64_t wr_id, bool signaled, SendOpcode opcode);
  void wait_for_room(Queue queue);
  /// Whether the next send must be signaled so that the send queue keeps being retired.
  [[nodiscard]] bool must_signal() const noexcept;
  /// If `wr_id` is an unsignaled request with nothing signaled after it, posts a zero-length
  /// signaled RDMA write whose completion retires it.
  void ensure_retirement(std::uint64_t wr_id);

  QueuePair qp_;
  CompletionQueue cq_;
  ChannelTimeouts timeouts_;
  std::uint64_t next_wr_id_ = 1;
  std::unordered_map<std::uint64_t, Queue> outstanding_;       // posted, not completed
  std::unordered_map<std::uint64_t, WorkCompletion> arrived_;  // completed, not handed out
  std::unordered_set<std::uint64_t> orphans_;                  // completions to discard
  std::deque<SendSlot> send_queue_;   // send-queue requests in posting order, not retired
  std::uint32_t unsignaled_run_ = 0;  // unsignaled requests posted since the last signaled one
  bool send_failed_ = false;          // a send-queue request failed: the QP is in error
  std::uint32_t in_flight_receive_ = 0;
  std::array<WorkCompletion, 32> batch_{};
};

/// Posts a send-queue request built by `make(wr_id)` and returns its PendingWork.
template <typename MakeRequest>
PendingWork post(const std::shared_ptr<ChannelCore>& core, MakeRequest&& make,
                 PostOptions options) {
  return {core, core->post_send(std::forward<MakeRequest>(make), options)};
}

}  // namespace ibv::detail
