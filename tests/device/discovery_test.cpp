// SPDX-License-Identifier: MIT
// Device tests of discovery and queries: device list, open by name, ports, GID table, and the
// errors for a device, port or GID index that does not exist.
#include <algorithm>
#include <cstdint>
#include <optional>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "sysfs_gid.hpp"

namespace ibv::test {
namespace {

TEST(Discovery, ListsTheDeviceUnderTest) {
  const auto context = open_test_device();
  const auto devices = list_devices();
  const auto found = std::find_if(devices.begin(), devices.end(),
                                  [&](const DeviceInfo& d) { return d.name == context.name(); });
  ASSERT_NE(found, devices.end());
  EXPECT_NE(found->to_string().find(context.name()), std::string::npos);
  EXPECT_NE(found->transport, Transport::unknown);
}

TEST(Discovery, OpensByNameAndFirstActive) {
  const auto context = open_test_device();
  EXPECT_EQ(open_device(context.name()).name(), context.name());
  const auto first = open_first_active_device();
  EXPECT_EQ(first.query_port().state, PortState::active);
}

TEST(Discovery, UnknownDeviceNameIsNotFoundAndNamesTheRealOnes) {
  const auto context = open_test_device();
  try {
    (void)open_device("no_such_device0");
    FAIL() << "opened a device that does not exist";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::not_found);
    const std::string message = error.what();
    EXPECT_NE(message.find("no_such_device0"), std::string::npos) << message;
    EXPECT_NE(message.find(context.name()), std::string::npos) << message;
    EXPECT_NE(message.find("ibv_devices"), std::string::npos) << message;
  }
}

TEST(Discovery, DeviceAndPortAttributesAreSane) {
  const auto context = open_test_device();
  const auto device = context.query_device();
  EXPECT_GE(device.physical_port_count, 1);
  EXPECT_GT(device.max_qp_wr, 0);
  EXPECT_GT(device.max_sge, 0);
  EXPECT_GT(device.max_cqe, 0);
  EXPECT_FALSE(device.to_string().empty());
  const auto port = context.query_port();
  EXPECT_EQ(port.state, PortState::active);
  EXPECT_NE(port.link_layer, LinkLayer::unspecified);
  EXPECT_GT(port.gid_table_length, 0U);
  EXPECT_LE(port.active_mtu, port.max_mtu);
  EXPECT_NE(port.to_string().find("ACTIVE"), std::string::npos);
}

TEST(Discovery, MissingPortIsNotFound) {
  const auto context = open_test_device();
  const auto ports = context.query_device().physical_port_count;
  try {
    (void)context.query_port(PortNumber{static_cast<std::uint8_t>(ports + 1)});
    FAIL() << "queried a port that does not exist";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::not_found) << error.what();
  }
}

TEST(Discovery, GidTableHasTypesAndNetdevs) {
  const auto context = open_test_device();
  const auto table = context.gid_table();
  ASSERT_FALSE(table.empty());
  // The entry the library must pick by itself, read from the kernel's sysfs table, not through
  // the library: on Ethernet the RoCE v2 entry with an IPv4-mapped GID, on InfiniBand index 0.
  const bool ethernet = context.query_port().link_layer == LinkLayer::ethernet;
  const std::optional<std::uint32_t> expected = ethernet
                                                    ? sysfs_roce_v2_ipv4_gid_index(context.name())
                                                    : sysfs_infiniband_gid_index(context.name());
  ASSERT_TRUE(expected.has_value()) << "the sysfs GID table of " << context.name()
                                    << " has no entry the library documents choosing";
  EXPECT_EQ(context.default_gid_index(), *expected) << "the library's automatic choice";
  const auto index = test_gid_index(context);
  EXPECT_EQ(index, *expected) << "IBV_TEST_GID_INDEX disagrees with the sysfs GID table";
  const auto entry = context.query_gid(index);
  EXPECT_EQ(entry.index, index);
  EXPECT_FALSE(entry.gid.is_zero());
  if (ethernet) {
    EXPECT_EQ(entry.type, GidType::roce_v2);
    EXPECT_FALSE(entry.netdev.empty()) << entry.to_string();
    EXPECT_TRUE(entry.gid.is_ipv4_mapped()) << entry.to_string();
    if (const char* ip = std::getenv("IBV_TEST_IP"); ip != nullptr) {
      EXPECT_EQ(entry.gid.ipv4().value_or(""), ip);
    }
  }
  for (const auto& e : table) EXPECT_EQ(context.query_gid(e.index).gid, e.gid);
}

TEST(Discovery, GidTableIsEveryEntryQueryGidFindsInIndexOrder) {
  // gid_table() asks for the whole table in one call; query_gid() one index at a time.
  const auto context = open_test_device();
  std::vector<std::uint32_t> found;
  for (std::uint32_t index = 0; index < context.query_port().gid_table_length; ++index) {
    try {
      found.push_back(context.query_gid(index).index);
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::not_found) << error.what();
    }
  }
  std::vector<std::uint32_t> listed;
  for (const auto& entry : context.gid_table()) {
    listed.push_back(entry.index);
    EXPECT_EQ(entry.port, 1U) << entry.to_string();
  }
  EXPECT_EQ(listed, found);
}

TEST(Discovery, GidIndexOutOfRangeIsNotFoundAndListsTheTable) {
  const auto context = open_test_device();
  const auto length = context.query_port().gid_table_length;
  for (const std::uint32_t bad : {length, length + 1, 100000U}) {
    try {
      (void)context.query_gid(bad);
      FAIL() << "GID index " << bad << " accepted";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::not_found);
      const std::string message = error.what();
      EXPECT_NE(message.find("GID index " + std::to_string(bad)), std::string::npos) << message;
      EXPECT_NE(message.find(context.gid_table().front().gid.to_string()), std::string::npos)
          << message;
    }
  }
}

}  // namespace
}  // namespace ibv::test
