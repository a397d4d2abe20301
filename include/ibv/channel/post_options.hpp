// SPDX-License-Identifier: MIT
// PostOptions: how one request is posted on a Channel (signaled or not, inline or not).
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

/// Per-request posting options of the Channel's unpolled and scoped calls.
struct PostOptions {
  /// false: ask the device for no completion of its own. The channel still knows when the
  /// request is done: a later signaled request on the same channel retires it (RC completes in
  /// order, and a failed request always reports itself), and waiting on it when nothing
  /// signaled follows makes the channel post a zero-length signaled RDMA write to find out.
  /// The channel also signals on its own at least every max_send_wr / 2 requests, so the send
  /// queue can not fill up with requests that nobody will retire. The completion handed to
  /// the request's PendingWork is then made by the channel: success, the opcode, wr_id,
  /// byte_length 0. Receives are always signaled (the option is ignored for them). For a list
  /// (ScopeBase::post_all), true asks for one completion per doorbell, the list's last
  /// request's.
  bool signaled = true;
  /// Inline or not (see InlinePolicy); by default automatic. The blocking and coroutine calls
  /// take options too (Channel::execute(operation, options), ibv::async(channel, operation,
  /// options)); they are always signaled.
  InlinePolicy inline_data = InlinePolicy::automatic;
};

}  // namespace ibv
