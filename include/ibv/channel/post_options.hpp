// SPDX-License-Identifier: MIT
// How one request is posted on a Channel, typed by what can apply to it: PostOptions (signaled
// or not, inline or not) for a send or write that is not waited for; SignalingOptions (signaled
// or not) for a read, an atomic or a mixed list; InlineOptions (inline or not) for a send or write
// that a blocking or coroutine call waits for; ReceiveOptions (nothing) for a receive. An option
// that cannot apply does not compile (op::options_t in operation.hpp picks the type).
#pragma once

#include <cstdint>

namespace ibv {

/// Whether a send or write carries its data inline: copied into the work request when it is
/// posted, instead of read by the device from registered memory afterwards. Small messages save
/// the device a read of host memory (a PCIe round trip on a NIC); the source need not be
/// registered and may be reused as soon as the post returns.
enum class InlinePolicy : std::uint8_t {
  /// Inline when the request may be (a send or write, not a read or atomic) and its data fits
  /// the QP's max_inline_data as the device granted it (QueuePair::max_inline_data). The
  /// element addresses must then be CPU addresses of the data, as they are for every region
  /// registered from a buffer; use `never` for device memory (ProtectionDomain::register_dmabuf).
  automatic,
  /// Always inline: QueuePair::check rejects reads, atomics and data beyond max_inline_data.
  always,
  /// Never inline: the device reads the data from registered memory, which must stay untouched
  /// until the request completes.
  never,
};

/// Posting options of a send or write in the Channel's unpolled and scoped calls.
struct PostOptions {
  /// false: ask the device for no completion of its own. The channel still knows when the
  /// request is done: a later signaled request on the same channel retires it (RC completes in
  /// order, and a failed request always reports itself), and waiting on it when nothing
  /// signaled follows makes the channel post a zero-length signaled RDMA write to find out.
  /// The channel also signals on its own at least every max_send_wr / 2 requests, so the send
  /// queue can not fill up with requests that nobody will retire. The completion handed to
  /// the request's PendingWork is then made by the channel: success, the opcode, wr_id,
  /// byte_length 0. For a list (ScopeBase::post_all), true asks for one completion per
  /// doorbell, the list's last request's.
  bool signaled = true;
  /// Inline or not (see InlinePolicy); by default automatic.
  InlinePolicy inline_data = InlinePolicy::automatic;
};

/// Posting options of a request whose data can not go inline (a read, an atomic) and of a list
/// that mixes operations (op::AnySend), in the unpolled and scoped calls: PostOptions::signaled
/// alone.
struct SignalingOptions {
  /// As PostOptions::signaled.
  bool signaled = true;
};

/// Posting options of a send or write in a blocking or coroutine call, which waits for its own
/// completion and so is always signaled: PostOptions::inline_data alone.
struct InlineOptions {
  /// As PostOptions::inline_data (`never` for device memory, whose addresses are not CPU
  /// addresses; `always` or `never` to match another tool's inline size).
  InlinePolicy inline_data = InlinePolicy::automatic;
};

/// Posting options of a receive: none (a receive is always signaled and never inline). The
/// type exists so that every operation has one, and `{.signaled = false}` on a receive does not
/// compile (test: `OperationOptions.AnOptionThatCannotApplyToThePostDoesNotCompile`).
struct ReceiveOptions {};

namespace detail {
/// The options the channel's one post path takes, from any of the above.
[[nodiscard]] constexpr PostOptions as_post_options(PostOptions options) noexcept {
  return options;
}
[[nodiscard]] constexpr PostOptions as_post_options(SignalingOptions options) noexcept {
  return {.signaled = options.signaled};
}
[[nodiscard]] constexpr PostOptions as_post_options(InlineOptions options) noexcept {
  return {.inline_data = options.inline_data};
}
}  // namespace detail

}  // namespace ibv
