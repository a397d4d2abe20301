// SPDX-License-Identifier: MIT
// Tests Channel::state() and the errors that go with it: usable on a fresh channel; cancelled
// (naming the call) after a blocking call or a scope times out, with an Error that says it
// cancelled the channel; still usable after PendingWork::wait() times out; peer_gone (and
// ErrorKind::peer_gone) when the peer's queue pair vanishes; failed with the status of a failed
// completion; readable from another thread while one blocks on the channel.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/ibv.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using Condition = ChannelState::Condition;

class ChannelStateTest : public ::testing::Test, protected ChannelPairMemory {
 protected:
  ChannelStateTest() : ChannelPairMemory(kSize) {}
  static constexpr std::size_t kSize = std::size_t{16} * 1024;

  void SetUp() override { connect(settings()); }

  /// RNR retried forever (a blocking receive posted after the peer's send), and short, finite
  /// transport retries: a request to a vanished peer fails after about (3 + 1) x 67 ms.
  QueuePairSettings settings() {
    QueuePairSettings settings;
    settings.rnr_retry = RnrRetryCount::infinite();
    settings.ack_timeout = AckTimeout(14);
    settings.retry_count = RetryCount(3);
    settings.gid_index = test_gid_index(context);
    return settings;
  }

  void connect(const QueuePairSettings& settings,
               ChannelTimeouts timeouts = {.operation = 5s, .drop = 1s}) {
    a.reset();
    b.reset();
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings, timeouts);
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
  }

  std::array<GatherElement, 1> gather_a(std::size_t offset, std::size_t length) {
    return {mr_a.gather(std::span<const std::byte>(buffer_a).subspan(offset, length))};
  }
  std::array<ScatterElement, 1> scatter_b(std::size_t offset, std::size_t length) {
    return {mr_b.scatter(std::span(buffer_b).subspan(offset, length))};
  }
  RemoteMemoryRegion remote_b(std::size_t offset, std::size_t length) const {
    return mr_b.remote().sub_region(offset, length);
  }
};

TEST_F(ChannelStateTest, AFreshChannelIsUsable) {
  const ChannelState state = a->state();
  EXPECT_TRUE(state.usable());
  EXPECT_EQ(state.condition(), Condition::usable);
  EXPECT_TRUE(state.operation().empty());
  EXPECT_EQ(state.status(), WorkStatus::success);
  EXPECT_EQ(state.to_string(), "usable");
  EXPECT_EQ(state, ChannelState{});
  EXPECT_EQ(a->write(gather_a(0, 64), remote_b(0, 64)).status(), WorkStatus::success);
  EXPECT_TRUE(a->state().usable());  // work that succeeds changes nothing
}

// A blocking receive that never gets a message: execute() gives up, which cancels the channel;
// the Error says so (kind timeout, channel_cancelled()), and so does state(), naming the call.
TEST_F(ChannelStateTest, ATimedOutExecuteCancelsTheChannelAndTheErrorSaysSo) {
  const auto error =
      ibv_test::error_of([&] { (void)b->execute(op::Receive{.into = scatter_b(0, 256)}, 200ms); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ErrorKind::timeout) << error->what();
  EXPECT_TRUE(error->channel_cancelled()) << error->what();
  const ChannelState state = b->state();
  EXPECT_FALSE(state.usable());
  EXPECT_TRUE(state.cancelled());
  EXPECT_EQ(state.condition(), Condition::cancelled);
  EXPECT_EQ(state.operation(), "Channel::execute");
  EXPECT_EQ(state.to_string(), "cancelled by a timeout in Channel::execute");
  // The channel refuses further work (a state error, which did not cancel anything itself),
  // and the state stays what broke it.
  const auto refused = ibv_test::error_of([&] { (void)b->post_receive(scatter_b(0, 64)); });
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->kind(), ErrorKind::state);
  EXPECT_FALSE(refused->channel_cancelled());
  EXPECT_EQ(b->state(), state);
  EXPECT_TRUE(a->state().usable());  // the peer's channel knows nothing of it yet
}

// The named blocking calls are execute(): the same state.
TEST_F(ChannelStateTest, ATimedOutNamedReceiveCancelsAsExecute) {
  const auto error = ibv_test::error_of([&] { (void)b->receive(scatter_b(0, 256), 100ms); });
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(error->channel_cancelled());
  EXPECT_EQ(error->operation(), "Channel::receive");
  EXPECT_EQ(b->state().operation(), "Channel::execute");
}

// PendingWork::wait() that times out leaves the request pending and the channel usable; its
// Error is a timeout that says it cancelled nothing.
TEST_F(ChannelStateTest, AWaitThatTimesOutLeavesTheChannelUsable) {
  connect(settings(), ChannelTimeouts{.operation = 200ms, .drop = 1s});
  PendingWork receive = b->post_receive(scatter_b(0, 256));
  const auto error = ibv_test::error_of([&] { (void)receive.wait(); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ErrorKind::timeout) << error->what();
  EXPECT_FALSE(error->channel_cancelled()) << error->what();
  EXPECT_TRUE(b->state().usable()) << b->state().to_string();
  // Usable indeed: the message arrives in the pending receive.
  EXPECT_TRUE(a->send(gather_a(0, 100)).ok());
  EXPECT_EQ(receive.wait().byte_length(), 100U);
  EXPECT_TRUE(b->state().usable());
}

// A scope whose request times out cancels the channel: BatchError (timeout) says it did, and
// state() names the scope.
TEST_F(ChannelStateTest, ATimedOutScopeCancelsTheChannelNamingTheScope) {
  connect(settings(), ChannelTimeouts{.operation = 200ms, .drop = 1s});
  try {
    b->scope([&](ChannelScope& s) { s.post(ibv::op::Receive{scatter_b(0, 256)}); });
    ADD_FAILURE() << "the scope returned";
  } catch (const BatchError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    EXPECT_TRUE(error.channel_cancelled());
  }
  EXPECT_TRUE(b->state().cancelled());
  EXPECT_EQ(b->state().operation(), "Channel::scope");
}

// The peer's channel (its queue pair) vanishes: the next request to it is never acknowledged
// and fails with retry_exceeded, kind peer_gone; state() says peer_gone with that status. The
// requests after it are flushed, which does not change the state.
TEST_F(ChannelStateTest, APeerThatVanishesIsPeerGoneInTheErrorAndTheState) {
  EXPECT_TRUE(a->write(gather_a(0, 64), remote_b(0, 64)).ok());
  b.reset();  // the peer's queue pair is destroyed
  const auto start = Clock::now();
  try {
    (void)a->write(gather_a(0, 64), remote_b(0, 64));
    ADD_FAILURE() << "a write to a destroyed queue pair succeeded";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::retry_exceeded) << error.what();
    EXPECT_EQ(error.kind(), ErrorKind::peer_gone) << error.what();
    EXPECT_FALSE(error.channel_cancelled());
  }
  EXPECT_LT(Clock::now() - start, 4s);  // it failed instead of hanging
  ChannelState state = a->state();
  EXPECT_TRUE(state.peer_gone()) << state.to_string();
  EXPECT_EQ(state.condition(), Condition::peer_gone);
  EXPECT_EQ(state.status(), WorkStatus::retry_exceeded);
  EXPECT_EQ(state.to_string(), "peer gone (retry_exceeded)");
  try {
    (void)a->write(gather_a(0, 64), remote_b(0, 64));
    ADD_FAILURE() << "a write on a queue pair in the error state succeeded";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::work_request_flushed) << error.what();
  }
  EXPECT_EQ(a->state(), state);  // the first reason is kept
}

// A completion that fails for another reason (a remote key the peer does not know) puts the
// queue pair in error: state() says failed, with its status.
TEST_F(ChannelStateTest, AFailedCompletionIsFailedWithItsStatus) {
  const auto good = remote_b(0, 64);
  const RemoteMemoryRegion wrong(good.address(), good.length(), good.rkey() ^ 0x5a5a00U);
  try {
    (void)a->write(gather_a(0, 64), wrong);
    ADD_FAILURE() << "a write with a wrong rkey succeeded";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::remote_access_error) << error.what();
  }
  const ChannelState state = a->state();
  EXPECT_TRUE(state.failed()) << state.to_string();
  EXPECT_EQ(state.status(), WorkStatus::remote_access_error);
  EXPECT_EQ(state.to_string(), "failed (remote_access_error)");
}

// A receive that fails (the message does not fit) breaks the receiving channel: its own state
// says so, with the receive's status (local_length_error on hardware; Soft-RoCE reports
// local_qp_operation_error), not only the sender's.
TEST_F(ChannelStateTest, AFailedReceiveIsFailedOnTheReceivingChannel) {
  PendingWork receive = b->post_receive(scatter_b(0, 16));
  EXPECT_THROW((void)a->send(gather_a(0, 1024)), WorkError);
  std::optional<WorkStatus> status;
  try {
    (void)receive.wait();
    ADD_FAILURE() << "a 1024-byte message fit a 16-byte receive";
  } catch (const WorkError& error) {
    status = error.status();
  }
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(*status, WorkStatus::work_request_flushed);
  EXPECT_TRUE(b->state().failed()) << b->state().to_string();
  EXPECT_EQ(b->state().status(), *status) << b->state().to_string();
}

// state() is read from another thread while this one blocks on the channel: usable while it
// waits, cancelled (naming the call) once the blocking call has given up.
TEST_F(ChannelStateTest, StateIsReadableFromAnotherThreadWhileOneBlocks) {
  std::atomic<bool> blocking{false};
  std::atomic<bool> done{false};
  std::vector<Condition> seen_while_blocking;
  std::thread reader([&] {
    while (!blocking.load()) std::this_thread::yield();
    while (!done.load()) {
      seen_while_blocking.push_back(b->state().condition());
      std::this_thread::sleep_for(10ms);
    }
  });
  std::optional<ibv::Error> error;
  blocking.store(true);
  try {
    (void)b->receive(scatter_b(0, 256), 300ms);
  } catch (const ibv::Error& e) {
    error = e;
  }
  done.store(true);
  reader.join();
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(error->channel_cancelled());
  ASSERT_FALSE(seen_while_blocking.empty());
  EXPECT_EQ(seen_while_blocking.front(), Condition::usable);
  for (const Condition condition : seen_while_blocking) {
    EXPECT_TRUE(condition == Condition::usable || condition == Condition::cancelled)
        << to_string(condition);
  }
  // Read from another thread after the fact, too.
  ChannelState after;
  std::thread([&] { after = b->state(); }).join();
  EXPECT_TRUE(after.cancelled());
  EXPECT_EQ(after.operation(), "Channel::execute");
}

// A MultiChannel's channels each have their own state, asked through channel(peer): a timeout
// toward one peer cancels that peer's channel only.
TEST(ChannelStateMulti, ATimeoutTowardOnePeerCancelsOnlyItsChannel) {
  constexpr std::uint32_t kPeers = 3;
  Context context = open_test_device();
  ProtectionDomain pd(context);
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  std::vector<MultiChannel> nodes =
      connect_local_world(pd, kPeers, settings, {.operation = 5s, .drop = 1s});
  std::vector<std::byte> buffer(256);
  const MemoryRegion mr = pd.register_local(buffer);
  const std::array<ScatterElement, 1> into{mr.scatter(std::span(buffer))};
  const auto error =
      ibv_test::error_of([&] { (void)nodes[0].execute(1, op::Receive{.into = into}, 100ms); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ErrorKind::timeout);
  EXPECT_TRUE(error->channel_cancelled());
  EXPECT_TRUE(nodes[0].channel(1).state().cancelled());
  EXPECT_EQ(nodes[0].channel(1).state().operation(), "Channel::execute");
  EXPECT_TRUE(nodes[0].channel(2).state().usable());
  EXPECT_TRUE(nodes[1].channel(0).state().usable());
}

}  // namespace
}  // namespace ibv::test
