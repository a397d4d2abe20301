// SPDX-License-Identifier: MIT
// Device tests of the Channel layer: two Channels on one protection domain, connected to each
// other on the test device, data checked byte by byte.
// - every operation in the three styles: blocking, unpolled (PendingWork) and scoped;
// - scopes that end badly: a throwing body (its exception comes out unchanged, after all work
//   completed), failed completions (BatchError), both at once, a failure inside a posted list,
//   and a drain that times out;
// - 64 requests in flight at once, waited out of order: each handle gets its own completion;
// - PendingWork dropped unpolled (the destructor waits), moved from, wait_for and wait timeouts;
// - giving up (docs/safety.md, "No orphans"): a blocking receive, a scope and a dropped
//   PendingWork that time out cancel their request (queue pair to error, flushed completions
//   taken in) before they return, so a late message never lands in the (canary-filled) buffer,
//   and the channel then refuses work naming the timeout; a send that finds no receive (RNR)
//   fails instead of hanging;
// - two channels sharing one memory region.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// The body's own exception type in the scope tests, so nothing else can pass for it.
class BodyFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ChannelTest : public ::testing::Test, protected ChannelPairMemory {
 protected:
  ChannelTest() : ChannelPairMemory(kSize) {}
  static constexpr std::size_t kSize = std::size_t{64} * 1024;
  static constexpr ChannelTimeouts kTimeouts{.operation = 5s, .drop = 5s};

  void SetUp() override { connect(default_settings()); }

  /// The default settings, except that RNR is retried forever: on one thread, a blocking
  /// receive is posted only after the peer's send went out, which then is RNR-NAKed until the
  /// receive is there. Every wait stays bounded by the channel's timeouts.
  static QueuePairSettings default_settings() {
    QueuePairSettings settings;
    settings.rnr_retry = RnrRetryCount::infinite();
    return settings;
  }

  /// (Re)builds channels a and b with `settings` (the GID index from the environment is added)
  /// and connects them to each other.
  void connect(QueuePairSettings settings, ChannelTimeouts timeouts = kTimeouts) {
    a.reset();
    b.reset();
    settings.gid_index = test_gid_index(context);
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings, timeouts);
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
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
  RemoteMemoryRegion remote_a(std::size_t offset, std::size_t length) const {
    return mr_a.remote().sub_region(offset, length);
  }
  RemoteMemoryRegion remote_b(std::size_t offset, std::size_t length) const {
    return mr_b.remote().sub_region(offset, length);
  }
  /// b's region with a remote key the device does not know.
  RemoteMemoryRegion wrong_rkey_b(std::size_t offset, std::size_t length) const {
    const auto good = remote_b(offset, length);
    return {good.address(), good.length(), good.rkey() ^ 0x5a5a00U};
  }
};

using ChannelBlocking = ChannelTest;
using ChannelUnpolled = ChannelTest;
using ChannelScoped = ChannelTest;
using ChannelOutstanding = ChannelTest;
using ChannelPendingWork = ChannelTest;
using ChannelGivingUp = ChannelTest;
using ChannelSharedMemoryRegion = ChannelTest;
using ChannelRnr = ChannelTest;

// One ChannelSettings for every builder: settings() sets them all and gives them back, and the
// named setters change one field each.
TEST(ChannelSettingsTest, EveryBuilderTakesAndGivesBackTheSameSettings) {
  Context context = open_test_device();
  ProtectionDomain pd(context);
  ChannelSettings settings;
  settings.queue_pair.max_send_wr = QueueDepth(32);
  settings.timeouts = {.operation = 1234ms, .drop = 567ms};
  settings.completion_queue_size = 300;
  settings.wait_mode = WaitMode::block();
  const auto same = [&](const ChannelSettings& got) {
    EXPECT_EQ(got.queue_pair.max_send_wr.value(), 32U);
    EXPECT_EQ(got.timeouts.operation, 1234ms);
    EXPECT_EQ(got.timeouts.drop, 567ms);
    EXPECT_EQ(got.completion_queue_size, 300);
    EXPECT_EQ(got.wait_mode.strategy, WaitStrategy::block);
  };
  same(ChannelBuilder(pd).settings(settings).settings());
  same(MultiChannelBuilder(pd, 0, 2).settings(settings).settings());
  same(net::NodeBuilder(pd, 0, 2).settings(settings).settings());
  EXPECT_EQ(ChannelBuilder(pd)
                .settings(settings)
                .completion_queue_size(400)
                .settings()
                .completion_queue_size,
            400);
  // Built (a loopback channel), the channel has them.
  settings.queue_pair.gid_index = test_gid_index(context);
  PreparedChannel prepared = ChannelBuilder(pd).settings(settings).build();
  const Endpoint self = prepared.endpoint();
  const Channel channel = std::move(prepared).handshake(self);
  EXPECT_EQ(channel.timeouts().operation, 1234ms);
  EXPECT_EQ(channel.wait_mode().strategy, WaitStrategy::block);
}

// --- 1. blocking ------------------------------------------------------------------------------

TEST_F(ChannelBlocking, SendIntoAPostedReceive) {
  fill_pattern(a_bytes(0, 5000), 1);
  auto received = b->post_receive(scatter_b(0, 8192));
  const auto sent = a->send(gather_a(0, 5000));
  EXPECT_TRUE(sent.ok()) << sent.to_string();
  EXPECT_EQ(sent.opcode(), WorkOpcode::send);
  const auto got = received.wait();
  EXPECT_EQ(got.wr_id(), received.wr_id());
  EXPECT_EQ(got.opcode(), WorkOpcode::receive);
  EXPECT_EQ(got.byte_length(), 5000U);
  EXPECT_FALSE(got.immediate().has_value());
  EXPECT_TRUE(same_bytes(a_bytes(0, 5000), b_bytes(0, 5000)));
  EXPECT_TRUE(all_zero(b_bytes(5000, 3192)));
}

TEST_F(ChannelBlocking, ReceiveTakesASendPostedBeforeIt) {
  fill_pattern(a_bytes(0, 3000), 2);
  auto sent = a->post_send(gather_a(0, 3000));
  const auto got = b->receive(scatter_b(0, 4096));
  EXPECT_EQ(got.opcode(), WorkOpcode::receive);
  EXPECT_EQ(got.byte_length(), 3000U);
  EXPECT_TRUE(same_bytes(a_bytes(0, 3000), b_bytes(0, 3000)));
  EXPECT_EQ(sent.wait().opcode(), WorkOpcode::send);
}

TEST_F(ChannelBlocking, SendWithImmediate) {
  fill_pattern(a_bytes(0, 100), 3);
  auto received = b->post_receive(scatter_b(0, 100));
  EXPECT_TRUE(a->send_with_immediate(gather_a(0, 100), 0xC0FFEE01U).ok());
  const auto got = received.wait();
  EXPECT_EQ(got.opcode(), WorkOpcode::receive);
  EXPECT_EQ(got.immediate(), 0xC0FFEE01U);
  EXPECT_EQ(got.byte_length(), 100U);
  EXPECT_TRUE(same_bytes(a_bytes(0, 100), b_bytes(0, 100)));
}

TEST_F(ChannelBlocking, ImmediateOnlyMessageIntoAnEmptyReceive) {
  auto sent = a->post_send_with_immediate(std::span<const GatherElement>{}, 42);
  const auto got = b->receive(std::span<const ScatterElement>{});
  EXPECT_EQ(got.byte_length(), 0U);
  EXPECT_EQ(got.immediate(), 42U);
  EXPECT_TRUE(sent.wait().ok());
  EXPECT_TRUE(all_zero(b_bytes(0, kSize)));
}

TEST_F(ChannelBlocking, Write) {
  fill_pattern(a_bytes(0, kSize / 2), 4);
  const auto done = a->write(gather_a(0, kSize / 2), remote_b(kSize / 2, kSize / 2));
  EXPECT_EQ(done.opcode(), WorkOpcode::rdma_write);
  EXPECT_TRUE(same_bytes(a_bytes(0, kSize / 2), b_bytes(kSize / 2, kSize / 2)));
  EXPECT_TRUE(all_zero(b_bytes(0, kSize / 2)));
}

TEST_F(ChannelBlocking, WriteWithImmediateCompletesAReceiveAtThePeer) {
  fill_pattern(a_bytes(0, 300), 5);
  auto received = b->post_receive(std::span<const ScatterElement>{});
  const auto done = a->write_with_immediate(gather_a(0, 300), remote_b(1000, 300), 77);
  EXPECT_EQ(done.opcode(), WorkOpcode::rdma_write);
  const auto got = received.wait();
  EXPECT_EQ(got.opcode(), WorkOpcode::receive_rdma_with_immediate);
  EXPECT_EQ(got.immediate(), 77U);
  EXPECT_EQ(got.byte_length(), 300U);
  EXPECT_TRUE(same_bytes(a_bytes(0, 300), b_bytes(1000, 300)));
}

TEST_F(ChannelBlocking, Read) {
  fill_pattern(b_bytes(0, 20000), 6);
  const auto done = a->read(scatter_a(kSize - 20000, 20000), remote_b(0, 20000));
  EXPECT_EQ(done.opcode(), WorkOpcode::rdma_read);
  EXPECT_TRUE(same_bytes(b_bytes(0, 20000), a_bytes(kSize - 20000, 20000)));
}

// --- 1. unpolled ------------------------------------------------------------------------------

TEST_F(ChannelUnpolled, PollUntilComplete) {
  fill_pattern(a_bytes(0, 4096), 7);
  auto received = b->post_receive(scatter_b(0, 4096));
  auto sent = a->post_send(gather_a(0, 4096));
  EXPECT_NE(received.wr_id(), 0U);
  EXPECT_FALSE(sent.is_complete());  // nobody looked yet
  std::optional<WorkCompletion> send_done;
  std::optional<WorkCompletion> receive_done;
  const auto deadline = Clock::now() + 5s;
  while ((!send_done || !receive_done) && Clock::now() < deadline) {
    if (!send_done) send_done = sent.poll();
    if (!receive_done) receive_done = received.poll();
  }
  ASSERT_TRUE(send_done.has_value());
  ASSERT_TRUE(receive_done.has_value());
  EXPECT_TRUE(sent.is_complete());
  EXPECT_TRUE(received.is_complete());
  EXPECT_EQ(send_done->wr_id(), sent.wr_id());
  EXPECT_EQ(send_done->opcode(), WorkOpcode::send);
  EXPECT_EQ(receive_done->wr_id(), received.wr_id());
  EXPECT_EQ(receive_done->byte_length(), 4096U);
  EXPECT_TRUE(same_bytes(a_bytes(0, 4096), b_bytes(0, 4096)));
  // Polling again gives the completion the handle already holds.
  ASSERT_TRUE(sent.poll().has_value());
  EXPECT_EQ(sent.poll()->wr_id(), sent.wr_id());
  EXPECT_EQ(received.wait().byte_length(), 4096U);
}

// A signaled request is tracked only when something else posts or polls before its own first
// look (ChannelCore::post_send). Here another call polls first (a blocking receive, then the
// wait of an earlier write): the completion, good or failed, arrives in that poll and waits
// for its handle.
TEST_F(ChannelUnpolled, ACompletionAnotherCallPollsFirstWaitsForItsHandle) {
  fill_pattern(a_bytes(0, 64), 8);
  PendingWork write = a->post_write(gather_a(0, 64), remote_b(0, 64));
  PendingWork sent = b->post_send(gather_b(128, 8));           // into the receive a posts below
  EXPECT_EQ(a->receive(scatter_a(128, 8)).byte_length(), 8U);  // polls a's queue first
  EXPECT_EQ(write.wait().opcode(), WorkOpcode::rdma_write);
  EXPECT_EQ(sent.wait().opcode(), WorkOpcode::send);
  EXPECT_TRUE(same_bytes(a_bytes(0, 64), b_bytes(0, 64)));

  // A failed one: the earlier write's wait polls first and brings the failure in with it.
  PendingWork good = a->post_write(gather_a(0, 64), remote_b(64, 64));
  PendingWork bad = a->post_write(gather_a(0, 64), wrong_rkey_b(0, 64));  // tracks `good`
  EXPECT_EQ(good.wait().opcode(), WorkOpcode::rdma_write);
  try {
    (void)bad.wait();
    ADD_FAILURE() << "the failed write reported success";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::remote_access_error);
    EXPECT_EQ(error.completion().wr_id(), bad.wr_id());
  }
}

// The same in a scope: a later post tracks the earlier request, the scope's drain polls for its
// first request and finds the last one's completion on the way.
TEST_F(ChannelScoped, RequestsPostedInARowAreEachWaitedFor) {
  fill_pattern(a_bytes(0, 4096), 9);
  a->scope([&](ChannelScope& s) {
    for (std::size_t i = 0; i < 4; ++i) {
      s.post(ibv::op::Write{gather_a(i * 1024, 1024), remote_b(i * 1024, 1024)});
    }
    EXPECT_EQ(s.size(), 4U);
  });
  EXPECT_TRUE(same_bytes(a_bytes(0, 4096), b_bytes(0, 4096)));
}

TEST_F(ChannelUnpolled, EveryOperationWithWaitAndWaitFor) {
  fill_pattern(a_bytes(0, 8000), 8);
  fill_pattern(b_bytes(20000, 2000), 9);
  std::set<std::uint64_t> ids;

  // send_with_immediate, waited with wait()
  auto receive_1 = b->post_receive(scatter_b(0, 1000));
  auto send = a->post_send_with_immediate(gather_a(0, 1000), 0xABCDU);
  const auto sent = send.wait();
  EXPECT_EQ(sent.opcode(), WorkOpcode::send);
  const auto got_1 = receive_1.wait();
  EXPECT_EQ(got_1.immediate(), 0xABCDU);
  EXPECT_EQ(got_1.byte_length(), 1000U);
  EXPECT_TRUE(same_bytes(a_bytes(0, 1000), b_bytes(0, 1000)));

  // plain send, waited with wait_for()
  auto receive_2 = b->post_receive(scatter_b(1000, 1000));
  auto plain = a->post_send(gather_a(1000, 600));
  const auto got_2 = receive_2.wait_for(5s);
  ASSERT_TRUE(got_2.has_value());
  EXPECT_EQ(got_2->byte_length(), 600U);
  EXPECT_FALSE(got_2->immediate().has_value());
  EXPECT_TRUE(same_bytes(a_bytes(1000, 600), b_bytes(1000, 600)));
  ASSERT_TRUE(plain.wait_for(5s).has_value());

  // write, waited with wait_for()
  auto write = a->post_write(gather_a(2000, 1000), remote_b(2000, 1000));
  const auto written = write.wait_for(5s);
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(written->opcode(), WorkOpcode::rdma_write);
  EXPECT_TRUE(same_bytes(a_bytes(2000, 1000), b_bytes(2000, 1000)));

  // write_with_immediate, both sides waited
  auto receive_3 = b->post_receive(std::span<const ScatterElement>{});
  auto write_imm = a->post_write_with_immediate(gather_a(4000, 500), remote_b(4000, 500), 9);
  EXPECT_EQ(write_imm.wait().opcode(), WorkOpcode::rdma_write);
  const auto got_3 = receive_3.wait_for(5s);
  ASSERT_TRUE(got_3.has_value());
  EXPECT_EQ(got_3->opcode(), WorkOpcode::receive_rdma_with_immediate);
  EXPECT_EQ(got_3->immediate(), 9U);
  EXPECT_EQ(got_3->byte_length(), 500U);
  EXPECT_TRUE(same_bytes(a_bytes(4000, 500), b_bytes(4000, 500)));

  // read
  auto read = a->post_read(scatter_a(10000, 2000), remote_b(20000, 2000));
  EXPECT_EQ(read.wait().opcode(), WorkOpcode::rdma_read);
  EXPECT_TRUE(same_bytes(b_bytes(20000, 2000), a_bytes(10000, 2000)));

  // The channels hand out distinct wr_ids (per channel).
  for (const auto* work : {&send, &plain, &write, &write_imm, &read}) ids.insert(work->wr_id());
  EXPECT_EQ(ids.size(), 5U);
  const std::set<std::uint64_t> receive_ids{receive_1.wr_id(), receive_2.wr_id(),
                                            receive_3.wr_id()};
  EXPECT_EQ(receive_ids.size(), 3U);
}

// --- 1. scoped --------------------------------------------------------------------------------

// B's scope posts a receive; A's scope, nested in it, posts a send, a write and a read. Each
// scope returns the value of its body, after its own work is done.
TEST_F(ChannelScoped, SendReceiveWriteAndReadReturnTheBodysValue) {
  fill_pattern(a_bytes(0, 6000), 10);
  fill_pattern(b_bytes(20000, 4000), 11);
  const std::uint32_t received_length = b->scope([&](ChannelScope& sb) {
    auto& receive = sb.post(ibv::op::Receive{scatter_b(0, 8192)});
    const std::size_t posted_by_a = a->scope([&](ChannelScope& sa) {
      sa.post(ibv::op::Send{gather_a(0, 4000)});
      sa.post(ibv::op::Write{gather_a(4000, 2000), remote_b(10000, 2000)});
      sa.post(ibv::op::Read{scatter_a(30000, 4000), remote_b(20000, 4000)});
      return sa.size();
    });
    EXPECT_EQ(posted_by_a, 3U);
    // A's scope has returned, so its write and read are done, though its body awaited nothing.
    EXPECT_TRUE(same_bytes(a_bytes(4000, 2000), b_bytes(10000, 2000)));
    EXPECT_TRUE(same_bytes(b_bytes(20000, 4000), a_bytes(30000, 4000)));
    return receive.wait().byte_length();
  });
  EXPECT_EQ(received_length, 4000U);
  EXPECT_TRUE(same_bytes(a_bytes(0, 4000), b_bytes(0, 4000)));
}

// post_all: a list of one operation type reaches the device as linked lists (one doorbell per
// half send queue, at most 64), and the scope waits for every request of it. 200 writes take
// several doorbells (and the check-everything-first path, past the 64 built in place); the
// sends' receives are one list on the other side.
TEST_F(ChannelScoped, PostAllPostsAListOfWritesAndAListOfSendsAndTheScopeWaitsForAll) {
  constexpr std::size_t kWrites = 200;
  constexpr std::size_t kSends = 20;
  fill_pattern(a_bytes(0, kWrites * 100), 51);
  fill_pattern(a_bytes(30000, kSends * 50), 52);
  std::vector<std::array<GatherElement, 1>> write_data;
  std::vector<std::array<GatherElement, 1>> send_data;
  std::vector<std::array<ScatterElement, 1>> receive_into;
  std::vector<op::Write> writes;
  std::vector<op::Send> sends;
  std::vector<op::Receive> receives;
  write_data.reserve(kWrites);
  send_data.reserve(kSends);
  receive_into.reserve(kSends);
  for (std::size_t i = 0; i < kWrites; ++i) {
    write_data.push_back(gather_a(i * 100, 100));
    writes.push_back(op::Write{write_data.back(), remote_b(i * 100, 100)});
  }
  for (std::size_t i = 0; i < kSends; ++i) {
    send_data.push_back(gather_a(30000 + i * 50, 50));
    sends.push_back(op::Send{send_data.back()});
    receive_into.push_back(scatter_b(40000 + i * 64, 64));
    receives.push_back(op::Receive{receive_into.back()});
  }
  b->scope([&](ChannelScope& sb) {
    sb.post_all(receives);
    EXPECT_EQ(sb.size(), kSends);
    const std::size_t posted = a->scope([&](ChannelScope& sa) {
      sa.post_all(writes, {.signaled = false});
      sa.post_all(sends);
      return sa.size();
    });
    EXPECT_EQ(posted, kWrites + kSends);
  });
  EXPECT_TRUE(same_bytes(a_bytes(0, kWrites * 100), b_bytes(0, kWrites * 100)));
  for (std::size_t i = 0; i < kSends; ++i) {
    EXPECT_TRUE(same_bytes(a_bytes(30000 + i * 50, 50), b_bytes(40000 + i * 64, 50))) << i;
  }
}

// A list of mixed operations (op::AnySend) goes in one doorbell: three writes, then the send
// that tells the peer, whose receive completes with the writes' data in place.
TEST_F(ChannelScoped, PostAllOfMixedOperationsWritesThenSends) {
  fill_pattern(a_bytes(0, 400), 53);
  const std::array<std::array<GatherElement, 1>, 4> data{gather_a(0, 100), gather_a(100, 100),
                                                         gather_a(200, 100), gather_a(300, 16)};
  const std::vector<op::AnySend> list{
      op::Write{data[0], remote_b(0, 100)}, op::Write{data[1], remote_b(100, 100)},
      op::Write{data[2], remote_b(200, 100)}, op::Send{data[3], 77U}};
  b->scope([&](ChannelScope& sb) {
    PendingWork& note = sb.post(ibv::op::Receive{scatter_b(1000, 64)});
    a->scope([&](ChannelScope& sa) {
      sa.post_all(list);
      EXPECT_EQ(sa.size(), 4U);
    });
    const WorkCompletion received = note.wait();
    EXPECT_EQ(received.immediate(), 77U);
    EXPECT_EQ(received.byte_length(), 16U);
  });
  EXPECT_TRUE(same_bytes(a_bytes(0, 300), b_bytes(0, 300)));
  EXPECT_TRUE(same_bytes(a_bytes(300, 16), b_bytes(1000, 16)));
}

// Every request of a list is checked before any is posted: one bad request (the last of a
// short list, or of a list longer than what is built in place) throws, and nothing of the list
// reaches the device.
TEST_F(ChannelScoped, PostAllChecksEveryRequestBeforePostingAny) {
  for (const std::size_t count : {std::size_t{5}, std::size_t{100}}) {
    fill_pattern(a_bytes(0, count * 10), 53);
    std::fill(buffer_b.begin(), buffer_b.end(), std::byte{0});
    std::vector<std::array<GatherElement, 1>> data;
    std::vector<op::Write> writes;
    data.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      data.push_back(gather_a(i * 10, 10));
      // The last one moves 10 bytes into a 9-byte destination.
      writes.push_back(op::Write{data.back(), remote_b(i * 10, i + 1 == count ? 9 : 10)});
    }
    a->scope([&](ChannelScope& scope) {
      EXPECT_TRUE(ibv_test::throws_invalid_argument([&] { scope.post_all(writes); }, {"write"}))
          << count;
      EXPECT_EQ(scope.size(), 0U) << count;
    });
    EXPECT_TRUE(std::all_of(buffer_b.begin(), buffer_b.end(),
                            [](std::byte x) { return x == std::byte{0}; }))
        << count << " writes: some reached the peer";
  }
}

// post_all of receives checks every receive before posting any, as for writes (the receives'
// own inline check, past the 64 built in place too): the last has one element more than the
// queue pair takes, nothing is posted, and a later message lands in a later receive.
TEST_F(ChannelScoped, PostAllOfReceivesChecksEveryReceiveBeforePostingAny) {
  const std::size_t too_many = b->queue_pair().settings().max_recv_sge.value() + 1;
  std::vector<ScatterElement> pieces;
  for (std::size_t i = 0; i < too_many; ++i) pieces.push_back(scatter_b(8000 + i * 8, 8)[0]);
  for (const std::size_t count : {std::size_t{5}, std::size_t{100}}) {
    std::fill(buffer_b.begin(), buffer_b.end(), std::byte{0});
    std::vector<std::array<ScatterElement, 1>> into;
    std::vector<op::Receive> receives;
    into.reserve(count);
    for (std::size_t i = 0; i + 1 < count; ++i) {
      into.push_back(scatter_b(i * 64, 64));
      receives.push_back(op::Receive{into.back()});
    }
    receives.push_back(op::Receive{pieces});
    b->scope([&](ChannelScope& scope) {
      EXPECT_TRUE(ibv_test::throws_invalid_argument([&] { scope.post_all(receives); },
                                                    {"receive", "max_recv_sge"}))
          << count;
      EXPECT_EQ(scope.size(), 0U) << count;
    });
    fill_pattern(a_bytes(0, 32), 56);
    a->scope([&](ChannelScope& sa) {
      b->scope([&](ChannelScope& sb) {
        sb.post(ibv::op::Receive{scatter_b(20000, 32)});
        sa.post(ibv::op::Send{gather_a(0, 32)});
      });
    });
    EXPECT_TRUE(same_bytes(a_bytes(0, 32), b_bytes(20000, 32))) << count;
    EXPECT_TRUE(std::all_of(buffer_b.begin(), buffer_b.begin() + 20000,
                            [](std::byte x) { return x == std::byte{0}; }))
        << count << " receives: a message landed in one of them";
  }
}

// A send queue of 4: a list of 51 writes goes out 2 at a time (the last alone) and all of them
// land. Unsignaled, the channel signals often enough that room comes back; signaled, the last
// request of each doorbell asks for the completion that stands for its part (without it the
// scope would wait for a completion that never comes, and throw).
TEST_F(ChannelScoped, PostAllOnASmallSendQueueWaitsForRoomBetweenDoorbells) {
  auto settings = default_settings();
  settings.max_send_wr = QueueDepth(4);
  connect(settings);
  constexpr std::size_t kWrites = 51;
  for (const bool signaled : {false, true}) {
    SCOPED_TRACE(signaled ? "signaled" : "unsignaled");
    fill_pattern(a_bytes(0, kWrites * 40), signaled ? 55 : 54);
    std::vector<std::array<GatherElement, 1>> data;
    std::vector<op::Write> writes;
    data.reserve(kWrites);
    for (std::size_t i = 0; i < kWrites; ++i) {
      data.push_back(gather_a(i * 40, 40));
      writes.push_back(op::Write{data.back(), remote_b(i * 40, 40)});
    }
    a->scope([&](ChannelScope& scope) { scope.post_all(writes, {.signaled = signaled}); });
    EXPECT_TRUE(same_bytes(a_bytes(0, kWrites * 40), b_bytes(0, kWrites * 40)));
  }
}

// A scope keeps its first requests in place and the rest elsewhere: the references it hands out
// stay valid as it grows past that, and each refers to its own request.
TEST_F(ChannelScoped, ReferencesStayValidAsTheScopeGrows) {
  constexpr std::size_t kCount = 50;  // past the 32 kept in place
  fill_pattern(a_bytes(0, kCount * 100), 36);
  const std::size_t waited = a->scope([&](ChannelScope& scope) {
    std::vector<PendingWork*> posted;
    std::vector<std::uint64_t> ids;
    for (std::size_t i = 0; i < kCount; ++i) {
      posted.push_back(&scope.post(ibv::op::Write{gather_a(i * 100, 100), remote_b(i * 100, 100)},
                                   {.signaled = i % 2 == 0}));
      ids.push_back(posted.back()->wr_id());
      EXPECT_EQ(scope.size(), i + 1);
    }
    std::size_t count = 0;
    for (std::size_t i = 0; i < kCount; i += 3) {  // some, in the inline part and after it
      EXPECT_EQ(posted[i]->wr_id(), ids[i]);
      EXPECT_EQ(posted[i]->wait().wr_id(), ids[i]);
      ++count;
    }
    return count;
  });
  EXPECT_EQ(waited, 17U);
  EXPECT_TRUE(same_bytes(a_bytes(0, kCount * 100), b_bytes(0, kCount * 100)));
}

// A handle the body moves out of the scope owns its request from then on: the scope neither
// waits for it nor reports it, and it can still be waited on after the scope has ended.
TEST_F(ChannelScoped, AHandleMovedOutOfTheScopeIsLeftToItsNewOwner) {
  fill_pattern(a_bytes(0, 200), 41);
  std::optional<PendingWork> taken;
  a->scope([&](ChannelScope& scope) {
    scope.post(ibv::op::Write{gather_a(0, 100), remote_b(0, 100)});
    taken.emplace(std::move(scope.post(ibv::op::Write{gather_a(100, 100), remote_b(100, 100)})));
  });
  ASSERT_TRUE(taken.has_value());
  EXPECT_TRUE(taken->wait().ok());
  EXPECT_TRUE(same_bytes(a_bytes(0, 200), b_bytes(0, 200)));
}

// The handle borrowed the core from the scope; moved out, it takes a share: the Channel may go.
TEST_F(ChannelScoped, AHandleMovedOutOfTheScopeKeepsTheChannelAlive) {
  fill_pattern(a_bytes(0, 4096), 43);
  std::optional<PendingWork> taken;
  a->scope([&](ChannelScope& scope) {
    taken.emplace(std::move(scope.post(ibv::op::Write{gather_a(0, 4096), remote_b(0, 4096)})));
  });
  a.reset();
  ASSERT_TRUE(taken.has_value());
  EXPECT_TRUE(taken->wait().ok());
  EXPECT_TRUE(same_bytes(a_bytes(0, 4096), b_bytes(0, 4096)));
  taken.reset();  // the last owner: the channel's queue pair goes now
}

// A body may destroy the Channel it posts on: the scope keeps its core until the end.
TEST_F(ChannelScoped, ABodyThatDestroysTheChannelStillHasItsWorkWaitedFor) {
  fill_pattern(a_bytes(0, 8192), 44);
  Channel& channel = *a;
  channel.scope([&](ChannelScope& scope) {
    scope.post(ibv::op::Write{gather_a(0, 8192), remote_b(0, 8192)});
    a.reset();
  });
  EXPECT_TRUE(same_bytes(a_bytes(0, 8192), b_bytes(0, 8192)));
}

// Nothing is awaited in the bodies: the receives are filled once the scopes return.
TEST_F(ChannelScoped, ImmediateFormsLeftToTheScopeAreDoneWhenItReturns) {
  fill_pattern(a_bytes(0, 3000), 12);
  b->scope([&](ChannelScope& sb) {
    sb.post(ibv::op::Receive{scatter_b(0, 2048)});
    sb.post(ibv::op::Receive{std::span<const ScatterElement>{}});
    a->scope([&](ChannelScope& sa) {
      sa.post(ibv::op::Send{gather_a(0, 2048), 5});
      sa.post(ibv::op::Write{gather_a(2048, 952), remote_b(4096, 952), 6});
    });
  });
  EXPECT_TRUE(same_bytes(a_bytes(0, 2048), b_bytes(0, 2048)));
  EXPECT_TRUE(same_bytes(a_bytes(2048, 952), b_bytes(4096, 952)));
}

// --- 2. a throwing body -----------------------------------------------------------------------

TEST_F(ChannelScoped, BodyExceptionComesOutUnchangedAfterAllWorkCompleted) {
  fill_pattern(a_bytes(0, 32768), 13);
  bool caught = false;
  try {
    b->scope([&](ChannelScope& sb) {
      sb.post(ibv::op::Receive{scatter_b(0, 16384)});
      a->scope([&](ChannelScope& sa) {
        sa.post(ibv::op::Write{gather_a(16384, 16384), remote_b(32768, 16384)});
        sa.post(ibv::op::Send{gather_a(0, 16384)});
        throw BodyFailure("the body failed after posting");
      });
    });
  } catch (const BodyFailure& failure) {
    caught = true;
    EXPECT_STREQ(failure.what(), "the body failed after posting");
    // Both scopes drained before letting the exception out: the write landed, and B's
    // receive (which B's body never awaited) is filled.
    EXPECT_TRUE(same_bytes(a_bytes(16384, 16384), b_bytes(32768, 16384)));
    EXPECT_TRUE(same_bytes(a_bytes(0, 16384), b_bytes(0, 16384)));
  } catch (const std::exception& other) {
    ADD_FAILURE() << "another exception came out: " << other.what();
  }
  EXPECT_TRUE(caught);
  // Nothing was left in flight: the channels carry on.
  fill_pattern(a_bytes(40000, 100), 14);
  EXPECT_TRUE(a->write(gather_a(40000, 100), remote_b(50000, 100)).ok());
  EXPECT_TRUE(same_bytes(a_bytes(40000, 100), b_bytes(50000, 100)));
}

// A plain std::runtime_error from a body with a result: the exact type, not an ibv::Error
// (which is a std::runtime_error too), and the work done.
TEST_F(ChannelScoped, StdRuntimeErrorFromAValueBodyIsNotWrapped) {
  fill_pattern(a_bytes(0, 8192), 15);
  fill_pattern(b_bytes(8192, 8192), 16);
  try {
    const int value = a->scope([&](ChannelScope& s) -> int {
      s.post(ibv::op::Write{gather_a(0, 8192), remote_b(0, 8192)});
      s.post(ibv::op::Read{scatter_a(8192, 8192), remote_b(8192, 8192)});
      throw std::runtime_error("plain runtime error");
    });
    ADD_FAILURE() << "the scope returned " << value;
  } catch (const std::exception& error) {
    EXPECT_EQ(typeid(error), typeid(std::runtime_error)) << typeid(error).name();
    EXPECT_STREQ(error.what(), "plain runtime error");
  }
  EXPECT_TRUE(same_bytes(a_bytes(0, 8192), b_bytes(0, 8192)));
  EXPECT_TRUE(same_bytes(b_bytes(8192, 8192), a_bytes(8192, 8192)));
}

// --- 3. failed completions in a scope ---------------------------------------------------------

TEST_F(ChannelScoped, FailedCompletionIsABatchErrorListingIt) {
  std::uint64_t bad_id = 0;
  std::uint64_t flushed_id = 0;
  try {
    const int value = a->scope([&](ChannelScope& s) {
      bad_id = s.post(ibv::op::Write{gather_a(0, 64), wrong_rkey_b(0, 64)}).wr_id();
      // Fails too: the first error puts the QP in the error state, which flushes this one.
      flushed_id = s.post(ibv::op::Write{gather_a(64, 64), remote_b(64, 64)}).wr_id();
      return 1;
    });
    ADD_FAILURE() << "the scope returned " << value;
  } catch (const BatchError& error) {
    EXPECT_FALSE(error.body_failed());
    EXPECT_EQ(error.body_exception(), nullptr);
    EXPECT_TRUE(error.timed_out().empty());
    EXPECT_EQ(error.kind(), ErrorKind::driver);
    const auto& failed = error.failed_completions();
    ASSERT_EQ(failed.size(), 2U) << error.what();
    EXPECT_EQ(failed[0].wr_id(), bad_id);
    EXPECT_EQ(failed[0].status(), WorkStatus::remote_access_error);
    EXPECT_EQ(failed[1].wr_id(), flushed_id);
    EXPECT_EQ(failed[1].status(), WorkStatus::work_request_flushed);
    EXPECT_THAT(error.what(), ::testing::HasSubstr("remote_access_error"));
    EXPECT_THAT(error.what(), ::testing::Not(::testing::HasSubstr("the body threw")));
  }
}

// A list posted by post_all asks for one completion, its last request's: a request in its
// middle that fails (a wrong rkey) is what the scope reports, once, under its own wr_id and
// status, not the flushes that follow it. The writes before it landed; the scope counted all.
TEST_F(ChannelScoped, AFailureInsideAPostedListIsReportedAsThatRequestsOwn) {
  constexpr std::size_t kWrites = 8;
  constexpr std::size_t kBad = 3;
  fill_pattern(a_bytes(0, (kWrites + 1) * 64), 54);
  std::vector<std::array<GatherElement, 1>> data;
  std::vector<op::Write> writes;
  data.reserve(kWrites);
  for (std::size_t i = 0; i < kWrites; ++i) {
    data.push_back(gather_a(i * 64, 64));
    writes.push_back(
        op::Write{data.back(), i == kBad ? wrong_rkey_b(i * 64, 64) : remote_b(i * 64, 64)});
  }
  std::uint64_t first_id = 0;
  try {
    a->scope([&](ChannelScope& s) {
      // A request on its own, then the list right after it.
      first_id =
          s.post(ibv::op::Write{gather_a(kWrites * 64, 64), remote_b(kWrites * 64, 64)}).wr_id();
      s.post_all(writes);
      EXPECT_EQ(s.size(), kWrites + 1);
    });
    ADD_FAILURE() << "the scope returned";
  } catch (const BatchError& error) {
    EXPECT_TRUE(error.timed_out().empty());
    const auto& failed = error.failed_completions();
    ASSERT_EQ(failed.size(), 1U) << error.what();
    EXPECT_EQ(failed[0].wr_id(), first_id + 1 + kBad);
    EXPECT_EQ(failed[0].status(), WorkStatus::remote_access_error);
  }
  EXPECT_TRUE(same_bytes(a_bytes(0, kBad * 64), b_bytes(0, kBad * 64)));
  EXPECT_TRUE(same_bytes(a_bytes(kWrites * 64, 64), b_bytes(kWrites * 64, 64)));
}

// A list of receives posted by post_all is one unit: only its last receive is tracked, the
// others only counted. A receive in its middle that fails (a message longer than its buffer) is
// what the scope reports, once, under that receive's own wr_id and status; the messages before
// it landed, and the channel says it failed.
TEST_F(ChannelScoped, AFailureInsideAReceiveListIsReportedAsThatReceivesOwn) {
  constexpr std::size_t kMessages = 6;
  constexpr std::size_t kBad = 2;
  constexpr std::size_t kLength = 32;
  // A message longer than its receive: local_length_error, which Soft-RoCE reports as
  // local_qp_operation_error.
  const auto kTooLong =
      ::testing::AnyOf(WorkStatus::local_length_error, WorkStatus::local_qp_operation_error);
  fill_pattern(a_bytes(0, kMessages * 64), 55);
  std::vector<std::array<ScatterElement, 1>> into;
  std::vector<op::Receive> receives;
  std::vector<std::array<GatherElement, 1>> data;
  std::vector<op::Send> sends;
  into.reserve(kMessages);
  data.reserve(kMessages);
  for (std::size_t i = 0; i < kMessages; ++i) {
    into.push_back(scatter_b(i * 64, i == kBad ? 8 : 64));
    receives.push_back(op::Receive{into.back()});
    data.push_back(gather_a(i * 64, kLength));
    sends.push_back(op::Send{data.back()});
  }
  // The list's wr_ids follow the last request b posted.
  const std::uint64_t first_id =
      b->execute(op::Write{gather_b(4096, 8), remote_a(4096, 8)}).wr_id() + 1;
  try {
    b->scope([&](ChannelScope& s) {
      s.post_all(receives);
      EXPECT_EQ(s.size(), kMessages);
      EXPECT_THROW(a->scope([&](ChannelScope& sa) { sa.post_all(sends); }), BatchError);
    });
    ADD_FAILURE() << "the scope returned";
  } catch (const BatchError& error) {
    EXPECT_TRUE(error.timed_out().empty());
    const auto& failed = error.failed_completions();
    ASSERT_EQ(failed.size(), 1U) << error.what();
    EXPECT_EQ(failed[0].wr_id(), first_id + kBad);
    EXPECT_THAT(failed[0].status(), kTooLong);
  }
  EXPECT_TRUE(b->state().failed());
  EXPECT_THAT(b->state().status(), kTooLong);
  for (std::size_t i = 0; i < kBad; ++i) {
    EXPECT_TRUE(same_bytes(a_bytes(i * 64, kLength), b_bytes(i * 64, kLength))) << i;
  }
}

// A receive list longer than the receive queue goes in parts, one unit each, as room comes:
// the sender's messages wait (receiver-not-ready retries) until their receives are posted.
TEST_F(ChannelScoped, AReceiveListLongerThanTheReceiveQueueGoesInParts) {
  constexpr std::size_t kMessages = 11;
  QueuePairSettings settings = default_settings();
  settings.max_recv_wr = QueueDepth(4);
  connect(settings);
  fill_pattern(a_bytes(0, kMessages * 64), 56);
  std::vector<std::array<ScatterElement, 1>> into;
  std::vector<op::Receive> receives;
  std::vector<PendingWork> sent;
  into.reserve(kMessages);
  for (std::size_t i = 0; i < kMessages; ++i) {
    into.push_back(scatter_b(i * 64, 64));
    receives.push_back(op::Receive{into.back()});
    sent.push_back(a->post(op::Send{gather_a(i * 64, 48)}));
  }
  b->scope([&](ChannelScope& s) {
    s.post_all(receives);
    EXPECT_EQ(s.size(), kMessages);
  });
  for (PendingWork& work : sent) EXPECT_TRUE(work.wait().ok());
  for (std::size_t i = 0; i < kMessages; ++i) {
    EXPECT_TRUE(same_bytes(a_bytes(i * 64, 48), b_bytes(i * 64, 48))) << i;
  }
  EXPECT_TRUE(b->state().usable());
}

TEST_F(ChannelScoped, FailedCompletionAndThrowingBodyIsABatchErrorCarryingTheBodysException) {
  try {
    a->scope([&](ChannelScope& s) {
      s.post(ibv::op::Write{gather_a(0, 64), wrong_rkey_b(0, 64)});
      throw BodyFailure("the body gave up");
    });
    ADD_FAILURE() << "the scope returned";
  } catch (const BatchError& error) {
    EXPECT_TRUE(error.body_failed());
    ASSERT_EQ(error.failed_completions().size(), 1U) << error.what();
    EXPECT_EQ(error.failed_completions()[0].status(), WorkStatus::remote_access_error);
    EXPECT_THAT(error.what(), ::testing::HasSubstr("the body threw: the body gave up"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr("remote_access_error"));
    ASSERT_NE(error.body_exception(), nullptr);
    try {
      std::rethrow_exception(error.body_exception());
    } catch (const BodyFailure& body) {
      EXPECT_STREQ(body.what(), "the body gave up");
    } catch (...) {
      ADD_FAILURE() << "body_exception() is not the body's BodyFailure";
    }
  }
}

// A failure the body awaited itself is the body's business: wait() throws WorkError there.
TEST_F(ChannelScoped, FailureTheBodyAwaitedIsThrownByWait) {
  const auto status = a->scope([&](ChannelScope& s) {
    auto& write = s.post(ibv::op::Write{gather_a(0, 64), wrong_rkey_b(0, 64)});
    try {
      (void)write.wait();
    } catch (const WorkError& error) {
      EXPECT_EQ(error.wr_id(), write.wr_id());
      return error.status();
    }
    return WorkStatus::success;
  });
  EXPECT_EQ(status, WorkStatus::remote_access_error);
}

// --- 4. many requests in flight, waited out of order ------------------------------------------

TEST_F(ChannelOutstanding, SixtyFourRequestsWaitedOutOfOrderEachGetTheirOwnCompletion) {
  constexpr std::size_t kCount = 64;
  constexpr std::size_t kSlot = 512;
  QueuePairSettings settings = default_settings();
  settings.max_send_wr = QueueDepth(kCount);
  settings.max_recv_wr = QueueDepth(kCount);
  connect(settings);
  // Message i: 200 + i bytes of pattern i from slot i of A into slot i of B.
  const auto length = [](std::size_t i) { return 200 + i; };
  for (std::size_t i = 0; i < kCount; ++i) {
    fill_pattern(a_bytes(i * kSlot, length(i)), static_cast<unsigned>(100 + i));
  }
  std::vector<PendingWork> receives;
  std::vector<PendingWork> sends;
  receives.reserve(kCount);
  sends.reserve(kCount);
  for (std::size_t i = 0; i < kCount; ++i) {
    receives.push_back(b->post_receive(scatter_b(i * kSlot, kSlot)));
  }
  for (std::size_t i = 0; i < kCount; ++i) {
    sends.push_back(a->post_send(gather_a(i * kSlot, length(i))));
  }
  std::set<std::uint64_t> handle_ids;
  for (const auto& work : receives) handle_ids.insert(work.wr_id());
  EXPECT_EQ(handle_ids.size(), kCount);

  // Receives complete in posting order; wait for the last-posted first.
  std::set<std::uint64_t> receive_ids;
  for (std::size_t i = kCount; i-- > 0;) {
    SCOPED_TRACE("receive " + std::to_string(i));
    const auto got = receives[i].wait();
    EXPECT_EQ(got.wr_id(), receives[i].wr_id());
    EXPECT_EQ(got.opcode(), WorkOpcode::receive);
    EXPECT_EQ(got.byte_length(), length(i));
    EXPECT_TRUE(same_bytes(a_bytes(i * kSlot, length(i)), b_bytes(i * kSlot, length(i))));
    EXPECT_TRUE(all_zero(b_bytes(i * kSlot + length(i), kSlot - length(i))));
    receive_ids.insert(got.wr_id());
  }
  EXPECT_EQ(receive_ids, handle_ids);

  // Sends in a shuffled order.
  std::vector<std::size_t> order(kCount);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(2024));
  std::set<std::uint64_t> send_ids;
  for (const auto i : order) {
    SCOPED_TRACE("send " + std::to_string(i));
    const auto done = sends[i].wait();
    EXPECT_EQ(done.wr_id(), sends[i].wr_id());
    EXPECT_EQ(done.opcode(), WorkOpcode::send);
    send_ids.insert(done.wr_id());
  }
  EXPECT_EQ(send_ids.size(), kCount);

  // Nothing left over: the next request on each channel gets its own completion.
  fill_pattern(a_bytes(kCount * kSlot, 64), 7);
  auto next_receive = b->post_receive(scatter_b(kCount * kSlot, 64));
  auto next_send = a->post_send(gather_a(kCount * kSlot, 64));
  EXPECT_EQ(next_send.wait().wr_id(), next_send.wr_id());
  const auto next = next_receive.wait();
  EXPECT_EQ(next.wr_id(), next_receive.wr_id());
  EXPECT_EQ(next.byte_length(), 64U);
  EXPECT_TRUE(same_bytes(a_bytes(kCount * kSlot, 64), b_bytes(kCount * kSlot, 64)));
}

// --- 5. PendingWork dropped unpolled ----------------------------------------------------------

TEST_F(ChannelPendingWork, DestroyedUnpolledWaitsForItsCompletion) {
  ::testing::internal::CaptureStderr();
  fill_pattern(a_bytes(0, 40000), 17);
  std::uint64_t dropped_write = 0;
  {
    auto write = a->post_write(gather_a(0, 32768), remote_b(0, 32768));
    dropped_write = write.wr_id();
  }  // the destructor waits for the write
  EXPECT_TRUE(same_bytes(a_bytes(0, 32768), b_bytes(0, 32768)));

  // A receive dropped unpolled waits for its message.
  auto send = a->post_send(gather_a(32768, 4000));
  { auto receive = b->post_receive(scatter_b(40000, 4096)); }
  EXPECT_TRUE(same_bytes(a_bytes(32768, 4000), b_bytes(40000, 4000)));
  EXPECT_TRUE(send.wait().ok());

  // Move assignment settles the request the handle had before taking the other one.
  fill_pattern(a_bytes(50000, 2000), 18);
  auto work = a->post_write(gather_a(50000, 1000), remote_b(50000, 1000));
  const std::uint64_t first = work.wr_id();
  work = a->post_write(gather_a(51000, 1000), remote_b(51000, 1000));
  EXPECT_TRUE(same_bytes(a_bytes(50000, 1000), b_bytes(50000, 1000)));
  EXPECT_NE(work.wr_id(), first);
  EXPECT_EQ(work.wait().wr_id(), work.wr_id());
  EXPECT_TRUE(same_bytes(a_bytes(51000, 1000), b_bytes(51000, 1000)));

  // Later requests get their own completions; nothing of the dropped ones comes back.
  auto next = a->post_write(gather_a(52000, 500), remote_b(52000, 500));
  const auto next_done = next.wait();
  EXPECT_EQ(next_done.wr_id(), next.wr_id());
  EXPECT_NE(next_done.wr_id(), dropped_write);
  const auto blocking = a->read(scatter_a(60000, 500), remote_b(52000, 500));
  EXPECT_NE(blocking.wr_id(), dropped_write);
  EXPECT_NE(blocking.wr_id(), next_done.wr_id());
  EXPECT_TRUE(same_bytes(a_bytes(52000, 500), a_bytes(60000, 500)));
  // Nothing logged: no failure, no timeout, no completion for an unknown (or handed-out) wr_id.
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST_F(ChannelPendingWork, AHandleKeepsItsChannelAlive) {
  fill_pattern(a_bytes(0, 4096), 45);
  auto write = a->post_write(gather_a(0, 4096), remote_b(0, 4096));
  std::optional<PendingWork> moved(std::move(write));
  a.reset();
  EXPECT_TRUE(moved->wait().ok());
  EXPECT_TRUE(same_bytes(a_bytes(0, 4096), b_bytes(0, 4096)));
}

TEST_F(ChannelPendingWork, DestroyedUnpolledFailureIsLoggedNotThrown) {
  ::testing::internal::CaptureStderr();
  { auto write = a->post_write(gather_a(0, 64), wrong_rkey_b(0, 64)); }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, ::testing::HasSubstr("remote_access_error"));
}

// --- 6. giving up: a request that times out is cancelled ------------------------------------

/// A canary byte that no test pattern and no zeroed buffer holds.
constexpr std::byte kCanary{0xC5};

bool all_canary(std::span<const std::byte> bytes) {
  return std::ranges::all_of(bytes, [](std::byte b) { return b == kCanary; });
}

// A blocking receive that times out is cancelled before it throws: a message sent afterwards
// never lands in its buffer (whose canary stays whole), the request's slot is gone, and the
// channel refuses further work with a state error naming the timeout that broke it.
TEST_F(ChannelGivingUp, ATimedOutReceiveIsCancelledAndALateMessageNeverLandsInItsBuffer) {
  connect(default_settings(), ChannelTimeouts{.operation = 5s, .drop = 1s});
  std::ranges::fill(b_bytes(0, 4096), kCanary);
  const auto start = Clock::now();
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::timeout,
                                     [&] { (void)b->receive(scatter_b(0, 4096), 200ms); },
                                     {"Channel::receive", "200 ms", "cancelled"}));
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, 200ms);
  EXPECT_LT(elapsed, 5s);  // not a performance bound: it did not hang
  EXPECT_EQ(b->queue_pair().query_state(), "ERR");

  // The peer sends late: b's queue pair is in the error state and takes nothing. a's send
  // fails (retries exhausted) or is still retrying when we stop waiting; either way, not ok.
  fill_pattern(a_bytes(0, 1000), 21);
  {
    PendingWork late = a->post_send(gather_a(0, 1000));
    try {
      const auto done = late.wait_for(1s);
      EXPECT_FALSE(done.has_value() && done->ok()) << "the late send reached a cancelled receive";
    } catch (const WorkError& error) {
      EXPECT_NE(error.completion().status(), WorkStatus::success);
    }
  }
  EXPECT_TRUE(all_canary(b_bytes(0, 4096)));

  // Every kind of post on b is refused, naming what broke the channel; nothing is posted.
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state,
                                     [&] { (void)b->write(gather_b(8192, 64), remote_a(0, 64)); },
                                     {"Channel::post", "cancelled", "receive wr_id", "200 ms"}));
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::state, [&] { (void)b->post_receive(scatter_b(0, 64)); }, {"cancelled"}));
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::state,
      [&] { b->scope([&](ChannelScope& s) { s.post(ibv::op::Send{gather_b(0, 8)}); }); },
      {"cancelled"}));
}

// The other requests in flight on a channel that gives up are flushed: their handles get a
// work_request_flushed completion, and the device is done with their buffers too.
TEST_F(ChannelGivingUp, OtherRequestsInFlightAreFlushed) {
  std::ranges::fill(b_bytes(0, 8192), kCanary);
  PendingWork first = b->post_receive(scatter_b(0, 4096));
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::timeout,
                                     [&] { (void)b->receive(scatter_b(4096, 4096), 100ms); },
                                     {"Channel::receive"}));
  const auto flushed = first.poll();  // taken in by the cancel: no waiting
  ASSERT_TRUE(flushed.has_value());
  EXPECT_EQ(flushed->status(), WorkStatus::work_request_flushed) << flushed->to_string();
  EXPECT_TRUE(all_canary(b_bytes(0, 8192)));
}

// A scope whose receive never gets a message: the scope cancels it at its exit, then throws
// BatchError (timeout) naming it; a late message does not land in the buffer.
TEST_F(ChannelGivingUp, AScopeWhoseReceiveTimesOutCancelsItBeforeItThrows) {
  connect(default_settings(), ChannelTimeouts{.operation = 300ms, .drop = 1s});
  std::ranges::fill(b_bytes(0, 1024), kCanary);
  std::uint64_t receive_id = 0;
  const auto start = Clock::now();
  try {
    b->scope([&](ChannelScope& s) {
      receive_id = s.post(ibv::op::Receive{scatter_b(0, 1024)}).wr_id();
    });
    ADD_FAILURE() << "the scope returned";
  } catch (const BatchError& error) {
    EXPECT_EQ(error.kind(), ErrorKind::timeout);
    EXPECT_FALSE(error.body_failed());
    EXPECT_TRUE(error.failed_completions().empty());
    EXPECT_EQ(error.timed_out(), std::vector<std::uint64_t>{receive_id});
    EXPECT_THAT(error.what(), ::testing::HasSubstr("cancelled"));
  }
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_EQ(b->queue_pair().query_state(), "ERR");
  fill_pattern(a_bytes(0, 512), 23);
  {
    PendingWork late = a->post_send(gather_a(0, 512));
    try {
      (void)late.wait_for(1s);
    } catch (const WorkError&) {
      // retries exhausted: the peer's queue pair takes nothing
    }
  }
  EXPECT_TRUE(all_canary(b_bytes(0, 1024)));
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state,
                                     [&] { (void)b->post_receive(scatter_b(0, 64)); },
                                     {"a scope's request", "300 ms"}));
}

// A PendingWork dropped while its receive is still in flight: after the drop timeout its
// destructor cancels, and the device no longer touches the buffer.
TEST_F(ChannelGivingUp, APendingWorkDroppedInFlightIsCancelledByItsDestructor) {
  connect(default_settings(), ChannelTimeouts{.operation = 5s, .drop = 200ms});
  std::ranges::fill(b_bytes(0, 512), kCanary);
  testing::internal::CaptureStderr();
  { PendingWork dropped = b->post_receive(scatter_b(0, 512)); }
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("cancelled"), std::string::npos) << log;
  EXPECT_EQ(b->queue_pair().query_state(), "ERR");
  {
    PendingWork late = a->post_send(gather_a(0, 256));
    try {
      (void)late.wait_for(1s);
    } catch (const WorkError&) {
      // retries exhausted
    }
  }
  EXPECT_TRUE(all_canary(b_bytes(0, 512)));
}

// --- 7. one memory region shared by two channels ----------------------------------------------

TEST_F(ChannelSharedMemoryRegion, BothChannelsUseElementsAndRemoteRegionsOfOneRegion) {
  std::vector<std::byte> memory(kSize);
  const MemoryRegion shared = pd.register_remote_accessible(memory, RemoteAccess::all());
  EXPECT_TRUE(a->protection_domain() == pd);
  EXPECT_TRUE(b->protection_domain() == pd);
  constexpr std::size_t kQuarter = kSize / 4;
  const auto quarter = [&](std::size_t n) {
    return std::span(memory).subspan(n * kQuarter, kQuarter);
  };
  const auto gather = [&](std::size_t n) {
    return std::array{shared.gather(std::span<const std::byte>(quarter(n)))};
  };
  const auto scatter = [&](std::size_t n) { return std::array{shared.scatter(quarter(n))}; };
  const auto remote = [&](std::size_t n) {
    return shared.remote().sub_region(n * kQuarter, kQuarter);
  };

  fill_pattern(quarter(0), 25);
  // A sends quarter 0 into B's receive in quarter 1.
  auto receive = b->post_receive(scatter(1));
  EXPECT_TRUE(a->send(gather(0)).ok());
  EXPECT_EQ(receive.wait().byte_length(), kQuarter);
  EXPECT_TRUE(same_bytes(quarter(0), quarter(1)));
  // B writes quarter 1 into quarter 2 through the region's remote form; A reads it into 3.
  EXPECT_TRUE(b->write(gather(1), remote(2)).ok());
  EXPECT_TRUE(same_bytes(quarter(0), quarter(2)));
  EXPECT_TRUE(a->read(scatter(3), remote(2)).ok());
  EXPECT_TRUE(same_bytes(quarter(0), quarter(3)));
  // Both channels in scopes at once on the same region.
  fill_pattern(quarter(0), 26);
  b->scope([&](ChannelScope& sb) {
    sb.post(ibv::op::Write{gather(0), remote(1)});
    a->scope([&](ChannelScope& sa) { sa.post(ibv::op::Write{gather(0), remote(3)}); });
  });
  EXPECT_TRUE(same_bytes(quarter(0), quarter(1)));
  EXPECT_TRUE(same_bytes(quarter(0), quarter(3)));
}

// --- 8. RNR -----------------------------------------------------------------------------------

TEST_F(ChannelRnr, SendWithoutAReceiveFailsWithRnrRetryExceeded) {
  QueuePairSettings settings;
  settings.rnr_retry = RnrRetryCount(1);
  settings.min_rnr_timer = RnrTimer::at_least(std::chrono::microseconds(1000));
  connect(settings);
  fill_pattern(a_bytes(0, 128), 27);
  const auto start = Clock::now();
  try {
    (void)a->send(gather_a(0, 128));
    ADD_FAILURE() << "a send with no receive posted succeeded";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::rnr_retry_exceeded) << error.what();
    EXPECT_EQ(error.kind(), ErrorKind::receiver_not_ready) << error.what();
  } catch (const Error& error) {
    ADD_FAILURE() << "not a WorkError: " << error.what();
  }
  EXPECT_LT(Clock::now() - start, 10s);  // it failed instead of hanging
  EXPECT_TRUE(all_zero(b_bytes(0, kSize)));
}

// --- 9. moved-from handles, wait_for and wait timeouts ----------------------------------------

TEST_F(ChannelPendingWork, WaitOnAMovedFromHandleIsAStateError) {
  fill_pattern(a_bytes(0, 256), 28);
  auto write = a->post_write(gather_a(0, 256), remote_b(0, 256));
  PendingWork moved = std::move(write);
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::state, [&] { (void)write.wait(); },  // NOLINT(bugprone-use-after-move)
      {"moved from"}));
  EXPECT_EQ(moved.wait().wr_id(), moved.wr_id());
  EXPECT_TRUE(same_bytes(a_bytes(0, 256), b_bytes(0, 256)));
}

// The same, for a handle moved from after it saw its completion: the completion now belongs to
// the handle it moved to, so it must not be handed out by both.
TEST_F(ChannelPendingWork, WaitOnAHandleMovedFromAfterItCompletedIsAStateError) {
  auto write = a->post_write(gather_a(0, 256), remote_b(0, 256));
  const auto done = write.wait();
  PendingWork moved = std::move(write);
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::state, [&] { (void)write.wait(); },  // NOLINT(bugprone-use-after-move)
      {"moved from"}));
  EXPECT_EQ(moved.wait().wr_id(), done.wr_id());
}

TEST_F(ChannelPendingWork, WaitForReturnsNothingUntilThePeerSends) {
  auto receive = b->post_receive(scatter_b(0, 1024));
  const auto start = Clock::now();
  EXPECT_FALSE(receive.wait_for(100ms).has_value());
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, 100ms);
  EXPECT_LT(elapsed, 5s);
  EXPECT_FALSE(receive.poll().has_value());
  EXPECT_FALSE(receive.is_complete());

  fill_pattern(a_bytes(0, 512), 29);
  EXPECT_TRUE(a->send(gather_a(0, 512)).ok());
  const auto got = receive.wait_for(5s);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->wr_id(), receive.wr_id());
  EXPECT_EQ(got->byte_length(), 512U);
  EXPECT_TRUE(receive.is_complete());
  EXPECT_TRUE(same_bytes(a_bytes(0, 512), b_bytes(0, 512)));
}

// wait() that runs out of the channel's operation timeout leaves the request pending.
TEST_F(ChannelPendingWork, WaitThatTimesOutLeavesTheRequestPending) {
  connect(default_settings(), ChannelTimeouts{.operation = 300ms, .drop = 300ms});
  auto receive = b->post_receive(scatter_b(0, 1024));
  const auto start = Clock::now();
  EXPECT_TRUE(
      ibv_test::throws_error(ErrorKind::timeout, [&] { (void)receive.wait(); }, {"300 ms"}));
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_FALSE(receive.is_complete());
  fill_pattern(a_bytes(0, 800), 30);
  EXPECT_TRUE(a->send(gather_a(0, 800)).ok());
  const auto got = receive.wait();
  EXPECT_EQ(got.wr_id(), receive.wr_id());
  EXPECT_EQ(got.byte_length(), 800U);
  EXPECT_TRUE(same_bytes(a_bytes(0, 800), b_bytes(0, 800)));
}

// --- unsignaled and inline posting --------------------------------------------------------------

using ChannelUnsignaled = ChannelTest;

TEST_F(ChannelUnsignaled, UnsignaledRequestsCompleteWhenALaterSignaledOneDoes) {
  fill_pattern(a_bytes(0, 5120), 21);
  std::vector<PendingWork> unsignaled;
  for (std::size_t i = 0; i < 10; ++i) {
    unsignaled.push_back(
        a->post_write(gather_a(i * 512, 512), remote_b(i * 512, 512), {.signaled = false}));
  }
  const auto last = a->write(gather_a(0, 1), remote_b(kSize - 1, 1));  // signaled, blocking
  EXPECT_TRUE(last.ok());
  for (auto& work : unsignaled) {
    const auto completion = work.poll();  // retired by the signaled write: no waiting
    ASSERT_TRUE(completion.has_value()) << "wr_id " << work.wr_id();
    EXPECT_TRUE(completion->ok()) << completion->to_string();
    EXPECT_EQ(completion->opcode(), WorkOpcode::rdma_write);
    EXPECT_EQ(completion->wr_id(), work.wr_id());
  }
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 5120), b_bytes(0, 5120)));
}

TEST_F(ChannelUnsignaled, WaitingOnTheLastUnsignaledRequestFindsOutWithoutHelp) {
  fill_pattern(a_bytes(0, 768), 22);
  PendingWork first = a->post_write(gather_a(0, 256), remote_b(0, 256), {.signaled = false});
  PendingWork second = a->post_write(gather_a(256, 256), remote_b(256, 256), {.signaled = false});
  PendingWork third = a->post_write(gather_a(512, 256), remote_b(512, 256), {.signaled = false});
  // Nothing signaled follows: the channel posts a zero-length signaled write to learn of it.
  EXPECT_TRUE(third.wait().ok());
  EXPECT_TRUE(first.poll().has_value());
  EXPECT_TRUE(second.poll().has_value());
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 768), b_bytes(0, 768)));
  // The channel's own marker leaves nothing behind: the next request gets its own completion.
  const auto next = a->write(gather_a(0, 8), remote_b(4096, 8));
  EXPECT_EQ(next.opcode(), WorkOpcode::rdma_write);
}

TEST_F(ChannelUnsignaled, ManyUnsignaledRequestsNeverOverflowTheSendQueue) {
  QueuePairSettings settings = default_settings();
  settings.max_send_wr = QueueDepth(8);
  connect(settings);
  constexpr std::size_t kCount = 200;  // 25 times the send queue
  fill_pattern(a_bytes(0, kCount * 64), 23);
  a->scope([&](ChannelScope& scope) {
    for (std::size_t i = 0; i < kCount; ++i) {
      scope.post(ibv::op::Write{gather_a(i * 64, 64), remote_b(i * 64, 64)}, {.signaled = false});
    }
  });
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, kCount * 64), b_bytes(0, kCount * 64)));
}

TEST_F(ChannelUnsignaled, WaitingOnTheLastOfAFullSendQueueMakesRoomFirst) {
  // max_send_wr 9: the channel signals requests 4 and 8 by itself; the 9th, unsignaled, fills
  // the queue, and learning of it needs a zero-length write that only fits once polled room.
  QueuePairSettings settings = default_settings();
  settings.max_send_wr = QueueDepth(9);
  connect(settings);
  fill_pattern(a_bytes(0, 9 * std::size_t{64}), 28);
  std::vector<PendingWork> work;
  for (std::size_t i = 0; i < 9; ++i) {
    work.push_back(a->post_write(gather_a(i * 64, 64), remote_b(i * 64, 64), {.signaled = false}));
  }
  EXPECT_TRUE(work.back().wait().ok());
  for (auto& w : work) EXPECT_TRUE(w.poll().has_value()) << "wr_id " << w.wr_id();
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 576), b_bytes(0, 576)));
}

TEST_F(ChannelUnsignaled, AFailedUnsignaledRequestReportsItselfAndTheRestAreFlushed) {
  PendingWork bad = a->post_write(gather_a(0, 64), wrong_rkey_b(0, 64), {.signaled = false});
  PendingWork after = a->post_write(gather_a(0, 64), remote_b(0, 64), {.signaled = false});
  PendingWork last = a->post_write(gather_a(0, 64), remote_b(64, 64));
  auto status_of = [](PendingWork& work) {
    try {
      work.wait();
      return WorkStatus::success;
    } catch (const WorkError& error) {
      return error.status();
    }
  };
  EXPECT_EQ(status_of(bad), WorkStatus::remote_access_error);
  EXPECT_EQ(status_of(after), WorkStatus::work_request_flushed);
  EXPECT_EQ(status_of(last), WorkStatus::work_request_flushed);
}

// A blocking call's request is tracked only when its first poll misses it (ChannelCore::
// take_first); its completion still retires the unsignaled requests before it, and a failure
// before it still flushes it.
TEST_F(ChannelUnsignaled, ABlockingRequestRetiresTheUnsignaledOnesBeforeIt) {
  fill_pattern(a_bytes(0, 1024), 29);
  PendingWork first = a->post_write(gather_a(0, 256), remote_b(0, 256), {.signaled = false});
  PendingWork second = a->post_write(gather_a(256, 256), remote_b(256, 256), {.signaled = false});
  EXPECT_EQ(a->write(gather_a(512, 512), remote_b(512, 512)).opcode(), WorkOpcode::rdma_write);
  EXPECT_TRUE(first.poll().has_value());
  EXPECT_TRUE(second.poll().has_value());
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 1024), b_bytes(0, 1024)));
  // 32 KiB: not complete by the first poll, so tracked from there, and waited for as before.
  fill_pattern(a_bytes(0, 32768), 30);
  PendingWork third = a->post_write(gather_a(0, 256), remote_b(32768, 256), {.signaled = false});
  const auto large = a->write(gather_a(0, 32768), remote_b(0, 32768));
  EXPECT_EQ(large.wr_id(), third.wr_id() + 1);
  EXPECT_TRUE(third.poll().has_value());
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 32768), b_bytes(0, 32768)));
  EXPECT_EQ(a->write(gather_a(0, 8), remote_b(40000, 8)).opcode(), WorkOpcode::rdma_write);
}

TEST_F(ChannelUnsignaled, ABlockingRequestAfterAFailedUnsignaledOneIsFlushed) {
  PendingWork bad = a->post_write(gather_a(0, 64), wrong_rkey_b(0, 64), {.signaled = false});
  try {
    (void)a->write(gather_a(0, 64), remote_b(64, 64));
    ADD_FAILURE() << "the write after a failed request completed";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::work_request_flushed);
  }
  try {
    (void)bad.wait();
    ADD_FAILURE() << "the failed request reported success";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::remote_access_error);
  }
}

TEST_F(ChannelUnsignaled, InlineSendsCarryTheirData) {
  QueuePairSettings settings = default_settings();
  settings.max_inline_data = InlineSize(64);
  connect(settings);
  fill_pattern(a_bytes(0, 64), 24);
  PendingWork receive = b->post_receive(scatter_b(0, 64));
  PendingWork send = a->post_send(gather_a(0, 64), {.inline_data = InlinePolicy::always});
  EXPECT_TRUE(send.wait().ok());
  EXPECT_EQ(receive.wait().byte_length(), 64U);
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 64), b_bytes(0, 64)));
}

// --- manual scope
// ---------------------------------------------------------------------------------

using ChannelManualScope = ChannelTest;

TEST_F(ChannelManualScope, ClosesQuietlyWhenEverythingWasWaitedFor) {
  fill_pattern(a_bytes(0, 128), 25);
  ManualScope scope = b->manual_scope();
  PendingWork& receive = scope.post(ibv::op::Receive{scatter_b(0, 128)});
  ManualScope sender = a->manual_scope();
  EXPECT_TRUE(sender.post(ibv::op::Send{gather_a(0, 128)}).wait().ok());
  EXPECT_EQ(receive.wait().byte_length(), 128U);
  EXPECT_NO_THROW(scope.close());
  EXPECT_NO_THROW(sender.close());
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 128), b_bytes(0, 128)));
}

TEST_F(ChannelManualScope, AHandleMovedOutIsNotLeftUnpolled) {
  fill_pattern(a_bytes(0, 128), 27);
  ManualScope scope = a->manual_scope();
  PendingWork taken = std::move(scope.post(ibv::op::Write{gather_a(0, 128), remote_b(0, 128)}));
  EXPECT_NO_THROW(scope.close());
  EXPECT_TRUE(taken.wait().ok());
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 128), b_bytes(0, 128)));
}

TEST_F(ChannelManualScope, CloseNamesTheRequestsLeftUnpolledAfterWaitingForThem) {
  fill_pattern(a_bytes(0, 128), 26);
  ManualScope scope = a->manual_scope();
  const PendingWork& forgotten = scope.post(ibv::op::Write{gather_a(0, 128), remote_b(0, 128)});
  const std::uint64_t id = forgotten.wr_id();
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::state, [&] { scope.close(); },
                                     {"left unpolled", std::to_string(id)}));
  // close() waited for it: the data is there.
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 128), b_bytes(0, 128)));
}

TEST_F(ChannelManualScope, DestroyedWithUnpolledWorkWaitsAndReportsABug) {
  fill_pattern(a_bytes(0, 128), 27);
  testing::internal::CaptureStderr();
  {
    ManualScope scope = a->manual_scope();
    scope.post(ibv::op::Write{gather_a(0, 128), remote_b(0, 128)});
  }
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("BUG"), std::string::npos) << log;
  EXPECT_NE(log.find("left unpolled"), std::string::npos) << log;
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, 128), b_bytes(0, 128)));
}

// --- the channel's slot ring: wr_ids wrap around it many times ------------------------------
// The channel tracks each request in a ring of slots (at least max_send_wr + max_recv_wr, a
// power of two: 8 here), indexed by wr_id. Requests that outlive a whole ring of later wr_ids
// (a receive whose message comes late, completions nobody has taken yet) must keep
// their own completion, delivered once.

class ChannelSlotRing : public ChannelTest {
 protected:
  static QueuePairSettings small_queues() {
    QueuePairSettings settings = default_settings();
    settings.max_send_wr = QueueDepth(4);
    settings.max_recv_wr = QueueDepth(4);
    return settings;
  }
};

TEST_F(ChannelSlotRing, WrIdsWrapAroundManyTimesAndEachRequestGetsItsOwnCompletion) {
  connect(small_queues());
  std::uint64_t last_id = 0;
  for (std::size_t i = 0; i < 100; ++i) {  // 4 requests an iteration: 50 times round the ring
    SCOPED_TRACE("iteration " + std::to_string(i));
    const std::size_t length = 1 + (i % 200);
    fill_pattern(a_bytes(0, length), static_cast<unsigned>(i));
    auto receive = b->post_receive(scatter_b(0, 4096));
    EXPECT_GT(receive.wr_id(), last_id);
    last_id = receive.wr_id();
    auto unsignaled =
        a->post_write(gather_a(0, length), remote_b(8192, length), {.signaled = false});
    EXPECT_TRUE(a->send(gather_a(0, length)).ok());
    const auto got = receive.wait();
    EXPECT_EQ(got.wr_id(), receive.wr_id());
    EXPECT_EQ(got.byte_length(), length);
    EXPECT_TRUE(same_bytes(a_bytes(0, length), b_bytes(0, length)));
    const auto retired = unsignaled.poll();  // retired by the signaled send after it
    ASSERT_TRUE(retired.has_value());
    EXPECT_EQ(retired->wr_id(), unsignaled.wr_id());
    EXPECT_TRUE(same_bytes(a_bytes(0, length), b_bytes(8192, length)));
    EXPECT_TRUE(b->write(gather_b(0, length), remote_a(16384, length)).ok());
  }
}

TEST_F(ChannelSlotRing, AReceivePostedLongBeforeItsMessageGetsItsOwnCompletion) {
  connect(small_queues());
  auto early = b->post_receive(scatter_b(0, 4096));
  // 60 requests on b while the receive waits: its slot comes round many times.
  fill_pattern(b_bytes(8192, 256), 30);
  for (std::size_t i = 0; i < 30; ++i) {
    EXPECT_TRUE(b->write(gather_b(8192, 256), remote_a(i * 256, 256)).ok());
    auto unsignaled =
        b->post_write(gather_b(8192, 256), remote_a(i * 256, 256), {.signaled = false});
    EXPECT_TRUE(unsignaled.wait().ok());  // needs the channel's own flush write
  }
  EXPECT_FALSE(early.poll().has_value());
  fill_pattern(a_bytes(16384, 333), 31);
  EXPECT_TRUE(a->send(gather_a(16384, 333)).ok());
  const auto got = early.wait();
  EXPECT_EQ(got.wr_id(), early.wr_id());
  EXPECT_EQ(got.opcode(), WorkOpcode::receive);
  EXPECT_EQ(got.byte_length(), 333U);
  EXPECT_TRUE(same_bytes(a_bytes(16384, 333), b_bytes(0, 333)));
  EXPECT_TRUE(same_bytes(b_bytes(8192, 256), a_bytes(std::size_t{29} * 256, 256)));
}

TEST_F(ChannelSlotRing, CompletionsLeftUntakenPastTheRingAreEachDeliveredOnce) {
  connect(small_queues());
  constexpr std::size_t kCount = 40;  // five rings' worth, held unpolled
  fill_pattern(a_bytes(0, kCount * 64), 35);
  std::vector<PendingWork> work;
  work.reserve(kCount);
  for (std::size_t i = 0; i < kCount; ++i) {
    work.push_back(
        a->post_write(gather_a(i * 64, 64), remote_b(i * 64, 64), {.signaled = i % 3 != 0}));
  }
  std::set<std::uint64_t> ids;
  for (std::size_t i = kCount; i-- > 0;) {  // newest first
    SCOPED_TRACE("request " + std::to_string(i));
    const auto completion = work[i].wait();
    EXPECT_EQ(completion.wr_id(), work[i].wr_id());
    EXPECT_EQ(completion.opcode(), WorkOpcode::rdma_write);
    EXPECT_TRUE(ids.insert(completion.wr_id()).second);
  }
  EXPECT_EQ(ids.size(), kCount);
  EXPECT_TRUE(std::ranges::equal(a_bytes(0, kCount * 64), b_bytes(0, kCount * 64)));
  // Nothing left over: the next request gets its own completion.
  auto next = a->post_write(gather_a(0, 8), remote_b(kSize - 8, 8));
  EXPECT_EQ(next.wait().wr_id(), next.wr_id());
}

// --- builder
// --------------------------------------------------------------------------------------

TEST_F(ChannelTest, CompletionQueueSmallerThanBothQueuesIsRejected) {
  QueuePairSettings settings;
  settings.max_send_wr = QueueDepth(16);
  settings.max_recv_wr = QueueDepth(16);
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::invalid_argument,
      [&] { (void)ChannelBuilder(pd).queue_pair(settings).completion_queue_size(31).build(); },
      {"completion_queue_size 31", "32"}));
  EXPECT_NO_THROW((void)ChannelBuilder(pd).queue_pair(settings).completion_queue_size(64).build());
}

}  // namespace
}  // namespace ibv::test
