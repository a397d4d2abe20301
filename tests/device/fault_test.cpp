// SPDX-License-Identifier: MIT
// Fault-injection device tests of the Channel layer: what a user sees when the peer or the link
// goes away under traffic, and that the process recovers.
// - FaultPeerKilled: a peer process (child role "fault-peer") receives a stream of RDMA writes
//   and sends, checks each message and confirms it; it is killed with SIGKILL mid-stream. The
//   survivor's outstanding and next requests end in typed errors (retry_exceeded, then flushed)
//   within the configured timeouts, what the peer confirmed is intact, the survivor tears down
//   without leaking and builds a new channel that moves data.
// - LinkFault: a private dummy netdev with its own rxe device (never rxe0/dummy0, which every
//   other test uses) carries a loopback stream; then (a) the netdev is set down, or (b) the rxe
//   device is removed. What rxe in kernel 6.1 does, found by experiment and asserted here:
//   (a) the port goes DOWN and the context gets IBV_EVENT_PORT_ERR at once, but loopback
//       traffic keeps flowing for about a second more (a few hundred messages here); then the
//       packet rxe tries to send fails locally: the request completes with
//       local_qp_operation_error and the QP goes to the error state (later requests flushed).
//   (b) `rdma link delete` of an rxe device that a process holds open blocks in the kernel
//       until the process has closed the device (rxe cannot disassociate user contexts, so no
//       IBV_EVENT_DEVICE_FATAL either): traffic keeps flowing meanwhile, and once the channels,
//       PD and context are destroyed, the removal completes and the device is gone.
//   Both end by removing the netdev and showing that a new channel on the test device works.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <span>
#include <sstream>
#include <stop_token>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "child_role.hpp"
#include "device_fixture.hpp"
#include "fault_injection.hpp"
#include "support/child_process.hpp"
#include "support/timing.hpp"

namespace ibv::test {
namespace {

using ibv_test::milliseconds_since;

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kPayload = 4096;  // bytes per RDMA write and per send
constexpr std::size_t kWindow = 16;     // receives the peer keeps posted; slots per region
constexpr std::size_t kMaxMessages = 512;
constexpr std::size_t kKillAfter = 24;  // confirmed messages before the peer is killed

/// What the peer writes back into the survivor's memory for each message it received and
/// checked: its sequence number + 1 (0: not confirmed) and checksums of what it received.
struct Confirmation {
  std::uint64_t sequence_plus_one;
  std::uint64_t write_sum;
  std::uint64_t send_sum;
};

/// Short, finite retries: a vanished peer fails a request after about (3 + 1) x 67 ms.
QueuePairSettings fault_settings(std::uint32_t gid_index) {
  QueuePairSettings settings;
  settings.gid_index = gid_index;
  settings.ack_timeout = AckTimeout(14);  // 4.096 us x 2^14, about 67 ms
  settings.retry_count = RetryCount(3);
  settings.max_send_wr = QueueDepth(2 * kWindow + 8);
  settings.max_recv_wr = QueueDepth(kWindow);
  return settings;
}

/// Message `sequence`'s payload for the write (kind 0) or the send (kind 1): sequence and kind
/// in the first 16 bytes, a pattern after them.
void fill_payload(std::span<std::byte> bytes, std::uint64_t sequence, std::uint64_t kind) {
  fill_pattern(bytes, static_cast<unsigned>(2 * sequence + kind));
  std::memcpy(bytes.data(), &sequence, sizeof sequence);
  std::memcpy(bytes.data() + sizeof sequence, &kind, sizeof kind);
}

/// FNV-1a over `bytes`.
std::uint64_t checksum(std::span<const std::byte> bytes) {
  std::uint64_t hash = 14695981039346656037ULL;
  for (const std::byte b : bytes)
    hash = (hash ^ std::to_integer<std::uint64_t>(b)) * 1099511628211ULL;
  return hash;
}

std::uint64_t expected_checksum(std::uint64_t sequence, std::uint64_t kind) {
  std::vector<std::byte> bytes(kPayload);
  fill_payload(bytes, sequence, kind);
  return checksum(bytes);
}

/// Writes an endpoint and a remote region to `path` (renamed into place: a reader sees all or
/// nothing).
void write_exchange_file(const std::filesystem::path& path, const Endpoint& endpoint,
                         const RemoteMemoryRegion& region) {
  const auto temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary);
    out << endpoint.to_json() << "\n"
        << region.address() << " " << region.length() << " " << region.rkey() << "\n";
  }
  std::filesystem::rename(temporary, path);
}

/// Reads write_exchange_file()'s file once it exists (nullopt if it does not within `timeout`).
std::optional<std::pair<Endpoint, RemoteMemoryRegion>> read_exchange_file(
    const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (Clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(5ms);
  }
  std::ifstream in(path);
  std::string json;
  std::getline(in, json);
  std::uint64_t address = 0;
  std::uint64_t length = 0;
  std::uint32_t rkey = 0;
  in >> address >> length >> rkey;
  return std::pair{Endpoint::from_json(json), RemoteMemoryRegion(address, length, rkey)};
}

// ---- the peer that gets killed ------------------------------------------------------------------

/// Child role "fault-peer" DIR: connects to the survivor through DIR/survivor and DIR/peer,
/// keeps kWindow receives posted, and for each message checks and confirms it by an RDMA write
/// of a Confirmation into the survivor's memory. Runs until killed (or kMaxMessages).
int run_fault_peer(const std::vector<std::string>& args) {
  if (args.size() != 1) return 2;
  const std::filesystem::path dir = args[0];
  Context context = open_test_device();
  ProtectionDomain pd(context);
  std::vector<std::byte> targets(kWindow * kPayload);  // the survivor's writes land here
  std::vector<std::byte> inbox(kWindow * kPayload);    // its sends land here
  std::array<Confirmation, 1> confirmation{};
  MemoryRegion targets_mr = pd.register_remote_accessible(targets, RemoteAccess::all());
  MemoryRegion inbox_mr = pd.register_local(inbox);
  MemoryRegion confirmation_mr = pd.register_local(std::as_writable_bytes(std::span(confirmation)));

  auto prepared = ChannelBuilder(pd)
                      .queue_pair(fault_settings(test_gid_index(context)))
                      .timeouts({.operation = 30s, .drop = 1s})
                      .build();
  const auto survivor = read_exchange_file(dir / "survivor", 30s);
  if (!survivor) return 3;
  const Endpoint own_endpoint = prepared.endpoint();
  Channel channel = std::move(prepared).handshake(survivor->first);
  const RemoteMemoryRegion confirmations = survivor->second;

  auto slot = [&](std::vector<std::byte>& bytes, std::size_t sequence) {
    return std::span(bytes).subspan((sequence % kWindow) * kPayload, kPayload);
  };
  std::vector<std::optional<PendingWork>> receives(kWindow);
  for (std::size_t i = 0; i < kWindow; ++i) {
    const std::array into{inbox_mr.scatter(slot(inbox, i))};
    receives[i].emplace(channel.post_receive(into));
  }
  write_exchange_file(dir / "peer", own_endpoint, targets_mr.remote());

  for (std::uint64_t sequence = 0; sequence < kMaxMessages; ++sequence) {
    auto& receive = receives[sequence % kWindow];
    const WorkCompletion received = receive->wait();
    // RC delivers in order: the write posted before this send has landed.
    confirmation[0] = {sequence + 1, checksum(slot(targets, sequence)),
                       received.byte_length() == kPayload ? checksum(slot(inbox, sequence)) : 0};
    const std::array into{inbox_mr.scatter(slot(inbox, sequence))};
    receive.emplace(channel.post_receive(into));  // before confirming: the survivor may reuse
    const std::array data{confirmation_mr.gather_all()};
    channel.write(data, confirmations.element<Confirmation>(sequence));
  }
  return 0;
}

const bool kFaultPeerRegistered = register_child_role("fault-peer", run_fault_peer);

/// Sends a loopback pair of fresh channels on `context` a write and a send, and checks both
/// arrived intact: the proof that a process can still move data after a fault.
void expect_new_channel_moves_data(const Context& context, std::uint32_t gid_index) {
  ProtectionDomain pd(context);
  std::vector<std::byte> source(2 * kPayload);
  std::vector<std::byte> target(2 * kPayload);
  fill_payload(std::span(source).first(kPayload), 1000, 0);
  fill_payload(std::span(source).last(kPayload), 1000, 1);
  MemoryRegion source_mr = pd.register_local(source);
  MemoryRegion target_mr = pd.register_remote_accessible(target, RemoteAccess::all());
  auto settings = fault_settings(gid_index);
  auto [a, b] = connect_channel_pair(pd, settings);
  const std::array write_data{source_mr.gather(std::span(source).first(kPayload))};
  a.write(write_data, target_mr.remote().sub_region(0, kPayload));
  const std::array into{target_mr.scatter(std::span(target).last(kPayload))};
  PendingWork receive = b.post_receive(into);
  const std::array send_data{source_mr.gather(std::span(source).last(kPayload))};
  a.send(send_data);
  EXPECT_EQ(receive.wait().byte_length(), kPayload);
  EXPECT_TRUE(same_bytes(source, target));
}

std::string join(const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

// ---- the peer process is killed -----------------------------------------------------------------

TEST(FaultPeerKilled, SurvivorGetsTypedErrorsKeepsConfirmedDataAndBuildsANewChannel) {
  const TemporaryDirectory dir("ibv_fault_peer");
  Context context = open_test_device();
  const std::uint32_t gid_index = test_gid_index(context);
  std::optional<ProtectionDomain> pd(std::in_place, context);
  std::vector<std::byte> sources(2 * kWindow * kPayload);  // write and send sources per slot
  std::vector<Confirmation> confirmations(kMaxMessages);
  std::optional<MemoryRegion> sources_mr(pd->register_local(sources));
  std::optional<MemoryRegion> confirmations_mr(pd->register_remote_accessible(
      std::as_writable_bytes(std::span(confirmations)), RemoteAccess::all()));

  auto prepared = ChannelBuilder(*pd)
                      .queue_pair(fault_settings(gid_index))
                      .timeouts({.operation = 10s, .drop = 10s})
                      .build();
  write_exchange_file(dir.path() / "survivor", prepared.endpoint(), confirmations_mr->remote());
  ChildProcess peer(child_role_command("fault-peer", {dir.path().string()}), 120s,
                    dir.path() / "peer.out");
  const auto peer_side = read_exchange_file(dir.path() / "peer", 60s);
  ASSERT_TRUE(peer_side) << peer.describe();
  std::optional<Channel> channel(std::move(prepared).handshake(peer_side->first));
  const RemoteMemoryRegion targets = peer_side->second;

  // Confirmed messages: the longest prefix with a sequence number written (the peer writes
  // them in order). The peer's RDMA writes change this memory behind the compiler's back.
  auto confirmed = [&] {
    std::size_t count = 0;
    while (count < kMaxMessages &&
           std::atomic_ref(confirmations[count].sequence_plus_one).load() == count + 1) {
      ++count;
    }
    return count;
  };
  struct InFlight {
    std::uint64_t sequence;
    PendingWork write;
    PendingWork send;
  };
  std::deque<InFlight> in_flight;
  std::uint64_t next = 0;
  // Posts message `next`: its write into the peer's slot, then its send.
  auto post_message = [&] {
    const std::size_t slot = next % kWindow;
    auto write_source = std::span(sources).subspan(2 * slot * kPayload, kPayload);
    auto send_source = std::span(sources).subspan((2 * slot + 1) * kPayload, kPayload);
    fill_payload(write_source, next, 0);
    fill_payload(send_source, next, 1);
    const std::array write_data{sources_mr->gather(std::span<const std::byte>(write_source))};
    const std::array send_data{sources_mr->gather(std::span<const std::byte>(send_source))};
    auto write = channel->post_write(write_data, targets.sub_region(slot * kPayload, kPayload));
    auto send = channel->post_send(send_data);
    in_flight.push_back({next, std::move(write), std::move(send)});
    ++next;
  };

  // Stream with flow control (a message only when the peer has a receive posted for it and its
  // source slot is free) until the peer has confirmed kKillAfter messages.
  const auto stream_deadline = Clock::now() + 60s;
  while (confirmed() < kKillAfter) {
    ASSERT_LT(Clock::now(), stream_deadline)
        << "the peer confirmed only " << confirmed() << " messages\n"
        << peer.describe();
    ASSERT_TRUE(peer.running()) << peer.describe();
    if (in_flight.size() < kWindow && next < confirmed() + kWindow) {
      post_message();
    } else if (!in_flight.empty()) {
      auto& oldest = in_flight.front();
      const auto write = oldest.write.poll();
      const auto send = oldest.send.poll();
      if (write && send) {
        ASSERT_TRUE(write->ok() && send->ok()) << write->to_string() << " / " << send->to_string();
        in_flight.pop_front();
      }
    }
  }
  const std::size_t in_flight_at_kill = in_flight.size();
  const std::uint64_t next_at_kill = next;
  peer.kill();
  const auto killed_at = Clock::now();
  // Keep streaming up to the receives the peer had posted (more would meet RNR, not a vanished
  // peer).
  const std::size_t confirmed_at_kill = confirmed();
  while (in_flight.size() < kWindow && next < confirmed_at_kill + kWindow) post_message();
  const std::size_t posted_after_kill = next - next_at_kill;

  // Every outstanding request ends: those the peer's QP took before it was destroyed succeed,
  // the first one after fails with retry_exceeded, all later ones are flushed.
  std::optional<WorkStatus> first_failure;
  std::optional<double> first_failure_ms;
  std::optional<double> first_failure_after_post_ms;  // since the failed request was posted
  Clock::time_point posted_at = killed_at;
  std::size_t succeeded_after_kill = 0;
  std::size_t flushed = 0;
  auto settle = [&](PendingWork& work) {
    try {
      work.wait();
      EXPECT_FALSE(first_failure) << "a request succeeded after one failed";
      ++succeeded_after_kill;
    } catch (const WorkError& error) {
      if (!first_failure) {
        first_failure = error.status();
        first_failure_ms = milliseconds_since(killed_at);
        first_failure_after_post_ms = milliseconds_since(posted_at);
        EXPECT_EQ(error.status(), WorkStatus::retry_exceeded) << error.what();
      } else {
        EXPECT_EQ(error.status(), WorkStatus::work_request_flushed) << error.what();
        ++flushed;
      }
    }
    // Anything else (a timeout Error: the request hung) escapes and fails the test.
  };
  for (auto& message : in_flight) {
    settle(message.write);
    settle(message.send);
  }
  in_flight.clear();
  // The peer's QP lives on in the kernel until its process has ended: everything posted so far
  // may have succeeded. Once it has been reaped, the next request meets no QP at all.
  const auto peer_exit = peer.wait();
  const double peer_gone_ms = milliseconds_since(killed_at);
  EXPECT_FALSE(peer_exit) << peer.describe();
  EXPECT_NE(peer.describe().find("killed by signal 9"), std::string::npos) << peer.describe();
  // A burst of messages to the dead peer, without flow control (there is no QP left to
  // answer RNR): the first request fails with retry_exceeded, every later one is flushed.
  std::size_t burst = 0;
  if (!first_failure) {
    posted_at = Clock::now();
    while (in_flight.size() < kWindow) post_message();
    burst = in_flight.size();
    for (auto& message : in_flight) {
      settle(message.write);
      settle(message.send);
    }
    in_flight.clear();
  }
  ASSERT_TRUE(first_failure) << "no request failed after the peer was killed\n" << peer.describe();
  // And a request posted after the failure is flushed at once (typed, no hang).
  {
    std::vector<std::byte> probe(8);
    const auto probe_mr = pd->register_local(probe);
    const std::array probe_data{probe_mr.gather_all()};
    const auto before_flush = Clock::now();
    try {
      channel->write(probe_data, targets.sub_region(0, probe.size()));
      ADD_FAILURE() << "a write on the failed channel succeeded";
    } catch (const WorkError& error) {
      EXPECT_EQ(error.status(), WorkStatus::work_request_flushed) << error.what();
    }
    RecordProperty("next_request_flushed_ms",
                   std::to_string(static_cast<int>(milliseconds_since(before_flush))));
  }

  // What the peer confirmed before it died is intact.
  const std::size_t confirmed_total = confirmed();
  EXPECT_GE(confirmed_total, kKillAfter);
  for (std::size_t i = 0; i < confirmed_total; ++i) {
    EXPECT_EQ(confirmations[i].write_sum, expected_checksum(i, 0)) << "write of message " << i;
    EXPECT_EQ(confirmations[i].send_sum, expected_checksum(i, 1)) << "send of message " << i;
  }
  for (std::size_t i = confirmed_total; i < kMaxMessages; ++i) {
    ASSERT_EQ(confirmations[i].sequence_plus_one, 0U) << "a confirmation out of order at " << i;
  }

  std::printf(
      "[ figures  ] peer killed with %zu messages in flight (%zu posted after the kill), %zu "
      "confirmed; first error %s %.0f ms after the kill, %.0f ms after its post (%zu request(s) "
      "succeeded after the kill, %zu "
      "flushed; a burst of %zu messages after the peer was reaped at %.0f ms)\n",
      in_flight_at_kill, posted_after_kill, confirmed_total,
      std::string(to_string(*first_failure)).c_str(), *first_failure_ms,
      *first_failure_after_post_ms, succeeded_after_kill, flushed, burst, peer_gone_ms);
  RecordProperty("first_error", std::string(to_string(*first_failure)));
  RecordProperty("first_error_ms", std::to_string(static_cast<int>(*first_failure_ms)));
  RecordProperty("first_error_after_post_ms",
                 std::to_string(static_cast<int>(*first_failure_after_post_ms)));

  // Clean teardown of the failed channel (the leak check after the test covers it), then a new
  // channel in this process moves data.
  channel.reset();
  expect_new_channel_moves_data(context, gid_index);
}

// ---- the link goes away ---------------------------------------------------------------------

/// A loopback pair of channels on one device with a synchronous stream: each step writes
/// message n into b's memory and sends it to b, then checks both arrived.
class LoopbackStream {
 public:
  LoopbackStream(const Context& context, std::uint32_t gid_index)
      : pd_(context),
        source_(2 * kPayload),
        target_(2 * kPayload),
        source_mr_(pd_.register_local(source_)),
        target_mr_(pd_.register_remote_accessible(target_, RemoteAccess::all())) {
    // A short drop timeout: b's receive is left pending when a's request fails.
    const ChannelTimeouts timeouts{.operation = 10s, .drop = 1s};
    auto prepared_a =
        ChannelBuilder(pd_).queue_pair(fault_settings(gid_index)).timeouts(timeouts).build();
    auto prepared_b =
        ChannelBuilder(pd_).queue_pair(fault_settings(gid_index)).timeouts(timeouts).build();
    const auto endpoint_a = prepared_a.endpoint();
    a_.emplace(std::move(prepared_a).handshake(prepared_b.endpoint()));
    b_.emplace(std::move(prepared_b).handshake(endpoint_a));
  }

  /// Moves message `sequence` from a to b (a write, then a send) and checks it. Throws what the
  /// channel throws: ibv::WorkError for a failed request.
  void step(std::uint64_t sequence) {
    auto write_source = std::span(source_).first(kPayload);
    auto send_source = std::span(source_).last(kPayload);
    fill_payload(write_source, sequence, 0);
    fill_payload(send_source, sequence, 1);
    const std::array into{target_mr_.scatter(std::span(target_).last(kPayload))};
    PendingWork receive = b_->post_receive(into);
    const std::array write_data{source_mr_.gather(std::span<const std::byte>(write_source))};
    a_->write(write_data, target_mr_.remote().sub_region(0, kPayload));
    const std::array send_data{source_mr_.gather(std::span<const std::byte>(send_source))};
    a_->send(send_data);
    EXPECT_EQ(receive.wait().byte_length(), kPayload);
    EXPECT_TRUE(same_bytes(source_, target_)) << "message " << sequence;
  }

  /// One more write from a (after a failure: flushed).
  void write_once() {
    const std::array data{source_mr_.gather(std::span<const std::byte>(source_).first(8))};
    a_->write(data, target_mr_.remote().sub_region(0, 8));
  }

 private:
  ProtectionDomain pd_;
  std::vector<std::byte> source_;
  std::vector<std::byte> target_;
  MemoryRegion source_mr_;
  MemoryRegion target_mr_;
  std::optional<Channel> a_;
  std::optional<Channel> b_;
};

class LinkFault : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto reason = link_faults_unavailable()) GTEST_SKIP() << *reason;
    link_.emplace("ibvfault0", "rxefault0", "10.77.0.1");
  }

  std::optional<FaultLink> link_;  // declared first: goes last, after everything opened on it
};

constexpr std::size_t kWarmUp = 8;
constexpr std::size_t kAfter = 16;

TEST_F(LinkFault, NetdevDownFailsTheStreamWithATypedErrorAndANewChannelWorksAfter) {
  std::optional<Context> context(open_device(link_->device()));
  const auto gid_index = link_->wait_until_usable(*context, 10s);
  ASSERT_TRUE(gid_index) << link_->device() << " did not become usable";
  std::optional<LoopbackStream> stream(std::in_place, *context, *gid_index);
  drain_async_events(*context);

  std::atomic<bool> go{false};
  std::atomic<bool> done{false};
  Clock::time_point fault_started{};
  Clock::time_point fault_done{};
  CommandResult fault_result;
  std::jthread fault([&](const std::stop_token& stop) {  // a throw below stops and joins it
    while (!go && !stop.stop_requested()) std::this_thread::sleep_for(1ms);
    if (!go) return;
    fault_started = Clock::now();
    fault_result = run_command({"ip", "link", "set", link_->netdev(), "down"});
    fault_done = Clock::now();
    done = true;
  });
  std::optional<WorkError> failure;
  std::size_t messages = 0;
  std::optional<double> error_ms;
  const auto deadline = Clock::now() + 60s;
  while (!failure && Clock::now() < deadline) {
    if (messages == kWarmUp) go = true;
    try {
      stream->step(messages);
      ++messages;
    } catch (const WorkError& error) {
      failure = error;
      error_ms = milliseconds_since(fault_started);
    }
    if (done && !failure && messages > kWarmUp + 1000) break;
  }
  go = true;
  fault.join();
  ASSERT_TRUE(fault_result.ok()) << fault_result.description;
  ASSERT_TRUE(failure) << "the stream went on for " << messages << " messages with the netdev down";
  EXPECT_GE(messages, kWarmUp);
  EXPECT_EQ(failure->status(), WorkStatus::local_qp_operation_error) << failure->what();
  // The message points at the link, not only at request contents.
  EXPECT_NE(std::string(failure->what()).find("netdev is down"), std::string::npos)
      << failure->what();
  // The QP is in the error state now: the next request is flushed, at once.
  try {
    stream->write_once();
    ADD_FAILURE() << "a write succeeded on the failed channel";
  } catch (const WorkError& error) {
    EXPECT_EQ(error.status(), WorkStatus::work_request_flushed) << error.what();
  }
  EXPECT_EQ(context->query_port().state, PortState::down);
  const auto events = drain_async_events(*context);
  EXPECT_NE(std::find(events.begin(), events.end(), "port error"), events.end()) << join(events);
  std::printf(
      "[ figures  ] netdev down after %zu messages: %s %.0f ms after 'ip link set down' "
      "started (the command took %.0f ms); async events: %s\n",
      messages, std::string(to_string(failure->status())).c_str(), *error_ms,
      std::chrono::duration<double, std::milli>(fault_done - fault_started).count(),
      join(events).c_str());
  RecordProperty("netdev_down_error", std::string(to_string(failure->status())));
  RecordProperty("netdev_down_error_ms", std::to_string(static_cast<int>(*error_ms)));

  // Teardown of channels on a broken link: no crash, no hang, no leak (checked after the test).
  stream.reset();
  // With the link up again, a new channel on the same device works.
  ASSERT_TRUE(run_command({"ip", "link", "set", link_->netdev(), "up"}).ok());
  const auto gid_again = link_->wait_until_usable(*context, 10s);
  ASSERT_TRUE(gid_again) << link_->device() << " did not come back";
  expect_new_channel_moves_data(*context, *gid_again);
  context.reset();
  link_.reset();  // removes the rxe device and the netdev
  const Context test_device = open_test_device();
  expect_new_channel_moves_data(test_device, test_gid_index(test_device));
}

TEST_F(LinkFault, RxeDeviceRemovalWaitsForTheUserThenCompletes) {
  std::optional<Context> context(open_device(link_->device()));
  const auto gid_index = link_->wait_until_usable(*context, 10s);
  ASSERT_TRUE(gid_index) << link_->device() << " did not become usable";
  std::optional<LoopbackStream> stream(std::in_place, *context, *gid_index);
  drain_async_events(*context);
  std::size_t messages = 0;
  for (; messages < kWarmUp; ++messages) stream->step(messages);

  BackgroundCommand removal({"rdma", "link", "delete", link_->device()});
  const auto removal_started = Clock::now();
  // The removal blocks in the kernel (state D) while this process holds the device.
  // The state is read once per turn and asserted as seen: reading /proc again could catch the
  // command between two waits of its uninterruptible sleep.
  const auto deadline = Clock::now() + 20s;
  char state = removal.kernel_state();
  while (state != 'D' && removal.running() && Clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
    state = removal.kernel_state();
  }
  ASSERT_TRUE(removal.running()) << "'rdma link delete' ended while the device was open";
  ASSERT_EQ(state, 'D');
  // Traffic keeps flowing meanwhile, every message intact.
  for (const std::size_t end = messages + kAfter; messages < end; ++messages) {
    stream->step(messages);
  }
  EXPECT_TRUE(removal.running());
  const auto events = drain_async_events(*context);
  std::printf(
      "[ figures  ] rxe device removal pending for %.0f ms, %zu messages moved "
      "meanwhile; async events: %s\n",
      milliseconds_since(removal_started), kAfter, join(events).c_str());
  RecordProperty("removal_async_events", join(events));

  // Destroying everything opened on the device (no crash, no hang) lets the removal finish.
  stream.reset();
  context.reset();
  const auto closed_at = Clock::now();
  EXPECT_EQ(removal.wait_for(30s), 0) << removal.command();
  const double removal_ms = milliseconds_since(closed_at);
  EXPECT_FALSE(link_->device_exists());
  try {
    (void)open_device(link_->device());
    ADD_FAILURE() << link_->device() << " still opens after its removal";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::not_found) << error.what();
  }
  std::printf("[ figures  ] rxe device removed %.0f ms after the last object on it was closed\n",
              removal_ms);
  RecordProperty("removal_after_close_ms", std::to_string(static_cast<int>(removal_ms)));
  link_.reset();  // removes the netdev
  const Context test_device = open_test_device();
  expect_new_channel_moves_data(test_device, test_gid_index(test_device));
}

}  // namespace
}  // namespace ibv::test
