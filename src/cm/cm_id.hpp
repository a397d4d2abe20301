// SPDX-License-Identifier: MIT
// Private: rdma_cm resources with owners (event channel, cm id, event), bounded waiting for
// events with poll() on the event channel's non-blocking fd, the errors that events turn into,
// and the ConnectionMonitor that keeps a channel's rdma_cm connection.
#pragma once

#include <rdma/rdma_cma.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "channel/channel_core.hpp"

namespace ibv::detail {

using CmClock = std::chrono::steady_clock;

struct EventChannelDestroyer {
  void operator()(rdma_event_channel* channel) const noexcept;
};
struct CmIdDestroyer {
  void operator()(rdma_cm_id* id) const noexcept;
};
using EventChannelPtr = std::unique_ptr<rdma_event_channel, EventChannelDestroyer>;
using CmIdPtr = std::unique_ptr<rdma_cm_id, CmIdDestroyer>;

/// An rdma_cm_id with an event channel of its own. The id is destroyed before the channel;
/// rdma_destroy_id returns once every event taken for it has been acknowledged, which CmEvent
/// does on destruction, so destroying never blocks.
struct CmEndpoint {
  EventChannelPtr channel;
  CmIdPtr id;  // declared last: destroyed first
};

/// A non-blocking event channel (throws ibv::Error naming `operation`).
[[nodiscard]] EventChannelPtr make_event_channel(std::string_view operation);
/// A fresh id on its own event channel: TCP port space (connections) unless `port_space` says
/// otherwise (RDMA_PS_UDP for unreliable datagrams and multicast groups).
[[nodiscard]] CmEndpoint make_endpoint(std::string_view operation,
                                       rdma_port_space port_space = RDMA_PS_TCP);
/// Moves `id` (taken from a connection request) to an event channel of its own.
[[nodiscard]] CmEndpoint adopt_endpoint(rdma_cm_id* id, std::string_view operation);

/// One event, acknowledged on destruction. Move-only.
class CmEvent {
 public:
  explicit CmEvent(rdma_cm_event* event) noexcept : event_(event) {}
  CmEvent(CmEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CmEvent& operator=(CmEvent&&) = delete;
  CmEvent(const CmEvent&) = delete;
  CmEvent& operator=(const CmEvent&) = delete;
  ~CmEvent();

  [[nodiscard]] const rdma_cm_event& operator*() const noexcept { return *event_; }
  [[nodiscard]] const rdma_cm_event* operator->() const noexcept { return event_; }

 private:
  rdma_cm_event* event_;
};

/// The next event on `channel`, or nullopt once `deadline` has passed (poll() on the fd; an
/// interrupted poll is resumed). Throws ibv::Error when the channel itself fails.
[[nodiscard]] std::optional<CmEvent> next_event(rdma_event_channel* channel,
                                                CmClock::time_point deadline,
                                                std::string_view operation);

/// Throws the Error for an rdma_cm call that failed (errno).
[[noreturn]] void throw_cm_error(std::string_view call, int errno_value, std::string_view detail,
                                 std::string_view hint = {});

/// Throws the Error that an unexpected or failure event means while `phase` ("resolving the
/// address", "connecting") towards `peer`.
[[noreturn]] void throw_event_error(const rdma_cm_event& event, std::string_view operation,
                                    std::string_view phase, std::string_view peer);

/// What an IB CM reject reason means, for messages ("no listener on that port", ...).
[[nodiscard]] std::string reject_reason(int status);

/// The rdma_cm connection a channel keeps: polled while the channel waits (a DISCONNECTED or
/// DEVICE_REMOVAL event moves the QP to the error state, flushing its requests), disconnected
/// when the channel is destroyed, then its id is destroyed after the queue pair.
class CmConnection final : public ConnectionMonitor {
 public:
  explicit CmConnection(CmEndpoint endpoint) noexcept : endpoint_(std::move(endpoint)) {}
  bool poll(ibv_qp* qp) noexcept override;
  void disconnect() noexcept override;

 private:
  CmEndpoint endpoint_;
  bool disconnected_ = false;
};

}  // namespace ibv::detail
