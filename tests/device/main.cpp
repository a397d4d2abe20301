// SPDX-License-Identifier: MIT
// Entry point of the device tests: names the RDMA device under test before running, so a log
// always says what hardware (or Soft-RoCE) the results came from, and checks after every test
// that it left no verbs resources behind (resource_check.hpp; the run fails if it can not check,
// unless IBV_TEST_LEAK_CHECK=off). `--child-role NAME ARGS...` runs a registered child role
// instead of the tests (child_role.hpp).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "child_role.hpp"
#include "device_fixture.hpp"
#include "resource_check.hpp"

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--child-role") == 0) {
    const auto role = ibv::test::child_roles().find(argv[2]);
    if (role == ibv::test::child_roles().end()) {
      std::fprintf(stderr, "no child role '%s' in this binary\n", argv[2]);
      return 2;
    }
    const std::vector<std::string> args(argv + 3, argv + argc);
    try {
      return role->second(args);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "child role '%s' failed: %s\n", argv[2], error.what());
      return 1;
    }
  }
  testing::InitGoogleTest(&argc, argv);
  // Appended after the default printer: its OnTestEnd runs first, so a leak fails the test
  // it belongs to.
  testing::UnitTest::GetInstance()->listeners().Append(new ibv::test::ResourceLeakCheck);
  try {
    const auto context = ibv::test::open_test_device();
    std::printf("[ device   ] %s, GID index %u\n", context.name().c_str(),
                ibv::test::test_gid_index(context));
    // librdmacm opens one verbs context per device the first time an rdma_cm id uses it, and
    // keeps it for the life of the process: open it before the leak check takes its baseline,
    // so that it is not blamed on the first rdma_cm test.
    if (const char* ip = std::getenv("IBV_TEST_IP"); ip != nullptr && *ip != '\0') {
      const ibv::ChannelListener warm_up(ip, 0);
    }
  } catch (const std::exception& error) {
    // Every test would fail the same way; say why once, clearly, and let them report it.
    std::fprintf(stderr, "[ device   ] no usable RDMA device: %s\n", error.what());
  }
  return RUN_ALL_TESTS();
}
