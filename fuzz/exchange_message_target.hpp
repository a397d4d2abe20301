// SPDX-License-Identifier: MIT
// The exchanger fuzz target: everything ibv::net::Exchanger decodes from bytes a peer (or any
// stray client) sends, consumed by the exchanger's own receive step (src/net/incoming_message.hpp)
// as the exchanger consumes its sockets. Called by libFuzzer
// (fuzz/exchange_message_fuzzer.cpp) and by the unit test that replays the committed corpus and
// regression inputs (tests/unit/fuzz_corpus_test.cpp).
//
// Input layout: kControlSize control bytes that pick the receiver's situation, then the byte
// stream that arrives on one connection.
//
//   byte 0  world size: 2 + b % 15
//   byte 1  receiver rank: b % world size
//   byte 2  connection: bit 7 set = accepted from a lower rank (a hello comes first, then data
//           from the rank it names), clear = dialled to higher rank receiver + 1 + (b & 0x7f) %
//           (higher ranks); the other kind when the receiver has no such peer
//   byte 3  sequence number of the first data message (the receiver's exchange count)
//   byte 4  max payload (ExchangerOptions::max_message_size), b % 8 into
//           {1 MiB (the default), 1, 8, 20, 28, 1024, 65536, 16 MiB}
//   byte 5  payload type, b % 14: NodeEndpoint, Endpoint, RemoteMemoryRegion,
//           vector<Endpoint>, vector<RemoteMemoryRegion>, vector<string>,
//           vector<vector<uint64_t>>, uint32_t, uint64_t, uint16_t, string, vector<byte>,
//           vector<NodeEndpoint>, uint8_t
//   byte 6  recv() sizes for header bytes: 0 = as much as there is, else a pseudo-random
//           sequence of 1 .. 1 + b % 24 bytes (what TCP may hand over)
//   byte 7  data messages read on the connection at most: 1 + b % 4 (exchanges reuse it)
//
// Asserted besides "no crash" (an ibv_fuzz::InvariantViolation escapes otherwise): only
// ibv::Error escapes the decoders, with a non-empty message; a header error is kind protocol
// (EPROTO) naming the peer; every prefix of an accepted header is accepted as incomplete; an
// accepted header matches the expectation and re-encodes to the bytes received; an accepted
// payload re-encodes to exactly the bytes received (Wire<T>: decode accepts exactly what encode
// makes) and decodes again to the same value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ibv_fuzz {

/// Bytes of the control prefix in front of the stream.
inline constexpr std::size_t kExchangeControlSize = 8;

/// Runs one input (layout above). Returns normally for any input the library handles as
/// documented; throws InvariantViolation when it does not.
void exchange_message_target(std::span<const std::uint8_t> input);

}  // namespace ibv_fuzz
