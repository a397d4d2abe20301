// SPDX-License-Identifier: MIT
// The coroutine layer's out-of-line part: the error of a bad timeout given to an async call,
// and the named MultiChannel calls (which check the peer, and a PeerRemoteMemoryRegion's, before
// they post as async() does).
#include "detail/positive_timeout.hpp"
#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/async_multi_channel.hpp"
#include "multi_channel/peer_batch.hpp"

namespace ibv {

void detail::throw_bad_async_timeout(Duration timeout, const char* operation) {
  detail::throw_not_positive(timeout, "timeout", operation, "nothing was posted");
}

namespace {
/// A MultiChannel coroutine call's timeout: `timeout`, or the MultiChannel's operation timeout.
MultiChannel::Timeout or_default(const MultiChannel::Timeout& timeout,
                                 const MultiChannel& channels) {
  return timeout ? timeout : MultiChannel::Timeout(channels.timeouts().operation);
}

/// A named MultiChannel coroutine call (`name`): `operation` on `peer`'s channel, once `timeout`
/// has passed its check and `peer` (and the peer of `region`, a PeerRemoteMemoryRegion, when
/// given) has passed peer_channel()'s.
template <typename Operation, typename... Region>
AsyncWork await_on_peer(MultiChannel& channels, std::uint32_t peer,
                        const MultiChannel::Timeout& timeout, const char* name,
                        const Operation& operation, const Region&... region) {
  return detail::await_operation(
      or_default(timeout, channels), name,
      [&]() -> Channel& { return detail::peer_channel(channels, peer, region..., name); },
      operation);
}

}  // namespace

AsyncWork async_send(MultiChannel& channels, std::uint32_t peer,
                     std::span<const GatherElement> data, MultiChannel::Timeout timeout) {
  return await_on_peer(channels, peer, timeout, "ibv::async_send", op::Send{data});
}

AsyncWork async_send_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                    std::span<const GatherElement> data, std::uint32_t immediate,
                                    MultiChannel::Timeout timeout) {
  return await_on_peer(channels, peer, timeout, "ibv::async_send_with_immediate",
                       op::Send{data, immediate});
}

AsyncWork async_receive(MultiChannel& channels, std::uint32_t peer,
                        std::span<const ScatterElement> into, MultiChannel::Timeout timeout) {
  return await_on_peer(channels, peer, timeout, "ibv::async_receive", op::Receive{into});
}

AsyncWork async_write(MultiChannel& channels, std::uint32_t peer,
                      std::span<const GatherElement> data,
                      const PeerRemoteMemoryRegion& destination, MultiChannel::Timeout timeout) {
  return await_on_peer(channels, peer, timeout, "ibv::async_write",
                       op::Write{data, destination.region()}, destination);
}

AsyncWork async_write_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                     std::span<const GatherElement> data,
                                     const PeerRemoteMemoryRegion& destination,
                                     std::uint32_t immediate, MultiChannel::Timeout timeout) {
  return await_on_peer(channels, peer, timeout, "ibv::async_write_with_immediate",
                       op::Write{data, destination.region(), immediate}, destination);
}

AsyncWork async_read(MultiChannel& channels, std::uint32_t peer,
                     std::span<const ScatterElement> into, const PeerRemoteMemoryRegion& source,
                     MultiChannel::Timeout timeout) {
  return await_on_peer(channels, peer, timeout, "ibv::async_read", op::Read{into, source.region()},
                       source);
}

}  // namespace ibv
