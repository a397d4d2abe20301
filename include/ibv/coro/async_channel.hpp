// SPDX-License-Identifier: MIT
// The coroutine form of the Channel's operations: async(channel, operation) posts one request at
// once and returns the AsyncWork to co_await in an ibv::Task; async_send etc. name it.
//
//   ibv::Task<> pinger(ibv::Channel& channel, std::span<const ibv::GatherElement> message) {
//     ibv::WorkCompletion done = co_await ibv::async_send(channel, message);
//   }
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>

#include "ibv/channel/channel.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/channel/pending_work.hpp"
#include "ibv/coro/async_work.hpp"
#include "ibv/duration.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_request.hpp"

namespace ibv {

namespace detail {
/// Throws the ibv::Error (invalid_argument) of a coroutine call given a `timeout` that is not
/// positive, naming `operation`; nothing was posted.
[[noreturn]] void throw_bad_async_timeout(Duration timeout, const char* operation);

/// Every coroutine call's one mechanism: checks `timeout`, when given, before anything is
/// posted, then awaits the request that `post()` posts, its handle made in place, for at most
/// `timeout` (default: the request's channel's operation timeout). `name` (a string literal)
/// names the call in errors. `looked`: `post()` has looked for the completion once already
/// (CoroutinePost), so co_await does not poll again before the task suspends.
template <typename Post>
AsyncWork await_post(const Channel::Timeout& timeout, const char* name, Post&& post, bool looked) {
  if (timeout && timeout->count() <= 0) [[unlikely]]
    throw_bad_async_timeout(*timeout, name);
  return AsyncWork(PostInPlace{}, std::forward<Post>(post), timeout, name, looked);
}

/// The coroutine calls' post on a Channel: a send-queue request is posted with a first look
/// for its completion (Channel::post_and_look), as a blocking call's is; a receive, whose
/// message is rarely there yet, as Channel::post posts it.
struct CoroutinePost {
  template <bool with_options, op::SendOperation Operation>
  static PendingWork post(Channel& channel, const Operation& operation, PostOptions options) {
    SendRequest request = operation.request(0);
    return channel.post_and_look<with_options>(request, options);
  }
  template <bool with_options>
  static PendingWork post(Channel& channel, const op::Receive& operation,
                          PostOptions /*options: a receive has none*/) {
    return channel.post(operation);
  }
};

/// The AsyncWork of `operation` posted as a coroutine call posts it (CoroutinePost) on the
/// Channel that `channel()` returns once `timeout` has passed its check (a MultiChannel's named
/// calls check their peer there). `with_options`: `options` were given (as
/// Channel::execute_request's); they are signaled (InlineOptions made them).
template <bool with_options = false, op::Operation Operation, typename GetChannel>
AsyncWork await_operation(const Channel::Timeout& timeout, const char* name, GetChannel&& channel,
                          const Operation& operation, PostOptions options = {}) {
  return await_post(
      timeout, name,
      [&] { return CoroutinePost::post<with_options>(channel(), operation, options); },
      op::SendOperation<Operation>);
}

/// async() under the name `operation` (a string literal) in errors.
template <bool with_options = false, op::Operation Operation>
AsyncWork async_post(Channel& channel, const Operation& operation, Channel::Timeout timeout,
                     const char* name, PostOptions options = {}) {
  return await_operation<with_options>(
      timeout, name, [&]() -> Channel& { return channel; }, operation, options);
}
}  // namespace detail

/// Posts `operation` (any of ibv/channel/operation.hpp) on `channel` at once and returns the
/// AsyncWork to co_await. Checked as the blocking Channel::execute() checks (a timeout must be
/// positive; the request is checked against the queue pair), throwing ibv::Error
/// (invalid_argument) before anything is posted. Awaiting it gives the WorkCompletion, or
/// throws ibv::WorkError (failed) or ibv::Error (timeout: no completion within `timeout`,
/// default the channel's operation timeout, counted from the co_await that suspends for it
/// (AsyncWork); the request is cancelled as
/// a blocking call's, which breaks the channel: docs/safety.md, "No orphans"). The request is in
/// flight from the call, not from the co_await: post several, then await them.
template <op::Operation Operation>
AsyncWork async(Channel& channel, const Operation& operation, Channel::Timeout timeout = {}) {
  return detail::async_post(channel, operation, timeout, "ibv::async");
}
/// async() of a send or write posted as `options` say, as Channel::execute(operation, options):
/// a coroutine call waits for its own completion, so it is always signaled (InlineOptions).
template <op::InlineCapable Operation>
AsyncWork async(Channel& channel, const Operation& operation, InlineOptions options,
                Channel::Timeout timeout = {}) {
  return detail::async_post<true>(channel, operation, timeout, "ibv::async",
                                  detail::as_post_options(options));
}

// The operations by name: async() of the operation.
/// Channel::send as a coroutine: async(channel, op::Send{data}).
inline AsyncWork async_send(Channel& channel, std::span<const GatherElement> data,
                            Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::Send{data}, timeout, "ibv::async_send");
}
/// Channel::send_with_immediate as a coroutine.
inline AsyncWork async_send_with_immediate(Channel& channel, std::span<const GatherElement> data,
                                           std::uint32_t immediate, Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::Send{data, immediate}, timeout,
                            "ibv::async_send_with_immediate");
}
/// Receives one message into `into` (empty for immediate-only messages).
inline AsyncWork async_receive(Channel& channel, std::span<const ScatterElement> into,
                               Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::Receive{into}, timeout, "ibv::async_receive");
}
/// Channel::write as a coroutine: async(channel, op::Write{data, destination}).
inline AsyncWork async_write(Channel& channel, std::span<const GatherElement> data,
                             const RemoteMemoryRegion& destination, Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::Write{data, destination}, timeout, "ibv::async_write");
}
/// Channel::write_with_immediate as a coroutine.
inline AsyncWork async_write_with_immediate(Channel& channel, std::span<const GatherElement> data,
                                            const RemoteMemoryRegion& destination,
                                            std::uint32_t immediate,
                                            Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::Write{data, destination, immediate}, timeout,
                            "ibv::async_write_with_immediate");
}
/// Channel::read as a coroutine: async(channel, op::Read{into, source}).
inline AsyncWork async_read(Channel& channel, std::span<const ScatterElement> into,
                            const RemoteMemoryRegion& source, Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::Read{into, source}, timeout, "ibv::async_read");
}
/// Channel::fetch_add as a coroutine: `result` holds the old value once the await returns.
inline AsyncWork async_fetch_add(Channel& channel, const ScatterElement& result,
                                 const RemoteMemoryRegion& target, std::uint64_t add,
                                 Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::FetchAdd{result, target, add}, timeout,
                            "ibv::async_fetch_add");
}
/// Channel::compare_swap as a coroutine: `result` holds the old value once the await returns.
inline AsyncWork async_compare_swap(Channel& channel, const ScatterElement& result,
                                    const RemoteMemoryRegion& target, std::uint64_t expected,
                                    std::uint64_t desired, Channel::Timeout timeout = {}) {
  return detail::async_post(channel, op::CompareSwap{result, target, expected, desired}, timeout,
                            "ibv::async_compare_swap");
}

}  // namespace ibv
