// SPDX-License-Identifier: MIT
// Device tests of RDMA atomics (fetch-and-add, compare-and-swap) on 8-byte remote words through
// the Channel in its three styles and through a MultiChannel, data checked word by word:
// - fetch_add returns the old value and adds; compare_swap swaps on a match only; the result
//   arrives in host byte order on rxe (a value whose bytes all differ comes back unchanged);
// - two channels, each on its own thread, adding onto one word: the sum is exact and every
//   old value is seen once;
// - bad input rejected before posting (misaligned, short, known without atomic access, a result
//   that is not 8 bytes, inline), the channel usable afterwards;
// - the device's verdicts: a remote key without atomic access fails with remote_access_error;
//   a responder QP built without atomic access refuses with remote_invalid_request.
#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::throws_invalid_argument;

/// A fetch-and-add of the caller's own type: it declares no Options, so it takes PostOptions
/// (every option), checked when posted.
struct UntypedFetchAdd {
  ScatterElement result;
  RemoteMemoryRegion target;
  std::uint64_t add = 0;
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return SendRequest::fetch_add(wr_id, result, target, add);
  }
};
static_assert(std::same_as<op::options_t<UntypedFetchAdd>, PostOptions>);

constexpr ChannelTimeouts kTimeouts{.operation = 5s, .drop = 5s};

class Atomics : public ::testing::Test {
 protected:
  void SetUp() override { connect(RemoteAccess::all()); }

  void connect(RemoteAccess qp_access) {
    a.reset();
    b.reset();
    QueuePairSettings settings;
    settings.gid_index = test_gid_index(context);
    settings.access = qp_access;
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings, kTimeouts);
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
  }

  /// The local result word `i` as a registered 8-byte element.
  ScatterElement result(std::size_t i) {
    return result_mr.scatter(std::span(results).subspan(i, 1));
  }
  /// The remote word `i` of b's region (known to have atomic access).
  RemoteMemoryRegion word(std::size_t i) const {
    return words_mr.remote().element<std::uint64_t>(i);
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::vector<std::uint64_t> words = std::vector<std::uint64_t>(16);
  std::vector<std::uint64_t> results = std::vector<std::uint64_t>(16);
  MemoryRegion words_mr =
      pd.register_remote_accessible(std::as_writable_bytes(std::span(words)), RemoteAccess::all());
  MemoryRegion result_mr = pd.register_local(std::as_writable_bytes(std::span(results)));
  std::optional<Channel> a;
  std::optional<Channel> b;
};

TEST_F(Atomics, DeviceImplementsThem) {
  EXPECT_TRUE(context.query_device().atomics) << context.query_device().to_string();
}

TEST_F(Atomics, BlockingFetchAddReturnsTheOldValueInHostOrderAndAdds) {
  words[0] = 0x0102030405060708ULL;  // every byte differs: a swapped result would show
  const WorkCompletion done = a->fetch_add(result(0), word(0), 0x10);
  EXPECT_TRUE(done.ok()) << done.to_string();
  EXPECT_EQ(done.opcode(), WorkOpcode::fetch_and_add);
  EXPECT_EQ(results[0], 0x0102030405060708ULL);
  EXPECT_EQ(words[0], 0x0102030405060718ULL);
  // Wraps modulo 2^64.
  words[1] = ~std::uint64_t{0};
  EXPECT_TRUE(a->fetch_add(result(1), word(1), 2).ok());
  EXPECT_EQ(results[1], ~std::uint64_t{0});
  EXPECT_EQ(words[1], 1U);
}

TEST_F(Atomics, BlockingCompareSwapSwapsOnlyOnAMatch) {
  words[2] = 7;
  const WorkCompletion swapped = a->compare_swap(result(0), word(2), 7, 0xAABBCCDD00112233ULL);
  EXPECT_EQ(swapped.opcode(), WorkOpcode::compare_and_swap);
  EXPECT_EQ(results[0], 7U);  // equal to expected: swapped
  EXPECT_EQ(words[2], 0xAABBCCDD00112233ULL);
  EXPECT_TRUE(a->compare_swap(result(1), word(2), 7, 5).ok());
  EXPECT_EQ(results[1], 0xAABBCCDD00112233ULL);  // not equal to expected: no swap
  EXPECT_EQ(words[2], 0xAABBCCDD00112233ULL);
}

TEST_F(Atomics, UnpolledAndScoped) {
  words[3] = 100;
  PendingWork add = a->post_fetch_add(result(0), word(3), 5);
  PendingWork unsignaled = a->post_fetch_add(result(1), word(3), 5, {.signaled = false});
  PendingWork swap = a->post_compare_swap(result(2), word(3), 110, 1000);
  EXPECT_EQ(add.wait().opcode(), WorkOpcode::fetch_and_add);
  EXPECT_EQ(swap.wait().opcode(), WorkOpcode::compare_and_swap);
  // Retired by the later signaled request: the channel makes its completion.
  const WorkCompletion retired = unsignaled.wait();
  EXPECT_TRUE(retired.ok());
  EXPECT_EQ(retired.opcode(), WorkOpcode::fetch_and_add);
  EXPECT_EQ(results[0], 100U);
  EXPECT_EQ(results[1], 105U);
  EXPECT_EQ(results[2], 110U);  // in order on one QP: the swap saw both adds
  EXPECT_EQ(words[3], 1000U);

  words[4] = 0;
  const std::size_t posted = a->scope([&](ChannelScope& s) {
    for (std::size_t i = 0; i < 8; ++i) s.post(ibv::op::FetchAdd{result(i), word(4), 1});
    s.post(ibv::op::CompareSwap{result(8), word(4), 8, 80});
    return s.size();
  });
  EXPECT_EQ(posted, 9U);
  for (std::size_t i = 0; i < 8; ++i) EXPECT_EQ(results[i], i);
  EXPECT_EQ(results[8], 8U);
  EXPECT_EQ(words[4], 80U);
}

TEST_F(Atomics, TwoChannelsAddingConcurrentlyOntoOneWordSumExactly) {
  // A second pair, so that two queue pairs (each used by its own thread) target b's word.
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  auto second_pair = connect_channel_pair(pd, settings, kTimeouts);
  Channel& c = second_pair.first;
  constexpr std::uint64_t kEach = 40;
  std::vector<std::uint64_t> olds(2 * kEach);
  const MemoryRegion olds_mr = pd.register_local(std::as_writable_bytes(std::span(olds)));
  words[5] = 1000;
  auto adder = [&](Channel& channel, std::size_t first) {
    for (std::size_t i = 0; i < kEach; ++i) {
      const auto into = olds_mr.scatter(std::span(olds).subspan(first + i, 1));
      EXPECT_NO_THROW((void)channel.fetch_add(into, word(5), 1));
    }
  };
  std::jthread one([&] { adder(*a, 0); });  // jthreads: joined if starting `two` throws
  std::jthread two([&] { adder(c, kEach); });
  one.join();
  two.join();
  EXPECT_EQ(words[5], 1000 + 2 * kEach);
  // Each add saw a different old value: 1000 .. 1000 + 2 * kEach - 1, each once.
  std::vector<std::uint64_t> sorted = olds;
  std::ranges::sort(sorted);
  std::vector<std::uint64_t> expected(2 * kEach);
  std::iota(expected.begin(), expected.end(), std::uint64_t{1000});
  EXPECT_EQ(sorted, expected);
}

TEST_F(Atomics, BadInputIsRejectedBeforePosting) {
  words[6] = 42;
  const RemoteMemoryRegion whole = words_mr.remote();
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)a->fetch_add(result(0), whole.sub_region(4, 8), 1); },
                              {"atomic_fetch_and_add", "not 8-byte aligned"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)a->post_compare_swap(result(0), whole.sub_region(48, 4), 0, 1); },
      {"atomic_compare_and_swap", "remote MR 4 B", "shorter than the 8-byte word"}));
  const auto four = result_mr.scatter(std::as_writable_bytes(std::span(results)).first(4));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)a->fetch_add(four, word(6), 1); },
                                      {"result buffer of 4 bytes", "exactly 8 bytes"}));
  const auto sixteen = result_mr.scatter(std::span(results).first(2));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)a->fetch_add(sixteen, word(6), 1); },
                                      {"result buffer of 16 bytes"}));
  std::vector<std::uint64_t> plain(2);
  const MemoryRegion plain_mr = pd.register_remote_accessible(
      std::as_writable_bytes(std::span(plain)), RemoteAccess::write() | RemoteAccess::read());
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)a->fetch_add(result(0), plain_mr.remote().element<std::uint64_t>(0), 1); },
      {"without remote atomic access", "write|read"}));
  // Inline data on an atomic: post_fetch_add's SignalingOptions have no inline_data (a compile
  // error: tests/unit/operation_safety_test.cpp); an operation type of the caller's takes every
  // option, and the queue pair's check refuses it before posting.
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        (void)a->post(UntypedFetchAdd{result(0), word(6), 1},
                      PostOptions{.inline_data = InlinePolicy::always});
      },
      {"is an atomic, which can not be inline"}));
  a->scope([&](ChannelScope& s) {
    EXPECT_TRUE(throws_invalid_argument(
        [&] {
          (void)s.post(ibv::op::FetchAdd{result(0), whole.sub_region(1, 8), 1});
        },
        {"aligned"}));
    EXPECT_EQ(s.size(), 0U);
  });
  // Nothing reached the device, and the channel still works.
  EXPECT_EQ(words[6], 42U);
  EXPECT_TRUE(a->fetch_add(result(0), word(6), 1).ok());
  EXPECT_EQ(results[0], 42U);
  EXPECT_EQ(words[6], 43U);
}

TEST_F(Atomics, ARemoteKeyWithoutAtomicAccessFailsOnTheDevice) {
  std::vector<std::uint64_t> plain(2, 5);
  const MemoryRegion plain_mr = pd.register_remote_accessible(
      std::as_writable_bytes(std::span(plain)), RemoteAccess::write() | RemoteAccess::read());
  // As a peer would send it: address, length and rkey only, the rights unknown to this side.
  const auto from_wire = RemoteMemoryRegion::from_bytes(plain_mr.remote().to_bytes());
  ASSERT_FALSE(from_wire.access().has_value());
  try {
    (void)a->fetch_add(result(0), from_wire.element<std::uint64_t>(0), 1);
    ADD_FAILURE() << "an atomic on a region without atomic access succeeded";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::remote_access_error) << error.what();
  }
  EXPECT_EQ(plain[0], 5U);
}

TEST_F(Atomics, QueuePairsGrantAtomicAccessOnlyWhenAsked) {
  auto access_flags = [](const Channel& channel) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(ibv_query_qp(channel.queue_pair().native(), &attr, IBV_QP_ACCESS_FLAGS, &init), 0);
    return attr.qp_access_flags;
  };
  EXPECT_NE(access_flags(*b) & IBV_ACCESS_REMOTE_ATOMIC, 0U);
  connect(RemoteAccess::write() | RemoteAccess::read());
  EXPECT_EQ(access_flags(*b) & IBV_ACCESS_REMOTE_ATOMIC, 0U);
  words[7] = 9;
  try {
    (void)a->fetch_add(result(0), word(7), 1);
    ADD_FAILURE() << "an atomic on a QP without atomic access succeeded";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::remote_invalid_request) << error.what();
  }
  EXPECT_EQ(words[7], 9U);
}

// --- MultiChannel ------------------------------------------------------------------------------

TEST(AtomicsMultiChannel, PeersAddAndSwapOnRankZerosWords) {
  Context context = open_test_device();
  ProtectionDomain pd{context};
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  std::vector<MultiChannel> world = connect_local_world(pd, 3, settings, kTimeouts);
  std::vector<std::uint64_t> words(4);
  const MemoryRegion words_mr =
      pd.register_remote_accessible(std::as_writable_bytes(std::span(words)), RemoteAccess::all());
  const PeerRemoteMemoryRegion zero(0, words_mr.remote());
  std::vector<std::uint64_t> results(8);
  const MemoryRegion results_mr = pd.register_local(std::as_writable_bytes(std::span(results)));
  auto result = [&](std::size_t i) { return results_mr.scatter(std::span(results).subspan(i, 1)); };

  words[0] = 10;
  EXPECT_EQ(world[1]
                .execute(0, ibv::op::PeerFetchAdd{result(0), zero.element<std::uint64_t>(0), 1})
                .opcode(),
            WorkOpcode::fetch_and_add);
  PendingWork two =
      world[2].post(0, ibv::op::PeerFetchAdd{result(1), zero.element<std::uint64_t>(0), 2});
  EXPECT_TRUE(two.wait().ok());
  EXPECT_EQ(results[0], 10U);
  EXPECT_EQ(results[1], 11U);
  EXPECT_EQ(words[0], 13U);

  world[1].scope([&](MultiChannelScope& s) {
    s.post(0, ibv::op::PeerCompareSwap{result(2), zero.element<std::uint64_t>(0), 13, 77});
    s.post(0, ibv::op::PeerFetchAdd{result(3), zero.element<std::uint64_t>(1), 4});
  });
  EXPECT_EQ(results[2], 13U);
  EXPECT_EQ(words[0], 77U);
  EXPECT_EQ(results[3], 0U);
  EXPECT_EQ(words[1], 4U);
  EXPECT_TRUE(
      world[2]
          .execute(0, ibv::op::PeerCompareSwap{result(4), zero.element<std::uint64_t>(0), 13, 1})
          .ok());
  EXPECT_EQ(results[4], 77U);  // no match: unchanged
  EXPECT_EQ(words[0], 77U);

  // A region of rank 0 used with peer 2's channel from rank 1 is refused before posting.
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        (void)world[1].execute(2,
                               ibv::op::PeerFetchAdd{result(5), zero.element<std::uint64_t>(2), 1});
      },
      {"MultiChannel::execute"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] {
        (void)world[1].post(0, ibv::op::PeerFetchAdd{result(5), zero.sub_region(3, 8), 1});
      },
      {"not 8-byte aligned"}));
  EXPECT_EQ(words[2], 0U);
  EXPECT_EQ(words[0], 77U);
}

}  // namespace
}  // namespace ibv::test
