// SPDX-License-Identifier: MIT
// printf-style formatting into a std::string.
#include "ibvcpp/text.hpp"

#include <algorithm>
#include <array>
#include <cstdarg>
#include <cstdio>

namespace ibvcpp {

std::string format_text(const char* pattern, ...) {
  std::array<char, 1024> buffer{};
  va_list args;
  va_start(args, pattern);
  const int length = std::vsnprintf(buffer.data(), buffer.size(), pattern, args);
  va_end(args);
  if (length < 0) return {};
  return {buffer.data(), std::min(static_cast<std::size_t>(length), buffer.size() - 1)};
}

}  // namespace ibvcpp
