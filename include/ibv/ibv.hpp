// SPDX-License-Identifier: MIT
// The whole public API of ibverbs-cpp in one include. Prefer the single headers in larger code.
#pragma once

#include "ibv/version.hpp"

// Layer 1: verbs, a thin RAII layer over libibverbs.
#include "ibv/error.hpp"
#include "ibv/verbs/access.hpp"
#include "ibv/verbs/address_handle.hpp"
#include "ibv/verbs/async_event.hpp"
#include "ibv/verbs/completion_channel.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/context.hpp"
#include "ibv/verbs/device.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/mtu.hpp"
#include "ibv/verbs/port.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/queue_pair_settings.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"
#include "ibv/verbs/ud_address.hpp"
#include "ibv/verbs/ud_queue_pair.hpp"
#include "ibv/verbs/ud_queue_pair_settings.hpp"
#include "ibv/verbs/ud_received.hpp"
#include "ibv/verbs/ud_send_request.hpp"
#include "ibv/verbs/work_completion.hpp"
#include "ibv/verbs/work_request.hpp"

// Memory: allocation (huge pages, NUMA), registered memory, buffer pools, thread placement.
#include "ibv/memory/allocation.hpp"
#include "ibv/memory/buffer_pool.hpp"
#include "ibv/memory/numa.hpp"
#include "ibv/memory/registered_memory.hpp"

// Layer 2: channel, a safe point-to-point connection.
#include "ibv/channel/channel.hpp"
#include "ibv/channel/channel_settings.hpp"
#include "ibv/channel/channel_state.hpp"
#include "ibv/channel/channel_timeouts.hpp"
#include "ibv/channel/element_list.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/channel/pending_work.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/channel/received_message.hpp"
#include "ibv/channel/scope.hpp"
#include "ibv/channel/shared_receive_pool.hpp"
#include "ibv/channel/wait_mode.hpp"

// Connection management with rdma_cm: Channel::connect and ChannelListener.
#include "ibv/cm/channel_listener.hpp"
#include "ibv/cm/connect_options.hpp"
#include "ibv/cm/multicast_group.hpp"

// Layer 3: multi_channel, one channel per peer on one protection domain.
#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/multi_channel/multi_channel_scope.hpp"
#include "ibv/multi_channel/peer_message.hpp"
#include "ibv/multi_channel/peer_operation.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"

// Layer 4: network, ranked nodes with a TCP endpoint exchanger and RDMA barriers.
#include "ibv/net/barrier_schedule.hpp"
#include "ibv/net/bootstrap.hpp"
#include "ibv/net/bootstrap_from_environment.hpp"
#include "ibv/net/exchanger.hpp"
#include "ibv/net/fault_tolerance.hpp"
#include "ibv/net/launcher.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/net/node.hpp"
#include "ibv/net/node_datagrams.hpp"
#include "ibv/net/node_endpoint.hpp"
#include "ibv/net/pmix_bootstrap.hpp"
#include "ibv/net/rendezvous.hpp"
#include "ibv/net/wire.hpp"

// Layer 5: collectives on a Node: the persistent all-to-all(v) of an event builder.
#include "ibv/collective/all_to_all_round.hpp"
#include "ibv/collective/all_to_all_settings.hpp"
#include "ibv/collective/persistent_all_to_all.hpp"

// On top of layers 2-3: C++20 coroutines (Task, EventLoop, an awaitable per operation).
#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/async_multi_channel.hpp"
#include "ibv/coro/async_work.hpp"
#include "ibv/coro/event_loop.hpp"
#include "ibv/coro/task.hpp"
#include "ibv/datagram/datagram_endpoint.hpp"
#include "ibv/datagram/datagram_header.hpp"

/// @namespace ibv
/// ibverbs-cpp: verbs as RAII objects (layer 1), Channel (2) and MultiChannel (3), rdma_cm
/// connections, memory helpers and coroutines. README.md tells the layers; docs/safety.md what
/// the library guarantees.

/// @namespace ibv::op
/// Operations as values: one type per thing a channel can be asked to do, taken by every style
/// of posting (docs/operations.md).

/// @namespace ibv::net
/// Layer 4: ranked nodes (Node), how their ranks find each other (Bootstrap: a hosts file's
/// Exchanger, a Rendezvous, PMIx; docs/bootstrap.md) and RDMA barriers (docs/barriers.md).
