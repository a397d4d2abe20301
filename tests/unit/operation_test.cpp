// SPDX-License-Identifier: MIT
// Tests the operations as values (ibv/channel/operation.hpp): each makes the work request of its
// operation (opcode, elements, remote region, immediate, atomic operands) under the wr_id it is
// given, and the concepts tell send-queue operations, receives and other types apart.
#include "ibv/channel/operation.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

namespace {

using namespace ibv;

const std::array<GatherElement, 2> kGather = {GatherElement::from_raw(0x1000, 100, 7),
                                              GatherElement::from_raw(0x2000, 28, 7)};
const std::array<ScatterElement, 1> kScatter = {ScatterElement::from_raw(0x8000, 8, 9)};
const RemoteMemoryRegion kOperationRemote(0x7f0000000000, 1 << 20, 0xabcdef);

static_assert(op::SendOperation<op::Send> && op::SendOperation<op::Write> &&
              op::SendOperation<op::Read> && op::SendOperation<op::FetchAdd> &&
              op::SendOperation<op::CompareSwap>);
static_assert(!op::SendOperation<op::Receive> && op::Operation<op::Receive>);
static_assert(!op::Operation<SendRequest> && !op::Operation<int>);
static_assert(op::SendOperation<op::AnySend> && !std::is_constructible_v<op::AnySend, op::Receive>);

TEST(Operation, SendWithoutImmediateIsAPlainSend) {
  const op::Send send{kGather};
  SendRequest request = send.request(41);
  EXPECT_EQ(request.opcode(), SendOpcode::send);
  EXPECT_EQ(request.wr_id(), 41U);
  EXPECT_EQ(request.element_count(), 2U);
  EXPECT_EQ(request.byte_length(), 128U);
  EXPECT_EQ(request.native().opcode, IBV_WR_SEND);
  EXPECT_FALSE(request.remote().has_value());
}

TEST(Operation, SendWithImmediateCarriesItInNetworkOrder) {
  const op::Send send{kGather, 0x01020304U};
  SendRequest request = send.request(1);
  EXPECT_EQ(request.opcode(), SendOpcode::send_with_immediate);
  EXPECT_EQ(request.native().opcode, IBV_WR_SEND_WITH_IMM);
  EXPECT_EQ(ntohl(request.native().imm_data), 0x01020304U);
}

TEST(Operation, WriteTargetsItsDestinationWithOrWithoutImmediate) {
  const op::Write write{kGather, kOperationRemote};
  SendRequest plain = write.request(2);
  EXPECT_EQ(plain.opcode(), SendOpcode::rdma_write);
  EXPECT_EQ(plain.native().wr.rdma.remote_addr, kOperationRemote.address());
  EXPECT_EQ(plain.native().wr.rdma.rkey, kOperationRemote.rkey());
  ASSERT_TRUE(plain.remote().has_value());
  EXPECT_EQ(plain.remote()->length(), kOperationRemote.length());

  const op::Write write_with_immediate{kGather, kOperationRemote, 5U};
  SendRequest notifying = write_with_immediate.request(3);
  EXPECT_EQ(notifying.opcode(), SendOpcode::rdma_write_with_immediate);
  EXPECT_EQ(notifying.native().opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(ntohl(notifying.native().imm_data), 5U);
}

TEST(Operation, ReadScattersFromItsSource) {
  const op::Read read{kScatter, kOperationRemote};
  SendRequest request = read.request(4);
  EXPECT_EQ(request.opcode(), SendOpcode::rdma_read);
  EXPECT_EQ(request.native().opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(request.native().sg_list[0].addr, 0x8000U);
  EXPECT_EQ(request.native().wr.rdma.remote_addr, kOperationRemote.address());
}

TEST(Operation, AtomicsCarryTheirOperands) {
  const op::FetchAdd add{kScatter[0], kOperationRemote, 9};
  SendRequest fetch_add = add.request(5);
  EXPECT_EQ(fetch_add.opcode(), SendOpcode::atomic_fetch_and_add);
  EXPECT_EQ(fetch_add.native().wr.atomic.compare_add, 9U);
  EXPECT_EQ(fetch_add.native().wr.atomic.remote_addr, kOperationRemote.address());
  EXPECT_EQ(fetch_add.native().wr.atomic.rkey, kOperationRemote.rkey());

  const op::CompareSwap swap{kScatter[0], kOperationRemote, 10, 11};
  SendRequest compare_swap = swap.request(6);
  EXPECT_EQ(compare_swap.opcode(), SendOpcode::atomic_compare_and_swap);
  EXPECT_EQ(compare_swap.native().wr.atomic.compare_add, 10U);
  EXPECT_EQ(compare_swap.native().wr.atomic.swap, 11U);
}

TEST(Operation, AnySendMakesTheRequestOfTheOperationItHolds) {
  const std::vector<op::AnySend> list{op::Write{kGather, kOperationRemote}, op::Send{kGather, 8U},
                                      op::Read{kScatter, kOperationRemote},
                                      op::FetchAdd{kScatter[0], kOperationRemote, 3},
                                      op::CompareSwap{kScatter[0], kOperationRemote, 4, 5}};
  const std::array<SendOpcode, 5> expected{SendOpcode::rdma_write, SendOpcode::send_with_immediate,
                                           SendOpcode::rdma_read, SendOpcode::atomic_fetch_and_add,
                                           SendOpcode::atomic_compare_and_swap};
  for (std::size_t i = 0; i < list.size(); ++i) {
    const SendRequest request = list[i].request(100 + i);
    EXPECT_EQ(request.opcode(), expected[i]) << i;
    EXPECT_EQ(request.wr_id(), 100 + i);
  }
  // An atomic's result is referred to inside the AnySend that holds it.
  EXPECT_EQ(list[3].request(0).native().sg_list,
            &std::get<op::FetchAdd>(list[3].operation).result.native());
}

TEST(Operation, ReceiveMakesAReceiveRequest) {
  const op::Receive receive{kScatter};
  ReceiveRequest request = receive.request(7);
  EXPECT_EQ(request.wr_id(), 7U);
  EXPECT_EQ(request.element_count(), 1U);
  EXPECT_EQ(request.byte_length(), 8U);
}

}  // namespace
