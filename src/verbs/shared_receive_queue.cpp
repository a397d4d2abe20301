// SPDX-License-Identifier: MIT
// SharedReceiveQueue: creation checked against the device's SRQ limits, checked posting and
// the low-water limit.
#include "ibv/verbs/shared_receive_queue.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>

#include "ibv/error.hpp"

namespace ibv {
namespace {

constexpr std::string_view kCreate = "SharedReceiveQueue";

void check_limit(std::string_view setting, std::uint32_t value, std::int32_t device_limit,
                 std::string_view limit_name) {
  if (std::cmp_greater(value, device_limit)) {
    throw_invalid_argument(
        kCreate, std::string(setting) + " " + std::to_string(value),
        "exceeds the device's " + std::string(limit_name) + " of " + std::to_string(device_limit));
  }
}

ibv_srq* create(const ProtectionDomain& pd, QueueDepth max_wr, SgeCount max_sge,
                ibv_srq_init_attr& init) {
  const auto device = pd.context().query_device();
  if (device.max_srq <= 0) {
    throw Error(ErrorKind::unsupported, kCreate, EOPNOTSUPP,
                pd.context().name() + " has no shared receive queues (max_srq 0)",
                "build the queue pairs without a shared receive queue");
  }
  check_limit("max_wr", max_wr.value(), device.max_srq_wr, "max_srq_wr");
  check_limit("max_sge", max_sge.value(), device.max_srq_sge, "max_srq_sge");
  init.attr.max_wr = max_wr.value();
  init.attr.max_sge = max_sge.value();
  errno = 0;
  ibv_srq* raw = ibv_create_srq(pd.native(), &init);
  if (raw == nullptr) {
    throw_verb_error("ibv_create_srq", errno != 0 ? errno : ENOMEM,
                     pd.context().name() + " with max_wr " + std::to_string(max_wr.value()) +
                         ", max_sge " + std::to_string(max_sge.value()));
  }
  return raw;
}

}  // namespace

SharedReceiveQueue::SharedReceiveQueue(const ProtectionDomain& pd, QueueDepth max_wr,
                                       SgeCount max_sge)
    : pd_(pd) {
  ibv_srq_init_attr init{};
  ibv_srq* raw = create(pd, max_wr, max_sge, init);
  // The deleter holds the PD (and so the context) until the SRQ is gone.
  srq_ = std::shared_ptr<ibv_srq>(raw, [owner = pd.shared()](ibv_srq* srq) {
    if (const int rc = ibv_destroy_srq(srq); rc != 0) {
      std::fprintf(stderr, "ibverbs-cpp: ibv_destroy_srq failed (errno %d)\n", rc);
    }
  });
  // What the device granted: some providers write it back into `init`, others (rxe) only
  // report it on query (a power of two minus one there).
  const auto granted = query();
  max_wr_ = std::max(granted.max_wr, init.attr.max_wr);
  max_sge_ = std::max(granted.max_sge, init.attr.max_sge);
}

void SharedReceiveQueue::check(const ReceiveRequest& request) const {
  if ((request.wr_id() & kReservedWrIdBit) != 0) [[unlikely]] {
    throw_invalid_argument("SharedReceiveQueue::post_receive",
                           "receive wr_id " + std::to_string(request.wr_id()),
                           "has the top bit set, which channels on a shared receive queue "
                           "reserve for their own requests: use wr_ids below 2^63");
  }
  if (request.element_count() > max_sge_) {
    throw_invalid_argument("SharedReceiveQueue::post_receive",
                           "receive wr_id " + std::to_string(request.wr_id()),
                           "has " + std::to_string(request.element_count()) +
                               " elements, more than the shared receive queue's max_sge of " +
                               std::to_string(max_sge_));
  }
  if (const auto refusal =
          pd_.local_keys().refusal(request.native().sg_list, request.element_count())) {
    throw_invalid_argument("SharedReceiveQueue::post_receive",
                           "receive wr_id " + std::to_string(request.wr_id()), *refusal);
  }
}

void SharedReceiveQueue::post_receive(ReceiveRequest& request) const {
  post_receive(std::span<ReceiveRequest>(&request, 1));
}

void SharedReceiveQueue::post_receive(std::span<ReceiveRequest> requests) const {
  if (requests.empty()) return;
  for (const auto& request : requests) check(request);
  for (std::size_t i = 0; i + 1 < requests.size(); ++i) {
    requests[i].native().next = &requests[i + 1].native();
  }
  requests.back().native().next = nullptr;
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_srq_recv(srq_.get(), &requests.front().native(), &bad);
  for (auto& request : requests) request.native().next = nullptr;
  if (rc != 0) [[unlikely]] {
    std::string detail = "shared receive queue of " + std::to_string(max_wr_) + " receives";
    if (bad != nullptr) detail += ", rejected wr_id " + std::to_string(bad->wr_id);
    throw_verb_error("ibv_post_srq_recv", rc, detail);
  }
}

void SharedReceiveQueue::post_receive(std::uint64_t wr_id,
                                      std::span<const ScatterElement> into) const {
  ReceiveRequest request(wr_id, into);
  post_receive(request);
}

void SharedReceiveQueue::arm_limit(std::uint32_t limit) const {
  if (limit == 0 || limit >= max_wr_) {
    throw_invalid_argument("SharedReceiveQueue::arm_limit", "limit " + std::to_string(limit),
                           "must be between 1 and max_wr - 1 = " + std::to_string(max_wr_ - 1));
  }
  ibv_srq_attr attr{};
  attr.srq_limit = limit;
  if (const int rc = ibv_modify_srq(srq_.get(), &attr, IBV_SRQ_LIMIT); rc != 0) {
    throw_verb_error("ibv_modify_srq", rc, "srq_limit " + std::to_string(limit));
  }
}

SharedReceiveQueueAttributes SharedReceiveQueue::query() const {
  ibv_srq_attr attr{};
  if (const int rc = ibv_query_srq(srq_.get(), &attr); rc != 0) {
    throw_verb_error("ibv_query_srq", rc);
  }
  return {attr.max_wr, attr.max_sge, attr.srq_limit};
}

}  // namespace ibv
