// SPDX-License-Identifier: MIT
// Tests NodeEndpoint's and PeerEndpoint's binary forms: round trip with and without a datagram
// address and a control part (versions 1 and 2), exact layout, and every rejection of malformed
// bytes (what a peer of another version, or garbage, would send).
#include "ibv/net/node_endpoint.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
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
                                  .datagram = {},
                                  .control = {}};
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
                                      {"version 2 without flags", "that form is version 1"}));
}

TEST(NodeEndpoint, RejectsMalformedVersionTwoBytes) {
  using ibv::net::NodeEndpoint;
  auto endpoint = sample(1, 3);
  endpoint.datagram = sample_address(1);
  const auto good = endpoint.to_bytes();
  auto unknown_flag = good;
  unknown_flag[1] = std::byte{0x05};
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(unknown_flag); }, {"flags 5"}));
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

// --- The control part (flag bit 1) ---------------------------------------------------------

ibv::RemoteMemoryRegion control_block() { return {0x7f0000200000, 256, 0x99}; }

ibv::net::NodeControl sample_control(std::uint32_t rank, std::uint32_t world) {
  ibv::net::NodeControl control{.queue_pairs = {}, .block = control_block()};
  for (std::uint32_t peer = 0; peer < world; ++peer) {
    ibv::Endpoint qp;
    if (peer != rank) {
      qp.qp_number = 0x500 + peer;
      qp.psn = 0x600 + peer;
      qp.gid = ibv::Gid::from_string("::ffff:10.0.1." + std::to_string(rank + 1));
    }
    control.queue_pairs.push_back(qp);
  }
  return control;
}

ibv::net::NodeEndpoint sample_with_control(std::uint32_t rank, std::uint32_t world,
                                           bool with_datagram) {
  auto endpoint = sample(rank, world);
  endpoint.control = sample_control(rank, world);
  if (with_datagram) endpoint.datagram = sample_address(rank);
  return endpoint;
}

// Hex digits to bytes; spaces are skipped.
std::vector<std::byte> from_hex(std::string_view hex) {
  std::vector<std::byte> out;
  std::string digits;
  for (const char c : hex) {
    if (c == ' ') continue;
    digits += c;
    if (digits.size() == 2) {
      out.push_back(static_cast<std::byte>(std::stoul(digits, nullptr, 16)));
      digits.clear();
    }
  }
  return out;
}

bool bytes_at(const std::vector<std::byte>& bytes, std::size_t offset,
              std::span<const std::byte> part) {
  return offset + part.size() <= bytes.size() &&
         std::equal(part.begin(), part.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset));
}

TEST(NodeEndpoint, NeitherPartKeepsTheVersionOneBytes) {
  // The original form, byte for byte: a Node with neither datagrams nor a control plane sends
  // what it always did.
  const auto expected = from_hex(
      "01000000 00000001 00000002"                                    // version, rank 1 of 2
      "00007f0000001000 0000000000001000 00000077"                    // barrier region
      "0100 0000 00000100 00000200 00000000000000000000ffff0a000002"  // queue_pairs[0]
      "0100 0000 00000000 00000000 00000000000000000000000000000000"  // queue_pairs[1]: own
  );
  EXPECT_EQ(sample(1, 2).to_bytes(), expected);
  EXPECT_EQ(ibv::net::NodeEndpoint::from_bytes(expected), sample(1, 2));
}

TEST(PeerEndpoint, NeitherPartKeepsTheVersionOneBytes) {
  const auto expected = from_hex(
      "01000000 00000002 00000004"                                    // version, rank 2 of 4
      "0100 0000 00000103 00000203 00000000000000000000ffff0a000003"  // queue pair for rank 3
      "00007f0000001000 0000000000001000 00000077"                    // barrier region
  );
  EXPECT_EQ(sample_peer(2, 4).to_bytes(), expected);
  EXPECT_EQ(ibv::net::PeerEndpoint::from_bytes(expected), sample_peer(2, 4));
}

TEST(NodeEndpoint, TheControlPartRoundTripsWithAndWithoutADatagramAddress) {
  using ibv::net::NodeEndpoint;
  for (const bool with_datagram : {false, true}) {
    for (const std::uint32_t world : {1U, 2U, 5U, 64U}) {
      const auto endpoint = sample_with_control(world - 1, world, with_datagram);
      const auto bytes = endpoint.to_bytes();
      EXPECT_EQ(bytes.size(), NodeEndpoint::kHeaderSize +
                                  (with_datagram ? ibv::UdAddress::kWireSize : 0) +
                                  NodeEndpoint::kControlHeaderSize +
                                  std::size_t{2} * world * ibv::Endpoint::kWireSize);
      EXPECT_EQ(bytes[0], std::byte{NodeEndpoint::kDatagramWireVersion});
      EXPECT_EQ(bytes[1], static_cast<std::byte>(with_datagram ? 0x03 : 0x02));
      EXPECT_EQ(NodeEndpoint::from_bytes(bytes), endpoint);
    }
  }
}

TEST(NodeEndpoint, TheControlBlockFollowsTheAddressAndTheControlQueuePairsTheQueuePairs) {
  using ibv::net::NodeEndpoint;
  constexpr std::uint32_t kWorld = 3;
  for (const bool with_datagram : {false, true}) {
    const auto endpoint = sample_with_control(1, kWorld, with_datagram);
    const auto bytes = endpoint.to_bytes();
    const std::size_t block_at =
        NodeEndpoint::kHeaderSize + (with_datagram ? ibv::UdAddress::kWireSize : 0);
    EXPECT_TRUE(bytes_at(bytes, block_at, control_block().to_bytes()));
    const std::size_t queue_pairs_at = block_at + NodeEndpoint::kControlHeaderSize;
    const std::size_t control_at = queue_pairs_at + kWorld * ibv::Endpoint::kWireSize;
    for (std::size_t p = 0; p < kWorld; ++p) {
      EXPECT_TRUE(bytes_at(bytes, queue_pairs_at + p * ibv::Endpoint::kWireSize,
                           endpoint.queue_pairs[p].to_bytes()))
          << p;
      EXPECT_TRUE(bytes_at(bytes, control_at + p * ibv::Endpoint::kWireSize,
                           endpoint.control->queue_pairs[p].to_bytes()))
          << p;
    }
    // Without the control part the rest is the same bytes, but for the flags.
    auto without = endpoint;
    without.control.reset();
    const auto rest = without.to_bytes();
    EXPECT_TRUE(std::equal(rest.begin() + 2, rest.begin() + static_cast<std::ptrdiff_t>(block_at),
                           bytes.begin() + 2));
    EXPECT_TRUE(bytes_at(bytes, queue_pairs_at,
                         std::span(rest).subspan(block_at, kWorld * ibv::Endpoint::kWireSize)));
  }
}

TEST(NodeEndpoint, RejectsMalformedControlParts) {
  using ibv::net::NodeEndpoint;
  const auto control_only = sample_with_control(1, 3, false).to_bytes();
  const auto both = sample_with_control(1, 3, true).to_bytes();
  const auto throws = [](const std::vector<std::byte>& bytes,
                         std::initializer_list<std::string_view> words) {
    return throws_invalid_argument([&] { (void)NodeEndpoint::from_bytes(bytes); }, words);
  };
  // Sizes that do not fit the flags.
  auto datagram_flag_only = both;
  datagram_flag_only[1] = std::byte{NodeEndpoint::kHasDatagramFlag};
  EXPECT_TRUE(throws(datagram_flag_only, {"a datagram address and 3 endpoints"}));
  auto control_flag_only = both;
  control_flag_only[1] = std::byte{NodeEndpoint::kHasControlFlag};
  EXPECT_TRUE(throws(control_flag_only, {"a control block", "as many control endpoints"}));
  auto control_flag_without_part = sample(1, 3).to_bytes();
  control_flag_without_part[0] = std::byte{2};
  control_flag_without_part[1] = std::byte{NodeEndpoint::kHasControlFlag};
  EXPECT_TRUE(throws(control_flag_without_part, {"a control block", "3 endpoints"}));
  auto in_version_one = control_only;
  in_version_one[0] = std::byte{1};
  in_version_one[1] = std::byte{0};
  EXPECT_TRUE(throws(in_version_one, {"3 endpoints"}));
  // The control endpoints' count is the world size: one missing, or a world size of 2 or 4.
  auto one_missing = control_only;
  one_missing.resize(one_missing.size() - ibv::Endpoint::kWireSize);
  EXPECT_TRUE(throws(one_missing, {"3 endpoints", "as many control endpoints"}));
  for (const std::byte world : {std::byte{2}, std::byte{4}}) {
    auto other_world = control_only;
    other_world[11] = world;
    EXPECT_TRUE(throws(other_world, {"as many control endpoints"}));
  }
  // Flags: unknown bits, and none at all.
  auto unknown_flag = both;
  unknown_flag[1] = std::byte{0x07};
  EXPECT_TRUE(throws(unknown_flag, {"flags 7"}));
  auto no_flag = control_only;
  no_flag[1] = std::byte{0};
  EXPECT_TRUE(throws(no_flag, {"version 2 without flags", "that form is version 1"}));
  // What the control part holds.
  for (const bool with_datagram : {false, true}) {
    const auto& good = with_datagram ? both : control_only;
    const std::size_t block_at =
        NodeEndpoint::kHeaderSize + (with_datagram ? ibv::UdAddress::kWireSize : 0);
    auto overflowing_block = good;  // address 2^64 - 256: address + length overflows
    std::fill_n(overflowing_block.begin() + static_cast<std::ptrdiff_t>(block_at), 7,
                std::byte{0xff});
    EXPECT_TRUE(throws(overflowing_block, {"the control block", "overflows"}));
    const std::size_t control_at =
        block_at + NodeEndpoint::kControlHeaderSize + 3 * ibv::Endpoint::kWireSize;
    auto bad_qpn = good;
    bad_qpn[control_at + 2 * ibv::Endpoint::kWireSize + 4] = std::byte{0x01};  // QPN 2^24 +
    EXPECT_TRUE(throws(bad_qpn, {"control->queue_pairs[2]", "24 bits"}));
    auto bad_version = good;
    bad_version[control_at] = std::byte{9};
    EXPECT_TRUE(throws(bad_version, {"control->queue_pairs[0]"}));
  }
}

TEST(NodeEndpoint, ToBytesRefusesControlQueuePairsOfAnotherCount) {
  auto endpoint = sample_with_control(1, 3, false);
  endpoint.control->queue_pairs.pop_back();
  EXPECT_TRUE(throws_invalid_argument([&] { (void)endpoint.to_bytes(); },
                                      {"NodeEndpoint::to_bytes", "control", "2 queue pairs"}));
}

TEST(NodeEndpoint, ForPeerCutsOutTheControlEndpoint) {
  using ibv::net::ControlEndpoint;
  using ibv::net::PeerEndpoint;
  for (const bool with_datagram : {false, true}) {
    const auto endpoint = sample_with_control(1, 3, with_datagram);
    for (std::uint32_t peer = 0; peer < 3; ++peer) {
      const PeerEndpoint cut = endpoint.for_peer(peer);
      ASSERT_TRUE(cut.control.has_value());
      EXPECT_EQ(*cut.control, (ControlEndpoint{.queue_pair = endpoint.control->queue_pairs[peer],
                                               .block = control_block()}));
      EXPECT_EQ(cut.queue_pair, endpoint.queue_pairs[peer]);
      EXPECT_EQ(cut.datagram, endpoint.datagram);
      EXPECT_EQ(PeerEndpoint::from_bytes(cut.to_bytes()), cut);
    }
  }
  EXPECT_FALSE(sample(1, 3).for_peer(0).control.has_value());
}

TEST(NodeEndpoint, ForPeerRefusesAPeerWithoutAnEntry) {
  const auto endpoint = sample_with_control(1, 3, false);
  EXPECT_TRUE(throws_invalid_argument([&] { (void)endpoint.for_peer(3); },
                                      {"NodeEndpoint::for_peer", "peer 3", "3 queue pairs"}));
  auto short_control = endpoint;
  short_control.control->queue_pairs.resize(2);
  EXPECT_TRUE(throws_invalid_argument([&] { (void)short_control.for_peer(2); },
                                      {"peer 2", "the control part", "2 queue pairs"}));
}

TEST(PeerEndpoint, TheControlPartRoundTripsWithAndWithoutADatagramAddress) {
  using ibv::net::PeerEndpoint;
  for (const bool with_datagram : {false, true}) {
    const auto endpoint = sample_with_control(2, 4, with_datagram).for_peer(3);
    const auto bytes = endpoint.to_bytes();
    const std::size_t control_at =
        PeerEndpoint::kWireSize + (with_datagram ? ibv::UdAddress::kWireSize : 0);
    ASSERT_EQ(bytes.size(), control_at + PeerEndpoint::kControlWireSize);
    EXPECT_EQ(bytes[0], std::byte{PeerEndpoint::kDatagramWireVersion});
    EXPECT_EQ(bytes[1], static_cast<std::byte>(with_datagram ? 0x03 : 0x02));
    // Last: the control queue pair, then the control block.
    EXPECT_TRUE(bytes_at(bytes, control_at, endpoint.control->queue_pair.to_bytes()));
    EXPECT_TRUE(bytes_at(bytes, control_at + ibv::Endpoint::kWireSize, control_block().to_bytes()));
    if (with_datagram) {
      EXPECT_TRUE(bytes_at(bytes, PeerEndpoint::kWireSize, endpoint.datagram->to_bytes()));
    }
    EXPECT_EQ(PeerEndpoint::from_bytes(bytes), endpoint);
    // What precedes the control part is the same bytes as without it, but for the flags.
    auto without = endpoint;
    without.control.reset();
    const auto rest = without.to_bytes();
    ASSERT_EQ(rest.size(), control_at);
    EXPECT_TRUE(std::equal(rest.begin() + 2, rest.end(), bytes.begin() + 2));
  }
}

TEST(PeerEndpoint, RejectsMalformedControlParts) {
  using ibv::net::PeerEndpoint;
  const auto control_only = sample_with_control(1, 3, false).for_peer(0).to_bytes();  // 108
  const auto both = sample_with_control(1, 3, true).for_peer(0).to_bytes();           // 136
  const auto throws = [](const std::vector<std::byte>& bytes,
                         std::initializer_list<std::string_view> words) {
    return throws_invalid_argument([&] { (void)PeerEndpoint::from_bytes(bytes); }, words);
  };
  auto datagram_flag_only = both;
  datagram_flag_only[1] = std::byte{PeerEndpoint::kHasDatagramFlag};
  EXPECT_TRUE(throws(datagram_flag_only, {"136 bytes instead of 88 (with a datagram address)"}));
  auto both_flags = control_only;
  both_flags[1] = std::byte{0x03};
  EXPECT_TRUE(throws(both_flags,
                     {"108 bytes instead of 136 (with a datagram address and a control part)"}));
  auto truncated = control_only;
  truncated.pop_back();
  EXPECT_TRUE(throws(truncated, {"107 bytes instead of 108 (with a control part)"}));
  auto in_version_one = control_only;
  in_version_one[0] = std::byte{1};
  in_version_one[1] = std::byte{0};
  EXPECT_TRUE(throws(in_version_one, {"108 bytes instead of 60"}));
  auto unknown_flag = control_only;
  unknown_flag[1] = std::byte{0x06};
  EXPECT_TRUE(throws(unknown_flag, {"PeerEndpoint", "flags 6"}));
  auto no_flag = control_only;
  no_flag[1] = std::byte{0};
  EXPECT_TRUE(throws(no_flag, {"version 2 without flags", "that form is version 1"}));
  for (const auto* good : {&control_only, &both}) {
    const std::size_t control_at = good->size() - PeerEndpoint::kControlWireSize;
    auto bad_qpn = *good;
    bad_qpn[control_at + 4] = std::byte{0x01};
    EXPECT_TRUE(throws(bad_qpn, {"the control queue pair", "24 bits"}));
    auto overflowing_block = *good;
    std::fill_n(overflowing_block.begin() +
                    static_cast<std::ptrdiff_t>(control_at + ibv::Endpoint::kWireSize),
                7, std::byte{0xff});
    EXPECT_TRUE(throws(overflowing_block, {"the control block", "overflows"}));
  }
}

}  // namespace
