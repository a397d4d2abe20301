// Entry point of the device tests: names the RDMA device under test before running, so a log
// always says what hardware (or Soft-RoCE) the results came from.
#include <cstdio>
#include <exception>

#include <gtest/gtest.h>

#include "device_fixture.hpp"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  try {
    const auto context = ibv::test::open_test_device();
    std::printf("[ device   ] %s, GID index %u\n", context.name().c_str(),
                ibv::test::test_gid_index(context));
  } catch (const std::exception& error) {
    // Every test would fail the same way; say why once, clearly, and let them report it.
    std::fprintf(stderr, "[ device   ] no usable RDMA device: %s\n", error.what());
  }
  return RUN_ALL_TESTS();
}
