// SPDX-License-Identifier: MIT
#include "ibv/version.hpp"

// The build passes IBV_VERSION_STRING from project(VERSION) in CMakeLists.txt.
#ifndef IBV_VERSION_STRING
#define IBV_VERSION_STRING "0.2.0"
#endif

namespace ibv {

std::string_view version() noexcept { return IBV_VERSION_STRING; }

}  // namespace ibv
