// SPDX-License-Identifier: MIT
// ChannelListener: rdma_bind_addr + rdma_listen, and accept(): a connection request turned
// into a connected Channel (or rejected, so the client learns at once).
#include "ibv/cm/channel_listener.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include "cm/address.hpp"
#include "cm/cm_channel.hpp"
#include "ibv/error.hpp"

namespace ibv {

struct ChannelListener::State {
  ConnectOptions options;
  detail::CmEndpoint endpoint;
  std::uint16_t port = 0;
  std::string address;
};

ChannelListener::ChannelListener(std::string_view address, std::uint16_t port,
                                 ConnectOptions options, int backlog) {
  constexpr std::string_view kOperation = "ChannelListener";
  detail::check_options(options, kOperation);
  if (backlog <= 0) {
    throw_invalid_argument(kOperation, "backlog " + std::to_string(backlog), "is not positive");
  }
  auto bind_address = detail::parse_address(address, port, kOperation, true);
  auto state = std::make_unique<State>();
  state->options = std::move(options);
  state->address =
      detail::is_any_address(address) && address != "::" ? "0.0.0.0" : std::string(address);
  state->endpoint = detail::make_endpoint(kOperation);
  rdma_cm_id* id = state->endpoint.id.get();
  if (rdma_bind_addr(id, bind_address.native()) != 0) {
    const int error = errno;
    detail::throw_cm_error("rdma_bind_addr", error, "binding " + bind_address.text,
                           error == EADDRINUSE
                               ? "another rdma_cm listener has this port; choose another, or 0 "
                                 "for any free port"
                               : "the address must be one of this host's, on a network interface "
                                 "with an RDMA device (`rdma link show`), or 0.0.0.0 for all");
  }
  if (rdma_listen(id, backlog) != 0) {
    detail::throw_cm_error("rdma_listen", errno, "listening on " + bind_address.text);
  }
  state->port = ntohs(rdma_get_src_port(id));
  state_ = std::move(state);
}

ChannelListener::ChannelListener(ChannelListener&&) noexcept = default;
ChannelListener& ChannelListener::operator=(ChannelListener&&) noexcept = default;
ChannelListener::~ChannelListener() = default;

std::uint16_t ChannelListener::port() const noexcept { return state_->port; }
const std::string& ChannelListener::address() const noexcept { return state_->address; }

namespace {

/// The next connection request within `timeout`: the new id (owned) and the client's QP
/// number; nullopt when none came. Other events on the listening id are skipped.
struct Request {
  detail::CmIdPtr id;
  std::uint32_t remote_qp_number = 0;
  std::uint8_t initiator_depth = 0;
  std::uint8_t responder_resources = 0;
};

std::optional<Request> next_request(detail::CmEndpoint& listening,
                                    detail::CmClock::time_point deadline,
                                    std::string_view operation) {
  for (;;) {
    auto event = detail::next_event(listening.channel.get(), deadline, operation);
    if (!event) return std::nullopt;
    if ((*event)->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
      Request request{detail::CmIdPtr((*event)->id), (*event)->param.conn.qp_num,
                      (*event)->param.conn.initiator_depth,
                      (*event)->param.conn.responder_resources};
      return request;  // the event is acknowledged here, before the id may be migrated
    }
    if ((*event)->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      detail::throw_event_error(**event, operation, "listening", "");
    }
    // Anything else (a late event of an id already handed out) is not the listener's concern.
  }
}

}  // namespace

Channel ChannelListener::accept(Duration timeout) {
  constexpr std::string_view kOperation = "ChannelListener::accept";
  detail::check_positive(timeout, "timeout", kOperation);
  auto request = next_request(state_->endpoint, detail::CmClock::now() + timeout, kOperation);
  if (!request) {
    throw Error(ErrorKind::timeout, kOperation, ETIMEDOUT,
                "no connection request on " + state_->address + ":" + std::to_string(state_->port) +
                    " within " + detail::duration_text(timeout),
                "is the client connecting to this address and port?");
  }
  rdma_cm_id* id = request->id.get();
  const std::string peer = [&] {
    const auto* addr = rdma_get_peer_addr(id);
    std::array<char, INET6_ADDRSTRLEN> text{};
    if (addr != nullptr && addr->sa_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text.data(),
                text.size());
    } else if (addr != nullptr && addr->sa_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text.data(),
                text.size());
    }
    return std::string(text[0] != 0 ? text.data() : "the client");
  }();
  std::optional<PreparedChannel> prepared;
  rdma_conn_param param{};
  try {
    prepared.emplace(detail::ChannelAccess::prepare(*id, state_->options, kOperation));
    param = detail::ChannelAccess::conn_param(*prepared);
    // Never promise more than the client asked for.
    param.responder_resources = std::min(param.responder_resources, request->initiator_depth);
    param.initiator_depth = std::min(param.initiator_depth, request->responder_resources);
  } catch (...) {
    rdma_reject(id, nullptr, 0);  // the client hears "rejected" instead of waiting
    throw;
  }
  auto endpoint = detail::adopt_endpoint(request->id.release(), kOperation);
  rdma_cm_id* accepted = endpoint.id.get();
  auto* channel_events = endpoint.channel.get();
  Channel channel = detail::ChannelAccess::connect(std::move(*prepared), std::move(endpoint),
                                                   request->remote_qp_number, kOperation);
  if (rdma_accept(accepted, &param) != 0) {
    detail::throw_cm_error("rdma_accept", errno, "accepting " + peer);
  }
  const auto deadline = detail::CmClock::now() + state_->options.connect_timeout;
  auto event = detail::next_event(channel_events, deadline, kOperation);
  if (!event) {
    throw Error(ErrorKind::timeout, kOperation, ETIMEDOUT,
                peer + " did not confirm the connection within " +
                    detail::duration_text(state_->options.connect_timeout),
                "the client may have given up; raise connect_timeout for slow networks");
  }
  if ((*event)->event != RDMA_CM_EVENT_ESTABLISHED) {
    detail::throw_event_error(**event, kOperation, "accepting", peer);
  }
  return channel;
}

bool ChannelListener::reject(Duration timeout) {
  constexpr std::string_view kOperation = "ChannelListener::reject";
  detail::check_positive(timeout, "timeout", kOperation);
  auto request = next_request(state_->endpoint, detail::CmClock::now() + timeout, kOperation);
  if (!request) return false;
  if (rdma_reject(request->id.get(), nullptr, 0) != 0) {
    detail::throw_cm_error("rdma_reject", errno, "rejecting a connection request");
  }
  return true;
}

}  // namespace ibv
