// SPDX-License-Identifier: MIT
// MultiChannelScope and MultiManualScope: peer-addressed posting kept until the scope ends.
#include "ibv/multi_channel/multi_channel_scope.hpp"

#include <cstdio>
#include <utility>

#include "ibv/multi_channel/multi_channel.hpp"
#include "multi_channel/peer_batch.hpp"

namespace ibv {
namespace detail {

Channel& MultiScopeBase::peer_channel(std::uint32_t peer) { return channels_.channel(peer); }

ChannelCore& MultiScopeBase::peer_core(std::uint32_t peer) { return *peer_channel(peer).core_; }

PendingWork& MultiScopeBase::keep(std::uint32_t peer, PendingWork work) {
  return work_.keep(std::move(work), peer);
}

PendingWork& MultiScopeBase::post_send(std::uint32_t peer, std::span<const GatherElement> data,
                                       PostOptions options) {
  return work_.keep(channels_.post_send(peer, data, options), peer);
}

PendingWork& MultiScopeBase::post_send_with_immediate(std::uint32_t peer,
                                                      std::span<const GatherElement> data,
                                                      std::uint32_t immediate,
                                                      PostOptions options) {
  return work_.keep(channels_.post_send_with_immediate(peer, data, immediate, options), peer);
}

PendingWork& MultiScopeBase::post_receive(std::uint32_t peer,
                                          std::span<const ScatterElement> into) {
  return work_.keep(channels_.post_receive(peer, into), peer);
}

PendingWork& MultiScopeBase::post_write(std::uint32_t peer, std::span<const GatherElement> data,
                                        const PeerRemoteMemoryRegion& destination,
                                        PostOptions options) {
  return work_.keep(channels_.post_write(peer, data, destination, options), peer);
}

PendingWork& MultiScopeBase::post_write_with_immediate(std::uint32_t peer,
                                                       std::span<const GatherElement> data,
                                                       const PeerRemoteMemoryRegion& destination,
                                                       std::uint32_t immediate,
                                                       PostOptions options) {
  return work_.keep(
      channels_.post_write_with_immediate(peer, data, destination, immediate, options), peer);
}

PendingWork& MultiScopeBase::post_read(std::uint32_t peer, std::span<const ScatterElement> into,
                                       const PeerRemoteMemoryRegion& source,
                                       SignalingOptions options) {
  return work_.keep(channels_.post_read(peer, into, source, options), peer);
}

PendingWork& MultiScopeBase::post_fetch_add(std::uint32_t peer, const ScatterElement& result,
                                            const PeerRemoteMemoryRegion& target, std::uint64_t add,
                                            SignalingOptions options) {
  return work_.keep(channels_.post_fetch_add(peer, result, target, add, options), peer);
}

PendingWork& MultiScopeBase::post_compare_swap(std::uint32_t peer, const ScatterElement& result,
                                               const PeerRemoteMemoryRegion& target,
                                               std::uint64_t expected, std::uint64_t desired,
                                               SignalingOptions options) {
  return work_.keep(channels_.post_compare_swap(peer, result, target, expected, desired, options),
                    peer);
}

namespace {
BatchSink keep_in(ScopeWork& work) {
  return [&work](std::uint32_t peer, PendingWork posted) { work.keep(std::move(posted), peer); };
}
}  // namespace

void MultiScopeBase::post_scatter_send(std::span<const PeerSend> sends, PostOptions options) {
  post_batch(channels_, sends, options, "MultiChannelScope::post_scatter_send", keep_in(work_));
}

void MultiScopeBase::post_gather_receive(std::span<const PeerReceive> receives) {
  post_batch(channels_, receives, "MultiChannelScope::post_gather_receive", keep_in(work_));
}

void MultiScopeBase::post_scatter_write(std::span<const PeerWrite> writes, PostOptions options) {
  post_batch(channels_, writes, options, "MultiChannelScope::post_scatter_write", keep_in(work_));
}

void MultiScopeBase::post_gather_read(std::span<const PeerRead> reads, SignalingOptions options) {
  post_batch(channels_, reads, as_post_options(options), "MultiChannelScope::post_gather_read",
             keep_in(work_));
}

void MultiScopeBase::post_multicast_send(std::span<const std::uint32_t> peers,
                                         std::span<const GatherElement> data, PostOptions options) {
  post_multicast(channels_, peers, data, options, "MultiChannelScope::post_multicast_send",
                 keep_in(work_));
}

}  // namespace detail

void MultiManualScope::close() {
  if (closed_) return;
  closed_ = true;
  work_.close("MultiManualScope::close");
}

MultiManualScope::~MultiManualScope() {
  if (closed_) return;
  closed_ = true;
  work_.abandon("MultiManualScope");
}

}  // namespace ibv
