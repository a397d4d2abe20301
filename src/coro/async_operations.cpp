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

}  // namespace

AsyncWork async_send(MultiChannel& channels, std::uint32_t peer,
                     std::span<const GatherElement> data, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send";
  return detail::await_operation(
      or_default(timeout, channels), kOperation,
      [&]() -> Channel& { return detail::peer_channel(channels, peer, kOperation); },
      op::Send{data});
}

AsyncWork async_send_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                    std::span<const GatherElement> data, std::uint32_t immediate,
                                    MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send_with_immediate";
  return detail::await_operation(
      or_default(timeout, channels), kOperation,
      [&]() -> Channel& { return detail::peer_channel(channels, peer, kOperation); },
      op::Send{data, immediate});
}

AsyncWork async_receive(MultiChannel& channels, std::uint32_t peer,
                        std::span<const ScatterElement> into, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_receive";
  return detail::await_operation(
      or_default(timeout, channels), kOperation,
      [&]() -> Channel& { return detail::peer_channel(channels, peer, kOperation); },
      op::Receive{into});
}

AsyncWork async_write(MultiChannel& channels, std::uint32_t peer,
                      std::span<const GatherElement> data,
                      const PeerRemoteMemoryRegion& destination, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write";
  return detail::await_operation(
      or_default(timeout, channels), kOperation,
      [&]() -> Channel& { return detail::peer_channel(channels, peer, destination, kOperation); },
      op::Write{data, destination.region()});
}

AsyncWork async_write_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                     std::span<const GatherElement> data,
                                     const PeerRemoteMemoryRegion& destination,
                                     std::uint32_t immediate, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write_with_immediate";
  return detail::await_operation(
      or_default(timeout, channels), kOperation,
      [&]() -> Channel& { return detail::peer_channel(channels, peer, destination, kOperation); },
      op::Write{data, destination.region(), immediate});
}

AsyncWork async_read(MultiChannel& channels, std::uint32_t peer,
                     std::span<const ScatterElement> into, const PeerRemoteMemoryRegion& source,
                     MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_read";
  return detail::await_operation(
      or_default(timeout, channels), kOperation,
      [&]() -> Channel& { return detail::peer_channel(channels, peer, source, kOperation); },
      op::Read{into, source.region()});
}

}  // namespace ibv
