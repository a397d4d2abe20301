// SPDX-License-Identifier: MIT
// Private to the library (not installed): the receive step of one Exchanger connection, the
// message being received (header, then payload) and how the bytes that arrive are checked:
// decode_header on every prefix of the header, the payload sized at the announced length once
// the header is accepted. Header-only, so that the exchanger (src/net/exchanger.cpp) and the
// fuzz target (fuzz/exchange_message_target.cpp) run the same code on their byte sources.
#pragma once

#include <sys/types.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ibv/net/exchange_message.hpp"

namespace ibv::net::detail {

/// Where the receive of one message stands.
enum class Progress { waiting, complete, closed };

/// One message as it arrives: its header, then its payload.
struct IncomingMessage {
  std::array<std::byte, MessageHeader::kSize> header{};
  std::size_t header_got = 0;
  std::optional<MessageHeader> parsed;  // once the whole header is accepted
  std::vector<std::byte> payload;       // sized at the announced length once parsed
  std::size_t payload_got = 0;

  /// Ready for the next message.
  void reset() noexcept {
    header_got = 0;
    parsed.reset();
    payload.clear();
    payload_got = 0;
  }

  /// Reads what has arrived of the message from `read`, never past its end, checking the
  /// header as it comes in; throws the protocol error of a bad header (decode_header's).
  /// `read(span)` behaves as recv() into the span: the bytes read, 0 when the other end
  /// closed, -1 with errno set otherwise. Returns `complete` once header and payload are
  /// in, `closed` when the other end closed (or reset) first, and `waiting` when `read`
  /// reports EAGAIN / EWOULDBLOCK. Any other errno also ends it as `closed`, with `error` set
  /// to that errno (0 otherwise): the connection broke, and the caller reports it.
  template <typename Read>
  Progress receive_from(Read&& read, const HeaderExpectation& expected, int& error) {
    error = 0;
    while (true) {
      std::span<std::byte> target = header_got < header.size()
                                        ? std::span<std::byte>(header).subspan(header_got)
                                        : std::span<std::byte>(payload).subspan(payload_got);
      if (target.empty()) return Progress::complete;
      const ssize_t n = read(target);
      if (n > 0) {
        const auto got = static_cast<std::size_t>(n);
        if (header_got < header.size()) {
          header_got += got;
          parsed = decode_header(std::span<const std::byte>(header).first(header_got), expected);
          if (parsed) payload.resize(parsed->payload_length);  // checked against the maximum
        } else {
          payload_got += got;
        }
        continue;
      }
      if (n == 0) return Progress::closed;
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Progress::waiting;
      // A reset: the peer closed with our data unread, or its host is gone.
      if (errno == ECONNRESET) return Progress::closed;
      error = errno;
      return Progress::closed;
    }
  }

  /// How far the message has come: "10 of the 24 header bytes", "0 of the 8 payload bytes".
  [[nodiscard]] std::string progress() const {
    if (header_got < header.size()) {
      return std::to_string(header_got) + " of the " + std::to_string(header.size()) +
             " header bytes";
    }
    return std::to_string(payload_got) + " of the " + std::to_string(payload.size()) +
           " payload bytes";
  }

  /// "after 10 of the 24 header bytes (truncated message)" and the like.
  [[nodiscard]] std::string received_so_far() const {
    if (header_got == 0) return "before sending a message";
    return "after " + progress() + " (truncated message)";
  }
};

}  // namespace ibv::net::detail
