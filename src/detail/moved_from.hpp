// SPDX-License-Identifier: MIT
// Private: the one error of a call on a moved-from object, which may only be destroyed or
// assigned to, so that every such object says it the same way.
#pragma once

#include <cstdint>
#include <string_view>

namespace ibv::detail {

/// Throws ibv::Error (state) from `operation`: "`what` was moved from" (`what` names the object
/// as the caller sees it: "this PersistentAllToAll", "the Node").
[[noreturn]] void throw_moved_from(std::string_view operation, std::string_view what);

/// Throws as throw_moved_from() for a MultiChannel (a Node is one) of `world_size` 0: it has
/// at least its own rank unless it was moved from.
inline void check_channels_not_moved_from(std::uint32_t world_size, std::string_view operation) {
  if (world_size == 0) [[unlikely]]
    throw_moved_from(operation, "this MultiChannel or Node");
}

}  // namespace ibv::detail
