// SPDX-License-Identifier: MIT
// Work requests: what a queue pair is asked to do (send, RDMA write, RDMA read, atomics,
// receive), built as values and posted without allocation.
#pragma once

#include <infiniband/verbs.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>

#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

/// What a send-queue work request does.
enum class SendOpcode : std::uint8_t {
  send,                 ///< Two-sided: consumes a receive posted by the peer.
  send_with_immediate,  ///< Send carrying 32 bits of immediate data to the receive completion.
  rdma_write,           ///< One-sided write into the peer's remote region.
  rdma_write_with_immediate,  ///< Write that also consumes a peer receive, which gets the
                              ///< immediate.
  rdma_read,                  ///< One-sided read from the peer's remote region.
  atomic_fetch_and_add,       ///< Adds to an 8-byte remote word; returns its old value.
  atomic_compare_and_swap,    ///< Replaces an 8-byte remote word if it equals the expected
                              ///< value; returns its old value either way.
};

/// Whether `opcode` is one of the two atomics.
[[nodiscard]] constexpr bool is_atomic(SendOpcode opcode) noexcept {
  return opcode == SendOpcode::atomic_fetch_and_add ||
         opcode == SendOpcode::atomic_compare_and_swap;
}
/// Whether a request of `opcode` has a remote region: writes, reads and atomics (the opcodes
/// from rdma_write on), not sends.
[[nodiscard]] constexpr bool has_remote_region(SendOpcode opcode) noexcept {
  return opcode >= SendOpcode::rdma_write;
}
/// Whether a request of `opcode` may carry its data inline: sends and writes (the opcodes
/// declared before rdma_read), not reads or atomics, whose local memory is written.
[[nodiscard]] constexpr bool may_be_inline(SendOpcode opcode) noexcept {
  return opcode < SendOpcode::rdma_read;
}

/// Size of the word an atomic operates on, and of its local result buffer.
inline constexpr std::uint32_t kAtomicWordSize = 8;

/// Everything the library knows of one SendOpcode, in one table (send_opcode_traits): adding
/// an opcode means adding its row, its named constructor below and its operation type
/// (ibv/channel/operation.hpp), and nothing else.
struct SendOpcodeTraits {
  ibv_wr_opcode native;        ///< what the device is asked to do
  WorkOpcode completion;       ///< the opcode of the request's completion
  std::string_view name;       ///< the enumerator's name, for to_string()
  std::string_view operation;  ///< the name a Channel's messages use ("write", "fetch_add")
};

/// The row of `opcode` in the opcode table.
[[nodiscard]] constexpr SendOpcodeTraits send_opcode_traits(SendOpcode opcode) noexcept {
  switch (opcode) {
    case SendOpcode::send: return {IBV_WR_SEND, WorkOpcode::send, "send", "send"};
    case SendOpcode::send_with_immediate:
      return {IBV_WR_SEND_WITH_IMM, WorkOpcode::send, "send_with_immediate", "send_with_immediate"};
    case SendOpcode::rdma_write:
      return {IBV_WR_RDMA_WRITE, WorkOpcode::rdma_write, "rdma_write", "write"};
    case SendOpcode::rdma_write_with_immediate:
      return {IBV_WR_RDMA_WRITE_WITH_IMM, WorkOpcode::rdma_write, "rdma_write_with_immediate",
              "write_with_immediate"};
    case SendOpcode::rdma_read:
      return {IBV_WR_RDMA_READ, WorkOpcode::rdma_read, "rdma_read", "read"};
    case SendOpcode::atomic_fetch_and_add:
      return {IBV_WR_ATOMIC_FETCH_AND_ADD, WorkOpcode::fetch_and_add, "atomic_fetch_and_add",
              "fetch_add"};
    case SendOpcode::atomic_compare_and_swap:
      return {IBV_WR_ATOMIC_CMP_AND_SWP, WorkOpcode::compare_and_swap, "atomic_compare_and_swap",
              "compare_swap"};
  }
  return {IBV_WR_SEND, WorkOpcode::send, "unknown", "post"};  // not an enumerator
}

/// The enumerator's name: "send", "rdma_write_with_immediate", "atomic_fetch_and_add", ...
[[nodiscard]] constexpr std::string_view to_string(SendOpcode opcode) noexcept {
  return send_opcode_traits(opcode).name;
}

/// A send-queue work request. Made with the named constructors, adjusted with the flag setters,
/// posted by QueuePair::post_send. It refers to its elements (the span passed in), which must
/// stay alive until it is posted; the device copies them when the request is posted, but the
/// memory they describe must stay untouched until the request completes.
///
///     auto wr = ibv::SendRequest::write(7, elements, remote).unsignaled();
class SendRequest {
 public:
  /// A send of `data` into the peer's next receive, signaled.
  [[nodiscard]] static SendRequest send(std::uint64_t wr_id,
                                        std::span<const GatherElement> data) noexcept;
  /// `immediate` in host byte order; the receiver sees the same value.
  [[nodiscard]] static SendRequest send_with_immediate(std::uint64_t wr_id,
                                                       std::span<const GatherElement> data,
                                                       std::uint32_t immediate) noexcept;
  /// An RDMA write of `data` to the start of `destination`, signaled.
  [[nodiscard]] static SendRequest write(std::uint64_t wr_id, std::span<const GatherElement> data,
                                         const RemoteMemoryRegion& destination) noexcept;
  /// write() that also consumes a receive of the peer, completing it with `immediate`.
  [[nodiscard]] static SendRequest write_with_immediate(std::uint64_t wr_id,
                                                        std::span<const GatherElement> data,
                                                        const RemoteMemoryRegion& destination,
                                                        std::uint32_t immediate) noexcept;
  /// An RDMA read from the start of `source` into `into`, signaled.
  [[nodiscard]] static SendRequest read(std::uint64_t wr_id, std::span<const ScatterElement> into,
                                        const RemoteMemoryRegion& source) noexcept;
  /// Atomically adds `add` to the 8-byte word at the start of `target` and writes the word's
  /// old value into `result` (8 bytes of registered memory). `result` is referred to, like the
  /// spans of the other requests: it must stay alive until the request is posted. Values are in
  /// host byte order (see Channel::fetch_add for the result's). QueuePair::check rejects
  /// misaligned or short targets, a result that is not 8 bytes, and devices without atomics.
  [[nodiscard]] static SendRequest fetch_add(std::uint64_t wr_id, const ScatterElement& result,
                                             const RemoteMemoryRegion& target,
                                             std::uint64_t add) noexcept;
  /// Atomically replaces the 8-byte word at the start of `target` with `desired` if it equals
  /// `expected`, and writes the word's old value into `result` either way (so the swap
  /// happened iff the result equals `expected`). Otherwise as fetch_add().
  [[nodiscard]] static SendRequest compare_swap(std::uint64_t wr_id, const ScatterElement& result,
                                                const RemoteMemoryRegion& target,
                                                std::uint64_t expected,
                                                std::uint64_t desired) noexcept;

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

  /// What the request does.
  [[nodiscard]] SendOpcode opcode() const noexcept { return opcode_; }
  /// The caller's identifier, returned in the request's completion.
  [[nodiscard]] std::uint64_t wr_id() const noexcept { return wr_.wr_id; }
  /// Whether it makes a completion on success (see unsignaled()).
  [[nodiscard]] bool is_signaled() const noexcept {
    return (wr_.send_flags & IBV_SEND_SIGNALED) != 0;
  }
  /// Whether its data goes inline (see inline_data()).
  [[nodiscard]] bool is_inline() const noexcept { return (wr_.send_flags & IBV_SEND_INLINE) != 0; }
  /// Number of scatter/gather elements.
  [[nodiscard]] std::size_t element_count() const noexcept {
    return static_cast<std::size_t>(wr_.num_sge);
  }
  /// Total bytes the request moves.
  [[nodiscard]] std::uint64_t byte_length() const noexcept { return length_; }
  /// The remote region of a write, read or atomic (nullopt for a send), with the rights it was
  /// known to have. Rebuilt from the work request: a request keeps only what a post needs.
  [[nodiscard]] std::optional<RemoteMemoryRegion> remote() const;
  /// The rights the remote region was known to have (RemoteMemoryRegion::access()).
  [[nodiscard]] const std::optional<RemoteAccess>& remote_access() const noexcept {
    return remote_access_;
  }
  /// The most bytes the request may move by its remote region: the region's length, or the
  /// largest value when it has none (a send). One compare in the post path's checks.
  [[nodiscard]] std::uint64_t remote_limit() const noexcept { return remote_limit_; }

  /// The verbs request; its `next` is set by QueuePair::post_send when posting a batch. The
  /// parts of its unions that this opcode and an RC queue pair do not use are not set.
  [[nodiscard]] ibv_send_wr& native() noexcept { return wr_; }
  /// The verbs request, read-only.
  [[nodiscard]] const ibv_send_wr& native() const noexcept { return wr_; }

 private:
  SendRequest(std::uint64_t wr_id, SendOpcode opcode, const ibv_sge* elements, std::size_t count,
              std::uint64_t length) noexcept;
  void set_remote(const RemoteMemoryRegion& remote) noexcept;
  void set_immediate(std::uint32_t immediate) noexcept;
  void set_atomic(const RemoteMemoryRegion& target, std::uint64_t compare_add,
                  std::uint64_t swap) noexcept;
  // Not zeroed as a whole (128 bytes on every post): the constructor sets every field a
  // provider reads for this library's RC opcodes (and wr.rdma for all); the unions' parts for
  // other QP types and opcodes (UD, XRC, memory-window binds, TSO) stay unset.
  ibv_send_wr wr_;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  SendOpcode opcode_;
  std::uint64_t length_ = 0;
  // The remote region's length (its address and rkey are in wr_), and its known rights.
  std::uint64_t remote_limit_ = std::numeric_limits<std::uint64_t>::max();
  std::optional<RemoteAccess> remote_access_;
};

/// A receive-queue work request: where the next incoming send (or write with immediate) lands.
class ReceiveRequest {
 public:
  /// Receive into `into` (may be empty for messages that carry only immediate data).
  ReceiveRequest(std::uint64_t wr_id, std::span<const ScatterElement> into) noexcept;

  /// The caller's identifier, returned in the receive's completion.
  [[nodiscard]] std::uint64_t wr_id() const noexcept { return wr_.wr_id; }
  /// Number of scatter elements.
  [[nodiscard]] std::size_t element_count() const noexcept {
    return static_cast<std::size_t>(wr_.num_sge);
  }
  /// Total bytes it can take: the longest message it fits.
  [[nodiscard]] std::uint64_t byte_length() const noexcept { return length_; }
  /// The verbs request; its `next` is set by QueuePair::post_receive when posting a batch.
  [[nodiscard]] ibv_recv_wr& native() noexcept { return wr_; }
  /// The verbs request, read-only.
  [[nodiscard]] const ibv_recv_wr& native() const noexcept { return wr_; }

 private:
  ibv_recv_wr wr_{};
  std::uint64_t length_ = 0;
};

// The definitions are here, not in a source file, so that a request is built in place in the
// caller's frame (the hot path: see bench/hot_path/notes.md).

namespace detail {
/// A span of GatherElement / ScatterElement as the ibv_sge array it is (both are standard-layout
/// wrappers of one ibv_sge). ibv_post_send/recv only read sg_list, hence the const_cast.
template <typename Element>
[[nodiscard]] inline ibv_sge* sge_array(std::span<const Element> elements) noexcept {
  if (elements.empty()) return nullptr;  // data() may be null: no element to take apart
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast)
  return const_cast<ibv_sge*>(&elements.front().native());
}
/// `value` in network byte order (the wire carries immediates big-endian).
[[nodiscard]] constexpr std::uint32_t to_network_order(std::uint32_t value) noexcept {
  if constexpr (std::endian::native == std::endian::little) return __builtin_bswap32(value);
  return value;
}
}  // namespace detail

// NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init): sets the fields of wr_ a post reads
inline SendRequest::SendRequest(std::uint64_t wr_id, SendOpcode opcode, const ibv_sge* elements,
                                std::size_t count, std::uint64_t length) noexcept
    : opcode_(opcode), length_(length) {
  wr_.wr_id = wr_id;
  wr_.next = nullptr;
  wr_.sg_list = const_cast<ibv_sge*>(elements);  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  wr_.num_sge = static_cast<int>(count);
  wr_.opcode = send_opcode_traits(opcode).native;
  wr_.send_flags = IBV_SEND_SIGNALED;
  wr_.imm_data = 0;
  wr_.wr.rdma.remote_addr = 0;
  wr_.wr.rdma.rkey = 0;
}

inline SendRequest SendRequest::send(std::uint64_t wr_id,
                                     std::span<const GatherElement> data) noexcept {
  return {wr_id, SendOpcode::send, detail::sge_array(data), data.size(), total_length(data)};
}

inline SendRequest SendRequest::send_with_immediate(std::uint64_t wr_id,
                                                    std::span<const GatherElement> data,
                                                    std::uint32_t immediate) noexcept {
  SendRequest request(wr_id, SendOpcode::send_with_immediate, detail::sge_array(data), data.size(),
                      total_length(data));
  request.set_immediate(immediate);
  return request;
}

inline SendRequest SendRequest::write(std::uint64_t wr_id, std::span<const GatherElement> data,
                                      const RemoteMemoryRegion& destination) noexcept {
  SendRequest request(wr_id, SendOpcode::rdma_write, detail::sge_array(data), data.size(),
                      total_length(data));
  request.set_remote(destination);
  return request;
}

inline SendRequest SendRequest::write_with_immediate(std::uint64_t wr_id,
                                                     std::span<const GatherElement> data,
                                                     const RemoteMemoryRegion& destination,
                                                     std::uint32_t immediate) noexcept {
  SendRequest request(wr_id, SendOpcode::rdma_write_with_immediate, detail::sge_array(data),
                      data.size(), total_length(data));
  request.set_remote(destination);
  request.set_immediate(immediate);
  return request;
}

inline SendRequest SendRequest::read(std::uint64_t wr_id, std::span<const ScatterElement> into,
                                     const RemoteMemoryRegion& source) noexcept {
  SendRequest request(wr_id, SendOpcode::rdma_read, detail::sge_array(into), into.size(),
                      total_length(into));
  request.set_remote(source);
  return request;
}

inline SendRequest SendRequest::fetch_add(std::uint64_t wr_id, const ScatterElement& result,
                                          const RemoteMemoryRegion& target,
                                          std::uint64_t add) noexcept {
  SendRequest request(wr_id, SendOpcode::atomic_fetch_and_add, &result.native(), 1,
                      result.length());
  request.set_atomic(target, add, 0);
  return request;
}

inline SendRequest SendRequest::compare_swap(std::uint64_t wr_id, const ScatterElement& result,
                                             const RemoteMemoryRegion& target,
                                             std::uint64_t expected,
                                             std::uint64_t desired) noexcept {
  SendRequest request(wr_id, SendOpcode::atomic_compare_and_swap, &result.native(), 1,
                      result.length());
  request.set_atomic(target, expected, desired);
  return request;
}

inline void SendRequest::set_atomic(const RemoteMemoryRegion& target, std::uint64_t compare_add,
                                    std::uint64_t swap) noexcept {
  // Host byte order: the provider puts them on the wire big-endian.
  wr_.wr.atomic.remote_addr = target.address();
  wr_.wr.atomic.rkey = target.rkey();
  wr_.wr.atomic.compare_add = compare_add;
  wr_.wr.atomic.swap = swap;
  remote_limit_ = target.length();
  remote_access_ = target.access();
}

inline void SendRequest::set_remote(const RemoteMemoryRegion& remote) noexcept {
  wr_.wr.rdma.remote_addr = remote.address();
  wr_.wr.rdma.rkey = remote.rkey();
  remote_limit_ = remote.length();
  remote_access_ = remote.access();
}

inline std::optional<RemoteMemoryRegion> SendRequest::remote() const {
  if (!has_remote_region(opcode_)) return std::nullopt;
  const bool atomic = is_atomic(opcode_);
  // A region that was whole when the request was made: address + length does not overflow.
  RemoteMemoryRegion region(atomic ? wr_.wr.atomic.remote_addr : wr_.wr.rdma.remote_addr,
                            remote_limit_, atomic ? wr_.wr.atomic.rkey : wr_.wr.rdma.rkey);
  if (remote_access_) region = region.with_access(*remote_access_);
  return region;
}

inline void SendRequest::set_immediate(std::uint32_t immediate) noexcept {
  wr_.imm_data = detail::to_network_order(immediate);
}

inline SendRequest& SendRequest::unsignaled() noexcept {
  wr_.send_flags &= ~static_cast<unsigned>(IBV_SEND_SIGNALED);
  return *this;
}
inline SendRequest& SendRequest::inline_data() noexcept {
  wr_.send_flags |= IBV_SEND_INLINE;
  return *this;
}
inline SendRequest& SendRequest::fence() noexcept {
  wr_.send_flags |= IBV_SEND_FENCE;
  return *this;
}
inline SendRequest& SendRequest::solicited() noexcept {
  wr_.send_flags |= IBV_SEND_SOLICITED;
  return *this;
}

inline ReceiveRequest::ReceiveRequest(std::uint64_t wr_id,
                                      std::span<const ScatterElement> into) noexcept
    : length_(total_length(into)) {
  wr_.wr_id = wr_id;
  wr_.sg_list = detail::sge_array(into);
  wr_.num_sge = static_cast<int>(into.size());
}

}  // namespace ibv
