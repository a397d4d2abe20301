// The one check of a caller's timeout in nanoseconds: see positive_timeout.hpp.
#include "detail/positive_timeout.hpp"

#include <string>

#include "ibv/verbs/error.hpp"

namespace ibv::detail {

void check_positive_timeout(std::chrono::nanoseconds timeout, std::string_view operation,
                            std::string_view outcome) {
  if (timeout.count() > 0) [[likely]] {
    return;
  }
  std::string reason = "is not positive";
  if (!outcome.empty()) reason.append("; ").append(outcome);
  throw_invalid_argument(operation, "timeout " + std::to_string(timeout.count()) + " ns", reason);
}

}  // namespace ibv::detail
