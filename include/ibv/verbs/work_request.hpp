// Work requests: what a queue pair is asked to do (send, RDMA write, RDMA read, receive), built
// as values and posted without allocation.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"

namespace ibv {

/// What a send-queue work request does.
enum class SendOpcode : std::uint8_t {
  send,                 ///< Two-sided: consumes a receive posted by the peer.
  send_with_immediate,  ///< Send carrying 32 bits of immediate data to the receive completion.
  rdma_write,           ///< One-sided write into the peer's remote region.
  rdma_write_with_immediate,  ///< Write that also consumes a peer receive, which gets the
                              ///< immediate.
  rdma_read,                  ///< One-sided read from the peer's remote region.
};

[[nodiscard]] std::string_view to_string(SendOpcode opcode) noexcept;

/// A send-queue work request. Made with the named constructors, adjusted with the flag setters,
/// posted by QueuePair::post_send. It refers to its elements (the span passed in), which must
/// stay alive until it is posted; the device copies them when the request is posted, but the
/// memory they describe must stay untouched until the request completes.
///
///     auto wr = ibv::SendRequest::write(7, elements, remote).unsignaled();
class SendRequest {
 public:
  [[nodiscard]] static SendRequest send(std::uint64_t wr_id,
                                        std::span<const GatherElement> data) noexcept;
  /// `immediate` in host byte order; the receiver sees the same value.
  [[nodiscard]] static SendRequest send_with_immediate(std::uint64_t wr_id,
                                                       std::span<const GatherElement> data,
                                                       std::uint32_t immediate) noexcept;
  [[nodiscard]] static SendRequest write(std::uint64_t wr_id, std::span<const GatherElement> data,
                                         const RemoteMemoryRegion& destination) noexcept;
  [[nodiscard]] static SendRequest write_with_immediate(std::uint64_t wr_id,
                                                        std::span<const GatherElement> data,
                                                        const RemoteMemoryRegion& destination,
                                                        std::uint32_t immediate) noexcept;
  [[nodiscard]] static SendRequest read(std::uint64_t wr_id, std::span<const ScatterElement> into,
                                        const RemoteMemoryRegion& source) noexcept;

  /// No completion unless it fails (requests are signaled by default). The caller must still
  /// signal at least one request in every max_send_wr: the send queue frees the entries of
  /// unsignaled requests only when a later signaled one completes.
  SendRequest& unsignaled() noexcept;
  /// Copy the data into the work request (sends and writes, up to the QP's max_inline_data);
  /// the buffers need not be registered and may be reused as soon as the post returns.
  SendRequest& inline_data() noexcept;
  /// Wait for earlier RDMA reads and atomics on this QP to complete before this one starts.
  SendRequest& fence() noexcept;
  /// Ask the receiver's completion channel to wake up for this message.
  SendRequest& solicited() noexcept;

  [[nodiscard]] SendOpcode opcode() const noexcept { return opcode_; }
  [[nodiscard]] std::uint64_t wr_id() const noexcept { return wr_.wr_id; }
  [[nodiscard]] bool is_signaled() const noexcept {
    return (wr_.send_flags & IBV_SEND_SIGNALED) != 0;
  }
  [[nodiscard]] bool is_inline() const noexcept { return (wr_.send_flags & IBV_SEND_INLINE) != 0; }
  /// Number of scatter/gather elements.
  [[nodiscard]] std::size_t element_count() const noexcept {
    return static_cast<std::size_t>(wr_.num_sge);
  }
  /// Total bytes the request moves.
  [[nodiscard]] std::uint64_t byte_length() const noexcept { return length_; }
  /// The remote region of a write or read.
  [[nodiscard]] const std::optional<RemoteMemoryRegion>& remote() const noexcept { return remote_; }

  /// The verbs request; its `next` is set by QueuePair::post_send when posting a batch.
  [[nodiscard]] ibv_send_wr& native() noexcept { return wr_; }
  [[nodiscard]] const ibv_send_wr& native() const noexcept { return wr_; }

 private:
  SendRequest(std::uint64_t wr_id, SendOpcode opcode, const ibv_sge* elements, std::size_t count,
              std::uint64_t length) noexcept;
  void set_remote(const RemoteMemoryRegion& remote) noexcept;
  void set_immediate(std::uint32_t immediate) noexcept;
  ibv_send_wr wr_{};
  SendOpcode opcode_;
  std::uint64_t length_ = 0;
  std::optional<RemoteMemoryRegion> remote_;
};

/// A receive-queue work request: where the next incoming send (or write with immediate) lands.
class ReceiveRequest {
 public:
  /// Receive into `into` (may be empty for messages that carry only immediate data).
  ReceiveRequest(std::uint64_t wr_id, std::span<const ScatterElement> into) noexcept;

  [[nodiscard]] std::uint64_t wr_id() const noexcept { return wr_.wr_id; }
  [[nodiscard]] std::size_t element_count() const noexcept {
    return static_cast<std::size_t>(wr_.num_sge);
  }
  [[nodiscard]] std::uint64_t byte_length() const noexcept { return length_; }
  [[nodiscard]] ibv_recv_wr& native() noexcept { return wr_; }
  [[nodiscard]] const ibv_recv_wr& native() const noexcept { return wr_; }

 private:
  ibv_recv_wr wr_{};
  std::uint64_t length_ = 0;
};

}  // namespace ibv
