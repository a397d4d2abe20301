// SPDX-License-Identifier: MIT
// The soak: every rank, round after round for IBV_SOAK_SECONDS (20 s in `make test`, 600 s in
// `make test-long`; at least 40 rounds), sends its successor on a ring one RDMA write with
// immediate and one send; the ring's stride changes every round (1, 2, ..., N-1), so over N-1
// rounds every rank talks to every other. Each round's payloads are checked byte by byte on
// arrival, a region is registered and dropped (registration churn), and a barrier (of each
// algorithm in turn) separates the rounds. At the end: this process's memory (resident set) and
// verbs objects are where they were after the warm-up.
//
// Stopping together: rank 0 decides when time is up and, before the round's barrier, RDMA-writes
// the last round's number into every rank's control word; the barrier makes that write visible,
// so every rank reads the same decision after it and runs the same number of rounds.
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device/device_fixture.hpp"
#include "device/resource_check.hpp"
#include "multi_host.hpp"
#include "test_rank.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// How long the soak runs: IBV_SOAK_SECONDS, else 20 s.
std::chrono::seconds soak_duration() {
  const char* text = std::getenv("IBV_SOAK_SECONDS");
  return std::chrono::seconds(text != nullptr && *text != '\0' ? std::stoul(text) : 20);
}

/// Resident set size of this process in KiB (/proc/self/statm), 0 if unreadable.
std::uint64_t resident_kib() {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages_total = 0;
  std::uint64_t pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return pages_resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
}

/// This process's verbs objects by device and kind; fails the test if they can not be read.
ResourceCounts own_objects() {
  std::string why;
  auto counts = own_resource_counts(why);
  EXPECT_TRUE(counts.has_value()) << "can not count verbs objects: " << why;
  return counts.value_or(ResourceCounts{});
}

constexpr std::size_t kMaxPayload = 8192;
constexpr std::uint64_t kNoStopYet = ~std::uint64_t{0};
constexpr std::size_t kWarmUpRounds = 20;
/// At least this many rounds however short the duration: the warm-up and as many again.
constexpr std::size_t kMinimumRounds = 2 * kWarmUpRounds;
constexpr std::array kSoakAlgorithms{net::BarrierAlgorithm::centralized,
                                     net::BarrierAlgorithm::binary_tree,
                                     net::BarrierAlgorithm::dissemination};

/// The payload size of `round`: 1 byte to 8 KiB, changing every round.
std::size_t payload_size(std::uint64_t round) {
  constexpr std::array<std::size_t, 6> kSizes{1, 64, 1000, 4096, 5555, kMaxPayload};
  return kSizes[round % kSizes.size()];
}

/// The bytes `sender` sends in `round` (kind 0: the write, 1: the send).
std::vector<std::byte> payload(std::uint32_t sender, std::uint64_t round, unsigned kind) {
  std::vector<std::byte> bytes(payload_size(round));
  fill_pattern(bytes,
               static_cast<unsigned>((round * 7919U) + (std::uint64_t{sender} * 31U) + kind));
  return bytes;
}

/// The immediate of `sender`'s write in `round`.
std::uint32_t immediate_of(std::uint32_t sender, std::uint64_t round) {
  return static_cast<std::uint32_t>((round << 12U) ^ sender);
}

TEST(MultiHostSoak, RingOfWritesWithImmediateAndSendsWithBarriersBetweenRounds) {
  Rank me;
  net::Node& node = me.node;
  const std::uint32_t rank = node.rank();
  const std::uint32_t world = node.world_size();
  ASSERT_GE(world, 2U) << "the soak needs at least two ranks";

  // inbox: [0, kMaxPayload) the predecessor's write, [kMaxPayload, 2 kMaxPayload) its send;
  // control: the last round, written by rank 0.
  std::vector<std::byte> inbox(2 * kMaxPayload);
  std::vector<std::byte> outbox(2 * kMaxPayload);
  std::array<std::uint64_t, 1> control{kNoStopYet};
  std::array<std::uint64_t, 1> stop_word{0};
  const MemoryRegion in_mr = me.pd.register_remote_accessible(inbox, RemoteAccess::write());
  const MemoryRegion out_mr = me.pd.register_local(outbox);
  const MemoryRegion control_mr = me.pd.register_remote_accessible(
      std::as_writable_bytes(std::span(control)), RemoteAccess::write());
  const MemoryRegion stop_mr = me.pd.register_local(std::as_writable_bytes(std::span(stop_word)));
  const auto inboxes = me.exchange(in_mr);
  const auto controls = me.exchange(control_mr);

  const auto deadline = Clock::now() + soak_duration();
  const auto started = Clock::now();
  std::uint64_t bytes_moved = 0;
  std::uint64_t rss_after_warm_up = 0;
  ResourceCounts objects_after_warm_up;
  std::uint64_t round = 0;
  for (;; ++round) {
    const auto stride = static_cast<std::uint32_t>(1 + (round % (world - 1)));
    const std::uint32_t successor = (rank + stride) % world;
    const std::uint32_t predecessor = (rank + world - stride) % world;
    const std::size_t size = payload_size(round);
    const auto write_bytes = payload(rank, round, 0);
    const auto send_bytes = payload(rank, round, 1);
    std::copy(write_bytes.begin(), write_bytes.end(), outbox.begin());
    std::copy(send_bytes.begin(), send_bytes.end(), outbox.begin() + kMaxPayload);

    PendingWork write_arrival = node.post(predecessor, ibv::op::Receive{{}});
    const std::array send_into{in_mr.scatter(std::span(inbox).subspan(kMaxPayload, size))};
    PendingWork send_arrival = node.post(predecessor, ibv::op::Receive{send_into});

    // Rank 0 calls the end: the write lands before its barrier completes, so every rank reads it
    // after the barrier below.
    if (rank == 0 && round + 1 >= kMinimumRounds && Clock::now() >= deadline) {
      stop_word[0] = round;
      const std::array stop{stop_mr.gather(std::as_bytes(std::span(stop_word)))};
      for (const std::uint32_t peer : node.peers())
        node.execute(peer, ibv::op::PeerWrite{stop, controls[peer]});
      control[0] = round;
    }
    // Every receive above is posted before anyone sends, and every check of the last round is
    // done before anyone writes this round's data.
    node.barrier({.algorithm = kSoakAlgorithms[round % kSoakAlgorithms.size()]});

    const std::array write_from{out_mr.gather(std::span(outbox).first(size))};
    const std::array send_from{out_mr.gather(std::span(outbox).subspan(kMaxPayload, size))};
    PendingWork write =
        node.post(successor, ibv::op::PeerWrite{write_from, inboxes[successor].sub_region(0, size),
                                                immediate_of(rank, round)});
    PendingWork send = node.post(successor, ibv::op::Send{send_from});
    ASSERT_TRUE(write.wait().ok()) << "round " << round;
    ASSERT_TRUE(send.wait().ok()) << "round " << round;

    const auto written = write_arrival.wait();
    ASSERT_EQ(written.immediate(), immediate_of(predecessor, round)) << "round " << round;
    ASSERT_TRUE(same_bytes(payload(predecessor, round, 0), std::span(inbox).first(size)))
        << "round " << round << ": the write from rank " << predecessor;
    const auto sent = send_arrival.wait();
    ASSERT_EQ(sent.byte_length(), size) << "round " << round;
    ASSERT_TRUE(
        same_bytes(payload(predecessor, round, 1), std::span(inbox).subspan(kMaxPayload, size)))
        << "round " << round << ": the send from rank " << predecessor;
    bytes_moved += 2 * size;

    {  // registration churn: a region registered and dropped every round
      std::vector<std::byte> scratch(std::size_t{64} * 1024);
      const MemoryRegion churn = me.pd.register_local(scratch);
      ASSERT_EQ(churn.length(), scratch.size());
    }

    if (round + 1 == kWarmUpRounds) {
      rss_after_warm_up = resident_kib();
      objects_after_warm_up = own_objects();
    }
    if (control[0] == round) break;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  const std::uint64_t rss_end = resident_kib();
  const ResourceCounts objects_end = own_objects();

  EXPECT_EQ(objects_end, objects_after_warm_up) << "verbs objects changed during the soak";
  // Flat: within 4 MiB of the warm-up (allocator noise), however long the soak ran.
  EXPECT_LE(rss_end, rss_after_warm_up + 4096)
      << "resident set grew from " << rss_after_warm_up << " KiB to " << rss_end << " KiB";
  long long object_count = 0;
  for (const auto& [key, count] : objects_end) object_count += count;
  std::printf(
      "[ soak ] rank %u/%u: %llu rounds in %.0f s, %llu payload bytes moved and checked, "
      "resident %llu KiB after warm-up, %llu KiB at the end, %lld verbs objects at both\n",
      rank, world, static_cast<unsigned long long>(round) + 1, seconds,
      static_cast<unsigned long long>(bytes_moved),
      static_cast<unsigned long long>(rss_after_warm_up), static_cast<unsigned long long>(rss_end),
      object_count);
  node.barrier();
  EXPECT_FALSE(node.barrier_poisoned());
}

}  // namespace
}  // namespace ibv::test
