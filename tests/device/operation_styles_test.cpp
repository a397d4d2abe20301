// SPDX-License-Identifier: MIT
// Device tests of the operations as values (ibv/channel/operation.hpp) in every style: each of the
// six operations through Channel::execute and post, a ChannelScope, MultiChannel::execute and
// post, a MultiChannelScope, and the coroutine async() on a Channel and on a MultiChannel, on a
// world of two ranks on the test device, data checked byte by byte; and an operation defined by
// the caller (a fenced write), which every style takes with no change to the library.
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/coro/async_channel.hpp"
#include "ibv/coro/async_multi_channel.hpp"
#include "ibv/coro/event_loop.hpp"
#include "ibv/coro/task.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

enum class Style {
  execute,
  post,
  scope,
  multi_execute,
  multi_post,
  multi_scope,
  coroutine,
  multi_coroutine,
};

std::string style_name(const ::testing::TestParamInfo<Style>& info) {
  switch (info.param) {
    case Style::execute: return "execute";
    case Style::post: return "post";
    case Style::scope: return "scope";
    case Style::multi_execute: return "multi_execute";
    case Style::multi_post: return "multi_post";
    case Style::multi_scope: return "multi_scope";
    case Style::coroutine: return "coroutine";
    case Style::multi_coroutine: return "multi_coroutine";
  }
  return "unknown";
}

/// Awaits `work` in a task and stores its completion (a parameter, so the coroutine frame owns
/// it: no lambda captures outliving their lambda).
Task<> await_into(AsyncWork work, std::optional<WorkCompletion>& done) { done = co_await work; }

/// A write with the fence flag: an operation the library does not define.
struct FencedWrite {
  std::span<const GatherElement> data;
  RemoteMemoryRegion destination;

  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    SendRequest request = SendRequest::write(wr_id, data, destination);
    request.fence();
    return request;
  }
};
static_assert(op::SendOperation<FencedWrite>);

/// `operation` as a MultiChannel takes it for `peer`: the peer form of an operation on the
/// peer's memory, its region tagged with `peer` (any other operation as it is).
template <op::Operation Operation>
auto for_peer(std::uint32_t peer, const Operation& operation) {
  if constexpr (std::same_as<Operation, op::Write>) {
    return op::PeerWrite{operation.data, {peer, operation.destination}, operation.immediate};
  } else if constexpr (std::same_as<Operation, op::Read>) {
    return op::PeerRead{operation.into, {peer, operation.source}};
  } else if constexpr (std::same_as<Operation, op::FetchAdd>) {
    return op::PeerFetchAdd{operation.result, {peer, operation.target}, operation.add};
  } else if constexpr (std::same_as<Operation, op::CompareSwap>) {
    return op::PeerCompareSwap{
        operation.result, {peer, operation.target}, operation.expected, operation.desired};
  } else {
    return operation;
  }
}

class OperationStyles : public ::testing::TestWithParam<Style> {
 protected:
  static constexpr std::size_t kSize = 4096;
  static constexpr ChannelTimeouts kTimeouts{.operation = 5s, .drop = 5s};

  OperationStyles() {
    QueuePairSettings settings;
    settings.rnr_retry = RnrRetryCount::infinite();  // sends may go out before the receive
    settings.gid_index = test_gid_index(context);
    world = connect_local_world(pd, 2, settings, kTimeouts);
  }

  /// Carries out `operation` from `rank` to its peer in the style under test and returns the
  /// completion (waited for in every style).
  template <op::Operation Operation>
  WorkCompletion run(std::uint32_t rank, const Operation& operation) {
    MultiChannel& self = world.at(rank);
    const std::uint32_t peer = 1 - rank;
    const auto peer_operation = for_peer(peer, operation);
    std::optional<WorkCompletion> done;
    switch (GetParam()) {
      case Style::execute: return self.channel(peer).execute(operation);
      case Style::post: return self.channel(peer).post(operation).wait();
      case Style::scope:
        self.channel(peer).scope([&](ChannelScope& scope) { done = scope.post(operation).wait(); });
        break;
      case Style::multi_execute: return self.execute(peer, peer_operation);
      case Style::multi_post: return self.post(peer, peer_operation).wait();
      case Style::multi_scope:
        self.scope(
            [&](MultiChannelScope& scope) { done = scope.post(peer, peer_operation).wait(); });
        break;
      case Style::coroutine:
      case Style::multi_coroutine: {
        EventLoop loop;
        loop.spawn(await_into(GetParam() == Style::coroutine ? async(self.channel(peer), operation)
                                                             : async(self, peer, peer_operation),
                              done));
        EXPECT_TRUE(loop.run(30s));
        break;
      }
    }
    if (!done) throw std::logic_error("the style under test gave no completion");
    return *done;
  }

  std::span<std::byte> bytes(std::uint32_t rank, std::size_t offset, std::size_t length) {
    return std::span(buffers.at(rank)).subspan(offset, length);
  }
  GatherElement gather(std::uint32_t rank, std::size_t offset, std::size_t length) {
    return regions.at(rank).gather(std::span<const std::byte>(bytes(rank, offset, length)));
  }
  ScatterElement scatter(std::uint32_t rank, std::size_t offset, std::size_t length) {
    return regions.at(rank).scatter(bytes(rank, offset, length));
  }
  RemoteMemoryRegion remote(std::uint32_t rank, std::size_t offset, std::size_t length) const {
    return regions.at(rank).remote().sub_region(offset, length);
  }
  static bool same(std::span<const std::byte> x, std::span<const std::byte> y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size()) == 0;
  }
  std::uint64_t word(std::uint32_t rank, std::size_t offset) {
    std::uint64_t value = 0;
    std::memcpy(&value, bytes(rank, offset, sizeof value).data(), sizeof value);
    return value;
  }
  void set_word(std::uint32_t rank, std::size_t offset, std::uint64_t value) {
    std::memcpy(bytes(rank, offset, sizeof value).data(), &value, sizeof value);
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::array<std::vector<std::byte>, 2> buffers{std::vector<std::byte>(kSize),
                                                std::vector<std::byte>(kSize)};
  std::array<MemoryRegion, 2> regions{
      pd.register_remote_accessible(buffers[0], RemoteAccess::all()),
      pd.register_remote_accessible(buffers[1], RemoteAccess::all())};
  std::vector<MultiChannel> world;
};

TEST_P(OperationStyles, SendWithAndWithoutImmediateIntoAPostedReceive) {
  fill_pattern(bytes(0, 0, 1000), 1);
  const std::array into{scatter(1, 0, 2048)};
  PendingWork receive = world[1].channel(0).post(op::Receive{into});
  const std::array data{gather(0, 0, 1000)};
  const WorkCompletion sent = run(0, op::Send{data});
  EXPECT_EQ(sent.opcode(), WorkOpcode::send);
  const WorkCompletion received = receive.wait();
  EXPECT_EQ(received.byte_length(), 1000U);
  EXPECT_FALSE(received.immediate().has_value());
  EXPECT_TRUE(same(bytes(0, 0, 1000), bytes(1, 0, 1000)));

  PendingWork second = world[1].channel(0).post(op::Receive{into});
  EXPECT_EQ(run(0, op::Send{data, 0xABCD0123U}).opcode(), WorkOpcode::send);
  EXPECT_EQ(second.wait().immediate(), 0xABCD0123U);
}

TEST_P(OperationStyles, ReceiveTakesAMessageSentBeforeItWasPosted) {
  fill_pattern(bytes(0, 0, 300), 2);
  const std::array data{gather(0, 0, 300)};
  PendingWork send = world[0].channel(1).post(op::Send{data, 7U});  // RNR-retried until posted
  const std::array into{scatter(1, 512, 300)};
  const WorkCompletion received = run(1, op::Receive{into});
  EXPECT_TRUE(received.is_receive());
  EXPECT_EQ(received.byte_length(), 300U);
  EXPECT_EQ(received.immediate(), 7U);
  EXPECT_TRUE(send.wait().ok());
  EXPECT_TRUE(same(bytes(0, 0, 300), bytes(1, 512, 300)));
}

TEST_P(OperationStyles, WriteWithAndWithoutImmediateAndRead) {
  fill_pattern(bytes(0, 0, 1500), 3);
  const std::array data{gather(0, 0, 1500)};
  EXPECT_EQ(run(0, op::Write{data, remote(1, 100, 1500)}).opcode(), WorkOpcode::rdma_write);
  EXPECT_TRUE(same(bytes(0, 0, 1500), bytes(1, 100, 1500)));

  const std::array nothing = std::array<ScatterElement, 0>{};
  PendingWork notified = world[1].channel(0).post(op::Receive{nothing});
  fill_pattern(bytes(0, 0, 64), 4);
  const std::array small{gather(0, 0, 64)};
  EXPECT_EQ(run(0, op::Write{small, remote(1, 2000, 64), 99U}).opcode(), WorkOpcode::rdma_write);
  EXPECT_EQ(notified.wait().immediate(), 99U);
  EXPECT_TRUE(same(bytes(0, 0, 64), bytes(1, 2000, 64)));

  fill_pattern(bytes(1, 3000, 700), 5);
  const std::array into{scatter(0, 3000, 700)};
  EXPECT_EQ(run(0, op::Read{into, remote(1, 3000, 700)}).opcode(), WorkOpcode::rdma_read);
  EXPECT_TRUE(same(bytes(0, 3000, 700), bytes(1, 3000, 700)));
}

TEST_P(OperationStyles, FetchAddAndCompareSwap) {
  set_word(1, 0, 40);
  const std::array result{scatter(0, 0, 8)};
  EXPECT_EQ(run(0, op::FetchAdd{result[0], remote(1, 0, 8), 2}).opcode(),
            WorkOpcode::fetch_and_add);
  EXPECT_EQ(word(0, 0), 40U);
  EXPECT_EQ(word(1, 0), 42U);

  EXPECT_EQ(run(0, op::CompareSwap{result[0], remote(1, 0, 8), 42, 7}).opcode(),
            WorkOpcode::compare_and_swap);
  EXPECT_EQ(word(0, 0), 42U);  // it was equal: swapped
  EXPECT_EQ(word(1, 0), 7U);
  run(0, op::CompareSwap{result[0], remote(1, 0, 8), 42, 9});
  EXPECT_EQ(word(0, 0), 7U);  // not equal: left alone
  EXPECT_EQ(word(1, 0), 7U);
}

TEST_P(OperationStyles, AnOperationOfTheCallersOwn) {
  fill_pattern(bytes(0, 0, 256), 6);
  const std::array data{gather(0, 0, 256)};
  EXPECT_EQ(run(0, FencedWrite{data, remote(1, 1024, 256)}).opcode(), WorkOpcode::rdma_write);
  EXPECT_TRUE(same(bytes(0, 0, 256), bytes(1, 1024, 256)));
}

TEST_P(OperationStyles, BadInputIsRefusedBeforeAnythingIsPosted) {
  const std::array data{gather(0, 0, 64)};
  try {
    run(0, op::Write{data, remote(1, 0, 32)});  // 64 bytes into a 32-byte region
    FAIL() << "a write longer than its destination was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument) << error.what();
  }
  // The channel is still usable.
  EXPECT_TRUE(run(0, op::Write{data, remote(1, 0, 64)}).ok());
}

INSTANTIATE_TEST_SUITE_P(EveryStyle, OperationStyles,
                         ::testing::Values(Style::execute, Style::post, Style::scope,
                                           Style::multi_execute, Style::multi_post,
                                           Style::multi_scope, Style::coroutine,
                                           Style::multi_coroutine),
                         style_name);

}  // namespace
}  // namespace ibv::test
