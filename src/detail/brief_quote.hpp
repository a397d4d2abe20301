// SPDX-License-Identifier: MIT
// Private: how an error message quotes text that came from outside (a peer's JSON, a hosts
// file, a caller's string): briefly, so that a 50 MB field does not become a 50 MB what().
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ibv::detail {

/// The most bytes of outside text an error message quotes.
inline constexpr std::size_t kQuotedBytes = 40;

/// `text` in double quotes, at most kQuotedBytes of it, bytes that are not printable ASCII as
/// \xNN; a longer text ends in "..." inside the quotes and says its length after them:
/// "fe80::1:2:3:4:5:6:7:8:9:a:b:c:d:e:f:10:11:1..." (50000000 bytes).
std::string quote_briefly(std::string_view text);

}  // namespace ibv::detail
