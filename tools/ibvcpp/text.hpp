// SPDX-License-Identifier: MIT
// printf-style formatting into a std::string, for perftest's fixed-width report formats.
#pragma once

#include <string>

namespace ibvcpp {

/// vsnprintf into a string (at most 1023 characters).
[[gnu::format(printf, 1, 2)]] std::string format_text(const char* pattern, ...);

}  // namespace ibvcpp
