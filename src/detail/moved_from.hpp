// SPDX-License-Identifier: MIT
// Private: the one error of a call on a moved-from object, which may only be destroyed or
// assigned to, so that every such object says it the same way.
#pragma once

#include <string_view>

namespace ibv::detail {

/// Throws ibv::Error (state) from `operation`: "`what` was moved from" (`what` names the object
/// as the caller sees it: "this PersistentAllToAll", "the Node").
[[noreturn]] void throw_moved_from(std::string_view operation, std::string_view what);

}  // namespace ibv::detail
