// SPDX-License-Identifier: MIT
// Asynchronous events of a device (ibv_get_async_event): port state changes, fatal queue pair
// errors, a shared receive queue's limit reached. Read with a bounded wait, acknowledged at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ibv/duration.hpp"
#include "ibv/verbs/context.hpp"

struct ibv_qp;
struct ibv_cq;
struct ibv_srq;

namespace ibv {

class SharedReceiveQueue;
class QueuePair;

/// The kinds of asynchronous event (the values of enum ibv_event_type).
enum class AsyncEventType : std::uint8_t {
  cq_error = 0,
  qp_fatal,
  qp_request_error,
  qp_access_error,
  communication_established,
  send_queue_drained,
  path_migrated,
  path_migration_error,
  device_fatal,
  port_active,
  port_error,
  lid_change,
  pkey_change,
  sm_change,
  srq_error,
  srq_limit_reached,  ///< A SharedReceiveQueue fell below its armed limit (now disarmed).
  qp_last_wqe_reached,
  client_reregister,
  gid_change,
  wq_fatal,
};

/// The name verbs uses for `type`, e.g. "SRQ limit reached" (ibv_event_type_str).
[[nodiscard]] std::string_view to_string(AsyncEventType type) noexcept;

/// One asynchronous event, already acknowledged. It names the object it concerns by identity
/// only (the pointers are for comparison, never dereferenced: the object may be gone by now).
struct AsyncEvent {
  AsyncEventType type = AsyncEventType::device_fatal;  ///< What happened.
  const ibv_qp* qp = nullptr;    ///< For the qp_* events, communication_established, ...
  const ibv_cq* cq = nullptr;    ///< For cq_error.
  const ibv_srq* srq = nullptr;  ///< For srq_error and srq_limit_reached.
  std::uint8_t port = 0;         ///< For the port and GID events.

  /// Whether the event is about `queue` (its limit reached, or an error of it).
  [[nodiscard]] bool concerns(const SharedReceiveQueue& queue) const noexcept;
  /// Whether the event is about `queue_pair`.
  [[nodiscard]] bool concerns(const QueuePair& queue_pair) const noexcept;
  /// "SRQ limit reached", "port error (port 1)", ...
  [[nodiscard]] std::string to_string() const;
};

/// The next asynchronous event of `context`, waiting at most `timeout` (0: only what is
/// there already), or nullopt when none came. The event is acknowledged before it is returned
/// (an unacknowledged event would make destroying its object wait forever). The context's
/// async event descriptor is set non-blocking. Every reader of one context shares one stream
/// of events: an event read here is not seen by another reader. Throws ibv::Error
/// (invalid_argument) for a negative timeout, or when reading fails.
[[nodiscard]] std::optional<AsyncEvent> read_async_event(const Context& context, Duration timeout);

}  // namespace ibv
