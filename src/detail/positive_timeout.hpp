// SPDX-License-Identifier: MIT
// Private: the one check of a caller's timeout or other length of time (ibv::Duration) and the
// one way a message writes one, so that every check says the same thing in the same units.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "ibv/duration.hpp"

namespace ibv::detail {

/// An operation's name in two parts ("Channel::" and "write"), joined only for a message: a
/// check on the hot path builds no string while it passes.
struct QualifiedName {
  std::string_view owner;
  std::string_view name;
  [[nodiscard]] std::string joined() const { return std::string(owner).append(name); }
};

/// `duration` for a message, in the largest of ms, us and ns that shows it exactly
/// ("10000 ms", "0 ms", "20 us", "-1 ns").
[[nodiscard]] std::string duration_text(Duration duration);

/// Throws ibv::Error (invalid_argument) for `operation`, naming "`argument` <duration_text>",
/// unless `value` is positive. `outcome`, when given, follows the reason ("is not positive;
/// nothing was posted").
[[noreturn]] void throw_not_positive(Duration value, std::string_view argument,
                                     std::string_view operation, std::string_view outcome);
inline void check_positive(Duration value, std::string_view argument, std::string_view operation,
                           std::string_view outcome = {}) {
  if (value.count() > 0) [[likely]] {
    return;  // inline, so that a passing check builds nothing (no strlen of the names)
  }
  throw_not_positive(value, argument, operation, outcome);
}

/// check_positive for an argument called "timeout".
inline void check_positive_timeout(Duration timeout, std::string_view operation,
                                   std::string_view outcome = {}) {
  check_positive(timeout, "timeout", operation, outcome);
}

/// The same for a caller's optional timeout: an unset one passes (the default applies).
inline void check_positive_timeout(const std::optional<Duration>& timeout,
                                   std::string_view operation, std::string_view outcome = {}) {
  if (timeout) check_positive_timeout(*timeout, operation, outcome);
}

/// The same for an operation named in two parts, joined only when the check fails.
inline void check_positive_timeout(const std::optional<Duration>& timeout,
                                   const QualifiedName& operation, std::string_view outcome = {}) {
  if (timeout && timeout->count() <= 0) {
    check_positive_timeout(*timeout, operation.joined(), outcome);
  }
}

}  // namespace ibv::detail
