// SPDX-License-Identifier: MIT
// Shared receive queue (ibv_srq): one pool of posted receives that many queue pairs draw from,
// with checked posting and the low-water limit that arms IBV_EVENT_SRQ_LIMIT_REACHED.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair_settings.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_request.hpp"

struct ibv_srq;

namespace ibv {

/// What ibv_query_srq reports: the depth and SGE count the device granted and the armed limit.
struct SharedReceiveQueueAttributes {
  std::uint32_t max_wr = 0;   ///< Receives the queue holds (at least what was asked).
  std::uint32_t max_sge = 0;  ///< Scatter elements per receive.
  std::uint32_t limit = 0;    ///< The armed low-water mark; 0 when none is armed.
};

/// A shared receive queue: receives posted here are taken, in posting order, by whichever
/// attached queue pair (QueuePairBuilder::shared_receive_queue) gets a message first; the
/// completion comes in that queue pair's receive completion queue with the wr_id given here.
///
/// A cheap-to-copy handle: copies share one ibv_srq, which is destroyed when the last copy and
/// the last queue pair attached to it are gone; it keeps its protection domain alive. Posting
/// is safe from several threads (the provider serialises ibv_post_srq_recv).
///
/// Receives still posted when the queue is destroyed are simply discarded: no completion is
/// generated for them, and destruction never waits.
class SharedReceiveQueue {
 public:
  /// The top bit of a wr_id is reserved: a Channel on a shared queue tags its own requests with
  /// it to tell their completions from the shared receives. Receives posted here must have
  /// wr_ids below it (post_receive and check reject the others).
  static constexpr std::uint64_t kReservedWrIdBit = std::uint64_t{1} << 63U;

  /// Creates a queue for `max_wr` receives of up to `max_sge` elements each on `pd`
  /// (ibv_create_srq). Throws ibv::Error before creating anything: unsupported when the device
  /// has no shared receive queues (max_srq 0), invalid_argument naming max_wr / max_sge when it
  /// exceeds the device's max_srq_wr / max_srq_sge.
  SharedReceiveQueue(const ProtectionDomain& pd, QueueDepth max_wr, SgeCount max_sge = SgeCount(1));

  /// Posts one receive (ibv_post_srq_recv) after check().
  void post_receive(ReceiveRequest& request) const;
  /// Posts several receives with one call (linked in place, no allocation); all are checked
  /// before any is posted. If the device rejects one, the error names its wr_id and the ones
  /// before it are posted.
  void post_receive(std::span<ReceiveRequest> requests) const;
  /// Posts one receive into `into` under `wr_id`.
  void post_receive(std::uint64_t wr_id, std::span<const ScatterElement> into) const;

  /// The checks post_receive() makes, without posting: throws ibv::Error (invalid_argument)
  /// naming the wr_id when the request has more elements than max_sge(), a wr_id with
  /// kReservedWrIdBit set, or an element in a memory region registered on another protection
  /// domain than the queue's (as QueuePair::check). (A message longer than the receive it
  /// lands in fails as a completion: local_length_error, on rxe local_qp_operation_error.)
  void check(const ReceiveRequest& request) const;

  /// Arms the low-water mark (ibv_modify_srq with IBV_SRQ_LIMIT): once fewer than `limit`
  /// receives remain posted, the device raises one IBV_EVENT_SRQ_LIMIT_REACHED async event
  /// (read it with ibv::read_async_event; AsyncEvent::concerns(srq) tells it is this queue's)
  /// and disarms the limit: call again to re-arm after refilling. Throws ibv::Error
  /// (invalid_argument) for 0 or a limit not below max_wr().
  void arm_limit(std::uint32_t limit) const;

  /// Queries the device for the current attributes (ibv_query_srq).
  [[nodiscard]] SharedReceiveQueueAttributes query() const;
  /// Receives the queue holds, as the device granted at creation (at least what was asked;
  /// rxe rounds up to a power of two minus one).
  [[nodiscard]] std::uint32_t max_wr() const noexcept { return max_wr_; }
  /// Elements per receive, as granted at creation.
  [[nodiscard]] std::uint32_t max_sge() const noexcept { return max_sge_; }
  /// The protection domain it was created on (its queue pairs and memory must be on it).
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return pd_; }
  /// The libibverbs SRQ, owned by this handle (do not destroy it).
  [[nodiscard]] ibv_srq* native() const noexcept { return srq_.get(); }

  friend bool operator==(const SharedReceiveQueue& a, const SharedReceiveQueue& b) noexcept {
    return a.srq_ == b.srq_;
  }

 private:
  ProtectionDomain pd_;
  std::shared_ptr<ibv_srq> srq_;
  std::uint32_t max_wr_ = 0;
  std::uint32_t max_sge_ = 0;
};

}  // namespace ibv
