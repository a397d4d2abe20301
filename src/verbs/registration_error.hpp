// SPDX-License-Identifier: MIT
// Private: the error of a failed memory registration, with the locked-memory hint sized to the
// registration that failed.
#pragma once

#include <cstddef>
#include <string_view>

namespace ibv::detail {

/// Throws the ibv::Error of registration verb `verb` that failed with `errno_value` for
/// `length` bytes. ENOMEM / EAGAIN (the pinned total would pass RLIMIT_MEMLOCK) and EPERM (the
/// limit is 0) are kind resource, with a hint naming the limit in force, the size asked for and
/// how to raise it; other errnos as throw_verb_error().
[[noreturn]] void throw_registration_error(std::string_view verb, int errno_value,
                                           std::string_view detail, std::size_t length);

}  // namespace ibv::detail
