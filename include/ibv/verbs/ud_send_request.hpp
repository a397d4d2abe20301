// SPDX-License-Identifier: MIT
// A send on an unreliable-datagram queue pair: a SendRequest plus its destination (address
// handle, remote QPN, remote Q_Key), holding the address handle alive.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "ibv/verbs/address_handle.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/ud_address.hpp"
#include "ibv/verbs/work_request.hpp"

namespace ibv {

/// A send on a UD queue pair, naming its destination: the address handle (the route), the
/// remote queue pair number and the Q_Key the remote queue pair accepts. Posted by
/// UdQueuePair::post_send, which checks it first (UdQueuePair::check). Like a SendRequest it
/// refers to its elements, which must stay alive until it is posted, and the memory they
/// describe must stay untouched until it completes (unless it is inline).
///
/// It holds a copy of the address handle, so the handle is alive at the post. The device may
/// read the handle until the send completes: the owner of the pending send keeps a copy until
/// then (docs/datagrams.md, "No orphans").
///
///     auto wr = ibv::UdSendRequest::to(1, elements, ah, peer_address).unsignaled();
///     qp.post_send(wr);
class UdSendRequest {
 public:
  /// A send of `data` through `ah` to queue pair `remote_qp_number` with `remote_qkey`,
  /// signaled. Ranges (24-bit QPN, Q_Key bit 31 clear) are checked by UdQueuePair::check.
  [[nodiscard]] static UdSendRequest send(std::uint64_t wr_id, std::span<const GatherElement> data,
                                          AddressHandle ah, std::uint32_t remote_qp_number,
                                          std::uint32_t remote_qkey) noexcept;
  /// send() carrying 32 bits of `immediate` data (host byte order) to the receive completion.
  [[nodiscard]] static UdSendRequest send_with_immediate(
      std::uint64_t wr_id, std::span<const GatherElement> data, AddressHandle ah,
      std::uint32_t remote_qp_number, std::uint32_t remote_qkey, std::uint32_t immediate) noexcept;
  /// send() to the queue pair `destination` names (its QPN and Q_Key) through `ah`, which must
  /// route to it (AddressHandle::to(pd, to)).
  [[nodiscard]] static UdSendRequest to(std::uint64_t wr_id, std::span<const GatherElement> data,
                                        AddressHandle ah, const UdAddress& destination) noexcept {
    return send(wr_id, data, std::move(ah), destination.qp_number, destination.qkey);
  }

  /// No completion unless it fails; as SendRequest::unsignaled (signal one in every
  /// max_send_wr).
  UdSendRequest& unsignaled() noexcept {
    request_.unsignaled();
    return *this;
  }
  /// Copy the data into the work request (up to the QP's max_inline_data): the buffers need
  /// not be registered and may be reused as soon as the post returns.
  UdSendRequest& inline_data() noexcept {
    request_.inline_data();
    return *this;
  }
  /// Ask the receiver's completion channel to wake up for this datagram.
  UdSendRequest& solicited() noexcept {
    request_.solicited();
    return *this;
  }

  /// The send itself (opcode, wr_id, flags, elements).
  [[nodiscard]] const SendRequest& request() const noexcept { return request_; }
  /// The caller's identifier, returned in the completion.
  [[nodiscard]] std::uint64_t wr_id() const noexcept { return request_.wr_id(); }
  /// Total bytes the datagram carries.
  [[nodiscard]] std::uint64_t byte_length() const noexcept { return request_.byte_length(); }
  /// The address handle it goes through.
  [[nodiscard]] const AddressHandle& address_handle() const noexcept { return ah_; }
  /// The destination queue pair number.
  [[nodiscard]] std::uint32_t remote_qp_number() const noexcept {
    return request_.native().wr.ud.remote_qpn;
  }
  /// The Q_Key it is sent with.
  [[nodiscard]] std::uint32_t remote_qkey() const noexcept {
    return request_.native().wr.ud.remote_qkey;
  }
  /// The verbs request, with wr.ud set; its `next` is set when posting a list.
  [[nodiscard]] ibv_send_wr& native() noexcept { return request_.native(); }
  /// The verbs request, read-only.
  [[nodiscard]] const ibv_send_wr& native() const noexcept { return request_.native(); }

 private:
  UdSendRequest(SendRequest request, AddressHandle ah, std::uint32_t remote_qp_number,
                std::uint32_t remote_qkey) noexcept
      : request_(request), ah_(std::move(ah)) {
    // wr.ud shares its union with wr.rdma, which SendRequest zeroed: set after it.
    ibv_send_wr& wr = request_.native();
    wr.wr.ud.ah = ah_.native();
    wr.wr.ud.remote_qpn = remote_qp_number;
    wr.wr.ud.remote_qkey = remote_qkey;
  }

  SendRequest request_;
  AddressHandle ah_;
};

inline UdSendRequest UdSendRequest::send(std::uint64_t wr_id, std::span<const GatherElement> data,
                                         AddressHandle ah, std::uint32_t remote_qp_number,
                                         std::uint32_t remote_qkey) noexcept {
  return {SendRequest::send(wr_id, data), std::move(ah), remote_qp_number, remote_qkey};
}

inline UdSendRequest UdSendRequest::send_with_immediate(
    std::uint64_t wr_id, std::span<const GatherElement> data, AddressHandle ah,
    std::uint32_t remote_qp_number, std::uint32_t remote_qkey, std::uint32_t immediate) noexcept {
  return {SendRequest::send_with_immediate(wr_id, data, immediate), std::move(ah), remote_qp_number,
          remote_qkey};
}

}  // namespace ibv
