// SPDX-License-Identifier: MIT
// Device tests of the coroutine layer (ibv::Task, ibv::EventLoop, the async_* operations) on two
// Channels connected to each other on the test device, data checked byte by byte:
// - a ping-pong of messages between two tasks on one loop;
// - several tasks with several operations each in flight at once (writes, reads, sends with
//   immediate), awaited out of order;
// - a failed operation surfaces in the task as ibv::WorkError; bad input as invalid_argument
//   before anything is posted;
// - a request whose post's first look misses its completion is awaited like any other, out of
//   order too, and retires the unsignaled one before it;
// - a receive that times out (ibv::Error timeout in the task, the loop and the other tasks go
//   on, the receive is cancelled and its channel refuses further work);
// - a task destroyed while suspended on a receive: the request is settled as a dropped
//   PendingWork (bounded wait, then cancelled);
// - MultiChannel: the peer-addressed forms;
// - a loop that sleeps (WaitMode::block) on the completion fds: its thread's CPU time while a
//   message takes 1 s to come stays well below 1 s; timeouts still end the sleep; a channel
//   without a completion channel is refused at the co_await; and the loop driven from a
//   caller's own poll(2) loop (run_once, arm_for_sleep, completion_fds, next_deadline).
#include <poll.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/async_multi_channel.hpp"
#include "ibv/coro/event_loop.hpp"
#include "ibv/coro/task.hpp"
#include "support/error_matchers.hpp"
#include "support/timing.hpp"

namespace ibv::test {
namespace {

using ibv_test::thread_cpu_time;

using namespace std::chrono_literals;

class CoroTest : public ::testing::Test, protected ChannelPairMemory {
 protected:
  CoroTest() : ChannelPairMemory(kSize) {}
  static constexpr std::size_t kSize = std::size_t{64} * 1024;
  static constexpr ChannelTimeouts kTimeouts{.operation = 5s, .drop = 5s};

  void SetUp() override { connect(kTimeouts); }

  /// (Re)builds channels a and b (RNR retried forever: a send may go out before the peer's
  /// receive is posted; every wait stays bounded by the timeouts).
  void connect(ChannelTimeouts timeouts) {
    a.reset();
    b.reset();
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings(), timeouts);
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
  }

  QueuePairSettings settings() const {
    QueuePairSettings result;
    result.rnr_retry = RnrRetryCount::infinite();
    result.gid_index = test_gid_index(context);
    return result;
  }

  /// Rebuilds a and b with completion channels (the library's own waits keep spinning): each
  /// its own, or both the same one.
  void connect_with_completion_channels(bool shared) {
    a.reset();
    b.reset();
    const CompletionChannel first(context);
    const CompletionChannel second = shared ? first : CompletionChannel(context);
    auto prepared_a = ChannelBuilder(pd)
                          .queue_pair(settings())
                          .timeouts(kTimeouts)
                          .completion_channel(first)
                          .build();
    auto prepared_b = ChannelBuilder(pd)
                          .queue_pair(settings())
                          .timeouts(kTimeouts)
                          .completion_channel(second)
                          .build();
    const Endpoint endpoint_a = prepared_a.endpoint();
    const Endpoint endpoint_b = prepared_b.endpoint();
    a.emplace(std::move(prepared_a).handshake(endpoint_b));
    b.emplace(std::move(prepared_b).handshake(endpoint_a));
  }

  std::span<std::byte> a_bytes(std::size_t offset, std::size_t length) {
    return std::span(buffer_a).subspan(offset, length);
  }
  std::span<std::byte> b_bytes(std::size_t offset, std::size_t length) {
    return std::span(buffer_b).subspan(offset, length);
  }
  std::array<GatherElement, 1> gather_a(std::size_t offset, std::size_t length) {
    return {mr_a.gather(std::span<const std::byte>(a_bytes(offset, length)))};
  }
  std::array<GatherElement, 1> gather_b(std::size_t offset, std::size_t length) {
    return {mr_b.gather(std::span<const std::byte>(b_bytes(offset, length)))};
  }
  std::array<ScatterElement, 1> scatter_a(std::size_t offset, std::size_t length) {
    return {mr_a.scatter(a_bytes(offset, length))};
  }
  std::array<ScatterElement, 1> scatter_b(std::size_t offset, std::size_t length) {
    return {mr_b.scatter(b_bytes(offset, length))};
  }
  RemoteMemoryRegion remote_b(std::size_t offset, std::size_t length) const {
    return mr_b.remote().sub_region(offset, length);
  }

  // --- the tasks of the ping-pong -------------------------------------------------------------
  static constexpr std::size_t kMessage = 256;

  /// Sends message i from a's slot 0, awaits the pong in a's slot 1 and checks it is the ping
  /// with every byte inverted.
  Task<> pinger(int count, int& pongs) {
    for (int i = 0; i < count; ++i) {
      fill_pattern(a_bytes(0, kMessage), static_cast<unsigned>(i));
      auto pong = ibv::async(
          *a, ibv::op::Receive{scatter_a(kMessage, kMessage)});  // posted before the ping
      const WorkCompletion sent = co_await ibv::async(*a, ibv::op::Send{gather_a(0, kMessage)});
      EXPECT_EQ(sent.opcode(), WorkOpcode::send);
      const WorkCompletion got = co_await pong;
      EXPECT_EQ(got.byte_length(), kMessage);
      for (std::size_t k = 0; k < kMessage; ++k) {
        if (buffer_a[kMessage + k] != ~buffer_a[k]) {
          ADD_FAILURE() << "pong " << i << " byte " << k << " is not the ping's inverted";
          co_return;
        }
      }
      ++pongs;
    }
  }

  /// Receives each ping into b's slot 0 and sends it back inverted from b's slot 1.
  Task<> ponger(int count) {
    for (int i = 0; i < count; ++i) {
      const WorkCompletion got = co_await ibv::async(*b, ibv::op::Receive{scatter_b(0, kMessage)});
      EXPECT_EQ(got.byte_length(), kMessage);
      for (std::size_t k = 0; k < kMessage; ++k) buffer_b[kMessage + k] = ~buffer_b[k];
      co_await ibv::async(*b, ibv::op::Send{gather_b(kMessage, kMessage)});
    }
  }
};

TEST_F(CoroTest, PingPongBetweenTwoTasks) {
  constexpr int kCount = 50;
  int pongs = 0;
  EventLoop loop;
  loop.spawn(ponger(kCount));
  loop.spawn(pinger(kCount, pongs));
  EXPECT_TRUE(loop.run(30s));
  EXPECT_EQ(pongs, kCount);
}

TEST_F(CoroTest, ManyOperationsFromSeveralTasksOnOneLoop) {
  constexpr std::size_t kTasks = 4;
  constexpr std::size_t kArea = 4096;
  constexpr std::size_t kPiece = kArea / 4;
  constexpr std::size_t kHalf = kSize / 2;
  int finished = 0;
  std::vector<std::uint32_t> immediates;

  auto worker = [&](std::size_t index) -> Task<> {
    const std::size_t base = index * kArea;
    fill_pattern(a_bytes(base, kArea), static_cast<unsigned>(100 + index));
    std::vector<AsyncWork> writes;
    for (std::size_t piece = 0; piece < 4; ++piece) {
      const std::size_t offset = base + piece * kPiece;
      writes.push_back(
          ibv::async(*a, ibv::op::Write{gather_a(offset, kPiece), remote_b(offset, kPiece)}));
    }
    for (std::size_t i = writes.size(); i > 0; --i) {  // the last posted first
      AsyncWork& write = writes[i - 1];
      const WorkCompletion done = co_await write;
      EXPECT_EQ(done.opcode(), WorkOpcode::rdma_write);
    }
    std::vector<AsyncWork> reads;
    for (std::size_t piece = 0; piece < 4; ++piece) {
      const std::size_t offset = base + piece * kPiece;
      reads.push_back(ibv::async(
          *a, ibv::op::Read{scatter_a(kHalf + offset, kPiece), remote_b(offset, kPiece)}));
    }
    for (auto& read : reads) EXPECT_EQ((co_await read).byte_length(), kPiece);
    EXPECT_TRUE(same_bytes(a_bytes(base, kArea), b_bytes(base, kArea)));
    EXPECT_TRUE(same_bytes(a_bytes(base, kArea), a_bytes(kHalf + base, kArea)));
    co_await ibv::async(*a, ibv::op::Send{{}, static_cast<std::uint32_t>(index)});
    ++finished;
  };
  auto receiver = [&]() -> Task<> {
    std::vector<AsyncWork> receives;
    for (std::size_t i = 0; i < kTasks; ++i)
      receives.push_back(ibv::async(*b, ibv::op::Receive{{}}));
    for (auto& receive : receives) {
      const WorkCompletion got = co_await receive;
      EXPECT_TRUE(got.immediate().has_value());
      immediates.push_back(got.immediate().value_or(999));
    }
  };

  EventLoop loop;
  loop.spawn(receiver());
  for (std::size_t i = 0; i < kTasks; ++i) loop.spawn(worker(i));
  EXPECT_TRUE(loop.run(30s));
  EXPECT_EQ(finished, static_cast<int>(kTasks));
  std::sort(immediates.begin(), immediates.end());
  EXPECT_EQ(immediates, (std::vector<std::uint32_t>{0, 1, 2, 3}));
}

TEST_F(CoroTest, AFailedOperationIsAWorkErrorInTheTask) {
  std::optional<WorkStatus> status;
  auto task = [&]() -> Task<> {
    const auto good = remote_b(0, 64);
    const RemoteMemoryRegion wrong(good.address(), good.length(), good.rkey() ^ 0x5a5a00U);
    try {
      co_await ibv::async(*a, ibv::op::Write{gather_a(0, 64), wrong});
    } catch (const WorkError& error) {
      status = error.status();
      EXPECT_NE(std::string(error.what()).find("ibv::async"), std::string::npos) << error.what();
    }
  };
  EventLoop loop;
  loop.spawn(task());
  EXPECT_TRUE(loop.run(30s));
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, WorkStatus::remote_access_error);
}

// A send-queue request is looked for once at its post (Channel::post_and_look): one whose
// completion that look misses (32 KiB, often not done by then) is tracked like any other; a
// write posted after an unsignaled one retires it; AsyncWorks awaited out of posting order each
// get their own completion.
TEST_F(CoroTest, WhatThePostsFirstLookMissesIsAwaitedLikeAnyRequest) {
  constexpr std::size_t kBig = std::size_t{32} * 1024;
  constexpr std::size_t kSmall = 64;
  constexpr std::size_t kAll = kSmall + kBig + kSmall;
  fill_pattern(a_bytes(0, kAll), 7);
  std::optional<PendingWork> unsignaled;
  int done = 0;
  auto task = [&]() -> Task<> {
    unsignaled.emplace(
        a->post(op::Write{gather_a(0, kSmall), remote_b(0, kSmall)}, {.signaled = false}));
    AsyncWork big = ibv::async(*a, ibv::op::Write{gather_a(kSmall, kBig), remote_b(kSmall, kBig)});
    AsyncWork small = ibv::async(
        *a, ibv::op::Write{gather_a(kSmall + kBig, kSmall), remote_b(kSmall + kBig, kSmall)});
    EXPECT_EQ((co_await small).opcode(), WorkOpcode::rdma_write);  // the later one first
    EXPECT_EQ((co_await big).opcode(), WorkOpcode::rdma_write);
    EXPECT_EQ(big.work().wr_id() + 1, small.work().wr_id());
    ++done;
  };
  EventLoop loop;
  loop.spawn(task());
  EXPECT_TRUE(loop.run(30s));
  EXPECT_EQ(done, 1);
  ASSERT_TRUE(unsignaled.has_value());
  const auto retired = unsignaled->poll();  // retired by the signaled writes after it
  ASSERT_TRUE(retired.has_value());
  EXPECT_TRUE(retired->ok());
  EXPECT_TRUE(same_bytes(a_bytes(0, kAll), b_bytes(0, kAll)));
}

TEST_F(CoroTest, BadInputThrowsBeforeAnythingIsPosted) {
  std::optional<ErrorKind> kind;
  auto task = [&]() -> Task<> {
    try {
      co_await ibv::async(*a, ibv::op::Send{gather_a(0, 8)}, 0ns);
    } catch (const Error& error) {
      kind = error.kind();
    }
    // Nothing was posted: a's first request is still the one b receives.
    auto received = ibv::async(*b, ibv::op::Receive{scatter_b(0, 8)});
    co_await ibv::async(*a, ibv::op::Send{gather_a(0, 8)});
    co_await received;
  };
  EventLoop loop;
  loop.spawn(task());
  EXPECT_TRUE(loop.run(30s));
  EXPECT_EQ(kind, ErrorKind::invalid_argument);
}

TEST_F(CoroTest, AReceiveThatTimesOutThrowsInItsTaskWhileOthersGoOn) {
  std::optional<ErrorKind> kind;
  int other_passes = 0;
  bool timed_out_task_done = false;
  auto waits = [&]() -> Task<> {
    try {
      co_await ibv::async(*b, ibv::op::Receive{scatter_b(0, 64)}, 100ms);
    } catch (const Error& error) {
      kind = error.kind();
    }
    timed_out_task_done = true;
  };
  auto other = [&]() -> Task<> {
    // Round trips of RDMA writes while the receive waits: the loop does not stall on it.
    while (!timed_out_task_done) {
      try {
        co_await ibv::async(*a, ibv::op::Write{gather_a(0, 64), remote_b(1024, 64)});
        ++other_passes;
      } catch (const WorkError&) {
        // A write in flight when the receive timed out meets b's queue pair in the error
        // state (the cancel) and fails: expected then, not before.
        if (!timed_out_task_done) throw;
      }
    }
  };
  EventLoop loop;
  loop.spawn(waits());
  loop.spawn(other());
  EXPECT_TRUE(loop.run(30s));
  EXPECT_EQ(kind, ErrorKind::timeout);
  EXPECT_GT(other_passes, 0);
  // As with the blocking calls, the timed-out receive was cancelled: b refuses further work,
  // naming the timeout.
  EXPECT_EQ(b->queue_pair().query_state(), "ERR");
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state,
                                     [&] { (void)b->post_receive(scatter_b(4096, 64)); },
                                     {"cancelled", "an awaited request"}));
}

TEST_F(CoroTest, ATaskDestroyedWhileItAwaitsAReceiveSettlesTheRequest) {
  connect({.operation = 5s, .drop = 200ms});
  bool resumed = false;
  {
    EventLoop loop;
    auto waits = [&]() -> Task<> {
      co_await ibv::async(*b, ibv::op::Receive{scatter_b(0, 64)});
      resumed = true;
    };
    loop.spawn(waits());
    loop.run_once();
    EXPECT_EQ(loop.task_count(), 1U);
    // The loop goes with the task: its receive waits out the drop timeout (nothing comes), is
    // cancelled and logged, as a PendingWork dropped unpolled.
  }
  EXPECT_FALSE(resumed);
  // The device is done with the receive's buffer: b's queue pair is in the error state, and b
  // refuses further work.
  EXPECT_EQ(b->queue_pair().query_state(), "ERR");
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state,
                                     [&] { (void)b->post_receive(scatter_b(128, 64)); },
                                     {"cancelled", "dropped unpolled"}));
}

TEST_F(CoroTest, MultiChannelPeerForms) {
  auto world = connect_local_world(pd, 2, settings(), kTimeouts);
  // Tagged with rank 1 itself: not the peer addressed below.
  const PeerRemoteMemoryRegion b_region(1, remote_b(0, kSize));
  auto rank0 = [&]() -> Task<> {
    fill_pattern(a_bytes(0, 512), 21);
    co_await ibv::async(
        world[0], 1,
        ibv::op::PeerWrite{gather_a(0, 512), PeerRemoteMemoryRegion(1, remote_b(0, 512))});
    co_await ibv::async(world[0], 1, ibv::op::Send{{}, 77});
  };
  auto rank1 = [&]() -> Task<> {
    const WorkCompletion got = co_await ibv::async(world[1], 0, ibv::op::Receive{{}});
    EXPECT_EQ(got.immediate(), std::optional<std::uint32_t>(77));
    EXPECT_TRUE(same_bytes(a_bytes(0, 512), b_bytes(0, 512)));
    // A region tagged with another peer than the one addressed is rejected before posting, in
    // the call's name.
    bool rejected = false;
    try {
      co_await ibv::async(world[1], 0, ibv::op::PeerRead{scatter_b(1024, 16), b_region});
    } catch (const Error& error) {
      rejected = error.kind() == ErrorKind::invalid_argument &&
                 std::string(error.what()).find("ibv::async") != std::string::npos;
      EXPECT_TRUE(rejected) << error.what();
    }
    EXPECT_TRUE(rejected);
  };
  EventLoop loop;
  loop.spawn(rank1());
  loop.spawn(rank0());
  EXPECT_TRUE(loop.run(30s));
}

TEST_F(CoroTest, ASleepingLoopWaitsForAMessageWithoutSpinning) {
  connect_with_completion_channels(false);
  fill_pattern(a_bytes(0, 128), 5);
  std::optional<std::uint32_t> length;
  auto receives = [&]() -> Task<> {
    length = (co_await ibv::async(*b, ibv::op::Receive{scatter_b(0, 128)}, 10s)).byte_length();
  };
  EventLoop loop(WaitMode::block());
  loop.spawn(receives());
  loop.run_once();  // the receive is posted before the sender starts its second
  // Channel a belongs to the sender thread from here on, b to this one.
  std::jthread sender([&] {           // joined however the test ends
    std::this_thread::sleep_for(1s);  // deliberate: the loop below must wait this long
    EXPECT_NO_THROW(a->send(gather_a(0, 128)));
  });
  const auto cpu_before = thread_cpu_time();
  const bool finished = loop.run(20s);
  const auto cpu = thread_cpu_time() - cpu_before;
  sender.join();
  EXPECT_TRUE(finished);
  EXPECT_EQ(length, std::optional<std::uint32_t>(128));
  EXPECT_TRUE(same_bytes(a_bytes(0, 128), b_bytes(0, 128)));
  // A spinning loop would burn about the whole second (the thread runs all the time); the
  // sleeping one wakes up for the completion only. A bound, not a timing measurement.
  EXPECT_LT(cpu, 300ms) << "loop thread CPU time " << cpu.count() << " ns over a 1 s wait";
}

TEST_F(CoroTest, ASleepingLoopWakesUpForATimeout) {
  connect_with_completion_channels(false);
  std::optional<ErrorKind> kind;
  auto waits = [&]() -> Task<> {
    try {
      co_await ibv::async(*b, ibv::op::Receive{scatter_b(0, 64)}, 200ms);
    } catch (const Error& error) {
      kind = error.kind();
    }
  };
  EventLoop loop(WaitMode::spin_then_block(100us));
  loop.spawn(waits());
  EXPECT_TRUE(loop.run(20s));
  EXPECT_EQ(kind, ErrorKind::timeout);
  EXPECT_EQ(b->queue_pair().query_state(), "ERR");  // cancelled
}

TEST_F(CoroTest, ASleepingLoopRefusesAChannelWithoutACompletionChannel) {
  std::optional<ErrorKind> kind;
  auto sends = [&]() -> Task<> {
    auto received = b->post_receive(scatter_b(0, 8));
    try {
      co_await ibv::async(*a, ibv::op::Send{gather_a(0, 8)});
    } catch (const Error& error) {
      kind = error.kind();
    }
    // The send was posted before the co_await refused it: it completes; its AsyncWork settled
    // it on the way out (a dropped PendingWork waits for its completion).
    EXPECT_EQ(received.wait().byte_length(), 8U);
  };
  EventLoop loop(WaitMode::block());
  loop.spawn(sends());
  EXPECT_TRUE(loop.run(20s));
  EXPECT_EQ(kind, ErrorKind::state);
}

/// Drives `loop` from a poll(2) loop of the caller's until its tasks are done; returns how many
/// times it slept.
int drive_with_poll(EventLoop& loop, std::size_t expected_fds) {
  int sleeps = 0;
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (loop.task_count() > 0 && std::chrono::steady_clock::now() < give_up) {
    loop.run_once();
    if (loop.task_count() == 0 || !loop.arm_for_sleep()) continue;
    const auto fds = loop.completion_fds();
    EXPECT_EQ(fds.size(), expected_fds);
    std::vector<pollfd> watch;
    watch.reserve(fds.size());
    for (const int fd : fds) watch.push_back({.fd = fd, .events = POLLIN, .revents = 0});
    int timeout_ms = 1000;
    if (const auto deadline = loop.next_deadline()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(
          *deadline - std::chrono::steady_clock::now());
      timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, 1000));
    }
    ::poll(watch.data(), watch.size(), timeout_ms);
    ++sleeps;
  }
  EXPECT_EQ(loop.task_count(), 0U);
  return sleeps;
}

TEST_F(CoroTest, DrivenFromTheCallersOwnPollLoop) {
  connect_with_completion_channels(true);  // both channels on one fd
  constexpr int kCount = 10;
  int pongs = 0;
  EventLoop loop;  // run() is not used here: its WaitMode does not matter
  loop.spawn(ponger(kCount));
  loop.spawn(pinger(kCount, pongs));
  drive_with_poll(loop, 1);  // may or may not sleep: Soft-RoCE often completes in the post
  EXPECT_EQ(pongs, kCount);
  // A receive nothing answers: the caller's loop must sleep until the operation's deadline.
  std::optional<ErrorKind> kind;
  auto waits = [&]() -> Task<> {
    try {
      co_await ibv::async(*b, ibv::op::Receive{scatter_b(0, 64)}, 300ms);
    } catch (const Error& error) {
      kind = error.kind();
    }
  };
  loop.spawn(waits());
  EXPECT_GT(drive_with_poll(loop, 1), 0);
  EXPECT_EQ(kind, ErrorKind::timeout);
  EXPECT_EQ(b->queue_pair().query_state(), "ERR");  // cancelled
}

}  // namespace
}  // namespace ibv::test
