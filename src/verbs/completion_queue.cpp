// SPDX-License-Identifier: MIT
// CompletionQueue: creation (optionally on a completion channel), allocation-free polling and
// arming.
#include "ibv/verbs/completion_queue.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>

#include "ibv/error.hpp"
#include "verbs/cq_events.hpp"

namespace ibv {

namespace {

void check_entries(const Context& context, int min_entries) {
  if (min_entries < 1) {
    throw_invalid_argument("CompletionQueue", "min_entries " + std::to_string(min_entries),
                           "must be at least 1");
  }
  const auto max_cqe = context.query_device().max_cqe;
  if (min_entries > max_cqe) {
    throw_invalid_argument("CompletionQueue", "min_entries " + std::to_string(min_entries),
                           "exceeds the device's max_cqe of " + std::to_string(max_cqe));
  }
}

[[noreturn]] void throw_create_failed(const Context& context, int min_entries) {
  throw_verb_error("ibv_create_cq", errno != 0 ? errno : ENOMEM,
                   std::to_string(min_entries) + " entries on " + context.name());
}

}  // namespace

CompletionQueue::CompletionQueue(const Context& context, int min_entries) : context_(context) {
  check_entries(context, min_entries);
  errno = 0;
  ibv_cq* raw = ibv_create_cq(context.native(), min_entries, nullptr, nullptr, 0);
  if (raw == nullptr) throw_create_failed(context, min_entries);
  cq_ = std::shared_ptr<ibv_cq>(raw, [owner = context.shared()](ibv_cq* cq) {
    if (const int rc = ibv_destroy_cq(cq); rc != 0) {
      std::fprintf(stderr, "ibverbs-cpp: ibv_destroy_cq failed (errno %d)\n", rc);
    }
  });
}

CompletionQueue::CompletionQueue(const Context& context, int min_entries,
                                 const CompletionChannel& channel)
    : context_(context), channel_(channel) {
  check_entries(context, min_entries);
  if (channel.context().native() != context.native()) {
    throw_invalid_argument("CompletionQueue", "channel",
                           "belongs to another device context than " + context.name());
  }
  // The event counter is the queue's cq_context: a reader of the (shared) channel finds it
  // from the event. It lives until the queue is destroyed, after its last acknowledgement.
  auto events = std::make_unique<detail::CqEvents>();
  errno = 0;
  ibv_cq* raw = ibv_create_cq(context.native(), min_entries, events.get(), channel.native(), 0);
  if (raw == nullptr) throw_create_failed(context, min_entries);
  cq_ = std::shared_ptr<ibv_cq>(
      raw, [owner = context.shared(), attached = channel.shared(),
            counter = std::shared_ptr<detail::CqEvents>(std::move(events))](ibv_cq* cq) {
        // ibv_destroy_cq waits until every event read for the queue has been acknowledged.
        counter->acknowledge_rest(cq);
        if (const int rc = ibv_destroy_cq(cq); rc != 0) {
          std::fprintf(stderr, "ibverbs-cpp: ibv_destroy_cq failed (errno %d)\n", rc);
        }
      });
}

void CompletionQueue::request_notification(NotifyOn on) const {
  if (!channel_) {
    throw Error(ErrorKind::state, "CompletionQueue::request_notification", EINVAL,
                "the completion queue has no completion channel",
                "create it with a CompletionChannel to be notified of completions");
  }
  if (const int rc = ibv_req_notify_cq(cq_.get(), on == NotifyOn::solicited_only ? 1 : 0);
      rc != 0) {
    throw_verb_error("ibv_req_notify_cq", rc, "on a completion queue of " + context_.name());
  }
}

void detail::throw_poll_failure() {
  throw Error(ErrorKind::driver, "ibv_poll_cq", EIO, "the completion queue is broken",
              "the device or driver failed; this CQ and the QPs using it can not be trusted");
}

int CompletionQueue::capacity() const noexcept { return cq_->cqe; }

}  // namespace ibv
