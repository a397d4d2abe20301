// SPDX-License-Identifier: MIT
// Tests the exchanger's message framing without sockets: the exact header layout, the round
// trip, incremental checking of a header that is still arriving, and every validation rule with
// the words of its message.
#include "ibv/net/exchange_message.hpp"

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"

namespace {

using ibv::ErrorKind;
using ibv::net::decode_header;
using ibv::net::HeaderExpectation;
using ibv::net::MessageHeader;
using ibv::net::MessageKind;
using ibv_test::throws_error;

using HeaderBytes = std::array<std::byte, MessageHeader::kSize>;

constexpr std::string_view kPeer = "rank 2 at node03:18515";

// What rank 1 of 4 expects from rank 2 in exchange 5.
HeaderExpectation data_expectation() {
  return {.kind = MessageKind::data,
          .world_size = 4,
          .receiver_rank = 1,
          .sender_rank = 2,
          .sequence = 5,
          .max_payload = 1048576,
          .peer = kPeer,
          .operation = "Exchanger::exchange"};
}

// What rank 2 of 4 expects of a connection that has not introduced itself yet.
HeaderExpectation hello_expectation() {
  return {.kind = MessageKind::hello,
          .world_size = 4,
          .receiver_rank = 2,
          .sender_rank = 0,
          .sequence = 5,  // ignored: a hello always carries 0
          .max_payload = 1048576,
          .peer = "a connection from 10.0.0.3:41234",
          .operation = "Exchanger::exchange"};
}

MessageHeader data_header() {
  return {.kind = MessageKind::data,
          .sender_rank = 2,
          .world_size = 4,
          .sequence = 5,
          .payload_length = 1000};
}

MessageHeader hello_header(std::uint32_t sender = 1) {
  return {.kind = MessageKind::hello, .sender_rank = sender, .world_size = 4};
}

std::optional<MessageHeader> decode(const HeaderBytes& bytes, const HeaderExpectation& expected) {
  return decode_header(bytes, expected);
}

HeaderBytes with_u32(HeaderBytes bytes, std::size_t offset, std::uint32_t value) {
  for (std::size_t i = 0; i < 4; ++i) {
    bytes[offset + i] = static_cast<std::byte>((value >> (8U * (3 - i))) & 0xffU);
  }
  return bytes;
}

HeaderBytes with_byte(HeaderBytes bytes, std::size_t offset, std::uint8_t value) {
  bytes[offset] = std::byte{value};
  return bytes;
}

// --- layout and round trip -------------------------------------------------------------------

TEST(ExchangeMessage, HeaderLayoutIsBigEndianWithMagicAndVersion) {
  const MessageHeader header{.kind = MessageKind::data,
                             .sender_rank = 0x01020304,
                             .world_size = 0x05060708,
                             .sequence = 0x090A0B0C,
                             .payload_length = 0x0D0E0F10};
  const HeaderBytes bytes = header.encode();
  const std::array<std::uint8_t, MessageHeader::kSize> expected = {
      'I', 'B', 'V', 'X', 1, 2, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(std::to_integer<std::uint8_t>(bytes[i]), expected[i]) << "byte " << i;
  }
  EXPECT_EQ(std::to_integer<std::uint8_t>(hello_header().encode()[5]), 1);
}

TEST(ExchangeMessage, DataHeaderRoundTrips) {
  const auto decoded = decode(data_header().encode(), data_expectation());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(*decoded, data_header());
}

TEST(ExchangeMessage, HelloFromEveryLowerRankRoundTrips) {
  for (std::uint32_t sender = 0; sender < 2; ++sender) {
    const auto decoded = decode(hello_header(sender).encode(), hello_expectation());
    ASSERT_TRUE(decoded.has_value()) << sender;
    EXPECT_EQ(*decoded, hello_header(sender));
  }
}

TEST(ExchangeMessage, PayloadOfExactlyTheMaximumIsAccepted) {
  MessageHeader header = data_header();
  header.payload_length = 1048576;
  EXPECT_TRUE(decode(header.encode(), data_expectation()).has_value());
  header.payload_length = 0;
  EXPECT_TRUE(decode(header.encode(), data_expectation()).has_value());
}

TEST(ExchangeMessage, IncompleteValidHeaderIsNotYetDecoded) {
  const HeaderBytes bytes = data_header().encode();
  for (std::size_t size = 0; size < MessageHeader::kSize; ++size) {
    EXPECT_FALSE(decode_header(std::span(bytes).first(size), data_expectation()).has_value())
        << size;
  }
}

TEST(ExchangeMessage, LongerInputThanAHeaderIsInvalidArgument) {
  const std::array<std::byte, MessageHeader::kSize + 1> bytes{};
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [&] { static_cast<void>(decode_header(bytes, data_expectation())); },
                           {"25 bytes", "24"}));
}

TEST(ExchangeMessage, KindNames) {
  EXPECT_EQ(ibv::net::to_string(MessageKind::hello), "hello");
  EXPECT_EQ(ibv::net::to_string(MessageKind::data), "data");
  EXPECT_EQ(ibv::net::to_string(static_cast<MessageKind>(9)), "unknown");
}

// --- validation --------------------------------------------------------------------------------

TEST(ExchangeMessage, GarbageIsRejectedAsSoonAsItsFirstFourBytesArrive) {
  const std::array<std::byte, 4> get = {std::byte{'G'}, std::byte{'E'}, std::byte{'T'},
                                        std::byte{' '}};
  EXPECT_FALSE(decode_header(std::span(get).first(3), hello_expectation()).has_value());
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode_header(get, hello_expectation())); },
                           {"Exchanger::exchange failed",
                            "a connection from 10.0.0.3:41234 sent a message with magic 0x47455420",
                            "\"GET \"", "instead of \"IBVX\"", "not an ibverbs-cpp exchanger"}));
}

TEST(ExchangeMessage, WrongMagicInAnOtherwiseValidHeader) {
  const HeaderBytes bytes = with_byte(data_header().encode(), 3, 'Y');
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, data_expectation())); },
                           {std::string(kPeer), "magic 0x49425659", "IBVX"}));
}

TEST(ExchangeMessage, UnprintableMagicIsShownInHexOnly) {
  const HeaderBytes bytes = with_u32(data_header().encode(), 0, 0x00FF0102);
  const auto error =
      ibv_test::error_of([&] { static_cast<void>(decode(bytes, data_expectation())); });
  ASSERT_TRUE(error.has_value());
  const std::string what = error->what();
  EXPECT_NE(what.find("magic 0x00ff0102 instead"), std::string::npos) << what;
  EXPECT_EQ(what.find("it reads"), std::string::npos) << what;
}

TEST(ExchangeMessage, OtherVersionIsRejected) {
  const HeaderBytes bytes = with_byte(data_header().encode(), 4, 2);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, data_expectation())); },
                           {std::string(kPeer), "version 2", "speaks version 1"}));
}

TEST(ExchangeMessage, UnknownKindIsRejected) {
  const HeaderBytes bytes = with_byte(data_header().encode(), 5, 7);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, data_expectation())); },
                           {"unknown kind 7"}));
}

TEST(ExchangeMessage, DataBeforeHelloIsRejected) {
  MessageHeader header = data_header();
  header.sender_rank = 0;
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(header.encode(), hello_expectation())); },
                           {"data message before introducing itself"}));
}

TEST(ExchangeMessage, SecondHelloIsRejected) {
  MessageHeader header = hello_header(2);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(header.encode(), data_expectation())); },
                           {"hello where a data message was expected"}));
}

TEST(ExchangeMessage, NonZeroReservedBytesAreRejected) {
  const HeaderBytes bytes = with_byte(data_header().encode(), 7, 1);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, data_expectation())); },
                           {"reserved bytes are 1 instead of zero"}));
}

TEST(ExchangeMessage, OtherWorldSizeIsRejected) {
  const HeaderBytes bytes = with_u32(data_header().encode(), 12, 5);
  EXPECT_TRUE(throws_error(
      ErrorKind::protocol, [&] { static_cast<void>(decode(bytes, data_expectation())); },
      {std::string(kPeer), "world size of 5 but ours is 4", "same network configuration"}));
}

TEST(ExchangeMessage, RankOutsideTheWorldIsAnUnknownRank) {
  const HeaderBytes bytes = with_u32(hello_header().encode(), 8, 7);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, hello_expectation())); },
                           {"claims to be rank 7", "unknown rank", "world size is 4"}));
}

TEST(ExchangeMessage, HelloFromAHigherRankIsRejected) {
  EXPECT_TRUE(throws_error(
      ErrorKind::protocol,
      [&] { static_cast<void>(decode(hello_header(3).encode(), hello_expectation())); },
      {"introduced itself as rank 3", "HIGHER rank than ours (2)", "only lower ranks dial"}));
}

TEST(ExchangeMessage, HelloClaimingOurOwnRankIsRejected) {
  EXPECT_TRUE(throws_error(
      ErrorKind::protocol,
      [&] { static_cast<void>(decode(hello_header(2).encode(), hello_expectation())); },
      {"introduced itself as rank 2", "our own rank"}));
}

TEST(ExchangeMessage, DataFromAnotherRankThanTheConnectionsIsRejected) {
  const HeaderBytes bytes = with_u32(data_header().encode(), 8, 3);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, data_expectation())); },
                           {"sent a message as rank 3 on the connection of rank 2"}));
}

TEST(ExchangeMessage, HelloMustCarrySequenceZero) {
  const HeaderBytes bytes = with_u32(hello_header().encode(), 16, 5);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, hello_expectation())); },
                           {"hello with sequence number 5 instead of 0"}));
}

TEST(ExchangeMessage, OtherSequenceNumberIsRejected) {
  const HeaderBytes bytes = with_u32(data_header().encode(), 16, 6);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, data_expectation())); },
                           {std::string(kPeer), "sequence number 6 but this is exchange 5",
                            "disagree on how many exchanges"}));
}

TEST(ExchangeMessage, HelloWithPayloadIsRejected) {
  const HeaderBytes bytes = with_u32(hello_header().encode(), 20, 12);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, hello_expectation())); },
                           {"hello with a 12-byte payload"}));
}

TEST(ExchangeMessage, OversizedPayloadIsRejectedWithTheLimitNamed) {
  const HeaderBytes bytes = with_u32(data_header().encode(), 20, 5000000);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(bytes, data_expectation())); },
                           {"rank 2 at node03:18515 sent a 5000000-byte message; the maximum is "
                            "1048576 (ExchangerOptions::max_message_size)"}));
  const HeaderBytes huge = with_u32(data_header().encode(), 20, 0xFFFFFFFF);
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [&] { static_cast<void>(decode(huge, data_expectation())); },
                           {"4294967295-byte message"}));
}

TEST(ExchangeMessage, ErrorsCarryEproto) {
  const HeaderBytes bytes = with_byte(data_header().encode(), 0, 'X');
  const auto error =
      ibv_test::error_of([&] { static_cast<void>(decode(bytes, data_expectation())); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->errno_value(), EPROTO);
  EXPECT_EQ(error->operation(), "Exchanger::exchange");
}

}  // namespace
