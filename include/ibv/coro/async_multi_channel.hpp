// SPDX-License-Identifier: MIT
// The coroutine form of the MultiChannel's operations: async(channels, peer, operation) posts
// one request to `peer` at once and returns the AsyncWork to co_await in an ibv::Task. Several
// peers at once: post one per peer, then await each.
#pragma once

#include <cstdint>
#include <span>

#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/async_work.hpp"
#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/multi_channel/peer_operation.hpp"
#include "ibv/multi_channel/peer_remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

/// async(channel, operation) on `channels.channel(peer)`: posts `operation` (any of
/// ibv/multi_channel/peer_operation.hpp) to `peer` at once. Throws ibv::Error
/// (invalid_argument) before anything is posted for a peer that is this rank or not below the
/// world size, and for a PeerRemoteMemoryRegion of another peer (as MultiChannel::execute);
/// otherwise as the Channel form.
template <op::PeerOperation Operation>
AsyncWork async(MultiChannel& channels, std::uint32_t peer, const Operation& operation,
                MultiChannel::Timeout timeout = {}) {
  return detail::async_post(channels.channel_for(peer, operation, "ibv::async"), operation, timeout,
                            "ibv::async");
}
/// async(channels, peer, operation) posted as `options` say, as async(channel, operation,
/// options).
template <op::PeerOperation Operation>
requires op::InlineCapable<Operation> AsyncWork async(MultiChannel& channels, std::uint32_t peer,
                                                      const Operation& operation,
                                                      InlineOptions options,
                                                      MultiChannel::Timeout timeout = {}) {
  return detail::async_post<true>(channels.channel_for(peer, operation, "ibv::async"), operation,
                                  timeout, "ibv::async", detail::as_post_options(options));
}

}  // namespace ibv
