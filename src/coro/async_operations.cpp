// SPDX-License-Identifier: MIT
// The coroutine layer's out-of-line part: the error of a bad timeout given to an async call.
#include "detail/positive_timeout.hpp"
#include "ibv/coro/async_channel.hpp"

namespace ibv {

void detail::throw_bad_async_timeout(Duration timeout, const char* operation) {
  detail::throw_not_positive(timeout, "timeout", operation, "nothing was posted");
}

}  // namespace ibv
