// SPDX-License-Identifier: MIT
#include "ibv/version.hpp"

#include <algorithm>

#include <gtest/gtest.h>

TEST(Version, IsNotEmpty) { EXPECT_FALSE(ibv::version().empty()); }

TEST(Version, HasMajorMinorPatch) {
  const auto version = ibv::version();
  EXPECT_EQ(std::count(version.begin(), version.end(), '.'), 2) << version;
}
