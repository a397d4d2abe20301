// SPDX-License-Identifier: MIT
// Names, explanations and formatting of work completions (WorkError is in src/error.cpp).
#include "ibv/verbs/work_completion.hpp"

#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <string>

namespace ibv {

std::string to_string(WorkStatus status) {
  switch (status) {
    case WorkStatus::success: return "success";
    case WorkStatus::local_length_error: return "local_length_error";
    case WorkStatus::local_qp_operation_error: return "local_qp_operation_error";
    case WorkStatus::local_eec_operation_error: return "local_eec_operation_error";
    case WorkStatus::local_protection_error: return "local_protection_error";
    case WorkStatus::work_request_flushed: return "work_request_flushed";
    case WorkStatus::memory_window_bind_error: return "memory_window_bind_error";
    case WorkStatus::bad_response: return "bad_response";
    case WorkStatus::local_access_error: return "local_access_error";
    case WorkStatus::remote_invalid_request: return "remote_invalid_request";
    case WorkStatus::remote_access_error: return "remote_access_error";
    case WorkStatus::remote_operation_error: return "remote_operation_error";
    case WorkStatus::retry_exceeded: return "retry_exceeded";
    case WorkStatus::rnr_retry_exceeded: return "rnr_retry_exceeded";
    case WorkStatus::local_rdd_violation: return "local_rdd_violation";
    case WorkStatus::remote_invalid_rd_request: return "remote_invalid_rd_request";
    case WorkStatus::remote_aborted: return "remote_aborted";
    case WorkStatus::invalid_eecn: return "invalid_eecn";
    case WorkStatus::invalid_eec_state: return "invalid_eec_state";
    case WorkStatus::fatal: return "fatal";
    case WorkStatus::response_timeout: return "response_timeout";
    case WorkStatus::general_error: return "general_error";
    case WorkStatus::tag_matching_error: return "tag_matching_error";
    case WorkStatus::tag_matching_rendezvous_incomplete:
      return "tag_matching_rendezvous_incomplete";
  }
  return "unknown status " + std::to_string(static_cast<int>(status));
}

std::string_view explain(WorkStatus status) noexcept {
  switch (status) {
    case WorkStatus::success: return "";
    case WorkStatus::local_length_error:
      return "a message is longer than the receive buffer posted for it (or than the QP allows)";
    case WorkStatus::local_protection_error:
      return "a local element's lkey does not match its memory, or the region lacks local write";
    case WorkStatus::work_request_flushed:
      return "the QP went to the error state (an earlier request failed) before this request ran";
    case WorkStatus::remote_access_error:
      return "the rkey, address or length does not match a region the peer registered with "
             "this access";
    case WorkStatus::remote_invalid_request:
      return "the peer rejected the request: too long for its receive, or an operation its QP "
             "does not allow";
    case WorkStatus::remote_operation_error:
      return "the peer could not complete the operation (its receive queue or QP failed)";
    case WorkStatus::retry_exceeded:
      return "no ACK from the peer within ack_timeout x (retry_count + 1): the peer is gone, "
             "unreachable, or alive but too busy to answer in time (more busy-polling processes "
             "than cores: docs/safety.md, \"A live peer reported gone\")";
    case WorkStatus::rnr_retry_exceeded:
      return "the peer had no receive posted, through all RNR retries";
    case WorkStatus::local_qp_operation_error:
      return "the local QP could not execute the request: inline data too long, or (on RoCE) "
             "the packet could not be sent: the port's netdev is down or has no route to the "
             "peer";
    case WorkStatus::local_access_error: return "a local memory access was not permitted";
    case WorkStatus::bad_response: return "the peer sent an unexpected transport response";
    case WorkStatus::fatal: return "the device reported a fatal error";
    default: return "see the InfiniBand specification for this status";
  }
}

std::string to_string(WorkOpcode opcode) {
  if (const std::string_view name = work_opcode_name(opcode); !name.empty()) {
    return std::string(name);
  }
  return "opcode " + std::to_string(static_cast<int>(opcode));
}

std::optional<std::uint32_t> WorkCompletion::immediate() const noexcept {
  if ((wc_.wc_flags & IBV_WC_WITH_IMM) == 0) return std::nullopt;
  return ntohl(wc_.imm_data);
}

std::string WorkCompletion::to_string() const {
  std::string text = "wr_id " + std::to_string(wr_id()) + " ";
  if (!ok()) {
    std::array<char, 24> vendor{};
    std::snprintf(vendor.data(), vendor.size(), "0x%x", vendor_error());
    return text + ibv::to_string(status()) + " (vendor error " + vendor.data() + ")";
  }
  text += ibv::to_string(opcode()) + " success " + std::to_string(byte_length()) + " B";
  if (const auto imm = immediate()) text += " immediate " + std::to_string(*imm);
  return text;
}

}  // namespace ibv
