// CompletionQueue: creation and allocation-free polling.
#include "ibv/verbs/completion_queue.hpp"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdio>
#include <limits>
#include <string>

#include "ibv/verbs/error.hpp"

namespace ibv {

CompletionQueue::CompletionQueue(const Context& context, int min_entries) : context_(context) {
  if (min_entries < 1) {
    throw_invalid_argument("CompletionQueue", "min_entries " + std::to_string(min_entries),
                           "must be at least 1");
  }
  const auto max_cqe = context.query_device().max_cqe;
  if (min_entries > max_cqe) {
    throw_invalid_argument("CompletionQueue", "min_entries " + std::to_string(min_entries),
                           "exceeds the device's max_cqe of " + std::to_string(max_cqe));
  }
  errno = 0;
  ibv_cq* raw = ibv_create_cq(context.native(), min_entries, nullptr, nullptr, 0);
  if (raw == nullptr) {
    throw_verb_error("ibv_create_cq", errno != 0 ? errno : ENOMEM,
                     std::to_string(min_entries) + " entries on " + context.name());
  }
  cq_ = std::shared_ptr<ibv_cq>(raw, [owner = context.shared()](ibv_cq* cq) {
    if (const int rc = ibv_destroy_cq(cq); rc != 0) {
      std::fprintf(stderr, "ibverbs-cpp: ibv_destroy_cq failed (errno %d)\n", rc);
    }
  });
}

std::span<WorkCompletion> CompletionQueue::poll(std::span<WorkCompletion> out) const {
  const auto capacity =
      static_cast<int>(std::min<std::size_t>(out.size(), std::numeric_limits<int>::max()));
  // WorkCompletion is standard-layout with a single ibv_wc member: pointer-interconvertible.
  auto* raw =
      reinterpret_cast<ibv_wc*>(out.data());  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  const int polled = ibv_poll_cq(cq_.get(), capacity, raw);
  if (polled < 0) {
    throw Error(ErrorKind::driver, "ibv_poll_cq", EIO, "the completion queue is broken",
                "the device or driver failed; this CQ and the QPs using it can not be trusted");
  }
  return out.first(static_cast<std::size_t>(polled));
}

int CompletionQueue::capacity() const noexcept { return cq_->cqe; }

}  // namespace ibv
