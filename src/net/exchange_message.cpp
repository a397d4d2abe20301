// SPDX-License-Identifier: MIT
// The exchanger's message framing: encoding a header and checking a received one field by
// field, with messages that name the sender and exactly what is wrong.
#include "ibv/net/exchange_message.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <string>

#include "detail/big_endian.hpp"
#include "ibv/error.hpp"

namespace ibv::net {
namespace {

// Offsets of the header fields.
constexpr std::size_t kMagicAt = 0;
constexpr std::size_t kVersionAt = 4;
constexpr std::size_t kKindAt = 5;
constexpr std::size_t kReservedAt = 6;
constexpr std::size_t kSenderAt = 8;
constexpr std::size_t kWorldSizeAt = 12;
constexpr std::size_t kSequenceAt = 16;
constexpr std::size_t kLengthAt = 20;

[[noreturn]] void violation(const HeaderExpectation& expected, const std::string& problem,
                            std::string_view hint = {}) {
  throw Error(ErrorKind::protocol, expected.operation, EPROTO,
              std::string(expected.peer) + " " + problem, hint);
}

std::uint32_t u32_at(std::span<const std::byte> bytes, std::size_t offset) {
  return static_cast<std::uint32_t>(detail::get_big_endian(&bytes[offset], 4));
}

// "0x47455420", and " (it reads \"GET \")" where all four bytes are printable ASCII.
std::string describe_magic(std::span<const std::byte> magic) {
  std::array<char, 16> hex{};
  std::snprintf(hex.data(), hex.size(), "0x%08x",
                static_cast<unsigned>(detail::get_big_endian(magic.data(), 4)));
  std::string text = hex.data();
  const bool printable = std::all_of(magic.begin(), magic.end(), [](std::byte b) {
    const auto c = std::to_integer<unsigned>(b);
    return c >= 0x20 && c < 0x7f;
  });
  if (printable) {
    text += " (it reads \"";
    for (const std::byte b : magic) text += static_cast<char>(std::to_integer<unsigned>(b));
    text += "\")";
  }
  return text;
}

void check_magic_version_kind(std::span<const std::byte> received,
                              const HeaderExpectation& expected) {
  if (received.size() >= kMagicAt + 4 &&
      !std::equal(MessageHeader::kMagic.begin(), MessageHeader::kMagic.end(),
                  received.begin() + kMagicAt)) {
    violation(expected,
              "sent a message with magic " + describe_magic(received.subspan(kMagicAt, 4)) +
                  " instead of \"IBVX\" (not an ibverbs-cpp exchanger?)",
              "check that the configured host and port belong to a rank of this job and not to "
              "another service");
  }
  if (received.size() > kVersionAt) {
    const auto version = std::to_integer<unsigned>(received[kVersionAt]);
    if (version != MessageHeader::kVersion) {
      violation(expected,
                "speaks exchanger protocol version " + std::to_string(version) +
                    "; this library speaks version " + std::to_string(MessageHeader::kVersion),
                "run the same ibverbs-cpp version on every rank");
    }
  }
  if (received.size() > kKindAt) {
    const auto kind = std::to_integer<unsigned>(received[kKindAt]);
    const bool abort_here = expected.accept_abort && expected.kind == MessageKind::data;
    if (kind != static_cast<unsigned>(MessageKind::hello) &&
        kind != static_cast<unsigned>(MessageKind::data) &&
        (kind != static_cast<unsigned>(MessageKind::abort) || !abort_here)) {
      violation(expected, "sent a message of unknown kind " + std::to_string(kind) +
                              (abort_here ? " (1 is hello, 2 is data, 3 is abort)"
                                          : " (1 is hello, 2 is data)"));
    }
    if (kind != static_cast<unsigned>(expected.kind) &&
        kind != static_cast<unsigned>(MessageKind::abort)) {
      violation(expected, expected.kind == MessageKind::hello
                              ? std::string("sent a data message before introducing itself with "
                                            "a hello")
                              : std::string("sent a hello where a data message was expected (a "
                                            "second hello on one connection)"));
    }
  }
  if (received.size() >= kReservedAt + 2) {
    const auto reserved = detail::get_big_endian(&received[kReservedAt], 2);
    if (reserved != 0) {
      violation(expected, "sent a header whose reserved bytes are " + std::to_string(reserved) +
                              " instead of zero");
    }
  }
}

void check_ranks(std::span<const std::byte> received, const HeaderExpectation& expected) {
  if (received.size() < kWorldSizeAt + 4) return;
  const std::uint32_t world_size = u32_at(received, kWorldSizeAt);
  if (world_size != expected.world_size) {
    violation(expected,
              "has a world size of " + std::to_string(world_size) + " but ours is " +
                  std::to_string(expected.world_size),
              "every rank must load the same network configuration");
  }
  const std::uint32_t sender = u32_at(received, kSenderAt);
  if (sender >= world_size) {
    violation(expected, "claims to be rank " + std::to_string(sender) +
                            ", an unknown rank: the world size is " + std::to_string(world_size));
  }
  if (expected.kind == MessageKind::hello) {
    if (sender == expected.receiver_rank) {
      violation(expected,
                "introduced itself as rank " + std::to_string(sender) + ", which is our own rank",
                "either two processes have this rank, or a dial meant for another rank reached "
                "this port: ranks of one machine that share a port must listen on distinct "
                "addresses (ExchangerOptions::listen_address)");
    }
    if (sender > expected.receiver_rank && expected.hello_from == HelloFrom::lower_rank) {
      violation(expected, "introduced itself as rank " + std::to_string(sender) +
                              ", a HIGHER rank than ours (" +
                              std::to_string(expected.receiver_rank) + "): only lower ranks dial");
    }
  } else if (sender != expected.sender_rank) {
    violation(expected, "sent a message as rank " + std::to_string(sender) +
                            " on the connection of rank " + std::to_string(expected.sender_rank));
  }
}

void check_sequence_and_length(std::span<const std::byte> received,
                               const HeaderExpectation& expected) {
  if (received.size() >= kSequenceAt + 4) {
    const std::uint32_t sequence = u32_at(received, kSequenceAt);
    const std::uint32_t wanted = expected.kind == MessageKind::hello ? 0 : expected.sequence;
    // An abort ends whatever collective the receiver is in: its number does not matter.
    const bool abort =
        std::to_integer<unsigned>(received[kKindAt]) == static_cast<unsigned>(MessageKind::abort);
    if (sequence != wanted && !abort) {
      if (expected.kind == MessageKind::hello) {
        violation(expected, "sent a hello with sequence number " + std::to_string(sequence) +
                                " instead of 0");
      }
      violation(expected,
                "sent sequence number " + std::to_string(sequence) + " but this is exchange " +
                    std::to_string(wanted) +
                    " here: the ranks disagree on how many exchanges they did",
                "every rank must make the same calls, equally often");
    }
  }
  if (received.size() >= kLengthAt + 4) {
    const std::uint32_t length = u32_at(received, kLengthAt);
    if (expected.kind == MessageKind::hello && length != 0) {
      violation(expected, "sent a hello with a " + std::to_string(length) +
                              "-byte payload; a hello carries none");
    }
    if (length > expected.max_payload) {
      violation(expected,
                "sent a " + std::to_string(length) + "-byte message; the maximum is " +
                    std::to_string(expected.max_payload) + " (" + std::string(expected.limit) + ")",
                "raise " + std::string(expected.limit) + " on every rank, or send less");
    }
  }
}

}  // namespace

std::string_view to_string(MessageKind kind) noexcept {
  switch (kind) {
    case MessageKind::hello: return "hello";
    case MessageKind::data: return "data";
    case MessageKind::abort: return "abort";
  }
  return "unknown";
}

std::array<std::byte, MessageHeader::kSize> MessageHeader::encode() const noexcept {
  std::array<std::byte, kSize> bytes{};
  std::copy(kMagic.begin(), kMagic.end(), bytes.begin() + kMagicAt);
  bytes[kVersionAt] = std::byte{kVersion};
  bytes[kKindAt] = static_cast<std::byte>(kind);
  detail::put_big_endian(&bytes[kSenderAt], sender_rank, 4);
  detail::put_big_endian(&bytes[kWorldSizeAt], world_size, 4);
  detail::put_big_endian(&bytes[kSequenceAt], sequence, 4);
  detail::put_big_endian(&bytes[kLengthAt], payload_length, 4);
  return bytes;
}

std::optional<MessageHeader> decode_header(std::span<const std::byte> received,
                                           const HeaderExpectation& expected) {
  if (received.size() > MessageHeader::kSize) {
    throw_invalid_argument("decode_header", "received",
                           "holds " + std::to_string(received.size()) + " bytes; a header has " +
                               std::to_string(MessageHeader::kSize));
  }
  check_magic_version_kind(received, expected);
  check_ranks(received, expected);
  check_sequence_and_length(received, expected);
  if (received.size() < MessageHeader::kSize) return std::nullopt;
  MessageHeader header;
  header.kind = static_cast<MessageKind>(std::to_integer<std::uint8_t>(received[kKindAt]));
  header.sender_rank = u32_at(received, kSenderAt);
  header.world_size = u32_at(received, kWorldSizeAt);
  header.sequence = u32_at(received, kSequenceAt);
  header.payload_length = u32_at(received, kLengthAt);
  return header;
}

}  // namespace ibv::net
