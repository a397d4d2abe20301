// SPDX-License-Identifier: MIT
// The coroutine form of the Channel's operations: async(channel, operation) posts one request at
// once and returns the AsyncWork to co_await in an ibv::Task.
//
//   ibv::Task<> pinger(ibv::Channel& channel, std::span<const ibv::GatherElement> message) {
//     ibv::WorkCompletion done = co_await ibv::async(channel, ibv::op::Send{message});
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

/// async() under the name `name` (a string literal) in errors: `operation` posted as a
/// coroutine call posts it (CoroutinePost). `with_options`: `options` were given (as
/// Channel::execute_request's); they are signaled (InlineOptions made them).
template <bool with_options = false, op::Operation Operation>
AsyncWork async_post(Channel& channel, const Operation& operation, Channel::Timeout timeout,
                     const char* name, PostOptions options = {}) {
  return await_post(
      timeout, name, [&] { return CoroutinePost::post<with_options>(channel, operation, options); },
      op::SendOperation<Operation>);
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

}  // namespace ibv
