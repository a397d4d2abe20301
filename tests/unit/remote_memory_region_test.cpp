// SPDX-License-Identifier: MIT
// Tests RemoteMemoryRegion: overflow-checked construction, sub-regions, array elements, struct
// fields, and the 20-byte wire form.
#include "ibv/verbs/remote_memory_region.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_invalid_argument;

constexpr std::uint64_t kMaxU64 = std::numeric_limits<std::uint64_t>::max();

// A record as a peer might expose it: standard-layout, trivially copyable, with padding.
struct FieldRecord {
  std::uint32_t id;
  std::uint16_t flags;
  std::uint64_t count;
  std::array<char, 6> name;  // an array member: its offset and size must come out right
  std::uint8_t state;
};
static_assert(std::is_standard_layout_v<FieldRecord> && std::is_trivially_copyable_v<FieldRecord>);

// --- construction ----------------------------------------------------------------------------

TEST(RemoteMemoryRegion, DefaultIsEmpty) {
  constexpr ibv::RemoteMemoryRegion region;
  EXPECT_EQ(region.address(), 0U);
  EXPECT_EQ(region.length(), 0U);
  EXPECT_EQ(region.rkey(), 0U);
}

TEST(RemoteMemoryRegion, KeepsItsParts) {
  const ibv::RemoteMemoryRegion region(0x7f0000001000, 4096, 0x1234);
  EXPECT_EQ(region.address(), 0x7f0000001000U);
  EXPECT_EQ(region.length(), 4096U);
  EXPECT_EQ(region.rkey(), 0x1234U);
}

TEST(RemoteMemoryRegion, AcceptsAnEndExactlyAtTheLimit) {
  EXPECT_EQ(ibv::RemoteMemoryRegion(kMaxU64 - 10, 10, 1).length(), 10U);
  EXPECT_EQ(ibv::RemoteMemoryRegion(0, kMaxU64, 1).length(), kMaxU64);
  EXPECT_EQ(ibv::RemoteMemoryRegion(kMaxU64, 0, 1).address(), kMaxU64);
}

TEST(RemoteMemoryRegion, RejectsAddressPlusLengthOverflowing) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::RemoteMemoryRegion(kMaxU64 - 10, 11, 1); },
                                      {"overflows"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::RemoteMemoryRegion(1, kMaxU64, 1); }, {"overflows"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::RemoteMemoryRegion(kMaxU64, 1, 1); }, {"overflows"}));
}

TEST(RemoteMemoryRegion, EqualityComparesAllParts) {
  const ibv::RemoteMemoryRegion region(0x1000, 100, 7);
  EXPECT_EQ(region, ibv::RemoteMemoryRegion(0x1000, 100, 7));
  EXPECT_NE(region, ibv::RemoteMemoryRegion(0x1001, 100, 7));
  EXPECT_NE(region, ibv::RemoteMemoryRegion(0x1000, 101, 7));
  EXPECT_NE(region, ibv::RemoteMemoryRegion(0x1000, 100, 8));
}

// --- sub_region ------------------------------------------------------------------------------

TEST(RemoteMemoryRegionSubRegion, OffsetsTheAddressAndKeepsTheRkey) {
  const ibv::RemoteMemoryRegion region(0x1000, 100, 0x42);
  const auto sub = region.sub_region(10, 20);
  EXPECT_EQ(sub, ibv::RemoteMemoryRegion(0x100A, 20, 0x42));
  EXPECT_EQ(region.sub_region(0, 100), region);
}

TEST(RemoteMemoryRegionSubRegion, AcceptsTheBounds) {
  const ibv::RemoteMemoryRegion region(0x1000, 100, 0x42);
  EXPECT_EQ(region.sub_region(100, 0), ibv::RemoteMemoryRegion(0x1064, 0, 0x42));
  EXPECT_EQ(region.sub_region(99, 1), ibv::RemoteMemoryRegion(0x1063, 1, 0x42));
  EXPECT_EQ(region.sub_region(0, 0), ibv::RemoteMemoryRegion(0x1000, 0, 0x42));
  const ibv::RemoteMemoryRegion empty(0x2000, 0, 9);
  EXPECT_EQ(empty.sub_region(0, 0), empty);
}

TEST(RemoteMemoryRegionSubRegion, RejectsOneBytePastTheEnd) {
  const ibv::RemoteMemoryRegion region(0x1000, 100, 0x42);
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(100, 1); },
                                      {"sub_region", "offset 100", "length 1", "100 bytes"}));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(50, 51); },
                                      {"offset 50", "length 51"}));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(0, 101); }));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(101, 0); }));
  const ibv::RemoteMemoryRegion empty(0x2000, 0, 9);
  EXPECT_TRUE(throws_invalid_argument([&empty] { (void)empty.sub_region(0, 1); }));
  EXPECT_TRUE(throws_invalid_argument([&empty] { (void)empty.sub_region(1, 0); }));
}

TEST(RemoteMemoryRegionSubRegion, RejectsOffsetsAndLengthsThatWouldOverflow) {
  const ibv::RemoteMemoryRegion region(0x1000, 100, 0x42);
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(1, kMaxU64); }));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(kMaxU64, 1); }));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(kMaxU64, kMaxU64); }));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(kMaxU64, 0); }));
  // offset + length wraps to a small number that would pass a naive check.
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(50, kMaxU64 - 40); }));
}

TEST(RemoteMemoryRegionSubRegion, WorksAtTheTopOfTheAddressSpace) {
  const ibv::RemoteMemoryRegion region(kMaxU64 - 100, 100, 3);
  EXPECT_EQ(region.sub_region(100, 0).address(), kMaxU64);
  EXPECT_EQ(region.sub_region(60, 40), ibv::RemoteMemoryRegion(kMaxU64 - 40, 40, 3));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region(60, 41); }));
}

TEST(RemoteMemoryRegionSubRegion, FromOffsetToTheEnd) {
  const ibv::RemoteMemoryRegion region(0x1000, 100, 0x42);
  EXPECT_EQ(region.sub_region_from(0), region);
  EXPECT_EQ(region.sub_region_from(40), ibv::RemoteMemoryRegion(0x1028, 60, 0x42));
  EXPECT_EQ(region.sub_region_from(100), ibv::RemoteMemoryRegion(0x1064, 0, 0x42));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region_from(101); },
                                      {"sub_region_from", "offset 101", "100 bytes"}));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.sub_region_from(kMaxU64); }));
}

// --- element<T> ------------------------------------------------------------------------------

TEST(RemoteMemoryRegionElement, AddressesEachElement) {
  const ibv::RemoteMemoryRegion region(0x10000, 10 * sizeof(std::uint64_t), 5);
  for (std::uint64_t i = 0; i < 10; ++i) {
    EXPECT_EQ(region.element<std::uint64_t>(i), ibv::RemoteMemoryRegion(0x10000 + 8 * i, 8, 5));
  }
}

TEST(RemoteMemoryRegionElement, AcceptsTheLastElementRejectsOnePast) {
  const ibv::RemoteMemoryRegion region(0x10000, 80, 5);
  EXPECT_EQ(region.element<std::uint64_t>(9).address(), 0x10000U + 72);
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.element<std::uint64_t>(10); }));
  // A partial trailing element does not count.
  const ibv::RemoteMemoryRegion ragged(0x10000, 87, 5);
  EXPECT_EQ(ragged.element<std::uint64_t>(9).length(), 8U);
  EXPECT_TRUE(throws_invalid_argument([&ragged] { (void)ragged.element<std::uint64_t>(10); }));
}

TEST(RemoteMemoryRegionElement, RejectsIndexTimesSizeOverflowing) {
  const ibv::RemoteMemoryRegion region(0, kMaxU64, 5);
  EXPECT_TRUE(throws_invalid_argument(
      [&region] { (void)region.element<std::uint64_t>(kMaxU64 / 8 + 1); }, {"overflows"}));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.element<std::uint64_t>(kMaxU64); },
                                      {"overflows"}));
  EXPECT_TRUE(
      throws_invalid_argument([&region] { (void)region.element<FieldRecord>(kMaxU64 / 2); }));
}

TEST(RemoteMemoryRegionElement, LargestIndexWithoutOverflowIsBoundsChecked) {
  // index * 8 fits in 64 bits, but the element would end past the region.
  const ibv::RemoteMemoryRegion region(0, kMaxU64, 5);
  EXPECT_TRUE(throws_invalid_argument(
      [&region] { (void)region.element<std::uint64_t>(kMaxU64 / 8); }, {"outside"}));
  EXPECT_EQ(region.element<std::uint64_t>(kMaxU64 / 8 - 1).address(), (kMaxU64 / 8 - 1) * 8);
}

TEST(RemoteMemoryRegionElement, CountsWholeElements) {
  EXPECT_EQ(ibv::RemoteMemoryRegion(0, 80, 1).element_count<std::uint64_t>(), 10U);
  EXPECT_EQ(ibv::RemoteMemoryRegion(0, 87, 1).element_count<std::uint64_t>(), 10U);
  EXPECT_EQ(ibv::RemoteMemoryRegion(0, 7, 1).element_count<std::uint64_t>(), 0U);
  EXPECT_EQ(ibv::RemoteMemoryRegion(0, 7, 1).element_count<std::byte>(), 7U);
  EXPECT_EQ(ibv::RemoteMemoryRegion(0, 5 * sizeof(FieldRecord), 1).element_count<FieldRecord>(),
            5U);
}

// --- field -----------------------------------------------------------------------------------

TEST(RemoteMemoryRegionField, OffsetsEqualOffsetof) {
  using R = ibv::RemoteMemoryRegion;
  EXPECT_EQ(R::offset_of(&FieldRecord::id), offsetof(FieldRecord, id));
  EXPECT_EQ(R::offset_of(&FieldRecord::flags), offsetof(FieldRecord, flags));
  EXPECT_EQ(R::offset_of(&FieldRecord::count), offsetof(FieldRecord, count));
  EXPECT_EQ(R::offset_of(&FieldRecord::name), offsetof(FieldRecord, name));
  EXPECT_EQ(R::offset_of(&FieldRecord::state), offsetof(FieldRecord, state));
}

TEST(RemoteMemoryRegionField, IsTheMembersBytes) {
  const ibv::RemoteMemoryRegion region(0x5000, sizeof(FieldRecord), 11);
  EXPECT_EQ(region.field(&FieldRecord::id), ibv::RemoteMemoryRegion(0x5000, 4, 11));
  EXPECT_EQ(region.field(&FieldRecord::count),
            ibv::RemoteMemoryRegion(0x5000 + offsetof(FieldRecord, count), 8, 11));
  EXPECT_EQ(region.field(&FieldRecord::name),
            ibv::RemoteMemoryRegion(0x5000 + offsetof(FieldRecord, name), 6, 11));
  EXPECT_EQ(region.field(&FieldRecord::state),
            ibv::RemoteMemoryRegion(0x5000 + offsetof(FieldRecord, state), 1, 11));
}

TEST(RemoteMemoryRegionField, RejectsARegionSmallerThanTheStruct) {
  const ibv::RemoteMemoryRegion region(0x5000, sizeof(FieldRecord) - 1, 11);
  // Even a field that would fit (id, at offset 0) is refused: the region is not an S.
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.field(&FieldRecord::id); },
                                      {"field", "smaller than the struct"}));
  EXPECT_TRUE(throws_invalid_argument([&region] { (void)region.field(&FieldRecord::state); }));
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::RemoteMemoryRegion().field(&FieldRecord::id); }));
}

TEST(RemoteMemoryRegionField, CombinesWithElement) {
  const std::uint64_t base = 0x7f0000000000;
  const ibv::RemoteMemoryRegion records(base, 5 * sizeof(FieldRecord), 0xabc);
  for (std::uint64_t i = 0; i < 5; ++i) {
    const auto count = records.element<FieldRecord>(i).field(&FieldRecord::count);
    EXPECT_EQ(count.address(), base + i * sizeof(FieldRecord) + offsetof(FieldRecord, count)) << i;
    EXPECT_EQ(count.length(), sizeof(std::uint64_t));
    EXPECT_EQ(count.rkey(), 0xabcU);
  }
  EXPECT_TRUE(throws_invalid_argument([&records] { (void)records.element<FieldRecord>(5); }));
}

// --- wire form -------------------------------------------------------------------------------

TEST(RemoteMemoryRegionBytes, IsTwentyBigEndianBytes) {
  const ibv::RemoteMemoryRegion region(0x0102030405060708, 0x1112131415161718, 0xA1B2C3D4);
  const auto bytes = region.to_bytes();
  ASSERT_EQ(bytes.size(), 20U);
  ASSERT_EQ(ibv::RemoteMemoryRegion::kWireSize, 20U);
  // clang-format off
  const std::array<std::uint8_t, 20> expected = {
      0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // address
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // length
      0xA1, 0xB2, 0xC3, 0xD4};                         // rkey
  // clang-format on
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(std::to_integer<std::uint8_t>(bytes[i]), expected[i]) << "byte " << i;
  }
}

TEST(RemoteMemoryRegionBytes, ExactBytesOfSimpleValues) {
  const auto bytes = ibv::RemoteMemoryRegion(0x1000, 0x20, 0x30).to_bytes();
  std::array<std::byte, 20> expected{};
  expected[6] = std::byte{0x10};
  expected[15] = std::byte{0x20};
  expected[19] = std::byte{0x30};
  EXPECT_EQ(bytes, expected);
}

TEST(RemoteMemoryRegionBytes, RoundTrips) {
  for (const auto& region :
       {ibv::RemoteMemoryRegion(), ibv::RemoteMemoryRegion(0x7f1234567000, 1 << 20, 0xdeadbeef),
        ibv::RemoteMemoryRegion(0, kMaxU64, 0xFFFFFFFF), ibv::RemoteMemoryRegion(kMaxU64, 0, 1)}) {
    EXPECT_EQ(ibv::RemoteMemoryRegion::from_bytes(region.to_bytes()), region) << region.to_string();
  }
}

TEST(RemoteMemoryRegionBytes, RejectsWrongSizes) {
  const auto good = ibv::RemoteMemoryRegion(1, 2, 3).to_bytes();
  std::vector<std::byte> longer(good.begin(), good.end());
  longer.push_back(std::byte{0});
  EXPECT_TRUE(throws_invalid_argument(
      [&good] { (void)ibv::RemoteMemoryRegion::from_bytes(std::span(good).first(19)); },
      {"from_bytes", "20", "19"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&longer] { (void)ibv::RemoteMemoryRegion::from_bytes(longer); }, {"20", "21"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::RemoteMemoryRegion::from_bytes(std::span<const std::byte>()); },
      {"20", "got 0"}));
}

TEST(RemoteMemoryRegionBytes, RejectsAnOverflowingRegion) {
  std::array<std::byte, 20> bytes{};
  for (std::size_t i = 0; i < 8; ++i) bytes[i] = std::byte{0xFF};  // address 2^64 - 1
  bytes[15] = std::byte{1};                                        // length 1
  EXPECT_TRUE(throws_invalid_argument(
      [&bytes] { (void)ibv::RemoteMemoryRegion::from_bytes(bytes); }, {"overflows"}));
}

// --- text ------------------------------------------------------------------------------------

TEST(RemoteMemoryRegion, ToStringShowsLengthAddressAndRkey) {
  EXPECT_EQ(ibv::RemoteMemoryRegion(0x7f1200000000, 4096, 0x1234).to_string(),
            "remote MR 4096 B at 0x7f1200000000 rkey 0x1234");
  EXPECT_EQ(ibv::RemoteMemoryRegion(0, kMaxU64, 0xFFFFFFFF).to_string(),
            "remote MR 18446744073709551615 B at 0x0 rkey 0xffffffff");
  EXPECT_EQ(ibv::RemoteMemoryRegion(kMaxU64, 0, 0).to_string(),
            "remote MR 0 B at 0xffffffffffffffff rkey 0x0");
}

}  // namespace
