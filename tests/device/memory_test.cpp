// SPDX-License-Identifier: MIT
// Device tests of the memory helpers on the real device: RegisteredMemory in normal, huge and
// transparent huge pages and on NUMA node 0 carrying RDMA writes and reads over a loopback
// Channel pair, the clear errors for missing huge pages and a node that does not exist, the
// BufferPool under a stream of more messages than buffers, and thread placement on rxe.
#include <linux/mempolicy.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "device/device_fixture.hpp"
#include "ibv/ibv.hpp"
#include "support/error_matchers.hpp"

namespace ibv::test {
namespace {

using ibv_test::throws_error;

bool in_testbed() {
  const char* testbed = std::getenv("IBV_TESTBED");
  return testbed != nullptr && std::string(testbed) == "1";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  std::getline(in, text);
  return text;
}

class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QueuePairSettings settings;
    settings.gid_index = test_gid_index(context);
    settings.rnr_retry = RnrRetryCount::infinite();
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings);
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
  }

  /// Writes a pattern from `source` into `target` (remote-accessible) with a's RDMA write, reads
  /// it back into a fresh local buffer with RDMA read, and checks both copies.
  void write_and_read_back(const RegisteredMemory& source, const RegisteredMemory& target,
                           std::size_t length, unsigned seed) {
    fill_pattern(source.bytes().first(length), seed);
    a->write(std::array{source.region().gather(source.bytes().first(length))},
             target.region().remote().sub_region(0, length));
    EXPECT_TRUE(same_bytes(source.bytes().first(length), target.bytes().first(length)));
    const auto back = RegisteredMemory::local(pd, length);
    a->read(std::array{back.region().scatter(back.bytes().first(length))},
            target.region().remote().sub_region(0, length));
    EXPECT_TRUE(same_bytes(source.bytes().first(length), back.bytes().first(length)));
  }

  Context context = open_test_device();
  ProtectionDomain pd{context};
  std::optional<Channel> a;
  std::optional<Channel> b;
};

// --- page-aligned ------------------------------------------------------------------------------

TEST_F(MemoryTest, PageAlignedMemoryCarriesRdmaWriteAndRead) {
  const auto source = RegisteredMemory::local(pd, 10000);
  const auto target =
      RegisteredMemory::remote_accessible(pd, 10000, RemoteAccess::write() | RemoteAccess::read());
  EXPECT_EQ(source.size(), 12288U);  // rounded to 4 KiB pages
  EXPECT_EQ(target.region().length(), target.size());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(target.bytes().data()) % system_page_size(), 0U);
  write_and_read_back(source, target, 10000, 1);
}

TEST_F(MemoryTest, MovingKeepsTheRegistrationValid) {
  auto source = RegisteredMemory::local(pd, 4096);
  auto target = RegisteredMemory::remote_accessible(pd, 4096, RemoteAccess::all());
  RegisteredMemory moved_target(std::move(target));
  auto other = RegisteredMemory::local(pd, 4096);
  other = std::move(source);  // deregisters and frees other's own memory first
  write_and_read_back(other, moved_target, 4096, 2);
}

// --- huge pages --------------------------------------------------------------------------------

/// Sets /proc/sys/vm/nr_hugepages for the test and restores the old value afterwards.
class HugePageReservation {
 public:
  HugePageReservation() : old_(read_file(kFile)) {}
  HugePageReservation(const HugePageReservation&) = delete;
  HugePageReservation& operator=(const HugePageReservation&) = delete;
  ~HugePageReservation() { set(old_); }

  static void set(const std::string& count) {
    std::ofstream out(kFile);
    out << count << '\n';
  }

 private:
  static constexpr const char* kFile = "/proc/sys/vm/nr_hugepages";
  std::string old_;
};

TEST_F(MemoryTest, HugePagesCarryRdmaAndTheirAbsenceIsExplained) {
  if (!in_testbed()) {
    GTEST_SKIP() << "changes the machine's huge page reservation (/proc/sys/vm/nr_hugepages): "
                    "runs only in the testbed (IBV_TESTBED=1), whose guest is its own kernel";
  }
  const std::size_t huge = default_huge_page_size();
  ASSERT_EQ(huge, 2U << 20U) << "the testbed's x86-64 kernel has 2 MiB default huge pages";
  const HugePageReservation restore;
  const auto options = AllocationOptions::huge_pages();

  HugePageReservation::set("0");
  EXPECT_TRUE(throws_error(ErrorKind::resource,
                           [&] { (void)RegisteredMemory::local(pd, 3U << 20U, options); },
                           {"2 MiB huge pages (2 pages)", "0 huge pages of 2 MiB reserved",
                            "0 free", "echo 2 > /proc/sys/vm/nr_hugepages"}));

  HugePageReservation::set("4");
  const auto before = huge_page_counts();
  ASSERT_TRUE(before.has_value());
  ASSERT_EQ(before->total, 4U) << "the guest could not reserve 4 huge pages";
  ASSERT_EQ(before->free, 4U);
  {
    const auto target =
        RegisteredMemory::remote_accessible(pd, 3U << 20U, RemoteAccess::all(), options);
    EXPECT_EQ(target.size(), 4U << 20U);
    EXPECT_EQ(target.allocation().page_size(), huge);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(target.bytes().data()) % huge, 0U);
    // registration pinned (faulted in) both huge pages of the pool
    EXPECT_EQ(huge_page_counts()->free, 2U);
    const auto source = RegisteredMemory::local(pd, 3U << 20U);
    write_and_read_back(source, target, 3U << 20U, 3);
  }
  EXPECT_EQ(huge_page_counts()->free, 4U) << "deregistered and unmapped: the pages are back";
}

TEST_F(MemoryTest, TransparentHugePagesCarryRdma) {
  const std::string enabled = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  const auto options = AllocationOptions::transparent_huge_pages();
  if (enabled.find("[never]") != std::string::npos) {
    EXPECT_TRUE(throws_error(ErrorKind::unsupported, [&] { (void)Allocation(4096, options); },
                             {"never", "madvise"}));
    return;
  }
  const auto target =
      RegisteredMemory::remote_accessible(pd, 3U << 20U, RemoteAccess::all(), options);
  EXPECT_EQ(target.allocation().page_size(), 2U << 20U) << enabled;
  EXPECT_EQ(target.size(), 4U << 20U);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(target.bytes().data()) % (2U << 20U), 0U);
  const auto source = RegisteredMemory::local(pd, 1U << 20U);
  write_and_read_back(source, target, 1U << 20U, 4);
}

// --- NUMA --------------------------------------------------------------------------------------

/// The node of the page at `address` (the raw system call: the test binary does not link
/// libnuma).
int node_of(const std::byte* address) {
  int node = -1;
  if (syscall(SYS_get_mempolicy, &node, nullptr, 0, address, MPOL_F_NODE | MPOL_F_ADDR) != 0) {
    ADD_FAILURE() << "get_mempolicy: errno " << errno;
  }
  return node;
}

/// Runs `body` in a new thread pinned to NUMA node `node`, so that memory it touches first
/// lands on `node` unless a binding says otherwise.
template <typename Body>
void on_thread_pinned_to(int node, Body&& body) {
  std::exception_ptr failure;
  std::thread([&] {
    try {
      (void)pin_thread_to_node(node);
      body();
    } catch (...) {
      failure = std::current_exception();
    }
  }).join();
  if (failure) std::rethrow_exception(failure);
}

// On every node (the testbed has node 0 only, or more with `testbed/run --numa-nodes N`). The
// memory is registered (so faulted in) by a thread pinned to another node where there is one:
// only the binding puts it on the node asked for.
TEST_F(MemoryTest, MemoryOnEachNumaNodeCarriesRdmaAndLiesThere) {
  const std::vector<int> nodes = numa_nodes();
  ASSERT_FALSE(nodes.empty());
  EXPECT_EQ(nodes.front(), 0);
  constexpr std::size_t kSize = 64U << 10U;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const int node = nodes[i];
    const int elsewhere = nodes[(i + 1) % nodes.size()];
    SCOPED_TRACE("NUMA node " + std::to_string(node) + ", touched from node " +
                 std::to_string(elsewhere));
    std::optional<RegisteredMemory> target;
    std::optional<RegisteredMemory> unbound;
    on_thread_pinned_to(elsewhere, [&] {
      target.emplace(RegisteredMemory::remote_accessible(pd, kSize, RemoteAccess::all(),
                                                         AllocationOptions{}.on_node(node)));
      unbound.emplace(RegisteredMemory::local(pd, kSize));
    });
    EXPECT_EQ(target->allocation().numa_node(), node);
    for (const std::size_t offset : {std::size_t{0}, kSize - 1}) {
      EXPECT_EQ(node_of(target->bytes().data() + offset), node) << "offset " << offset;
      // the control: without a binding the pages follow the thread that touched them first
      EXPECT_EQ(node_of(unbound->bytes().data() + offset), elsewhere) << "offset " << offset;
    }
    const auto source = RegisteredMemory::local(pd, kSize, AllocationOptions{}.on_node(node));
    write_and_read_back(source, *target, kSize, 5);
  }
}

TEST_F(MemoryTest, ANumaNodeThatDoesNotExistIsNamed) {
  const auto nodes = numa_nodes();
  ASSERT_FALSE(nodes.empty());
  EXPECT_EQ(nodes.front(), 0);
  EXPECT_TRUE(throws_error(
      ErrorKind::not_found,
      [&] { (void)RegisteredMemory::local(pd, 4096, AllocationOptions{}.on_node(63)); },
      {"NUMA node 63 does not exist", "nodes with memory: " + format_cpu_list(nodes)}));
  EXPECT_TRUE(throws_error(ErrorKind::not_found, [] { (void)pin_thread_to_node(63); },
                           {"NUMA node 63 does not exist", "nodes online"}));
}

// --- buffer pool -------------------------------------------------------------------------------

TEST_F(MemoryTest, BufferPoolHandsOutEveryBufferOnceAndTakesThemBack) {
  BufferPool pool(pd, 100, 4);
  EXPECT_EQ(pool.stride(), 128U);
  EXPECT_EQ(pool.capacity(), 4U);
  EXPECT_EQ(pool.memory().size(), system_page_size());  // 512 B rounded to a page
  std::vector<PooledBuffer> held;
  std::map<std::uint32_t, std::byte*> seen;
  for (int i = 0; i < 4; ++i) {
    held.push_back(pool.acquire());
    seen[held.back().index()] = held.back().bytes().data();
    EXPECT_EQ(held.back().bytes().size(), 100U);
  }
  EXPECT_EQ(seen.size(), 4U) << "four distinct buffers";
  for (const auto& [index, data] : seen) {
    EXPECT_EQ(data, pool.memory().bytes().data() + std::size_t{index} * 128U);
  }
  EXPECT_EQ(pool.available(), 0U);
  EXPECT_EQ(pool.in_use(), 4U);
  EXPECT_FALSE(pool.try_acquire().has_value());
  EXPECT_TRUE(throws_error(ErrorKind::resource, [&] { (void)pool.acquire(); },
                           {"all 4 buffers of 100 B in use", "release"}));
  const std::uint32_t released = held[2].index();
  held[2].release();
  EXPECT_FALSE(held[2]);
  EXPECT_EQ(pool.available(), 1U);
  const auto again = pool.acquire();
  EXPECT_EQ(again.index(), released);
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)again.gather(101); },
                           {"length", "101"}));
  EXPECT_EQ(again.gather(100).length(), 100U);
  EXPECT_EQ(again.scatter().lkey(), pool.region().lkey());
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument, [&] { (void)again.remote(); }));
  held.clear();
  EXPECT_EQ(pool.available(), 3U);
}

TEST_F(MemoryTest, AHandleKeepsThePoolsMemoryAliveAfterThePool) {
  std::optional<BufferPool> pool(std::in_place, pd, 4096, 2,
                                 BufferPoolOptions{.access = RemoteAccess::all()});
  PooledBuffer kept = pool->acquire();
  pool.reset();  // the handle still owns a share: registered memory stays valid
  const auto source = RegisteredMemory::local(pd, 4096);
  fill_pattern(source.bytes(), 6);
  a->write(std::array{source.region().gather(source.bytes())}, kept.remote());
  EXPECT_TRUE(same_bytes(source.bytes(), kept.bytes()));
  kept.release();  // the last share: deregisters and frees (the leak check sees no MR left)
}

TEST_F(MemoryTest, BufferPoolCarriesAStreamOfMoreMessagesThanBuffers) {
  constexpr std::size_t kBuffers = 4;
  constexpr std::size_t kMessages = 24;
  constexpr std::size_t kSize = 512;
  BufferPool send_pool(pd, kSize, kBuffers);
  BufferPool receive_pool(pd, kSize, kBuffers);
  std::deque<std::pair<PooledBuffer, PendingWork>> sends;
  std::deque<std::pair<PooledBuffer, PendingWork>> receives;
  std::map<std::uint32_t, int> send_uses;
  const auto post_receive = [&] {
    PooledBuffer buffer = receive_pool.acquire();
    PendingWork work = b->post_receive(std::array{buffer.scatter()});
    receives.emplace_back(std::move(buffer), std::move(work));
  };
  for (std::size_t i = 0; i < kBuffers; ++i) post_receive();
  EXPECT_EQ(receive_pool.available(), 0U);

  std::vector<std::byte> expected(kSize);
  for (std::size_t message = 0; message < kMessages; ++message) {
    std::optional<PooledBuffer> buffer = send_pool.try_acquire();
    if (!buffer) {  // every send buffer in flight: wait for the oldest and reuse its buffer
      sends.front().second.wait();
      sends.pop_front();
      buffer = send_pool.try_acquire();
    }
    ASSERT_TRUE(buffer.has_value());
    ++send_uses[buffer->index()];
    fill_pattern(buffer->bytes(), static_cast<unsigned>(message));
    PendingWork work = a->post_send(std::array{buffer->gather()});
    sends.emplace_back(std::move(*buffer), std::move(work));

    const WorkCompletion received = receives.front().second.wait();
    EXPECT_EQ(received.byte_length(), kSize);
    fill_pattern(expected, static_cast<unsigned>(message));
    EXPECT_TRUE(same_bytes(expected, receives.front().first.bytes())) << "message " << message;
    receives.pop_front();                                // the buffer goes back to the pool ...
    if (message + kBuffers < kMessages) post_receive();  // ... and is posted again if needed
  }
  while (!sends.empty()) {
    sends.front().second.wait();
    sends.pop_front();
  }
  EXPECT_EQ(send_pool.available(), kBuffers);
  EXPECT_EQ(send_uses.size(), kBuffers);
  for (const auto& [index, uses] : send_uses) {
    EXPECT_EQ(uses, static_cast<int>(kMessages / kBuffers)) << "send buffer " << index;
  }
  EXPECT_TRUE(receives.empty());
  EXPECT_EQ(receive_pool.available(), kBuffers);
}

// --- thread placement --------------------------------------------------------------------------

TEST_F(MemoryTest, DeviceNodeIsReportedAndTheThreadLeftAloneWhenUnknown) {
  const DeviceNumaNode node = device_numa_node(context);
  EXPECT_EQ(node.device, context.name());
  if (in_testbed()) {  // rxe0 over dummy0: no PCI device anywhere
    EXPECT_FALSE(node.known()) << node.to_string();
    EXPECT_NE(node.reason.find("network device dummy0"), std::string::npos) << node.reason;
    EXPECT_EQ(near_device(context).numa_node, std::nullopt);
  }
  std::optional<DevicePlacement> placement;
  std::thread([&] { EXPECT_NO_THROW(placement = pin_thread_to_device(context)); }).join();
  ASSERT_TRUE(placement.has_value());
  EXPECT_EQ(placement->thread.has_value(), node.known()) << placement->to_string();
  if (!node.known()) {
    EXPECT_NE(placement->to_string().find("NUMA node unknown"), std::string::npos);
    EXPECT_NE(placement->to_string().find("thread not pinned"), std::string::npos);
  }
}

TEST_F(MemoryTest, PinningToANodeRestrictsTheThreadToItsCpus) {
  for (const int node : numa_nodes()) {
    SCOPED_TRACE("NUMA node " + std::to_string(node));
    const std::vector<int> node_cpus = parse_cpu_list(
        read_file("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist"));
    ASSERT_FALSE(node_cpus.empty());
    std::optional<ThreadPlacement> placement;
    std::vector<int> affinity;
    std::thread([&] {
      EXPECT_NO_THROW(placement = pin_thread_to_node(node));
      cpu_set_t set;
      CPU_ZERO(&set);
      if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (std::size_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
          if (CPU_ISSET(cpu, &set)) affinity.push_back(static_cast<int>(cpu));
        }
      }
    }).join();
    ASSERT_TRUE(placement.has_value());
    EXPECT_EQ(placement->node, node);
    EXPECT_EQ(placement->cpus, affinity) << "what it reports is what the thread got";
    EXPECT_EQ(placement->cpus, node_cpus) << "the node's CPUs (all allowed in the testbed)";
    EXPECT_EQ(placement->to_string(), "thread pinned to NUMA node " + std::to_string(node) +
                                          ": CPUs " + format_cpu_list(node_cpus));
  }
}

}  // namespace
}  // namespace ibv::test
