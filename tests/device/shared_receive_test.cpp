// SPDX-License-Identifier: MIT
// Device tests of shared receive queues, from the verbs layer up:
// - SharedReceiveQueue and SharedReceivePool sizes checked against the device's SRQ limits;
// - a queue pair built on a shared receive queue takes the queue's receive, and refuses one of
//   its own;
// - three channels on one shared receive queue: every message lands in a receive of the queue
//   and is handed out by the channel it arrived on, also when the channel's own sends are
//   polled in between;
// - a MultiChannel world of four ranks, rank 0 on one SharedReceivePool: messages from every
//   peer are attributed to it, in order per peer;
// - the limit: IBV_EVENT_SRQ_LIMIT_REACHED once fewer receives than the limit remain, then the
//   user refills and re-arms;
// - the pool keeps a stream going past its number of buffers, buffers coming back on release;
// - bad input: posting receives to a channel on a shared queue, a message longer than the
//   pool's buffers, shared calls on a channel without a shared queue;
// - teardown with receives still posted, in either order, and a message released after its
//   channel and pool handles are gone (the per-test resource check sees no leak).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/channel/received_message.hpp"
#include "ibv/channel/shared_receive_pool.hpp"
#include "ibv/verbs/async_event.hpp"
#include "ibv/verbs/shared_receive_queue.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;
using ibv_test::throws_error;
using ibv_test::throws_invalid_argument;

constexpr ChannelTimeouts kSrqTimeouts{.operation = 5s, .drop = 5s};

QueuePairSettings srq_test_settings(const Context& context) {
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  settings.max_send_wr = QueueDepth(16);
  settings.max_recv_wr = QueueDepth(16);
  return settings;
}

/// A sender channel (receive queue of its own) connected to a receiver channel `receiver`
/// builds (on a shared receive queue or pool).
std::pair<Channel, Channel> connect(const ProtectionDomain& pd, const ChannelBuilder& receiver) {
  auto prepared_sender =
      ChannelBuilder(pd).queue_pair(srq_test_settings(pd.context())).timeouts(kSrqTimeouts).build();
  auto prepared_receiver = receiver.build();
  const Endpoint sender_endpoint = prepared_sender.endpoint();
  const Endpoint receiver_endpoint = prepared_receiver.endpoint();
  Channel sender = std::move(prepared_sender).handshake(receiver_endpoint);
  Channel receiving = std::move(prepared_receiver).handshake(sender_endpoint);
  return {std::move(sender), std::move(receiving)};
}

ChannelBuilder receiver_builder(const ProtectionDomain& pd) {
  ChannelBuilder builder(pd);
  builder.queue_pair(srq_test_settings(pd.context())).timeouts(kSrqTimeouts);
  return builder;
}

/// The text of message `index` from `source`, padded to `size` bytes.
std::vector<std::byte> message_bytes(unsigned source, unsigned index, std::size_t size) {
  const std::string text = "from " + std::to_string(source) + " #" + std::to_string(index);
  std::vector<std::byte> bytes(size);
  fill_pattern(bytes, source * 100 + index);
  std::memcpy(bytes.data(), text.data(), std::min(text.size(), size));
  return bytes;
}

/// Sends `bytes` on `channel` (blocking) from a fresh registered copy.
void send_bytes(Channel& channel, const ProtectionDomain& pd, std::vector<std::byte> bytes) {
  const MemoryRegion mr = pd.register_local(bytes);
  const std::array data{mr.gather(std::span<const std::byte>(bytes))};
  channel.send(data);
}

/// The async events of `context` until one about `srq` (or `timeout`); the others are
/// returned in `others` by name.
std::optional<AsyncEvent> wait_for_srq_event(const Context& context, const SharedReceiveQueue& srq,
                                             std::chrono::milliseconds timeout,
                                             std::vector<std::string>& others) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   deadline - std::chrono::steady_clock::now()),
                               0ms);
    auto event = read_async_event(context, left);
    if (!event) return std::nullopt;
    if (event->concerns(srq)) return event;
    others.push_back(event->to_string());
  }
}

class SharedReceiveTest : public ::testing::Test {
 protected:
  Context context = open_test_device();
  ProtectionDomain pd{context};
  DeviceAttributes device = context.query_device();
};

TEST_F(SharedReceiveTest, SizesAreCheckedAgainstTheDevice) {
  RecordProperty("max_srq", device.max_srq);
  RecordProperty("max_srq_wr", device.max_srq_wr);
  RecordProperty("max_srq_sge", device.max_srq_sge);
  ASSERT_GT(device.max_srq, 0) << "rxe has shared receive queues";
  const auto too_deep = static_cast<std::uint32_t>(device.max_srq_wr) + 1;
  const auto too_wide = static_cast<std::uint32_t>(device.max_srq_sge) + 1;
  EXPECT_TRUE(throws_invalid_argument([&] { (void)SharedReceiveQueue(pd, QueueDepth(too_deep)); },
                                      {"max_wr " + std::to_string(too_deep), "max_srq_wr"}));
  EXPECT_TRUE(throws_invalid_argument(
      [&] { (void)SharedReceiveQueue(pd, QueueDepth(4), SgeCount(too_wide)); },
      {"max_sge " + std::to_string(too_wide), "max_srq_sge"}));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)SharedReceivePool(pd, too_deep, 64); },
                                      {"buffer_count", "max_srq_wr"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { (void)SharedReceivePool(pd, 0, 64); }, {"buffer_count"}));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)SharedReceivePool(pd, 4, 0); }, {"buffer_size"}));

  const SharedReceiveQueue srq(pd, QueueDepth(8), SgeCount(2));
  const auto attributes = srq.query();
  EXPECT_GE(attributes.max_wr, 8U);
  EXPECT_EQ(attributes.max_wr, srq.max_wr());
  EXPECT_GE(srq.max_sge(), 2U);
  EXPECT_EQ(attributes.limit, 0U);
  EXPECT_TRUE(throws_invalid_argument([&] { srq.arm_limit(0); }, {"limit 0"}));
  EXPECT_TRUE(throws_invalid_argument([&] { srq.arm_limit(srq.max_wr()); }, {"limit"}));
  srq.arm_limit(3);
  EXPECT_EQ(srq.query().limit, 3U);

  // More elements than the queue's max_sge: rejected before the device sees it.
  std::vector<std::byte> bytes(64);
  const MemoryRegion mr = pd.register_local(bytes);
  const auto wide = static_cast<std::size_t>(srq.max_sge()) + 1;
  std::vector<ScatterElement> elements(wide, mr.scatter(std::span(bytes).first(8)));
  EXPECT_TRUE(
      throws_invalid_argument([&] { srq.post_receive(7, elements); }, {"wr_id 7", "max_sge"}));
  // The top bit of a wr_id is the channels' tag: refused; the largest wr_id below it is taken.
  const std::array one{mr.scatter(std::span(bytes).first(8))};
  constexpr std::uint64_t kTagged = SharedReceiveQueue::kReservedWrIdBit;
  EXPECT_TRUE(throws_invalid_argument([&] { srq.post_receive(kTagged, one); },
                                      {"wr_id " + std::to_string(kTagged), "2^63"}));
  EXPECT_TRUE(
      throws_invalid_argument([&] { srq.post_receive(~std::uint64_t{0}, one); }, {"top bit"}));
  EXPECT_NO_THROW(srq.post_receive(kTagged - 1, one));
}

TEST_F(SharedReceiveTest, QueuePairTakesTheSharedReceiveAndRefusesItsOwn) {
  const SharedReceiveQueue srq(pd, QueueDepth(8));
  const CompletionQueue cq_a(context, 32);
  const CompletionQueue cq_b(context, 32);
  auto settings = srq_test_settings(context);
  auto prepared_a = QueuePairBuilder(pd, cq_a, cq_a).settings(settings).build();
  auto prepared_b =
      QueuePairBuilder(pd, cq_b, cq_b).settings(settings).shared_receive_queue(srq).build();
  const Endpoint endpoint_a = prepared_a.endpoint();
  const Endpoint endpoint_b = prepared_b.endpoint();
  QueuePair a = std::move(prepared_a).handshake(endpoint_b);
  QueuePair b = std::move(prepared_b).handshake(endpoint_a);
  const SharedReceiveQueue* attached = b.shared_receive_queue();
  EXPECT_TRUE(attached != nullptr && *attached == srq);
  EXPECT_EQ(a.shared_receive_queue(), nullptr);

  std::vector<std::byte> in(64);
  std::vector<std::byte> out = message_bytes(1, 1, 64);
  const MemoryRegion in_mr = pd.register_local(in);
  const MemoryRegion out_mr = pd.register_local(out);
  const std::array into{in_mr.scatter(std::span(in))};
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { b.post_receive(1, into); },
                           {"shared receive queue", "SharedReceiveQueue"}));
  srq.post_receive(42, into);
  a.post_send(5, std::array{out_mr.gather(std::span<const std::byte>(out))});
  EXPECT_TRUE(poll_one(cq_a).ok());
  const WorkCompletion received = poll_one(cq_b);
  ASSERT_TRUE(received.ok()) << received.to_string();
  EXPECT_EQ(received.wr_id(), 42U);
  EXPECT_EQ(received.qp_number(), b.qp_number());
  EXPECT_TRUE(same_bytes(out, in));
}

TEST_F(SharedReceiveTest, SeveralChannelsShareOneQueueAndEachHandsOutItsOwnMessages) {
  constexpr unsigned kChannels = 3;
  constexpr unsigned kPerChannel = 3;
  constexpr std::size_t kSlot = 128;
  const SharedReceiveQueue srq(pd, QueueDepth(kChannels * kPerChannel));
  std::vector<std::pair<Channel, Channel>> pairs;
  for (unsigned i = 0; i < kChannels; ++i) {
    pairs.push_back(connect(pd, receiver_builder(pd).shared_receive_queue(srq)));
  }
  // Receives of the queue: wr_id 1000 + slot (small wr_ids, as the channels' own would be
  // without their tag).
  std::vector<std::byte> slots(kSlot * kChannels * kPerChannel);
  const MemoryRegion slots_mr = pd.register_local(slots);
  for (unsigned slot = 0; slot < kChannels * kPerChannel; ++slot) {
    const std::array into{slots_mr.scatter(std::span(slots).subspan(slot * kSlot, kSlot))};
    srq.post_receive(1000 + slot, into);
  }
  // Channel i's messages arrive interleaved with the others'.
  for (unsigned m = 0; m < kPerChannel; ++m) {
    for (unsigned i = 0; i < kChannels; ++i) {
      send_bytes(pairs[i].first, pd, message_bytes(i, m, kSlot));
    }
  }
  // The first receiving channel also does work of its own (a send answered by the peer's own
  // receive) while its shared completions wait in its completion queue.
  {
    std::vector<std::byte> reply = message_bytes(9, 9, 32);
    std::vector<std::byte> reply_in(32);
    const MemoryRegion reply_mr = pd.register_local(reply);
    const MemoryRegion reply_in_mr = pd.register_local(reply_in);
    auto receive =
        pairs[0].first.post_receive(std::array{reply_in_mr.scatter(std::span(reply_in))});
    pairs[0].second.send(std::array{reply_mr.gather(std::span<const std::byte>(reply))});
    EXPECT_TRUE(receive.wait().ok());
    EXPECT_TRUE(same_bytes(reply, reply_in));
  }
  std::set<std::uint64_t> used;
  for (unsigned i = 0; i < kChannels; ++i) {
    for (unsigned m = 0; m < kPerChannel; ++m) {
      const WorkCompletion completion = pairs[i].second.receive_shared(5s);
      EXPECT_EQ(completion.qp_number(), pairs[i].second.queue_pair().qp_number());
      EXPECT_EQ(completion.byte_length(), kSlot);
      ASSERT_GE(completion.wr_id(), 1000U);
      ASSERT_LT(completion.wr_id(), 1000U + kChannels * kPerChannel);
      EXPECT_TRUE(used.insert(completion.wr_id()).second) << "wr_id handed out twice";
      const auto slot = completion.wr_id() - 1000;
      EXPECT_TRUE(
          same_bytes(message_bytes(i, m, kSlot), std::span(slots).subspan(slot * kSlot, kSlot)))
          << "channel " << i << " message " << m;
    }
    EXPECT_FALSE(pairs[i].second.poll_shared()) << "channel " << i << " has nothing more";
  }
  EXPECT_EQ(used.size(), std::size_t{kChannels} * kPerChannel);
}

/// A world of `world` MultiChannels in this process; rank 0's channels all take their
/// receives from `pool`, the other ranks have receive queues of their own.
std::vector<MultiChannel> local_world_with_pool(const ProtectionDomain& pd, std::uint32_t world,
                                                const SharedReceivePool& pool) {
  return connect_local_world(world, [&](std::uint32_t rank) {
    MultiChannelBuilder builder(pd, rank, world);
    builder.queue_pair(srq_test_settings(pd.context())).timeouts(kSrqTimeouts);
    if (rank == 0) builder.shared_receive_pool(pool);
    return builder;
  });
}

TEST_F(SharedReceiveTest, MultiChannelTakesMessagesFromEveryPeerThroughOnePool) {
  constexpr std::uint32_t kWorld = 4;
  constexpr unsigned kPerPeer = 3;
  constexpr std::uint32_t kSize = 96;
  const SharedReceivePool pool(pd, 16, kSize);
  auto world = local_world_with_pool(pd, kWorld, pool);
  for (unsigned m = 0; m < kPerPeer; ++m) {
    for (std::uint32_t peer = 1; peer < kWorld; ++peer) {
      auto bytes = message_bytes(peer, m, kSize);
      const MemoryRegion mr = pd.register_local(bytes);
      world[peer].execute(0,
                          ibv::op::Send{std::array{mr.gather(std::span<const std::byte>(bytes))}});
    }
  }
  std::vector<unsigned> next(kWorld, 0);
  std::vector<PeerMessage> held;
  for (unsigned n = 0; n < (kWorld - 1) * kPerPeer; ++n) {
    PeerMessage received = world[0].receive_message_any(5s);
    ASSERT_GE(received.peer, 1U);
    ASSERT_LT(received.peer, kWorld);
    EXPECT_EQ(world[0].peer_of(received.message.completion()), received.peer);
    EXPECT_TRUE(same_bytes(message_bytes(received.peer, next[received.peer], kSize),
                           received.message.data()))
        << "peer " << received.peer << " message " << next[received.peer];
    ++next[received.peer];
    held.push_back(std::move(received));
  }
  for (std::uint32_t peer = 1; peer < kWorld; ++peer) EXPECT_EQ(next[peer], kPerPeer);
  EXPECT_FALSE(world[0].poll_message_any());
  EXPECT_EQ(pool.posted(), 16U - (kWorld - 1) * kPerPeer);
  held.clear();  // every buffer goes back
  EXPECT_EQ(pool.posted(), 16U);
  // Rank 0 posts no receives of its own, but sends as usual.
  std::vector<std::byte> out = message_bytes(0, 0, 64);
  std::vector<std::byte> in(64);
  const MemoryRegion out_mr = pd.register_local(out);
  const MemoryRegion in_mr = pd.register_local(in);
  auto receive = world[2].post(0, ibv::op::Receive{std::array{in_mr.scatter(std::span(in))}});
  world[0].execute(2, ibv::op::Send{std::array{out_mr.gather(std::span<const std::byte>(out))}});
  EXPECT_TRUE(receive.wait().ok());
  EXPECT_TRUE(same_bytes(out, in));
}

TEST_F(SharedReceiveTest, LimitEventFiresWhenTheQueueDrainsBelowItThenTheUserRefills) {
  constexpr std::uint32_t kPosted = 8;
  constexpr std::uint32_t kLimit = 4;
  constexpr std::size_t kSlot = 64;
  const SharedReceiveQueue srq(pd, QueueDepth(16));
  auto pair = connect(pd, receiver_builder(pd).shared_receive_queue(srq));
  Channel& sender = pair.first;
  Channel& receiver = pair.second;
  std::vector<std::byte> slots(kSlot * 16);
  const MemoryRegion slots_mr = pd.register_local(slots);
  std::uint64_t next_wr_id = 0;
  auto refill = [&](std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i, ++next_wr_id) {
      const auto slot = next_wr_id % 16;
      srq.post_receive(next_wr_id,
                       std::array{slots_mr.scatter(std::span(slots).subspan(slot * kSlot, kSlot))});
    }
  };
  refill(kPosted);
  srq.arm_limit(kLimit);
  std::vector<std::string> others;
  // kPosted - kLimit messages leave exactly kLimit posted: not below the limit yet.
  for (unsigned m = 0; m < kPosted - kLimit; ++m)
    send_bytes(sender, pd, message_bytes(1, m, kSlot));
  EXPECT_FALSE(wait_for_srq_event(context, srq, 0ms, others))
      << "the limit event fired with " << kLimit << " receives still posted";
  EXPECT_EQ(srq.query().limit, kLimit);
  // One more: fewer than kLimit remain, the event fires once and the limit is disarmed.
  send_bytes(sender, pd, message_bytes(1, kPosted - kLimit, kSlot));
  const auto event = wait_for_srq_event(context, srq, 5000ms, others);
  ASSERT_TRUE(event) << "no SRQ limit event within 5 s";
  EXPECT_EQ(event->type, AsyncEventType::srq_limit_reached);
  EXPECT_EQ(to_string(event->type), "SRQ limit reached");
  EXPECT_EQ(srq.query().limit, 0U);
  RecordProperty("other_async_events", static_cast<int>(others.size()));
  // The user's refill: back to kPosted, re-armed; the stream goes on.
  refill(kPosted - (kLimit - 1));
  srq.arm_limit(kLimit);
  for (unsigned m = kPosted - kLimit + 1; m < kPosted; ++m) {
    send_bytes(sender, pd, message_bytes(1, m, kSlot));
  }
  for (unsigned m = 0; m < kPosted; ++m) {
    const WorkCompletion completion = receiver.receive_shared(5s);
    const auto slot = completion.wr_id() % 16;
    EXPECT_TRUE(
        same_bytes(message_bytes(1, m, kSlot), std::span(slots).subspan(slot * kSlot, kSlot)))
        << "message " << m;
  }
  EXPECT_FALSE(wait_for_srq_event(context, srq, 0ms, others)) << "re-armed limit not reached";
}

TEST_F(SharedReceiveTest, PoolKeepsAStreamGoingPastItsBuffers) {
  constexpr std::uint32_t kBuffers = 4;
  constexpr std::uint32_t kSize = 128;
  const SharedReceivePool pool(pd, kBuffers, kSize);
  auto pair = connect(pd, receiver_builder(pd).shared_receive_pool(pool));
  Channel& sender = pair.first;
  Channel& receiver = pair.second;
  ASSERT_NE(receiver.shared_receive_pool(), nullptr);
  unsigned sent = 0;
  unsigned received = 0;
  std::set<std::uint32_t> buffers_used;
  // Three rounds that take every buffer and hold it, then give them all back.
  for (unsigned round = 0; round < 3; ++round) {
    for (std::uint32_t i = 0; i < kBuffers; ++i) {
      send_bytes(sender, pd, message_bytes(2, sent++, kSize));
    }
    std::vector<ReceivedMessage> held;
    for (std::uint32_t i = 0; i < kBuffers; ++i) {
      held.push_back(receiver.receive_message(5s));
      EXPECT_TRUE(same_bytes(message_bytes(2, received++, kSize), held.back().data()));
      buffers_used.insert(held.back().buffer_index());
    }
    EXPECT_EQ(pool.posted(), 0U);
    for (auto& message : held) message.release();
    EXPECT_FALSE(held.front().holds_buffer());
    EXPECT_TRUE(held.front().data().empty());
    EXPECT_EQ(pool.posted(), kBuffers);
  }
  // Then one message at a time, each released by its destructor: 5 times the pool.
  for (unsigned i = 0; i < 5 * kBuffers; ++i) {
    send_bytes(sender, pd, message_bytes(2, sent++, kSize));
    const ReceivedMessage message = receiver.receive_message(5s);
    EXPECT_TRUE(same_bytes(message_bytes(2, received++, kSize), message.data()));
    EXPECT_EQ(message.completion().byte_length(), kSize);
  }
  EXPECT_EQ(received, 8 * kBuffers);
  EXPECT_EQ(buffers_used.size(), kBuffers);
  EXPECT_EQ(pool.posted(), kBuffers);
  RecordProperty("messages_through_pool", static_cast<int>(received));
}

TEST_F(SharedReceiveTest, BadInputIsRejectedClearly) {
  const SharedReceivePool pool(pd, 4, 64);
  auto pair = connect(pd, receiver_builder(pd).shared_receive_pool(pool));
  Channel& sender = pair.first;
  Channel& receiver = pair.second;
  std::vector<std::byte> bytes(256);
  const MemoryRegion mr = pd.register_local(bytes);
  const std::array into{mr.scatter(std::span(bytes).first(64))};
  // Receives of its own on a channel whose receives are shared: refused, nothing posted.
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { receiver.receive(into, 1s); },
                           {"shared receive queue", "receive_message"}));
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)receiver.post_receive(into); },
                           {"shared receive queue"}));
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { receiver.queue_pair().post_receive(3, into); },
                           {"shared receive queue"}));
  EXPECT_TRUE(throws_error(
      ErrorKind::state,
      [&] { receiver.scope([&](ChannelScope& s) { s.post(ibv::op::Receive{into}); }); },
      {"shared receive queue"}));
  // Shared calls on a channel without a shared queue.
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { sender.receive_shared(1s); },
                           {"no shared receive queue"}));
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)sender.receive_message(1s); },
                           {"shared_receive_pool"}));
  EXPECT_TRUE(throws_invalid_argument([&] { (void)receiver.receive_message(0s); }, {"timeout"}));
  EXPECT_EQ(pool.posted(), 4U);
  // A message longer than the pool's buffers: the receive fails naming the buffer size, and
  // the buffer is posted again.
  fill_pattern(bytes, 5);
  EXPECT_THROW(sender.send(std::array{mr.gather(std::span<const std::byte>(bytes))}, 5s),
               WorkError);
  try {
    (void)receiver.receive_message(5s);
    ADD_FAILURE() << "an oversized message was received";
  } catch (const WorkError& error) {
    // The verbs status is local_length_error; rxe reports local_qp_operation_error.
    EXPECT_TRUE(error.status() == WorkStatus::local_length_error ||
                error.status() == WorkStatus::local_qp_operation_error)
        << error.what();
    RecordProperty("oversized_receive_status", std::string(to_string(error.status())));
    EXPECT_NE(std::string(error.what()).find("buffer_size of 64"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(pool.posted(), 4U);
}

TEST_F(SharedReceiveTest, ChannelOnAPlainQueueUsesReceiveShared) {
  const SharedReceiveQueue srq(pd, QueueDepth(4));
  auto pair = connect(pd, receiver_builder(pd).shared_receive_queue(srq));
  Channel& sender = pair.first;
  Channel& receiver = pair.second;
  EXPECT_EQ(receiver.shared_receive_pool(), nullptr);
  EXPECT_TRUE(throws_error(ErrorKind::state, [&] { (void)receiver.receive_message(1s); },
                           {"not a SharedReceivePool", "receive_shared"}));
  EXPECT_TRUE(throws_error(ErrorKind::timeout, [&] { receiver.receive_shared(10ms); },
                           {"no message arrived"}));
  // An immediate-only message into a receive without buffer.
  srq.post_receive(77, {});
  sender.send_with_immediate({}, 0xabcU);
  const WorkCompletion completion = receiver.receive_shared(5s);
  EXPECT_EQ(completion.wr_id(), 77U);
  EXPECT_EQ(completion.immediate(), 0xabcU);
  EXPECT_EQ(completion.byte_length(), 0U);
}

TEST_F(SharedReceiveTest, TeardownWithReceivesPostedNeitherHangsNorLeaks) {
  std::optional<ReceivedMessage> survivor;
  {
    std::optional<SharedReceivePool> pool;
    pool.emplace(pd, 8, 64);
    auto pair = connect(pd, receiver_builder(pd).shared_receive_pool(*pool));
    send_bytes(pair.first, pd, message_bytes(3, 0, 64));
    survivor.emplace(pair.second.receive_message(5s));
    pool.reset();  // the channel (and the message) keep the pool alive
    send_bytes(pair.first, pd, message_bytes(3, 1, 64));
    const ReceivedMessage second = pair.second.receive_message(5s);
    EXPECT_TRUE(same_bytes(message_bytes(3, 1, 64), second.data()));
  }  // channels gone with 6 receives still posted; the message holds the pool
  EXPECT_TRUE(same_bytes(message_bytes(3, 0, 64), survivor->data()));
  survivor.reset();  // reposted into a queue no channel uses any more, then all destroyed
  {
    const SharedReceiveQueue srq(pd, QueueDepth(4));
    std::vector<std::byte> bytes(64);
    const MemoryRegion mr = pd.register_local(bytes);
    auto pair = connect(pd, receiver_builder(pd).shared_receive_queue(srq));
    srq.post_receive(1, std::array{mr.scatter(std::span(bytes))});
  }  // queue pairs, then the queue with its receive still posted
}

}  // namespace
}  // namespace ibv::test
