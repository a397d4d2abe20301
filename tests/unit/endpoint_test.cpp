// SPDX-License-Identifier: MIT
// Tests Endpoint's wire forms: JSON and the 28-byte binary form, their round trips, exact
// layout and the errors for malformed input.
#include "ibv/verbs/endpoint.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_invalid_argument;

ibv::Endpoint sample() {
  ibv::Endpoint endpoint;
  endpoint.qp_number = 0x12345A;
  endpoint.lid = 0xBEEF;
  endpoint.gid = ibv::Gid::from_string("fe80::102:304:506:708");
  endpoint.psn = 0xABCDEF;
  return endpoint;
}

std::uint8_t byte_at(const std::array<std::byte, ibv::Endpoint::kWireSize>& bytes,
                     std::size_t index) {
  return std::to_integer<std::uint8_t>(bytes.at(index));
}

// A JSON object with every field valid, for tests that then break one of them.
nlohmann::json valid_json() {
  return {{"qpn", 1234}, {"lid", 7}, {"gid", "::ffff:10.0.2.15"}, {"psn", 5678}};
}

// --- JSON ------------------------------------------------------------------------------------

TEST(EndpointJson, RoundTrips) {
  const auto endpoint = sample();
  EXPECT_EQ(ibv::Endpoint::from_json(endpoint.to_json()), endpoint);

  const ibv::Endpoint zero;
  EXPECT_EQ(ibv::Endpoint::from_json(zero.to_json()), zero);
}

TEST(EndpointJson, RoundTripsTheLargestValues) {
  ibv::Endpoint endpoint;
  endpoint.qp_number = 0xFFFFFF;
  endpoint.lid = 0xFFFF;
  endpoint.gid = ibv::Gid::from_string("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff");
  endpoint.psn = 0xFFFFFF;
  EXPECT_EQ(ibv::Endpoint::from_json(endpoint.to_json()), endpoint);
}

TEST(EndpointJson, HasTheDocumentedFields) {
  ibv::Endpoint endpoint;
  endpoint.qp_number = 1234;
  endpoint.gid = ibv::Gid::from_string("::ffff:10.0.2.15");
  endpoint.psn = 5678;
  const auto json = nlohmann::json::parse(endpoint.to_json());
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json.size(), 4U);
  EXPECT_EQ(json.at("qpn"), 1234);
  EXPECT_EQ(json.at("lid"), 0);
  EXPECT_EQ(json.at("gid"), "::ffff:10.0.2.15");
  EXPECT_EQ(json.at("psn"), 5678);
}

TEST(EndpointJson, AcceptsFieldsInAnyOrderWithWhitespace) {
  const auto endpoint = ibv::Endpoint::from_json(
      R"(  { "psn" : 5678, "gid" : "::ffff:10.0.2.15", "lid" : 7, "qpn" : 1234 }  )");
  EXPECT_EQ(endpoint.qp_number, 1234U);
  EXPECT_EQ(endpoint.lid, 7);
  EXPECT_EQ(endpoint.psn, 5678U);
  EXPECT_EQ(endpoint.gid.to_string(), "::ffff:10.0.2.15");
}

TEST(EndpointJson, AcceptsTheLimits) {
  auto json = valid_json();
  json["qpn"] = 0xFFFFFF;
  json["psn"] = 0xFFFFFF;
  json["lid"] = 65535;
  const auto endpoint = ibv::Endpoint::from_json(json.dump());
  EXPECT_EQ(endpoint.qp_number, 0xFFFFFFU);
  EXPECT_EQ(endpoint.psn, 0xFFFFFFU);
  EXPECT_EQ(endpoint.lid, 65535);
}

TEST(EndpointJson, RejectsTextThatIsNotJson) {
  for (const char* text : {"", "not json", "{", R"({"qpn": })", "{qpn: 1}"}) {
    EXPECT_TRUE(throws_invalid_argument([text] { (void)ibv::Endpoint::from_json(text); },
                                        {"Endpoint::from_json", "JSON"}))
        << text;
  }
}

TEST(EndpointJson, RejectsJsonThatIsNotAnObject) {
  for (const char* text : {"[1, 2, 3]", "42", R"("qpn")", "null", "true"}) {
    EXPECT_TRUE(throws_invalid_argument([text] { (void)ibv::Endpoint::from_json(text); },
                                        {"not an object"}))
        << text;
  }
}

TEST(EndpointJson, RejectsEachMissingFieldByName) {
  for (const char* field : {"qpn", "lid", "gid", "psn"}) {
    auto json = valid_json();
    json.erase(field);
    const auto text = json.dump();
    EXPECT_TRUE(throws_invalid_argument([&text] { (void)ibv::Endpoint::from_json(text); },
                                        {std::string("\"") + field + "\"", "missing"}))
        << text;
  }
}

TEST(EndpointJson, RejectsWrongTypesByName) {
  struct Case {
    const char* field;
    nlohmann::json value;
  };
  const std::vector<Case> cases = {
      {"qpn", "1234"},
      {"qpn", 1.5},
      {"qpn", true},
      {"qpn", nullptr},
      {"lid", "7"},
      {"lid", 7.25},
      {"lid", nlohmann::json::array()},
      {"psn", "5678"},
      {"psn", false},
      {"psn", nlohmann::json::object()},
      {"gid", 42},
      {"gid", true},
      {"gid", nlohmann::json::array({"fe80::1"})},
  };
  for (const auto& c : cases) {
    auto json = valid_json();
    json[c.field] = c.value;
    const auto text = json.dump();
    EXPECT_TRUE(throws_invalid_argument([&text] { (void)ibv::Endpoint::from_json(text); },
                                        {std::string("\"") + c.field + "\""}))
        << text;
  }
}

TEST(EndpointJson, RejectsNegativeNumbersByName) {
  for (const char* field : {"qpn", "lid", "psn"}) {
    auto json = valid_json();
    json[field] = -1;
    const auto text = json.dump();
    EXPECT_TRUE(throws_invalid_argument([&text] { (void)ibv::Endpoint::from_json(text); },
                                        {std::string("\"") + field + "\""}))
        << text;
  }
}

TEST(EndpointJson, RejectsQpnAndPsnAbove24Bits) {
  for (const char* field : {"qpn", "psn"}) {
    auto json = valid_json();
    json[field] = 0x1000000;
    const auto text = json.dump();
    EXPECT_TRUE(throws_invalid_argument([&text] { (void)ibv::Endpoint::from_json(text); },
                                        {std::string("\"") + field + "\"", "16777216"}))
        << text;
  }
}

TEST(EndpointJson, RejectsHugeNumbersWithoutWrapping) {
  // 2^32 + 5 must not be truncated to 5, nor 2^64 (parsed as floating point) accepted.
  for (const char* number : {"4294967301", "18446744073709551615", "18446744073709551616"}) {
    const auto text = std::string(R"({"qpn":)") + number + R"(,"lid":0,"gid":"::","psn":0})";
    EXPECT_TRUE(
        throws_invalid_argument([&text] { (void)ibv::Endpoint::from_json(text); }, {"\"qpn\""}))
        << text;
  }
}

TEST(EndpointJson, RejectsLidAbove16Bits) {
  auto json = valid_json();
  json["lid"] = 65536;
  const auto text = json.dump();
  EXPECT_TRUE(throws_invalid_argument([&text] { (void)ibv::Endpoint::from_json(text); },
                                      {"\"lid\"", "65536"}));
}

TEST(EndpointJson, RejectsBadGidTextNamingTheField) {
  for (const char* gid : {"", "bogus", "10.0.2.15", "fe80::1::2", "12345::"}) {
    auto json = valid_json();
    json["gid"] = gid;
    const auto text = json.dump();
    // Like every other field error of from_json, the message names the field ("gid").
    EXPECT_TRUE(
        throws_invalid_argument([&text] { (void)ibv::Endpoint::from_json(text); }, {"\"gid\""}))
        << text;
  }
}

// --- binary ----------------------------------------------------------------------------------

TEST(EndpointBytes, RoundTrips) {
  const auto endpoint = sample();
  const auto bytes = endpoint.to_bytes();
  EXPECT_EQ(ibv::Endpoint::from_bytes(bytes), endpoint);

  const ibv::Endpoint zero;
  EXPECT_EQ(ibv::Endpoint::from_bytes(zero.to_bytes()), zero);
}

TEST(EndpointBytes, IsTwentyEightBytes) {
  EXPECT_EQ(ibv::Endpoint::kWireSize, 28U);
  EXPECT_EQ(sample().to_bytes().size(), 28U);
  EXPECT_EQ(ibv::Endpoint::kWireVersion, 1);
}

TEST(EndpointBytes, HasTheDocumentedBigEndianLayout) {
  const auto bytes = sample().to_bytes();
  EXPECT_EQ(byte_at(bytes, 0), 1);  // version
  EXPECT_EQ(byte_at(bytes, 1), 0);  // reserved
  // LID 0xBEEF at 2..3.
  EXPECT_EQ(byte_at(bytes, 2), 0xBE);
  EXPECT_EQ(byte_at(bytes, 3), 0xEF);
  // QPN 0x12345A at 4..7.
  EXPECT_EQ(byte_at(bytes, 4), 0x00);
  EXPECT_EQ(byte_at(bytes, 5), 0x12);
  EXPECT_EQ(byte_at(bytes, 6), 0x34);
  EXPECT_EQ(byte_at(bytes, 7), 0x5A);
  // PSN 0xABCDEF at 8..11.
  EXPECT_EQ(byte_at(bytes, 8), 0x00);
  EXPECT_EQ(byte_at(bytes, 9), 0xAB);
  EXPECT_EQ(byte_at(bytes, 10), 0xCD);
  EXPECT_EQ(byte_at(bytes, 11), 0xEF);
  // GID fe80::102:304:506:708 at 12..27, in network order.
  constexpr std::array<std::uint8_t, 16> kGid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0,
                                                 1,    2,    3, 4, 5, 6, 7, 8};
  for (std::size_t i = 0; i < kGid.size(); ++i) {
    EXPECT_EQ(byte_at(bytes, 12 + i), kGid[i]) << "GID byte " << i;
  }
}

TEST(EndpointBytes, ParsesHandWrittenBytes) {
  std::array<std::byte, 28> bytes{};
  bytes[0] = std::byte{1};
  bytes[2] = std::byte{0x01};
  bytes[3] = std::byte{0x02};  // LID 0x0102
  bytes[5] = std::byte{0xFF};
  bytes[6] = std::byte{0x00};
  bytes[7] = std::byte{0x01};  // QPN 0xFF0001
  bytes[9] = std::byte{0x00};
  bytes[10] = std::byte{0x10};
  bytes[11] = std::byte{0x20};  // PSN 0x001020
  bytes[22] = std::byte{0xff};
  bytes[23] = std::byte{0xff};
  bytes[24] = std::byte{10};
  bytes[25] = std::byte{0};
  bytes[26] = std::byte{2};
  bytes[27] = std::byte{15};
  const auto endpoint = ibv::Endpoint::from_bytes(bytes);
  EXPECT_EQ(endpoint.lid, 0x0102);
  EXPECT_EQ(endpoint.qp_number, 0xFF0001U);
  EXPECT_EQ(endpoint.psn, 0x001020U);
  EXPECT_EQ(endpoint.gid.to_string(), "::ffff:10.0.2.15");
}

TEST(EndpointBytes, RejectsWrongSizes) {
  const auto good = sample().to_bytes();
  const std::vector<std::byte> longer = [&good] {
    std::vector<std::byte> v(good.begin(), good.end());
    v.push_back(std::byte{0});
    return v;
  }();
  EXPECT_TRUE(throws_invalid_argument(
      [&good] { (void)ibv::Endpoint::from_bytes(std::span(good).first(27)); }, {"28", "27"}));
  EXPECT_TRUE(throws_invalid_argument([&longer] { (void)ibv::Endpoint::from_bytes(longer); },
                                      {"28", "29"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::Endpoint::from_bytes(std::span<const std::byte>()); }, {"28", "got 0"}));
}

TEST(EndpointBytes, RejectsUnknownVersions) {
  for (const int version : {0, 2, 255}) {
    auto bytes = sample().to_bytes();
    bytes[0] = static_cast<std::byte>(version);
    EXPECT_TRUE(throws_invalid_argument([&bytes] { (void)ibv::Endpoint::from_bytes(bytes); },
                                        {"version", std::to_string(version)}))
        << version;
  }
}

// Found by fuzz/exchange_message_fuzzer (fuzz/regressions/exchange_message/
// endpoint-reserved-byte): the reserved byte was ignored, so from_bytes accepted 255 byte strings
// for one endpoint and a re-encode silently changed them.
TEST(EndpointBytes, RejectsANonZeroReservedByte) {
  for (const int reserved : {1, 4, 0x80, 0xFF}) {
    auto bytes = sample().to_bytes();
    bytes[1] = static_cast<std::byte>(reserved);
    EXPECT_TRUE(throws_invalid_argument([&bytes] { (void)ibv::Endpoint::from_bytes(bytes); },
                                        {"reserved byte", std::to_string(reserved)}))
        << reserved;
  }
}

TEST(EndpointBytes, RejectsQpnWithBitsAbove24) {
  for (const int top : {0x01, 0x80, 0xFF}) {
    auto bytes = sample().to_bytes();
    bytes[4] = static_cast<std::byte>(top);
    EXPECT_TRUE(throws_invalid_argument([&bytes] { (void)ibv::Endpoint::from_bytes(bytes); },
                                        {"QPN", "24 bits"}))
        << top;
  }
}

TEST(EndpointBytes, RejectsPsnWithBitsAbove24) {
  for (const int top : {0x01, 0x80, 0xFF}) {
    auto bytes = sample().to_bytes();
    bytes[8] = static_cast<std::byte>(top);
    EXPECT_TRUE(throws_invalid_argument([&bytes] { (void)ibv::Endpoint::from_bytes(bytes); },
                                        {"PSN", "24 bits"}))
        << top;
  }
}

// --- text ------------------------------------------------------------------------------------

TEST(EndpointToString, ShowsEveryFieldInTheDocumentedForm) {
  ibv::Endpoint endpoint;
  endpoint.qp_number = 0x12a;
  endpoint.lid = 0;
  endpoint.gid = ibv::Gid::from_string("::ffff:10.0.2.15");
  endpoint.psn = 0x3f2a1b;
  EXPECT_EQ(endpoint.to_string(), "QPN 0x00012a LID 0 GID ::ffff:10.0.2.15 PSN 0x3f2a1b");
}

TEST(EndpointToString, IsNotTruncatedForTheLongestValues) {
  ibv::Endpoint endpoint;
  endpoint.qp_number = 0xFFFFFF;
  endpoint.lid = 65535;
  endpoint.gid = ibv::Gid::from_string("fe80:1234:5678:9abc:def0:1234:5678:9abc");
  endpoint.psn = 0xFFFFFF;
  EXPECT_EQ(endpoint.to_string(),
            "QPN 0xffffff LID 65535 GID fe80:1234:5678:9abc:def0:1234:5678:9abc PSN 0xffffff");
}

TEST(Endpoint, EqualityComparesEveryField) {
  const auto base = sample();
  auto other = base;
  EXPECT_EQ(other, base);
  other.qp_number ^= 1;
  EXPECT_NE(other, base);
  other = base;
  other.lid ^= 1;
  EXPECT_NE(other, base);
  other = base;
  other.psn ^= 1;
  EXPECT_NE(other, base);
  other = base;
  other.gid = ibv::Gid();
  EXPECT_NE(other, base);
}

}  // namespace
