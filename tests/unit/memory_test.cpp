// SPDX-License-Identifier: MIT
// Tests the memory helpers' pure logic: page rounding and overflow, the buffer pool's layout,
// CPU list parsing, the device-to-NUMA-node lookup on a fake sysfs tree, and Allocation in
// normal pages (plain mmap, which every host can do).
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/memory/allocation.hpp"
#include "ibv/memory/numa.hpp"
#include "memory/size_math.hpp"
#include "memory/sysfs.hpp"
#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_error;
using ibv_test::throws_invalid_argument;

constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();

// --- rounding and overflow -------------------------------------------------------------------

TEST(MemorySizeMath, RoundsUpToAMultiple) {
  EXPECT_EQ(ibv::detail::round_up(1, 4096), 4096U);
  EXPECT_EQ(ibv::detail::round_up(4096, 4096), 4096U);
  EXPECT_EQ(ibv::detail::round_up(4097, 4096), 8192U);
  EXPECT_EQ(ibv::detail::round_up(0, 4096), 0U);
  EXPECT_EQ(ibv::detail::round_up(5000000, 2 << 20), 6U << 20U);
  EXPECT_EQ(ibv::detail::round_up(10, 3), 12U);  // not only powers of two
}

TEST(MemorySizeMath, RoundingReportsOverflowInsteadOfWrapping) {
  EXPECT_EQ(ibv::detail::round_up(kMax, 4096), std::nullopt);
  EXPECT_EQ(ibv::detail::round_up(kMax - 4094, 4096), std::nullopt);
  const std::size_t last_page = kMax - kMax % 4096;  // the largest multiple of 4096
  EXPECT_EQ(ibv::detail::round_up(last_page, 4096), last_page);
  EXPECT_EQ(ibv::detail::round_up(last_page - 1, 4096), last_page);
  EXPECT_EQ(ibv::detail::round_up(1, 0), std::nullopt);
}

TEST(MemorySizeMath, MultiplyReportsOverflow) {
  EXPECT_EQ(ibv::detail::multiply(4096, 1000), 4096000U);
  EXPECT_EQ(ibv::detail::multiply(kMax / 2, 2), kMax - 1);
  EXPECT_EQ(ibv::detail::multiply(kMax / 2 + 1, 2), std::nullopt);
  EXPECT_EQ(ibv::detail::multiply(0, kMax), 0U);
}

TEST(MemorySizeMath, PageRoundedSizeRejectsZeroAndOverflow) {
  EXPECT_EQ(ibv::detail::page_rounded_size("Allocation", 1, 4096), 4096U);
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::detail::page_rounded_size("Allocation", 0, 4096); }, {"size", "is 0"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::detail::page_rounded_size("Allocation", kMax, 4096); },
      {"size", "does not fit"}));
}

TEST(MemorySizeMath, PoolLayoutAlignsEveryBuffer) {
  const auto layout = ibv::detail::pool_layout(100, 10, 64);
  EXPECT_EQ(layout.stride, 128U);
  EXPECT_EQ(layout.total, 1280U);
  const auto exact = ibv::detail::pool_layout(4096, 3, 64);
  EXPECT_EQ(exact.stride, 4096U);
  EXPECT_EQ(exact.total, 3U * 4096U);
  EXPECT_EQ(ibv::detail::pool_layout(1, 1, 1).stride, 1U);
}

TEST(MemorySizeMath, PoolLayoutRejectsBadArguments) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::detail::pool_layout(0, 1, 64); },
                                      {"buffer_size", "is 0"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::detail::pool_layout(64, 0, 64); },
                                      {"count", "is 0"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::detail::pool_layout(64, 1, 48); },
                                      {"alignment", "power of two"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::detail::pool_layout(64, 1, 0); }, {"alignment"}));
  EXPECT_TRUE(
      throws_invalid_argument([] { (void)ibv::detail::pool_layout(std::size_t{1} << 32U, 1, 64); },
                              {"buffer_size", "4 GiB"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::detail::pool_layout(64, std::size_t{1} << 32U, 64); }, {"count", "2^32"}));
  // 2^31 buffers of 4 GiB - 1 (aligned to 2^32): 2^63 fits, 2^32 buffers would not
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::detail::pool_layout(UINT32_MAX, UINT32_MAX, std::size_t{1} << 33U); },
      {"count", "do not fit"}));
}

// --- CPU lists -------------------------------------------------------------------------------

TEST(CpuList, ParsesWhatSysfsWrites) {
  EXPECT_EQ(ibv::parse_cpu_list("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ibv::parse_cpu_list("0"), (std::vector<int>{0}));
  EXPECT_EQ(ibv::parse_cpu_list("5-5"), (std::vector<int>{5}));
  EXPECT_EQ(ibv::parse_cpu_list(""), std::vector<int>{});
  EXPECT_EQ(ibv::parse_cpu_list("\n"), std::vector<int>{});                // a node without CPUs
  EXPECT_EQ(ibv::parse_cpu_list("4,0-1,1"), (std::vector<int>{0, 1, 4}));  // sorted, unique
}

TEST(CpuList, RejectsMalformedLists) {
  for (const char* bad :
       {"a", "1-", "-1", "3-1", "1,,2", "1,", ",1", "0-3:2/4", "1 2", "99999999999", "0x1"}) {
    EXPECT_TRUE(throws_invalid_argument([bad] { (void)ibv::parse_cpu_list(bad); }, {"CPU"})) << bad;
  }
}

TEST(CpuList, FormatsRanges) {
  EXPECT_EQ(ibv::format_cpu_list(std::vector<int>{0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(ibv::format_cpu_list(std::vector<int>{}), "");
  EXPECT_EQ(ibv::format_cpu_list(std::vector<int>{7}), "7");
  for (const char* text : {"0-3,8,10-11", "0", "1,3,5", "0-63"}) {
    const auto cpus = ibv::parse_cpu_list(text);
    EXPECT_EQ(ibv::format_cpu_list(cpus), text);
  }
}

// --- device NUMA node lookup on a fake sysfs ----------------------------------------------------

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("ibv-fake-sysfs-" + std::to_string(getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "class/infiniband");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void write(const std::string& relative, const std::string& content) {
    const auto path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }
  [[nodiscard]] std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

TEST_F(FakeSysfs, PciDeviceGivesItsNode) {
  write("class/infiniband/mlx5_0/device/numa_node", "1\n");
  const auto node = ibv::detail::device_numa_node_in(root(), "mlx5_0");
  ASSERT_TRUE(node.known()) << node.to_string();
  EXPECT_EQ(node.node, 1);
  EXPECT_EQ(node.source, root() + "/class/infiniband/mlx5_0/device/numa_node");
  EXPECT_NE(node.to_string().find("mlx5_0: NUMA node 1 (from "), std::string::npos);
}

TEST_F(FakeSysfs, PciDeviceWithoutAffinityIsUnknown) {
  write("class/infiniband/mlx5_0/device/numa_node", "-1\n");
  const auto node = ibv::detail::device_numa_node_in(root(), "mlx5_0");
  EXPECT_FALSE(node.known());
  EXPECT_NE(node.reason.find("is -1"), std::string::npos) << node.reason;
  EXPECT_NE(node.to_string().find("NUMA node unknown"), std::string::npos);
}

TEST_F(FakeSysfs, SoftwareDeviceFollowsItsNetdev) {
  write("class/infiniband/rxe0/parent", "eth0\n");
  write("class/net/eth0/device/numa_node", "0\n");
  const auto node = ibv::detail::device_numa_node_in(root(), "rxe0");
  ASSERT_TRUE(node.known()) << node.to_string();
  EXPECT_EQ(node.node, 0);
  EXPECT_EQ(node.source, root() + "/class/net/eth0/device/numa_node");
}

TEST_F(FakeSysfs, SoftwareDeviceFindsItsNetdevInTheGidTable) {
  write("class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0", "eth1\n");
  write("class/net/eth1/device/numa_node", "3\n");
  EXPECT_EQ(ibv::detail::device_numa_node_in(root(), "rxe0").node, 3);
}

TEST_F(FakeSysfs, SoftwareDeviceOverAVirtualNetdevIsUnknown) {
  write("class/infiniband/rxe0/parent", "dummy0\n");
  std::filesystem::create_directories(root() + "/class/net/dummy0");
  const auto node = ibv::detail::device_numa_node_in(root(), "rxe0");
  EXPECT_FALSE(node.known());
  EXPECT_NE(node.reason.find("dummy0"), std::string::npos) << node.reason;
  EXPECT_NE(node.reason.find("virtual netdev"), std::string::npos) << node.reason;
}

TEST_F(FakeSysfs, DeviceWithoutNetdevIsUnknown) {
  std::filesystem::create_directories(root() + "/class/infiniband/siw0");
  const auto node = ibv::detail::device_numa_node_in(root(), "siw0");
  EXPECT_FALSE(node.known());
  EXPECT_NE(node.reason.find("names no network device"), std::string::npos) << node.reason;
}

TEST_F(FakeSysfs, MissingDeviceIsNotFound) {
  write("class/infiniband/rxe0/parent", "dummy0\n");
  EXPECT_TRUE(throws_error(ibv::ErrorKind::not_found,
                           [this] { (void)ibv::detail::device_numa_node_in(root(), "mlx9"); },
                           {"mlx9", "rxe0"}));
  EXPECT_TRUE(throws_error(ibv::ErrorKind::not_found,
                           [this] { (void)ibv::detail::device_numa_node_in(root(), "../x"); }));
}

TEST_F(FakeSysfs, NodeCpusComeFromTheNodesCpulist) {
  write("devices/system/node/online", "0-1\n");
  write("devices/system/node/node0/cpulist", "0-3\n");
  write("devices/system/node/node1/cpulist", "4-7\n");
  EXPECT_EQ(ibv::detail::node_cpus_in(root(), 1), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(throws_error(ibv::ErrorKind::not_found,
                           [this] { (void)ibv::detail::node_cpus_in(root(), 2); },
                           {"NUMA node 2 does not exist", "nodes online: 0-1"}));
  EXPECT_TRUE(throws_error(ibv::ErrorKind::not_found,
                           [this] { (void)ibv::detail::node_cpus_in(root(), -1); }));
}

TEST_F(FakeSysfs, NoNodeDirectoryMeansNoNuma) {
  EXPECT_TRUE(throws_error(ibv::ErrorKind::unsupported,
                           [this] { (void)ibv::detail::node_cpus_in(root(), 0); },
                           {"does not exist"}));
}

// --- Allocation in normal pages ----------------------------------------------------------------

TEST(Allocation, RoundsToThePageAndStartsZeroedAndAligned) {
  const std::size_t page = ibv::system_page_size();
  const ibv::Allocation allocation(page + 1);
  EXPECT_EQ(allocation.size(), 2 * page);
  EXPECT_EQ(allocation.requested_size(), page + 1);
  EXPECT_EQ(allocation.page_size(), page);
  EXPECT_EQ(allocation.pages(), ibv::PageKind::normal);
  EXPECT_EQ(allocation.numa_node(), std::nullopt);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(allocation.data()) % page, 0U);
  const auto bytes = allocation.bytes();
  EXPECT_TRUE(
      std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{}; }));
  std::fill(bytes.begin(), bytes.end(), std::byte{0x5a});  // writable to the last byte
  EXPECT_EQ(bytes.back(), std::byte{0x5a});
  EXPECT_NE(allocation.to_string().find("(asked " + std::to_string(page + 1) + " B)"),
            std::string::npos)
      << allocation.to_string();
}

TEST(Allocation, MovesOwnership) {
  ibv::Allocation a(100);
  std::byte* data = a.data();
  ibv::Allocation b(std::move(a));
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  EXPECT_EQ(a.size(), 0U);       // NOLINT(bugprone-use-after-move)
  ibv::Allocation c(1);
  c = std::move(b);  // frees c's own memory
  EXPECT_EQ(c.data(), data);
  c.bytes()[0] = std::byte{1};
}

TEST(Allocation, RejectsBadSizesAndOptions) {
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::Allocation(0); }, {"size", "is 0"}));
  EXPECT_TRUE(throws_invalid_argument([] { (void)ibv::Allocation(kMax); }, {"size"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::Allocation(4096, ibv::AllocationOptions{}.on_node(-1)); },
      {"numa_node", "negative"}));
  EXPECT_TRUE(throws_invalid_argument(
      [] { (void)ibv::Allocation(4096, ibv::AllocationOptions::huge_pages(3000)); },
      {"huge_page_size", "power of two"}));
}

TEST(Allocation, RefusesAHugePageSizeTheKernelDoesNotOffer) {
  // 256 MiB pages exist on no x86-64 kernel (2 MiB and 1 GiB do).
  EXPECT_TRUE(throws_error(
      ibv::ErrorKind::unsupported,
      [] { (void)ibv::Allocation(4096, ibv::AllocationOptions::huge_pages(256U << 20U)); },
      {"huge pages of 256 MiB", "sizes offered"}));
}

TEST(MemorySizeText, UsesExactBinaryUnits) {
  EXPECT_EQ(ibv::detail::size_text(2U << 20U), "2 MiB");
  EXPECT_EQ(ibv::detail::size_text(1U << 30U), "1 GiB");
  EXPECT_EQ(ibv::detail::size_text(8192), "8 KiB");
  EXPECT_EQ(ibv::detail::size_text(5000), "5000 B");
  EXPECT_EQ(ibv::detail::size_text(0), "0 B");
}

}  // namespace
