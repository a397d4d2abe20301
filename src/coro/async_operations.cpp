// The coroutine layer's out-of-line part: the timeout check of every async call, and the named
// MultiChannel calls (which check a PeerRemoteMemoryRegion's peer before they post).
#include "detail/positive_timeout.hpp"
#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/async_multi_channel.hpp"

namespace ibv {

Duration detail::async_timeout(const Channel::Timeout& timeout, Duration fallback,
                               const char* operation) {
  if (timeout && timeout->count() <= 0) [[unlikely]]  // names the operation only then (strlen)
    detail::check_positive_timeout(*timeout, operation, "nothing was posted");
  return timeout.value_or(fallback);
}

AsyncWork async_send(MultiChannel& channels, std::uint32_t peer,
                     std::span<const GatherElement> data, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send";
  const auto limit = detail::async_timeout(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(
      detail::PostInPlace{}, [&] { return channels.post_send(peer, data); }, limit, kOperation);
}

AsyncWork async_send_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                    std::span<const GatherElement> data, std::uint32_t immediate,
                                    MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send_with_immediate";
  const auto limit = detail::async_timeout(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(
      detail::PostInPlace{},
      [&] { return channels.post_send_with_immediate(peer, data, immediate); }, limit, kOperation);
}

AsyncWork async_receive(MultiChannel& channels, std::uint32_t peer,
                        std::span<const ScatterElement> into, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_receive";
  const auto limit = detail::async_timeout(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(
      detail::PostInPlace{}, [&] { return channels.post_receive(peer, into); }, limit, kOperation);
}

AsyncWork async_write(MultiChannel& channels, std::uint32_t peer,
                      std::span<const GatherElement> data,
                      const PeerRemoteMemoryRegion& destination, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write";
  const auto limit = detail::async_timeout(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(
      detail::PostInPlace{}, [&] { return channels.post_write(peer, data, destination); }, limit,
      kOperation);
}

AsyncWork async_write_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                     std::span<const GatherElement> data,
                                     const PeerRemoteMemoryRegion& destination,
                                     std::uint32_t immediate, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write_with_immediate";
  const auto limit = detail::async_timeout(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(
      detail::PostInPlace{},
      [&] { return channels.post_write_with_immediate(peer, data, destination, immediate); }, limit,
      kOperation);
}

AsyncWork async_read(MultiChannel& channels, std::uint32_t peer,
                     std::span<const ScatterElement> into, const PeerRemoteMemoryRegion& source,
                     MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_read";
  const auto limit = detail::async_timeout(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(
      detail::PostInPlace{}, [&] { return channels.post_read(peer, into, source); }, limit,
      kOperation);
}

}  // namespace ibv
