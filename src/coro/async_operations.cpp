// The async_* functions of Channel and MultiChannel: check the timeout, post, wrap in AsyncWork.
#include "detail/positive_timeout.hpp"
#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/async_multi_channel.hpp"

namespace ibv {
namespace {

/// The timeout to await with: the caller's (positive, checked before anything is posted) or
/// the channel's operation timeout.
std::chrono::nanoseconds timeout_or(const Channel::Timeout& timeout,
                                    std::chrono::milliseconds fallback, const char* operation) {
  detail::check_positive_timeout(timeout, operation, "nothing was posted");
  return timeout.value_or(fallback);
}

}  // namespace

AsyncWork async_send(Channel& channel, std::span<const GatherElement> data,
                     Channel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send";
  const auto limit = timeout_or(timeout, channel.timeouts().operation, kOperation);
  return AsyncWork(channel.post_send(data), limit, kOperation);
}

AsyncWork async_send_with_immediate(Channel& channel, std::span<const GatherElement> data,
                                    std::uint32_t immediate, Channel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send_with_immediate";
  const auto limit = timeout_or(timeout, channel.timeouts().operation, kOperation);
  return AsyncWork(channel.post_send_with_immediate(data, immediate), limit, kOperation);
}

AsyncWork async_receive(Channel& channel, std::span<const ScatterElement> into,
                        Channel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_receive";
  const auto limit = timeout_or(timeout, channel.timeouts().operation, kOperation);
  return AsyncWork(channel.post_receive(into), limit, kOperation);
}

AsyncWork async_write(Channel& channel, std::span<const GatherElement> data,
                      const RemoteMemoryRegion& destination, Channel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write";
  const auto limit = timeout_or(timeout, channel.timeouts().operation, kOperation);
  return AsyncWork(channel.post_write(data, destination), limit, kOperation);
}

AsyncWork async_write_with_immediate(Channel& channel, std::span<const GatherElement> data,
                                     const RemoteMemoryRegion& destination, std::uint32_t immediate,
                                     Channel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write_with_immediate";
  const auto limit = timeout_or(timeout, channel.timeouts().operation, kOperation);
  return AsyncWork(channel.post_write_with_immediate(data, destination, immediate), limit,
                   kOperation);
}

AsyncWork async_read(Channel& channel, std::span<const ScatterElement> into,
                     const RemoteMemoryRegion& source, Channel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_read";
  const auto limit = timeout_or(timeout, channel.timeouts().operation, kOperation);
  return AsyncWork(channel.post_read(into, source), limit, kOperation);
}

AsyncWork async_send(MultiChannel& channels, std::uint32_t peer,
                     std::span<const GatherElement> data, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send";
  const auto limit = timeout_or(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(channels.post_send(peer, data), limit, kOperation);
}

AsyncWork async_send_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                    std::span<const GatherElement> data, std::uint32_t immediate,
                                    MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_send_with_immediate";
  const auto limit = timeout_or(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(channels.post_send_with_immediate(peer, data, immediate), limit, kOperation);
}

AsyncWork async_receive(MultiChannel& channels, std::uint32_t peer,
                        std::span<const ScatterElement> into, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_receive";
  const auto limit = timeout_or(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(channels.post_receive(peer, into), limit, kOperation);
}

AsyncWork async_write(MultiChannel& channels, std::uint32_t peer,
                      std::span<const GatherElement> data,
                      const PeerRemoteMemoryRegion& destination, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write";
  const auto limit = timeout_or(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(channels.post_write(peer, data, destination), limit, kOperation);
}

AsyncWork async_write_with_immediate(MultiChannel& channels, std::uint32_t peer,
                                     std::span<const GatherElement> data,
                                     const PeerRemoteMemoryRegion& destination,
                                     std::uint32_t immediate, MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_write_with_immediate";
  const auto limit = timeout_or(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(channels.post_write_with_immediate(peer, data, destination, immediate), limit,
                   kOperation);
}

AsyncWork async_read(MultiChannel& channels, std::uint32_t peer,
                     std::span<const ScatterElement> into, const PeerRemoteMemoryRegion& source,
                     MultiChannel::Timeout timeout) {
  constexpr const char* kOperation = "ibv::async_read";
  const auto limit = timeout_or(timeout, channels.timeouts().operation, kOperation);
  return AsyncWork(channels.post_read(peer, into, source), limit, kOperation);
}

}  // namespace ibv
