// SPDX-License-Identifier: MIT
// Tests SendRequest and ReceiveRequest (the ibv_send_wr / ibv_recv_wr they fill in) and the
// scatter/gather elements they refer to.
#include "ibv/verbs/work_request.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <span>
#include <string>

#include <gtest/gtest.h>

#include "ibv/verbs/scatter_gather.hpp"

namespace {

const std::array<ibv::GatherElement, 3> kGather = {ibv::GatherElement::from_raw(0x1000, 100, 7),
                                                   ibv::GatherElement::from_raw(0x2000, 200, 7),
                                                   ibv::GatherElement::from_raw(0x3000, 300, 8)};

const std::array<ibv::ScatterElement, 2> kScatter = {ibv::ScatterElement::from_raw(0x8000, 64, 9),
                                                     ibv::ScatterElement::from_raw(0x9000, 32, 9)};

const ibv::RemoteMemoryRegion kRemote(0x7f0000000000, 1 << 20, 0xabcdef);

// The four bytes of imm_data as they sit in memory (network order means most significant first).
std::array<std::uint8_t, 4> imm_bytes(const ibv_send_wr& wr) {
  std::array<std::uint8_t, 4> bytes{};
  std::memcpy(bytes.data(), &wr.imm_data, bytes.size());
  return bytes;
}

// --- elements --------------------------------------------------------------------------------

TEST(GatherElement, FromRawKeepsTheParts) {
  constexpr auto element = ibv::GatherElement::from_raw(0x7f0012345678, 4096, 0x1234);
  static_assert(element.address() == 0x7f0012345678);
  EXPECT_EQ(element.address(), 0x7f0012345678U);
  EXPECT_EQ(element.length(), 4096U);
  EXPECT_EQ(element.lkey(), 0x1234U);
  EXPECT_EQ(element.native().addr, 0x7f0012345678U);
  EXPECT_EQ(element.native().length, 4096U);
  EXPECT_EQ(element.native().lkey, 0x1234U);
}

TEST(ScatterElement, FromRawKeepsTheParts) {
  constexpr auto element = ibv::ScatterElement::from_raw(0xffffffffffffffff, 0xffffffff, 1);
  EXPECT_EQ(element.address(), 0xffffffffffffffffU);
  EXPECT_EQ(element.length(), 0xffffffffU);
  EXPECT_EQ(element.lkey(), 1U);
  EXPECT_EQ(element.native().length, 0xffffffffU);
}

TEST(ScatterGather, ElementsAreAnArrayOfIbvSge) {
  // A span of elements is handed to the device as ibv_sge[]: element i is at sge i.
  const auto* sges = &kGather[0].native();
  EXPECT_EQ(static_cast<const void*>(&sges[2]), static_cast<const void*>(&kGather[2]));
  EXPECT_EQ(sges[1].addr, 0x2000U);
}

TEST(ScatterGather, TotalLengthSumsInSixtyFourBits) {
  EXPECT_EQ(ibv::total_length(std::span<const ibv::GatherElement>(kGather)), 600U);
  EXPECT_EQ(ibv::total_length(std::span<const ibv::ScatterElement>(kScatter)), 96U);
  EXPECT_EQ(ibv::total_length(std::span<const ibv::GatherElement>()), 0U);
  const std::array<ibv::GatherElement, 2> huge = {ibv::GatherElement::from_raw(0, 0xffffffff, 1),
                                                  ibv::GatherElement::from_raw(0, 0xffffffff, 1)};
  EXPECT_EQ(ibv::total_length(std::span<const ibv::GatherElement>(huge)), 0x1fffffffeU);
}

// --- SendRequest -----------------------------------------------------------------------------

TEST(SendRequest, SendRefersToTheCallersElements) {
  const auto request = ibv::SendRequest::send(11, kGather);
  EXPECT_EQ(request.opcode(), ibv::SendOpcode::send);
  EXPECT_EQ(request.native().opcode, IBV_WR_SEND);
  EXPECT_EQ(request.wr_id(), 11U);
  EXPECT_EQ(request.native().wr_id, 11U);
  EXPECT_EQ(request.element_count(), 3U);
  EXPECT_EQ(request.native().num_sge, 3);
  // Not a copy: the very elements the caller owns.
  EXPECT_EQ(request.native().sg_list, &kGather[0].native());
  EXPECT_EQ(request.byte_length(), 600U);
  EXPECT_FALSE(request.remote().has_value());
  EXPECT_EQ(request.native().next, nullptr);
}

TEST(SendRequest, SignaledByDefaultWithNoOtherFlags) {
  const auto request = ibv::SendRequest::send(1, kGather);
  EXPECT_TRUE(request.is_signaled());
  EXPECT_FALSE(request.is_inline());
  EXPECT_EQ(request.native().send_flags, static_cast<unsigned>(IBV_SEND_SIGNALED));
}

TEST(SendRequest, SendWithoutElementsHasNoList) {
  const auto request = ibv::SendRequest::send(2, {});
  EXPECT_EQ(request.native().sg_list, nullptr);
  EXPECT_EQ(request.native().num_sge, 0);
  EXPECT_EQ(request.byte_length(), 0U);
}

TEST(SendRequest, SendWithImmediateInNetworkOrder) {
  const auto request = ibv::SendRequest::send_with_immediate(3, kGather, 0x01020304);
  EXPECT_EQ(request.opcode(), ibv::SendOpcode::send_with_immediate);
  EXPECT_EQ(request.native().opcode, IBV_WR_SEND_WITH_IMM);
  EXPECT_EQ(request.native().imm_data, htonl(0x01020304));
  EXPECT_EQ(imm_bytes(request.native()), (std::array<std::uint8_t, 4>{1, 2, 3, 4}));
  EXPECT_EQ(request.byte_length(), 600U);
  EXPECT_TRUE(request.is_signaled());
}

TEST(SendRequest, ImmediateOnlySendHasNoElements) {
  const auto request = ibv::SendRequest::send_with_immediate(3, {}, 0xdeadbeef);
  EXPECT_EQ(request.native().sg_list, nullptr);
  EXPECT_EQ(request.native().num_sge, 0);
  EXPECT_EQ(imm_bytes(request.native()), (std::array<std::uint8_t, 4>{0xde, 0xad, 0xbe, 0xef}));
}

TEST(SendRequest, WriteTargetsTheRemoteRegion) {
  const auto request = ibv::SendRequest::write(4, kGather, kRemote);
  EXPECT_EQ(request.opcode(), ibv::SendOpcode::rdma_write);
  EXPECT_EQ(request.native().opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(request.native().wr.rdma.remote_addr, 0x7f0000000000U);
  EXPECT_EQ(request.native().wr.rdma.rkey, 0xabcdefU);
  ASSERT_TRUE(request.remote().has_value());
  EXPECT_EQ(*request.remote(), kRemote);
  EXPECT_EQ(request.native().sg_list, &kGather[0].native());
  EXPECT_EQ(request.byte_length(), 600U);
  EXPECT_TRUE(request.is_signaled());
}

TEST(SendRequest, WriteToASubRegion) {
  const auto destination = kRemote.sub_region(4096, 600);
  const auto request = ibv::SendRequest::write(4, kGather, destination);
  EXPECT_EQ(request.native().wr.rdma.remote_addr, 0x7f0000001000U);
  EXPECT_EQ(request.native().wr.rdma.rkey, 0xabcdefU);
}

TEST(SendRequest, WriteWithImmediate) {
  const auto request = ibv::SendRequest::write_with_immediate(5, kGather, kRemote, 0xA0B0C0D0);
  EXPECT_EQ(request.opcode(), ibv::SendOpcode::rdma_write_with_immediate);
  EXPECT_EQ(request.native().opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(request.wr_id(), 5U);
  EXPECT_EQ(request.native().wr.rdma.remote_addr, kRemote.address());
  EXPECT_EQ(request.native().wr.rdma.rkey, kRemote.rkey());
  EXPECT_EQ(request.native().imm_data, htonl(0xA0B0C0D0));
  EXPECT_EQ(imm_bytes(request.native()), (std::array<std::uint8_t, 4>{0xA0, 0xB0, 0xC0, 0xD0}));
  EXPECT_EQ(request.remote(), std::optional<ibv::RemoteMemoryRegion>(kRemote));
  EXPECT_TRUE(request.is_signaled());
}

TEST(SendRequest, ReadIntoScatterElements) {
  const auto request = ibv::SendRequest::read(6, kScatter, kRemote);
  EXPECT_EQ(request.opcode(), ibv::SendOpcode::rdma_read);
  EXPECT_EQ(request.native().opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(request.native().wr.rdma.remote_addr, kRemote.address());
  EXPECT_EQ(request.native().wr.rdma.rkey, kRemote.rkey());
  EXPECT_EQ(request.native().sg_list, &kScatter[0].native());
  EXPECT_EQ(request.element_count(), 2U);
  EXPECT_EQ(request.byte_length(), 96U);
  EXPECT_EQ(request.remote(), std::optional<ibv::RemoteMemoryRegion>(kRemote));
}

// A request keeps of its remote region only what a post needs (the address and rkey in the
// work request, the length, the known rights); remote() gives the whole region back.
TEST(SendRequest, RemoteIsTheWholeRegionWithItsKnownRights) {
  const auto known = kRemote.sub_region(8, 64).with_access(ibv::RemoteAccess::atomic());
  const auto read = ibv::SendRequest::read(6, kScatter, known);
  ASSERT_TRUE(read.remote().has_value());
  EXPECT_EQ(*read.remote(), known);
  EXPECT_EQ(read.remote()->length(), 64U);
  EXPECT_EQ(read.remote()->access(), ibv::RemoteAccess::atomic());
  EXPECT_EQ(read.remote_access(), ibv::RemoteAccess::atomic());

  const auto result = ibv::ScatterElement::from_raw(0x8000, 8, 9);
  const auto atomic = ibv::SendRequest::compare_swap(7, result, known, 1, 2);
  EXPECT_EQ(atomic.remote(), std::optional<ibv::RemoteMemoryRegion>(known));
  EXPECT_EQ(atomic.remote()->rkey(), kRemote.rkey());
  EXPECT_EQ(atomic.remote()->access(), ibv::RemoteAccess::atomic());

  const auto unknown = ibv::SendRequest::write(4, kGather, kRemote);
  EXPECT_FALSE(unknown.remote()->access().has_value());
  EXPECT_FALSE(unknown.remote_access().has_value());
  EXPECT_FALSE(ibv::SendRequest::send(1, kGather).remote().has_value());
  EXPECT_FALSE(ibv::SendRequest::send_with_immediate(1, kGather, 3).remote().has_value());
}

TEST(SendRequest, UnsignaledClearsOnlyTheSignaledFlag) {
  auto request = ibv::SendRequest::send(1, kGather);
  request.inline_data().unsignaled();
  EXPECT_FALSE(request.is_signaled());
  EXPECT_TRUE(request.is_inline());
  EXPECT_EQ(request.native().send_flags, static_cast<unsigned>(IBV_SEND_INLINE));
}

TEST(SendRequest, FlagSettersEachSetTheirFlag) {
  EXPECT_EQ(ibv::SendRequest::send(1, kGather).inline_data().native().send_flags,
            static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_INLINE));
  EXPECT_EQ(ibv::SendRequest::send(1, kGather).fence().native().send_flags,
            static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_FENCE));
  EXPECT_EQ(ibv::SendRequest::send(1, kGather).solicited().native().send_flags,
            static_cast<unsigned>(IBV_SEND_SIGNALED | IBV_SEND_SOLICITED));
  EXPECT_EQ(ibv::SendRequest::send(1, kGather).unsignaled().native().send_flags, 0U);
}

TEST(SendRequest, FlagSettersChainOnTheSameRequest) {
  auto request = ibv::SendRequest::write(7, kGather, kRemote);
  auto& chained = request.unsignaled().inline_data().fence().solicited();
  EXPECT_EQ(&chained, &request);
  EXPECT_EQ(request.native().send_flags,
            static_cast<unsigned>(IBV_SEND_INLINE | IBV_SEND_FENCE | IBV_SEND_SOLICITED));
  // The flags leave the rest alone.
  EXPECT_EQ(request.native().opcode, IBV_WR_RDMA_WRITE);
  EXPECT_EQ(request.native().wr.rdma.rkey, kRemote.rkey());
  EXPECT_EQ(request.byte_length(), 600U);
}

TEST(SendRequest, FlagsAreIdempotent) {
  auto request = ibv::SendRequest::send(1, kGather);
  request.unsignaled().unsignaled().fence().fence();
  EXPECT_EQ(request.native().send_flags, static_cast<unsigned>(IBV_SEND_FENCE));
}

TEST(SendRequest, CopiesReferToTheSameElements) {
  const auto original = ibv::SendRequest::send(1, kGather);
  const auto copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_EQ(copy.native().sg_list, original.native().sg_list);
  EXPECT_EQ(copy.byte_length(), original.byte_length());
}

TEST(SendRequest, ByteLengthBeyondFourGiB) {
  const std::array<ibv::GatherElement, 2> huge = {ibv::GatherElement::from_raw(0, 0xffffffff, 1),
                                                  ibv::GatherElement::from_raw(0, 0x00000002, 1)};
  EXPECT_EQ(ibv::SendRequest::send(1, huge).byte_length(), 0x100000001U);
}

TEST(SendOpcode, NamesAreDistinct) {
  std::set<std::string> names;
  for (const auto opcode :
       {ibv::SendOpcode::send, ibv::SendOpcode::send_with_immediate, ibv::SendOpcode::rdma_write,
        ibv::SendOpcode::rdma_write_with_immediate, ibv::SendOpcode::rdma_read}) {
    const std::string name(ibv::to_string(opcode));
    EXPECT_FALSE(name.empty());
    EXPECT_NE(name, "unknown");
    names.insert(name);
  }
  EXPECT_EQ(names.size(), 5U);
  EXPECT_EQ(ibv::to_string(ibv::SendOpcode::rdma_read), "rdma_read");
}

// --- ReceiveRequest --------------------------------------------------------------------------

TEST(ReceiveRequest, RefersToTheCallersElements) {
  const ibv::ReceiveRequest request(21, kScatter);
  EXPECT_EQ(request.wr_id(), 21U);
  EXPECT_EQ(request.native().wr_id, 21U);
  EXPECT_EQ(request.element_count(), 2U);
  EXPECT_EQ(request.native().num_sge, 2);
  EXPECT_EQ(request.native().sg_list, &kScatter[0].native());
  EXPECT_EQ(request.byte_length(), 96U);
  EXPECT_EQ(request.native().next, nullptr);
}

TEST(ReceiveRequest, WithoutElementsHasANullList) {
  const ibv::ReceiveRequest request(22, {});
  EXPECT_EQ(request.native().sg_list, nullptr);
  EXPECT_EQ(request.native().num_sge, 0);
  EXPECT_EQ(request.element_count(), 0U);
  EXPECT_EQ(request.byte_length(), 0U);
}

TEST(ReceiveRequest, SingleElement) {
  const ibv::ReceiveRequest request(23, std::span(kScatter).subspan(1));
  EXPECT_EQ(request.native().sg_list, &kScatter[1].native());
  EXPECT_EQ(request.native().num_sge, 1);
  EXPECT_EQ(request.byte_length(), 32U);
}

}  // namespace
