// SPDX-License-Identifier: MIT
// Shared set-up of the device tests: the device under test (from IBV_TEST_DEVICE and
// IBV_TEST_GID_INDEX, as the testbed sets them, or the first active device) and a pair of
// queue pairs connected to each other on it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/ibv.hpp"

namespace ibv {
// Names instead of "1-byte object <02>" in test failure messages.
inline void PrintTo(WorkStatus status, std::ostream* out) { *out << to_string(status); }
inline void PrintTo(WorkOpcode opcode, std::ostream* out) { *out << to_string(opcode); }
inline void PrintTo(ErrorKind kind, std::ostream* out) { *out << to_string(kind); }
}  // namespace ibv

namespace ibv::test {

/// Opens IBV_TEST_DEVICE, or the first device with an active port when it is unset.
inline Context open_test_device() {
  if (const char* name = std::getenv("IBV_TEST_DEVICE"); name != nullptr && *name != '\0') {
    return open_device(name);
  }
  return open_first_active_device();
}

/// The test device's IPv4 address (the testbed's IBV_TEST_IP; 10.0.0.1 when unset).
inline std::string test_ip() {
  const char* ip = std::getenv("IBV_TEST_IP");
  return ip != nullptr && *ip != '\0' ? std::string(ip) : std::string("10.0.0.1");
}

/// IBV_TEST_GID_INDEX when set, else the library's own choice.
inline std::uint32_t test_gid_index(const Context& context) {
  if (const char* index = std::getenv("IBV_TEST_GID_INDEX"); index != nullptr && *index != '\0') {
    return static_cast<std::uint32_t>(std::stoul(index));
  }
  return context.default_gid_index();
}

/// Polls `cq` until `count` completions have arrived or `timeout` passes (then the test fails
/// and what arrived so far is returned).
inline std::vector<WorkCompletion> poll_completions(
    const CompletionQueue& cq, std::size_t count,
    std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  std::vector<WorkCompletion> result;
  std::array<WorkCompletion, 16> batch{};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (result.size() < count) {
    for (const auto& completion : cq.poll(batch)) result.push_back(completion);
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "timed out: " << result.size() << " of " << count << " completions";
      break;
    }
  }
  return result;
}

/// Polls exactly one completion (failing the test on timeout).
inline WorkCompletion poll_one(const CompletionQueue& cq) {
  auto completions = poll_completions(cq, 1);
  return completions.empty() ? WorkCompletion{} : completions.front();
}

/// Two RC queue pairs on the test device, connected to each other (a and b), each with its own
/// CQ, on one protection domain.
class ConnectedPair : public ::testing::Test {
 protected:
  void SetUp() override { connect(QueuePairSettings{}); }

  /// (Re)builds the pair with `settings` (the GID index from the environment is added).
  void connect(QueuePairSettings settings) {
    a.reset();
    b.reset();
    settings.gid_index = test_gid_index(context);
    auto prepared_a = QueuePairBuilder(pd, cq_a, cq_a).settings(settings).build();
    auto prepared_b = QueuePairBuilder(pd, cq_b, cq_b).settings(settings).build();
    const auto endpoint_a = prepared_a.endpoint();
    const auto endpoint_b = prepared_b.endpoint();
    a.emplace(std::move(prepared_a).handshake(endpoint_b));
    b.emplace(std::move(prepared_b).handshake(endpoint_a));
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
  CompletionQueue cq_a{context, 256};
  CompletionQueue cq_b{context, 256};
  std::optional<QueuePair> a;
  std::optional<QueuePair> b;
};

/// What the two-channel fixtures share: the test device and a PD, two buffers of `size` bytes
/// (side a's and side b's) registered remote-accessible with every right, and room for the two
/// channels, which each fixture connects in its SetUp (connect_channel_pair). The channels are
/// declared after the memory, so they go first. Derive from it beside ::testing::Test.
struct ChannelPairMemory {
  explicit ChannelPairMemory(std::size_t size) : buffer_a(size), buffer_b(size) {}

  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::vector<std::byte> buffer_a;
  std::vector<std::byte> buffer_b;
  MemoryRegion mr_a = pd.register_remote_accessible(buffer_a, RemoteAccess::all());
  MemoryRegion mr_b = pd.register_remote_accessible(buffer_b, RemoteAccess::all());
  std::optional<Channel> a;
  std::optional<Channel> b;
};

/// Two channels on `pd`, built with `settings` and `timeouts` and connected to each other
/// (loopback on one device): the first is side a, the second side b.
inline std::pair<Channel, Channel> connect_channel_pair(const ProtectionDomain& pd,
                                                        const QueuePairSettings& settings,
                                                        const ChannelTimeouts& timeouts = {}) {
  auto prepared_a = ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).build();
  auto prepared_b = ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).build();
  const Endpoint endpoint_a = prepared_a.endpoint();
  const Endpoint endpoint_b = prepared_b.endpoint();
  Channel a = std::move(prepared_a).handshake(endpoint_b);
  Channel b = std::move(prepared_b).handshake(endpoint_a);
  return {std::move(a), std::move(b)};
}

/// A whole world of `world` MultiChannels in this process, rank r built by `builder_for(r)`
/// (a MultiChannelBuilder for rank r of `world`), rank r at index r, every pair of ranks
/// connected: MultiChannel tests without a network.
template <typename BuilderFor>
std::vector<MultiChannel> connect_local_world(std::uint32_t world, BuilderFor&& builder_for) {
  std::vector<PreparedMultiChannel> prepared;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    prepared.push_back(MultiChannelBuilder(builder_for(rank)).build());
  }
  // remote[r][p]: what peer p made for rank r, gathered before any handshake consumes p
  std::vector<std::vector<std::optional<Endpoint>>> remote(
      world, std::vector<std::optional<Endpoint>>(world));
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    for (std::uint32_t peer = 0; peer < world; ++peer) {
      if (peer != rank) remote[rank][peer] = prepared[peer].endpoint_for(rank);
    }
  }
  std::vector<MultiChannel> channels;
  for (std::uint32_t rank = 0; rank < world; ++rank) {
    channels.push_back(std::move(prepared[rank]).handshake(remote[rank]));
  }
  return channels;
}

/// connect_local_world() with the same queue pair settings and timeouts for every rank.
inline std::vector<MultiChannel> connect_local_world(const ProtectionDomain& pd,
                                                     std::uint32_t world,
                                                     const QueuePairSettings& settings,
                                                     const ChannelTimeouts& timeouts) {
  return connect_local_world(world, [&](std::uint32_t rank) {
    MultiChannelBuilder builder(pd, rank, world);
    builder.queue_pair(settings).timeouts(timeouts);
    return builder;
  });
}

/// Fills `bytes` with a pattern that differs per `seed`, so misplaced data is visible.
inline void fill_pattern(std::span<std::byte> bytes, unsigned seed) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<std::byte>((i * 31U + std::size_t{seed} * 7U + (i >> 8U)) & 0xffU);
  }
}

/// Success when both byte ranges are equal; otherwise names the first byte that differs.
inline ::testing::AssertionResult same_bytes(std::span<const std::byte> expected,
                                             std::span<const std::byte> actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "sizes differ: " << expected.size() << " expected, " << actual.size() << " actual";
  }
  const auto [e, a] = std::mismatch(expected.begin(), expected.end(), actual.begin());
  if (e == expected.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "first difference at byte " << (e - expected.begin()) << " of " << expected.size()
         << ": expected " << std::to_integer<int>(*e) << ", got " << std::to_integer<int>(*a);
}

/// Success when every byte is zero (memory nothing should have written to).
inline ::testing::AssertionResult all_zero(std::span<const std::byte> bytes) {
  const auto it =
      std::find_if(bytes.begin(), bytes.end(), [](std::byte x) { return x != std::byte{0}; });
  if (it == bytes.end()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "byte " << (it - bytes.begin()) << " is " << std::to_integer<int>(*it) << ", not 0";
}

}  // namespace ibv::test
