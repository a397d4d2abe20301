// SPDX-License-Identifier: MIT
// Tests NodeEndpoint's and PeerEndpoint's binary forms: round trip with and without a datagram
// address (versions 1 and 2), exact header layout, and every rejection of malformed bytes (what a
// peer of another version, or garbage, would send).
#include "ibv/net/node_endpoint.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"

namespace {

using ibv_test::throws_invalid_argument;

ibv::net::NodeEndpoint sample(std::uint32_t rank, std::uint32_t world) {
  ibv::net::NodeEndpoint endpoint{.rank = rank,
                                  .world_size = world,
                                  .queue_pairs = {},
                                  .barrier = ibv::RemoteMemoryRegion(0x7f0000001000, 4096, 0x77),
                                  .datagram = {}};
  for (std::uint32_t peer = 0; peer < world; ++peer) {
    ibv::Endpoint qp;
    if (peer != rank) {
      qp.qp_number = 0x100 + peer;
      qp.psn = 0x200 + peer;
      qp.gid = ibv::Gid::from_string("::ffff:10.0.0." + std::to_string(rank + 1));
    }
    endpoint.queue_pairs.push_back(qp);
  }
  return endpoint;
}

TEST(NodeEndpoint, RoundTripsThroughBytes) {
  for (const std::uint32_t world : {1U, 2U, 5U, 64U}) {
    const auto endpoint = sample(world - 1, world);
    const auto bytes = endpoint.to_bytes();
    EXPECT_EQ(bytes.size(), ibv::net::NodeEndpoint::kHeaderSize + world * ibv::Endpoint::kWireSize);
    EXPECT_EQ(ibv::net::NodeEndpoint::from_bytes(bytes), endpoint);
  }
}

TEST(NodeEndpoint, HeaderLayoutIsVersionReservedRankWorldRegion) {
  const auto bytes = sample(2, 3).to_bytes();
  EXPECT_EQ(bytes[0], std::byte{1});
  EXPECT_EQ(bytes[1], std::byte{0});
  EXPECT_EQ(bytes[7], std::byte{2});   // rank, big-endian
  EXPECT_EQ(bytes[11], std::byte{3});  // world size
  const auto region = ibv::RemoteMemoryRegion(0x7f0000001000, 4096, 0x77).to_bytes();
  EXPECT_TRUE(std::equal(region.begin(), region.end(), bytes.begin() + 12));
}

TEST(NodeEndpoint, RejectsMalformedBytes) {
  const auto good = sample(1, 3).to_bytes();
  using ibv::net::NodeEndpoint;
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)NodeEndpoint::from_bytes(std::span(good).first(10)); }, {"too few"}));
  auto version = good;
  version[0] = std::byte{9};
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(version); }, {"version 9"}));
  auto reserved = good;
  reserved[2] = std::byte{1};
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(reserved); }, {"reserved"}));
  auto rank = good;
  rank[7] = std::byte{3};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(rank); },
                                      {"rank 3", "world size 3"}));
  auto shorter = good;
  shorter.pop_back();
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(shorter); }, {"3 endpoints"}));
  auto more_ranks = good;
  more_ranks[11] = std::byte{4};  // claims 4 ranks but carries 3 endpoints
  EXPECT_TRUE(throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(more_ranks); },
                                      {"4 endpoints"}));
  auto bad_qpn = good;
  bad_qpn[NodeEndpoint::kHeaderSize + 4] = std::byte{0xff};  // QPN above 24 bits
  EXPECT_TRUE(throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(bad_qpn); },
                                      {"queue_pairs[0]", "24 bits"}));
}

ibv::UdAddress sample_address(std::uint32_t rank) {
  return ibv::UdAddress{.qp_number = 0x400 + rank,
                        .qkey = 0x11111111,
                        .lid = 0,
                        .gid = ibv::Gid::from_string("::ffff:10.0.0." + std::to_string(rank + 1)),
                        .mtu = ibv::Mtu::mtu1024()};
}

ibv::net::PeerEndpoint sample_peer(std::uint32_t rank, std::uint32_t world) {
  return sample(rank, world).for_peer((rank + 1) % world);
}

TEST(NodeEndpoint, WithoutADatagramAddressTheBytesAreVersionOne) {
  const auto endpoint = sample(1, 3);
  ASSERT_FALSE(endpoint.datagram.has_value());
  const auto bytes = endpoint.to_bytes();
  EXPECT_EQ(bytes[0], std::byte{ibv::net::NodeEndpoint::kWireVersion});
  EXPECT_EQ(bytes[1], std::byte{0});
  EXPECT_EQ(bytes.size(), ibv::net::NodeEndpoint::kHeaderSize + 3 * ibv::Endpoint::kWireSize);
}

TEST(NodeEndpoint, WithADatagramAddressRoundTripsAsVersionTwo) {
  using ibv::net::NodeEndpoint;
  for (const std::uint32_t world : {1U, 2U, 5U}) {
    auto endpoint = sample(world - 1, world);
    endpoint.datagram = sample_address(world - 1);
    const auto bytes = endpoint.to_bytes();
    EXPECT_EQ(bytes.size(), NodeEndpoint::kHeaderSize + ibv::UdAddress::kWireSize +
                                world * ibv::Endpoint::kWireSize);
    EXPECT_EQ(bytes[0], std::byte{NodeEndpoint::kDatagramWireVersion});
    EXPECT_EQ(bytes[1], std::byte{NodeEndpoint::kHasDatagramFlag});
    const auto address = endpoint.datagram->to_bytes();  // right after the fixed header
    EXPECT_TRUE(std::equal(address.begin(), address.end(),
                           bytes.begin() + static_cast<std::ptrdiff_t>(NodeEndpoint::kHeaderSize)));
    EXPECT_EQ(NodeEndpoint::from_bytes(bytes), endpoint);
    EXPECT_EQ(endpoint.for_peer(0).datagram, endpoint.datagram);
  }
}

TEST(NodeEndpoint, VersionTwoWithoutTheFlagIsRefused) {
  // One form per value: without an address the form is version 1 (the fuzz target's invariant,
  // decode accepts only what encode makes, found this).
  auto bytes = sample(1, 3).to_bytes();
  bytes[0] = std::byte{2};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)ibv::net::NodeEndpoint::from_bytes(bytes); },
                                      {"version 2 without a datagram address"}));
}

TEST(NodeEndpoint, RejectsMalformedVersionTwoBytes) {
  using ibv::net::NodeEndpoint;
  auto endpoint = sample(1, 3);
  endpoint.datagram = sample_address(1);
  const auto good = endpoint.to_bytes();
  auto unknown_flag = good;
  unknown_flag[1] = std::byte{0x03};
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(unknown_flag); }, {"flags 3"}));
  auto reserved = good;
  reserved[3] = std::byte{1};
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(reserved); }, {"reserved"}));
  auto version_three = good;
  version_three[0] = std::byte{3};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(version_three); },
                                      {"version 3"}));
  auto no_address = sample(1, 3).to_bytes();  // the flag set, but no address in the bytes
  no_address[0] = std::byte{2};
  no_address[1] = std::byte{1};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(no_address); },
                                      {"a datagram address", "3 endpoints"}));
  auto address_in_v1 = good;  // version 1 cannot carry one: the size does not fit
  address_in_v1[0] = std::byte{1};
  address_in_v1[1] = std::byte{0};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(address_in_v1); },
                                      {"3 endpoints"}));
  auto bad_mtu = good;
  bad_mtu[NodeEndpoint::kHeaderSize + 1] = std::byte{0};  // the address's MTU code
  EXPECT_TRUE(throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(bad_mtu); },
                                      {"the datagram address", "MTU code 0"}));
}

TEST(PeerEndpoint, WithoutADatagramAddressIsVersionOneOfTheOriginalSize) {
  using ibv::net::PeerEndpoint;
  const auto endpoint = sample_peer(2, 4);
  const auto bytes = endpoint.to_bytes();
  ASSERT_EQ(bytes.size(), PeerEndpoint::kWireSize);
  EXPECT_EQ(bytes[0], std::byte{1});
  EXPECT_EQ(bytes[1], std::byte{0});
  EXPECT_EQ(bytes[7], std::byte{2});   // rank
  EXPECT_EQ(bytes[11], std::byte{4});  // world size
  const auto qp = endpoint.queue_pair.to_bytes();
  EXPECT_TRUE(std::equal(qp.begin(), qp.end(), bytes.begin() + 12));
  EXPECT_EQ(PeerEndpoint::from_bytes(bytes), endpoint);
}

TEST(PeerEndpoint, WithADatagramAddressRoundTripsAsVersionTwo) {
  using ibv::net::PeerEndpoint;
  auto endpoint = sample_peer(2, 4);
  endpoint.datagram = sample_address(2);
  const auto bytes = endpoint.to_bytes();
  ASSERT_EQ(bytes.size(), PeerEndpoint::kDatagramWireSize);
  EXPECT_EQ(bytes[0], std::byte{PeerEndpoint::kDatagramWireVersion});
  EXPECT_EQ(bytes[1], std::byte{PeerEndpoint::kHasDatagramFlag});
  const auto address = endpoint.datagram->to_bytes();  // last, after the barrier region
  EXPECT_TRUE(std::equal(address.begin(), address.end(),
                         bytes.begin() + static_cast<std::ptrdiff_t>(PeerEndpoint::kWireSize)));
  EXPECT_EQ(PeerEndpoint::from_bytes(bytes), endpoint);
  // The version 1 part is the same bytes as without the address, but for version and flags.
  auto without = endpoint;
  without.datagram.reset();
  const auto v1 = without.to_bytes();
  EXPECT_TRUE(std::equal(v1.begin() + 2, v1.end(), bytes.begin() + 2));
}

TEST(PeerEndpoint, RejectsMalformedBytes) {
  using ibv::net::PeerEndpoint;
  auto endpoint = sample_peer(1, 3);
  const auto v1 = endpoint.to_bytes();
  endpoint.datagram = sample_address(1);
  const auto v2 = endpoint.to_bytes();
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)PeerEndpoint::from_bytes(std::span(v1).first(5)); }, {"5 bytes"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)PeerEndpoint::from_bytes(std::span(v2).first(PeerEndpoint::kWireSize)); },
      {"60 bytes instead of 88"}));
  auto v1_with_more = v2;  // version 1 cannot carry an address
  v1_with_more[0] = std::byte{1};
  v1_with_more[1] = std::byte{0};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)PeerEndpoint::from_bytes(v1_with_more); },
                                      {"88 bytes instead of 60"}));
  auto flags_in_v1 = v1;
  flags_in_v1[1] = std::byte{1};
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)PeerEndpoint::from_bytes(flags_in_v1); }, {"reserved"}));
  auto unknown_flag = v2;
  unknown_flag[1] = std::byte{0x81};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)PeerEndpoint::from_bytes(unknown_flag); },
                                      {"flags 129"}));
  auto version = v2;
  version[0] = std::byte{7};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)PeerEndpoint::from_bytes(version); },
                                      {"PeerEndpoint", "version 7"}));
  auto rank = v2;
  rank[7] = std::byte{3};
  EXPECT_TRUE(throws_invalid_argument([&] { (void)PeerEndpoint::from_bytes(rank); },
                                      {"rank 3", "world size 3"}));
  auto bad_qpn = v2;
  bad_qpn[PeerEndpoint::kWireSize + 4] = std::byte{0x01};  // the address's QPN above 24 bits
  EXPECT_TRUE(throws_invalid_argument([&] { (void)PeerEndpoint::from_bytes(bad_qpn); },
                                      {"the datagram address", "24 bits"}));
}

}  // namespace
