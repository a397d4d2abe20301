// SPDX-License-Identifier: MIT
// The error of a call on a moved-from object (detail/moved_from.hpp).
#include "detail/moved_from.hpp"

#include <cerrno>
#include <string>

#include "ibv/error.hpp"

namespace ibv::detail {

void throw_moved_from(std::string_view operation, std::string_view what) {
  throw Error(ErrorKind::state, operation, EINVAL, std::string(what) + " was moved from",
              "use the object it was moved to (a moved-from one may only be destroyed or "
              "assigned to)");
}

}  // namespace ibv::detail
