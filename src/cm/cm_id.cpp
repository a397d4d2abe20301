// SPDX-License-Identifier: MIT
// rdma_cm resources, bounded event waits, event errors and the channel's connection monitor.
#include "cm/cm_id.hpp"

#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ibv/error.hpp"

namespace ibv::detail {

void EventChannelDestroyer::operator()(rdma_event_channel* channel) const noexcept {
  rdma_destroy_event_channel(channel);
}

void CmIdDestroyer::operator()(rdma_cm_id* id) const noexcept {
  if (rdma_destroy_id(id) != 0) {
    std::fprintf(stderr, "ibverbs-cpp: rdma_destroy_id failed (errno %d)\n", errno);
  }
}

CmEvent::~CmEvent() {
  if (event_ != nullptr) rdma_ack_cm_event(event_);
}

void throw_cm_error(std::string_view call, int errno_value, std::string_view detail,
                    std::string_view hint) {
  ErrorKind kind = ErrorKind::driver;
  switch (errno_value) {
    case EINVAL: kind = ErrorKind::invalid_argument; break;
    case ENODEV:
    case EADDRNOTAVAIL:
    case ENOENT: kind = ErrorKind::not_found; break;
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE: kind = ErrorKind::resource; break;
    case EPERM:
    case EACCES: kind = ErrorKind::permission; break;
    case ETIMEDOUT: kind = ErrorKind::timeout; break;
    case EADDRINUSE:
    case ECONNREFUSED:
    case ECONNRESET:
    case ENETUNREACH:
    case EHOSTUNREACH: kind = ErrorKind::connection; break;
    case ENOSYS:
    case EOPNOTSUPP: kind = ErrorKind::unsupported; break;
    default: break;
  }
  std::string why(hint);
  if (why.empty() && (errno_value == ENODEV || errno_value == ENOENT)) {
    why =
        "is the rdma_ucm kernel module loaded (/dev/infiniband/rdma_cm), and is there an RDMA "
        "device on the network interface of the address (`rdma link show`)?";
  }
  throw Error(kind, call, errno_value, detail, why);
}

EventChannelPtr make_event_channel(std::string_view operation) {
  EventChannelPtr channel(rdma_create_event_channel());
  if (!channel) {
    throw_cm_error("rdma_create_event_channel", errno != 0 ? errno : ENODEV,
                   std::string(operation) + ": opening /dev/infiniband/rdma_cm");
  }
  const int flags = ::fcntl(channel->fd, F_GETFL);
  if (flags < 0 || ::fcntl(channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    throw_cm_error("fcntl", errno, "making the rdma_cm event channel non-blocking");
  }
  return channel;
}

CmEndpoint make_endpoint(std::string_view operation, rdma_port_space port_space) {
  CmEndpoint endpoint{make_event_channel(operation), nullptr};
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(endpoint.channel.get(), &id, nullptr, port_space) != 0) {
    throw_cm_error("rdma_create_id", errno, std::string(operation));
  }
  endpoint.id.reset(id);
  return endpoint;
}

CmEndpoint adopt_endpoint(rdma_cm_id* id, std::string_view operation) {
  CmEndpoint endpoint{nullptr, CmIdPtr(id)};
  endpoint.channel = make_event_channel(operation);
  if (rdma_migrate_id(id, endpoint.channel.get()) != 0) {
    // The id stays on the listener's channel: destroy it there, then drop the new channel.
    const int error = errno;
    endpoint.id.reset();
    throw_cm_error("rdma_migrate_id", error, std::string(operation));
  }
  return endpoint;
}

std::optional<CmEvent> next_event(rdma_event_channel* channel, CmClock::time_point deadline,
                                  std::string_view operation) {
  for (;;) {
    rdma_cm_event* event = nullptr;
    if (rdma_get_cm_event(channel, &event) == 0) return CmEvent(event);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      throw_cm_error("rdma_get_cm_event", errno, std::string(operation));
    }
    const auto now = CmClock::now();
    if (now >= deadline) return std::nullopt;
    // Round up so that a wait never ends just before the deadline and spins.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
    pollfd fd{channel->fd, POLLIN, 0};
    const int rc = ::poll(&fd, 1, static_cast<int>(std::min<std::int64_t>(left, 60'000)));
    if (rc < 0 && errno != EINTR) throw_cm_error("poll", errno, std::string(operation));
  }
}

std::string reject_reason(int status) {
  // IB CM reject reasons (IBTA table 112) that rdma_cm reports as the REJECTED event's status.
  switch (status) {
    case 1: return "no QP available on the server";
    case 2: return "no resources on the server";
    case 3: return "server QP busy";
    case 8: return "no listener on that port (invalid service ID)";
    case 9: return "transport type not supported";
    case 12: return "invalid communication instance";
    case 13: return "invalid communication ID";
    case 26: return "stale connection (the server still knows an older one)";
    case 28: return "rejected by the server (consumer reject)";
    default: return "reason " + std::to_string(status);
  }
}

void throw_event_error(const rdma_cm_event& event, std::string_view operation,
                       std::string_view phase, std::string_view peer) {
  const std::string name = rdma_event_str(event.event);
  const int status = event.status;
  const int error = status < 0 ? -status : (status > 0 ? status : EIO);
  const std::string base = std::string(phase) + " " + std::string(peer) + ": " + name;
  switch (event.event) {
    case RDMA_CM_EVENT_ADDR_ERROR:
      throw Error(error == ETIMEDOUT ? ErrorKind::timeout : ErrorKind::connection, operation, error,
                  base + " (the address did not resolve to a reachable RDMA peer)",
                  "the address must belong to a host reachable through a network interface "
                  "that has an RDMA device (`rdma link show` lists them, with their netdevs); a "
                  "timeout means that nothing answered ARP/neighbour discovery for it");
    case RDMA_CM_EVENT_ROUTE_ERROR:
      throw Error(error == ETIMEDOUT ? ErrorKind::timeout : ErrorKind::connection, operation, error,
                  base + " (no route to the peer)",
                  "on InfiniBand, is the subnet manager running? On RoCE, is the peer's address "
                  "routed through the RDMA device's netdev?");
    case RDMA_CM_EVENT_REJECTED:
      throw Error(ErrorKind::connection, operation, ECONNREFUSED,
                  base + ": " + reject_reason(status),
                  status == 8 ? "start the server first, or check the address and port"
                              : "the server refused this connection; see its log");
    case RDMA_CM_EVENT_UNREACHABLE:
      throw Error(error == ETIMEDOUT ? ErrorKind::timeout : ErrorKind::connection, operation, error,
                  base + " (the peer did not answer the connection request)",
                  "is the peer's RDMA device up, and its address correct?");
    case RDMA_CM_EVENT_CONNECT_ERROR:
      throw Error(ErrorKind::connection, operation, error,
                  base + " (the connection could not be established)",
                  "the peer may have given up or rejected the queue pair's settings");
    case RDMA_CM_EVENT_DISCONNECTED:
      throw Error(ErrorKind::connection, operation, ECONNRESET,
                  base + " (the peer disconnected before the connection was complete)");
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      throw Error(ErrorKind::connection, operation, ENODEV, base + " (the RDMA device went away)");
    default:
      throw Error(ErrorKind::protocol, operation, EPROTO,
                  base + " was not expected here (status " + std::to_string(status) + ")");
  }
}

bool CmConnection::poll(ibv_qp* qp) noexcept {
  bool peer_gone = false;
  rdma_cm_event* raw = nullptr;
  while (rdma_get_cm_event(endpoint_.channel.get(), &raw) == 0) {
    const CmEvent event(raw);
    // A disconnect is the peer going away; a device removal is this side's device going.
    peer_gone = peer_gone || event->event == RDMA_CM_EVENT_DISCONNECTED;
    if (event->event == RDMA_CM_EVENT_DISCONNECTED ||
        event->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      // The peer is gone: flush everything outstanding instead of letting it wait for its
      // timeout. Also acknowledge the peer's disconnect request.
      ibv_qp_attr attr{};
      attr.qp_state = IBV_QPS_ERR;
      if (qp != nullptr) ibv_modify_qp(qp, &attr, IBV_QP_STATE);
      if (!disconnected_) rdma_disconnect(endpoint_.id.get());
      disconnected_ = true;
    }
  }
  return peer_gone;
}

void CmConnection::disconnect() noexcept {
  if (disconnected_ || !endpoint_.id) return;
  disconnected_ = true;
  rdma_disconnect(endpoint_.id.get());  // sends the DREQ; does not wait for the reply
}

}  // namespace ibv::detail
