// SPDX-License-Identifier: MIT
// Brief quotes of outside text in error messages: see brief_quote.hpp.
#include "detail/brief_quote.hpp"

#include <array>

namespace ibv::detail {

std::string quote_briefly(std::string_view text) {
  constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                         '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  const std::string_view shown = text.substr(0, kQuotedBytes);
  std::string quoted = "\"";
  for (const char c : shown) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F && c != '"' && c != '\\') {
      quoted += c;
    } else {
      quoted.append("\\x").append(1, kHex[byte >> 4U]).append(1, kHex[byte & 0xFU]);
    }
  }
  if (shown.size() < text.size()) {
    quoted.append("...\" (").append(std::to_string(text.size())).append(" bytes)");
  } else {
    quoted += '"';
  }
  return quoted;
}

}  // namespace ibv::detail
