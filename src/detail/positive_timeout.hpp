// Private: the one check of a caller's timeout in nanoseconds (the blocking calls of Channel
// and MultiChannel, their async_* forms, AsyncWork), so that every one says the same thing.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace ibv::detail {

/// An operation's name in two parts ("Channel::" and "write"), joined only for a message: a
/// check on the hot path builds no string while it passes.
struct QualifiedName {
  std::string_view owner;
  std::string_view name;
  [[nodiscard]] std::string joined() const { return std::string(owner).append(name); }
};

/// Throws ibv::Error (invalid_argument) for `operation`, naming "timeout N ns", unless
/// `timeout` is positive. `outcome`, when given, follows the reason ("is not positive; nothing
/// was posted").
void check_positive_timeout(std::chrono::nanoseconds timeout, std::string_view operation,
                            std::string_view outcome = {});

/// The same for a caller's optional timeout: an unset one passes (the default applies).
inline void check_positive_timeout(const std::optional<std::chrono::nanoseconds>& timeout,
                                   std::string_view operation, std::string_view outcome = {}) {
  if (timeout) check_positive_timeout(*timeout, operation, outcome);
}

/// The same for an operation named in two parts, joined only when the check fails.
inline void check_positive_timeout(const std::optional<std::chrono::nanoseconds>& timeout,
                                   const QualifiedName& operation, std::string_view outcome = {}) {
  if (timeout && timeout->count() <= 0) {
    check_positive_timeout(*timeout, operation.joined(), outcome);
  }
}

}  // namespace ibv::detail
