// SPDX-License-Identifier: MIT
// Tests WorkCompletion read from hand-filled ibv_wc values, the names and explanations of work
// statuses and opcodes, WorkError, and the ChannelState a failed status gives.
#include "ibv/verbs/work_completion.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/channel/channel_state.hpp"
#include "ibv/error.hpp"
#include "support/text.hpp"

namespace {

using ibv_test::contains;

ibv_wc make_wc(std::uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = opcode;
  return wc;
}

// Every enumerator of WorkStatus, i.e. every status of enum ibv_wc_status.
std::vector<ibv::WorkStatus> all_statuses() {
  std::vector<ibv::WorkStatus> statuses;
  for (int s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; ++s) {
    statuses.push_back(static_cast<ibv::WorkStatus>(s));
  }
  return statuses;
}

// --- WorkCompletion --------------------------------------------------------------------------

TEST(WorkCompletion, ReadsTheFieldsOfIbvWc) {
  ibv_wc wc = make_wc(0x1122334455667788, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
  wc.byte_len = 4096;
  wc.qp_num = 0x12345;
  wc.src_qp = 0x54321;
  wc.vendor_err = 0;
  const ibv::WorkCompletion completion(wc);
  EXPECT_EQ(completion.wr_id(), 0x1122334455667788U);
  EXPECT_EQ(completion.status(), ibv::WorkStatus::success);
  EXPECT_TRUE(completion.ok());
  EXPECT_EQ(completion.opcode(), ibv::WorkOpcode::rdma_read);
  EXPECT_EQ(completion.byte_length(), 4096U);
  EXPECT_EQ(completion.qp_number(), 0x12345U);
  EXPECT_EQ(completion.source_qp(), 0x54321U);
  EXPECT_EQ(completion.vendor_error(), 0U);
  EXPECT_FALSE(completion.is_receive());
}

TEST(WorkCompletion, ReportsFailureStatusAndVendorError) {
  ibv_wc wc = make_wc(3, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
  wc.vendor_err = 0x81;
  const ibv::WorkCompletion completion(wc);
  EXPECT_FALSE(completion.ok());
  EXPECT_EQ(completion.status(), ibv::WorkStatus::remote_access_error);
  EXPECT_EQ(completion.vendor_error(), 0x81U);
}

TEST(WorkCompletion, StatusEnumeratorsMatchVerbs) {
  EXPECT_EQ(static_cast<int>(ibv::WorkStatus::retry_exceeded), IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(static_cast<int>(ibv::WorkStatus::work_request_flushed), IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(static_cast<int>(ibv::WorkStatus::tag_matching_rendezvous_incomplete),
            IBV_WC_TM_RNDV_INCOMPLETE);
  EXPECT_EQ(static_cast<int>(ibv::WorkOpcode::receive_rdma_with_immediate),
            IBV_WC_RECV_RDMA_WITH_IMM);
}

TEST(WorkCompletion, ImmediateIsConvertedToHostOrder) {
  ibv_wc wc = make_wc(1, IBV_WC_SUCCESS, IBV_WC_RECV);
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.imm_data = htonl(0x12345678);
  const ibv::WorkCompletion completion(wc);
  ASSERT_TRUE(completion.immediate().has_value());
  EXPECT_EQ(*completion.immediate(), 0x12345678U);
}

TEST(WorkCompletion, NoImmediateWithoutTheFlag) {
  ibv_wc wc = make_wc(1, IBV_WC_SUCCESS, IBV_WC_RECV);
  wc.wc_flags = IBV_WC_GRH;  // some other flag
  wc.imm_data = htonl(0x12345678);
  EXPECT_FALSE(ibv::WorkCompletion(wc).immediate().has_value());
  wc.wc_flags = 0;
  EXPECT_FALSE(ibv::WorkCompletion(wc).immediate().has_value());
}

TEST(WorkCompletion, ImmediateZeroIsStillPresent) {
  ibv_wc wc = make_wc(1, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.imm_data = 0;
  EXPECT_EQ(ibv::WorkCompletion(wc).immediate(), std::optional<std::uint32_t>(0));
}

TEST(WorkCompletion, IsReceiveOnlyForReceiveOpcodes) {
  EXPECT_TRUE(ibv::WorkCompletion(make_wc(1, IBV_WC_SUCCESS, IBV_WC_RECV)).is_receive());
  EXPECT_TRUE(
      ibv::WorkCompletion(make_wc(1, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM)).is_receive());
  for (const auto opcode : {IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP,
                            IBV_WC_FETCH_ADD, IBV_WC_BIND_MW, IBV_WC_LOCAL_INV, IBV_WC_TSO}) {
    EXPECT_FALSE(ibv::WorkCompletion(make_wc(1, IBV_WC_SUCCESS, opcode)).is_receive()) << opcode;
  }
}

TEST(WorkCompletion, DefaultIsZeroed) {
  const ibv::WorkCompletion completion;
  EXPECT_EQ(completion.wr_id(), 0U);
  EXPECT_EQ(completion.byte_length(), 0U);
  EXPECT_FALSE(completion.immediate().has_value());
}

TEST(WorkCompletion, IsTheIbvWcItWraps) {
  // poll() writes ibv_wc straight into an array of WorkCompletion.
  std::vector<ibv::WorkCompletion> completions(3);
  auto* raw = reinterpret_cast<ibv_wc*>(completions.data());  // NOLINT
  raw[1] = make_wc(77, IBV_WC_SUCCESS, IBV_WC_SEND);
  raw[2] = make_wc(78, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_SEND);
  EXPECT_EQ(completions[1].wr_id(), 77U);
  EXPECT_EQ(completions[2].status(), ibv::WorkStatus::rnr_retry_exceeded);
  EXPECT_EQ(static_cast<const void*>(&completions[1].native()),
            static_cast<const void*>(&completions[1]));
}

TEST(WorkCompletion, ToStringOfSuccess) {
  ibv_wc wc = make_wc(7, IBV_WC_SUCCESS, IBV_WC_SEND);
  wc.byte_len = 4096;
  EXPECT_EQ(ibv::WorkCompletion(wc).to_string(), "wr_id 7 send success 4096 B");
}

TEST(WorkCompletion, ToStringOfSuccessWithImmediate) {
  ibv_wc wc = make_wc(9, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
  wc.byte_len = 0;
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.imm_data = htonl(42);
  const auto text = ibv::WorkCompletion(wc).to_string();
  EXPECT_TRUE(contains(text, "wr_id 9 receive_rdma_with_immediate success 0 B")) << text;
  EXPECT_TRUE(contains(text, "immediate 42")) << text;
}

TEST(WorkCompletion, ToStringOfFailureNamesStatusAndVendorErrorInHex) {
  ibv_wc wc = make_wc(3, IBV_WC_REM_ACCESS_ERR, IBV_WC_SEND);
  wc.vendor_err = 0x81;
  const auto text = ibv::WorkCompletion(wc).to_string();
  EXPECT_TRUE(contains(text, "wr_id 3")) << text;
  EXPECT_TRUE(contains(text, "remote_access_error")) << text;
  EXPECT_TRUE(contains(text, "0x81")) << text;
  EXPECT_FALSE(contains(text, "success")) << text;
}

// --- names and explanations ------------------------------------------------------------------

TEST(WorkStatus, EveryStatusHasADistinctName) {
  std::set<std::string> names;
  for (const auto status : all_statuses()) {
    const auto name = ibv::to_string(status);
    EXPECT_FALSE(name.empty()) << static_cast<int>(status);
    EXPECT_FALSE(contains(name, "unknown")) << static_cast<int>(status) << ": " << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), all_statuses().size());
}

TEST(WorkStatus, NamesAreTheEnumeratorNames) {
  EXPECT_EQ(ibv::to_string(ibv::WorkStatus::success), "success");
  EXPECT_EQ(ibv::to_string(ibv::WorkStatus::remote_access_error), "remote_access_error");
  EXPECT_EQ(ibv::to_string(ibv::WorkStatus::retry_exceeded), "retry_exceeded");
  EXPECT_EQ(ibv::to_string(ibv::WorkStatus::work_request_flushed), "work_request_flushed");
}

TEST(WorkStatus, UnknownValuesSayUnknown) {
  EXPECT_EQ(ibv::to_string(static_cast<ibv::WorkStatus>(200)), "unknown status 200");
}

TEST(WorkStatus, CommonErrorsAreExplained) {
  for (const auto status :
       {ibv::WorkStatus::local_length_error, ibv::WorkStatus::local_qp_operation_error,
        ibv::WorkStatus::local_protection_error, ibv::WorkStatus::work_request_flushed,
        ibv::WorkStatus::local_access_error, ibv::WorkStatus::bad_response,
        ibv::WorkStatus::remote_invalid_request, ibv::WorkStatus::remote_access_error,
        ibv::WorkStatus::remote_operation_error, ibv::WorkStatus::retry_exceeded,
        ibv::WorkStatus::rnr_retry_exceeded, ibv::WorkStatus::fatal}) {
    EXPECT_FALSE(ibv::explain(status).empty()) << ibv::to_string(status);
  }
  EXPECT_TRUE(contains(ibv::explain(ibv::WorkStatus::remote_access_error), "rkey"));
  EXPECT_TRUE(contains(ibv::explain(ibv::WorkStatus::rnr_retry_exceeded), "receive"));
  // What rxe reports when its netdev goes down under traffic (tests/device/fault_test.cpp).
  EXPECT_TRUE(contains(ibv::explain(ibv::WorkStatus::local_qp_operation_error), "netdev is down"));
}

TEST(WorkStatus, EveryErrorHasSomeExplanation) {
  for (const auto status : all_statuses()) {
    if (status == ibv::WorkStatus::success) continue;
    EXPECT_FALSE(ibv::explain(status).empty()) << ibv::to_string(status);
  }
  EXPECT_TRUE(ibv::explain(ibv::WorkStatus::success).empty());
}

TEST(WorkOpcode, EveryOpcodeHasADistinctName) {
  const std::vector<ibv::WorkOpcode> opcodes = {ibv::WorkOpcode::send,
                                                ibv::WorkOpcode::rdma_write,
                                                ibv::WorkOpcode::rdma_read,
                                                ibv::WorkOpcode::compare_and_swap,
                                                ibv::WorkOpcode::fetch_and_add,
                                                ibv::WorkOpcode::bind_memory_window,
                                                ibv::WorkOpcode::local_invalidate,
                                                ibv::WorkOpcode::tcp_segmentation_offload,
                                                ibv::WorkOpcode::receive,
                                                ibv::WorkOpcode::receive_rdma_with_immediate};
  std::set<std::string> names;
  for (const auto opcode : opcodes) {
    const auto name = ibv::to_string(opcode);
    EXPECT_FALSE(name.empty());
    EXPECT_FALSE(contains(name, "opcode")) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), opcodes.size());
  EXPECT_EQ(ibv::to_string(ibv::WorkOpcode::receive), "receive");
  EXPECT_EQ(ibv::to_string(static_cast<ibv::WorkOpcode>(99)), "opcode 99");
}

// --- WorkError -------------------------------------------------------------------------------

ibv::WorkCompletion failed(std::uint64_t wr_id, ibv_wc_status status, std::uint32_t vendor = 0) {
  ibv_wc wc = make_wc(wr_id, status, IBV_WC_SEND);
  wc.vendor_err = vendor;
  wc.qp_num = 0x99;
  return ibv::WorkCompletion(wc);
}

TEST(WorkError, CarriesTheCompletion) {
  const auto completion = failed(42, IBV_WC_REM_ACCESS_ERR, 0x81);
  const ibv::WorkError error(completion);
  EXPECT_EQ(error.status(), ibv::WorkStatus::remote_access_error);
  EXPECT_EQ(error.wr_id(), 42U);
  EXPECT_EQ(error.vendor_error(), 0x81U);
  EXPECT_EQ(error.completion().qp_number(), 0x99U);
  EXPECT_EQ(error.completion().native().wr_id, 42U);
}

TEST(WorkError, MessageNamesStatusAndWrIdAndExplains) {
  const ibv::WorkError error(failed(42, IBV_WC_REM_ACCESS_ERR, 0x81));
  const std::string what = error.what();
  EXPECT_TRUE(contains(what, "remote_access_error")) << what;
  EXPECT_TRUE(contains(what, "wr_id 42")) << what;
  EXPECT_TRUE(contains(what, "0x81")) << what;
  EXPECT_TRUE(contains(what, "Hint:")) << what;
  EXPECT_EQ(error.hint(), ibv::explain(ibv::WorkStatus::remote_access_error));
}

TEST(WorkError, OperationIsTheContextOrWorkRequest) {
  EXPECT_EQ(ibv::WorkError(failed(1, IBV_WC_RETRY_EXC_ERR)).operation(), "work request");
  const ibv::WorkError error(failed(1, IBV_WC_RETRY_EXC_ERR), "Channel::send");
  EXPECT_EQ(error.operation(), "Channel::send");
  EXPECT_TRUE(std::string_view(error.what()).starts_with("Channel::send failed")) << error.what();
}

// The list on WorkStatus in work_completion.hpp, row by row.
TEST(WorkError, EveryStatusHasTheKindAndErrnoListedOnWorkStatus) {
  using enum ibv::ErrorKind;
  struct Row {
    ibv_wc_status status;
    ibv::ErrorKind kind;
    int errno_value;
  };
  const std::vector<Row> rows = {
      {IBV_WC_LOC_LEN_ERR, invalid_argument, EMSGSIZE},
      {IBV_WC_LOC_QP_OP_ERR, driver, EIO},
      {IBV_WC_LOC_EEC_OP_ERR, driver, EIO},
      {IBV_WC_LOC_PROT_ERR, permission, EACCES},
      {IBV_WC_WR_FLUSH_ERR, state, ECANCELED},
      {IBV_WC_MW_BIND_ERR, driver, EIO},
      {IBV_WC_BAD_RESP_ERR, driver, EIO},
      {IBV_WC_LOC_ACCESS_ERR, permission, EACCES},
      {IBV_WC_REM_INV_REQ_ERR, invalid_argument, EIO},
      {IBV_WC_REM_ACCESS_ERR, permission, EACCES},
      {IBV_WC_REM_OP_ERR, driver, EIO},
      {IBV_WC_RETRY_EXC_ERR, peer_gone, ETIMEDOUT},
      {IBV_WC_RNR_RETRY_EXC_ERR, receiver_not_ready, ECONNREFUSED},
      {IBV_WC_LOC_RDD_VIOL_ERR, driver, EIO},
      {IBV_WC_REM_INV_RD_REQ_ERR, driver, EIO},
      {IBV_WC_REM_ABORT_ERR, driver, EIO},
      {IBV_WC_INV_EECN_ERR, driver, EIO},
      {IBV_WC_INV_EEC_STATE_ERR, driver, EIO},
      {IBV_WC_FATAL_ERR, driver, EIO},
      {IBV_WC_RESP_TIMEOUT_ERR, peer_gone, ETIMEDOUT},
      {IBV_WC_GENERAL_ERR, driver, EIO},
      {IBV_WC_TM_ERR, driver, EIO},
      {IBV_WC_TM_RNDV_INCOMPLETE, driver, EIO},
      {static_cast<ibv_wc_status>(IBV_WC_TM_RNDV_INCOMPLETE + 1), driver, EIO},  // unknown
  };
  std::set<int> covered;
  for (const auto& row : rows) {
    const ibv::WorkError error(failed(1, row.status));
    const std::string name = ibv::to_string(error.status());
    EXPECT_EQ(error.kind(), row.kind) << name << ": " << ibv::to_string(error.kind());
    EXPECT_EQ(error.errno_value(), row.errno_value) << name;
    covered.insert(row.status);
  }
  for (const auto status : all_statuses()) {
    if (status == ibv::WorkStatus::success) continue;
    EXPECT_TRUE(covered.contains(static_cast<int>(status))) << ibv::to_string(status);
  }
}

TEST(WorkError, IsCatchableAsIbvError) {
  bool caught = false;
  try {
    throw ibv::WorkError(failed(5, IBV_WC_RNR_RETRY_EXC_ERR));
  } catch (const ibv::Error& error) {
    caught = true;
    EXPECT_EQ(error.kind(), ibv::ErrorKind::receiver_not_ready);
    EXPECT_TRUE(contains(error.what(), "rnr_retry_exceeded")) << error.what();
  }
  EXPECT_TRUE(caught);
}

}  // namespace

namespace {

ibv::BatchError batch(std::vector<ibv::WorkCompletion> failed,
                      std::vector<std::uint64_t> timed_out) {
  return {"Channel::scope", nullptr, std::move(failed), std::move(timed_out), "x"};
}

// BatchError's kind and errno, as its contract in ibv/error.hpp states them.
TEST(BatchError, KindIsTimeoutWhenARequestTimedOut) {
  const auto error = batch({failed(1, IBV_WC_REM_ACCESS_ERR)}, {2});
  EXPECT_EQ(error.kind(), ibv::ErrorKind::timeout);
  EXPECT_EQ(error.errno_value(), ETIMEDOUT);
}

// A request that timed out in a batch was cancelled, and its channel with it.
TEST(BatchError, SaysItCancelledAChannelExactlyWhenARequestTimedOut) {
  EXPECT_TRUE(batch({}, {2}).channel_cancelled());
  EXPECT_FALSE(batch({failed(1, IBV_WC_RETRY_EXC_ERR)}, {}).channel_cancelled());
  EXPECT_EQ(batch({failed(1, IBV_WC_RETRY_EXC_ERR)}, {}).kind(), ibv::ErrorKind::peer_gone);
}

TEST(BatchError, KindIsTheFailuresKindWhenTheyAgree) {
  const auto error =
      batch({failed(1, IBV_WC_RNR_RETRY_EXC_ERR), failed(2, IBV_WC_RNR_RETRY_EXC_ERR)}, {});
  EXPECT_EQ(error.kind(), ibv::ErrorKind::receiver_not_ready);
  EXPECT_EQ(error.errno_value(), ECONNREFUSED);
  const auto access = batch({failed(1, IBV_WC_REM_ACCESS_ERR), failed(2, IBV_WC_LOC_PROT_ERR)}, {});
  EXPECT_EQ(access.kind(), ibv::ErrorKind::permission);  // two statuses, one kind and errno
  EXPECT_EQ(access.errno_value(), EACCES);
}

TEST(BatchError, KindIsDriverWhenTheFailuresDisagreeOrOnlyTheBodyFailed) {
  const auto mixed = batch({failed(1, IBV_WC_REM_ACCESS_ERR), failed(2, IBV_WC_WR_FLUSH_ERR)}, {});
  EXPECT_EQ(mixed.kind(), ibv::ErrorKind::driver);
  EXPECT_EQ(mixed.errno_value(), EIO);
  const auto body = batch({}, {});
  EXPECT_EQ(body.kind(), ibv::ErrorKind::driver);
  EXPECT_EQ(body.errno_value(), EIO);
}

}  // namespace

namespace {

// --- ChannelState: the condition a failed completion's status gives ---------------------------

using ibv::ChannelState;
using Condition = ibv::ChannelState::Condition;

TEST(ChannelState, DefaultIsUsable) {
  constexpr ChannelState state;
  static_assert(state.usable());
  EXPECT_EQ(state.condition(), Condition::usable);
  EXPECT_TRUE(state.operation().empty());
  EXPECT_EQ(state.status(), ibv::WorkStatus::success);
  EXPECT_EQ(state.to_string(), "usable");
}

TEST(ChannelState, CancelledNamesTheCall) {
  constexpr auto state = ChannelState::cancelled_in("Channel::scope");
  static_assert(state.cancelled() && !state.usable());
  EXPECT_EQ(state.operation(), "Channel::scope");
  EXPECT_EQ(state.to_string(), "cancelled by a timeout in Channel::scope");
  EXPECT_NE(state, ChannelState{});
}

// Every failed status: peer_gone exactly when ibv::kind_of says peer_gone, failed otherwise,
// with the status kept.
TEST(ChannelState, BrokenByAStatusIsPeerGoneExactlyWhereItsKindIs) {
  for (const auto status : all_statuses()) {
    if (status == ibv::WorkStatus::success) continue;
    const ChannelState state = ChannelState::broken_by(status);
    const bool gone = ibv::kind_of(status) == ibv::ErrorKind::peer_gone;
    EXPECT_EQ(state.peer_gone(), gone) << ibv::to_string(status);
    EXPECT_EQ(state.failed(), !gone) << ibv::to_string(status);
    EXPECT_EQ(state.status(), status);
    EXPECT_TRUE(state.operation().empty());
  }
  EXPECT_EQ(ChannelState::broken_by(ibv::WorkStatus::retry_exceeded).to_string(),
            "peer gone (retry_exceeded)");
  EXPECT_EQ(ChannelState::broken_by(ibv::WorkStatus::remote_access_error).to_string(),
            "failed (remote_access_error)");
  EXPECT_EQ(ChannelState::disconnected().to_string(), "peer gone (disconnected)");
}

TEST(ChannelState, ConditionNames) {
  EXPECT_EQ(ibv::to_string(Condition::usable), "usable");
  EXPECT_EQ(ibv::to_string(Condition::cancelled), "cancelled");
  EXPECT_EQ(ibv::to_string(Condition::peer_gone), "peer_gone");
  EXPECT_EQ(ibv::to_string(Condition::failed), "failed");
}

}  // namespace
