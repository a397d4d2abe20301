// SPDX-License-Identifier: MIT
// The coroutine forms of the MultiChannel's one-peer operations: each posts one request to
// `peer` at once and returns the AsyncWork to co_await in an ibv::Task.
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

// As the Channel forms (async_channel.hpp), with the peer checked as MultiChannel's blocking
// calls check it (this rank, or not below the world size, or a region tagged with another peer:
// ibv::Error (invalid_argument) before anything is posted). Default timeout: the
// MultiChannel's operation timeout. Several peers at once: post one per peer and await each.

/// MultiChannel::send as a coroutine (async_send(Channel&, ...) on `peer`'s channel).
AsyncWork async_send(MultiChannel& channels, std::uint32_t peer,
                     std::span<const GatherElement> data, MultiChannel::Timeout timeout = {});
/// MultiChannel::send_with_immediate as a coroutine.
AsyncWork async_send_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                    std::span<const GatherElement> data, std::uint32_t immediate,
                                    MultiChannel::Timeout timeout = {});
/// MultiChannel::receive as a coroutine: the next message from `peer`.
AsyncWork async_receive(MultiChannel& channels, std::uint32_t peer,
                        std::span<const ScatterElement> into, MultiChannel::Timeout timeout = {});
/// MultiChannel::write as a coroutine; `destination` must be `peer`'s.
AsyncWork async_write(MultiChannel& channels, std::uint32_t peer,
                      std::span<const GatherElement> data,
                      const PeerRemoteMemoryRegion& destination,
                      MultiChannel::Timeout timeout = {});
/// MultiChannel::write_with_immediate as a coroutine; `destination` must be `peer`'s.
AsyncWork async_write_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                     std::span<const GatherElement> data,
                                     const PeerRemoteMemoryRegion& destination,
                                     std::uint32_t immediate, MultiChannel::Timeout timeout = {});
/// MultiChannel::read as a coroutine; `source` must be `peer`'s.
AsyncWork async_read(MultiChannel& channels, std::uint32_t peer,
                     std::span<const ScatterElement> into, const PeerRemoteMemoryRegion& source,
                     MultiChannel::Timeout timeout = {});

}  // namespace ibv
