// SPDX-License-Identifier: MIT
// Device tests of every work request between two connected QPs, data checked byte by byte:
// send, receive, RDMA write and read, immediates, 3-element scatter/gather, inline, unsignaled,
// batched posting and polling; and the failures a user meets (wrong rkey, a region
// deregistered under the writer, short receive buffer, requests that do not fit their QP or
// remote region).
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"

namespace ibv::test {
namespace {

class Operations : public ConnectedPair {
 protected:
  /// One buffer per side, registered remote-accessible, first half filled with a pattern.
  std::vector<std::byte> buffer_a = std::vector<std::byte>(kSize);
  std::vector<std::byte> buffer_b = std::vector<std::byte>(kSize);
  MemoryRegion mr_a = pd.register_remote_accessible(buffer_a, RemoteAccess::all());
  MemoryRegion mr_b = pd.register_remote_accessible(buffer_b, RemoteAccess::all());

  static constexpr std::size_t kSize = std::size_t{64} * 1024;
  std::span<std::byte> a_bytes() { return buffer_a; }
  std::span<std::byte> b_bytes() { return buffer_b; }
};

bool same(std::span<const std::byte> x, std::span<const std::byte> y) {
  return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin());
}

TEST_F(Operations, SendAndReceive) {
  fill_pattern(a_bytes().first(5000), 1);
  const std::array into{mr_b.scatter(b_bytes().first(8192))};
  b->post_receive(10, into);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(5000)))};
  a->post_send(20, data);
  const auto sent = poll_one(cq_a);
  EXPECT_TRUE(sent.ok()) << sent.to_string();
  EXPECT_EQ(sent.wr_id(), 20U);
  EXPECT_EQ(sent.opcode(), WorkOpcode::send);
  const auto received = poll_one(cq_b);
  ASSERT_TRUE(received.ok()) << received.to_string();
  EXPECT_EQ(received.wr_id(), 10U);
  EXPECT_EQ(received.opcode(), WorkOpcode::receive);
  EXPECT_TRUE(received.is_receive());
  EXPECT_EQ(received.byte_length(), 5000U);
  EXPECT_FALSE(received.immediate().has_value());
  EXPECT_EQ(received.qp_number(), b->qp_number());
  EXPECT_TRUE(same(a_bytes().first(5000), b_bytes().first(5000)));
}

TEST_F(Operations, SendWithImmediate) {
  fill_pattern(a_bytes().first(100), 2);
  const std::array into{mr_b.scatter(b_bytes().first(100))};
  b->post_receive(1, into);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(100)))};
  auto request = SendRequest::send_with_immediate(2, data, 0xC0FFEE01U);
  a->post_send(request);
  EXPECT_TRUE(poll_one(cq_a).ok());
  const auto received = poll_one(cq_b);
  ASSERT_TRUE(received.ok()) << received.to_string();
  EXPECT_EQ(received.immediate(), 0xC0FFEE01U);
  EXPECT_TRUE(same(a_bytes().first(100), b_bytes().first(100)));
}

TEST_F(Operations, ImmediateOnlyMessageNeedsNoReceiveBuffer) {
  b->post_receive(1, std::span<const ScatterElement>{});
  auto request = SendRequest::send_with_immediate(2, {}, 42);
  a->post_send(request);
  EXPECT_TRUE(poll_one(cq_a).ok());
  const auto received = poll_one(cq_b);
  ASSERT_TRUE(received.ok()) << received.to_string();
  EXPECT_EQ(received.byte_length(), 0U);
  EXPECT_EQ(received.immediate(), 42U);
}

TEST_F(Operations, RdmaWrite) {
  fill_pattern(a_bytes().first(kSize / 2), 3);
  const auto remote = mr_b.remote().sub_region(kSize / 2, kSize / 2);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(kSize / 2)))};
  a->post_write(7, data, remote);
  const auto done = poll_one(cq_a);
  ASSERT_TRUE(done.ok()) << done.to_string();
  EXPECT_EQ(done.opcode(), WorkOpcode::rdma_write);
  EXPECT_TRUE(same(a_bytes().first(kSize / 2), b_bytes().last(kSize / 2)));
  // A one-sided write leaves nothing in the target's CQ.
  std::array<WorkCompletion, 4> none{};
  EXPECT_TRUE(cq_b.poll(none).empty());
}

TEST_F(Operations, RdmaWriteWithImmediateConsumesAReceive) {
  fill_pattern(a_bytes().first(300), 4);
  b->post_receive(5, std::span<const ScatterElement>{});
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(300)))};
  auto request =
      SendRequest::write_with_immediate(6, data, mr_b.remote().sub_region(1000, 300), 77);
  a->post_send(request);
  EXPECT_TRUE(poll_one(cq_a).ok());
  const auto received = poll_one(cq_b);
  ASSERT_TRUE(received.ok()) << received.to_string();
  EXPECT_EQ(received.opcode(), WorkOpcode::receive_rdma_with_immediate);
  EXPECT_EQ(received.immediate(), 77U);
  EXPECT_EQ(received.byte_length(), 300U);
  EXPECT_TRUE(same(a_bytes().first(300), b_bytes().subspan(1000, 300)));
}

TEST_F(Operations, RdmaRead) {
  fill_pattern(b_bytes().first(20000), 5);
  const std::array into{mr_a.scatter(a_bytes().last(20000))};
  a->post_read(8, into, mr_b.remote().sub_region(0, 20000));
  const auto done = poll_one(cq_a);
  ASSERT_TRUE(done.ok()) << done.to_string();
  EXPECT_EQ(done.opcode(), WorkOpcode::rdma_read);
  EXPECT_TRUE(same(b_bytes().first(20000), a_bytes().last(20000)));
}

class ScatterGather : public Operations {
 protected:
  void SetUp() override {
    QueuePairSettings settings;
    settings.max_send_sge = SgeCount(3);
    settings.max_recv_sge = SgeCount(3);
    connect(settings);
  }
};

TEST_F(ScatterGather, SendFromThreePiecesIntoThreeOthers) {
  auto a_all = a_bytes();
  fill_pattern(a_all.first(1000), 6);
  // Gather 100 + 500 + 400 bytes from scattered places, in that order.
  const std::array data{mr_a.gather(std::span<const std::byte>(a_all.subspan(0, 100))),
                        mr_a.gather(std::span<const std::byte>(a_all.subspan(100, 500))),
                        mr_a.gather(std::span<const std::byte>(a_all.subspan(600, 400)))};
  // Scatter into 300 + 300 + 400 bytes at other places.
  auto b_all = b_bytes();
  const std::array into{mr_b.scatter(b_all.subspan(5000, 300)),
                        mr_b.scatter(b_all.subspan(9000, 300)),
                        mr_b.scatter(b_all.subspan(20000, 400))};
  b->post_receive(1, into);
  a->post_send(2, data);
  EXPECT_TRUE(poll_one(cq_a).ok());
  const auto received = poll_one(cq_b);
  ASSERT_TRUE(received.ok()) << received.to_string();
  EXPECT_EQ(received.byte_length(), 1000U);
  EXPECT_TRUE(same(a_all.subspan(0, 300), b_all.subspan(5000, 300)));
  EXPECT_TRUE(same(a_all.subspan(300, 300), b_all.subspan(9000, 300)));
  EXPECT_TRUE(same(a_all.subspan(600, 400), b_all.subspan(20000, 400)));
}

TEST_F(ScatterGather, WriteGathersAndReadScatters) {
  auto a_all = a_bytes();
  fill_pattern(a_all.first(3000), 7);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_all.subspan(0, 1000))),
                        mr_a.gather(std::span<const std::byte>(a_all.subspan(1000, 1000))),
                        mr_a.gather(std::span<const std::byte>(a_all.subspan(2000, 1000)))};
  a->post_write(1, data, mr_b.remote().sub_region(30000, 3000));
  ASSERT_TRUE(poll_one(cq_a).ok());
  EXPECT_TRUE(same(a_all.first(3000), b_bytes().subspan(30000, 3000)));

  const std::array into{mr_a.scatter(a_all.subspan(40000, 10)),
                        mr_a.scatter(a_all.subspan(50000, 2990)),
                        mr_a.scatter(a_all.subspan(60000, 0))};
  a->post_read(2, into, mr_b.remote().sub_region(30000, 3000));
  ASSERT_TRUE(poll_one(cq_a).ok());
  EXPECT_TRUE(same(a_all.first(10), a_all.subspan(40000, 10)));
  EXPECT_TRUE(same(a_all.subspan(10, 2990), a_all.subspan(50000, 2990)));
}

TEST_F(ScatterGather, MoreElementsThanTheQpAllowsAreRejectedBeforePosting) {
  std::array<GatherElement, 4> data{};
  data.fill(mr_a.gather(std::span<const std::byte>(a_bytes().first(8))));
  try {
    a->post_send(1, data);
    FAIL() << "posted 4 elements on a QP with max_send_sge 3";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("max_send_sge of 3"), std::string::npos)
        << error.what();
  }
  std::array<WorkCompletion, 4> none{};
  EXPECT_TRUE(cq_a.poll(none).empty());
}

class Inline : public Operations {
 protected:
  void SetUp() override {
    QueuePairSettings settings;
    settings.max_inline_data = InlineSize(64);
    connect(settings);
  }
};

TEST_F(Inline, InlineSendNeedsNoRegisteredSource) {
  ASSERT_GE(a->max_inline_data(), 64U);
  std::array<std::byte, 64> unregistered{};
  fill_pattern(unregistered, 8);
  const std::array data{GatherElement::from_raw(
      reinterpret_cast<std::uintptr_t>(unregistered.data()), unregistered.size(), 0)};
  const std::array into{mr_b.scatter(b_bytes().first(64))};
  b->post_receive(1, into);
  auto request = SendRequest::send(2, data).inline_data();
  a->post_send(request);
  unregistered.fill(std::byte{0});  // the data was copied at post time
  EXPECT_TRUE(poll_one(cq_a).ok());
  ASSERT_TRUE(poll_one(cq_b).ok());
  std::array<std::byte, 64> expected{};
  fill_pattern(expected, 8);
  EXPECT_TRUE(same(expected, b_bytes().first(64)));
}

TEST_F(Inline, InlineLargerThanGrantedIsRejected) {
  const auto too_long = a->max_inline_data() + 1;
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(too_long)))};
  auto request = SendRequest::send(1, data).inline_data();
  try {
    a->post_send(request);
    FAIL() << "inline send of " << too_long << " bytes accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("max_inline_data"), std::string::npos) << error.what();
  }
}

TEST_F(Operations, UnsignaledRequestsCompleteSilentlyAndInOrder) {
  fill_pattern(a_bytes().first(4096), 9);
  std::array<GatherElement, 4> pieces{};
  std::array<SendRequest, 4> requests{SendRequest::send(0, {}), SendRequest::send(0, {}),
                                      SendRequest::send(0, {}), SendRequest::send(0, {})};
  for (std::size_t i = 0; i < 4; ++i) {
    pieces[i] = mr_a.gather(std::span<const std::byte>(a_bytes().subspan(i * 1024, 1024)));
    requests[i] = SendRequest::write(100 + i, std::span(&pieces[i], 1),
                                     mr_b.remote().sub_region(i * 1024, 1024));
    if (i < 3) requests[i].unsignaled();
  }
  a->post_send(requests);  // one doorbell for all four
  const auto completions = poll_completions(cq_a, 1);
  ASSERT_EQ(completions.size(), 1U);
  EXPECT_EQ(completions[0].wr_id(), 103U);
  EXPECT_TRUE(completions[0].ok());
  EXPECT_TRUE(same(a_bytes().first(4096), b_bytes().first(4096)));
  std::array<WorkCompletion, 4> none{};
  EXPECT_TRUE(cq_a.poll(none).empty());
}

// QueuePair::post of a checked list longer than the send queue, on the classic interface
// (ibv_post_send): the device takes what fits and names the first it refused; ListPosted says
// how many it took, every request is unlinked again, and exactly those land and complete. (The
// extended interface refuses such a list whole: post_interface_test.cpp.)
TEST_F(Operations, CheckedListCutShortByTheDeviceSaysHowManyItTook) {
  QueuePairSettings settings;
  settings.max_send_wr = QueueDepth(8);
  settings.post_interface = PostInterface::classic;
  connect(settings);
  constexpr std::size_t kCount = 64;
  constexpr std::size_t kPiece = 64;
  fill_pattern(a_bytes().first(kCount * kPiece), 12);
  std::vector<GatherElement> pieces(kCount);
  std::vector<SendRequest> requests(kCount, SendRequest::send(0, {}));
  for (std::size_t i = 0; i < kCount; ++i) {
    pieces[i] = mr_a.gather(std::span<const std::byte>(a_bytes().subspan(i * kPiece, kPiece)));
    requests[i] = SendRequest::write(i, std::span(&pieces[i], 1),
                                     mr_b.remote().sub_region(i * kPiece, kPiece));
  }
  const ListPosted result = a->post(a->checked(std::span(requests)));
  ASSERT_NE(result.error, 0) << "the device took all " << kCount << " into a send queue of "
                             << a->settings().max_send_wr.value();
  ASSERT_GT(result.posted, 0U);
  ASSERT_LT(result.posted, kCount);
  for (const auto& request : requests) EXPECT_EQ(request.native().next, nullptr);
  const auto completions = poll_completions(cq_a, result.posted);
  ASSERT_EQ(completions.size(), result.posted);
  for (std::size_t i = 0; i < result.posted; ++i) {
    EXPECT_TRUE(completions[i].ok()) << completions[i].to_string();
    EXPECT_EQ(completions[i].wr_id(), i);
  }
  std::array<WorkCompletion, 4> none{};
  EXPECT_TRUE(cq_a.poll(none).empty());
  const std::size_t landed = result.posted * kPiece;
  EXPECT_TRUE(same(a_bytes().first(landed), b_bytes().first(landed)));
  EXPECT_TRUE(std::all_of(b_bytes().begin() + static_cast<std::ptrdiff_t>(landed),
                          b_bytes().begin() + static_cast<std::ptrdiff_t>(kCount * kPiece),
                          [](std::byte x) { return x == std::byte{0}; }));
}

// QueuePair::checked(requests, prepare): each request is prepared, then checked, in order; a
// bad one throws before anything is posted, and the requests after it are not prepared.
TEST_F(Operations, CheckedListPreparesEachRequestBeforeItsChecks) {
  fill_pattern(a_bytes().first(300), 13);
  std::array<GatherElement, 3> pieces{};
  std::vector<SendRequest> requests;
  for (std::size_t i = 0; i < 3; ++i) {
    pieces[i] = mr_a.gather(std::span<const std::byte>(a_bytes().subspan(i * 100, 100)));
    requests.push_back(
        SendRequest::write(0, std::span(&pieces[i], 1), mr_b.remote().sub_region(i * 100, 100)));
  }
  std::vector<std::size_t> prepared;
  const auto number = [&](SendRequest& request, std::size_t i) {
    request.native().wr_id = 50 + i;
    prepared.push_back(i);
  };
  const ListPosted result = a->post(a->checked(std::span(requests), number));
  EXPECT_EQ(result.posted, 3U);
  EXPECT_EQ(result.error, 0);
  EXPECT_EQ(prepared, (std::vector<std::size_t>{0, 1, 2}));
  const auto completions = poll_completions(cq_a, 3);
  ASSERT_EQ(completions.size(), 3U);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(completions[i].wr_id(), 50 + i);
  EXPECT_TRUE(same(a_bytes().first(300), b_bytes().first(300)));

  // The second one moves 100 bytes into a region of 99.
  requests[1] = SendRequest::write(0, std::span(&pieces[1], 1), mr_b.remote().sub_region(0, 99));
  prepared.clear();
  EXPECT_THROW((void)a->checked(std::span(requests), number), Error);
  EXPECT_EQ(prepared, (std::vector<std::size_t>{0, 1}));
  std::array<WorkCompletion, 4> none{};
  EXPECT_TRUE(cq_a.poll(none).empty());
}

TEST_F(Operations, CompletionsArePolledInBatches) {
  constexpr std::size_t kCount = 40;
  fill_pattern(a_bytes().first(kCount * 256), 10);
  for (std::size_t i = 0; i < kCount; ++i) {
    const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().subspan(i * 256, 256)))};
    a->post_write(i, data, mr_b.remote().sub_region(i * 256, 256));
  }
  std::vector<std::uint64_t> seen;
  std::array<WorkCompletion, 8> batch{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::size_t largest_batch = 0;
  while (seen.size() < kCount && std::chrono::steady_clock::now() < deadline) {
    const auto polled = cq_a.poll(batch);
    largest_batch = std::max(largest_batch, polled.size());
    for (const auto& c : polled) {
      EXPECT_TRUE(c.ok()) << c.to_string();
      seen.push_back(c.wr_id());
    }
  }
  ASSERT_EQ(seen.size(), kCount);
  EXPECT_LE(largest_batch, batch.size());
  for (std::size_t i = 0; i < kCount; ++i) EXPECT_EQ(seen[i], i);  // RC completes in order
  EXPECT_TRUE(same(a_bytes().first(kCount * 256), b_bytes().first(kCount * 256)));
}

TEST_F(Operations, WrongRemoteKeyIsARemoteAccessError) {
  const auto good = mr_b.remote();
  const RemoteMemoryRegion bad(good.address(), good.length(), good.rkey() ^ 0x5a5a00U);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(64)))};
  a->post_write(1, data, bad);
  const auto done = poll_one(cq_a);
  EXPECT_FALSE(done.ok());
  EXPECT_EQ(done.status(), WorkStatus::remote_access_error) << done.to_string();
  const WorkError error(done);
  EXPECT_EQ(error.kind(), ErrorKind::permission);
  EXPECT_NE(std::string(error.what()).find("remote_access_error"), std::string::npos);
}

TEST_F(Operations, WriteToADeregisteredRegionIsARemoteAccessErrorAndChangesNothing) {
  // The peer hands out a region, the writer uses it once, then the peer deregisters it while
  // the writer still holds its remote form: the next write must fail, not land.
  std::vector<std::byte> target(4096);
  std::optional<MemoryRegion> target_mr =
      pd.register_remote_accessible(target, RemoteAccess::all());
  const RemoteMemoryRegion stale = target_mr->remote();
  fill_pattern(a_bytes().first(64), 5);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(64)))};
  a->post_write(1, data, stale);
  ASSERT_TRUE(poll_one(cq_a).ok());
  ASSERT_TRUE(same(a_bytes().first(64), std::span(target).first(64)));

  target_mr.reset();  // ibv_dereg_mr: the rkey is dead from here on
  std::fill(target.begin(), target.end(), std::byte{0});
  fill_pattern(a_bytes().first(64), 6);
  a->post_write(2, data, stale);
  const auto done = poll_one(cq_a);
  EXPECT_EQ(done.status(), WorkStatus::remote_access_error) << done.to_string();
  EXPECT_TRUE(all_zero(target)) << "a write through a deregistered region's key landed";
}

TEST_F(Operations, WriteToALocalOnlyRegionIsARemoteAccessError) {
  std::vector<std::byte> local(256);
  const auto local_mr = pd.register_local(local);
  // Forge what a peer would need; the device must refuse since no remote write was granted.
  const RemoteMemoryRegion forged(local_mr.address(), local_mr.length(), local_mr.rkey());
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(64)))};
  a->post_write(1, data, forged);
  EXPECT_EQ(poll_one(cq_a).status(), WorkStatus::remote_access_error);
}

TEST_F(Operations, ReceiveBufferTooSmallIsALocalLengthError) {
  fill_pattern(a_bytes().first(2048), 11);
  const std::array into{mr_b.scatter(b_bytes().first(1024))};
  b->post_receive(1, into);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(2048)))};
  a->post_send(2, data);
  const auto received = poll_one(cq_b);
  // The spec (and mlx5) say local_length_error. Soft-RoCE reports local_qp_operation_error:
  // rxe_resp.c send_data_in() maps only -ENOSPC to a length error, and copy_data() returns
  // -EINVAL for a message longer than the receive buffer (Linux 6.1).
  const auto expected = context.name().starts_with("rxe") ? WorkStatus::local_qp_operation_error
                                                          : WorkStatus::local_length_error;
  EXPECT_EQ(received.status(), expected) << received.to_string();
  EXPECT_EQ(received.wr_id(), 1U);
  const auto sent = poll_one(cq_a);
  EXPECT_FALSE(sent.ok()) << sent.to_string();  // the peer NAKs: remote_invalid_request
}

TEST_F(Operations, RequestsLongerThanTheirRemoteRegionAreRejectedBeforePosting) {
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(4096)))};
  const auto small = mr_b.remote().sub_region(0, 4095);
  try {
    a->post_write(1, data, small);
    FAIL() << "write of 4096 bytes into 4095 accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("more than its remote MR"), std::string::npos)
        << error.what();
  }
  const std::array into{mr_a.scatter(a_bytes().first(4096))};
  EXPECT_THROW(a->post_read(2, into, small), Error);
  EXPECT_THROW((void)mr_b.remote().sub_region(kSize - 10, 11), Error);
  std::array<WorkCompletion, 4> none{};
  EXPECT_TRUE(cq_a.poll(none).empty());
}

TEST_F(Operations, TypedRemoteElementsAndFieldsAddressTheRightBytes) {
  struct Record {
    std::uint32_t id;
    std::uint64_t count;
    std::array<char, 20> label;
  };
  static_assert(std::is_standard_layout_v<Record>);
  const auto records = mr_b.remote().sub_region(0, 10 * sizeof(Record));
  const std::uint64_t value = 0x1122334455667788ULL;
  std::memcpy(a_bytes().data(), &value, sizeof value);
  const std::array data{mr_a.gather(std::span<const std::byte>(a_bytes().first(sizeof value)))};
  a->post_write(1, data, records.element<Record>(7).field(&Record::count));
  ASSERT_TRUE(poll_one(cq_a).ok());
  Record seven{};
  std::memcpy(&seven, b_bytes().data() + 7 * sizeof(Record), sizeof(Record));
  EXPECT_EQ(seven.count, value);
  EXPECT_EQ(seven.id, 0U);
  EXPECT_THROW((void)records.element<Record>(10), Error);
}

}  // namespace
}  // namespace ibv::test
