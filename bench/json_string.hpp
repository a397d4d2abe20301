// SPDX-License-Identifier: MIT
// bench/json_string.hpp: `text` as a JSON string, for the benchmark programs that print their
// results as JSON lines (bootstrap_rank, all_to_all_ours, recovery_rank). Included by a path
// relative to the including file: bench/ must not be an include directory, since its script
// bench/compare would shadow the standard header <compare>.
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <string_view>

namespace ibv::bench {

/// `text` in double quotes, with quotes and backslashes escaped and control characters as
/// \u00XX: what any JSON reader turns back into `text`.
inline std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      std::array<char, 8> escaped{};
      std::snprintf(escaped.data(), escaped.size(), "\\u%04x", static_cast<unsigned>(byte));
      out += escaped.data();
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace ibv::bench
