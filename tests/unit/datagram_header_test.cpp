// SPDX-License-Identifier: MIT
// Tests the DatagramEndpoint's header (layout, round trip, what is not one of ours) and the
// receiver's per-sender sequence accounting (in order, gaps, late arrivals).
#include "ibv/datagram/datagram_header.hpp"

#include <array>
#include <cstddef>
#include <span>

#include <gtest/gtest.h>

namespace {

TEST(DatagramHeader, RoundTripsWithTheDocumentedLayout) {
  std::array<std::byte, ibv::DatagramHeader::kSize> bytes{};
  ibv::DatagramHeader{0x0102030405060708}.write(bytes);
  EXPECT_EQ(std::to_integer<int>(bytes[0]), 0x69);
  EXPECT_EQ(std::to_integer<int>(bytes[1]), 0x44);
  EXPECT_EQ(std::to_integer<int>(bytes[2]), ibv::DatagramHeader::kVersion);
  EXPECT_EQ(std::to_integer<int>(bytes[3]), 0);
  EXPECT_EQ(std::to_integer<int>(bytes[4]), 0x01);
  EXPECT_EQ(std::to_integer<int>(bytes[11]), 0x08);
  const auto header = ibv::DatagramHeader::read(bytes);
  ASSERT_TRUE(header.has_value());
  EXPECT_EQ(header->sequence, 0x0102030405060708U);
}

TEST(DatagramHeader, ReadsNothingFromBytesThatAreNotOurs) {
  std::array<std::byte, ibv::DatagramHeader::kSize> bytes{};
  ibv::DatagramHeader{7}.write(bytes);
  EXPECT_FALSE(ibv::DatagramHeader::read(std::span(bytes).first(11)).has_value());
  auto bad = bytes;
  bad[0] = std::byte{0};
  EXPECT_FALSE(ibv::DatagramHeader::read(bad).has_value());
  bad = bytes;
  bad[2] = std::byte{2};
  EXPECT_FALSE(ibv::DatagramHeader::read(bad).has_value());
  bad = bytes;
  bad[3] = std::byte{1};
  EXPECT_FALSE(ibv::DatagramHeader::read(bad).has_value());
}

TEST(SequenceTracker, CountsInOrderArrivals) {
  ibv::SequenceTracker tracker;
  for (std::uint64_t i = 0; i < 5; ++i) EXPECT_EQ(tracker.record(i), 0U);
  EXPECT_EQ(tracker.counts(), (ibv::SequenceCounts{5, 0, 0, 5}));
}

TEST(SequenceTracker, CountsAGapAsLossIncludingOneAtTheStart) {
  ibv::SequenceTracker tracker;
  EXPECT_EQ(tracker.record(2), 2U);  // 0 and 1 never came
  EXPECT_EQ(tracker.record(3), 0U);
  EXPECT_EQ(tracker.record(10), 6U);
  EXPECT_EQ(tracker.counts(), (ibv::SequenceCounts{3, 8, 0, 11}));
}

TEST(SequenceTracker, TakesALateArrivalBackFromTheLost) {
  ibv::SequenceTracker tracker;
  EXPECT_EQ(tracker.record(0), 0U);
  EXPECT_EQ(tracker.record(2), 1U);
  EXPECT_EQ(tracker.record(1), 0U);
  EXPECT_EQ(tracker.counts(), (ibv::SequenceCounts{2, 0, 1, 3}));
}

}  // namespace
