// SPDX-License-Identifier: MIT
// The exchanger fuzz target: the receive path of ibv::net::Exchanger over a byte stream instead
// of a socket. Each message goes through the exchanger's own receive step
// (IncomingMessage::receive_from, src/net/incoming_message.hpp, which Link::receive in
// src/net/exchanger.cpp runs on its socket): decode_header on every partial header as it
// arrives, the payload allocated at the announced length; then Wire<T>::decode of the payload
// as Exchanger::exchange<T> does.
#include "exchange_message_target.hpp"

#include <sys/types.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "ibv/error.hpp"
#include "ibv/net/exchange_message.hpp"
#include "ibv/net/node_endpoint.hpp"
#include "ibv/net/wire.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "net/incoming_message.hpp"

namespace ibv_fuzz {
namespace {

using ibv::net::HeaderExpectation;
using ibv::net::MessageHeader;
using ibv::net::MessageKind;
using ibv::net::detail::IncomingMessage;
using ibv::net::detail::Progress;

constexpr std::array<std::size_t, 8> kMaxPayloads = {
    std::size_t{1} << 20, 1, 8, 20, 28, 1024, 65536, std::size_t{1} << 24};

// The situation of the receiving rank, from the control bytes.
struct Scenario {
  std::uint32_t world_size = 2;
  std::uint32_t receiver = 0;
  bool accepted = false;   // a connection from a lower rank: hello first
  std::uint32_t peer = 0;  // the dialled rank (accepted: learnt from the hello)
  std::uint32_t sequence = 0;
  std::size_t max_payload = 0;
  unsigned payload_type = 0;
  unsigned chunking = 0;
  unsigned messages = 1;
};

Scenario scenario_of(std::span<const std::uint8_t> control) {
  Scenario s;
  s.world_size = 2 + control[0] % 15U;
  s.receiver = control[1] % s.world_size;
  const bool wants_accepted = (control[2] & 0x80U) != 0;
  s.accepted = s.receiver > 0 && (wants_accepted || s.receiver == s.world_size - 1);
  if (!s.accepted) {
    const std::uint32_t higher = s.world_size - s.receiver - 1;
    s.peer = s.receiver + 1 + (control[2] & 0x7fU) % higher;
  }
  s.sequence = control[3];
  s.max_payload = kMaxPayloads[control[4] % kMaxPayloads.size()];
  s.payload_type = control[5] % 14U;
  s.chunking = control[6];
  s.messages = 1 + control[7] % 4U;
  return s;
}

// What recv() hands over: sizes 1 .. limit in a fixed pseudo-random order, or everything.
class Chunker {
 public:
  explicit Chunker(unsigned setting)
      : limit_(setting == 0 ? 0 : 1 + setting % 24), state_(setting) {}
  std::size_t next(std::size_t wanted) {
    if (limit_ == 0) return wanted;
    state_ = state_ * 1103515245U + 12345U;
    return std::min<std::size_t>(wanted, 1 + (state_ >> 16U) % limit_);
  }

 private:
  unsigned limit_;
  unsigned state_;
};

void check_error(const ibv::Error& error, const char* where) {
  check(std::strlen(error.what()) > 0, std::string(where) + ": an ibv::Error with no message");
  check(error.errno_value() != 0, std::string(where) + ": an ibv::Error with errno 0");
}

// Receives one message from `stream` (advanced past what was consumed) with the exchanger's own
// receive step, IncomingMessage::receive_from (what Link::receive runs on its socket): header
// bytes in the chunker's recv() sizes, decode_header on every prefix, the payload allocated at
// the announced length, then read to its end. nullopt when the header was rejected or the
// stream ended first (the exchanger throws protocol or connection errors there).
std::optional<IncomingMessage> receive_message(std::span<const std::uint8_t>& stream,
                                               const HeaderExpectation& expected,
                                               Chunker& chunker) {
  IncomingMessage message;
  const auto read = [&](std::span<std::byte> target) -> ssize_t {
    check(message.parsed.has_value() == (message.header_got == MessageHeader::kSize),
          "decode_header returned a header for " + std::to_string(message.header_got) + " bytes");
    if (stream.empty()) return 0;  // the peer closed
    const std::size_t available = std::min(target.size(), stream.size());
    const std::size_t n =
        message.header_got < MessageHeader::kSize ? chunker.next(available) : available;
    std::transform(stream.begin(), stream.begin() + static_cast<std::ptrdiff_t>(n), target.begin(),
                   [](std::uint8_t b) { return std::byte{b}; });
    stream = stream.subspan(n);
    return static_cast<ssize_t>(n);
  };
  int broken = 0;
  Progress progress = Progress::waiting;
  try {
    progress = message.receive_from(read, expected, broken);
  } catch (const ibv::Error& error) {
    check_error(error, "decode_header");
    check(error.kind() == ibv::ErrorKind::protocol && error.errno_value() == EPROTO,
          "decode_header threw " + std::string(ibv::to_string(error.kind())) +
              " instead of protocol/EPROTO: " + error.what());
    check(std::string_view(error.what()).find(expected.peer) != std::string_view::npos,
          std::string("a header error does not name the peer: ") + error.what());
    return std::nullopt;
  }
  check(broken == 0, "the receive step reported errno " + std::to_string(broken));
  check(progress != Progress::waiting, "the receive step waits on a stream that never blocks");
  if (progress == Progress::closed) {
    check(stream.empty(), "the receive step stopped before the stream ended");
    return std::nullopt;  // closed mid-message: a truncated message
  }
  check(message.parsed.has_value(), "a complete message without a header");
  const MessageHeader& h = *message.parsed;
  check(h.encode() == message.header,
        "an accepted header does not re-encode to the bytes received");
  for (std::size_t prefix = 0; prefix < message.header.size(); ++prefix) {
    check(!ibv::net::decode_header(std::span<const std::byte>(message.header).first(prefix),
                                   expected),
          "a prefix of an accepted header is not incomplete");
  }
  check(h.kind == expected.kind, "accepted a header of another kind");
  check(h.world_size == expected.world_size, "accepted another world size");
  check(h.payload_length <= expected.max_payload, "accepted a payload over the maximum");
  check(message.payload.size() == h.payload_length && message.payload_got == h.payload_length,
        "a complete message whose payload is not the announced length");
  if (h.kind == MessageKind::hello) {
    check(h.sender_rank < expected.receiver_rank, "accepted a hello from a rank not below ours");
    check(h.sequence == 0 && h.payload_length == 0, "accepted a hello with data");
  } else {
    check(h.sender_rank == expected.sender_rank, "accepted data from another rank");
    check(h.sequence == expected.sequence, "accepted another sequence number");
  }
  return message;
}

// Exchanger::exchange<T>: Wire<T>::decode of a peer's entry; an accepted entry must be exactly
// what encode makes of the value.
template <typename T>
void decode_entry(std::span<const std::byte> payload) {
  std::optional<T> value;
  try {
    value = ibv::net::Wire<T>::decode(payload);
  } catch (const ibv::Error& error) {
    check_error(error, "Wire<T>::decode");
    return;
  }
  const std::vector<std::byte> again = ibv::net::Wire<T>::encode(*value);
  check(std::equal(again.begin(), again.end(), payload.begin(), payload.end()),
        "an accepted entry of " + std::to_string(payload.size()) +
            " bytes re-encodes to other bytes (" + std::to_string(again.size()) +
            "): decode accepts more than encode makes");
  check(ibv::net::Wire<T>::decode(again) == *value, "a re-encoded entry decodes differently");
}

void decode_payload(unsigned type, std::span<const std::byte> payload) {
  using ibv::Endpoint;
  using ibv::RemoteMemoryRegion;
  using ibv::net::NodeEndpoint;
  switch (type) {
    case 0: decode_entry<NodeEndpoint>(payload); break;
    case 1: decode_entry<Endpoint>(payload); break;
    case 2: decode_entry<RemoteMemoryRegion>(payload); break;
    case 3: decode_entry<std::vector<Endpoint>>(payload); break;
    case 4: decode_entry<std::vector<RemoteMemoryRegion>>(payload); break;
    case 5: decode_entry<std::vector<std::string>>(payload); break;
    case 6: decode_entry<std::vector<std::vector<std::uint64_t>>>(payload); break;
    case 7: decode_entry<std::uint32_t>(payload); break;
    case 8: decode_entry<std::uint64_t>(payload); break;
    case 9: decode_entry<std::uint16_t>(payload); break;
    case 10: decode_entry<std::string>(payload); break;
    case 11: decode_entry<std::vector<std::byte>>(payload); break;
    case 12: decode_entry<std::vector<NodeEndpoint>>(payload); break;
    default: decode_entry<std::uint8_t>(payload); break;
  }
}

}  // namespace

void exchange_message_target(std::span<const std::uint8_t> input) {
  if (input.size() < kExchangeControlSize) return;
  const Scenario s = scenario_of(input.first(kExchangeControlSize));
  std::span<const std::uint8_t> stream = input.subspan(kExchangeControlSize);
  Chunker chunker(s.chunking);

  const std::string peer_name = "the fuzzed peer";
  HeaderExpectation expected{.kind = MessageKind::data,
                             .world_size = s.world_size,
                             .receiver_rank = s.receiver,
                             .sender_rank = s.peer,
                             .sequence = s.sequence,
                             .max_payload = s.max_payload,
                             .peer = peer_name,
                             .operation = "Exchanger::exchange"};
  if (s.accepted) {
    expected.kind = MessageKind::hello;
    expected.sender_rank = 0;
    const auto hello = receive_message(stream, expected, chunker);
    if (!hello) return;
    expected.kind = MessageKind::data;
    expected.sender_rank = hello->parsed->sender_rank;  // Exchanger::State::identify
  }
  for (unsigned message = 0; message < s.messages; ++message) {
    const auto received = receive_message(stream, expected, chunker);
    if (!received) return;
    decode_payload(s.payload_type, received->payload);
    ++expected.sequence;
  }
}

}  // namespace ibv_fuzz
