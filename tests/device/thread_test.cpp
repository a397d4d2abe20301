// SPDX-License-Identifier: MIT
// Device tests of what the documentation promises about threads, done concurrently and checked
// byte by byte. docs/safety.md and channel.hpp: "a channel is used by one thread at a time;
// different channels, even on one protection domain, may be used by different threads";
// multi_channel.hpp: the per-peer channels of a MultiChannel "may be used from different
// threads through channel(peer)". Under ThreadSanitizer (the tsan preset; `make test` suite
// tsan runs Threads*) these tests also show that the library adds no data race of its own.
// - ThreadsChannels: four threads, each building its own loopback pair of channels and its own
//   memory regions on one shared protection domain, then streaming writes, sends, reads and
//   scoped batches (signaled and unsignaled) in both directions;
// - ThreadsMultiChannel: three MultiChannels (ranks) in this process; one thread per pair of
//   ranks uses the two per-peer channels between them, so every MultiChannel has two of its
//   channels in use by two threads at once;
// - ThreadsMemoryRegions: threads that register and deregister memory on the shared protection
//   domain (local and remote-accessible) while other threads post on their own channels.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "device_fixture.hpp"

namespace ibv::test {
namespace {

using namespace std::chrono_literals;

constexpr std::size_t kMessage = 4096;  // bytes of one write, send or read
constexpr std::size_t kPieces = 4;      // requests of one scoped batch
constexpr std::size_t kPiece = kMessage / kPieces;
constexpr std::size_t kBuffer = 4 * kMessage;  // per side: write, send, read, batch areas
constexpr int kThreadRounds = 12;              // per thread; the testbed is emulated: keep small
constexpr ChannelTimeouts kThreadTimeouts{.operation = 20s, .drop = 20s};

/// What went wrong on one thread (empty: nothing). Threads record failures here instead of
/// using gtest assertions, and the test thread reports them, naming the thread.
struct Failures {
  std::vector<std::string> messages;

  void check(const ::testing::AssertionResult& result, const std::string& what) {
    if (!result) messages.push_back(what + ": " + result.message());
  }
  void expect(bool condition, const std::string& what) {
    if (!condition) messages.push_back(what);
  }
};

/// Runs `body(i, failures[i])` on `count` threads, released together so they overlap, and
/// returns each thread's failures; an exception a thread throws is recorded as a failure.
std::vector<Failures> run_on_threads(std::size_t count,
                                     const std::function<void(std::size_t, Failures&)>& body) {
  std::vector<Failures> failures(count);
  std::latch start(static_cast<std::ptrdiff_t>(count));
  std::vector<std::thread> threads;
  threads.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        body(i, failures[i]);
      } catch (const std::exception& error) {
        failures[i].messages.push_back(std::string("exception: ") + error.what());
      } catch (...) {
        failures[i].messages.emplace_back("an exception that is not a std::exception");
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return failures;
}

/// Fails the test for every failure a thread recorded.
void expect_no_failures(const std::vector<Failures>& failures, const std::string& thread_kind) {
  for (std::size_t i = 0; i < failures.size(); ++i) {
    EXPECT_THAT(failures[i].messages, ::testing::IsEmpty()) << thread_kind << " " << i;
  }
}

/// The default queue pair settings, with the test device's GID index.
QueuePairSettings thread_test_settings(const Context& context) {
  QueuePairSettings settings;
  settings.gid_index = test_gid_index(context);
  return settings;
}

/// One end of a stream: a channel and the part of a registered buffer it uses.
struct Side {
  Channel& channel;
  const MemoryRegion& mr;
  std::span<std::byte> bytes;

  [[nodiscard]] std::span<std::byte> area(std::size_t offset, std::size_t length) const {
    return bytes.subspan(offset, length);
  }
  [[nodiscard]] std::array<GatherElement, 1> gather(std::size_t offset, std::size_t length) const {
    return {mr.gather(std::span<const std::byte>(area(offset, length)))};
  }
  [[nodiscard]] std::array<ScatterElement, 1> scatter(std::size_t offset,
                                                      std::size_t length) const {
    return {mr.scatter(area(offset, length))};
  }
  /// The peer's view of area(offset, length) (`bytes` may start anywhere inside `mr`).
  [[nodiscard]] RemoteMemoryRegion remote(std::size_t offset, std::size_t length) const {
    const auto start = static_cast<std::size_t>(bytes.data() - mr.bytes().data());
    return mr.remote().sub_region(start + offset, length);
  }
};

/// `rounds` rounds between two connected sides, alternating direction: a blocking RDMA write,
/// a send into a receive posted first, an RDMA read, and a scoped batch of writes of which only
/// the last is signaled. Every transfer's data is checked; `seed` makes this stream's patterns
/// its own, so data that landed in another thread's buffers would show.
void stream_between(const Side& one, const Side& other, unsigned seed, int rounds,
                    Failures& failures) {
  for (int round = 0; round < rounds && failures.messages.empty(); ++round) {
    const bool forward = round % 2 == 0;
    const Side& from = forward ? one : other;
    const Side& to = forward ? other : one;
    const unsigned base = seed * 1000U + static_cast<unsigned>(round) * 10U;
    const std::string where = "round " + std::to_string(round) + ": ";

    // blocking write into the first area
    fill_pattern(from.area(0, kMessage), base);
    const auto written = from.channel.write(from.gather(0, kMessage), to.remote(0, kMessage));
    failures.expect(written.ok(), where + "write: " + written.to_string());
    failures.check(same_bytes(from.area(0, kMessage), to.area(0, kMessage)), where + "write");

    // send into a receive posted before it
    fill_pattern(from.area(kMessage, kMessage), base + 1);
    PendingWork receive = to.channel.post_receive(to.scatter(kMessage, kMessage));
    const auto sent = from.channel.send(from.gather(kMessage, kMessage));
    failures.expect(sent.ok(), where + "send: " + sent.to_string());
    const auto received = receive.wait();
    failures.expect(received.ok() && received.byte_length() == kMessage,
                    where + "receive: " + received.to_string());
    failures.check(same_bytes(from.area(kMessage, kMessage), to.area(kMessage, kMessage)),
                   where + "send");

    // read what the other side holds
    fill_pattern(to.area(2 * kMessage, kMessage), base + 2);
    const auto read =
        from.channel.read(from.scatter(2 * kMessage, kMessage), to.remote(2 * kMessage, kMessage));
    failures.expect(read.ok(), where + "read: " + read.to_string());
    failures.check(same_bytes(to.area(2 * kMessage, kMessage), from.area(2 * kMessage, kMessage)),
                   where + "read");

    // a scoped batch of writes, only the last one signaled
    fill_pattern(from.area(3 * kMessage, kMessage), base + 3);
    from.channel.scope([&](ChannelScope& scope) {
      for (std::size_t piece = 0; piece < kPieces; ++piece) {
        const std::size_t offset = 3 * kMessage + piece * kPiece;
        scope.post(ibv::op::Write{from.gather(offset, kPiece), to.remote(offset, kPiece)},
                   PostOptions{.signaled = piece + 1 == kPieces});
      }
    });
    failures.check(same_bytes(from.area(3 * kMessage, kMessage), to.area(3 * kMessage, kMessage)),
                   where + "scoped batch");
  }
}

/// A loopback pair of channels on `pd` with a registered buffer for each end, built by the
/// thread that uses it.
struct LoopbackPair {
  LoopbackPair(const ProtectionDomain& pd, const QueuePairSettings& settings)
      : mr_a(pd.register_remote_accessible(buffer_a, RemoteAccess::all())),
        mr_b(pd.register_remote_accessible(buffer_b, RemoteAccess::all())) {
    auto [channel_a, channel_b] = connect_channel_pair(pd, settings, kThreadTimeouts);
    a.emplace(std::move(channel_a));
    b.emplace(std::move(channel_b));
  }

  void stream(unsigned seed, int rounds, Failures& failures) {
    stream_between(Side{*a, mr_a, buffer_a}, Side{*b, mr_b, buffer_b}, seed, rounds, failures);
  }

  std::vector<std::byte> buffer_a = std::vector<std::byte>(kBuffer);
  std::vector<std::byte> buffer_b = std::vector<std::byte>(kBuffer);
  MemoryRegion mr_a;
  MemoryRegion mr_b;
  // After the memory: the channels go first.
  std::optional<Channel> a;
  std::optional<Channel> b;
};

TEST(ThreadsChannels, EachThreadStreamsOnItsOwnChannelsOnOneProtectionDomain) {
  constexpr std::size_t kThreads = 4;
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  const QueuePairSettings settings = thread_test_settings(context);
  const auto failures = run_on_threads(kThreads, [&](std::size_t thread, Failures& failed) {
    LoopbackPair pair(pd, settings);
    pair.stream(static_cast<unsigned>(thread) + 1, kThreadRounds, failed);
  });
  expect_no_failures(failures, "thread");
}

TEST(ThreadsChannels, ChannelsBuiltOnOneThreadAreUsedOnOthers) {
  // The other half of "one thread at a time": a channel may move between threads (here: built
  // by the test thread, used by another, destroyed by the test thread again).
  constexpr std::size_t kThreads = 3;
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  const QueuePairSettings settings = thread_test_settings(context);
  std::vector<std::unique_ptr<LoopbackPair>> pairs;
  for (std::size_t i = 0; i < kThreads; ++i) {
    pairs.push_back(std::make_unique<LoopbackPair>(pd, settings));
  }
  const auto failures = run_on_threads(kThreads, [&](std::size_t thread, Failures& failed) {
    pairs[thread]->stream(static_cast<unsigned>(thread) + 11, kThreadRounds, failed);
  });
  expect_no_failures(failures, "thread");
  // and back on this thread: each pair still works
  for (std::size_t i = 0; i < kThreads; ++i) {
    Failures after;
    pairs[i]->stream(static_cast<unsigned>(i) + 21, 2, after);
    EXPECT_THAT(after.messages, ::testing::IsEmpty()) << "pair " << i << " after the threads";
  }
}

TEST(ThreadsMultiChannel, PerPeerChannelsAreUsedFromDifferentThreads) {
  constexpr std::uint32_t kWorld = 3;
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  std::vector<MultiChannel> nodes =
      connect_local_world(pd, kWorld, thread_test_settings(context), kThreadTimeouts);
  // Each rank's buffer has one area of kBuffer bytes per peer.
  std::vector<std::vector<std::byte>> buffers;
  std::vector<MemoryRegion> mrs;
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    buffers.emplace_back(kWorld * kBuffer);
    mrs.push_back(pd.register_remote_accessible(buffers[rank], RemoteAccess::all()));
  }

  const std::vector<std::pair<std::uint32_t, std::uint32_t>> links{{0, 1}, {0, 2}, {1, 2}};
  const auto failures = run_on_threads(links.size(), [&](std::size_t thread, Failures& failed) {
    const auto [r, p] = links[thread];
    // The two channels of this link, each reached through its MultiChannel's channel(peer),
    // while another thread uses another channel of the same MultiChannel.
    const Side one{nodes[r].channel(p), mrs[r],
                   std::span(buffers[r]).subspan(p * kBuffer, kBuffer)};
    const Side other{nodes[p].channel(r), mrs[p],
                     std::span(buffers[p]).subspan(r * kBuffer, kBuffer)};
    stream_between(one, other, static_cast<unsigned>(thread) + 31, kThreadRounds, failed);
    // The MultiChannel knows which peer each channel's completions come from.
    const auto done = nodes[r].channel(p).write(one.gather(0, 64), other.remote(0, 64));
    failed.expect(
        nodes[r].peer_of(done) == p,
        "peer_of a completion on channel(" + std::to_string(p) + ") of rank " + std::to_string(r));
  });
  expect_no_failures(failures, "link thread");
}

TEST(ThreadsMemoryRegions, RegisterAndDeregisterOnOneProtectionDomainWhileOthersPost) {
  constexpr std::size_t kPosters = 2;
  constexpr std::size_t kRegistrars = 2;
  constexpr int kMinRegistrations = 20;  // per registrar, also if the posters finish first
  const Context context = open_test_device();
  const ProtectionDomain pd(context);
  const QueuePairSettings settings = thread_test_settings(context);
  std::atomic<std::size_t> posters_running{kPosters};
  std::vector<int> registrations(kRegistrars, 0);

  const auto failures =
      run_on_threads(kPosters + kRegistrars, [&](std::size_t thread, Failures& failed) {
        if (thread < kPosters) {
          try {
            LoopbackPair pair(pd, settings);
            pair.stream(static_cast<unsigned>(thread) + 41, kThreadRounds, failed);
          } catch (...) {
            posters_running.fetch_sub(1);
            throw;
          }
          posters_running.fetch_sub(1);
          return;
        }
        // A registrar: regions of varying sizes, local and remote-accessible, each checked
        // and deregistered again, while the posters' traffic goes on.
        const std::size_t registrar = thread - kPosters;
        int& count = registrations[registrar];
        for (; count < kMinRegistrations || posters_running.load() > 0; ++count) {
          const std::size_t size = 4096 * (1 + static_cast<std::size_t>(count) % 8);
          std::vector<std::byte> memory(size);
          const bool remote = (count + static_cast<int>(registrar)) % 2 == 0;
          const MemoryRegion mr = remote
                                      ? pd.register_remote_accessible(memory, RemoteAccess::all())
                                      : pd.register_local(memory);
          const auto address = reinterpret_cast<std::uintptr_t>(memory.data());
          failed.expect(mr.address() == address && mr.length() == size &&
                            mr.contains(address, size) && !mr.contains(address, size + 1),
                        "registration " + std::to_string(count) + " of " + std::to_string(size) +
                            " bytes describes other memory");
          failed.expect(mr.protection_domain() == pd, "a region on another protection domain");
          if (!failed.messages.empty()) return;
        }
      });
  expect_no_failures(failures, "thread");
  for (std::size_t i = 0; i < kRegistrars; ++i) {
    EXPECT_GE(registrations[i], kMinRegistrations) << "registrar " << i;
  }
}

}  // namespace
}  // namespace ibv::test
