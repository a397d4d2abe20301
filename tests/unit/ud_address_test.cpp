// SPDX-License-Identifier: MIT
// Tests UdAddress's wire forms (JSON and the 28-byte binary form: round trips, exact layout,
// every field's range check), QKey's range, and GlobalRouteHeader's reading of the GRH area in
// its IPv6 and RoCE v2 IPv4 forms.
#include "ibv/verbs/ud_address.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ibv/verbs/ud_queue_pair_settings.hpp"
#include "ibv/verbs/ud_received.hpp"
#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_invalid_argument;

ibv::UdAddress sample() {
  ibv::UdAddress address;
  address.qp_number = 0x12345A;
  address.qkey = 0x11111111;
  address.lid = 0xBEEF;
  address.gid = ibv::Gid::from_string("::ffff:10.0.0.2");
  address.mtu = ibv::Mtu::mtu4096();
  return address;
}

nlohmann::json valid_json() {
  return {{"qpn", 1234}, {"qkey", 7}, {"lid", 0}, {"gid", "::ffff:10.0.0.1"}, {"mtu", 1024}};
}

std::uint8_t byte_at(std::span<const std::byte> bytes, std::size_t index) {
  return std::to_integer<std::uint8_t>(bytes[index]);
}

TEST(UdAddressJson, RoundTrips) {
  EXPECT_EQ(ibv::UdAddress::from_json(sample().to_json()), sample());
  const ibv::UdAddress zero;
  EXPECT_EQ(ibv::UdAddress::from_json(zero.to_json()), zero);
}

TEST(UdAddressJson, HasTheDocumentedFields) {
  const auto object = nlohmann::json::parse(sample().to_json());
  EXPECT_EQ(object.at("qpn"), 0x12345A);
  EXPECT_EQ(object.at("qkey"), 0x11111111);
  EXPECT_EQ(object.at("lid"), 0xBEEF);
  EXPECT_EQ(object.at("gid"), "::ffff:10.0.0.2");
  EXPECT_EQ(object.at("mtu"), 4096);
}

TEST(UdAddressJson, RefusesBadInputNamingTheField) {
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::UdAddress::from_json("{"); }, {"not valid JSON"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::UdAddress::from_json("[1]"); }, {"not an object"}));
  for (const char* field : {"qpn", "qkey", "lid", "gid", "mtu"}) {
    auto object = valid_json();
    object.erase(field);
    EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(object.dump()); },
                                        {field, "missing"}));
  }
  auto json = valid_json();
  json["qpn"] = 0x1000000;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(json.dump()); },
                                      {"qpn", "16777216", "24 bits"}));
  json = valid_json();
  json["qpn"] = -1;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(json.dump()); },
                                      {"qpn", "non-negative"}));
  json = valid_json();
  json["qkey"] = 0x80000000U;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(json.dump()); },
                                      {"qkey", "controlled"}));
  json = valid_json();
  json["lid"] = 0x10000;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(json.dump()); },
                                      {"lid", "65536"}));
  json = valid_json();
  json["mtu"] = 1500;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(json.dump()); },
                                      {"mtu", "1500", "not a path MTU"}));
  json = valid_json();
  json["gid"] = "10.0.0.1";
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(json.dump()); },
                                      {"gid", "not a GID"}));
  json = valid_json();
  json["gid"] = 5;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_json(json.dump()); },
                                      {"gid", "not a string"}));
}

TEST(UdAddressBytes, RoundTripsWithTheDocumentedLayout) {
  const auto bytes = sample().to_bytes();
  EXPECT_EQ(ibv::UdAddress::from_bytes(bytes), sample());
  EXPECT_EQ(byte_at(bytes, 0), ibv::UdAddress::kWireVersion);
  EXPECT_EQ(byte_at(bytes, 1), 5);  // MTU code of 4096
  EXPECT_EQ(byte_at(bytes, 2), 0xBE);
  EXPECT_EQ(byte_at(bytes, 3), 0xEF);
  EXPECT_EQ(byte_at(bytes, 4), 0x00);  // QPN, big-endian
  EXPECT_EQ(byte_at(bytes, 5), 0x12);
  EXPECT_EQ(byte_at(bytes, 6), 0x34);
  EXPECT_EQ(byte_at(bytes, 7), 0x5A);
  EXPECT_EQ(byte_at(bytes, 8), 0x11);  // Q_Key
  EXPECT_EQ(byte_at(bytes, 11), 0x11);
  EXPECT_EQ(byte_at(bytes, 22), 0xFF);  // ::ffff:10.0.0.2
  EXPECT_EQ(byte_at(bytes, 24), 10);
  EXPECT_EQ(byte_at(bytes, 27), 2);
}

TEST(UdAddressBytes, RefusesEveryOutOfRangeField) {
  const auto good = sample().to_bytes();
  std::vector<std::byte> shorter(good.begin(), good.end() - 1);
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_bytes(shorter); },
                                      {"expected 28 bytes, got 27"}));
  auto bytes = good;
  bytes[0] = std::byte{2};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_bytes(bytes); },
                                      {"unknown wire version 2"}));
  for (const int code : {0, 6, 255}) {
    bytes = good;
    bytes[1] = static_cast<std::byte>(code);
    EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_bytes(bytes); },
                                        {"MTU code", std::to_string(code)}));
  }
  bytes = good;
  bytes[4] = std::byte{1};  // QPN 0x0112345A
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_bytes(bytes); },
                                      {"QPN", "24 bits"}));
  bytes = good;
  bytes[8] = std::byte{0x80};  // Q_Key 0x91111111
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::UdAddress::from_bytes(bytes); },
                                      {"Q_Key", "bit 31"}));
}

TEST(UdAddress, ToStringNamesEveryField) {
  EXPECT_EQ(sample().to_string(),
            "UD QPN 0x12345a Q_Key 0x11111111 LID 48879 GID ::ffff:10.0.0.2 MTU 4096");
}

TEST(QKey, RefusesControlledKeys) {
  EXPECT_EQ(ibv::QKey(0x7FFFFFFF).value(), 0x7FFFFFFFU);
  EXPECT_EQ(ibv::QKey::default_value().value(), 0x11111111U);
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::QKey(0x80000000U); }, {"bit 31"}));
}

// --- GlobalRouteHeader ------------------------------------------------------------------------

std::array<std::byte, 40> ipv4_grh(bool valid_checksum) {
  std::array<std::byte, 40> grh{};
  const std::array<std::uint8_t, 20> header = {0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40,
                                               0x00, 0x40, 0x11, 0x00, 0x00, 10,   0,
                                               0,    1,    10,   0,    0,    2};
  for (std::size_t i = 0; i < header.size(); ++i) grh[20 + i] = std::byte{header[i]};
  // The IPv4 header checksum over the 20 bytes.
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < 20; i += 2) {
    sum += (static_cast<std::uint32_t>(header[i]) << 8U) | header[i + 1];
  }
  while ((sum >> 16U) != 0) sum = (sum & 0xFFFFU) + (sum >> 16U);
  const auto checksum = static_cast<std::uint16_t>(~sum & 0xFFFFU);
  grh[30] = static_cast<std::byte>(checksum >> 8U);
  grh[31] = static_cast<std::byte>(valid_checksum ? (checksum & 0xFFU) : ((checksum + 1) & 0xFFU));
  return grh;
}

TEST(GlobalRouteHeader, ReadsRoceV2Ipv4FromTheLastTwentyBytes) {
  const auto bytes = ipv4_grh(true);
  const ibv::GlobalRouteHeader grh{std::span<const std::byte, 40>(bytes)};
  EXPECT_TRUE(grh.is_ipv4());
  EXPECT_EQ(grh.source_gid(), ibv::Gid::from_string("::ffff:10.0.0.1"));
  EXPECT_EQ(grh.destination_gid(), ibv::Gid::from_string("::ffff:10.0.0.2"));
  ASSERT_EQ(grh.ipv4_header().size(), 20U);
  EXPECT_EQ(std::to_integer<int>(grh.ipv4_header()[0]), 0x45);
}

TEST(GlobalRouteHeader, ReadsIpv6) {
  std::array<std::byte, 40> bytes{};
  bytes[0] = std::byte{0x60};
  const auto source = ibv::Gid::from_string("fe80::1");
  const auto destination = ibv::Gid::from_string("ff0e::1234");
  for (std::size_t i = 0; i < 16; ++i) {
    bytes[8 + i] = std::byte{source.bytes()[i]};
    bytes[24 + i] = std::byte{destination.bytes()[i]};
  }
  const ibv::GlobalRouteHeader grh{std::span<const std::byte, 40>(bytes)};
  EXPECT_FALSE(grh.is_ipv4());
  EXPECT_EQ(grh.source_gid(), source);
  EXPECT_EQ(grh.destination_gid(), destination);
  EXPECT_TRUE(grh.ipv4_header().empty());
}

TEST(GlobalRouteHeader, TakesAnIpv6VersionWithAValidIpv4HeaderAsIpv4AsRdmaCoreDoes) {
  auto bytes = ipv4_grh(true);
  bytes[0] = std::byte{0x60};
  EXPECT_TRUE(ibv::GlobalRouteHeader(std::span<const std::byte, 40>(bytes)).is_ipv4());
  bytes = ipv4_grh(false);
  bytes[0] = std::byte{0x60};
  EXPECT_FALSE(ibv::GlobalRouteHeader(std::span<const std::byte, 40>(bytes)).is_ipv4());
}

}  // namespace
