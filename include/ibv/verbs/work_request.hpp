// SPDX-License-Identifier: MIT
// Work requests: what a queue pair is asked to do (send, RDMA write, RDMA read, atomics,
// receive), built as values and posted without allocation.
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>

#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

/// What a send-queue work request does. The enumerators count up from 0 without gaps (the
/// opcode table and the masks derived from it are indexed by them); a new one gets its row in
/// visit_send_opcode() below, which -Wswitch insists on.
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

/// Size of the word an atomic operates on, and of its local result buffer.
inline constexpr std::uint32_t kAtomicWordSize = 8;

/// Where a request keeps its remote region in the verbs request: none (a send), wr.rdma
/// (writes, reads) or wr.atomic (fetch-and-add, compare-and-swap).
enum class RemoteFields : std::uint8_t { none, rdma, atomic };

/// Everything the library knows of one SendOpcode: its row in the opcode table
/// (visit_send_opcode). The post paths, the checks, the masks and the names in messages all
/// read it, so adding an opcode means its enumerator, its row and its SendRequest factory (this
/// file), its operation type (ibv/channel/operation.hpp) and, for a new completion opcode, its
/// WorkOpcode (ibv/verbs/work_completion.hpp).
struct SendOpcodeTraits {
  ibv_wr_opcode native;        ///< what the device is asked to do
  WorkOpcode completion;       ///< the opcode of the request's completion
  std::string_view name;       ///< the enumerator's name, for to_string()
  std::string_view operation;  ///< the name a Channel's messages use ("write", "fetch_add")
  std::string_view kind;       ///< what messages call it ("an RDMA read", "an atomic")
  RemoteFields remote = RemoteFields::none;  ///< where its remote region is kept
  std::string_view region = {};  ///< what messages call its remote region ("destination")
  bool atomic = false;           ///< an 8-byte word operation: the checks of atomics apply
  bool may_be_inline = false;    ///< its data may go inline (sends and writes)
  /// Whether the extended post interface takes its data (its element, or inline) after the
  /// opcode's ibv_wr_* call, as ibv_wr_set_sge / ibv_wr_set_inline_data.
  bool extended_data = true;
};

namespace detail {
/// The put of a value that is no enumerator: nothing.
struct NoPut {
  void operator()(ibv_qp_ex* /*qpx*/, const ibv_send_wr& /*wr*/) const noexcept {}
};
}  // namespace detail

/// Calls `visit(traits, put)` with the row of `opcode` in the opcode table: its traits and
/// `put(ibv_qp_ex*, const ibv_send_wr&)`, the ibv_wr_* call of the extended post interface
/// that starts a request of that opcode with the operands it uses. The one switch over the
/// opcodes: everything else derives from it (send_opcode_traits, the masks, the extended post,
/// which inlines to the switch it was before). A value that is no enumerator gets a row named
/// "unknown" whose put (detail::NoPut) does nothing.
template <typename Visitor>
[[gnu::always_inline]] constexpr decltype(auto) visit_send_opcode(SendOpcode opcode,
                                                                  Visitor&& visit) {
  switch (opcode) {
    case SendOpcode::send:
      return visit(SendOpcodeTraits{.native = IBV_WR_SEND,
                                    .completion = WorkOpcode::send,
                                    .name = "send",
                                    .operation = "send",
                                    .kind = "a send",
                                    .may_be_inline = true},
                   [](ibv_qp_ex* qpx, const ibv_send_wr&) { ibv_wr_send(qpx); });
    case SendOpcode::send_with_immediate:
      return visit(
          SendOpcodeTraits{.native = IBV_WR_SEND_WITH_IMM,
                           .completion = WorkOpcode::send,
                           .name = "send_with_immediate",
                           .operation = "send_with_immediate",
                           .kind = "a send with immediate",
                           .may_be_inline = true},
          [](ibv_qp_ex* qpx, const ibv_send_wr& wr) { ibv_wr_send_imm(qpx, wr.imm_data); });
    case SendOpcode::rdma_write:
      return visit(SendOpcodeTraits{.native = IBV_WR_RDMA_WRITE,
                                    .completion = WorkOpcode::rdma_write,
                                    .name = "rdma_write",
                                    .operation = "write",
                                    .kind = "an RDMA write",
                                    .remote = RemoteFields::rdma,
                                    .region = "destination",
                                    .may_be_inline = true},
                   [](ibv_qp_ex* qpx, const ibv_send_wr& wr) {
                     ibv_wr_rdma_write(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr);
                   });
    case SendOpcode::rdma_write_with_immediate:
      return visit(SendOpcodeTraits{.native = IBV_WR_RDMA_WRITE_WITH_IMM,
                                    .completion = WorkOpcode::rdma_write,
                                    .name = "rdma_write_with_immediate",
                                    .operation = "write_with_immediate",
                                    .kind = "an RDMA write with immediate",
                                    .remote = RemoteFields::rdma,
                                    .region = "destination",
                                    .may_be_inline = true},
                   [](ibv_qp_ex* qpx, const ibv_send_wr& wr) {
                     ibv_wr_rdma_write_imm(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr,
                                           wr.imm_data);
                   });
    case SendOpcode::rdma_read:
      return visit(SendOpcodeTraits{.native = IBV_WR_RDMA_READ,
                                    .completion = WorkOpcode::rdma_read,
                                    .name = "rdma_read",
                                    .operation = "read",
                                    .kind = "an RDMA read",
                                    .remote = RemoteFields::rdma,
                                    .region = "source"},
                   [](ibv_qp_ex* qpx, const ibv_send_wr& wr) {
                     ibv_wr_rdma_read(qpx, wr.wr.rdma.rkey, wr.wr.rdma.remote_addr);
                   });
    case SendOpcode::atomic_fetch_and_add:
      return visit(SendOpcodeTraits{.native = IBV_WR_ATOMIC_FETCH_AND_ADD,
                                    .completion = WorkOpcode::fetch_and_add,
                                    .name = "atomic_fetch_and_add",
                                    .operation = "fetch_add",
                                    .kind = "an atomic",
                                    .remote = RemoteFields::atomic,
                                    .region = "target",
                                    .atomic = true},
                   [](ibv_qp_ex* qpx, const ibv_send_wr& wr) {
                     ibv_wr_atomic_fetch_add(qpx, wr.wr.atomic.rkey, wr.wr.atomic.remote_addr,
                                             wr.wr.atomic.compare_add);
                   });
    case SendOpcode::atomic_compare_and_swap:
      return visit(SendOpcodeTraits{.native = IBV_WR_ATOMIC_CMP_AND_SWP,
                                    .completion = WorkOpcode::compare_and_swap,
                                    .name = "atomic_compare_and_swap",
                                    .operation = "compare_swap",
                                    .kind = "an atomic",
                                    .remote = RemoteFields::atomic,
                                    .region = "target",
                                    .atomic = true},
                   [](ibv_qp_ex* qpx, const ibv_send_wr& wr) {
                     ibv_wr_atomic_cmp_swp(qpx, wr.wr.atomic.rkey, wr.wr.atomic.remote_addr,
                                           wr.wr.atomic.compare_add, wr.wr.atomic.swap);
                   });
  }
  return visit(SendOpcodeTraits{.native = IBV_WR_SEND,
                                .completion = WorkOpcode::send,
                                .name = "unknown",
                                .operation = "post",
                                .kind = "an unknown opcode",
                                .extended_data = false},
               detail::NoPut{});
}

/// How many opcodes the table has: the enumerators, from 0 up to the first value without a row.
inline constexpr unsigned kSendOpcodeCount = [] {
  const auto has_row = [](unsigned code) {
    return visit_send_opcode(static_cast<SendOpcode>(code), [](const SendOpcodeTraits&, auto put) {
      return !std::is_same_v<decltype(put), detail::NoPut>;
    });
  };
  unsigned count = 0;
  while (has_row(count)) ++count;
  return count;
}();

namespace detail {
/// The traits of every row, by opcode, and last the "unknown" row: send_opcode_traits() is a
/// load, not the switch.
inline constexpr auto kSendOpcodeTraits = [] {
  std::array<SendOpcodeTraits, kSendOpcodeCount + 1> rows{};
  for (unsigned code = 0; code <= kSendOpcodeCount; ++code) {
    rows[code] = visit_send_opcode(static_cast<SendOpcode>(code),
                                   [](const SendOpcodeTraits& traits, auto) { return traits; });
  }
  return rows;
}();
}  // namespace detail

/// The row of `opcode` in the opcode table (the "unknown" row for a value that is no
/// enumerator).
[[nodiscard]] constexpr const SendOpcodeTraits& send_opcode_traits(SendOpcode opcode) noexcept {
  const auto code = static_cast<unsigned>(opcode);
  return detail::kSendOpcodeTraits[code < kSendOpcodeCount ? code : kSendOpcodeCount];
}

namespace detail {
/// Bit `opcode` set for each opcode whose row says `field` (or, with `remote`, has a remote
/// region).
[[nodiscard]] constexpr std::uint64_t send_opcode_mask(bool SendOpcodeTraits::*field,
                                                       bool remote = false) noexcept {
  std::uint64_t mask = 0;
  for (unsigned code = 0; code < kSendOpcodeCount; ++code) {
    const SendOpcodeTraits& traits = send_opcode_traits(static_cast<SendOpcode>(code));
    if (remote ? traits.remote != RemoteFields::none : traits.*field) {
      mask |= std::uint64_t{1} << code;
    }
  }
  return mask;
}
static_assert(kSendOpcodeCount <= 64, "the opcode masks have a bit per opcode");
/// The opcodes that are atomics, that may be inline and that have a remote region (bit
/// `opcode`).
inline constexpr std::uint64_t kAtomicOpcodes = send_opcode_mask(&SendOpcodeTraits::atomic);
inline constexpr std::uint64_t kInlineOpcodes = send_opcode_mask(&SendOpcodeTraits::may_be_inline);
inline constexpr std::uint64_t kRemoteOpcodes = send_opcode_mask(nullptr, true);

/// Whether bit `opcode` of `Mask` is set. One compare when the set bits are a run (the
/// enumerators are ordered so that they are: the predicates below are asked on every post),
/// else a shift and a mask.
template <std::uint64_t Mask>
[[nodiscard]] constexpr bool in_opcode_set(SendOpcode opcode) noexcept {
  const auto code = static_cast<unsigned>(opcode);
  if constexpr (Mask == 0) {
    return false;
  } else if constexpr (constexpr std::uint64_t run = Mask >> std::countr_zero(Mask);
                       (run & (run + 1)) == 0) {
    return code - static_cast<unsigned>(std::countr_zero(Mask)) <
           static_cast<unsigned>(std::popcount(Mask));
  } else {
    return ((Mask >> code) & 1U) != 0;
  }
}
}  // namespace detail

/// Whether `opcode` is an atomic (its row's `atomic`).
[[nodiscard]] constexpr bool is_atomic(SendOpcode opcode) noexcept {
  return detail::in_opcode_set<detail::kAtomicOpcodes>(opcode);
}
/// Whether a request of `opcode` has a remote region: writes, reads and atomics, not sends.
[[nodiscard]] constexpr bool has_remote_region(SendOpcode opcode) noexcept {
  return detail::in_opcode_set<detail::kRemoteOpcodes>(opcode);
}
/// Whether a request of `opcode` may carry its data inline (its row's `may_be_inline`): sends
/// and writes, not reads or atomics, whose local memory is written.
[[nodiscard]] constexpr bool may_be_inline(SendOpcode opcode) noexcept {
  return detail::in_opcode_set<detail::kInlineOpcodes>(opcode);
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
  const bool atomic = send_opcode_traits(opcode_).remote == RemoteFields::atomic;
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
