// Completion queue: where the device reports finished work requests; polled into a
// caller-owned array, so the hot path allocates nothing.
#pragma once

#include <memory>
#include <span>

#include "ibv/verbs/context.hpp"
#include "ibv/verbs/work_completion.hpp"

struct ibv_cq;

namespace ibv {

/// A completion queue. Cheap-to-copy handle: queue pairs that report into it keep it alive,
/// and it keeps its Context open.
class CompletionQueue {
 public:
  /// Creates a CQ with room for at least `min_entries` completions (ibv_create_cq). Throws
  /// ibv::Error (invalid_argument) for 0 or more than the device's max_cqe.
  CompletionQueue(const Context& context, int min_entries);

  /// Polls up to `out.size()` completions into `out` and returns the filled prefix (empty when
  /// none are ready). Never blocks, never allocates. Throws ibv::Error if the device reports a
  /// polling failure (a broken CQ, not a failed work request: those are values in `out`).
  std::span<WorkCompletion> poll(std::span<WorkCompletion> out) const;

  /// The number of entries the device actually allocated (at least what was asked).
  [[nodiscard]] int capacity() const noexcept;
  [[nodiscard]] const Context& context() const noexcept { return context_; }
  [[nodiscard]] ibv_cq* native() const noexcept { return cq_.get(); }
  [[nodiscard]] const std::shared_ptr<ibv_cq>& shared() const noexcept { return cq_; }

  friend bool operator==(const CompletionQueue& a, const CompletionQueue& b) noexcept {
    return a.cq_ == b.cq_;
  }

 private:
  Context context_;
  std::shared_ptr<ibv_cq> cq_;
};

}  // namespace ibv
