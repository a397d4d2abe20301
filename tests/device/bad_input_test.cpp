// SPDX-License-Identifier: MIT
// The bad-input sweep, part 2: the entry points that need a device (Context queries, completion
// queues, queue pair / channel / multi-channel / node builders, posting on channels, memory
// registration), tried with zero, the type's maximum, negative values where the type has them,
// and both sides of each bound the device sets (last valid, first invalid). Every invalid value
// must throw ibv::Error naming the argument before the bad verb reaches the device (builders: no
// queue pair is created, which the QP number counter shows; posts: nothing is posted), and must
// leave the object usable (a round trip on the channel afterwards gets its own data). The
// device-free half is tests/unit/bad_input_test.cpp; the inventory is docs/bad-input.md.
//
// BadInputMemlock: registering 64 MiB with RLIMIT_MEMLOCK lowered and CAP_IPC_LOCK dropped from
// the effective set (root in the testbed is otherwise exempt) fails with the locked-memory hint
// naming the limit in force and the size; both are restored afterwards (RAII, also when an
// assertion fails) and the same registration then succeeds.
//
// Inventory of this file (entry point: argument, bounds; "dev." = from query_device/query_port):
//   Context::query_port / gid_table / default_gid_index: port 1..physical_port_count
//   Context::query_gid: index a valid entry (< gid_table_length and in use)
//   CompletionQueue: min_entries 1..max_cqe
//   QueuePairBuilder::build: port; gid_index 0..255 and valid; max_send_wr / max_recv_wr
//     1..max_qp_wr; max_send_sge / max_recv_sge 1..max_sge; max_rd_atomic 1..max_qp_init_rd_atom;
//     max_dest_rd_atomic 1..max_qp_rd_atom; service_level 0..15; mtu <= port max; max_inline_data
//     <= what the device grants
//   ChannelBuilder::build: timeouts.operation / .drop > 0; completion_queue_size
//     max_send_wr + max_recv_wr..max_cqe; the queue pair settings above, before any CQ
//   Channel blocking calls: timeout > 0; posts: elements <= max_send_sge / max_recv_sge, inline
//     <= max_inline_data and not on a read, local length <= remote region (destination / source)
//   PendingWork::wait_for: timeout >= 0
//   MemoryRegion::gather / scatter: the span inside the region
//   ProtectionDomain::register_*: buffer non-empty; register_dmabuf: fd >= 0, length > 0
//   MultiChannelBuilder: world_size >= 1, rank < world_size, world_size - 1 <= max_qp, max_cq
//   MultiChannel: peer != rank and < world_size; batches checked element by element first;
//     blocking timeouts > 0
//   NodeBuilder: rank < world_size (or a rank of the config); barrier_timeout > 0
//   Node::barrier: options.timeout > 0; ranks sorted, unique, < world_size, include this rank
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "device_fixture.hpp"
#include "support/bad_input_cases.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using ibv_test::accepts;
using ibv_test::BadInputCase;
using ibv_test::rejects;
using ibv_test::run_cases;
using namespace std::chrono_literals;

/// A read of the caller's own type: it declares no Options, so it takes PostOptions (every
/// option), checked when posted.
struct UntypedRead {
  std::span<const ScatterElement> into;
  RemoteMemoryRegion source;
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return SendRequest::read(wr_id, into, source);
  }
};

constexpr std::uint32_t kU32Max = std::numeric_limits<std::uint32_t>::max();
constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr std::size_t kRegionBytes = 8192;

std::string str(std::int64_t value) { return std::to_string(value); }

/// A device, its attributes and a probe that tells whether a queue pair was created: QP numbers
/// are handed out cyclically (rxe, mlx5), so a probe QP made before and after an action gets
/// consecutive numbers only if the action created none in between (not even one it destroyed).
class BadInputDevice : public ::testing::Test {
 protected:
  /// The QP number of a throwaway queue pair.
  std::uint32_t probe_qp_number() {
    return QueuePairBuilder(pd, probe_cq, probe_cq)
        .max_send_wr(QueueDepth(1))
        .max_recv_wr(QueueDepth(1))
        .build()
        .endpoint()
        .qp_number;
  }

  /// `action` wrapped so that, when it throws, it must not have created a queue pair first.
  std::function<void()> creates_no_qp(std::function<void()> action) {
    return [this, action = std::move(action)] {
      const std::uint32_t before = probe_qp_number();
      try {
        action();
      } catch (...) {
        const std::uint32_t after = probe_qp_number();
        EXPECT_EQ(after, before + 1) << "a queue pair was created before the input was rejected";
        throw;
      }
    };
  }

  /// Builds a QP with `settings` (defaults otherwise).
  std::function<void()> build_qp(QueuePairSettings settings) {
    return creates_no_qp([this, settings] {
      (void)QueuePairBuilder(pd, probe_cq, probe_cq).settings(settings).build();
    });
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
  CompletionQueue probe_cq{context, 16};
  DeviceAttributes device = context.query_device();
  PortAttributes port = context.query_port();
  std::vector<GidEntry> gids = context.gid_table();
};

// --- Context queries and completion queues -------------------------------------------------

TEST_F(BadInputDevice, ContextQueriesAndCompletionQueues) {
  const auto count = device.physical_port_count;
  const std::uint32_t last_gid = gids.back().index;
  const std::uint32_t length = port.gid_table_length;
  std::vector<BadInputCase> cases{
      accepts("Context::query_port", "port", "1", [&] { (void)context.query_port(PortNumber{1}); }),
      rejects(
          "Context::query_port", "port", "0", [&] { (void)context.query_port(PortNumber{0}); },
          {"port 0"}, ErrorKind::not_found),
      rejects(
          "Context::query_port", "port", "count + 1",
          [&] { (void)context.query_port(PortNumber{static_cast<std::uint8_t>(count + 1)}); },
          {"port " + str(count + 1)}, ErrorKind::not_found),
      rejects(
          "Context::query_port", "port", "u8 max",
          [&] { (void)context.query_port(PortNumber{255}); }, {"port 255"}, ErrorKind::not_found),
      rejects(
          "Context::gid_table", "port", "0", [&] { (void)context.gid_table(PortNumber{0}); },
          {"port 0"}, ErrorKind::not_found),
      rejects(
          "Context::default_gid_index", "port", "count + 1",
          [&] {
            (void)context.default_gid_index(PortNumber{static_cast<std::uint8_t>(count + 1)});
          },
          {"port " + str(count + 1)}, ErrorKind::not_found),
      accepts("Context::query_gid", "index", "last valid entry " + str(last_gid),
              [&] { (void)context.query_gid(last_gid); }),
      rejects(
          "Context::query_gid", "index", "gid_table_length",
          [&] { (void)context.query_gid(length); }, {"GID index " + str(length)},
          ErrorKind::not_found),
      rejects(
          "Context::query_gid", "index", "u32 max", [&] { (void)context.query_gid(kU32Max); },
          {"GID index " + str(kU32Max)}, ErrorKind::not_found),
      rejects(
          "Context::query_gid", "port", "0", [&] { (void)context.query_gid(0, PortNumber{0}); },
          {"port 0"}, ErrorKind::not_found),

      rejects("CompletionQueue", "min_entries", "0", [&] { (void)CompletionQueue(context, 0); },
              {"min_entries 0"}),
      rejects("CompletionQueue", "min_entries", "-1", [&] { (void)CompletionQueue(context, -1); },
              {"min_entries -1"}),
      rejects("CompletionQueue", "min_entries", "int min",
              [&] { (void)CompletionQueue(context, std::numeric_limits<int>::min()); },
              {"min_entries -2147483648"}),
      accepts("CompletionQueue", "min_entries", "1", [&] { (void)CompletionQueue(context, 1); }),
      accepts("CompletionQueue", "min_entries", "max_cqe " + str(device.max_cqe),
              [&] { (void)CompletionQueue(context, device.max_cqe); }),
      rejects("CompletionQueue", "min_entries", "max_cqe + 1",
              [&] { (void)CompletionQueue(context, device.max_cqe + 1); },
              {"min_entries " + str(device.max_cqe + 1), "max_cqe"}),
      rejects("CompletionQueue", "min_entries", "int max",
              [&] { (void)CompletionQueue(context, kIntMax); }, {"min_entries " + str(kIntMax)}),
  };
  run_cases(cases);
}

// --- QueuePairBuilder ---------------------------------------------------------------------------

TEST_F(BadInputDevice, QueuePairBuilderChecksEverySettingBeforeCreating) {
  auto with = [&](const std::function<void(QueuePairSettings&)>& change) {
    QueuePairSettings s;
    change(s);
    return build_qp(s);
  };
  const auto count = device.physical_port_count;
  const std::uint32_t last_gid = gids.back().index;
  std::vector<BadInputCase> cases{
      rejects("QueuePairBuilder::build", "port", "0", with([](auto& s) { s.port = PortNumber{0}; }),
              {"port 0", "does not exist"}, ErrorKind::not_found),
      rejects("QueuePairBuilder::build", "port", "count + 1",
              with([&](auto& s) { s.port = PortNumber{static_cast<std::uint8_t>(count + 1)}; }),
              {"port " + str(count + 1), "does not exist"}, ErrorKind::not_found),
      rejects("QueuePairBuilder::build", "port", "u8 max",
              with([](auto& s) { s.port = PortNumber{255}; }), {"port 255"}, ErrorKind::not_found),

      accepts("QueuePairBuilder::build", "gid_index", "last valid entry " + str(last_gid),
              with([&](auto& s) { s.gid_index = last_gid; })),
      rejects("QueuePairBuilder::build", "gid_index", "last valid entry + 1",
              with([&](auto& s) { s.gid_index = last_gid + 1; }),
              {"gid_index " + str(last_gid + 1), "is not a valid entry",
               "has " + str(static_cast<std::int64_t>(gids.size())) + " GIDs",
               gids.back().gid.to_string()},
              ErrorKind::not_found),
      rejects("QueuePairBuilder::build", "gid_index", "256",
              with([](auto& s) { s.gid_index = 256; }), {"gid_index 256", "is not a valid entry"},
              ErrorKind::not_found),
      rejects("QueuePairBuilder::build", "gid_index", "u32 max",
              with([](auto& s) { s.gid_index = kU32Max; }),
              {"gid_index 4294967295", "is not a valid entry"}, ErrorKind::not_found),

      accepts("QueuePairBuilder::build", "max_send_wr", "max_qp_wr " + str(device.max_qp_wr),
              with([&](auto& s) {
                s.max_send_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr));
              })),
      rejects("QueuePairBuilder::build", "max_send_wr", "max_qp_wr + 1", with([&](auto& s) {
                s.max_send_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr) + 1);
              }),
              {"max_send_wr " + str(device.max_qp_wr + 1), "max_qp_wr"}),
      rejects("QueuePairBuilder::build", "max_send_wr", "2^31 - 1",
              with([](auto& s) { s.max_send_wr = QueueDepth(kIntMax); }),
              {"max_send_wr 2147483647"}),
      accepts("QueuePairBuilder::build", "max_recv_wr", "max_qp_wr", with([&](auto& s) {
                s.max_recv_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr));
              })),
      rejects("QueuePairBuilder::build", "max_recv_wr", "max_qp_wr + 1", with([&](auto& s) {
                s.max_recv_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr) + 1);
              }),
              {"max_recv_wr " + str(device.max_qp_wr + 1), "max_qp_wr"}),
      accepts("QueuePairBuilder::build", "max_send_sge", "max_sge " + str(device.max_sge),
              with([&](auto& s) {
                s.max_send_sge = SgeCount(static_cast<std::uint32_t>(device.max_sge));
              })),
      rejects("QueuePairBuilder::build", "max_send_sge", "max_sge + 1", with([&](auto& s) {
                s.max_send_sge = SgeCount(static_cast<std::uint32_t>(device.max_sge) + 1);
              }),
              {"max_send_sge " + str(device.max_sge + 1), "max_sge"}),
      accepts("QueuePairBuilder::build", "max_recv_sge", "max_sge", with([&](auto& s) {
                s.max_recv_sge = SgeCount(static_cast<std::uint32_t>(device.max_sge));
              })),
      rejects("QueuePairBuilder::build", "max_recv_sge", "max_sge + 1", with([&](auto& s) {
                s.max_recv_sge = SgeCount(static_cast<std::uint32_t>(device.max_sge) + 1);
              }),
              {"max_recv_sge " + str(device.max_sge + 1), "max_sge"}),

      accepts("QueuePairBuilder::build", "service_level", "15",
              with([](auto& s) { s.service_level = 15; })),
      rejects("QueuePairBuilder::build", "service_level", "16",
              with([](auto& s) { s.service_level = 16; }), {"service_level 16", "0..15"}),
      rejects("QueuePairBuilder::build", "service_level", "u8 max",
              with([](auto& s) { s.service_level = 255; }), {"service_level 255"}),
      accepts("QueuePairBuilder::build", "mtu", "port max " + str(port.max_mtu.bytes()),
              with([&](auto& s) { s.mtu = port.max_mtu; })),
      // The device decides how much it inlines, so this one is found after ibv_create_qp (the
      // QP is destroyed again); not wrapped in creates_no_qp.
      rejects("QueuePairBuilder::build", "max_inline_data", "65536",
              [&] {
                (void)QueuePairBuilder(pd, probe_cq, probe_cq)
                    .max_inline_data(InlineSize(65536))
                    .build();
              },
              {"max_inline_data 65536"}),
  };
  if (std::none_of(gids.begin(), gids.end(), [](const GidEntry& e) { return e.index == 255; })) {
    cases.push_back(rejects("QueuePairBuilder::build", "gid_index", "255 (an unused entry)",
                            with([](auto& s) { s.gid_index = 255; }), {"gid_index 255"},
                            ErrorKind::not_found));
  }
  const auto init_rd = device.max_qp_init_rd_atom;
  const auto dest_rd = device.max_qp_rd_atom;
  if (init_rd >= 1 && init_rd < 255) {
    cases.push_back(
        accepts("QueuePairBuilder::build", "max_rd_atomic", str(init_rd), with([&](auto& s) {
                  s.max_rd_atomic = ReadAtomicDepth(static_cast<std::uint8_t>(init_rd));
                })));
    cases.push_back(rejects(
        "QueuePairBuilder::build", "max_rd_atomic", "max_qp_init_rd_atom + 1", with([&](auto& s) {
          s.max_rd_atomic = ReadAtomicDepth(static_cast<std::uint8_t>(init_rd + 1));
        }),
        {"max_rd_atomic " + str(init_rd + 1), "max_qp_init_rd_atom"}));
  }
  if (dest_rd >= 1 && dest_rd < 255) {
    cases.push_back(rejects(
        "QueuePairBuilder::build", "max_dest_rd_atomic", "max_qp_rd_atom + 1", with([&](auto& s) {
          s.max_dest_rd_atomic = ReadAtomicDepth(static_cast<std::uint8_t>(dest_rd + 1));
        }),
        {"max_dest_rd_atomic " + str(dest_rd + 1), "max_qp_rd_atom"}));
  }
  if (port.max_mtu < Mtu::mtu4096()) {
    cases.push_back(rejects("QueuePairBuilder::build", "mtu", "4096 above the port's max",
                            with([](auto& s) { s.mtu = Mtu::mtu4096(); }), {"mtu 4096"}));
  }
  run_cases(cases);
}

// --- ChannelBuilder -----------------------------------------------------------------------------

TEST_F(BadInputDevice, ChannelBuilderChecksBeforeCreatingTheCompletionQueue) {
  auto build = [&](ChannelTimeouts timeouts, std::optional<int> cq_size,
                   QueuePairSettings settings = {}) {
    return creates_no_qp([this, timeouts, cq_size, settings] {
      ChannelBuilder builder(pd);
      builder.timeouts(timeouts).queue_pair(settings);
      if (cq_size) builder.completion_queue_size(*cq_size);
      (void)builder.build();
    });
  };
  const ChannelTimeouts ok{};
  const int sum = 256;  // default max_send_wr + max_recv_wr
  QueuePairSettings too_deep;
  too_deep.max_send_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr) + 1);
  QueuePairSettings bad_port;
  bad_port.port = PortNumber{0};
  QueuePairSettings bad_gid;
  bad_gid.gid_index = 256;
  std::vector<BadInputCase> cases{
      rejects("ChannelBuilder::build", "timeouts.operation", "0",
              build({.operation = 0ms, .drop = 1s}, {}), {"timeouts.operation 0 ms"}),
      rejects("ChannelBuilder::build", "timeouts.operation", "-1 ms",
              build({.operation = -1ms, .drop = 1s}, {}), {"timeouts.operation -1 ms"}),
      rejects("ChannelBuilder::build", "timeouts.operation", "min",
              build({.operation = std::chrono::milliseconds::min(), .drop = 1s}, {}),
              {"timeouts.operation"}),
      accepts("ChannelBuilder::build", "timeouts.operation", "1 ms",
              build({.operation = 1ms, .drop = 1ms}, {})),
      rejects("ChannelBuilder::build", "timeouts.drop", "0",
              build({.operation = 1s, .drop = 0ms}, {}), {"timeouts.drop 0 ms"}),
      rejects("ChannelBuilder::build", "timeouts.drop", "-1 ms",
              build({.operation = 1s, .drop = -1ms}, {}), {"timeouts.drop -1 ms"}),
      rejects("ChannelBuilder::build", "completion_queue_size", "0", build(ok, 0),
              {"completion_queue_size 0"}),
      rejects("ChannelBuilder::build", "completion_queue_size", "-1", build(ok, -1),
              {"completion_queue_size -1"}),
      rejects("ChannelBuilder::build", "completion_queue_size", "max_send_wr + max_recv_wr - 1",
              build(ok, sum - 1), {"completion_queue_size 255", "max_send_wr + max_recv_wr = 256"}),
      accepts("ChannelBuilder::build", "completion_queue_size", "max_send_wr + max_recv_wr",
              build(ok, sum)),
      accepts("ChannelBuilder::build", "completion_queue_size", "max_cqe",
              build(ok, device.max_cqe)),
      rejects("ChannelBuilder::build", "completion_queue_size", "max_cqe + 1",
              build(ok, device.max_cqe + 1),
              {"completion_queue_size " + str(device.max_cqe + 1), "max_cqe"}),
      rejects("ChannelBuilder::build", "completion_queue_size", "int max", build(ok, kIntMax),
              {"completion_queue_size 2147483647"}),
      rejects("ChannelBuilder::build", "max_send_wr", "max_qp_wr + 1", build(ok, {}, too_deep),
              {"ChannelBuilder::build", "max_send_wr " + str(device.max_qp_wr + 1)}),
      rejects("ChannelBuilder::build", "port", "0", build(ok, {}, bad_port), {"port 0"},
              ErrorKind::not_found),
      rejects("ChannelBuilder::build", "gid_index", "256", build(ok, {}, bad_gid),
              {"gid_index 256"}, ErrorKind::not_found),
  };
  if (2LL * device.max_qp_wr > device.max_cqe) {
    QueuePairSettings both_deep;
    both_deep.max_send_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr));
    both_deep.max_recv_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr));
    cases.push_back(
        rejects("ChannelBuilder::build", "max_send_wr + max_recv_wr", "2 * max_qp_wr > max_cqe",
                build(ok, {}, both_deep),
                {"max_send_wr + max_recv_wr = " + str(2LL * device.max_qp_wr), "max_cqe"}));
  }
  run_cases(cases);
}

// --- posting on a channel -----------------------------------------------------------------------

class BadInputChannel : public BadInputDevice {
 protected:
  void SetUp() override {
    QueuePairSettings settings;
    settings.gid_index = test_gid_index(context);
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings, {5s, 5s});
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
  }

  /// One message from a to b and one RDMA write, checked byte by byte: the channels still work
  /// and nothing a rejected call might have left posted takes the data.
  void round_trip(unsigned seed) {
    fill_pattern(a_buffer_span().first(1024), seed);
    const std::array into{mr_b.scatter(std::span(buffer_b).first(1024))};
    PendingWork received = b->post_receive(into);
    const std::array data{mr_a.gather(std::span<const std::byte>(buffer_a).first(1024))};
    EXPECT_TRUE(a->send(data).ok());
    EXPECT_EQ(received.wait().byte_length(), 1024U);
    EXPECT_TRUE(same_bytes(std::span(buffer_a).first(1024), std::span(buffer_b).first(1024)));
    fill_pattern(a_buffer_span().first(1024), seed + 1);
    EXPECT_TRUE(a->write(data, mr_b.remote().sub_region(4096, 1024)).ok());
    EXPECT_TRUE(
        same_bytes(std::span(buffer_a).first(1024), std::span(buffer_b).subspan(4096, 1024)));
  }

  std::span<std::byte> a_buffer_span() { return buffer_a; }

  std::vector<std::byte> buffer_a = std::vector<std::byte>(kRegionBytes);
  std::vector<std::byte> buffer_b = std::vector<std::byte>(kRegionBytes);
  // mr_a covers the first half of buffer_a only, so elements can run past it into real memory.
  MemoryRegion mr_a = pd.register_remote_accessible(std::span(buffer_a).first(kRegionBytes / 2),
                                                    RemoteAccess::all());
  MemoryRegion mr_b = pd.register_remote_accessible(buffer_b, RemoteAccess::all());
  std::optional<Channel> a;
  std::optional<Channel> b;
};

TEST_F(BadInputChannel, RejectedPostsPostNothingAndLeaveTheChannelUsable) {
  const std::size_t half = kRegionBytes / 2;
  const auto whole_b = mr_b.remote();
  const std::array one_k{mr_a.gather(std::span<const std::byte>(buffer_a).first(1024))};
  const std::array four_k{mr_a.gather(std::span<const std::byte>(buffer_a).first(4096))};
  const std::array into_4k{mr_a.scatter(std::span(buffer_a).first(4096))};
  const std::array two{mr_a.gather(std::span<const std::byte>(buffer_a).first(16)),
                       mr_a.gather(std::span<const std::byte>(buffer_a).subspan(16, 16))};
  const std::array two_into{mr_a.scatter(std::span(buffer_a).first(16)),
                            mr_a.scatter(std::span(buffer_a).subspan(16, 16))};
  const std::uint32_t inline_max = a->queue_pair().max_inline_data();
  const std::array inline_over{GatherElement::from_raw(
      mr_a.address(), static_cast<std::uint32_t>(inline_max + 1), mr_a.lkey())};
  const std::array<std::optional<std::chrono::nanoseconds>, 3> bad_timeouts{
      0ns, -1ns, std::chrono::nanoseconds::min()};
  const std::array<const char*, 3> bad_names{"0", "-1 ns", "min"};

  std::vector<BadInputCase> cases{
      // local elements against their memory region
      accepts("MemoryRegion::gather", "data", "the whole region",
              [&] { (void)mr_a.gather(std::span<const std::byte>(buffer_a).first(half)); }),
      rejects("MemoryRegion::gather", "data", "one byte past the region",
              [&] { (void)mr_a.gather(std::span<const std::byte>(buffer_a).first(half + 1)); },
              {"element of " + str(half + 1) + " bytes", "lies outside its memory region"}),
      accepts("MemoryRegion::gather", "data", "0 bytes at the end",
              [&] { (void)mr_a.gather(std::span<const std::byte>(buffer_a).subspan(half, 0)); }),
      rejects("MemoryRegion::scatter", "data", "1 byte just past the end",
              [&] { (void)mr_a.scatter(std::span(buffer_a).subspan(half, 1)); },
              {"element of 1 bytes", "lies outside"}),
      rejects("MemoryRegion::scatter", "data", "starting 1 byte before the region",
              [&] {
                const MemoryRegion middle =
                    pd.register_local(std::span(buffer_b).subspan(1024, 1024));
                (void)middle.scatter(std::span(buffer_b).subspan(1023, 2));
              },
              {"element of 2 bytes", "lies outside"}),
      rejects("ProtectionDomain::register_local", "buffer", "empty",
              [&] { (void)pd.register_local({}); }, {"buffer", "empty"}),
      rejects("ProtectionDomain::register_remote_accessible", "buffer", "empty",
              [&] { (void)pd.register_remote_accessible({}, RemoteAccess::all()); },
              {"buffer", "empty"}),
      rejects("ProtectionDomain::register_dmabuf", "fd", "-1",
              [&] { (void)pd.register_dmabuf(-1, 0, 4096, 0, RemoteAccess::none()); }, {"fd -1"}),
      rejects("ProtectionDomain::register_dmabuf", "length", "0",
              [&] { (void)pd.register_dmabuf(0, 0, 0, 0, RemoteAccess::none()); }, {"length"}),

      // requests against the queue pair and the remote region
      accepts("Channel::write", "destination", "exactly as long as the data",
              [&] { (void)a->write(four_k, whole_b.sub_region(0, 4096)); }),
      rejects("Channel::write", "destination", "one byte shorter than the data",
              [&] { (void)a->write(four_k, whole_b.sub_region(0, 4095)); },
              {"rdma_write", "moves 4096 bytes", "remote MR 4095 B", "destination"}),
      rejects("Channel::post_write_with_immediate", "destination", "0 bytes",
              [&] { (void)a->post_write_with_immediate(one_k, whole_b.sub_region(0, 0), 7); },
              {"moves 1024 bytes", "destination"}),
      rejects("Channel::read", "source", "one byte shorter than the destination",
              [&] { (void)a->read(into_4k, whole_b.sub_region(kRegionBytes - 4095, 4095)); },
              {"rdma_read", "moves 4096 bytes", "source"}),
      rejects("Channel::post_send", "data", "2 elements (max_send_sge 1)",
              [&] { (void)a->post_send(two); }, {"2 elements", "max_send_sge of 1"}),
      rejects("Channel::post_receive", "into", "2 elements (max_recv_sge 1)",
              [&] { (void)b->post_receive(two_into); }, {"2 elements", "max_recv_sge of 1"}),
      rejects("Channel::post_send", "inline data", "max_inline_data + 1 bytes",
              [&] {
                (void)a->post_send(inline_over,
                                   {.signaled = true, .inline_data = InlinePolicy::always});
              },
              {str(inline_max + 1) + " inline bytes", "max_inline_data of " + str(inline_max)}),
      // post_read's SignalingOptions have no inline_data (a compile error); a read of the
      // caller's own type takes every option and the queue pair's check refuses it
      rejects("Channel::post", "inline", "an inline read (an operation type of the caller's)",
              [&] {
                (void)a->post(UntypedRead{into_4k, whole_b.sub_region(0, 4096)},
                              PostOptions{.inline_data = InlinePolicy::always});
              },
              {"RDMA read", "can not be inline"}),
  };
  if (inline_max > 0) {
    const std::array inline_max_data{
        GatherElement::from_raw(mr_a.address(), inline_max, mr_a.lkey())};
    cases.push_back(
        accepts("Channel::post_send", "inline data", "max_inline_data bytes", [&, inline_max_data] {
          PendingWork received =
              b->post_receive(std::array{mr_b.scatter(std::span(buffer_b).first(inline_max))});
          a->post_send(inline_max_data, {.signaled = true, .inline_data = InlinePolicy::always})
              .wait();
          (void)received.wait();
        }));
  }
  // blocking calls: a timeout that is not positive is refused before anything is posted (a
  // posted and orphaned receive would steal the next message of the round trip below)
  for (std::size_t i = 0; i < bad_timeouts.size(); ++i) {
    const auto t = bad_timeouts[i];
    const std::string name = bad_names[i];
    cases.push_back(rejects("Channel::send", "timeout", name, [&, t] { (void)a->send(one_k, t); },
                            {"Channel::send", "timeout", "nothing was posted"}));
    cases.push_back(rejects("Channel::receive", "timeout", name,
                            [&, t] { (void)b->receive(std::array{mr_b.scatter_all()}, t); },
                            {"Channel::receive", "timeout", "nothing was posted"}));
    cases.push_back(rejects("Channel::write", "timeout", name,
                            [&, t] { (void)a->write(one_k, whole_b, t); }, {"timeout"}));
    cases.push_back(rejects("Channel::read", "timeout", name,
                            [&, t] { (void)a->read(into_4k, whole_b, t); }, {"timeout"}));
  }
  cases.push_back(rejects("Channel::send_with_immediate", "timeout", "-1 ns",
                          [&] { (void)a->send_with_immediate(one_k, 5, -1ns); }, {"timeout"}));
  cases.push_back(rejects("Channel::write_with_immediate", "timeout", "0",
                          [&] { (void)a->write_with_immediate(one_k, whole_b, 5, 0ns); },
                          {"timeout"}));
  cases.push_back(rejects("PendingWork::wait_for", "timeout", "-1 ns",
                          [&] {
                            PendingWork work = a->post_write(one_k, whole_b);
                            try {
                              (void)work.wait_for(-1ns);
                            } catch (const Error&) {
                              EXPECT_TRUE(work.wait().ok());  // still pending, still waitable
                              throw;
                            }
                          },
                          {"PendingWork::wait_for", "timeout -1 ns"}));
  cases.push_back(accepts("PendingWork::wait_for", "timeout", "0 (polls)", [&] {
    PendingWork work = a->post_write(one_k, whole_b);
    (void)work.wait_for(0ns);
    EXPECT_TRUE(work.wait().ok());
  }));
  run_cases(cases);
  round_trip(3);
}

TEST_F(BadInputChannel, AnElementOfAnotherProtectionDomainIsRefusedBeforeAnythingIsPosted) {
  // A buffer registered on a second protection domain of the same device. The device would fail
  // a request on it (local protection or QP operation error) or, for inline data, which it
  // copies at the post without looking at the key, not notice at all: every post refuses it.
  const ProtectionDomain other(context);
  std::vector<std::byte> elsewhere(kRegionBytes);
  const MemoryRegion foreign = other.register_remote_accessible(elsewhere, RemoteAccess::all());
  const auto bytes = [&](std::size_t n) { return std::span<const std::byte>(elsewhere).first(n); };
  const std::array small{foreign.gather(bytes(8))};  // inline by default
  const std::array large{foreign.gather(bytes(4096))};
  ASSERT_GT(large.front().length(), a->queue_pair().max_inline_data());
  const std::array into{foreign.scatter(std::span(elsewhere).first(1024))};
  const std::array mixed{mr_a.gather(std::span<const std::byte>(buffer_a).first(8)),
                         foreign.gather(bytes(8))};
  const auto whole_b = mr_b.remote();
  const std::vector<std::string> says{"element 0", "another protection domain"};
  const std::vector<BadInputCase> cases{
      rejects(
          "Channel::write", "data", "8 bytes (inline) on another protection domain",
          [&] { (void)a->write(small, whole_b.sub_region(0, 8)); }, says),
      rejects(
          "Channel::write", "data", "4 KiB on another protection domain",
          [&] { (void)a->write(large, whole_b.sub_region(0, 4096)); }, says),
      rejects(
          "Channel::post_send", "data", "8 bytes on another protection domain",
          [&] { (void)a->post_send(small); }, says),
      rejects(
          "Channel::read", "into", "1 KiB on another protection domain",
          [&] { (void)a->read(into, whole_b.sub_region(0, 1024)); }, says),
      rejects(
          "Channel::post_receive", "into", "1 KiB on another protection domain",
          [&] { (void)b->post_receive(into); }, says),
      rejects(
          "ChannelScope::post_all", "operations", "the second of two on another domain",
          [&] {
            a->scope([&](ChannelScope& scope) {
              scope.post_all(std::array{op::Write{std::span(mixed).first(1), whole_b},
                                        op::Write{std::span(mixed).subspan(1), whole_b}});
            });
          },
          says),
      rejects(
          "SharedReceiveQueue::post_receive", "into", "1 KiB on another protection domain",
          [&] {
            const SharedReceiveQueue srq(pd, QueueDepth(4), SgeCount(1));
            srq.post_receive(1, into);
          },
          says),
      rejects("MemoryRegion", "registration", "an ibv_mr of another protection domain",
              [&] {
                const int local_write = IBV_ACCESS_LOCAL_WRITE;  // an int: ibv_reg_mr's macro
                ibv_mr* raw = ibv_reg_mr(other.native(), elsewhere.data(), 64, local_write);
                ASSERT_NE(raw, nullptr);
                (void)MemoryRegion(pd, raw, RemoteAccess::none());
              },
              {"registration", "another protection domain"}),
  };
  run_cases(cases);
  round_trip(5);
}

// --- MultiChannel -----------------------------------------------------------------------------

class BadInputMultiChannel : public BadInputDevice {
 protected:
  static constexpr std::uint32_t kWorld = 3;

  void SetUp() override {
    QueuePairSettings settings;
    settings.gid_index = test_gid_index(context);
    nodes = connect_local_world(pd, kWorld, settings, {5s, 5s});
    for (std::uint32_t rank = 0; rank < kWorld; ++rank) buffers.emplace_back(kRegionBytes);
    for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
      mrs.push_back(pd.register_remote_accessible(buffers[rank], RemoteAccess::all()));
      remote_of.emplace_back(rank, mrs[rank].remote());
    }
  }

  std::vector<MultiChannel> nodes;
  std::vector<std::vector<std::byte>> buffers;
  std::vector<MemoryRegion> mrs;
  std::vector<PeerRemoteMemoryRegion> remote_of;
};

TEST_F(BadInputMultiChannel, PeersRanksAndBatchesAreCheckedBeforeAnythingIsPosted) {
  MultiChannel& zero = nodes[0];
  fill_pattern(buffers[0], 9);
  const std::array data{mrs[0].gather(std::span<const std::byte>(buffers[0]).first(1024))};
  const std::array into{mrs[0].scatter(std::span(buffers[0]).subspan(4096, 1024))};
  const std::array two_into{mrs[0].scatter(std::span(buffers[0]).subspan(4096, 16)),
                            mrs[0].scatter(std::span(buffers[0]).subspan(4112, 16))};
  const auto short_dest = remote_of[2].sub_region(0, 1023);
  std::vector<BadInputCase> cases;
  for (const std::uint32_t peer : {0U, kWorld, kU32Max}) {
    const std::string p = "peer " + str(peer);
    const std::string why = peer == 0 ? "itself" : "world size";
    cases.push_back(rejects("MultiChannel::channel", "peer", str(peer),
                            [&, peer] { (void)zero.channel(peer); }, {p, why}));
    cases.push_back(rejects("MultiChannel::execute", "peer", str(peer),
                            [&, peer] { (void)zero.execute(peer, op::Send{data}); },
                            {"MultiChannel::execute", p, why, "nothing was posted"}));
    cases.push_back(rejects("MultiChannel::post", "peer", str(peer),
                            [&, peer] { (void)zero.post(peer, op::Receive{into}); },
                            {"MultiChannel::post", p, why, "nothing was posted"}));
    cases.push_back(rejects("MultiChannel::execute", "peer", str(peer),
                            [&, peer] {
                              (void)zero.execute(peer, op::PeerWrite{data, remote_of[1]});
                            },
                            {p}));
    cases.push_back(rejects("MultiChannel::post", "peer", str(peer),
                            [&, peer] {
                              (void)zero.post(peer, op::PeerRead{into, remote_of[1]});
                            },
                            {p}));
  }
  cases.push_back(rejects(
      "MultiChannel::post_all", "operations[1].destination", "1 byte shorter than the data",
      [&] {
        const std::array writes{op::ToPeer{1U, op::PeerWrite{data, remote_of[1]}},
                                op::ToPeer{2U, op::PeerWrite{data, short_dest}}};
        (void)zero.post_all(writes);
      },
      {"operations[1]", "peer 2", "moves 1024 bytes", "destination", "nothing was posted"}));
  cases.push_back(rejects("MultiChannel::post_all", "operations[1].into",
                          "2 elements (max_recv_sge 1)",
                          [&] {
                            const std::array receives{op::ToPeer{1U, op::Receive{into}},
                                                      op::ToPeer{2U, op::Receive{two_into}}};
                            (void)zero.post_all(receives);
                          },
                          {"operations[1]", "max_recv_sge", "nothing was posted"}));
  cases.push_back(rejects("MultiChannelScope::post_all", "operations[0].source", "1 byte shorter",
                          [&] {
                            const std::array reads{op::ToPeer{2U, op::PeerRead{into, short_dest}}};
                            zero.scope([&](MultiChannelScope& scope) { scope.post_all(reads); });
                          },
                          {"operations[0]", "source", "nothing was posted"}));
  cases.push_back(rejects("ibv::op::to_each", "peers[1]", "listed twice",
                          [&] {
                            (void)op::to_each(std::array{1U, 1U}, op::Send{data});
                          },
                          {"to_each", "peer 1", "twice"}));
  cases.push_back(rejects("MultiChannel::post_all", "operations[1]", "3 (= world size)",
                          [&] {
                            (void)zero.post_all(op::to_each(std::array{1U, 3U}, op::Send{data}));
                          },
                          {"operations[1]", "peer 3", "world size is 3"}));
  for (const auto t : {0ns, -1ns}) {
    cases.push_back(rejects("MultiChannel::execute", "timeout", str(t.count()) + " ns",
                            [&, t] { (void)zero.execute(1, op::Send{data}, t); },
                            {"timeout", "nothing was posted"}));
    cases.push_back(rejects("MultiChannel::execute", "timeout", str(t.count()) + " ns",
                            [&, t] {
                              (void)zero.execute(1, op::PeerWrite{data, remote_of[1]}, t);
                            },
                            {"timeout", "nothing was posted"}));
    cases.push_back(rejects("MultiChannel::execute", "timeout", str(t.count()) + " ns",
                            [&, t] { (void)zero.execute(2, ibv::op::Receive{into}, t); },
                            {"timeout"}));
  }
  run_cases(cases);

  // Nothing was posted: no write reached rank 1 or 2, and the next message from each peer
  // lands in a receive posted now (a stray receive posted above would have taken it).
  EXPECT_TRUE(all_zero(buffers[1]));
  EXPECT_TRUE(all_zero(buffers[2]));
  for (const std::uint32_t peer : {1U, 2U}) {
    fill_pattern(std::span(buffers[peer]).first(1024), peer);
    PendingWork received = zero.post(
        peer,
        ibv::op::Receive{std::array{mrs[0].scatter(std::span(buffers[0]).subspan(6144, 1024))}});
    EXPECT_TRUE(nodes[peer]
                    .execute(0, ibv::op::Send{std::array{mrs[peer].gather(
                                    std::span<const std::byte>(buffers[peer]).first(1024))}})
                    .ok());
    EXPECT_EQ(received.wait().byte_length(), 1024U);
    EXPECT_TRUE(same_bytes(std::span(buffers[peer]).first(1024),
                           std::span(buffers[0]).subspan(6144, 1024)));
  }
}

TEST_F(BadInputDevice, MultiChannelAndNodeBuilders) {
  const auto too_many = static_cast<std::uint32_t>(
      std::max<std::int64_t>(device.max_qp, device.max_cq) + 2);  // peers = max + 1
  const auto one = net::NetworkConfigBuilder()
                       .add_host({.rank = 0,
                                  .hostname = "127.0.0.1",
                                  .port = 18515,
                                  .ibdev = context.name(),
                                  .comment = {}})
                       .build();
  std::vector<BadInputCase> cases{
      rejects("MultiChannelBuilder", "world_size", "0", [&] { MultiChannelBuilder(pd, 0, 0); },
              {"world_size"}),
      rejects("MultiChannelBuilder", "rank", "world_size", [&] { MultiChannelBuilder(pd, 3, 3); },
              {"rank 3", "world size 3"}),
      rejects("MultiChannelBuilder", "rank", "u32 max",
              [&] { MultiChannelBuilder(pd, kU32Max, kU32Max); }, {"rank 4294967295"}),
      rejects("MultiChannelBuilder::build", "world_size", "max_qp + 2",
              creates_no_qp([&] { (void)MultiChannelBuilder(pd, 0, too_many).build(); }),
              {"world_size " + str(too_many), "max_qp"}),
      rejects("MultiChannelBuilder::build", "world_size", "u32 max",
              creates_no_qp([&] { (void)MultiChannelBuilder(pd, 0, kU32Max).build(); }),
              {"world_size 4294967295", "max_qp"}),
      rejects("MultiChannelBuilder::build", "completion_queue_size", "0", creates_no_qp([&] {
                (void)MultiChannelBuilder(pd, 0, 2).completion_queue_size(0).build();
              }),
              {"completion_queue_size 0"}),
      rejects("net::NodeBuilder", "world_size", "0", [&] { net::NodeBuilder(pd, 0, 0); },
              {"world_size"}),
      rejects("net::NodeBuilder", "rank", "world_size", [&] { net::NodeBuilder(pd, 2, 2); },
              {"rank 2"}),
      rejects("net::NodeBuilder", "rank", "1 of a config of 1",
              [&] { net::NodeBuilder(pd, one, 1); }, {"rank 1"}),
      rejects("net::NodeBuilder::build", "barrier_timeout", "0",
              creates_no_qp([&] { (void)net::NodeBuilder(pd, 0, 2).barrier_timeout(0ms).build(); }),
              {"barrier_timeout 0 ms"}),
      rejects("net::NodeBuilder::build", "barrier_timeout", "-1 ms", creates_no_qp([&] {
                (void)net::NodeBuilder(pd, 0, 2).barrier_timeout(-1ms).build();
              }),
              {"barrier_timeout -1 ms"}),
      rejects("net::NodeBuilder::build", "barrier_timeout", "min", creates_no_qp([&] {
                (void)net::NodeBuilder(pd, 0, 2)
                    .barrier_timeout(std::chrono::milliseconds::min())
                    .build();
              }),
              {"barrier_timeout"}),
      // One ChannelSettings for every builder: what a NodeBuilder is given reaches its channels.
      rejects("net::NodeBuilder::build", "completion_queue_size", "0", creates_no_qp([&] {
                (void)net::NodeBuilder(pd, 0, 2).completion_queue_size(0).build();
              }),
              {"completion_queue_size 0"}),
      rejects("net::NodeBuilder::build", "settings.timeouts.drop", "0", creates_no_qp([&] {
                ChannelSettings settings;
                settings.timeouts.drop = 0ms;
                (void)net::NodeBuilder(pd, 0, 2).settings(settings).build();
              }),
              {"timeouts.drop 0 ms"}),
      rejects("ChannelBuilder::build", "shared_receive_queue and shared_receive_pool", "both",
              creates_no_qp([&] {
                ChannelSettings settings;
                settings.shared_receive_pool.emplace(pd, 4, 64);
                settings.shared_receive_queue = settings.shared_receive_pool->queue();
                (void)ChannelBuilder(pd).settings(settings).build();
              }),
              {"shared_receive_queue and shared_receive_pool", "both set"}),
      rejects("net::NodeBuilder::build", "max_send_wr", "max_qp_wr + 1", creates_no_qp([&] {
                QueuePairSettings s;
                s.max_send_wr = QueueDepth(static_cast<std::uint32_t>(device.max_qp_wr) + 1);
                (void)net::NodeBuilder(pd, 0, 2).queue_pair(s).build();
              }),
              {"max_send_wr"}),
  };
  run_cases(cases);
}

TEST_F(BadInputDevice, NodeBarrierOptionsAndRanks) {
  net::PreparedNode prepared = net::NodeBuilder(pd, 0, 1).build();
  const std::vector<net::NodeEndpoint> remote{prepared.endpoint()};
  net::Node node = std::move(prepared).handshake(remote);
  std::vector<BadInputCase> cases{
      rejects("net::Node::barrier", "options.timeout", "0",
              [&] { node.barrier({.algorithm = {}, .timeout = 0ms}); }, {"timeout 0 ms"}),
      rejects("net::Node::barrier", "options.timeout", "-1 ms",
              [&] { node.barrier({.algorithm = {}, .timeout = -1ms}); }, {"timeout -1 ms"}),
      rejects("net::Node::barrier", "options.algorithm", "7",
              [&] {
                node.barrier({.algorithm = static_cast<net::BarrierAlgorithm>(7), .timeout = {}});
              },
              {"algorithm"}),
      accepts("net::Node::barrier", "options.timeout", "1 ms",
              [&] { node.barrier({.algorithm = {}, .timeout = 1ms}); }),
      rejects("net::Node::barrier", "ranks", "{0, 1} in a world of 1",
              [&] {
                node.barrier(std::array{0U, 1U});
              },
              {"ranks", "rank 1"}),
      rejects("net::Node::barrier", "ranks", "empty",
              [&] { node.barrier(std::span<const std::uint32_t>{}); }, {"ranks", "empty"}),
      accepts("net::Node::barrier", "ranks", "{0}", [&] { node.barrier(std::array{0U}); }),
  };
  run_cases(cases);
  EXPECT_FALSE(node.barrier_poisoned()) << "bad input must not poison the barrier";
  node.barrier();
}

// --- the locked-memory limit ------------------------------------------------------------------

/// Lowers the soft RLIMIT_MEMLOCK to `limit` bytes and drops CAP_IPC_LOCK from this thread's
/// effective capabilities (the kernel does not apply the limit to holders of it, such as root),
/// restoring both when destroyed. ok() says whether both took effect.
class MemlockLimit {
 public:
  explicit MemlockLimit(rlim_t limit) {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    header_.pid = 0;
    if (getrlimit(RLIMIT_MEMLOCK, &original_limit_) != 0) return;
    if (syscall(SYS_capget, &header_, original_caps_.data()) != 0) return;
    have_originals_ = true;
    rlimit lowered = original_limit_;
    lowered.rlim_cur = limit;
    if (setrlimit(RLIMIT_MEMLOCK, &lowered) != 0) return;
    auto dropped = original_caps_;
    dropped[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
    if (syscall(SYS_capset, &header_, dropped.data()) != 0) return;
    ok_ = !has_ipc_lock();
  }
  MemlockLimit(const MemlockLimit&) = delete;
  MemlockLimit& operator=(const MemlockLimit&) = delete;
  MemlockLimit(MemlockLimit&&) = delete;
  MemlockLimit& operator=(MemlockLimit&&) = delete;
  ~MemlockLimit() {
    if (!have_originals_) return;
    if (syscall(SYS_capset, &header_, original_caps_.data()) != 0) {
      ADD_FAILURE() << "could not restore the capabilities (errno " << errno << ")";
    }
    if (setrlimit(RLIMIT_MEMLOCK, &original_limit_) != 0) {
      ADD_FAILURE() << "could not restore RLIMIT_MEMLOCK (errno " << errno << ")";
    }
  }

  [[nodiscard]] bool ok() const noexcept { return ok_; }

  /// Whether CAP_IPC_LOCK is in this thread's effective set now.
  static bool has_ipc_lock() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    std::array<__user_cap_data_struct, _LINUX_CAPABILITY_U32S_3> caps{};
    if (syscall(SYS_capget, &header, caps.data()) != 0) return false;
    return (caps[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
  }

 private:
  __user_cap_header_struct header_{};
  std::array<__user_cap_data_struct, _LINUX_CAPABILITY_U32S_3> original_caps_{};
  rlimit original_limit_{};
  bool have_originals_ = false;
  bool ok_ = false;
};

TEST(BadInputMemlock, RegisteringPastTheLockedMemoryLimitGivesTheHintWithTheNumbers) {
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  constexpr std::size_t kBig = std::size_t{64} << 20;  // 64 MiB = 65536 KiB
  std::vector<std::byte> big(kBig);
  const bool had_ipc_lock = MemlockLimit::has_ipc_lock();

  struct Limit {
    rlim_t bytes;
    int errno_value;      // what the kernel answers: ENOMEM past a limit, EPERM for a limit of 0
    std::string current;  // the limit as the hint prints it
  };
  for (const Limit& limit :
       {Limit{rlim_t{1} << 20, ENOMEM, "now 1024 KiB"}, Limit{0, EPERM, "now 0 KiB"}}) {
    SCOPED_TRACE(limit.current);
    {
      const MemlockLimit lowered(limit.bytes);
      ASSERT_TRUE(lowered.ok()) << "could not lower RLIMIT_MEMLOCK and drop CAP_IPC_LOCK";
      const auto error = ibv_test::error_of([&] { (void)pd.register_local(big); });
      ASSERT_TRUE(error.has_value()) << "64 MiB registered past the locked-memory limit";
      EXPECT_EQ(error->kind(), ErrorKind::resource) << error->what();
      EXPECT_EQ(error->errno_value(), limit.errno_value) << error->what();
      const std::string what = error->what();
      std::printf("[ memlock  ] %s\n", what.c_str());
      for (const std::string& mention :
           {std::string("ibv_reg_mr"), std::to_string(kBig) + " bytes",
            std::string("RLIMIT_MEMLOCK"), limit.current, std::string("65536 KiB more"),
            std::string("ulimit -l"), std::string("CAP_IPC_LOCK")}) {
        EXPECT_NE(what.find(mention), std::string::npos) << "no \"" << mention << "\": " << what;
      }
      EXPECT_NE(error->hint().find(limit.current), std::string::npos) << error->hint();
    }
    // Both restored: the same registration works again.
    EXPECT_EQ(MemlockLimit::has_ipc_lock(), had_ipc_lock);
    EXPECT_NO_THROW({
      const MemoryRegion mr = pd.register_local(big);
      EXPECT_EQ(mr.length(), kBig);
    });
  }
}

}  // namespace
}  // namespace ibv::test
