// ChannelCore: completion caching, send-queue accounting with unsignaled requests, and
// orphaned requests.
#include "channel/channel_core.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>

#include "ibv/verbs/error.hpp"

namespace ibv::detail {
namespace {

WorkOpcode completion_opcode(SendOpcode opcode) {
  switch (opcode) {
    case SendOpcode::send:
    case SendOpcode::send_with_immediate: return WorkOpcode::send;
    case SendOpcode::rdma_write:
    case SendOpcode::rdma_write_with_immediate: return WorkOpcode::rdma_write;
    case SendOpcode::rdma_read: return WorkOpcode::rdma_read;
  }
  return WorkOpcode::send;
}

/// The completion an unsignaled request would have had, known because a later request on the
/// same queue pair completed: success, or flushed once the queue pair has failed.
WorkCompletion retired_completion(std::uint64_t wr_id, SendOpcode opcode, std::uint32_t qp_number,
                                  bool flushed) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = flushed ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS;
  wc.opcode = static_cast<ibv_wc_opcode>(completion_opcode(opcode));
  wc.qp_num = qp_number;
  return WorkCompletion(wc);
}

}  // namespace

ChannelCore::ChannelCore(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts)
    : qp_(std::move(qp)), cq_(std::move(cq)), timeouts_(timeouts) {}

std::uint64_t ChannelCore::post_receive(std::span<const ScatterElement> into) {
  const std::uint64_t id = next_wr_id_++;
  wait_for_room(Queue::receive);
  qp_.post_receive(id, into);
  outstanding_.emplace(id, Queue::receive);
  ++in_flight_receive_;
  return id;
}

void ChannelCore::track_send(std::uint64_t wr_id, bool signaled, SendOpcode opcode) {
  outstanding_.emplace(wr_id, Queue::send);
  send_queue_.push_back({wr_id, signaled, opcode});
  unsignaled_run_ = signaled ? 0 : unsignaled_run_ + 1;
}

bool ChannelCore::must_signal() const noexcept {
  return unsignaled_run_ + 1 >= std::max<std::uint32_t>(1, qp_.settings().max_send_wr.value() / 2);
}

void ChannelCore::wait_for_room(Queue queue) {
  const bool send = queue == Queue::send;
  const std::uint32_t capacity =
      send ? qp_.settings().max_send_wr.value() : qp_.settings().max_recv_wr.value();
  auto in_flight = [&] { return send ? send_queue_.size() : std::size_t{in_flight_receive_}; };
  if (in_flight() < capacity) return;
  // A full send queue holds a signaled request (must_signal() sees to it): its completion
  // retires those before it and makes room.
  const auto deadline = std::chrono::steady_clock::now() + timeouts_.operation;
  while (in_flight() >= capacity) {
    if (poll_once() == 0 && std::chrono::steady_clock::now() > deadline) {
      throw Error(ErrorKind::timeout, send ? "Channel::post (send queue)" : "Channel::post_receive",
                  ETIMEDOUT,
                  std::string(send ? "the send queue" : "the receive queue") + " is full (" +
                      std::to_string(capacity) + " requests in flight) and none completed within " +
                      std::to_string(timeouts_.operation.count()) + " ms",
                  send ? "the peer is not acknowledging: is it alive and connected?"
                       : "no messages arrive to complete posted receives; build the channel "
                         "with a larger max_recv_wr or post fewer receives ahead");
    }
  }
}

void ChannelCore::ensure_retirement(std::uint64_t wr_id) {
  bool after = false;  // whether a signaled request follows wr_id in the send queue
  bool found = false;
  for (const auto& slot : send_queue_) {
    if (slot.wr_id == wr_id) {
      if (slot.signaled) return;  // it will complete by itself
      found = true;
    } else if (found && slot.signaled) {
      after = true;
      break;
    }
  }
  if (!found || after) return;
  wait_for_room(Queue::send);  // may poll, and retire wr_id on the way
  if (!outstanding_.contains(wr_id)) return;
  // A zero-length RDMA write needs no remote address or key (IBTA C9-88); its completion
  // retires every request before it. Its own completion is discarded.
  const std::uint64_t flush = next_wr_id_++;
  SendRequest request = SendRequest::write(flush, {}, RemoteMemoryRegion(0, 0, 0));
  qp_.post_send(request);
  track_send(flush, true, SendOpcode::rdma_write);
  orphans_.insert(flush);
}

void ChannelCore::finish(std::uint64_t wr_id, Queue queue, const WorkCompletion& completion) {
  if (queue == Queue::receive) --in_flight_receive_;
  outstanding_.erase(wr_id);
  if (orphans_.erase(wr_id) > 0) {
    if (!completion.ok()) {
      std::fprintf(stderr, "ibverbs-cpp: Channel: orphaned request failed: %s\n",
                   completion.to_string().c_str());
    }
    return;
  }
  arrived_.emplace(wr_id, completion);
}

void ChannelCore::retire_before(std::uint64_t wr_id, std::uint32_t qp_number) {
  if (std::ranges::find(send_queue_, wr_id, &SendSlot::wr_id) == send_queue_.end()) return;
  while (!send_queue_.empty() && send_queue_.front().wr_id != wr_id) {
    const SendSlot slot = send_queue_.front();
    send_queue_.pop_front();
    // Requests before a completed one completed too (in order). A failed one reports itself,
    // so before the first failure these succeeded; after it, the QP flushed them.
    finish(slot.wr_id, Queue::send,
           retired_completion(slot.wr_id, slot.opcode, qp_number, send_failed_));
  }
  if (!send_queue_.empty()) send_queue_.pop_front();  // wr_id itself
}

void ChannelCore::accept(const WorkCompletion& completion) {
  const auto it = outstanding_.find(completion.wr_id());
  if (it == outstanding_.end()) {
    std::fprintf(stderr, "ibverbs-cpp: Channel: completion for unknown %s\n",
                 completion.to_string().c_str());
    return;
  }
  const Queue queue = it->second;
  if (queue == Queue::send) {
    retire_before(completion.wr_id(), completion.qp_number());
    if (!completion.ok()) send_failed_ = true;
  }
  finish(completion.wr_id(), queue, completion);
}

std::size_t ChannelCore::poll_once() {
  const auto polled = cq_.poll(batch_);
  for (const auto& completion : polled) accept(completion);
  return polled.size();
}

std::optional<WorkCompletion> ChannelCore::take(std::uint64_t wr_id) {
  auto it = arrived_.find(wr_id);
  if (it == arrived_.end()) {
    const auto pending = outstanding_.find(wr_id);
    if (pending == outstanding_.end()) return std::nullopt;  // handed out already, or unknown
    if (pending->second == Queue::send) ensure_retirement(wr_id);
    poll_once();
    it = arrived_.find(wr_id);
    if (it == arrived_.end()) return std::nullopt;
  }
  const WorkCompletion completion = it->second;
  arrived_.erase(it);
  return completion;
}

std::optional<WorkCompletion> ChannelCore::wait(std::uint64_t wr_id,
                                                std::chrono::nanoseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto completion = take(wr_id)) return completion;
    if (!outstanding_.contains(wr_id) || std::chrono::steady_clock::now() >= deadline) {
      return std::nullopt;
    }
  }
}

void ChannelCore::orphan(std::uint64_t wr_id) {
  if (arrived_.erase(wr_id) > 0) return;  // it had completed: nothing left in flight
  if (outstanding_.contains(wr_id)) orphans_.insert(wr_id);
}

}  // namespace ibv::detail
