// SPDX-License-Identifier: MIT
// Tests Gid (text forms, IPv4-mapped detection, native conversion, equality) and the text of
// GidEntry and GidType.
#include "ibv/verbs/gid.hpp"

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_invalid_argument;

TEST(Gid, DefaultIsAllZero) {
  constexpr ibv::Gid gid;
  EXPECT_TRUE(gid.is_zero());
  EXPECT_EQ(gid.bytes(), (std::array<std::uint8_t, 16>{}));
  EXPECT_EQ(gid.to_string(), "::");
  EXPECT_FALSE(gid.is_ipv4_mapped());
  EXPECT_FALSE(gid.ipv4().has_value());
}

TEST(Gid, ParsesLinkLocalAddress) {
  const auto gid = ibv::Gid::from_string("fe80::1");
  const std::array<std::uint8_t, 16> expected = {0xfe, 0x80, 0, 0, 0, 0, 0, 0,
                                                 0,    0,    0, 0, 0, 0, 0, 1};
  EXPECT_EQ(gid.bytes(), expected);
  EXPECT_FALSE(gid.is_zero());
  EXPECT_EQ(gid.to_string(), "fe80::1");
}

TEST(Gid, RoundTripsCompressedText) {
  for (const char* text : {"fe80::1", "fe80::5054:ff:fe12:3456", "2001:db8::8a2e:370:7334", "::1",
                           "::", "fe80:1234:5678:9abc:def0:1234:5678:9abc", "ff02::1:ff00:0"}) {
    EXPECT_EQ(ibv::Gid::from_string(text).to_string(), text);
  }
}

TEST(Gid, FullFormsPrintCompressed) {
  EXPECT_EQ(ibv::Gid::from_string("fe80:0000:0000:0000:0000:0000:0000:0001").to_string(),
            "fe80::1");
  EXPECT_EQ(ibv::Gid::from_string("FE80:0:0:0:5054:FF:FE12:3456").to_string(),
            "fe80::5054:ff:fe12:3456");
  EXPECT_EQ(ibv::Gid::from_string("0:0:0:0:0:ffff:a00:20f").to_string(), "::ffff:10.0.2.15");
}

TEST(Gid, Ipv4MappedPrintsDottedQuad) {
  const auto gid = ibv::Gid::from_string("::ffff:10.0.2.15");
  const std::array<std::uint8_t, 16> expected = {0, 0, 0,    0,    0,  0, 0, 0,
                                                 0, 0, 0xff, 0xff, 10, 0, 2, 15};
  EXPECT_EQ(gid.bytes(), expected);
  EXPECT_TRUE(gid.is_ipv4_mapped());
  ASSERT_TRUE(gid.ipv4().has_value());
  EXPECT_EQ(*gid.ipv4(), "10.0.2.15");
  EXPECT_EQ(gid.to_string(), "::ffff:10.0.2.15");
}

TEST(Gid, Ipv4MappedEdgeAddresses) {
  EXPECT_EQ(ibv::Gid::from_string("::ffff:255.255.255.255").to_string(), "::ffff:255.255.255.255");
  EXPECT_EQ(ibv::Gid::from_string("::ffff:0.0.0.0").ipv4(), std::optional<std::string>("0.0.0.0"));
}

TEST(Gid, NotIpv4MappedWithoutTheFfffMarkerOrWithOtherPrefix) {
  EXPECT_FALSE(ibv::Gid::from_string("fe80::1").is_ipv4_mapped());
  EXPECT_FALSE(ibv::Gid::from_string("::fffe:10.0.2.15").is_ipv4_mapped());
  EXPECT_FALSE(ibv::Gid::from_string("1::ffff:10.0.2.15").is_ipv4_mapped());
  EXPECT_FALSE(ibv::Gid::from_string("::ff:ffff:a00:20f").is_ipv4_mapped());
  EXPECT_FALSE(ibv::Gid::from_string("fe80::1").ipv4().has_value());
}

TEST(Gid, RejectsBadTextNamingIt) {
  for (const char* text : {"", "bogus", "10.0.2.15", "fe80::1::2", "12345::", "fe80:::1",
                           "1:2:3:4:5:6:7:8:9", "::ffff:10.0.2.256", " fe80::1", "fe80::1%eth0"}) {
    EXPECT_TRUE(throws_invalid_argument([text] { (void)ibv::Gid::from_string(text); },
                                        {"Gid::from_string", std::string("\"") + text + "\""}))
        << text;
  }
}

TEST(Gid, RejectsTextWithAnEmbeddedNul) {
  // The whole string_view is the text: "fe80::1" followed by a NUL and junk is not a GID.
  constexpr std::string_view kText("fe80::1\0junk", 12);
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::Gid::from_string(kText); }));
}

TEST(Gid, ParsesOnlyTheViewNotWhatFollowsIt) {
  constexpr std::string_view kLonger = "fe80::1234";
  EXPECT_EQ(ibv::Gid::from_string(kLonger.substr(0, 7)), ibv::Gid::from_string("fe80::1"));
}

TEST(Gid, ConvertsToAndFromNative) {
  const auto gid = ibv::Gid::from_string("fe80::5054:ff:fe12:3456");
  const ibv_gid raw = gid.to_native();
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(raw.raw[i], gid.bytes()[i]) << i;
  EXPECT_EQ(ibv::Gid(raw), gid);

  ibv_gid other{};
  other.global.subnet_prefix = 0;
  other.raw[15] = 1;
  EXPECT_EQ(ibv::Gid(other).to_string(), "::1");
}

TEST(Gid, EqualityComparesAllBytes) {
  EXPECT_EQ(ibv::Gid::from_string("fe80::1"), ibv::Gid::from_string("fe80:0::0:1"));
  EXPECT_NE(ibv::Gid::from_string("fe80::1"), ibv::Gid::from_string("fe80::2"));
  EXPECT_NE(ibv::Gid::from_string("fe80::1"), ibv::Gid::from_string("fe81::1"));
  EXPECT_NE(ibv::Gid::from_string("::"), ibv::Gid::from_string("::1"));
  EXPECT_EQ(ibv::Gid::from_string("::"), ibv::Gid());
}

TEST(Gid, IsZeroOnlyForAllZero) {
  EXPECT_TRUE(ibv::Gid::from_string("::").is_zero());
  EXPECT_TRUE(ibv::Gid::from_string("0:0:0:0:0:0:0:0").is_zero());
  EXPECT_FALSE(ibv::Gid::from_string("::1").is_zero());
  EXPECT_FALSE(ibv::Gid::from_string("8000::").is_zero());
}

TEST(GidType, HasDistinctNames) {
  EXPECT_EQ(ibv::to_string(ibv::GidType::infiniband), "IB");
  EXPECT_EQ(ibv::to_string(ibv::GidType::roce_v1), "RoCE v1");
  EXPECT_EQ(ibv::to_string(ibv::GidType::roce_v2), "RoCE v2");
}

TEST(GidEntry, ToStringShowsIndexGidTypeAndNetdev) {
  ibv::GidEntry entry;
  entry.gid = ibv::Gid::from_string("::ffff:10.0.2.15");
  entry.index = 1;
  entry.port = 1;
  entry.type = ibv::GidType::roce_v2;
  entry.netdev = "eth0";
  EXPECT_EQ(entry.to_string(), "1  ::ffff:10.0.2.15  RoCE v2  eth0");
}

TEST(GidEntry, ToStringOmitsAnEmptyNetdev) {
  ibv::GidEntry entry;
  entry.gid = ibv::Gid::from_string("fe80::2");
  entry.index = 0;
  entry.type = ibv::GidType::infiniband;
  EXPECT_EQ(entry.to_string(), "0  fe80::2  IB");
}

}  // namespace
