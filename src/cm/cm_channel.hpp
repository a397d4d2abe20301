// SPDX-License-Identifier: MIT
// Private: the parts of Channel::connect and ChannelListener::accept that build a channel for
// an rdma_cm id (ChannelAccess is the friend of Channel and PreparedChannel that may).
#pragma once

#include <rdma/rdma_cma.h>

#include <string_view>

#include "cm/cm_id.hpp"
#include "ibv/channel/channel.hpp"
#include "ibv/cm/connect_options.hpp"

namespace ibv::detail {

struct ChannelAccess {
  /// Builds the channel's CQ and QP (in INIT) on the device and port `id` resolved to, in the
  /// options' protection domain (checked to be on that device) or a new one.
  [[nodiscard]] static PreparedChannel prepare(const rdma_cm_id& id, const ConnectOptions& options,
                                               std::string_view operation);
  /// The connection parameters to send: our QP number, depths and retry counts.
  [[nodiscard]] static rdma_conn_param conn_param(const PreparedChannel& prepared);
  /// Moves the QP to RTR and RTS with rdma_cm's attributes (remote QPN and PSN, path, our PSN)
  /// and wraps it as a Channel that keeps `endpoint` (the connection) until it is destroyed.
  [[nodiscard]] static Channel connect(PreparedChannel&& prepared, CmEndpoint endpoint,
                                       std::uint32_t remote_qp_number, std::string_view operation);
};

}  // namespace ibv::detail
