// Private: posting one request that QueuePair::check has already passed. The Channel checks a
// request before it waits for room in the queue (so bad input throws without waiting), then
// posts it; these post it without checking it a second time.
#pragma once

#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/work_request.hpp"

namespace ibv::detail {

/// Posts `request` (alone: its `next` is cleared) with ibv_post_send. The caller has passed it
/// through qp.check(request). Throws ibv::Error as QueuePair::post_send does when the verb
/// fails.
void post_checked(const QueuePair& qp, SendRequest& request);
/// Posts `request` (alone) with ibv_post_recv, after qp.check(request). Throws as
/// QueuePair::post_receive does when the verb fails.
void post_checked(const QueuePair& qp, ReceiveRequest& request);

}  // namespace ibv::detail
