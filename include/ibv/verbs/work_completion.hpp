// SPDX-License-Identifier: MIT
// Work completions: what the device reports when a work request has finished.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ibv {

/// The outcome of a work request (enum ibv_wc_status), named. The comment on each failed status
/// is the ErrorKind and errno of the WorkError (ibv/error.hpp) made from it; a status not listed
/// here gives driver, EIO. A peer that stopped answering is `peer_gone`, not `timeout`: timeout
/// is kept for the library's own bounded waits.
enum class WorkStatus : std::uint8_t {
  success = IBV_WC_SUCCESS,
  local_length_error = IBV_WC_LOC_LEN_ERR,                ///< invalid_argument, EMSGSIZE
  local_qp_operation_error = IBV_WC_LOC_QP_OP_ERR,        ///< driver, EIO
  local_eec_operation_error = IBV_WC_LOC_EEC_OP_ERR,      ///< driver, EIO
  local_protection_error = IBV_WC_LOC_PROT_ERR,           ///< permission, EACCES
  work_request_flushed = IBV_WC_WR_FLUSH_ERR,             ///< state, ECANCELED
  memory_window_bind_error = IBV_WC_MW_BIND_ERR,          ///< driver, EIO
  bad_response = IBV_WC_BAD_RESP_ERR,                     ///< driver, EIO
  local_access_error = IBV_WC_LOC_ACCESS_ERR,             ///< permission, EACCES
  remote_invalid_request = IBV_WC_REM_INV_REQ_ERR,        ///< invalid_argument, EIO
  remote_access_error = IBV_WC_REM_ACCESS_ERR,            ///< permission, EACCES
  remote_operation_error = IBV_WC_REM_OP_ERR,             ///< driver, EIO
  retry_exceeded = IBV_WC_RETRY_EXC_ERR,                  ///< peer_gone, ETIMEDOUT
  rnr_retry_exceeded = IBV_WC_RNR_RETRY_EXC_ERR,          ///< receiver_not_ready, ECONNREFUSED
  local_rdd_violation = IBV_WC_LOC_RDD_VIOL_ERR,          ///< driver, EIO
  remote_invalid_rd_request = IBV_WC_REM_INV_RD_REQ_ERR,  ///< driver, EIO
  remote_aborted = IBV_WC_REM_ABORT_ERR,                  ///< driver, EIO
  invalid_eecn = IBV_WC_INV_EECN_ERR,                     ///< driver, EIO
  invalid_eec_state = IBV_WC_INV_EEC_STATE_ERR,           ///< driver, EIO
  fatal = IBV_WC_FATAL_ERR,                               ///< driver, EIO
  response_timeout = IBV_WC_RESP_TIMEOUT_ERR,             ///< peer_gone, ETIMEDOUT
  general_error = IBV_WC_GENERAL_ERR,                     ///< driver, EIO
  tag_matching_error = IBV_WC_TM_ERR,                     ///< driver, EIO
  tag_matching_rendezvous_incomplete = IBV_WC_TM_RNDV_INCOMPLETE,  ///< driver, EIO
};

/// "remote_access_error"; unknown values read "unknown status N".
[[nodiscard]] std::string to_string(WorkStatus status);
/// What a status usually means and what to check, e.g. for remote_access_error: "the rkey,
/// address or length does not match a region the peer registered with that access".
[[nodiscard]] std::string_view explain(WorkStatus status) noexcept;

/// What a completed work request did (enum ibv_wc_opcode), named.
enum class WorkOpcode : std::uint8_t {
  send = IBV_WC_SEND,
  rdma_write = IBV_WC_RDMA_WRITE,
  rdma_read = IBV_WC_RDMA_READ,
  compare_and_swap = IBV_WC_COMP_SWAP,
  fetch_and_add = IBV_WC_FETCH_ADD,
  bind_memory_window = IBV_WC_BIND_MW,
  local_invalidate = IBV_WC_LOCAL_INV,
  tcp_segmentation_offload = IBV_WC_TSO,
  receive = IBV_WC_RECV,
  receive_rdma_with_immediate = IBV_WC_RECV_RDMA_WITH_IMM,
};

/// The enumerator's name ("send", "rdma_write", "receive", ...), empty for a value the library
/// does not know: the completion opcodes' table, next to the enumerators it names (a new one
/// is added here alone; -Wswitch insists on its name).
[[nodiscard]] constexpr std::string_view work_opcode_name(WorkOpcode opcode) noexcept {
  switch (opcode) {
    case WorkOpcode::send: return "send";
    case WorkOpcode::rdma_write: return "rdma_write";
    case WorkOpcode::rdma_read: return "rdma_read";
    case WorkOpcode::compare_and_swap: return "compare_and_swap";
    case WorkOpcode::fetch_and_add: return "fetch_and_add";
    case WorkOpcode::bind_memory_window: return "bind_memory_window";
    case WorkOpcode::local_invalidate: return "local_invalidate";
    case WorkOpcode::tcp_segmentation_offload: return "tcp_segmentation_offload";
    case WorkOpcode::receive: return "receive";
    case WorkOpcode::receive_rdma_with_immediate: return "receive_rdma_with_immediate";
  }
  return {};
}

/// The enumerator's name (work_opcode_name), or "opcode N" for a value the library does not
/// know.
[[nodiscard]] std::string to_string(WorkOpcode opcode);

/// One work completion, as the device wrote it. Layout-compatible with ibv_wc so that polling
/// writes straight into a caller's array of these.
class WorkCompletion {
 public:
  WorkCompletion() noexcept : wc_{} {}
  /// A copy of a verbs completion.
  explicit WorkCompletion(const ibv_wc& wc) noexcept : wc_(wc) {}

  /// The caller's identifier of the work request.
  [[nodiscard]] std::uint64_t wr_id() const noexcept { return wc_.wr_id; }
  /// Success, or why the request failed.
  [[nodiscard]] WorkStatus status() const noexcept { return static_cast<WorkStatus>(wc_.status); }
  /// Whether the request succeeded.
  [[nodiscard]] bool ok() const noexcept { return wc_.status == IBV_WC_SUCCESS; }
  /// The opcode. Only meaningful for successful completions (the device does not set it on
  /// errors).
  [[nodiscard]] WorkOpcode opcode() const noexcept { return static_cast<WorkOpcode>(wc_.opcode); }
  /// Vendor-specific error detail for failed completions.
  [[nodiscard]] std::uint32_t vendor_error() const noexcept { return wc_.vendor_err; }
  /// Bytes received (receives) or transferred (RDMA reads).
  [[nodiscard]] std::uint32_t byte_length() const noexcept { return wc_.byte_len; }
  /// Immediate data in host byte order, when the message carried some.
  [[nodiscard]] std::optional<std::uint32_t> immediate() const noexcept;
  /// The local QP the request was posted on.
  [[nodiscard]] std::uint32_t qp_number() const noexcept { return wc_.qp_num; }
  /// The sender's QP number (set for receives on datagram QPs; not meaningful on RC).
  [[nodiscard]] std::uint32_t source_qp() const noexcept { return wc_.src_qp; }
  /// The sender's LID (receives on datagram QPs over InfiniBand; 0 on RoCE).
  [[nodiscard]] std::uint16_t source_lid() const noexcept { return wc_.slid; }
  /// Whether the first 40 bytes of the receive buffer hold a global route header (receives on
  /// datagram QPs; always on RoCE). See UdReceived for reading it.
  [[nodiscard]] bool has_grh() const noexcept { return (wc_.wc_flags & IBV_WC_GRH) != 0; }
  /// Whether this is the completion of a receive (as opposed to a send-side request).
  [[nodiscard]] bool is_receive() const noexcept { return (wc_.opcode & IBV_WC_RECV) != 0; }

  /// The verbs completion.
  [[nodiscard]] const ibv_wc& native() const noexcept { return wc_; }
  /// "wr_id 7 send success 4096 B" / "wr_id 3 remote_access_error (vendor error 0x81)".
  [[nodiscard]] std::string to_string() const;

 private:
  ibv_wc wc_;
};

static_assert(sizeof(WorkCompletion) == sizeof(ibv_wc) &&
              std::is_standard_layout_v<WorkCompletion>);

}  // namespace ibv
