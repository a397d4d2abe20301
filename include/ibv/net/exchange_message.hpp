// SPDX-License-Identifier: MIT
// The framing of the out-of-band TCP messages (ibv::net::Exchanger, ibv::net::Rendezvous) as pure
// logic: encoding a header, and decoding and validating one from the bytes received so far, with no
// sockets involved, so that every rule of the protocol can be tested on its own.
//
// Wire protocol, version 1
// ------------------------
// Every message is a fixed 24-byte header followed by `payload length` bytes of payload.
// Integers are unsigned and big-endian.
//
//   offset  size  field
//        0     4  magic: the ASCII bytes "IBVX"
//        4     1  version: 1
//        5     1  kind: 1 = hello, 2 = data, 3 = abort (rendezvous only)
//        6     2  reserved: zero
//        8     4  sender rank: 0 .. world size - 1
//       12     4  world size: the number of ranks in the sender's NetworkConfig
//       16     4  sequence number: how many exchanges the sender completed before this one
//       20     4  payload length in bytes
//
// Rank r listens on its configured port, accepts one connection from every LOWER rank and dials
// every HIGHER rank. The dialler first sends a hello (sequence number 0, empty payload) so that
// the acceptor learns who it is. Then each exchange sends exactly one data message each way on
// every connection, carrying the sender's contribution; the connections stay open for the
// following exchanges, whose sequence numbers count up from 0.
//
// The rendezvous (ibv/net/rendezvous.hpp) uses the same header on a star: every rank but 0 dials
// rank 0 and says hello; each collective is one data message to rank 0 and one back. Rank 0
// may answer with an abort instead, whose payload says why the job failed (see rendezvous.cpp).
//
// The receiver checks everything before it believes anything: the magic, version, kind and
// reserved bytes, a world size equal to its own, a sender rank below the world size and equal to
// the rank expected on that connection (for a hello: a rank LOWER than the receiver's, since only
// lower ranks dial), a sequence number equal to its own, and a payload length within its limit
// (before allocating anything for the payload). A hello must carry an empty payload.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace ibv::net {

/// The kind byte of a message.
enum class MessageKind : std::uint8_t {
  hello = 1,  ///< A dialler introduces itself: the first message on every connection.
  data = 2,   ///< One rank's contribution to one exchange.
  abort = 3,  ///< The rendezvous root ends the job; the payload says why (text).
};

/// Which ranks may send a hello: the mesh's lower ranks, or (the rendezvous root) any other.
enum class HelloFrom : std::uint8_t { lower_rank, any_other_rank };

/// "hello", "data" or "abort"; "unknown" for other values.
[[nodiscard]] std::string_view to_string(MessageKind kind) noexcept;

/// The fixed header in front of every message of the exchanger protocol (see the top of this
/// file for the layout).
struct MessageHeader {
  /// Size of the encoded header in bytes.
  static constexpr std::size_t kSize = 24;
  /// The first four bytes of every message: "IBVX".
  static constexpr std::array<std::byte, 4> kMagic = {std::byte{'I'}, std::byte{'B'},
                                                      std::byte{'V'}, std::byte{'X'}};
  /// The protocol version this library speaks.
  static constexpr std::uint8_t kVersion = 1;

  MessageKind kind = MessageKind::data;  ///< hello, data or abort.
  std::uint32_t sender_rank = 0;         ///< Rank of the sender.
  std::uint32_t world_size = 0;          ///< Number of ranks the sender knows of.
  std::uint32_t sequence = 0;            ///< The sender's exchange count (0 for a hello).
  std::uint32_t payload_length = 0;      ///< Bytes following the header (0 for a hello).

  /// The 24 bytes of this header, as sent.
  [[nodiscard]] std::array<std::byte, kSize> encode() const noexcept;

  friend bool operator==(const MessageHeader&, const MessageHeader&) noexcept = default;
};

/// What a receiver expects of the next header on one connection, and how to name the sender in
/// messages. decode_header() checks a header against it.
struct HeaderExpectation {
  /// hello on a connection accepted from a rank not yet known, data afterwards.
  MessageKind kind = MessageKind::data;
  /// The receiver's world size; the sender's must be equal.
  std::uint32_t world_size = 1;
  /// The receiver's own rank: a hello must come from a lower rank.
  std::uint32_t receiver_rank = 0;
  /// For data: the rank at the other end of the connection. Ignored for a hello.
  std::uint32_t sender_rank = 0;
  /// For data: the receiver's exchange count. A hello must carry 0.
  std::uint32_t sequence = 0;
  /// The largest payload accepted (ExchangerOptions::max_message_size).
  std::size_t max_payload = std::size_t{1} << 20;
  /// The sender as messages name it: "rank 2 at node03:18515" or "a connection from
  /// 10.0.0.3:41234". Must outlive the call.
  std::string_view peer = "the peer";
  /// The operation named by errors ("Exchanger::exchange"). Must outlive the call.
  std::string_view operation = "Exchanger::exchange";
  /// The setting that bounds max_payload, as errors name it. Must outlive the call.
  std::string_view limit = "ExchangerOptions::max_message_size";
  /// Who may say hello (only for kind hello).
  HelloFrom hello_from = HelloFrom::lower_rank;
  /// Whether an abort may come instead of the data message expected (rendezvous members).
  bool accept_abort = false;
};

/// Checks the first `received.size()` bytes of a header (fewer than MessageHeader::kSize while
/// it is still arriving) against `expected`, field by field as far as they are complete, so that
/// garbage is rejected as soon as its first four bytes are in. Returns the header once all
/// kSize bytes are there and valid, nullopt while it is incomplete (and valid so far). Throws
/// ibv::Error, kind protocol (errno EPROTO; tests:
/// `ExchangeMessage.GarbageIsRejectedAsSoonAsItsFirstFourBytesArrive`,
/// `ExchangeMessage.OversizedPayloadIsRejectedWithTheLimitNamed`), whose message names
/// `expected.peer` and what exactly is wrong, e.g. "rank 2 at node03:18515 sent a 5000000-byte
/// message; the maximum is 1048576 (ExchangerOptions::max_message_size)"; invalid_argument when
/// `received` is longer than a header (test:
/// `ExchangeMessage.LongerInputThanAHeaderIsInvalidArgument`).
[[nodiscard]] std::optional<MessageHeader> decode_header(std::span<const std::byte> received,
                                                         const HeaderExpectation& expected);

}  // namespace ibv::net
