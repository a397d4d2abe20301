// SPDX-License-Identifier: MIT
// Tests the pure parts of atomics and automatic inlining: the atomic SendRequests (the
// ibv_send_wr they fill in), the checks an atomic must pass before posting (atomic_problem),
// the known remote rights a RemoteMemoryRegion carries, and the Channel's inline decision
// (apply_inline).
#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>

#include <gtest/gtest.h>

#include "channel/channel_core.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/work_request.hpp"
#include "verbs/atomic_check.hpp"

namespace {

using ibv::detail::AtomicProblem;

const ibv::ScatterElement kResult = ibv::ScatterElement::from_raw(0x8000, 8, 9);
const ibv::RemoteMemoryRegion kTarget(0x7f0000001000, 64, 0xabcdef);

AtomicProblem problem_of(const ibv::SendRequest& request) {
  return ibv::detail::atomic_problem(request, true, 16, 16);
}

// --- requests ---------------------------------------------------------------------------------

TEST(AtomicRequest, FetchAddFillsTheAtomicFields) {
  const auto request = ibv::SendRequest::fetch_add(11, kResult, kTarget, 0x0102030405060708ULL);
  EXPECT_EQ(request.opcode(), ibv::SendOpcode::atomic_fetch_and_add);
  EXPECT_EQ(request.native().opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
  EXPECT_EQ(request.native().wr_id, 11U);
  EXPECT_EQ(request.native().wr.atomic.remote_addr, kTarget.address());
  EXPECT_EQ(request.native().wr.atomic.rkey, kTarget.rkey());
  // Host byte order: the provider converts for the wire.
  EXPECT_EQ(request.native().wr.atomic.compare_add, 0x0102030405060708ULL);
  EXPECT_EQ(request.native().sg_list, &kResult.native());
  EXPECT_EQ(request.element_count(), 1U);
  EXPECT_EQ(request.byte_length(), 8U);
  EXPECT_EQ(request.remote(), std::optional<ibv::RemoteMemoryRegion>(kTarget));
  EXPECT_TRUE(request.is_signaled());
  EXPECT_FALSE(request.is_inline());
}

TEST(AtomicRequest, CompareSwapFillsExpectedAndDesired) {
  const auto request = ibv::SendRequest::compare_swap(12, kResult, kTarget, 5, 9);
  EXPECT_EQ(request.opcode(), ibv::SendOpcode::atomic_compare_and_swap);
  EXPECT_EQ(request.native().opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
  EXPECT_EQ(request.native().wr.atomic.compare_add, 5U);
  EXPECT_EQ(request.native().wr.atomic.swap, 9U);
  EXPECT_EQ(request.native().wr.atomic.remote_addr, kTarget.address());
  EXPECT_EQ(request.native().wr.atomic.rkey, kTarget.rkey());
}

TEST(AtomicRequest, OpcodesAreNamedAndClassified) {
  EXPECT_EQ(ibv::to_string(ibv::SendOpcode::atomic_fetch_and_add), "atomic_fetch_and_add");
  EXPECT_EQ(ibv::to_string(ibv::SendOpcode::atomic_compare_and_swap), "atomic_compare_and_swap");
  EXPECT_TRUE(ibv::is_atomic(ibv::SendOpcode::atomic_fetch_and_add));
  EXPECT_TRUE(ibv::is_atomic(ibv::SendOpcode::atomic_compare_and_swap));
  EXPECT_FALSE(ibv::is_atomic(ibv::SendOpcode::rdma_read));
  EXPECT_FALSE(ibv::is_atomic(ibv::SendOpcode::send));
  for (const auto opcode :
       {ibv::SendOpcode::send, ibv::SendOpcode::send_with_immediate, ibv::SendOpcode::rdma_write,
        ibv::SendOpcode::rdma_write_with_immediate}) {
    EXPECT_TRUE(ibv::may_be_inline(opcode)) << ibv::to_string(opcode);
  }
  for (const auto opcode : {ibv::SendOpcode::rdma_read, ibv::SendOpcode::atomic_fetch_and_add,
                            ibv::SendOpcode::atomic_compare_and_swap}) {
    EXPECT_FALSE(ibv::may_be_inline(opcode)) << ibv::to_string(opcode);
  }
}

// The opcode table: one row per enumerator, counted from it, and every predicate, mask and
// name reads the rows.
TEST(OpcodeTable, EveryEnumeratorHasARowAndThePredicatesReadIt) {
  EXPECT_EQ(ibv::kSendOpcodeCount, 7U);
  EXPECT_EQ(ibv::to_string(static_cast<ibv::SendOpcode>(ibv::kSendOpcodeCount)), "unknown");
  for (unsigned code = 0; code < ibv::kSendOpcodeCount; ++code) {
    const auto opcode = static_cast<ibv::SendOpcode>(code);
    const ibv::SendOpcodeTraits& row = ibv::send_opcode_traits(opcode);
    EXPECT_NE(row.name, "unknown");
    EXPECT_EQ(ibv::is_atomic(opcode), row.atomic) << row.name;
    EXPECT_EQ(ibv::may_be_inline(opcode), row.may_be_inline) << row.name;
    EXPECT_EQ(ibv::has_remote_region(opcode), row.remote != ibv::RemoteFields::none) << row.name;
    EXPECT_EQ(row.region.empty(), row.remote == ibv::RemoteFields::none) << row.name;
    EXPECT_FALSE(ibv::to_string(row.completion).starts_with("opcode ")) << row.name;
    EXPECT_EQ(ibv::detail::is_plain_send(opcode, 0), !row.atomic) << row.name;
    EXPECT_EQ(ibv::detail::is_plain_send(opcode, 1), !row.atomic && row.may_be_inline) << row.name;
  }
  EXPECT_EQ(ibv::send_opcode_traits(ibv::SendOpcode::rdma_read).region, "source");
  EXPECT_EQ(ibv::send_opcode_traits(ibv::SendOpcode::rdma_write_with_immediate).operation,
            "write_with_immediate");
  EXPECT_EQ(ibv::work_opcode_name(ibv::WorkOpcode::fetch_and_add), "fetch_and_add");
  EXPECT_EQ(ibv::to_string(static_cast<ibv::WorkOpcode>(100)), "opcode 100");
}

// --- atomic_problem ---------------------------------------------------------------------------

TEST(AtomicProblem, AWellFormedAtomicPasses) {
  EXPECT_EQ(problem_of(ibv::SendRequest::fetch_add(1, kResult, kTarget, 1)), AtomicProblem::none);
  EXPECT_EQ(problem_of(ibv::SendRequest::compare_swap(1, kResult, kTarget.sub_region(56, 8), 0, 1)),
            AtomicProblem::none);
  EXPECT_EQ(problem_of(ibv::SendRequest::fetch_add(
                1, kResult, kTarget.with_access(ibv::RemoteAccess::atomic()), 1)),
            AtomicProblem::none);
}

TEST(AtomicProblem, DeviceWithoutAtomicsComesFirst) {
  const auto request = ibv::SendRequest::fetch_add(1, kResult, kTarget.sub_region(1, 8), 1);
  EXPECT_EQ(ibv::detail::atomic_problem(request, false, 16, 16),
            AtomicProblem::device_without_atomics);
}

TEST(AtomicProblem, NoReadAtomicDepth) {
  const auto request = ibv::SendRequest::fetch_add(1, kResult, kTarget, 1);
  EXPECT_EQ(ibv::detail::atomic_problem(request, true, 0, 16), AtomicProblem::no_read_atomic_depth);
  EXPECT_EQ(ibv::detail::atomic_problem(request, true, 16, 0), AtomicProblem::no_read_atomic_depth);
  EXPECT_EQ(ibv::detail::atomic_problem(request, true, 1, 1), AtomicProblem::none);
}

TEST(AtomicProblem, ResultMustBeExactlyEightBytes) {
  for (const std::uint32_t length : {0U, 4U, 7U, 9U, 16U}) {
    const auto result = ibv::ScatterElement::from_raw(0x8000, length, 9);
    EXPECT_EQ(problem_of(ibv::SendRequest::fetch_add(1, result, kTarget, 1)),
              AtomicProblem::result_not_one_word)
        << length << " bytes";
  }
}

TEST(AtomicProblem, TargetMustBeAligned) {
  for (const std::uint64_t offset : {1U, 2U, 4U, 7U, 12U}) {
    EXPECT_EQ(
        problem_of(ibv::SendRequest::compare_swap(1, kResult, kTarget.sub_region(offset, 8), 0, 1)),
        AtomicProblem::unaligned_target)
        << "offset " << offset;
  }
}

TEST(AtomicProblem, TargetMustHoldTheWord) {
  for (const std::uint64_t length : {0U, 1U, 7U}) {
    EXPECT_EQ(problem_of(ibv::SendRequest::fetch_add(1, kResult, kTarget.sub_region(0, length), 1)),
              AtomicProblem::short_target)
        << length << " bytes";
  }
}

TEST(AtomicProblem, TargetKnownWithoutAtomicAccess) {
  const auto no_atomic =
      kTarget.with_access(ibv::RemoteAccess::write() | ibv::RemoteAccess::read());
  EXPECT_EQ(problem_of(ibv::SendRequest::fetch_add(1, kResult, no_atomic, 1)),
            AtomicProblem::target_without_atomic_access);
  // Derived regions keep what is known.
  EXPECT_EQ(problem_of(ibv::SendRequest::fetch_add(1, kResult, no_atomic.sub_region(8, 8), 1)),
            AtomicProblem::target_without_atomic_access);
  EXPECT_EQ(
      problem_of(ibv::SendRequest::fetch_add(1, kResult, no_atomic.element<std::uint64_t>(3), 1)),
      AtomicProblem::target_without_atomic_access);
}

// The queue pair's fast check: which opcodes it takes by length compares alone, with and
// without inline data (the rest go to the full check).
TEST(PlainSend, SendsAndWritesMayBeInlineReadsMayNotAtomicsNever) {
  using ibv::SendOpcode;
  using ibv::detail::is_plain_send;
  for (const SendOpcode opcode : {SendOpcode::send, SendOpcode::send_with_immediate,
                                  SendOpcode::rdma_write, SendOpcode::rdma_write_with_immediate}) {
    EXPECT_TRUE(is_plain_send(opcode, 0));
    EXPECT_TRUE(is_plain_send(opcode, 1));
  }
  EXPECT_TRUE(is_plain_send(SendOpcode::rdma_read, 0));
  EXPECT_FALSE(is_plain_send(SendOpcode::rdma_read, 1));
  for (const SendOpcode opcode :
       {SendOpcode::atomic_fetch_and_add, SendOpcode::atomic_compare_and_swap}) {
    EXPECT_FALSE(is_plain_send(opcode, 0));
    EXPECT_FALSE(is_plain_send(opcode, 1));
  }
}

// The queue pair's part of an atomic's checks, asked once per queue pair.
TEST(AtomicProblem, QueuePairPartIsTheDeviceAndTheDepths) {
  using ibv::detail::atomic_queue_pair_problem;
  EXPECT_EQ(atomic_queue_pair_problem(true, 16, 16), AtomicProblem::none);
  EXPECT_EQ(atomic_queue_pair_problem(false, 16, 16), AtomicProblem::device_without_atomics);
  EXPECT_EQ(atomic_queue_pair_problem(true, 16, 0), AtomicProblem::no_read_atomic_depth);
  EXPECT_EQ(ibv::detail::atomic_request_problem(
                ibv::SendRequest::fetch_add(1, kResult, kTarget.sub_region(0, 4), 1)),
            AtomicProblem::short_target);
}

// --- known rights of a remote region ----------------------------------------------------------

TEST(RemoteMemoryRegionAccess, UnknownUnlessDeclared) {
  EXPECT_FALSE(kTarget.access().has_value());
  EXPECT_FALSE(ibv::RemoteMemoryRegion::from_bytes(kTarget.to_bytes()).access().has_value());
  const auto declared = kTarget.with_access(ibv::RemoteAccess::all());
  EXPECT_EQ(declared.access(), std::optional(ibv::RemoteAccess::all()));
  EXPECT_EQ(declared.sub_region_from(8).access(), std::optional(ibv::RemoteAccess::all()));
}

TEST(RemoteMemoryRegionAccess, IsNotPartOfEquality) {
  const auto declared = kTarget.with_access(ibv::RemoteAccess::read());
  EXPECT_EQ(declared, kTarget);
  EXPECT_EQ(ibv::RemoteMemoryRegion::from_bytes(declared.to_bytes()), declared);
  EXPECT_NE(declared, kTarget.sub_region(0, 8));
}

// --- the Channel's inline decision ------------------------------------------------------------

const std::array<ibv::GatherElement, 2> kSmall = {ibv::GatherElement::from_raw(0x1000, 100, 7),
                                                  ibv::GatherElement::from_raw(0x2000, 120, 7)};
const std::array<ibv::ScatterElement, 1> kInto = {ibv::ScatterElement::from_raw(0x3000, 8, 7)};

bool inlined(ibv::SendRequest request, ibv::InlinePolicy policy, std::uint32_t max_inline) {
  ibv::detail::apply_inline(request, policy, max_inline);
  return request.is_inline();
}

TEST(ApplyInline, AutomaticInlinesSendsAndWritesThatFit) {
  using ibv::InlinePolicy;
  EXPECT_TRUE(inlined(ibv::SendRequest::send(1, kSmall), InlinePolicy::automatic, 220));
  EXPECT_TRUE(inlined(ibv::SendRequest::send(1, kSmall), InlinePolicy::automatic, 256));
  EXPECT_FALSE(inlined(ibv::SendRequest::send(1, kSmall), InlinePolicy::automatic, 219));
  EXPECT_FALSE(inlined(ibv::SendRequest::send(1, kSmall), InlinePolicy::automatic, 0));
  EXPECT_TRUE(
      inlined(ibv::SendRequest::send_with_immediate(1, kSmall, 3), InlinePolicy::automatic, 220));
  EXPECT_TRUE(inlined(ibv::SendRequest::write(1, kSmall, kTarget.with_access({})),
                      InlinePolicy::automatic, 220));
  EXPECT_TRUE(inlined(ibv::SendRequest::write_with_immediate(1, kSmall, kTarget, 3),
                      InlinePolicy::automatic, 220));
  // An empty message fits any limit.
  EXPECT_TRUE(inlined(ibv::SendRequest::send(1, {}), InlinePolicy::automatic, 0));
}

TEST(ApplyInline, AutomaticNeverInlinesReadsOrAtomics) {
  using ibv::InlinePolicy;
  EXPECT_FALSE(inlined(ibv::SendRequest::read(1, kInto, kTarget), InlinePolicy::automatic, 220));
  EXPECT_FALSE(
      inlined(ibv::SendRequest::fetch_add(1, kResult, kTarget, 1), InlinePolicy::automatic, 220));
  EXPECT_FALSE(inlined(ibv::SendRequest::compare_swap(1, kResult, kTarget, 1, 2),
                       InlinePolicy::automatic, 220));
}

TEST(ApplyInline, AlwaysAndNeverAreTakenAtTheirWord) {
  using ibv::InlinePolicy;
  EXPECT_TRUE(inlined(ibv::SendRequest::send(1, kSmall), InlinePolicy::always, 0));
  EXPECT_TRUE(inlined(ibv::SendRequest::read(1, kInto, kTarget), InlinePolicy::always, 220));
  EXPECT_FALSE(inlined(ibv::SendRequest::send(1, kSmall), InlinePolicy::never, 4096));
  EXPECT_FALSE(inlined(ibv::SendRequest::send(1, {}), InlinePolicy::never, 4096));
}

TEST(PostOptions, DefaultsAreSignaledAndAutomaticInline) {
  const ibv::PostOptions options;
  EXPECT_TRUE(options.signaled);
  EXPECT_EQ(options.inline_data, ibv::InlinePolicy::automatic);
}

}  // namespace
