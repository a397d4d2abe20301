// SPDX-License-Identifier: MIT
// Small text helpers the test files share (one definition: the test targets are unity builds,
// where two files' helpers of the same name would collide).
#pragma once

#include <string_view>

namespace ibv_test {

/// Whether `part` occurs in `text`.
inline bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace ibv_test
