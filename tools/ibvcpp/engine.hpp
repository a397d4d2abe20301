// SPDX-License-Identifier: MIT
// The measurement engine of ibvcpp perf: the queue pairs and buffers of a session, and the
// loops that measure bandwidth (engine_bw.cpp) and latency (engine_lat.cpp), written on the
// library's public Channel API (unpolled post_* and PendingWork), and their UD counterparts
// (engine_ud.cpp) on the verbs layer's UdQueuePair.
#pragma once

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ibv/channel/channel.hpp"
#include "ibv/verbs/address_handle.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/ud_queue_pair.hpp"
#include "ibv/verbs/ud_send_request.hpp"
#include "ibvcpp/options.hpp"
#include "ibvcpp/protocol.hpp"
#include "ibvcpp/report.hpp"
#include "ibvcpp/tcp.hpp"

namespace ibvcpp::engine {

/// Nanoseconds of std::chrono::steady_clock (perftest's get_cycles(), in a unit of time).
[[nodiscard]] inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Zeroed, page-aligned memory (as perftest allocates its buffers).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(std::size_t size);
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data_.get(), size_}; }

 private:
  static constexpr std::align_val_t kAlignment{4096};
  struct Free {
    void operator()(std::byte* data) const noexcept { ::operator delete(data, kAlignment); }
  };
  std::size_t size_;
  std::unique_ptr<std::byte, Free> data_;
};

/// The UD queue pair of a slot (-c UD): its completion queues (sends and receives apart, as
/// perftest) and the route to the peer's queue pair.
struct DatagramLane {
  ibv::CompletionQueue send_cq;
  ibv::CompletionQueue recv_cq;
  ibv::UdQueuePair qp;
  std::optional<ibv::AddressHandle> route;  ///< Set once the peer's address is known.
};

/// One queue pair of the session with its own buffer: the first half is the outbox (what this
/// side sends and writes, and what the peer reads), the second half the inbox (where receives,
/// the peer's writes and this side's reads land). Each half holds the largest size (with -c UD
/// plus the 40-byte GRH area a receive starts with).
struct QueuePairSlot {
  explicit QueuePairSlot(std::size_t half_size) : buffer(2 * half_size), half(half_size) {}

  AlignedBuffer buffer;
  std::size_t half;
  std::optional<ibv::MemoryRegion> mr;
  std::optional<ibv::PreparedChannel> prepared;
  std::optional<ibv::Channel> channel;    ///< RC.
  std::optional<DatagramLane> datagrams;  ///< UD (-c UD), instead of the channel.
  QpAddress peer;                         ///< The peer's queue pair and buffers.

  [[nodiscard]] std::span<std::byte> outbox(std::uint64_t size) const {
    return buffer.bytes().first(size);
  }
  [[nodiscard]] std::span<std::byte> inbox(std::uint64_t size) const {
    return buffer.bytes().subspan(half, size);
  }
};

/// The handles of a channel's requests in flight, by request number, in a fixed ring: at most
/// `capacity` in flight at a time, no allocation per request. Its size is `capacity` rounded
/// up to a power of two, so that a request's slot is a mask, not a division (a division is a
/// helper call under QEMU's TCG, where the testbed measures).
class WorkRing {
 public:
  explicit WorkRing(std::size_t capacity)
      : slots_(std::bit_ceil(std::max<std::size_t>(capacity, 1))), mask_(slots_.size() - 1) {}
  WorkRing(const WorkRing&) = delete;
  WorkRing& operator=(const WorkRing&) = delete;
  WorkRing(WorkRing&&) noexcept = default;
  WorkRing& operator=(WorkRing&&) noexcept = default;
  ~WorkRing() = default;

  void put(std::uint64_t number, ibv::PendingWork work) {
    slots_[number & mask_].emplace(std::move(work));
  }
  [[nodiscard]] ibv::PendingWork& at(std::uint64_t number) { return *slots_[number & mask_]; }
  /// Drops a handle whose completion has been seen.
  void drop(std::uint64_t number) { slots_[number & mask_].reset(); }

 private:
  std::vector<std::optional<ibv::PendingWork>> slots_;
  std::uint64_t mask_;
};

/// What the measurement loops work with.
struct Session {
  const PerfOptions& options;
  Connection& connection;
  std::vector<QueuePairSlot>& qps;

  [[nodiscard]] std::int64_t timeout_ns() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(options.timeout).count();
  }
  /// Both sides ready: each sends `ready` and waits for the peer's.
  void sync() const;
};

/// Sends a heartbeat to the server at most once a second, so that a server waiting for the
/// result knows the client is alive.
class Heartbeat {
 public:
  explicit Heartbeat(Connection& connection) : connection_(connection), last_(now_ns()) {}
  void beat(std::int64_t now) {
    if (now - last_ > kInterval) {
      connection_.send(MessageType::heartbeat);
      last_ = now;
    }
  }

 private:
  static constexpr std::int64_t kInterval = 1'000'000'000;
  Connection& connection_;
  std::int64_t last_;
};

/// Watches a busy-polling loop for a silent peer without reading the clock on every turn:
/// stalled() reads it once every `check_mask + 1` turns (a power of two), and is true once
/// no progress() has come for `timeout_ns`, counted from the first reading after the last
/// progress.
class StallWatch {
 public:
  StallWatch(std::int64_t timeout_ns, std::uint32_t check_mask) noexcept
      : timeout_ns_(timeout_ns), check_mask_(check_mask) {}
  /// Something arrived: the silence starts again.
  void progress() noexcept { since_ = 0; }
  /// Call once per turn of the loop.
  [[nodiscard]] bool stalled() noexcept {
    if ((++turns_ & check_mask_) != 0) return false;
    const std::int64_t now = now_ns();
    if (since_ == 0) {
      since_ = now;
      return false;
    }
    return now - since_ > timeout_ns_;
  }

 private:
  std::int64_t timeout_ns_;
  std::uint32_t check_mask_;
  std::uint32_t turns_ = 0;
  std::int64_t since_ = 0;  // the first clock reading since the last progress (0: none yet)
};

/// A failure while requests are in flight: prints `message` and ends the process with status 1
/// at once. Unwinding would destroy PendingWork handles whose requests may never complete (a
/// stalled peer), each waiting for its completion and logging: the kernel tears the queue pairs
/// down at exit before the registered memory goes (registration pins it), so this is safe.
[[noreturn]] void abort_run(const std::string& message);

/// Posts a receive on the slot's UD queue pair (-c UD): every one lands in the slot's inbox,
/// the 40-byte GRH area and then the message of `size` bytes (as perftest's: what arrives is
/// not read). The request is made at each post (a few stores), so nothing refers to itself.
void post_datagram_receive(QueuePairSlot& slot, std::uint64_t size);
/// The peer's UD queue pair, as a send names it.
[[nodiscard]] ibv::UdSendRequest datagram_to_peer(QueuePairSlot& slot,
                                                  std::span<const ibv::GatherElement> data);

/// Bandwidth: the client measures; the server of a send test receives and measures its own
/// side (perftest's server: no peak); the server of a write or read test waits for the client's
/// result.
[[nodiscard]] BwResult run_bw(Session& session, std::uint64_t size);
/// Latency: both sides run the ping-pong (send, write) or the server waits (read); the client
/// measures, and the server prints the client's figures. With -c UD: sends only, through the
/// slots' UD queue pairs; the server of a bw test also reports the datagrams lost (counted
/// once the client's result says how many it sent).
[[nodiscard]] LatResult run_lat(Session& session, std::uint64_t size);

}  // namespace ibvcpp::engine
