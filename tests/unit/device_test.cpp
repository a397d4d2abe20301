// SPDX-License-Identifier: MIT
// Tests what the device, context and port layer does without an RDMA device: GUID, device, port
// and attribute text, opening an unknown device, and rejecting a null context.
#include "ibv/verbs/device.hpp"

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "ibv/verbs/context.hpp"
#include "ibv/verbs/port.hpp"
#include "support/error_matchers.hpp"
#include "support/text.hpp"

namespace {

using ibv_test::contains;

// --- Guid ------------------------------------------------------------------------------------

TEST(Guid, PrintsFourGroupsOfFourHexDigits) {
  EXPECT_EQ(ibv::Guid{0x0011223344556677}.to_string(), "0011:2233:4455:6677");
  EXPECT_EQ(ibv::Guid{0x505400fffe123456}.to_string(), "5054:00ff:fe12:3456");
  EXPECT_EQ(ibv::Guid{0}.to_string(), "0000:0000:0000:0000");
  EXPECT_EQ(ibv::Guid{0xFFFFFFFFFFFFFFFF}.to_string(), "ffff:ffff:ffff:ffff");
}

TEST(Guid, ComparesByValue) {
  EXPECT_EQ(ibv::Guid{5}, ibv::Guid{5});
  EXPECT_NE(ibv::Guid{5}, ibv::Guid{6});
}

// --- names -----------------------------------------------------------------------------------

TEST(NodeType, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (const auto type : {ibv::NodeType::unknown, ibv::NodeType::ca, ibv::NodeType::switch_node,
                          ibv::NodeType::router, ibv::NodeType::rnic, ibv::NodeType::usnic,
                          ibv::NodeType::usnic_udp, ibv::NodeType::unspecified}) {
    EXPECT_FALSE(ibv::to_string(type).empty());
    names.insert(ibv::to_string(type));
  }
  EXPECT_EQ(names.size(), 8U);
  EXPECT_EQ(ibv::to_string(ibv::NodeType::ca), "CA");
  EXPECT_EQ(ibv::to_string(ibv::NodeType::rnic), "RNIC");
}

TEST(Transport, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (const auto transport :
       {ibv::Transport::unknown, ibv::Transport::infiniband, ibv::Transport::iwarp,
        ibv::Transport::usnic, ibv::Transport::usnic_udp, ibv::Transport::unspecified}) {
    EXPECT_FALSE(ibv::to_string(transport).empty());
    names.insert(ibv::to_string(transport));
  }
  EXPECT_EQ(names.size(), 6U);
  EXPECT_EQ(ibv::to_string(ibv::Transport::infiniband), "InfiniBand");
  EXPECT_EQ(ibv::to_string(ibv::Transport::iwarp), "iWARP");
}

TEST(PortState, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (const auto state :
       {ibv::PortState::nop, ibv::PortState::down, ibv::PortState::init, ibv::PortState::armed,
        ibv::PortState::active, ibv::PortState::active_defer}) {
    names.insert(ibv::to_string(state));
  }
  EXPECT_EQ(names.size(), 6U);
  EXPECT_EQ(ibv::to_string(ibv::PortState::active), "ACTIVE");
  EXPECT_EQ(ibv::to_string(ibv::PortState::down), "DOWN");
}

TEST(LinkLayer, Names) {
  EXPECT_EQ(ibv::to_string(ibv::LinkLayer::infiniband), "InfiniBand");
  EXPECT_EQ(ibv::to_string(ibv::LinkLayer::ethernet), "Ethernet");
  EXPECT_EQ(ibv::to_string(ibv::LinkLayer::unspecified), "unspecified");
}

// --- descriptions ----------------------------------------------------------------------------

TEST(DeviceInfo, ToStringShowsNameGuidTypeAndTransport) {
  const ibv::DeviceInfo info{"rxe0", ibv::Guid{0x505400fffe123456}, ibv::NodeType::rnic,
                             ibv::Transport::infiniband};
  const auto text = info.to_string();
  EXPECT_TRUE(text.starts_with("rxe0 ")) << text;
  EXPECT_TRUE(contains(text, "5054:00ff:fe12:3456")) << text;
  EXPECT_TRUE(contains(text, ibv::to_string(ibv::NodeType::rnic))) << text;
  EXPECT_TRUE(contains(text, ibv::to_string(ibv::Transport::infiniband))) << text;
}

TEST(PortAttributes, ToStringShowsStateLinkLayerMtusLidAndGidTable) {
  ibv::PortAttributes port;
  port.port = 2;
  port.state = ibv::PortState::active;
  port.link_layer = ibv::LinkLayer::ethernet;
  port.active_mtu = ibv::Mtu::mtu1024();
  port.max_mtu = ibv::Mtu::mtu4096();
  port.lid = 17;
  port.gid_table_length = 3;
  EXPECT_EQ(port.to_string(),
            "port 2: ACTIVE, Ethernet, active MTU 1024 (max 4096), LID 17, 3 GID table entries");
}

TEST(DeviceAttributes, ToStringShowsTheSizingLimits) {
  ibv::DeviceAttributes attributes;
  attributes.firmware_version = "16.35.2000";
  attributes.vendor_id = 0x15b3;
  attributes.physical_port_count = 1;
  attributes.max_qp = 131072;
  attributes.max_qp_wr = 32768;
  attributes.max_sge = 30;
  attributes.max_cqe = 4194303;
  attributes.max_mr_size = 0xFFFFFFFFFFFFFFFF;
  attributes.atomics = true;
  const auto text = attributes.to_string();
  for (const char* part :
       {"firmware 16.35.2000", "vendor 0x15b3", "1 port(s)", "max QP 131072", "max QP WR 32768",
        "max SGE 30", "max CQE 4194303", "max MR size 18446744073709551615", "atomics yes"}) {
    EXPECT_TRUE(contains(text, part)) << part << " missing in: " << text;
  }
}

TEST(DeviceAttributes, ToStringWithoutFirmwareOrAtomics) {
  const auto text = ibv::DeviceAttributes{}.to_string();
  EXPECT_TRUE(contains(text, "firmware -")) << text;
  EXPECT_TRUE(contains(text, "atomics no")) << text;
}

// --- without a device ------------------------------------------------------------------------

TEST(OpenDevice, UnknownNameIsNotFoundAndSaysWhatExists) {
  EXPECT_TRUE(ibv_test::throws_error(
      ibv::ErrorKind::not_found, [] { (void)ibv::open_device("no-such-rdma-device-0"); },
      {"open_device", "\"no-such-rdma-device-0\"", "devices here:", "Hint:"}));
}

TEST(OpenDevice, ListedNamesAreUnique) {
  const auto devices = ibv::list_devices();
  std::set<std::string> names;
  for (const auto& device : devices) {
    EXPECT_FALSE(device.name.empty());
    names.insert(device.name);
  }
  EXPECT_EQ(names.size(), devices.size());
}

// A null ibv_context is rejected with an invalid_argument Error. Run in a child process: a
// crash must fail this test, not end the whole test binary.
TEST(ContextDeathTest, NullContextIsRejectedWithoutCrashing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        try {
          const ibv::Context context(nullptr);
        } catch (const ibv::Error& error) {
          std::_Exit(error.kind() == ibv::ErrorKind::invalid_argument ? 0 : 2);
        }
        std::_Exit(3);  // accepted a null context
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
