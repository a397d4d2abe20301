// SPDX-License-Identifier: MIT
// Library version.
#pragma once

#include <string_view>

namespace ibv {

/// The version of the ibverbs-cpp library this program runs against, e.g. "0.2.0" (the
/// library's own version, not libibverbs').
[[nodiscard]] std::string_view version() noexcept;

}  // namespace ibv
