// SPDX-License-Identifier: MIT
// Device tests of the two post interfaces (PostInterface): classic by default, extended when
// asked for (or a clear error on a provider without it), every operation of a Channel
// delivering the same bytes through each (single elements through the extended interface,
// several elements through ibv_post_send on the same queue pair), a list through each, and a
// list too long for the send queue, which the extended interface refuses whole where the
// classic one posts what fits (operations_test.cpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

const char* name_of(PostInterface interface) {
  return interface == PostInterface::extended ? "extended" : "classic";
}

/// Whether the test device's provider has the extended post interface: a queue pair that asks
/// for it builds, or building fails with an error that says what to use instead (checked here).
bool has_extended(const ProtectionDomain& pd, const CompletionQueue& cq) {
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(pd.context());
  settings.post_interface = PostInterface::extended;
  try {
    const auto prepared = QueuePairBuilder(pd, cq, cq).settings(settings).build();
    EXPECT_EQ(prepared.settings().post_interface, PostInterface::extended);
    return true;
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("post_interface extended"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("classic works everywhere"), std::string::npos)
        << error.what();
    std::printf("%s has no extended post interface: %s\n", pd.context().name().c_str(),
                error.what());
    return false;
  }
}

TEST(PostInterfaceChoice, ClassicByDefaultExtendedWhereTheProviderHasIt) {
  Context context = open_test_device();
  ProtectionDomain pd(context);
  CompletionQueue cq(context, 16);
  EXPECT_EQ(QueuePairSettings{}.post_interface, PostInterface::classic);
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  EXPECT_EQ(QueuePairBuilder(pd, cq, cq).settings(settings).build().settings().post_interface,
            PostInterface::classic);
  std::printf("%s: extended post interface %s\n", context.name().c_str(),
              has_extended(pd, cq) ? "available" : "not available");
}

/// A Channel pair posting through `GetParam()` (extended only where the provider has it).
class EveryOperation : public ::testing::TestWithParam<PostInterface>, protected ChannelPairMemory {
 protected:
  EveryOperation() : ChannelPairMemory(kSize) {}
  static constexpr std::size_t kSize = 16384;

  void SetUp() override {
    // A provider without the extended interface: has_extended() checks the error; nothing
    // else to test here (the test bodies return at once).
    available = GetParam() == PostInterface::classic || has_extended(pd, probe_cq);
    if (!available) return;
    interface = GetParam();
    QueuePairSettings settings;
    settings.gid_index = test_gid_index(context);
    settings.max_send_sge = SgeCount(3);
    settings.max_recv_sge = SgeCount(3);
    settings.post_interface = interface;
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings, {5s, 5s});
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
    ASSERT_EQ(a->queue_pair().settings().post_interface, interface);
    fill_pattern(std::span(buffer_a), 7);
  }

  /// `length` bytes of side a from `offset`, as one element.
  std::array<GatherElement, 1> from_a(std::size_t offset, std::size_t length) {
    return {mr_a.gather(std::span<const std::byte>(buffer_a).subspan(offset, length))};
  }
  std::array<ScatterElement, 1> into_b(std::size_t offset, std::size_t length) {
    return {mr_b.scatter(std::span(buffer_b).subspan(offset, length))};
  }
  ::testing::AssertionResult arrived(std::size_t from, std::size_t to, std::size_t length) {
    return same_bytes(std::span(buffer_a).subspan(from, length),
                      std::span(buffer_b).subspan(to, length));
  }

  CompletionQueue probe_cq{context, 16};
  bool available = false;
  PostInterface interface = PostInterface::classic;
};

TEST_P(EveryOperation, SendsInlineAndNotWithAndWithoutImmediate) {
  if (!available) return;
  const std::uint32_t limit = a->queue_pair().max_inline_data();
  for (const std::size_t length : {std::size_t{8}, std::size_t{limit}, std::size_t{4000}}) {
    PendingWork receive = b->post_receive(into_b(0, length));
    EXPECT_TRUE(a->send(from_a(100, length)).ok()) << length << " bytes";
    EXPECT_EQ(receive.wait().byte_length(), length);
    EXPECT_TRUE(arrived(100, 0, length)) << length << " bytes, " << name_of(interface);
  }
  PendingWork receive = b->post_receive(into_b(5000, 64));
  EXPECT_TRUE(a->execute(op::Send{from_a(200, 64), 0xC0FFEEU}).ok());
  const WorkCompletion got = receive.wait();
  EXPECT_EQ(got.immediate(), std::optional<std::uint32_t>(0xC0FFEEU));
  EXPECT_TRUE(arrived(200, 5000, 64));
}

TEST_P(EveryOperation, WritesReadsAndAtomics) {
  if (!available) return;
  EXPECT_TRUE(a->write(from_a(0, 8), mr_b.remote().sub_region(0, 8)).ok());
  EXPECT_TRUE(a->write(from_a(8, 3000), mr_b.remote().sub_region(8, 3000)).ok());
  EXPECT_TRUE(arrived(0, 0, 3008)) << name_of(interface);

  PendingWork receive = b->post_receive(std::span<const ScatterElement>());
  EXPECT_TRUE(
      a->execute(op::Write{from_a(4000, 100), mr_b.remote().sub_region(4000, 100), 77U}).ok());
  EXPECT_EQ(receive.wait().immediate(), std::optional<std::uint32_t>(77U));
  EXPECT_TRUE(arrived(4000, 4000, 100));

  // A read of b's bytes back into a, and a zero-length write (no element at all).
  std::array<ScatterElement, 1> into{mr_a.scatter(std::span(buffer_a).subspan(8000, 3008))};
  EXPECT_TRUE(a->read(into, mr_b.remote().sub_region(0, 3008)).ok());
  EXPECT_TRUE(
      same_bytes(std::span(buffer_a).subspan(0, 3008), std::span(buffer_a).subspan(8000, 3008)));
  EXPECT_TRUE(a->write(std::span<const GatherElement>(), mr_b.remote().sub_region(0, 0)).ok());

  // Atomics on b's word at 12288 (zeroed), the old value into a's word at 12288.
  std::ranges::fill(std::span(buffer_b).subspan(12288, 8), std::byte{0});
  const auto word = mr_b.remote().element<std::uint64_t>(12288 / 8);
  const ScatterElement result = mr_a.scatter(std::span(buffer_a).subspan(12288, 8));
  const auto old_value = [&] {
    std::uint64_t value = 0;
    std::memcpy(&value, buffer_a.data() + 12288, sizeof value);
    return value;
  };
  EXPECT_TRUE(a->fetch_add(result, word, 5).ok());
  EXPECT_EQ(old_value(), 0U);
  EXPECT_TRUE(a->fetch_add(result, word, 1).ok());
  EXPECT_EQ(old_value(), 5U);
  EXPECT_TRUE(a->compare_swap(result, word, 6, 40).ok());
  EXPECT_EQ(old_value(), 6U);
  EXPECT_TRUE(a->fetch_add(result, word, 0).ok());
  EXPECT_EQ(old_value(), 40U) << name_of(interface);
}

// Several elements: through ibv_post_send on either queue pair (see takes_extended), inline
// and not, gathered and scattered.
TEST_P(EveryOperation, SeveralElementsGatherAndScatter) {
  if (!available) return;
  const std::array<GatherElement, 3> small{mr_a.gather(std::span(buffer_a).subspan(0, 4)),
                                           mr_a.gather(std::span(buffer_a).subspan(100, 4)),
                                           mr_a.gather(std::span(buffer_a).subspan(200, 4))};
  const std::array<GatherElement, 3> large{mr_a.gather(std::span(buffer_a).subspan(0, 1000)),
                                           mr_a.gather(std::span(buffer_a).subspan(3000, 1000)),
                                           mr_a.gather(std::span(buffer_a).subspan(6000, 1000))};
  const std::array<ScatterElement, 3> pieces{mr_b.scatter(std::span(buffer_b).subspan(0, 12)),
                                             mr_b.scatter(std::span(buffer_b).subspan(5000, 1000)),
                                             mr_b.scatter(std::span(buffer_b).subspan(9000, 2000))};
  PendingWork first = b->post_receive(pieces);
  EXPECT_TRUE(a->send(small).ok());  // 12 bytes: inline
  EXPECT_EQ(first.wait().byte_length(), 12U);
  EXPECT_TRUE(arrived(0, 0, 4) && arrived(100, 4, 4) && arrived(200, 8, 4)) << name_of(interface);
  EXPECT_EQ(a->inline_posts(), 1U);

  EXPECT_TRUE(a->write(large, mr_b.remote().sub_region(12000, 3000)).ok());  // not inline
  EXPECT_TRUE(arrived(0, 12000, 1000) && arrived(3000, 13000, 1000) && arrived(6000, 14000, 1000))
      << name_of(interface);
}

TEST_P(EveryOperation, AListOfSixteenWritesAndOneOfSixteenSends) {
  if (!available) return;
  std::vector<op::Write> writes;
  std::vector<op::Receive> receives;
  std::vector<op::Send> sends;
  std::vector<std::array<GatherElement, 1>> data;
  std::vector<std::array<ScatterElement, 1>> into;
  for (std::size_t i = 0; i < 16; ++i) {
    data.push_back(from_a(i * 256, 256));
    into.push_back(into_b(8192 + i * 256, 256));
  }
  for (std::size_t i = 0; i < 16; ++i) {
    writes.push_back({data[i], mr_b.remote().sub_region(i * 256, 256)});
    receives.push_back({into[i]});
    sends.push_back({data[i]});
  }
  std::vector<PendingWork> received;
  received.reserve(receives.size());
  for (const op::Receive& receive : receives) received.push_back(b->post(receive));
  a->scope([&](ChannelScope& scope) {
    scope.post_all(writes);
    scope.post_all(sends);
  });
  for (PendingWork& work : received) EXPECT_EQ(work.wait().byte_length(), 256U);
  EXPECT_TRUE(arrived(0, 0, 4096)) << name_of(interface);
  EXPECT_TRUE(arrived(0, 8192, 4096)) << name_of(interface);
}

INSTANTIATE_TEST_SUITE_P(PostInterface, EveryOperation,
                         ::testing::Values(PostInterface::extended, PostInterface::classic),
                         [](const auto& param_info) {
                           return std::string(name_of(param_info.param));
                         });

// A checked list longer than the send queue on the extended interface: all or nothing, so the
// device takes none of it (the classic interface posts what fits: operations_test.cpp).
TEST(PostInterfaceList, TooLongForTheSendQueueIsRefusedWhole) {
  Context context = open_test_device();
  ProtectionDomain pd(context);
  CompletionQueue cq_a(context, 256);
  CompletionQueue cq_b(context, 256);
  if (!has_extended(pd, cq_a)) return;  // the error is checked there
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  settings.max_send_wr = QueueDepth(8);
  settings.post_interface = PostInterface::extended;
  auto prepared_a = QueuePairBuilder(pd, cq_a, cq_a).settings(settings).build();
  auto prepared_b = QueuePairBuilder(pd, cq_b, cq_b).settings(settings).build();
  const Endpoint endpoint_a = prepared_a.endpoint();
  const Endpoint endpoint_b = prepared_b.endpoint();
  QueuePair a = std::move(prepared_a).handshake(endpoint_b);
  QueuePair b = std::move(prepared_b).handshake(endpoint_a);

  constexpr std::size_t kBytes = std::size_t{64} * 64;
  std::vector<std::byte> source(kBytes);
  std::vector<std::byte> target(kBytes);
  fill_pattern(std::span(source), 3);
  MemoryRegion mr_source = pd.register_local(source);
  MemoryRegion mr_target = pd.register_remote_accessible(target, RemoteAccess::all());
  std::vector<GatherElement> pieces(64);
  std::vector<SendRequest> requests(64, SendRequest::send(0, {}));
  for (std::size_t i = 0; i < 64; ++i) {
    pieces[i] = mr_source.gather(std::span<const std::byte>(source).subspan(i * 64, 64));
    requests[i] =
        SendRequest::write(i, std::span(&pieces[i], 1), mr_target.remote().sub_region(i * 64, 64));
  }
  const ListPosted result = a.post(a.checked(std::span(requests)));
  EXPECT_NE(result.error, 0);
  EXPECT_EQ(result.posted, 0U);
  std::this_thread::sleep_for(50ms);
  std::array<WorkCompletion, 4> none{};
  EXPECT_TRUE(cq_a.poll(none).empty());
  EXPECT_TRUE(std::ranges::all_of(target, [](std::byte x) { return x == std::byte{0}; }));

  // The queue pair is unharmed: a list that fits goes through.
  const ListPosted fits = a.post(a.checked(std::span(requests).first(8)));
  EXPECT_EQ(fits.error, 0);
  EXPECT_EQ(fits.posted, 8U);
  EXPECT_EQ(poll_completions(cq_a, 8).size(), 8U);
}

}  // namespace
}  // namespace ibv::test
