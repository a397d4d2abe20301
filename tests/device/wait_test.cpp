// SPDX-License-Identifier: MIT
// Device tests of waiting without spinning: completion channels on the verbs layer (arming,
// events, batched acknowledgement, destruction with events unacknowledged), the Channel's wait
// modes (a blocked wait costs little CPU time, wakes for a completion that comes later, times
// out at its deadline; spin_then_block), the completion fd in the caller's own epoll loop, and
// a MultiChannel / Node whose peers share one completion channel (blocking waits across peers,
// barriers in blocking mode), and receives from a shared receive pool in blocking mode (one
// channel; any peer of a MultiChannel).
//
// CPU-time bounds, not timings: a thread that waits ~1 s for a message must have used far less
// than that of its own CPU time (CLOCK_THREAD_CPUTIME_ID), which a spinning wait can not.
// Wake-ups are counted exactly: the epoll tests' sender sends only when the test allows it
// (ThreadSteps), so every wake-up has one known cause. Helper threads are std::jthreads, so a
// failed ASSERT joins them instead of ending the process.
#include <sys/epoll.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "node_ranks.hpp"
#include "support/error_matchers.hpp"
#include "support/thread_steps.hpp"
#include "support/timing.hpp"

namespace ibv::test {
namespace {

using ibv_test::thread_cpu_time;

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using ibv_test::throws_error;

/// How long the tests let a blocked waiter wait before the message arrives, and the CPU time
/// such a wait may use at most: a spinning wait uses about all of it.
constexpr auto kLateBy = 1s;
constexpr auto kMostCpuWhileBlocked = 250ms;

/// Success when a wait of `waited` used at most kMostCpuWhileBlocked of CPU time, or a quarter
/// of `waited` (a guest on a loaded host counts the time its vCPU was descheduled as the
/// running thread's, stretching wall and CPU time alike); a spinning wait uses all of it.
::testing::AssertionResult slept(std::chrono::nanoseconds cpu, std::chrono::nanoseconds waited) {
  if (cpu < kMostCpuWhileBlocked || cpu < waited / 4) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "the waiting thread used " << std::chrono::duration<double>(cpu).count()
         << " s of CPU time in " << std::chrono::duration<double>(waited).count() << " s";
}

/// An epoll instance, closed when the test ends however it ends.
struct Epoll {
  Epoll() = default;
  Epoll(const Epoll&) = delete;
  Epoll& operator=(const Epoll&) = delete;
  ~Epoll() {
    if (fd >= 0) ::close(fd);
  }
  int fd = ::epoll_create1(EPOLL_CLOEXEC);
};

QueuePairSettings test_settings(const Context& context) {
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  settings.rnr_retry = RnrRetryCount::infinite();  // a send may go out before the receive
  return settings;
}

/// Two channels connected to each other, both built with `mode`.
std::pair<Channel, Channel> connect_pair(const ProtectionDomain& pd, WaitMode mode,
                                         ChannelTimeouts timeouts = {.operation = 10s,
                                                                     .drop = 10s}) {
  const auto settings = test_settings(pd.context());
  auto prepared_a =
      ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).wait_mode(mode).build();
  auto prepared_b =
      ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).wait_mode(mode).build();
  const Endpoint endpoint_a = prepared_a.endpoint();
  const Endpoint endpoint_b = prepared_b.endpoint();
  Channel a = std::move(prepared_a).handshake(endpoint_b);
  Channel b = std::move(prepared_b).handshake(endpoint_a);
  return {std::move(a), std::move(b)};
}

// --- verbs layer --------------------------------------------------------------------------------

class CompletionChannelTest : public ::testing::Test {
 protected:
  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::array<std::byte, 64> bytes{};
  MemoryRegion mr = pd.register_local(std::span(bytes));
};

TEST_F(CompletionChannelTest, ArmedQueueMakesTheFdReadableOnlyAfterACompletion) {
  const CompletionChannel channel(context);
  EXPECT_GE(channel.fd(), 0);
  const CompletionQueue cq(context, 16, channel);
  ASSERT_TRUE(cq.channel().has_value());
  EXPECT_EQ(*cq.channel(), channel);
  auto settings = test_settings(context);
  auto prepared = QueuePairBuilder(pd, cq, cq).settings(settings).build();
  const Endpoint self = prepared.endpoint();
  const QueuePair qp = std::move(prepared).handshake(self);  // loopback

  cq.request_notification();
  EXPECT_FALSE(channel.wait(0ns)) << "readable before any completion";
  EXPECT_FALSE(channel.wait(50ms));
  EXPECT_EQ(channel.consume_events(), 0U);

  qp.post_receive(1, std::array{mr.scatter(std::span(bytes).first(8))});
  qp.post_send(2, std::array{mr.gather(std::span(bytes).subspan(8, 8))});
  EXPECT_TRUE(channel.wait(10s)) << "no event for the completions";
  EXPECT_EQ(channel.consume_events(), 1U) << "one arming, one event";
  EXPECT_FALSE(channel.wait(0ns)) << "still readable after the events were consumed";
  const auto completions = poll_completions(cq, 2);
  ASSERT_EQ(completions.size(), 2U);
  for (const auto& completion : completions) EXPECT_TRUE(completion.ok());

  // Not armed any more: the next completion raises no event until the queue is armed again.
  qp.post_receive(3, std::array{mr.scatter(std::span(bytes).first(8))});
  qp.post_send(4, std::array{mr.gather(std::span(bytes).subspan(8, 8))});
  ASSERT_EQ(poll_completions(cq, 2).size(), 2U);
  EXPECT_FALSE(channel.wait(0ns)) << "an event without arming";
}

TEST_F(CompletionChannelTest, SharedChannelAndManyEventsAreAcknowledgedAndDestroyDoesNotHang) {
  const CompletionChannel channel(context);
  // Two queues on one channel; more events than one acknowledgement batch on the first, and
  // a few left unacknowledged on both when they are destroyed (ibv_destroy_cq would block
  // forever on those if the library did not acknowledge them first).
  std::optional<CompletionQueue> first(std::in_place, context, 16, channel);
  std::optional<CompletionQueue> second(std::in_place, context, 16, channel);
  const auto settings = test_settings(context);
  auto prepared_a = QueuePairBuilder(pd, *first, *first).settings(settings).build();
  auto prepared_b = QueuePairBuilder(pd, *second, *second).settings(settings).build();
  const Endpoint endpoint_a = prepared_a.endpoint();
  const Endpoint endpoint_b = prepared_b.endpoint();
  std::optional<QueuePair> a(std::in_place, std::move(prepared_a).handshake(endpoint_b));
  std::optional<QueuePair> b(std::in_place, std::move(prepared_b).handshake(endpoint_a));

  constexpr int kMessages = 70;  // above the acknowledgement batch of 64
  std::size_t events = 0;
  for (int i = 0; i < kMessages; ++i) {
    first->request_notification();
    second->request_notification();
    b->post_receive(static_cast<std::uint64_t>(i),
                    std::array{mr.scatter(std::span(bytes).first(8))});
    a->post_send(static_cast<std::uint64_t>(i),
                 std::array{mr.gather(std::span(bytes).subspan(8, 8))});
    // a's send completes on the first queue, b's receive on the second: one event each
    std::size_t round = 0;
    const auto deadline = Clock::now() + 10s;
    while (round < 2 && Clock::now() < deadline) round += channel.wait_and_consume(1s);
    ASSERT_EQ(round, 2U) << "message " << i;
    events += round;
    ASSERT_EQ(poll_completions(*first, 1).size(), 1U);
    ASSERT_EQ(poll_completions(*second, 1).size(), 1U);
  }
  EXPECT_EQ(events, 2U * kMessages);
  const auto started = Clock::now();
  a.reset();
  b.reset();
  first.reset();  // 70 events read: 64 acknowledged in a batch, 6 at destruction
  second.reset();
  EXPECT_LT(Clock::now() - started, 5s);
}

TEST_F(CompletionChannelTest, DestroyingAQueueWithUnreadEventsDoesNotHang) {
  const CompletionChannel channel(context);
  {
    const CompletionQueue cq(context, 16, channel);
    auto settings = test_settings(context);
    auto prepared = QueuePairBuilder(pd, cq, cq).settings(settings).build();
    const Endpoint self = prepared.endpoint();
    const QueuePair qp = std::move(prepared).handshake(self);
    cq.request_notification();
    qp.post_receive(1, std::array{mr.scatter(std::span(bytes).first(8))});
    qp.post_send(2, std::array{mr.gather(std::span(bytes).subspan(8, 8))});
    ASSERT_TRUE(channel.wait(10s));
    ASSERT_EQ(poll_completions(cq, 2).size(), 2U);
    // the event stays unread in the channel: the kernel drops it with the queue
  }
  EXPECT_EQ(channel.consume_events(), 0U);
}

TEST_F(CompletionChannelTest, MisuseIsReported) {
  const CompletionQueue plain(context, 16);
  EXPECT_FALSE(plain.channel().has_value());
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { plain.request_notification(); }));
  const CompletionChannel channel(context);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)channel.wait(-1ms); }));
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] {
    (void)ChannelBuilder(pd).wait_mode(WaitMode::spin_then_block(0us)).build();
  }));
  auto pair = connect_pair(pd, WaitMode::spin());
  Channel& spinning = pair.first;
  EXPECT_FALSE(spinning.completion_channel().has_value());
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)spinning.completion_fd(); }));
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { spinning.arm_completion_fd(); }));
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)spinning.consume_completion_events(); }));
}

// --- Channel wait modes -------------------------------------------------------------------------

class WaitModeTest : public ::testing::TestWithParam<WaitMode> {
 protected:
  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::array<std::byte, 64> bytes{};
  MemoryRegion mr = pd.register_local(std::span(bytes));
  std::span<std::byte> in() { return std::span(bytes).first(32); }
  std::span<std::byte> out() { return std::span(bytes).subspan(32); }
};

TEST_P(WaitModeTest, ABlockedReceiveWakesForALateMessageUsingLittleCpu) {
  auto [a, b] = connect_pair(pd, GetParam());
  ASSERT_TRUE(a.completion_channel().has_value());
  out()[0] = std::byte{42};
  // From before the sender starts, so that the wait measured is at least kLateBy.
  const auto cpu_before = thread_cpu_time();
  const auto started = Clock::now();
  std::jthread sender([&, &b = b] {
    std::this_thread::sleep_for(kLateBy);  // deliberate: the receive below must wait this long
    EXPECT_NO_THROW(b.send(std::array{mr.gather(std::span<const std::byte>(out()).first(4))}));
  });
  WorkCompletion received;
  EXPECT_NO_THROW(received = a.receive(std::array{mr.scatter(in().first(4))}));
  const auto waited = Clock::now() - started;
  const auto cpu = thread_cpu_time() - cpu_before;
  sender.join();
  EXPECT_TRUE(received.ok());
  EXPECT_EQ(received.byte_length(), 4U);
  EXPECT_EQ(in()[0], std::byte{42});
  EXPECT_GE(waited, kLateBy) << "returned before the message was sent";
  EXPECT_TRUE(slept(cpu, waited));
}

TEST_P(WaitModeTest, AWaitTimesOutAtItsDeadlineAndCancelsItsRequest) {
  auto [a, b] = connect_pair(pd, GetParam());
  // PendingWork::wait_for: nullopt at the deadline, the request stays pending with its handle
  auto pending = a.post_receive(std::array{mr.scatter(in().subspan(8, 4))});
  EXPECT_FALSE(pending.wait_for(100ms).has_value());
  b.send(std::array{mr.gather(std::span<const std::byte>(out()).first(4))});
  EXPECT_TRUE(pending.wait().ok());
  constexpr auto kTimeout = 300ms;
  const auto cpu_before = thread_cpu_time();
  const auto started = Clock::now();
  EXPECT_TRUE(throws_error(ErrorKind::timeout, [&, &a = a] {
    (void)a.receive(std::array{mr.scatter(in().first(4))}, kTimeout);
  }));
  const auto waited = Clock::now() - started;
  EXPECT_GE(waited, kTimeout) << "gave up before the deadline";
  EXPECT_LT(waited, kTimeout + 5s) << "far past the deadline";
  EXPECT_TRUE(slept(thread_cpu_time() - cpu_before, waited));
  // the blocking receive was cancelled: a refuses further work, naming the timeout
  EXPECT_TRUE(
      throws_error(ErrorKind::state,
                   [&, &a = a] { (void)a.post_receive(std::array{mr.scatter(in().first(4))}); },
                   {"cancelled", "300 ms"}));
}

TEST_P(WaitModeTest, ManyRequestsScopesAndAFullSendQueue) {
  // Small queues, so posting waits for room; a scope's end waits for the rest.
  const auto settings = [&] {
    auto s = test_settings(context);
    s.max_send_wr = QueueDepth(4);
    s.max_recv_wr = QueueDepth(4);
    return s;
  }();
  const ChannelTimeouts timeouts{.operation = 10s, .drop = 10s};
  auto prepared_a =
      ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).wait_mode(GetParam()).build();
  auto prepared_b =
      ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).wait_mode(GetParam()).build();
  const Endpoint endpoint_a = prepared_a.endpoint();
  const Endpoint endpoint_b = prepared_b.endpoint();
  Channel a = std::move(prepared_a).handshake(endpoint_b);
  Channel b = std::move(prepared_b).handshake(endpoint_a);
  constexpr int kMessages = 40;
  std::jthread receiver([&] {
    for (int i = 0; i < kMessages; ++i) {
      std::optional<WorkCompletion> completion;
      EXPECT_NO_THROW(completion = b.receive(std::array{mr.scatter(in().first(4))}));
      if (!completion) return;  // the failure is recorded; the rest would only time out too
      EXPECT_TRUE(completion->ok());
    }
  });
  EXPECT_NO_THROW(a.scope([&](ChannelScope& scope) {
    for (int i = 0; i < kMessages; ++i) {
      (void)scope.post(
          ibv::op::Send{std::array{mr.gather(std::span<const std::byte>(out()).first(4))}},
          {.signaled = false});
    }
  }));
  receiver.join();
}

INSTANTIATE_TEST_SUITE_P(Modes, WaitModeTest,
                         ::testing::Values(WaitMode::block(), WaitMode::spin_then_block(20ms)),
                         [](const ::testing::TestParamInfo<WaitMode>& param) {
                           return std::string(to_string(param.param.strategy));
                         });

TEST(WaitModeSpin, SpinningUsesTheCpuItWaits) {
  // The contrast that makes the bounds above mean something: the default mode spins.
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  std::array<std::byte, 8> bytes{};
  const MemoryRegion mr = pd.register_local(std::span(bytes));
  auto [a, b] = connect_pair(pd, WaitMode::spin());
  const auto cpu_before = thread_cpu_time();
  EXPECT_TRUE(throws_error(ErrorKind::timeout, [&, &a = a] {
    (void)a.receive(std::array{mr.scatter(std::span(bytes))}, 300ms);
  }));
  EXPECT_GT(thread_cpu_time() - cpu_before, 100ms) << "the spinning wait slept";
}

// --- the completion fd in the caller's own loop -------------------------------------------------

TEST_F(CompletionChannelTest, TheCompletionFdWakesAnEpollLoop) {
  // WaitMode::spin with a completion channel of its own: the fd is there for the caller.
  const CompletionChannel channel(context);
  const auto settings = test_settings(context);
  auto prepared_a = ChannelBuilder(pd).queue_pair(settings).completion_channel(channel).build();
  auto prepared_b = ChannelBuilder(pd).queue_pair(settings).build();
  const Endpoint endpoint_a = prepared_a.endpoint();
  const Endpoint endpoint_b = prepared_b.endpoint();
  Channel a = std::move(prepared_a).handshake(endpoint_b);
  Channel b = std::move(prepared_b).handshake(endpoint_a);
  ASSERT_EQ(a.completion_fd(), channel.fd());

  const Epoll epoll;
  ASSERT_GE(epoll.fd, 0);
  epoll_event interest{.events = EPOLLIN, .data = {.u64 = 7}};
  ASSERT_EQ(::epoll_ctl(epoll.fd, EPOLL_CTL_ADD, a.completion_fd(), &interest), 0);

  // The sender sends only when the test allows it, so every wake-up has one known cause: the
  // fd stays quiet while nothing is sent and becomes readable once for each message.
  constexpr int kMessages = 3;
  ibv_test::ThreadSteps steps;
  const std::jthread sender([&](const std::stop_token& stop) {
    for (int i = 0; i < kMessages && steps.next(stop); ++i) {
      EXPECT_NO_THROW(
          b.send(std::array{mr.gather(std::span<const std::byte>(bytes).subspan(32, 4))}));
    }
  });
  for (int i = 0; i < kMessages; ++i) {
    PendingWork work = a.post_receive(std::array{mr.scatter(std::span(bytes).first(4))});
    a.arm_completion_fd();
    ASSERT_FALSE(work.poll().has_value()) << "message " << i << " arrived before it was sent";
    epoll_event ready{};
    ASSERT_EQ(::epoll_wait(epoll.fd, &ready, 1, 0), 0) << "woke before message " << i;
    steps.allow();
    ASSERT_EQ(::epoll_wait(epoll.fd, &ready, 1, 10'000), 1) << "no wake-up for message " << i;
    EXPECT_EQ(ready.data.u64, 7U);
    EXPECT_EQ(a.consume_completion_events(), 1U) << "message " << i;
    const auto completion = work.poll();
    ASSERT_TRUE(completion.has_value()) << "woken, but message " << i << " is not there";
    EXPECT_TRUE(completion->ok());
  }
}

// --- MultiChannel and Node: one completion channel for every peer -----------------------------

/// A world of `world` MultiChannels in this process, every one built with `mode`.
std::vector<MultiChannel> local_world(const ProtectionDomain& pd, std::uint32_t world,
                                      WaitMode mode) {
  return connect_local_world(world, [&](std::uint32_t rank) {
    MultiChannelBuilder builder(pd, rank, world);
    builder.queue_pair(test_settings(pd.context()))
        .timeouts({.operation = 10s, .drop = 10s})
        .wait_mode(mode);
    return builder;
  });
}

// --- Shared receive pools in a sleeping mode -------------------------------------------------

TEST(SharedReceiveWait, ABlockedChannelOnAPoolSleepsUntilTheMessageArrives) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  const SharedReceivePool pool(pd, 4, 64);
  const auto settings = test_settings(context);
  auto prepared_sender = ChannelBuilder(pd).queue_pair(settings).build();
  auto prepared_receiver = ChannelBuilder(pd)
                               .queue_pair(settings)
                               .wait_mode(WaitMode::block())
                               .shared_receive_pool(pool)
                               .build();
  const Endpoint sender_endpoint = prepared_sender.endpoint();
  const Endpoint receiver_endpoint = prepared_receiver.endpoint();
  Channel sender = std::move(prepared_sender).handshake(receiver_endpoint);
  Channel receiver = std::move(prepared_receiver).handshake(sender_endpoint);

  std::array<std::byte, 8> message{std::byte{7}};
  const MemoryRegion mr = pd.register_local(std::span(message));
  // From before the sender starts, so that the wait measured is at least kLateBy.
  const auto cpu_before = thread_cpu_time();
  const auto started = Clock::now();
  std::jthread late([&] {
    std::this_thread::sleep_for(kLateBy);  // deliberate: the receive below must wait this long
    EXPECT_NO_THROW(sender.send(std::array{mr.gather(std::span<const std::byte>(message))}));
  });
  std::optional<ReceivedMessage> received;
  EXPECT_NO_THROW(received.emplace(receiver.receive_message(5s)));
  const auto waited = Clock::now() - started;
  const auto cpu = thread_cpu_time() - cpu_before;
  late.join();
  ASSERT_TRUE(received.has_value());
  ASSERT_EQ(received->data().size(), message.size());
  EXPECT_EQ(received->data()[0], std::byte{7});
  EXPECT_GE(waited, kLateBy) << "returned before the message was sent";
  EXPECT_TRUE(slept(cpu, waited));
}

TEST(SharedReceiveWait, ABlockedReceiveFromAnyPeerSleepsUntilOneSends) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  const SharedReceivePool pool(pd, 4, 64);
  const auto settings = test_settings(context);
  constexpr std::uint32_t kWorld = 3;
  std::vector<MultiChannel> world = connect_local_world(kWorld, [&](std::uint32_t rank) {
    MultiChannelBuilder builder(pd, rank, kWorld);
    builder.queue_pair(settings).timeouts({.operation = 10s, .drop = 10s});
    if (rank == 0) builder.wait_mode(WaitMode::block()).shared_receive_pool(pool);
    return builder;
  });

  std::array<std::byte, 8> message{std::byte{2}};
  const MemoryRegion mr = pd.register_local(std::span(message));
  // From before the sender starts, so that the wait measured is at least kLateBy.
  const auto cpu_before = thread_cpu_time();
  const auto started = Clock::now();
  std::jthread late([&] {
    std::this_thread::sleep_for(kLateBy);  // deliberate: the receive below must wait this long
    EXPECT_NO_THROW(world[2].execute(
        0, ibv::op::Send{std::array{mr.gather(std::span<const std::byte>(message))}}));
  });
  std::optional<PeerMessage> received;
  EXPECT_NO_THROW(received.emplace(world[0].receive_message_any(5s)));
  const auto waited = Clock::now() - started;
  const auto cpu = thread_cpu_time() - cpu_before;
  late.join();
  ASSERT_TRUE(received.has_value());
  EXPECT_EQ(received->peer, 2U);
  ASSERT_FALSE(received->message.data().empty());
  EXPECT_EQ(received->message.data()[0], std::byte{2});
  EXPECT_GE(waited, kLateBy) << "returned before the message was sent";
  EXPECT_TRUE(slept(cpu, waited));
  // Nothing more comes: the wait ends at its deadline, still sleeping.
  EXPECT_TRUE(throws_error(ErrorKind::timeout, [&] {
    (void)world[0].receive_message_any(std::chrono::milliseconds(200));
  }));
}

TEST(MultiChannelWait, PeersShareOneFdAndABlockedGatherUsesLittleCpu) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  std::array<std::byte, 64> bytes{};
  const MemoryRegion mr = pd.register_local(std::span(bytes));
  auto world = local_world(pd, 3, WaitMode::block());
  MultiChannel& root = world[0];
  EXPECT_EQ(root.channel(1).completion_fd(), root.channel(2).completion_fd());
  EXPECT_EQ(root.completion_fd(), root.channel(1).completion_fd());
  EXPECT_NE(root.completion_fd(), world[1].completion_fd()) << "each MultiChannel has its own";

  // From before the sender starts, so that the wait measured is at least kLateBy.
  const auto cpu_before = thread_cpu_time();
  const auto started = Clock::now();
  std::vector<std::jthread> senders;  // joined however the test ends
  for (std::uint32_t rank = 1; rank < 3; ++rank) {
    senders.emplace_back([&, rank] {
      std::this_thread::sleep_for(kLateBy);  // deliberate: the gather below must wait this long
      bytes[32 + rank] = std::byte{static_cast<unsigned char>(rank)};
      EXPECT_NO_THROW(world[rank].execute(
          0, ibv::op::Send{
                 std::array{mr.gather(std::span<const std::byte>(bytes).subspan(32 + rank, 1))}}));
    });
  }
  const std::array into_1{mr.scatter(std::span(bytes).subspan(1, 1))};
  const std::array into_2{mr.scatter(std::span(bytes).subspan(2, 1))};
  const std::array receives{op::ToPeer{1U, op::Receive{into_1}},
                            op::ToPeer{2U, op::Receive{into_2}}};
  std::vector<WorkCompletion> completions;
  EXPECT_NO_THROW({
    for (PendingWork& receive : root.post_all(receives)) completions.push_back(receive.wait());
  });
  const auto waited = Clock::now() - started;
  const auto cpu = thread_cpu_time() - cpu_before;
  for (auto& sender : senders) sender.join();
  ASSERT_EQ(completions.size(), 2U);
  EXPECT_EQ(bytes[1], std::byte{1});
  EXPECT_EQ(bytes[2], std::byte{2});
  EXPECT_TRUE(slept(cpu, waited));
}

TEST(MultiChannelWait, OneEpollFdCoversEveryPeer) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  std::array<std::byte, 64> bytes{};
  const MemoryRegion mr = pd.register_local(std::span(bytes));
  auto world = local_world(pd, 3, WaitMode::block());
  MultiChannel& root = world[0];
  const Epoll epoll;
  ASSERT_GE(epoll.fd, 0);
  epoll_event interest{.events = EPOLLIN, .data = {.u64 = 0}};
  ASSERT_EQ(::epoll_ctl(epoll.fd, EPOLL_CTL_ADD, root.completion_fd(), &interest), 0);
  std::array works{
      root.post(1, ibv::op::Receive{std::array{mr.scatter(std::span(bytes).subspan(1, 1))}}),
      root.post(2, ibv::op::Receive{std::array{mr.scatter(std::span(bytes).subspan(2, 1))}})};
  // One peer sends each time the test allows it, the second peer first: each message must wake
  // the one fd by itself.
  constexpr std::array kSenders{2U, 1U};
  ibv_test::ThreadSteps steps;
  const std::jthread sender([&](const std::stop_token& stop) {
    for (const std::uint32_t rank : kSenders) {
      if (!steps.next(stop)) return;
      EXPECT_NO_THROW(world[rank].execute(
          0,
          ibv::op::Send{std::array{mr.gather(std::span<const std::byte>(bytes).subspan(40, 1))}}));
    }
  });
  for (const std::uint32_t rank : kSenders) {
    root.arm_completion_fd();
    ASSERT_FALSE(works.at(rank - 1).poll().has_value()) << "rank " << rank << " before it sent";
    epoll_event ready{};
    ASSERT_EQ(::epoll_wait(epoll.fd, &ready, 1, 0), 0) << "woke before rank " << rank << " sent";
    steps.allow();
    ASSERT_EQ(::epoll_wait(epoll.fd, &ready, 1, 10'000), 1) << "no wake-up for rank " << rank;
    EXPECT_EQ(root.consume_completion_events(), 1U) << "rank " << rank;
    const auto completion = works.at(rank - 1).poll();
    ASSERT_TRUE(completion.has_value()) << "woken, but rank " << rank << "'s message is not there";
    EXPECT_TRUE(completion->ok());
  }
}

TEST(NodeWait, BarriersInBlockingModeHoldEveryoneAndALateRankCostsLittleCpu) {
  constexpr std::uint32_t kWorld = 3;
  constexpr std::size_t kRounds = 20;
  std::vector<std::atomic<std::uint32_t>> arrived(kRounds);
  std::array<std::chrono::nanoseconds, kWorld> cpu{};
  std::array<std::chrono::nanoseconds, kWorld> waited{};
  const auto blocking = [](net::NodeBuilder& builder) { builder.wait_mode(WaitMode::block()); };
  run_ranks(
      kWorld,
      [&](net::Node& node, net::Bootstrap&) {
        EXPECT_EQ(node.completion_fd(), node.channel(node.peers().front()).completion_fd());
        for (std::size_t i = 0; i < kRounds; ++i) {
          arrived[i].fetch_add(1);
          node.barrier();
          ASSERT_EQ(arrived[i].load(), kWorld) << "rank " << node.rank() << " left barrier " << i;
        }
        // The last rank comes late: the others wait in the barrier, sleeping.
        if (node.rank() == kWorld - 1) std::this_thread::sleep_for(kLateBy);
        const auto before = thread_cpu_time();
        const auto started = Clock::now();
        node.barrier();
        waited.at(node.rank()) = Clock::now() - started;
        cpu.at(node.rank()) = thread_cpu_time() - before;
      },
      blocking);
  for (std::uint32_t rank = 0; rank + 1 < kWorld; ++rank) {
    EXPECT_TRUE(slept(cpu.at(rank), waited.at(rank))) << "rank " << rank << " in a barrier";
  }
}

}  // namespace
}  // namespace ibv::test
