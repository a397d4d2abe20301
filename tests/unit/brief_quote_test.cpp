// SPDX-License-Identifier: MIT
// Tests how error messages quote outside text (detail::quote_briefly), and that the entry points
// that take text from a peer or a hosts file quote it briefly: a 5 MB field gives a short what().
#include "detail/brief_quote.hpp"

#include <cstddef>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ibv/net/network_config.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/gid.hpp"
#include "support/error_matchers.hpp"

namespace {

using ibv::detail::kQuotedBytes;
using ibv::detail::quote_briefly;
using ibv_test::error_of;

constexpr std::size_t kHuge = 5'000'000;
// A message about a huge field: the field's first bytes, its length, the reason.
constexpr std::size_t kShortMessage = 400;

TEST(QuoteBriefly, QuotesShortTextWhole) {
  EXPECT_EQ(quote_briefly(""), "\"\"");
  EXPECT_EQ(quote_briefly("fe80::1"), "\"fe80::1\"");
  const std::string exactly(kQuotedBytes, 'a');
  EXPECT_EQ(quote_briefly(exactly), "\"" + exactly + "\"");
}

TEST(QuoteBriefly, CutsLongTextAndSaysHowLongItWas) {
  const std::string longer(kQuotedBytes + 1, 'b');
  EXPECT_EQ(quote_briefly(longer), "\"" + std::string(kQuotedBytes, 'b') + "...\" (" +
                                       std::to_string(longer.size()) + " bytes)");
  EXPECT_LT(quote_briefly(std::string(kHuge, 'c')).size(), 2 * kQuotedBytes);
}

TEST(QuoteBriefly, ShowsBytesThatAreNotPrintableAsHex) {
  EXPECT_EQ(quote_briefly(std::string("a\nb\0c\"d\\e\x7f\xff", 11)),
            "\"a\\x0ab\\x00c\\x22d\\x5ce\\x7f\\xff\"");
}

TEST(QuoteBriefly, AHugeGidTextGivesAShortMessage) {
  const auto error = error_of([] { (void)ibv::Gid::from_string(std::string(kHuge, '1')); });
  ASSERT_TRUE(error.has_value());
  const std::string what = error->what();
  EXPECT_LT(what.size(), kShortMessage) << what.substr(0, kShortMessage);
  EXPECT_NE(what.find("(5000000 bytes)"), std::string::npos) << what.substr(0, kShortMessage);
}

TEST(QuoteBriefly, AHugeGidFieldFromAPeerGivesAShortMessage) {
  const nlohmann::json endpoint = {
      {"qpn", 1}, {"lid", 0}, {"psn", 0}, {"gid", std::string(kHuge, 'f')}};
  const auto error = error_of([&] { (void)ibv::Endpoint::from_json(endpoint.dump()); });
  ASSERT_TRUE(error.has_value());
  const std::string what = error->what();
  EXPECT_LT(what.size(), kShortMessage) << what.substr(0, kShortMessage);
  EXPECT_NE(what.find("field \"gid\" is not a GID"), std::string::npos) << what;
}

TEST(QuoteBriefly, AHugeHostnameOrUnknownFieldInAHostsFileGivesAShortMessage) {
  nlohmann::json host = {
      {"hostname", std::string(kHuge, 'h')}, {"port", 1}, {"ibdev", "rxe0"}, {"rankid", 0}};
  auto error = error_of([&] {
    (void)ibv::net::NetworkConfig::from_json(nlohmann::json{{"hosts", {host}}}.dump());
  });
  ASSERT_TRUE(error.has_value());
  std::string what = error->what();
  EXPECT_LT(what.size(), kShortMessage) << what.substr(0, kShortMessage);
  EXPECT_NE(what.find("is longer than 253 bytes"), std::string::npos) << what;

  host["hostname"] = "node01";
  host[std::string(kHuge, 'k')] = 1;
  error = error_of([&] {
    (void)ibv::net::NetworkConfig::from_json(nlohmann::json{{"hosts", {host}}}.dump());
  });
  ASSERT_TRUE(error.has_value());
  what = error->what();
  EXPECT_LT(what.size(), kShortMessage) << what.substr(0, kShortMessage);
  EXPECT_NE(what.find("unknown field"), std::string::npos) << what;
}

}  // namespace
