// SPDX-License-Identifier: MIT
// The bad-input sweep, part 1: every public entry point that takes a size, length, offset,
// index, rank, world size, timeout, count or depth and needs no RDMA device, tried with zero,
// the type's maximum, negative values where the type has them, and both sides of each bound
// (last valid, first invalid). Every invalid value must throw ibv::Error (invalid_argument unless
// a case says otherwise) whose message names the argument; every last valid value must be
// accepted. The device half (posting, builders, the memlock limit) is
// tests/device/bad_input_test.cpp; the inventory of all checked inputs, with where each is
// checked, is docs/bad-input.md.
//
// Inventory of this file (entry point: argument, bounds):
//   Psn: value 0..2^24-1                           AckTimeout: exponent 1..31 (0 = infinite())
//   RetryCount: 0..7                               RnrRetryCount: 0..6 (7 = infinite())
//   RnrTimer: code 0..31                           QueueDepth, SgeCount: 1..2^31-1
//   InlineSize: 0..65536                           ReadAtomicDepth: 1..255
//   Mtu::from_bytes: 256/512/1024/2048/4096        Mtu::from_native: 1..5
//   RemoteMemoryRegion(address, length): address + length <= 2^64 - 1
//   RemoteMemoryRegion::sub_region(offset, length), sub_region_from(offset), element<T>(index),
//     field(): inside the region;  from_bytes: exactly 20 bytes
//   PeerRemoteMemoryRegion: the same, keeping the peer
//   Endpoint::from_bytes: 28 bytes, QPN/PSN 24 bits;  NodeEndpoint::from_bytes: size per world
//   BarrierGroup::all(world_size >= 1), subset(ranks < world_size, me in ranks), rank_at(position
//     < size), position_of(member); round_count(group_size >= 1)
//   NetworkConfigBuilder: hosts[i].port 1..65535, rankid 0..N-1; NetworkConfig::host(rank < N)
//   rank_from_launcher: size >= 1, rank < size, 32-bit decimal;  check_against: size == N
//   Exchanger: rank < N, options.timeout > 0, options.retry_interval > 0,
//     options.max_message_size 1..2^32-1; exchange_bytes(size <= max_message_size)
//   decode_header: received <= 24 bytes
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/ibv.hpp"
#include "ibv/net/exchange_message.hpp"
#include "support/bad_input_cases.hpp"

namespace {

using ibv_test::accepts;
using ibv_test::BadInputCase;
using ibv_test::rejects;
using ibv_test::run_cases;
using namespace std::chrono_literals;

constexpr std::uint32_t kU32Max = std::numeric_limits<std::uint32_t>::max();
constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::uint32_t kIntMax = std::numeric_limits<std::int32_t>::max();

// --- queue pair settings: value types ---------------------------------------------------------

TEST(BadInputUnit, QueuePairSettingValueTypes) {
  std::vector<BadInputCase> cases{
      accepts("Psn", "psn", "0", [] { (void)ibv::Psn(0); }),
      accepts("Psn", "psn", "2^24 - 1", [] { (void)ibv::Psn(0xFFFFFF); }),
      rejects("Psn", "psn", "2^24", [] { (void)ibv::Psn(0x1000000); }, {"psn 16777216", "24 bits"}),
      rejects("Psn", "psn", "u32 max", [] { (void)ibv::Psn(kU32Max); }, {"psn 4294967295"}),

      rejects("AckTimeout", "exponent", "0", [] { (void)ibv::AckTimeout(0); },
              {"exponent 0", "infinite()"}),
      accepts("AckTimeout", "exponent", "1", [] { (void)ibv::AckTimeout(1); }),
      accepts("AckTimeout", "exponent", "31", [] { (void)ibv::AckTimeout(31); }),
      rejects("AckTimeout", "exponent", "32", [] { (void)ibv::AckTimeout(32); },
              {"exponent 32", "1..31"}),
      rejects("AckTimeout", "exponent", "u8 max", [] { (void)ibv::AckTimeout(255); },
              {"exponent 255"}),

      accepts("RetryCount", "retry_count", "0", [] { (void)ibv::RetryCount(0); }),
      accepts("RetryCount", "retry_count", "7", [] { (void)ibv::RetryCount(7); }),
      rejects("RetryCount", "retry_count", "8", [] { (void)ibv::RetryCount(8); },
              {"retry_count 8", "0..7"}),
      rejects("RetryCount", "retry_count", "u8 max", [] { (void)ibv::RetryCount(255); },
              {"retry_count 255"}),

      accepts("RnrRetryCount", "rnr_retry", "0", [] { (void)ibv::RnrRetryCount(0); }),
      accepts("RnrRetryCount", "rnr_retry", "6", [] { (void)ibv::RnrRetryCount(6); }),
      rejects("RnrRetryCount", "rnr_retry", "7", [] { (void)ibv::RnrRetryCount(7); },
              {"rnr_retry 7", "infinite()"}),
      rejects("RnrRetryCount", "rnr_retry", "8", [] { (void)ibv::RnrRetryCount(8); },
              {"rnr_retry 8", "0..6"}),
      rejects("RnrRetryCount", "rnr_retry", "u8 max", [] { (void)ibv::RnrRetryCount(255); },
              {"rnr_retry 255"}),

      accepts("RnrTimer", "min_rnr_timer", "0", [] { (void)ibv::RnrTimer(0); }),
      accepts("RnrTimer", "min_rnr_timer", "31", [] { (void)ibv::RnrTimer(31); }),
      rejects("RnrTimer", "min_rnr_timer", "32", [] { (void)ibv::RnrTimer(32); },
              {"min_rnr_timer 32", "0..31"}),
      rejects("RnrTimer", "min_rnr_timer", "u8 max", [] { (void)ibv::RnrTimer(255); },
              {"min_rnr_timer 255"}),

      rejects("QueueDepth", "queue depth", "0", [] { (void)ibv::QueueDepth(0); },
              {"queue depth 0", "1..2147483647"}),
      accepts("QueueDepth", "queue depth", "1", [] { (void)ibv::QueueDepth(1); }),
      accepts("QueueDepth", "queue depth", "2^31 - 1", [] { (void)ibv::QueueDepth(kIntMax); }),
      rejects("QueueDepth", "queue depth", "2^31", [] { (void)ibv::QueueDepth(kIntMax + 1U); },
              {"queue depth 2147483648"}),
      rejects("QueueDepth", "queue depth", "u32 max", [] { (void)ibv::QueueDepth(kU32Max); },
              {"queue depth 4294967295"}),

      rejects("SgeCount", "SGE count", "0", [] { (void)ibv::SgeCount(0); },
              {"SGE count 0", "1..2147483647"}),
      accepts("SgeCount", "SGE count", "1", [] { (void)ibv::SgeCount(1); }),
      accepts("SgeCount", "SGE count", "2^31 - 1", [] { (void)ibv::SgeCount(kIntMax); }),
      rejects("SgeCount", "SGE count", "2^31", [] { (void)ibv::SgeCount(kIntMax + 1U); },
              {"SGE count 2147483648"}),
      rejects("SgeCount", "SGE count", "u32 max", [] { (void)ibv::SgeCount(kU32Max); },
              {"SGE count 4294967295"}),

      accepts("InlineSize", "max_inline_data", "0", [] { (void)ibv::InlineSize(0); }),
      accepts("InlineSize", "max_inline_data", "65536", [] { (void)ibv::InlineSize(65536); }),
      rejects("InlineSize", "max_inline_data", "65537", [] { (void)ibv::InlineSize(65537); },
              {"max_inline_data 65537"}),
      rejects("InlineSize", "max_inline_data", "u32 max", [] { (void)ibv::InlineSize(kU32Max); },
              {"max_inline_data 4294967295"}),

      rejects("ReadAtomicDepth", "read/atomic depth", "0", [] { (void)ibv::ReadAtomicDepth(0); },
              {"read/atomic depth 0"}),
      accepts("ReadAtomicDepth", "read/atomic depth", "1", [] { (void)ibv::ReadAtomicDepth(1); }),
      accepts("ReadAtomicDepth", "read/atomic depth", "u8 max",
              [] { (void)ibv::ReadAtomicDepth(255); }),

      rejects("Mtu::from_bytes", "mtu", "0", [] { (void)ibv::Mtu::from_bytes(0); }, {"mtu 0"}),
      rejects("Mtu::from_bytes", "mtu", "255", [] { (void)ibv::Mtu::from_bytes(255); },
              {"mtu 255"}),
      accepts("Mtu::from_bytes", "mtu", "256", [] { (void)ibv::Mtu::from_bytes(256); }),
      rejects("Mtu::from_bytes", "mtu", "257", [] { (void)ibv::Mtu::from_bytes(257); },
              {"mtu 257"}),
      accepts("Mtu::from_bytes", "mtu", "4096", [] { (void)ibv::Mtu::from_bytes(4096); }),
      rejects("Mtu::from_bytes", "mtu", "4097", [] { (void)ibv::Mtu::from_bytes(4097); },
              {"mtu 4097"}),
      rejects("Mtu::from_bytes", "mtu", "8192", [] { (void)ibv::Mtu::from_bytes(8192); },
              {"mtu 8192"}),
      rejects("Mtu::from_bytes", "mtu", "u32 max", [] { (void)ibv::Mtu::from_bytes(kU32Max); },
              {"mtu 4294967295"}),
      rejects("Mtu::from_native", "ibv_mtu", "0", [] { (void)ibv::Mtu::from_native(0); },
              {"ibv_mtu 0", "1..5"}),
      accepts("Mtu::from_native", "ibv_mtu", "1", [] { (void)ibv::Mtu::from_native(1); }),
      accepts("Mtu::from_native", "ibv_mtu", "5", [] { (void)ibv::Mtu::from_native(5); }),
      rejects("Mtu::from_native", "ibv_mtu", "6", [] { (void)ibv::Mtu::from_native(6); },
              {"ibv_mtu 6"}),
      rejects("Mtu::from_native", "ibv_mtu", "-1", [] { (void)ibv::Mtu::from_native(-1); },
              {"ibv_mtu -1"}),
      rejects("Mtu::from_native", "ibv_mtu", "int min",
              [] { (void)ibv::Mtu::from_native(std::numeric_limits<int>::min()); },
              {"ibv_mtu -2147483648"}),
  };
  run_cases(cases);
}

TEST(BadInputUnit, DurationConversionsClampInsteadOfRejecting) {
  // By design (documented in queue_pair_settings.hpp): "at least d" of zero or a negative d is
  // the shortest timer, never infinite; a huge d is the longest. Checked here so the rule holds.
  for (const auto d : {std::chrono::nanoseconds::min(), -1ns, 0ns}) {
    SCOPED_TRACE(d.count());
    EXPECT_EQ(ibv::AckTimeout::at_least(d).exponent(), 1);
  }
  EXPECT_EQ(ibv::AckTimeout::at_least(std::chrono::nanoseconds::max()).exponent(), 31);
  for (const auto d : {std::chrono::microseconds::min(), -1us, 0us}) {
    SCOPED_TRACE(d.count());
    EXPECT_EQ(ibv::RnrTimer::at_least(d).code(), 1);
  }
  EXPECT_EQ(ibv::RnrTimer::at_least(std::chrono::microseconds::max()).code(), 0);  // 655.36 ms
}

// --- remote regions -----------------------------------------------------------------------------

struct Record {
  std::uint64_t id;
  std::uint32_t count;
  std::uint32_t flags;
};

TEST(BadInputUnit, RemoteRegionArithmetic) {
  const ibv::RemoteMemoryRegion r(0x10000, 4096, 0x42);
  const ibv::PeerRemoteMemoryRegion p(2, r);
  const ibv::RemoteMemoryRegion small(0x10000, sizeof(Record) - 1, 0x42);
  std::vector<BadInputCase> cases{
      accepts("RemoteMemoryRegion", "address + length", "u64 max - 1 + 1",
              [] { (void)ibv::RemoteMemoryRegion(kU64Max - 1, 1, 1); }),
      rejects("RemoteMemoryRegion", "address + length", "u64 max + 1",
              [] { (void)ibv::RemoteMemoryRegion(kU64Max, 1, 1); },
              {"address + length", "overflows"}),
      rejects("RemoteMemoryRegion", "address + length", "1 + u64 max",
              [] { (void)ibv::RemoteMemoryRegion(1, kU64Max, 1); },
              {"address + length", "overflows"}),
      accepts("RemoteMemoryRegion", "length", "0", [] { (void)ibv::RemoteMemoryRegion(0, 0, 0); }),

      accepts("sub_region", "offset + length", "4096 + 0", [&] { (void)r.sub_region(4096, 0); }),
      rejects("sub_region", "offset", "4097", [&] { (void)r.sub_region(4097, 0); },
              {"offset 4097", "4096 bytes"}),
      accepts("sub_region", "offset + length", "0 + 4096", [&] { (void)r.sub_region(0, 4096); }),
      rejects("sub_region", "length", "4097", [&] { (void)r.sub_region(0, 4097); },
              {"length 4097", "4096 bytes"}),
      accepts("sub_region", "offset + length", "4095 + 1", [&] { (void)r.sub_region(4095, 1); }),
      rejects("sub_region", "offset + length", "4095 + 2", [&] { (void)r.sub_region(4095, 2); },
              {"offset 4095", "length 2"}),
      rejects("sub_region", "offset", "u64 max", [&] { (void)r.sub_region(kU64Max, 1); },
              {"offset 18446744073709551615"}),
      rejects("sub_region", "length", "u64 max", [&] { (void)r.sub_region(1, kU64Max); },
              {"length 18446744073709551615"}),
      accepts("sub_region_from", "offset", "4096", [&] { (void)r.sub_region_from(4096); }),
      rejects("sub_region_from", "offset", "4097", [&] { (void)r.sub_region_from(4097); },
              {"offset 4097"}),
      rejects("sub_region_from", "offset", "u64 max", [&] { (void)r.sub_region_from(kU64Max); },
              {"offset 18446744073709551615"}),

      accepts("element<u64>", "index", "0", [&] { (void)r.element<std::uint64_t>(0); }),
      accepts("element<u64>", "index", "511", [&] { (void)r.element<std::uint64_t>(511); }),
      rejects("element<u64>", "index", "512", [&] { (void)r.element<std::uint64_t>(512); },
              {"index 512", "512 elements", "0..511"}),
      rejects("element<u64>", "index", "u64 max / 8 + 1",
              [&] { (void)r.element<std::uint64_t>(kU64Max / 8 + 1); },
              {"index 2305843009213693952", "overflows"}),
      rejects("element<u64>", "index", "u64 max", [&] { (void)r.element<std::uint64_t>(kU64Max); },
              {"index 18446744073709551615"}),
      rejects("element<u64>", "index", "0 of an empty region",
              [] { (void)ibv::RemoteMemoryRegion(0x1000, 7, 1).element<std::uint64_t>(0); },
              {"index 0", "no valid index"}),
      accepts("field", "region length", "sizeof(Record)",
              [] { (void)ibv::RemoteMemoryRegion(0, sizeof(Record), 1).field(&Record::flags); }),
      rejects("field", "region length", "sizeof(Record) - 1",
              [&] { (void)small.field(&Record::flags); },
              {"field", "15 bytes", "smaller than the struct (16 bytes)"}),

      rejects("RemoteMemoryRegion::from_bytes", "bytes", "0 bytes",
              [] { (void)ibv::RemoteMemoryRegion::from_bytes({}); }, {"expected 20 bytes, got 0"}),
      rejects("RemoteMemoryRegion::from_bytes", "bytes", "19 bytes",
              [] {
                const std::vector<std::byte> b(19);
                (void)ibv::RemoteMemoryRegion::from_bytes(b);
              },
              {"got 19"}),
      rejects("RemoteMemoryRegion::from_bytes", "bytes", "21 bytes",
              [] {
                const std::vector<std::byte> b(21);
                (void)ibv::RemoteMemoryRegion::from_bytes(b);
              },
              {"got 21"}),

      accepts("PeerRemoteMemoryRegion::sub_region", "offset + length", "4095 + 1",
              [&] { EXPECT_EQ(p.sub_region(4095, 1).peer(), 2U); }),
      rejects("PeerRemoteMemoryRegion::sub_region", "offset + length", "4095 + 2",
              [&] { (void)p.sub_region(4095, 2); }, {"offset 4095", "length 2"}),
      rejects("PeerRemoteMemoryRegion::sub_region_from", "offset", "4097",
              [&] { (void)p.sub_region_from(4097); }, {"offset 4097"}),
      rejects("PeerRemoteMemoryRegion::element<u64>", "index", "512",
              [&] { (void)p.element<std::uint64_t>(512); }, {"index 512"}),
  };
  run_cases(cases);
}

// --- wire forms ---------------------------------------------------------------------------------

TEST(BadInputUnit, EndpointWireForms) {
  ibv::Endpoint endpoint;
  endpoint.qp_number = 0xFFFFFF;
  endpoint.psn = 0xFFFFFF;
  const auto good = endpoint.to_bytes();
  auto with = [good](std::size_t at, std::byte value) {
    auto b = good;
    b.at(at) = value;
    return b;
  };
  std::vector<BadInputCase> cases{
      accepts("Endpoint::from_bytes", "bytes", "QPN and PSN 2^24 - 1",
              [good] { (void)ibv::Endpoint::from_bytes(good); }),
      rejects("Endpoint::from_bytes", "bytes", "27 bytes",
              [good] { (void)ibv::Endpoint::from_bytes(std::span(good).first(27)); }, {"27"}),
      rejects("Endpoint::from_bytes", "bytes", "0 bytes",
              [] { (void)ibv::Endpoint::from_bytes({}); }, {"0"}),
      rejects("Endpoint::from_bytes", "QPN", "2^25 - 1",
              [b = with(4, std::byte{1})] { (void)ibv::Endpoint::from_bytes(b); }, {"QPN"}),
      rejects("Endpoint::from_bytes", "PSN", "2^25 - 1",
              [b = with(8, std::byte{1})] { (void)ibv::Endpoint::from_bytes(b); }, {"PSN"}),
      rejects("Endpoint::from_json", "qpn", "2^24",
              [] {
                (void)ibv::Endpoint::from_json(
                    R"({"qpn":16777216,"lid":0,"gid":"::ffff:10.0.0.1","psn":1})");
              },
              {"qpn"}),
      rejects("Endpoint::from_json", "psn", "-1",
              [] {
                (void)ibv::Endpoint::from_json(
                    R"({"qpn":1,"lid":0,"gid":"::ffff:10.0.0.1","psn":-1})");
              },
              {"psn"}),
      rejects("Endpoint::from_json", "lid", "65536",
              [] {
                (void)ibv::Endpoint::from_json(
                    R"({"qpn":1,"lid":65536,"gid":"::ffff:10.0.0.1","psn":1})");
              },
              {"lid"}),
      rejects("NodeEndpoint::from_bytes", "bytes", "0 bytes",
              [] { (void)ibv::net::NodeEndpoint::from_bytes({}); }, {"bytes"}),
  };
  run_cases(cases);
}

// --- barrier groups -----------------------------------------------------------------------------

TEST(BadInputUnit, BarrierGroups) {
  using ibv::net::BarrierAlgorithm;
  using ibv::net::BarrierGroup;
  const auto group = BarrierGroup::all(4);
  std::vector<BadInputCase> cases{
      rejects("BarrierGroup::all", "world_size", "0", [] { (void)BarrierGroup::all(0); },
              {"world_size", "0"}),
      accepts("BarrierGroup::all", "world_size", "1", [] { (void)BarrierGroup::all(1); }),
      rejects("BarrierGroup::subset", "world_size", "0",
              [] { (void)BarrierGroup::subset({0}, 0, 0); }, {"world_size"}),
      rejects("BarrierGroup::subset", "ranks", "empty",
              [] { (void)BarrierGroup::subset({}, 0, 4); }, {"ranks", "empty"}),
      accepts("BarrierGroup::subset", "ranks", "{0, 3} of 4",
              [] {
                (void)BarrierGroup::subset({0, 3}, 0, 4);
              }),
      rejects("BarrierGroup::subset", "ranks", "{0, 4} of 4",
              [] {
                (void)BarrierGroup::subset({0, 4}, 0, 4);
              },
              {"ranks", "rank 4", "0..3"}),
      rejects("BarrierGroup::subset", "ranks", "{0, u32 max} of 4",
              [] {
                (void)BarrierGroup::subset({0, kU32Max}, 0, 4);
              },
              {"ranks", "4294967295"}),
      rejects("BarrierGroup::subset", "ranks", "{1, 0}",
              [] {
                (void)BarrierGroup::subset({1, 0}, 0, 4);
              },
              {"ranks", "ascending"}),
      rejects("BarrierGroup::subset", "ranks", "{1, 1}",
              [] {
                (void)BarrierGroup::subset({1, 1}, 1, 4);
              },
              {"ranks", "twice"}),
      rejects("BarrierGroup::subset", "me", "not in ranks",
              [] {
                (void)BarrierGroup::subset({0, 1}, 2, 4);
              },
              {"me", "rank 2"}),
      accepts("BarrierGroup::rank_at", "position", "3", [&] { (void)group.rank_at(3); }),
      rejects("BarrierGroup::rank_at", "position", "4", [&] { (void)group.rank_at(4); },
              {"position", "4", "group size 4"}),
      rejects("BarrierGroup::rank_at", "position", "size_t max",
              [&] { (void)group.rank_at(std::numeric_limits<std::size_t>::max()); }, {"position"}),
      accepts("BarrierGroup::position_of", "rank", "3", [&] { (void)group.position_of(3); }),
      rejects("BarrierGroup::position_of", "rank", "4", [&] { (void)group.position_of(4); },
              {"rank", "4", "not a member"}),
      rejects("round_count", "group_size", "0",
              [] { (void)ibv::net::round_count(BarrierAlgorithm::dissemination, 0); },
              {"group_size", "0"}),
      rejects("round_count", "algorithm", "9",
              [] { (void)ibv::net::round_count(static_cast<BarrierAlgorithm>(9), 2); },
              {"algorithm", "9"}),
      rejects("barrier_schedule", "me", "4",
              [&] { (void)ibv::net::barrier_schedule(BarrierAlgorithm::centralized, group, 4); },
              {"me", "rank 4"}),
  };
  run_cases(cases);
}

// --- network configuration, launcher, exchanger -------------------------------------------------

ibv::net::HostConfig host(std::uint32_t rank, std::uint16_t port) {
  return {.rank = rank, .hostname = "127.0.0.1", .port = port, .ibdev = "rxe0", .comment = {}};
}

TEST(BadInputUnit, NetworkConfigLauncherAndExchanger) {
  using ibv::net::NetworkConfig;
  using ibv::net::NetworkConfigBuilder;
  const NetworkConfig two =
      NetworkConfigBuilder().add_host(host(0, 1)).add_host(host(1, 65535)).build();
  const NetworkConfig one = NetworkConfigBuilder().add_host(host(0, 18515)).build();
  using Environment = std::map<std::string, std::string, std::less<>>;
  auto launcher = [](Environment environment) {
    return [environment] {
      (void)ibv::net::rank_from_launcher(
          [&environment](std::string_view name) -> std::optional<std::string> {
            const auto it = environment.find(name);
            if (it == environment.end()) return std::nullopt;
            return it->second;
          });
    };
  };
  auto exchanger = [one](const ibv::net::ExchangerOptions& options, std::uint32_t rank = 0) {
    return [one, options, rank] { ibv::net::Exchanger(one, rank, options); };
  };
  std::vector<BadInputCase> cases{
      accepts("NetworkConfigBuilder::build", "port", "1 and 65535", [&] { (void)two; }),
      rejects("NetworkConfigBuilder::build", "port", "0",
              [] { (void)NetworkConfigBuilder().add_host(host(0, 0)).build(); },
              {"hosts[0].port", "0"}),
      rejects("NetworkConfigBuilder::build", "rankid", "1 without 0",
              [] { (void)NetworkConfigBuilder().add_host(host(1, 1)).build(); }, {"rank"}),
      rejects(
          "NetworkConfigBuilder::build", "rankid", "u32 max",
          [] {
            (void)NetworkConfigBuilder().add_host(host(0, 1)).add_host(host(kU32Max, 2)).build();
          },
          {"4294967295"}),
      rejects("NetworkConfig::from_json", "port", "65536",
              [] {
                (void)NetworkConfig::from_json(
                    R"({"hosts":[{"hostname":"a","port":65536,"ibdev":"rxe0","rankid":0}]})");
              },
              {"port", "65536"}),
      rejects("NetworkConfig::from_json", "port", "-1",
              [] {
                (void)NetworkConfig::from_json(
                    R"({"hosts":[{"hostname":"a","port":-1,"ibdev":"rxe0","rankid":0}]})");
              },
              {"port"}),
      rejects("NetworkConfig::from_json", "rankid", "-1",
              [] {
                (void)NetworkConfig::from_json(
                    R"({"hosts":[{"hostname":"a","port":1,"ibdev":"rxe0","rankid":-1}]})");
              },
              {"rankid"}),
      accepts("NetworkConfig::host", "rank", "1 of 2", [&] { (void)two.host(1); }),
      rejects("NetworkConfig::host", "rank", "2 of 2", [&] { (void)two.host(2); },
              {"rank 2", "world size is 2"}),
      rejects("NetworkConfig::host", "rank", "u32 max", [&] { (void)two.host(kU32Max); },
              {"rank 4294967295"}),

      accepts("rank_from_launcher", "rank", "size - 1",
              launcher({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}})),
      rejects("rank_from_launcher", "rank", "size",
              launcher({{"PMI_RANK", "2"}, {"PMI_SIZE", "2"}}), {"PMI_RANK"}),
      rejects("rank_from_launcher", "size", "0", launcher({{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}),
              {"PMI_SIZE"}),
      rejects("rank_from_launcher", "rank", "-1",
              launcher({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}}),
              {"OMPI_COMM_WORLD_RANK"}),
      rejects("rank_from_launcher", "size", "2^32",
              launcher({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4294967296"}}), {"SLURM_NTASKS"}),
      rejects(
          "check_against", "size", "3 for 2 hosts",
          [&] { ibv::net::check_against({.rank = 0, .size = 3, .source = "PMI_RANK/SIZE"}, two); },
          {"3", "2"}),

      accepts("Exchanger", "rank", "0 of 1", exchanger({})),
      rejects("Exchanger", "rank", "1 of 1", exchanger({}, 1), {"rank 1"}),
      rejects("Exchanger", "rank", "u32 max", exchanger({}, kU32Max), {"rank 4294967295"}),
      rejects("Exchanger", "options.timeout", "0", exchanger({.timeout = 0ms}),
              {"options.timeout 0 ms"}),
      rejects("Exchanger", "options.timeout", "-1 ms", exchanger({.timeout = -1ms}),
              {"options.timeout -1 ms"}),
      rejects("Exchanger", "options.timeout", "min",
              exchanger({.timeout = std::chrono::milliseconds::min()}), {"options.timeout"}),
      accepts("Exchanger", "options.timeout", "1 ms", exchanger({.timeout = 1ms})),
      rejects("Exchanger", "options.retry_interval", "0", exchanger({.retry_interval = 0ms}),
              {"options.retry_interval 0 ms"}),
      rejects("Exchanger", "options.retry_interval", "-1 ms", exchanger({.retry_interval = -1ms}),
              {"options.retry_interval -1 ms"}),
      rejects("Exchanger", "options.max_message_size", "0", exchanger({.max_message_size = 0}),
              {"options.max_message_size 0"}),
      accepts("Exchanger", "options.max_message_size", "2^32 - 1",
              exchanger({.max_message_size = kU32Max})),
      rejects("Exchanger", "options.max_message_size", "2^32",
              exchanger({.max_message_size = std::size_t{kU32Max} + 1}),
              {"options.max_message_size 4294967296"}),
      accepts("Exchanger::exchange_bytes", "mine", "max_message_size bytes",
              [one] {
                ibv::net::Exchanger e(one, 0, {.max_message_size = 16});
                const std::vector<std::byte> mine(16);
                (void)e.exchange_bytes(mine);
              }),
      rejects("Exchanger::exchange_bytes", "mine", "max_message_size + 1 bytes",
              [one] {
                ibv::net::Exchanger e(one, 0, {.max_message_size = 16});
                const std::vector<std::byte> mine(17);
                (void)e.exchange_bytes(mine);
              },
              {"17 bytes", "maximum of 16", "nothing was sent"}),
      rejects("decode_header", "received", "25 bytes",
              [] {
                const std::vector<std::byte> received(25);
                (void)ibv::net::decode_header(received, {});
              },
              {"received"}),
  };
  run_cases(cases);
}

}  // namespace
