// SPDX-License-Identifier: MIT
// Tests NodeEndpoint's binary form: round trip, exact header layout, and every rejection of
// malformed bytes (what a peer of another version, or garbage, would send).
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
                                  .barrier = ibv::RemoteMemoryRegion(0x7f0000001000, 4096, 0x77)};
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

}  // namespace
