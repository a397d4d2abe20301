// PostOptions: how one request is posted on a Channel (signaled or not, inline or not).
#pragma once

namespace ibv {

/// Per-request posting options of the Channel's unpolled and scoped calls.
struct PostOptions {
  /// false: ask the device for no completion of its own. The channel still knows when the
  /// request is done: a later signaled request on the same channel retires it (RC completes in
  /// order, and a failed request always reports itself), and waiting on it when nothing
  /// signaled follows makes the channel post a zero-length signaled RDMA write to find out.
  /// The channel also signals on its own at least every max_send_wr / 2 requests, so the send
  /// queue can not fill up with requests that nobody will retire. The completion handed to
  /// the request's PendingWork is then made by the channel: success, the opcode, wr_id,
  /// byte_length 0. Receives are always signaled (the option is ignored for them).
  bool signaled = true;
  /// Copy the data into the work request (sends and writes up to the QP's max_inline_data):
  /// the source need not be registered and may be reused once the post returns.
  bool inline_data = false;
};

}  // namespace ibv
