// SPDX-License-Identifier: MIT
// CompletionChannel: creation (non-blocking fd), bounded waiting with poll(), and reading and
// acknowledging events.
#include "ibv/verbs/completion_channel.hpp"

#include <fcntl.h>
#include <infiniband/verbs.h>
#include <poll.h>

#include <cerrno>
#include <cstdio>
#include <limits>
#include <string>

#include "ibv/error.hpp"
#include "verbs/cq_events.hpp"

namespace ibv {

namespace detail {

void CqEvents::note(ibv_cq* cq) noexcept {
  const std::uint64_t count = read.fetch_add(1, std::memory_order_relaxed) + 1;
  if (count % kAckBatch == 0) ibv_ack_cq_events(cq, kAckBatch);
}

void CqEvents::acknowledge_rest(ibv_cq* cq) noexcept {
  const auto rest = static_cast<unsigned>(read.load(std::memory_order_relaxed) % kAckBatch);
  if (rest != 0) ibv_ack_cq_events(cq, rest);
}

}  // namespace detail

CompletionChannel::CompletionChannel(const Context& context) : context_(context) {
  errno = 0;
  ibv_comp_channel* raw = ibv_create_comp_channel(context.native());
  if (raw == nullptr) {
    throw_verb_error("ibv_create_comp_channel", errno != 0 ? errno : ENOMEM,
                     "on " + context.name());
  }
  channel_ =
      std::shared_ptr<ibv_comp_channel>(raw, [owner = context.shared()](ibv_comp_channel* channel) {
        if (const int rc = ibv_destroy_comp_channel(channel); rc != 0) {
          std::fprintf(stderr, "ibverbs-cpp: ibv_destroy_comp_channel failed (errno %d)\n", rc);
        }
      });
  // Non-blocking: consume_events() reads until EAGAIN, and nothing ever sleeps in read().
  const int flags = fcntl(raw->fd, F_GETFL);  // NOLINT(cppcoreguidelines-pro-type-vararg)
  if (flags < 0 || fcntl(raw->fd, F_SETFL, flags | O_NONBLOCK) <
                       0) {  // NOLINT(cppcoreguidelines-pro-type-vararg)
    throw_verb_error("fcntl(O_NONBLOCK)", errno, "on the completion channel of " + context.name());
  }
}

int CompletionChannel::fd() const noexcept { return channel_->fd; }

bool CompletionChannel::wait(Duration timeout) const {
  if (timeout.count() < 0) {
    throw_invalid_argument("CompletionChannel::wait",
                           "timeout " + std::to_string(timeout.count()) + " ns", "is negative");
  }
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    const auto left = std::max(Clock::duration::zero(), deadline - Clock::now());
    // poll() counts milliseconds: round up, so a wait never ends before its deadline (a
    // positive remainder below 1 ms would otherwise turn into a busy loop of zero timeouts).
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    const int timeout_ms =
        static_cast<int>(std::min<long long>(ms, std::numeric_limits<int>::max()));
    pollfd entry{.fd = channel_->fd, .events = POLLIN, .revents = 0};
    const int ready = ::poll(&entry, 1, timeout_ms);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) throw_verb_error("poll", errno, "on a completion channel");
    if (ready == 0 && Clock::now() >= deadline) return false;
    // EINTR, or poll() woke a little early: wait for the time left
  }
}

std::size_t CompletionChannel::consume_events() const {
  std::size_t count = 0;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(channel_.get(), &cq, &context) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return count;
      if (errno == EINTR) continue;
      throw_verb_error("ibv_get_cq_event", errno, "on a completion channel");
    }
    static_cast<detail::CqEvents*>(context)->note(cq);
    ++count;
  }
}

std::size_t CompletionChannel::wait_and_consume(Duration timeout) const {
  return wait(timeout) ? consume_events() : 0;
}

}  // namespace ibv
