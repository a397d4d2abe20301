// SPDX-License-Identifier: MIT
// Channel, ChannelBuilder and PreparedChannel: building, and the blocking and unpolled posts.
#include "ibv/channel/channel.hpp"

#include <cerrno>
#include <string>
#include <utility>

#include "channel/channel_core.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "verbs/queue_pair_resolve.hpp"

namespace ibv {
ChannelBuilder::ChannelBuilder(ProtectionDomain pd) : pd_(std::move(pd)) {}

ChannelBuilder& ChannelBuilder::settings(const ChannelSettings& settings) {
  settings_ = settings;
  return *this;
}

ChannelBuilder& ChannelBuilder::queue_pair(const QueuePairSettings& settings) noexcept {
  settings_.queue_pair = settings;
  return *this;
}

ChannelBuilder& ChannelBuilder::timeouts(const ChannelTimeouts& timeouts) noexcept {
  settings_.timeouts = timeouts;
  return *this;
}

ChannelBuilder& ChannelBuilder::completion_queue_size(int entries) noexcept {
  settings_.completion_queue_size = entries;
  return *this;
}

ChannelBuilder& ChannelBuilder::wait_mode(const WaitMode& mode) noexcept {
  settings_.wait_mode = mode;
  return *this;
}

ChannelBuilder& ChannelBuilder::completion_channel(const CompletionChannel& channel) {
  settings_.completion_channel = channel;
  return *this;
}

ChannelBuilder& ChannelBuilder::shared_receive_queue(SharedReceiveQueue srq) noexcept {
  settings_.shared_receive_queue = std::move(srq);
  settings_.shared_receive_pool.reset();
  return *this;
}

ChannelBuilder& ChannelBuilder::shared_receive_pool(SharedReceivePool pool) noexcept {
  settings_.shared_receive_queue.reset();
  settings_.shared_receive_pool = std::move(pool);
  return *this;
}

PreparedChannel ChannelBuilder::build() const {
  constexpr std::string_view kOperation = "ChannelBuilder::build";
  const auto& timeouts = settings_.timeouts;
  const auto& wait = settings_.wait_mode;
  const auto& qp_settings = settings_.queue_pair;
  const auto& cq_size = settings_.completion_queue_size;
  const auto& given_channel = settings_.completion_channel;
  const auto& pool = settings_.shared_receive_pool;
  if (settings_.shared_receive_queue && pool) {
    throw_invalid_argument(kOperation, "shared_receive_queue and shared_receive_pool",
                           "are both set: set one (a pool brings its own shared receive queue)");
  }
  const std::optional<SharedReceiveQueue> srq =
      pool ? std::optional(pool->queue()) : settings_.shared_receive_queue;
  detail::check_positive(timeouts.operation, "timeouts.operation", kOperation);
  detail::check_positive(timeouts.drop, "timeouts.drop", kOperation);
  switch (wait.strategy) {
    case WaitStrategy::spin:
    case WaitStrategy::block: break;
    case WaitStrategy::spin_then_block:
      detail::check_positive(wait.spin_for, "wait_mode.spin_for", kOperation,
                             "spin_then_block spins that long before it sleeps");
      break;
    default:
      throw_invalid_argument(
          kOperation, "wait_mode.strategy " + std::to_string(static_cast<unsigned>(wait.strategy)),
          "is not a WaitStrategy");
  }
  // Every queue pair setting is checked against the device before anything is created.
  const Context& context = pd_.context();
  if (given_channel && given_channel->context().native() != context.native()) {
    throw_invalid_argument(
        kOperation, "completion_channel",
        "is on another device context than the protection domain (" + context.name() + ")");
  }
  const auto resolved = detail::resolve_queue_pair(context, qp_settings, kOperation);
  if (srq && srq->protection_domain().context().native() != context.native()) {
    throw_invalid_argument(kOperation, "shared_receive_queue",
                           "belongs to another device than the protection domain");
  }
  // One CQ for both queues, with room for every request that can be in flight at once (on a
  // shared receive queue: every receive posted there may complete on this channel).
  const std::uint64_t receives = srq ? srq->max_wr() : qp_settings.max_recv_wr.value();
  const std::string receive_name = srq ? "the shared receive queue's max_wr" : "max_recv_wr";
  const auto entries = std::uint64_t{qp_settings.max_send_wr.value()} + receives;
  if (cq_size && std::cmp_less(*cq_size, entries)) {
    throw_invalid_argument(kOperation, "completion_queue_size " + std::to_string(*cq_size),
                           "is less than max_send_wr + " + receive_name + " = " +
                               std::to_string(entries) + ", so the queue could overflow");
  }
  const auto max_cqe = context.query_device().max_cqe;
  if (cq_size && *cq_size > max_cqe) {
    throw_invalid_argument(kOperation, "completion_queue_size " + std::to_string(*cq_size),
                           "exceeds the device's max_cqe of " + std::to_string(max_cqe));
  }
  if (!cq_size && std::cmp_greater(entries, max_cqe)) {
    throw_invalid_argument(kOperation,
                           "max_send_wr + " + receive_name + " = " + std::to_string(entries),
                           "exceeds the device's max_cqe of " + std::to_string(max_cqe) +
                               ": the channel's completion queue must hold both queues");
  }
  const int cq_entries = cq_size.value_or(static_cast<int>(entries));
  std::optional<CompletionChannel> channel = given_channel;
  if (!channel && wait.sleeps()) channel.emplace(context);
  CompletionQueue cq = channel ? CompletionQueue(context, cq_entries, *channel)
                               : CompletionQueue(context, cq_entries);
  QueuePairBuilder qp_builder(pd_, cq, cq);
  qp_builder.settings(resolved.settings);
  if (srq) qp_builder.shared_receive_queue(*srq);
  PreparedQueuePair qp = qp_builder.build();
  return {std::move(qp), std::move(cq), timeouts, wait, pool};
}

PreparedChannel::PreparedChannel(PreparedQueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts,
                                 WaitMode wait, std::optional<SharedReceivePool> pool)
    : qp_(std::move(qp)),
      cq_(std::move(cq)),
      timeouts_(timeouts),
      wait_(wait),
      pool_(std::move(pool)) {}

Channel PreparedChannel::handshake(const Endpoint& remote) && {
  return {std::move(qp_).handshake(remote), std::move(cq_), timeouts_, wait_, std::move(pool_)};
}

Channel::Channel(QueuePair qp, CompletionQueue cq, ChannelTimeouts timeouts, WaitMode wait,
                 std::optional<SharedReceivePool> pool)
    : core_(detail::new_core(std::move(qp), std::move(cq), timeouts, wait, std::move(pool))) {
  const auto* srq = core_->queue_pair().shared_receive_queue();
  if (core_->pool() && (srq == nullptr || !(*srq == core_->pool()->queue()))) {
    throw_invalid_argument("Channel", "pool",
                           "is not the pool whose shared receive queue the queue pair takes its "
                           "receives from");
  }
}

const SharedReceiveQueue* Channel::shared_receive_queue() const noexcept {
  return core_->queue_pair().shared_receive_queue();
}

const SharedReceivePool* Channel::shared_receive_pool() const noexcept {
  return core_->pool() ? &*core_->pool() : nullptr;
}

const QueuePair& Channel::queue_pair() const noexcept { return core_->queue_pair(); }
const ProtectionDomain& Channel::protection_domain() const noexcept {
  return core_->queue_pair().protection_domain();
}
const ChannelTimeouts& Channel::timeouts() const noexcept { return core_->timeouts(); }
const WaitMode& Channel::wait_mode() const noexcept { return core_->wait_mode(); }
const std::optional<CompletionChannel>& Channel::completion_channel() const noexcept {
  return core_->completion_queue().channel();
}

int Channel::completion_fd() const { return core_->completion_fd(); }
void Channel::arm_completion_fd() { core_->arm_completion_fd(); }
std::size_t Channel::consume_completion_events() { return core_->consume_completion_events(); }
std::uint64_t Channel::inline_posts() const noexcept { return core_->inline_posts(); }
ChannelState Channel::state() const noexcept { return core_->state(); }

namespace {

/// Throws unless a blocking call's own timeout is positive; called before anything is posted.
/// Out of line: execute_request() calls it only when a timeout is given, off its common path.
[[gnu::noinline]] void check_timeout(const Channel::Timeout& timeout, std::string_view operation) {
  detail::check_positive_timeout(timeout, detail::QualifiedName{"Channel::", operation},
                                 "nothing was posted");
}

/// The rest of a blocking call's wait for `wr_id`, once its first poll (take_fresh) gave
/// `fresh` (null when it did not bring the completion): the completion, WorkError if it failed,
/// and on timeout an Error after cancelling the request (detail::give_up). Out of line: a
/// request that succeeded by its first poll never comes here.
[[gnu::noinline]] WorkCompletion await_rest(detail::ChannelCore& core, std::uint64_t wr_id,
                                            const WorkCompletion* fresh, Channel::Timeout timeout,
                                            std::string_view operation) {
  std::optional<WorkCompletion> completion;
  if (fresh != nullptr) {
    completion = *fresh;
  } else {
    const auto limit = timeout.value_or(core.timeouts().operation);
    completion = core.wait(wr_id, limit);
    if (!completion) [[unlikely]] {
      detail::give_up(core, wr_id, "Channel::execute", "Channel::" + std::string(operation),
                      detail::timed_out(operation, wr_id, limit));
    }
  }
  if (!completion->ok()) throw WorkError(*completion, "Channel::" + std::string(operation));
  return *completion;
}

/// Throws unless the channel takes its receives from a shared receive queue (and, for
/// `need_pool`, from a SharedReceivePool).
void check_shared(const detail::ChannelCore& core, bool need_pool, std::string_view operation) {
  if (need_pool && !core.pool()) {
    throw Error(ErrorKind::state, "Channel::" + std::string(operation), EINVAL,
                core.shared() ? "this channel's shared receive queue is not a SharedReceivePool"
                              : "this channel has no shared receive queue",
                core.shared() ? "use receive_shared() for completions of your own shared receives"
                              : "build it with ChannelBuilder::shared_receive_pool()");
  }
  if (!core.shared()) {
    throw Error(ErrorKind::state, "Channel::" + std::string(operation), EINVAL,
                "this channel has no shared receive queue",
                "build it with ChannelBuilder::shared_receive_queue(), or use receive()");
  }
}

/// The message a completion of `pool`'s queue says arrived; a failed one gives its buffer back
/// and throws WorkError (naming the buffer size when the message did not fit).
ReceivedMessage message_of(const SharedReceivePool& pool, const WorkCompletion& completion,
                           std::string_view operation) {
  ReceivedMessage message(pool, completion);
  if (!completion.ok()) [[unlikely]] {
    message.release();
    std::string context = "Channel::" + std::string(operation);
    if (completion.status() == WorkStatus::local_length_error) {
      context += " (the message was longer than the pool's buffer_size of " +
                 std::to_string(pool.buffer_size()) + " bytes; buffer " +
                 std::to_string(completion.wr_id()) + " is posted again)";
    } else if (completion.status() == WorkStatus::local_qp_operation_error) {
      // What rxe reports for a message longer than the receive (others: local_length_error).
      context += " (a message longer than the pool's buffer_size of " +
                 std::to_string(pool.buffer_size()) +
                 " bytes fails this way on some devices, rxe among them; buffer " +
                 std::to_string(completion.wr_id()) + " is posted again)";
    }
    throw WorkError(completion, context);
  }
  return message;
}

}  // namespace

WorkCompletion Channel::receive_shared(Timeout timeout) {
  check_timeout(timeout, "receive_shared");
  check_shared(*core_, false, "receive_shared");
  const auto limit = timeout.value_or(core_->timeouts().operation);
  const auto completion = core_->wait_shared(limit);
  if (!completion) {
    throw Error(ErrorKind::timeout, "Channel::receive_shared", ETIMEDOUT,
                "no message arrived on QP " + std::to_string(core_->queue_pair().qp_number()) +
                    " within " + detail::duration_text(limit),
                "is the peer sending, and are receives posted to the shared receive queue?");
  }
  if (!completion->ok()) throw WorkError(*completion, "Channel::receive_shared");
  return *completion;
}

std::optional<WorkCompletion> Channel::poll_shared() {
  check_shared(*core_, false, "poll_shared");
  return core_->take_shared();
}

ReceivedMessage Channel::receive_message(Timeout timeout) {
  check_timeout(timeout, "receive_message");
  check_shared(*core_, true, "receive_message");
  const auto limit = timeout.value_or(core_->timeouts().operation);
  const auto completion = core_->wait_shared(limit);
  if (!completion) {
    throw Error(ErrorKind::timeout, "Channel::receive_message", ETIMEDOUT,
                "no message arrived on QP " + std::to_string(core_->queue_pair().qp_number()) +
                    " within " + detail::duration_text(limit),
                "is the peer sending? (messages held unreleased keep their pool buffers)");
  }
  return message_of(*core_->pool(), *completion, "receive_message");
}

std::optional<ReceivedMessage> Channel::poll_message() {
  check_shared(*core_, true, "poll_message");
  const auto completion = core_->take_shared();
  if (!completion) return std::nullopt;
  return message_of(*core_->pool(), *completion, "poll_message");
}

PendingWork Channel::post_request(SendRequest& request, PostOptions options) {
  return {core_, core_->post_send(request, options)};
}

template <bool with_options>
PendingWork Channel::post_and_look(SendRequest& request, PostOptions options) {
  if (!with_options) options = {};
  detail::ChannelCore& core = *core_;
  const std::uint64_t wr_id = core.post_send(request, options);
  if (const WorkCompletion* fresh = core.take_first(wr_id)) [[likely]]
    return {core_, wr_id, *fresh};
  return {core_, wr_id};  // take_first() has tracked it
}
template PendingWork Channel::post_and_look<false>(SendRequest&, PostOptions);
template PendingWork Channel::post_and_look<true>(SendRequest&, PostOptions);

PendingWork Channel::post(const op::Receive& operation, ReceiveOptions /*options*/) {
  return {core_, core_->post_receive(operation.into.span())};
}

template <bool with_options>
WorkCompletion Channel::execute_request(SendRequest& request, PostOptions options,
                                        Timeout timeout) {
  if (!with_options) options = {};
  if (timeout) [[unlikely]]
    check_timeout(timeout, detail::operation_name(request.opcode()));
  detail::ChannelCore& core = *core_;
  const std::uint64_t wr_id = core.post_send(request, options);
  const WorkCompletion* fresh = core.take_first(wr_id);
  if (fresh != nullptr && fresh->ok()) [[likely]]
    return *fresh;
  return await_rest(core, wr_id, fresh, timeout, detail::operation_name(request.opcode()));
}
template WorkCompletion Channel::execute_request<false>(SendRequest&, PostOptions, Timeout);
template WorkCompletion Channel::execute_request<true>(SendRequest&, PostOptions, Timeout);

WorkCompletion Channel::execute(const op::Receive& operation, Timeout timeout) {
  check_timeout(timeout, "receive");
  detail::ChannelCore& core = *core_;
  const std::uint64_t wr_id = core.post_receive(operation.into.span());
  return await_rest(core, wr_id, core.take_fresh(wr_id), timeout, "receive");
}

}  // namespace ibv
