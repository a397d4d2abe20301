// The coroutine layer's out-of-line part: the error of a bad timeout given to an async call, and
// the named MultiChannel calls (which check the peer, and a PeerRemoteMemoryRegion's, before
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

/// A named call's post: `operation` on `peer`'s channel (which must exist; `region`, when
/// given, must be `peer`'s), as async() posts it (detail::CoroutinePost).
template <op::Operation Operation>
PendingWork post(MultiChannel& channels, std::uint32_t peer, const char* name,
                 const Operation& operation) {
  return detail::CoroutinePost::post(detail::peer_channel(channels, peer, name), operation);
}
template <op::Operation Operation>
PendingWork post(MultiChannel& channels, std::uint32_t peer, const PeerRemoteMemoryRegion& region,
                 const char* name, const Operation& operation) {
  return detail::CoroutinePost::post(detail::peer_channel(channels, peer, region, name), operation);
}
}  // namespace

AsyncWork async_send(MultiChannel& channels, std::uint32_t peer,
                     std::span<const GatherElement> data, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send";
  return detail::await_post(
      or_default(timeout, channels), kOperation,
      [&] { return post(channels, peer, kOperation, op::Send{data}); }, true);
}

AsyncWork async_send_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                    std::span<const GatherElement> data, std::uint32_t immediate,
                                    MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send_with_immediate";
  return detail::await_post(
      or_default(timeout, channels), kOperation,
      [&] {
        return post(channels, peer, kOperation, op::Send{data, immediate});
      },
      true);
}

AsyncWork async_receive(MultiChannel& channels, std::uint32_t peer,
                        std::span<const ScatterElement> into, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_receive";
  return detail::await_post(or_default(timeout, channels), kOperation,
                            [&] { return post(channels, peer, kOperation, op::Receive{into}); });
}

AsyncWork async_write(MultiChannel& channels, std::uint32_t peer,
                      std::span<const GatherElement> data,
                      const PeerRemoteMemoryRegion& destination, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write";
  return detail::await_post(
      or_default(timeout, channels), kOperation,
      [&] {
        return post(channels, peer, destination, kOperation, op::Write{data, destination.region()});
      },
      true);
}

AsyncWork async_write_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                     std::span<const GatherElement> data,
                                     const PeerRemoteMemoryRegion& destination,
                                     std::uint32_t immediate, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write_with_immediate";
  return detail::await_post(
      or_default(timeout, channels), kOperation,
      [&] {
        return post(channels, peer, destination, kOperation,
                    op::Write{data, destination.region(), immediate});
      },
      true);
}

AsyncWork async_read(MultiChannel& channels, std::uint32_t peer,
                     std::span<const ScatterElement> into, const PeerRemoteMemoryRegion& source,
                     MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_read";
  return detail::await_post(
      or_default(timeout, channels), kOperation,
      [&] {
        return post(channels, peer, source, kOperation, op::Read{into, source.region()});
      },
      true);
}

}  // namespace ibv
