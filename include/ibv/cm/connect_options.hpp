// SPDX-License-Identifier: MIT
// ConnectOptions: the settings of a channel connected through rdma_cm (Channel::connect and
// ChannelListener), and how such a channel is put together.
//
// How rdma_cm is used: only for address and route resolution and for the connection
// handshake (REQ / REP / RTU). The queue pair, completion queue and protection domain are this
// library's own, built by ChannelBuilder with every check it makes, so a channel made by
// rdma_cm is the same Channel as one connected by endpoint exchange. The queue pair's number
// goes into the handshake (rdma_connect / rdma_accept with conn_param.qp_num), and its
// INIT -> RTR -> RTS attributes come from rdma_init_qp_attr (remote QPN and PSN, path MTU, the
// address vector with the GID index rdma_cm chose: RoCE v2 when the port has it).
//
// Why our own objects rather than rdma_create_qp: the queue pair keeps every setting and
// check of QueuePairSettings, the channel's completion accounting works unchanged, and the
// protection domain can be one the user already registered memory with. Why our own
// Context (opened by the device's name) rather than wrapping the cm id's ibv_context: a
// Context's objects (PD, CQ, QP, MRs) then live as long as their handles, independent of the
// rdma_cm_id and of librdmacm's device list, so nothing has to outlive the channel in a fixed
// order; the kernel CM needs only the QP number, and the device must be the same one, which is
// checked (a given protection domain on another device is an error).
#pragma once

#include <chrono>
#include <optional>

#include "ibv/channel/channel_settings.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/protection_domain.hpp"

namespace ibv {

/// Settings of a channel connected with rdma_cm: the channel's own (ChannelSettings, as for
/// ChannelBuilder), the protection domain to use, and the timeouts of the connection set-up.
/// Every timeout must be positive; Channel::connect and ChannelListener check them, and that
/// gid_index is unset, before they create anything.
struct ConnectOptions {
  /// The channel's settings (ChannelSettings), with these rdma_cm rules for its queue pair:
  /// `port` is replaced by the port the address resolves to, and the GID index is the one
  /// rdma_cm chooses: `channel.queue_pair.gid_index` must be left unset (an error otherwise).
  /// retry_count and rnr_retry are also sent to the peer in the connection request or reply
  /// (rdma_cm's conn_param), max_rd_atomic / max_dest_rd_atomic as initiator depth and
  /// responder resources. Receives can be posted only once connect() / accept() has returned:
  /// against a peer that sends as soon as it is connected, set rnr_retry to
  /// RnrRetryCount::infinite(), so that it retries receiver-not-ready until they are posted. In
  /// a wait mode that sleeps, the channel also looks at its rdma_cm connection every 10 ms of
  /// sleep, so a peer's disconnect still ends a wait.
  ChannelSettings channel;
  /// The protection domain of the channel, e.g. the one the user's memory regions are
  /// registered with, so that a server's accepted channels and its memory share one. It must
  /// be on the device the address resolves to (ibv::Error invalid_argument otherwise, naming
  /// both devices). Unset: each channel opens the device and makes its own, which
  /// Channel::protection_domain() returns for registering memory.
  std::optional<ProtectionDomain> protection_domain;
  /// Resolving the address to a local device and the peer's hardware address (ARP on RoCE).
  Duration address_timeout{std::chrono::seconds(2)};
  /// Resolving the route (path record on InfiniBand; quick on RoCE).
  Duration route_timeout{std::chrono::seconds(2)};
  /// From sending the connection request until the peer accepts or rejects it (client), or
  /// from accepting a request until the client confirms it (listener).
  Duration connect_timeout{std::chrono::seconds(5)};
};

}  // namespace ibv
