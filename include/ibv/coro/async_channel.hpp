// The coroutine forms of the Channel's operations: each posts one request at once and returns
// the AsyncWork to co_await in an ibv::Task.
//
//   ibv::Task<> pinger(ibv::Channel& channel, std::span<const ibv::GatherElement> message) {
//     ibv::WorkCompletion done = co_await ibv::async_send(channel, message);
//   }
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>

#include "ibv/channel/channel.hpp"
#include "ibv/coro/async_work.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

// Each function checks its arguments as the blocking call of the same name does (a timeout
// must be positive; the request is checked against the queue pair), throwing ibv::Error
// (invalid_argument) before anything is posted, then posts (Channel::post_*) and returns the
// AsyncWork. Awaiting it gives the WorkCompletion, or throws ibv::WorkError (failed) or
// ibv::Error (timeout: no completion within `timeout`, default the channel's operation
// timeout, counted from the post; the request is orphaned as a blocking call's). The request
// is in flight from the call, not from the co_await: post several, then await them.

AsyncWork async_send(Channel& channel, std::span<const GatherElement> data,
                     Channel::Timeout timeout = {});
AsyncWork async_send_with_immediate(Channel& channel, std::span<const GatherElement> data,
                                    std::uint32_t immediate, Channel::Timeout timeout = {});
/// Receives one message into `into` (empty for immediate-only messages).
AsyncWork async_receive(Channel& channel, std::span<const ScatterElement> into,
                        Channel::Timeout timeout = {});
AsyncWork async_write(Channel& channel, std::span<const GatherElement> data,
                      const RemoteMemoryRegion& destination, Channel::Timeout timeout = {});
AsyncWork async_write_with_immediate(Channel& channel, std::span<const GatherElement> data,
                                     const RemoteMemoryRegion& destination, std::uint32_t immediate,
                                     Channel::Timeout timeout = {});
AsyncWork async_read(Channel& channel, std::span<const ScatterElement> into,
                     const RemoteMemoryRegion& source, Channel::Timeout timeout = {});

}  // namespace ibv
