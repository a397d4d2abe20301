// SPDX-License-Identifier: MIT
// Entry point of the multi-host tests: one process per rank (started by tests/multi_host/run).
// Reads the rank's environment once, says who this rank is, and runs every test in the same
// order as the other ranks (no shuffling: the ranks' tests meet each other in that order).
#include <cstdio>
#include <exception>

#include <gtest/gtest.h>

#include "multi_host.hpp"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (GTEST_FLAG_GET(shuffle)) {
    std::fprintf(stderr,
                 "[ rank ? ] --gtest_shuffle ignored: every rank runs the tests in order\n");
    GTEST_FLAG_SET(shuffle, false);
  }
  try {
    const auto& world = ibv::test::multi_host();
    std::printf("%s\n", world.to_string().c_str());
    std::fflush(stdout);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ibv_multi_host_tests: %s\n", error.what());
    return 2;
  }
  return RUN_ALL_TESTS();
}
