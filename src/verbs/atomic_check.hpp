// SPDX-License-Identifier: MIT
// Private: the checks an atomic work request must pass before it is posted, as a pure function
// of the request and what the queue pair knows (unit-tested; QueuePair::check turns the verdict
// into an error message).
#pragma once

#include <cstdint>

#include "ibv/verbs/work_request.hpp"

namespace ibv::detail {

/// What is wrong with an atomic request, in the order the checks run.
enum class AtomicProblem : std::uint8_t {
  none,
  device_without_atomics,        ///< the device's atomic_cap is NONE
  no_read_atomic_depth,          ///< the QP's max_rd_atomic or max_dest_rd_atomic is 0
  result_not_one_word,           ///< the result is not one element of exactly 8 bytes
  unaligned_target,              ///< the target address is not a multiple of 8
  short_target,                  ///< the target region is shorter than 8 bytes
  target_without_atomic_access,  ///< the target is known to lack remote atomic access
};

/// The first problem of the atomic `request` itself (its result buffer and target), or none.
[[nodiscard]] inline AtomicProblem atomic_request_problem(const SendRequest& request) noexcept {
  if (request.element_count() != 1 || request.byte_length() != kAtomicWordSize) {
    return AtomicProblem::result_not_one_word;
  }
  // The target, as fetch_add() / compare_swap() set it: its address, its length
  // (remote_limit) and its known rights.
  if (request.native().wr.atomic.remote_addr % kAtomicWordSize != 0) {
    return AtomicProblem::unaligned_target;
  }
  if (request.remote_limit() < kAtomicWordSize) return AtomicProblem::short_target;
  if (const auto& access = request.remote_access(); access && !access->allows_atomic()) {
    return AtomicProblem::target_without_atomic_access;
  }
  return AtomicProblem::none;
}

/// What a queue pair with these properties lacks for atomics (device_without_atomics,
/// no_read_atomic_depth), or none. The same for every request: a QueuePair asks it once.
[[nodiscard]] constexpr AtomicProblem atomic_queue_pair_problem(
    bool device_atomics, std::uint32_t max_rd_atomic, std::uint32_t max_dest_rd_atomic) noexcept {
  if (!device_atomics) return AtomicProblem::device_without_atomics;
  if (max_rd_atomic == 0 || max_dest_rd_atomic == 0) return AtomicProblem::no_read_atomic_depth;
  return AtomicProblem::none;
}

/// The first problem of `request` (an atomic, with its remote target set) on a queue pair with
/// these properties, or none. Compares only.
[[nodiscard]] inline AtomicProblem atomic_problem(const SendRequest& request, bool device_atomics,
                                                  std::uint32_t max_rd_atomic,
                                                  std::uint32_t max_dest_rd_atomic) noexcept {
  if (const auto problem =
          atomic_queue_pair_problem(device_atomics, max_rd_atomic, max_dest_rd_atomic);
      problem != AtomicProblem::none) {
    return problem;
  }
  return atomic_request_problem(request);
}

}  // namespace ibv::detail
