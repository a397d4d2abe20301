// SPDX-License-Identifier: MIT
// Device tests of automatic inline posting on the Channel: the default max_inline_data the
// device grants, small sends and writes posted inline (seen by the channel's inline_posts()
// counter, and by what only inline data can do: a source the device has no key for, and a
// source overwritten right after the post, still deliver the original bytes), larger ones,
// reads and atomics not inline, and InlinePolicy::never / always as the opt-out and opt-in, on
// the unpolled, scoped, blocking and coroutine calls alike (the last two always signaled).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/event_loop.hpp"
#include "ibv/coro/task.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

class AutoInline : public ::testing::Test, protected ChannelPairMemory {
 protected:
  AutoInline() : ChannelPairMemory(kSize) {}
  static constexpr std::size_t kSize = 8192;

  void SetUp() override {
    QueuePairSettings settings;  // max_inline_data unset: the library's default
    settings.gid_index = test_gid_index(context);
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings, {5s, 5s});
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
    limit = a->queue_pair().max_inline_data();
  }

  std::array<GatherElement, 1> gather_a(std::size_t length) {
    return {mr_a.gather(std::span<const std::byte>(buffer_a).first(length))};
  }
  std::array<ScatterElement, 1> scatter_b(std::size_t length) {
    return {mr_b.scatter(std::span(buffer_b).first(length))};
  }

  std::uint32_t limit = 0;
};

TEST_F(AutoInline, TheDefaultAsksForPerftestsSizeAndKeepsWhatTheDeviceGranted) {
  std::printf("%s granted max_inline_data %u for the default request of %u\n",
              context.name().c_str(), limit, InlineSize::kDefault);
  EXPECT_GE(limit, InlineSize::kDefault);
  EXPECT_EQ(a->inline_posts(), 0U);
}

TEST_F(AutoInline, SmallSendsAndWritesGoInlineAndArriveIntact) {
  fill_pattern(std::span(buffer_a).first(limit), 1);
  const std::vector<std::byte> original(buffer_a.begin(), buffer_a.begin() + limit);
  PendingWork received = b->post_receive(scatter_b(limit));
  PendingWork sent = a->post_send(gather_a(limit));
  // Inline: the bytes were copied when the post returned, so the source may change at once.
  std::ranges::fill(std::span(buffer_a).first(limit), std::byte{0xEE});
  EXPECT_TRUE(sent.wait().ok());
  EXPECT_EQ(received.wait().byte_length(), limit);
  EXPECT_TRUE(same_bytes(original, std::span(buffer_b).first(limit)));
  EXPECT_EQ(a->inline_posts(), 1U);

  fill_pattern(std::span(buffer_a).first(64), 2);
  EXPECT_TRUE(a->write(gather_a(64), mr_b.remote().sub_region(4096, 64)).ok());
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(64), std::span(buffer_b).subspan(4096, 64)));
  EXPECT_EQ(a->inline_posts(), 2U);
}

TEST_F(AutoInline, AnInlineSourceNeedsNoRegistration) {
  // Memory no region covers, named with a key the device does not know: only inline data,
  // copied by the post itself, can deliver it (a DMA read would fail with a protection error).
  std::array<std::byte, 48> unregistered{};
  fill_pattern(unregistered, 3);
  const std::array source{GatherElement::from_raw(
      reinterpret_cast<std::uintptr_t>(unregistered.data()), unregistered.size(), 0)};
  PendingWork received = b->post_receive(scatter_b(unregistered.size()));
  EXPECT_TRUE(a->send(source).ok());
  EXPECT_EQ(received.wait().byte_length(), unregistered.size());
  EXPECT_TRUE(same_bytes(unregistered, std::span(buffer_b).first(unregistered.size())));
  EXPECT_EQ(a->inline_posts(), 1U);
}

TEST_F(AutoInline, LargerMessagesReadsAndAtomicsAreNotInline) {
  const std::size_t over = limit + 1;
  fill_pattern(std::span(buffer_a).first(over), 4);
  PendingWork received = b->post_receive(scatter_b(over));
  EXPECT_TRUE(a->send(gather_a(over)).ok());
  EXPECT_EQ(received.wait().byte_length(), over);
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(over), std::span(buffer_b).first(over)));
  EXPECT_TRUE(a->write(gather_a(over), mr_b.remote().sub_region(4096, over)).ok());
  const std::array into{mr_a.scatter(std::span(buffer_a).subspan(4096, 16))};
  EXPECT_TRUE(a->read(into, mr_b.remote().sub_region(0, 16)).ok());
  std::uint64_t old = 0;
  const MemoryRegion old_mr = pd.register_local(std::as_writable_bytes(std::span(&old, 1)));
  EXPECT_TRUE(
      a->fetch_add(old_mr.scatter(std::span(&old, 1)), mr_b.remote().element<std::uint64_t>(2), 1)
          .ok());
  EXPECT_EQ(a->inline_posts(), 0U);
}

TEST_F(AutoInline, NeverOptsOutAndAlwaysOptsIn) {
  fill_pattern(std::span(buffer_a).first(32), 5);
  EXPECT_TRUE(
      a->post_write(gather_a(32), mr_b.remote(), {.inline_data = InlinePolicy::never}).wait().ok());
  EXPECT_EQ(a->inline_posts(), 0U);
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(32), std::span(buffer_b).first(32)));
  a->scope([&](ChannelScope& s) {
    s.post(ibv::op::Write{gather_a(32), mr_b.remote().sub_region(64, 32)},
           {.inline_data = InlinePolicy::always});
    s.post(ibv::op::Write{gather_a(32), mr_b.remote().sub_region(128, 32)});  // automatic
  });
  EXPECT_EQ(a->inline_posts(), 2U);
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(32), std::span(buffer_b).subspan(64, 32)));
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(32), std::span(buffer_b).subspan(128, 32)));
}

TEST_F(AutoInline, BlockingAndCoroutineCallsTakeTheOptionsToo) {
  fill_pattern(std::span(buffer_a).first(32), 6);
  const Channel::Timeout timeout = 5s;
  EXPECT_TRUE(a->execute(op::Write{gather_a(32), mr_b.remote()},
                         {.inline_data = InlinePolicy::never}, timeout)
                  .ok());
  EXPECT_EQ(a->inline_posts(), 0U);
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(32), std::span(buffer_b).first(32)));
  EXPECT_TRUE(a->execute(op::Write{gather_a(32), mr_b.remote().sub_region(64, 32)},
                         {.inline_data = InlinePolicy::always})
                  .ok());
  EXPECT_EQ(a->inline_posts(), 1U);
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(32), std::span(buffer_b).subspan(64, 32)));

  auto writes = [&]() -> Task<> {  // kept alive while its coroutine runs (it captures)
    co_await async(*a, op::Write{gather_a(32), mr_b.remote().sub_region(128, 32)},
                   {.inline_data = InlinePolicy::never});
    co_await async(*a, op::Write{gather_a(32), mr_b.remote().sub_region(192, 32)},
                   {.inline_data = InlinePolicy::always}, timeout);
  };
  EventLoop loop;
  loop.spawn(writes());
  EXPECT_TRUE(loop.run(30s));
  EXPECT_EQ(a->inline_posts(), 2U);
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(32), std::span(buffer_b).subspan(128, 32)));
  EXPECT_TRUE(same_bytes(std::span(buffer_a).first(32), std::span(buffer_b).subspan(192, 32)));
}

// A blocking or coroutine call given unsignaled options: InlineOptions have no `signaled`, so it
// does not compile (static_asserts in tests/unit/operation_safety_test.cpp); it used to be
// refused here at run time.

TEST_F(AutoInline, AnExplicitSizeIsAskedForExactly) {
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  settings.max_inline_data = InlineSize(0);
  auto [c, d] = connect_channel_pair(pd, settings, {5s, 5s});
  // The device may grant more than asked (rxe: 16 bytes per send SGE); automatic inlining goes
  // by what it granted.
  const std::uint32_t granted = c.queue_pair().max_inline_data();
  std::printf("%s granted max_inline_data %u for a request of 0\n", context.name().c_str(),
              granted);
  EXPECT_LT(granted, limit);
  const std::size_t above = granted + 1;
  EXPECT_TRUE(c.write(gather_a(above), mr_b.remote()).ok());
  EXPECT_EQ(c.inline_posts(), 0U);
}

}  // namespace
}  // namespace ibv::test
