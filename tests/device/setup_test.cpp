// SPDX-License-Identifier: MIT
// Device tests of resource set-up: memory registration, queue pair building and handshake,
// lifetimes (a QP keeps its PD and CQs alive), and set-up errors that name what is wrong.
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "resource_check.hpp"
#include "support/error_matchers.hpp"
#include "sysfs_gid.hpp"

namespace ibv::test {
namespace {

class Setup : public ::testing::Test {
 protected:
  Context context = open_test_device();
  ProtectionDomain pd{context};
  CompletionQueue cq{context, 16};
};

TEST_F(Setup, LocalRegistrationHasKeysButNoRemoteForm) {
  std::vector<std::byte> buffer(4096);
  const auto mr = pd.register_local(buffer);
  EXPECT_EQ(mr.address(), reinterpret_cast<std::uintptr_t>(buffer.data()));
  EXPECT_EQ(mr.length(), buffer.size());
  EXPECT_EQ(mr.bytes().data(), buffer.data());
  EXPECT_TRUE(mr.remote_access().empty());
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::invalid_argument, [&] { (void)mr.remote(); },
                                     {"local use only"}));
}

TEST_F(Setup, MoveAssigningARegionDeregistersItBeforeReleasingItsProtectionDomain) {
  std::vector<std::byte> first(4096);
  std::vector<std::byte> second(4096);
  std::string why;
  const auto before = own_resource_counts(why);
  ASSERT_TRUE(before) << why;
  // The region is the only owner of its protection domain: assigning over it must deregister
  // it before the domain goes (the other way round, ibv_dealloc_pd fails and the PD leaks
  // until the device is closed).
  MemoryRegion region = ProtectionDomain(context).register_local(first);
  region = pd.register_local(second);
  EXPECT_EQ(region.bytes().data(), second.data());
  EXPECT_EQ(region.protection_domain().native(), pd.native());
  const auto after = own_resource_counts(why);
  ASSERT_TRUE(after) << why;
  const std::string device = context.name();
  const auto count = [&](const ResourceCounts& counts, const char* kind) {
    const auto it = counts.find({device, kind});
    return it == counts.end() ? 0LL : it->second;
  };
  EXPECT_EQ(count(*after, "pd"), count(*before, "pd"));
  EXPECT_EQ(count(*after, "mr"), count(*before, "mr") + 1);
}

// The leak check after every test reads the totals from RDMA netlink itself: they must be what
// the `rdma` tool says, and must move when an object is made.
TEST_F(Setup, TheLeakChecksNetlinkTotalsAgreeWithTheRdmaToolAndCountNewObjects) {
  std::string why;
  const auto before = total_resource_counts(why);
  ASSERT_TRUE(before) << why;
  const auto tool = tool_resource_counts(why);
  ASSERT_TRUE(tool) << why;
  EXPECT_EQ(*before, *tool);
  const std::string device = context.name();
  ASSERT_TRUE(before->contains({device, "pd"})) << "no pd count for " << device;
  const ProtectionDomain extra(context);
  const auto after = total_resource_counts(why);
  ASSERT_TRUE(after) << why;
  EXPECT_EQ(after->at({device, "pd"}), before->at({device, "pd"}) + 1);
  EXPECT_EQ(after->at({device, "qp"}), before->at({device, "qp"}));
}

TEST_F(Setup, RemoteAccessibleRegistrationGivesItsRemoteForm) {
  std::vector<std::byte> buffer(8192);
  const auto mr =
      pd.register_remote_accessible(buffer, RemoteAccess::write() | RemoteAccess::read());
  const auto remote = mr.remote();
  EXPECT_EQ(remote.address(), mr.address());
  EXPECT_EQ(remote.length(), buffer.size());
  EXPECT_EQ(remote.rkey(), mr.rkey());
  EXPECT_TRUE(mr.remote_access().allows_write());
  EXPECT_FALSE(mr.remote_access().allows_atomic());
}

TEST_F(Setup, ElementsOutsideTheirRegionAreRejected) {
  std::vector<std::byte> buffer(1024);
  const auto mr = pd.register_local(std::span(buffer).subspan(256, 512));
  const std::span<std::byte> all(buffer);
  EXPECT_EQ(mr.gather(std::span<const std::byte>(all.subspan(256, 512))).length(), 512U);
  EXPECT_EQ(mr.scatter(all.subspan(767, 1)).length(), 1U);
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::invalid_argument,
      [&] { (void)mr.gather(std::span<const std::byte>(all.subspan(255, 2))); },
      {"outside its memory region"}));
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::invalid_argument,
                                     [&] { (void)mr.scatter(all.subspan(767, 2)); },
                                     {"outside its memory region"}));
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::invalid_argument,
                                     [&] { (void)mr.scatter(all.subspan(0, 1024)); },
                                     {"outside its memory region"}));
}

TEST_F(Setup, DmabufRegistrationFailsClearlyWhereUnsupported) {
  // rxe has no dma-buf support; other devices reject a memfd that is not a dma-buf. Either
  // way the error must name the verb and the fd, not crash.
  const int fd = memfd_create("not-a-dmabuf", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  EXPECT_TRUE(ibv_test::throws_error(
      context.name().starts_with("rxe") ? ErrorKind::unsupported : ErrorKind::invalid_argument,
      [&] { (void)pd.register_dmabuf(fd, 0, 4096, 0, RemoteAccess::none()); },
      {"ibv_reg_dmabuf_mr"}));
  close(fd);
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::invalid_argument,
      [&] { (void)pd.register_dmabuf(-1, 0, 4096, 0, RemoteAccess::none()); }, {"fd -1"}));
}

TEST_F(Setup, BuilderRejectsSettingsBeyondTheDevice) {
  const auto device = context.query_device();
  const auto too_many = [](std::int32_t limit) { return static_cast<std::uint32_t>(limit) + 1; };
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::invalid_argument,
      [&] {
        (void)QueuePairBuilder(pd, cq, cq).max_send_sge(SgeCount(too_many(device.max_sge))).build();
      },
      {"max_send_sge"}));
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::invalid_argument,
      [&] {
        (void)QueuePairBuilder(pd, cq, cq).max_recv_sge(SgeCount(too_many(device.max_sge))).build();
      },
      {"max_recv_sge"}));
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::invalid_argument,
                                     [&] {
                                       (void)QueuePairBuilder(pd, cq, cq)
                                           .max_send_wr(QueueDepth(too_many(device.max_qp_wr)))
                                           .build();
                                     },
                                     {"max_send_wr"}));
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::not_found, [&] { (void)QueuePairBuilder(pd, cq, cq).port(PortNumber{2}).build(); },
      {"port 2"}));
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::not_found, [&] { (void)QueuePairBuilder(pd, cq, cq).gid_index(1000).build(); },
      {"GID index 1000"}));
  const auto other_context = open_device(context.name());
  const CompletionQueue foreign_cq(other_context, 4);
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::invalid_argument,
                                     [&] { (void)QueuePairBuilder(pd, foreign_cq, cq).build(); },
                                     {"another device"}));
}

TEST_F(Setup, CompletionQueueSizeIsChecked) {
  EXPECT_TRUE(ibv_test::throws_error(
      ErrorKind::invalid_argument, [&] { (void)CompletionQueue(context, 0); }, {"min_entries 0"}));
  const auto max_cqe = context.query_device().max_cqe;
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::invalid_argument,
                                     [&] { (void)CompletionQueue(context, max_cqe + 1); },
                                     {"max_cqe"}));
  EXPECT_GE(CompletionQueue(context, 100).capacity(), 100);
}

TEST_F(Setup, EndpointDescribesThePreparedQp) {
  auto prepared = QueuePairBuilder(pd, cq, cq).send_psn(Psn(0x123456)).build();
  const auto endpoint = prepared.endpoint();
  EXPECT_NE(endpoint.qp_number, 0U);
  EXPECT_EQ(endpoint.psn, 0x123456U);
  EXPECT_EQ(endpoint.lid, context.query_port().lid);
  if (context.query_port().link_layer == LinkLayer::ethernet) {
    // Chosen automatically: the RoCE v2 IPv4 entry, as the kernel's sysfs table shows it.
    const auto expected = sysfs_roce_v2_ipv4_gid_index(context.name());
    ASSERT_TRUE(expected.has_value()) << context.name() << " has no RoCE v2 IPv4 GID in sysfs";
    EXPECT_EQ(prepared.gid_index(), *expected);
    EXPECT_EQ(endpoint.gid, context.query_gid(*expected).gid);
    EXPECT_EQ(test_gid_index(context), *expected)
        << "IBV_TEST_GID_INDEX disagrees with the sysfs GID table";
  }
  EXPECT_EQ(Endpoint::from_json(endpoint.to_json()), endpoint);
  EXPECT_EQ(Endpoint::from_bytes(endpoint.to_bytes()), endpoint);
}

TEST_F(Setup, LoopbackHandshakeWithItsOwnEndpointReachesRts) {
  auto prepared = QueuePairBuilder(pd, cq, cq).build();
  const auto self = prepared.endpoint();
  const auto qp = std::move(prepared).handshake(self);
  EXPECT_EQ(qp.query_state(), "RTS");
  EXPECT_EQ(qp.remote_endpoint(), self);
  EXPECT_EQ(qp.local_endpoint(), self);

  std::vector<std::byte> buffer(64);
  fill_pattern(std::span(buffer).first(32), 5);
  const auto mr = pd.register_local(buffer);
  const std::array receive{mr.scatter(std::span(buffer).last(32))};
  const std::array send{mr.gather(std::span<const std::byte>(buffer).first(32))};
  qp.post_receive(1, receive);
  qp.post_send(2, send);
  const auto completions = poll_completions(cq, 2);
  ASSERT_EQ(completions.size(), 2U);
  for (const auto& c : completions) EXPECT_TRUE(c.ok()) << c.to_string();
  EXPECT_TRUE(std::equal(buffer.begin(), buffer.begin() + 32, buffer.begin() + 32));
}

TEST_F(Setup, HandshakeRejectsAnEndpointWithoutAddress) {
  if (context.query_port().link_layer != LinkLayer::ethernet) GTEST_SKIP() << "RoCE only";
  auto prepared = QueuePairBuilder(pd, cq, cq).build();
  Endpoint remote = prepared.endpoint();
  remote.gid = Gid{};
  EXPECT_TRUE(ibv_test::throws_error(ErrorKind::invalid_argument,
                                     [&] { (void)std::move(prepared).handshake(remote); },
                                     {"no GID"}));
}

TEST_F(Setup, QueuePairKeepsItsProtectionDomainAndQueuesAlive) {
  std::vector<std::byte> buffer(128);
  fill_pattern(std::span(buffer).first(64), 9);
  std::optional<QueuePair> qp;
  std::optional<MemoryRegion> mr;
  {
    // Every handle the user made goes out of scope here; the QP and the MR must hold on.
    const Context local_context = open_test_device();
    const ProtectionDomain local_pd(local_context);
    const CompletionQueue local_cq(local_context, 8);
    auto prepared = QueuePairBuilder(local_pd, local_cq, local_cq).build();
    const auto self = prepared.endpoint();
    qp.emplace(std::move(prepared).handshake(self));
    mr.emplace(local_pd.register_local(buffer));
  }
  EXPECT_EQ(qp->send_cq().shared().use_count(), 2);  // the QP's core holds it as send and recv CQ
  const std::array receive{mr->scatter(std::span(buffer).last(64))};
  const std::array send{mr->gather(std::span<const std::byte>(buffer).first(64))};
  qp->post_receive(1, receive);
  qp->post_send(2, send);
  const auto completions = poll_completions(qp->send_cq(), 2);
  ASSERT_EQ(completions.size(), 2U);
  for (const auto& c : completions) EXPECT_TRUE(c.ok()) << c.to_string();
  EXPECT_TRUE(std::equal(buffer.begin(), buffer.begin() + 64, buffer.begin() + 64));
  // Destroying the QP first, then the MR, releases the rest in order without errors.
  qp.reset();
  mr.reset();
}

}  // namespace
}  // namespace ibv::test

namespace ibv::test {
namespace {

TEST_F(Setup, ReceivesPostedBeforeTheHandshakeCatchTheFirstMessage) {
  std::vector<std::byte> buffer(256);
  fill_pattern(std::span(buffer).first(128), 13);
  const auto mr = pd.register_local(buffer);
  const CompletionQueue cq_b(context, 8);
  auto prepared_a = QueuePairBuilder(pd, cq, cq).build();
  auto prepared_b = QueuePairBuilder(pd, cq_b, cq_b).build();
  // b posts its receive while still in INIT, before it is connected.
  const std::array into{mr.scatter(std::span(buffer).last(128))};
  std::array receives{ReceiveRequest(7, into)};
  prepared_b.post_receive(receives);
  const auto endpoint_a = prepared_a.endpoint();
  const auto endpoint_b = prepared_b.endpoint();
  const auto a = std::move(prepared_a).handshake(endpoint_b);
  const auto b = std::move(prepared_b).handshake(endpoint_a);
  const std::array data{mr.gather(std::span(buffer).first(128))};
  a.post_send(8, data);
  EXPECT_TRUE(poll_one(cq).ok());
  const auto received = poll_one(cq_b);
  ASSERT_TRUE(received.ok()) << received.to_string();
  EXPECT_EQ(received.wr_id(), 7U);
  EXPECT_TRUE(std::equal(buffer.begin(), buffer.begin() + 128, buffer.begin() + 128));
}

}  // namespace
}  // namespace ibv::test
