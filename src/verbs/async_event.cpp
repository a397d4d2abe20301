// SPDX-License-Identifier: MIT
// read_async_event: a bounded wait on the context's async event descriptor, then
// ibv_get_async_event / ibv_ack_async_event.
#include "ibv/verbs/async_event.hpp"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <string>

#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"

namespace ibv {

static_assert(static_cast<int>(AsyncEventType::srq_limit_reached) == IBV_EVENT_SRQ_LIMIT_REACHED);
static_assert(static_cast<int>(AsyncEventType::port_error) == IBV_EVENT_PORT_ERR);
static_assert(static_cast<int>(AsyncEventType::wq_fatal) == IBV_EVENT_WQ_FATAL);

std::string_view to_string(AsyncEventType type) noexcept {
  return ibv_event_type_str(static_cast<ibv_event_type>(type));
}

bool AsyncEvent::concerns(const SharedReceiveQueue& queue) const noexcept {
  return srq != nullptr && srq == queue.native();
}

bool AsyncEvent::concerns(const QueuePair& queue_pair) const noexcept {
  return qp != nullptr && qp == queue_pair.native();
}

std::string AsyncEvent::to_string() const {
  std::string text(ibv::to_string(type));
  if (qp != nullptr) text += " (QP)";
  if (cq != nullptr) text += " (CQ)";
  if (srq != nullptr) text += " (SRQ)";
  if (port != 0) text += " (port " + std::to_string(port) + ")";
  return text;
}

std::optional<AsyncEvent> read_async_event(const Context& context, Duration timeout) {
  if (timeout.count() < 0) {
    throw_invalid_argument("read_async_event", "timeout " + detail::duration_text(timeout),
                           "is negative");
  }
  ibv_context* native = context.native();
  const int flags = ::fcntl(native->async_fd, F_GETFL);
  if (flags >= 0 && (flags & O_NONBLOCK) == 0) {
    ::fcntl(native->async_fd, F_SETFL, flags | O_NONBLOCK);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ibv_async_event raw{};
    if (ibv_get_async_event(native, &raw) == 0) {
      AsyncEvent event;
      event.type = static_cast<AsyncEventType>(raw.event_type);
      switch (raw.event_type) {
        case IBV_EVENT_CQ_ERR: event.cq = raw.element.cq; break;
        case IBV_EVENT_SRQ_ERR:
        case IBV_EVENT_SRQ_LIMIT_REACHED: event.srq = raw.element.srq; break;
        case IBV_EVENT_PORT_ACTIVE:
        case IBV_EVENT_PORT_ERR:
        case IBV_EVENT_LID_CHANGE:
        case IBV_EVENT_PKEY_CHANGE:
        case IBV_EVENT_SM_CHANGE:
        case IBV_EVENT_CLIENT_REREGISTER:
        case IBV_EVENT_GID_CHANGE:
          event.port = static_cast<std::uint8_t>(raw.element.port_num);
          break;
        case IBV_EVENT_DEVICE_FATAL:
        case IBV_EVENT_WQ_FATAL: break;
        default: event.qp = raw.element.qp; break;  // the QP events
      }
      ibv_ack_async_event(&raw);
      return event;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw_verb_error("ibv_get_async_event", errno, context.name());
    }
    const auto remaining = deadline - std::chrono::steady_clock::now();
    if (remaining.count() <= 0) return std::nullopt;
    // poll() counts milliseconds: round up, so the wait never ends before the deadline.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(remaining);
    pollfd descriptor{native->async_fd, POLLIN, 0};
    const auto wait =
        static_cast<int>(std::min<std::chrono::milliseconds::rep>(left.count(), INT_MAX));
    if (::poll(&descriptor, 1, wait) < 0 && errno != EINTR) {
      throw_verb_error("poll (async events)", errno, context.name());
    }
  }
}

}  // namespace ibv
