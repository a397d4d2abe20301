// SPDX-License-Identifier: MIT
// The one check of a caller's length of time, and its text: see positive_timeout.hpp.
#include "detail/positive_timeout.hpp"

#include <string>

#include "ibv/error.hpp"

namespace ibv::detail {

std::string duration_text(Duration duration) {
  using namespace std::chrono;
  const auto count = duration.count();
  if (count % duration_cast<nanoseconds>(1ms).count() == 0) {
    return std::to_string(duration_cast<milliseconds>(duration).count()) + " ms";
  }
  if (count % duration_cast<nanoseconds>(1us).count() == 0) {
    return std::to_string(duration_cast<microseconds>(duration).count()) + " us";
  }
  return std::to_string(count) + " ns";
}

void throw_not_positive(Duration value, std::string_view argument, std::string_view operation,
                        std::string_view outcome) {
  std::string reason = "is not positive";
  if (!outcome.empty()) reason.append("; ").append(outcome);
  throw_invalid_argument(operation, std::string(argument) + " " + duration_text(value), reason);
}

}  // namespace ibv::detail
