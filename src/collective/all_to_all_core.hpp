// SPDX-License-Identifier: MIT
// Private: the machinery of a PersistentAllToAll. One queue pair per peer on one completion
// queue; per peer the credits it gave, the parts posted to it, its next round expected; per
// slot the sizes of the parts that landed; the round in progress and its place in the shift
// schedule; the first failure. Every signal (a part, a credit) is a completion, so that every
// wait mode and an event loop's fd see it.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ibv/collective/all_to_all_round.hpp"
#include "ibv/collective/all_to_all_settings.hpp"
#include "ibv/error.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/context.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv::net {
class Bootstrap;
class Node;
}  // namespace ibv::net

namespace ibv::net::detail {

/// The immediate data of the collective's messages (host order; the wire's byte order is the
/// verbs layer's business). Bit 31 says which: a part (round modulo 32 in bits 24-28, its size
/// in bits 0-23, and in bits 29-30 up to 3 rounds the sender released of the receiver's parts:
/// credits carried along) or a credit alone (bits 0-30: how many more rounds the sender
/// released).
struct AllToAllImmediate {
  static constexpr std::uint32_t kCreditBit = 1U << 31U;
  static constexpr std::uint32_t kSizeMask = (1U << 24U) - 1U;
  static constexpr std::uint32_t kRoundMask = 0x1fU;
  static constexpr std::uint32_t kCarriedShift = 29U;
  static constexpr std::uint32_t kMaxCarried = 3U;

  /// A part of `round` of `size` bytes carrying `carried` (at most kMaxCarried) credits.
  [[nodiscard]] static constexpr std::uint32_t part(std::uint64_t round, std::uint32_t size,
                                                    std::uint32_t carried = 0) noexcept {
    return ((carried & kMaxCarried) << kCarriedShift) |
           ((static_cast<std::uint32_t>(round) & kRoundMask) << 24U) | (size & kSizeMask);
  }
  [[nodiscard]] static constexpr std::uint32_t credit(std::uint32_t rounds) noexcept {
    return kCreditBit | (rounds & ~kCreditBit);
  }
  [[nodiscard]] static constexpr bool is_credit(std::uint32_t immediate) noexcept {
    return (immediate & kCreditBit) != 0;
  }
  [[nodiscard]] static constexpr std::uint32_t round_bits(std::uint32_t immediate) noexcept {
    return (immediate >> 24U) & kRoundMask;
  }
  [[nodiscard]] static constexpr std::uint32_t size(std::uint32_t immediate) noexcept {
    return immediate & kSizeMask;
  }
  /// The credits of a message: a credit's count, or those a part carries.
  [[nodiscard]] static constexpr std::uint32_t credits(std::uint32_t immediate) noexcept {
    return is_credit(immediate) ? immediate & ~kCreditBit
                                : (immediate >> kCarriedShift) & kMaxCarried;
  }
};

/// The queues of an all-to-all: per peer a send queue for its parts and credits (at most
/// slots_per_peer of each in flight, plus one) and a receive queue for the peer's (as many);
/// one completion queue for all of them.
struct AllToAllSizing {
  std::uint32_t send_queue = 0;
  std::uint32_t receive_queue = 0;
  int completion_queue = 0;
};

/// The sizing of an all-to-all of `world` ranks with `slots_per_peer`, checked against
/// `device`: throws ibv::Error (invalid_argument) naming max_qp_wr or max_cqe when it does not
/// fit. Pure: tested without a device.
[[nodiscard]] AllToAllSizing size_all_to_all(std::uint32_t world, std::uint32_t slots_per_peer,
                                             const DeviceAttributes& device);

class ControlPlane;

/// What PersistentAllToAll and AllToAllRound forward to (the rounds hold it weakly).
class AllToAllCore : public std::enable_shared_from_this<AllToAllCore> {
 public:
  using Clock = std::chrono::steady_clock;

  /// Checks, builds and connects (PersistentAllToAll's constructor says what it throws).
  AllToAllCore(Node& node, Bootstrap& bootstrap, const MemoryRegion& send_memory,
               const MemoryRegion& receive_memory, const AllToAllSettings& settings);
  AllToAllCore(const AllToAllCore&) = delete;
  AllToAllCore& operator=(const AllToAllCore&) = delete;
  ~AllToAllCore();

  void start(std::span<const std::span<const std::byte>> parts);
  std::optional<AllToAllRound> poll();
  AllToAllRound wait(std::optional<Duration> timeout);

  /// The part of `source` in held round `round` (AllToAllRound::part).
  [[nodiscard]] std::span<const std::byte> part(std::uint64_t round, std::uint32_t source) const;
  /// Gives round `round`'s slots back (AllToAllRound::release).
  void release(std::uint64_t round) noexcept;

  [[nodiscard]] std::uint32_t rank() const noexcept { return rank_; }
  [[nodiscard]] std::uint32_t world_size() const noexcept { return world_; }
  [[nodiscard]] const AllToAllSettings& settings() const noexcept { return settings_; }
  [[nodiscard]] std::uint64_t rounds_started() const noexcept { return started_; }
  [[nodiscard]] bool failed() const noexcept { return failure_.has_value(); }

  [[nodiscard]] int completion_fd() const;
  void arm_completion_fd();
  std::size_t consume_completion_events();

 private:
  /// What a wr_id says: bits 62-63 the kind, 32-61 the slot (parts), 0-31 the peer.
  enum class WorkKind : std::uint64_t { part = 1, credit = 2, receive = 3 };
  [[nodiscard]] static std::uint64_t wr_id(WorkKind kind, std::uint32_t peer,
                                           std::uint32_t slot = 0) noexcept;
  /// Whether a round is in flight (started, not yet returned).
  [[nodiscard]] bool in_flight() const noexcept { return returned_ < started_; }

  /// Throws ibv::Error (state) naming the first failure, if there was one.
  void check_usable(const char* call) const;
  /// Polls every completion there is and posts what they allow (credits owed, parts).
  void progress();
  void take(const WorkCompletion& completion);
  void take_message(std::uint32_t peer, const WorkCompletion& completion);
  void post_parts();
  void post_credits();
  void post_receive(std::uint32_t peer);
  /// Whether the oldest round in flight is complete here.
  [[nodiscard]] bool round_complete() const noexcept;
  /// The oldest round in flight, handed over as complete.
  AllToAllRound finish_round();
  [[nodiscard]] std::uint32_t slot_of(std::uint64_t round) const noexcept {
    return static_cast<std::uint32_t>(round % settings_.slots_per_peer);
  }
  [[nodiscard]] std::size_t book_index(std::uint32_t slot, std::uint32_t source) const noexcept {
    return static_cast<std::size_t>(slot) * world_ + source;
  }

  /// Fences (destroys every queue pair), records the failure and throws `error` (an
  /// ibv::Error or WorkError, thrown as its own type).
  template <typename Failure>
  [[noreturn]] void fail(const Failure& error) {
    if (!failure_) failure_ = error.what();
    fence();
    throw Failure(error);
  }
  /// The failure of a completion from `peer`.
  [[noreturn]] void fail_completion(const WorkCompletion& completion);
  /// The failure of a peer that broke the protocol.
  [[noreturn]] void fail_protocol(std::uint32_t peer, const std::string& what);
  /// The timeout of wait(): names what is missing.
  [[noreturn]] void fail_timeout(Duration limit);
  void fence() noexcept;
  /// On a fault-tolerant Node, whose control plane this collective shares: fails (fenced, as
  /// any failure) with revoked when the Node is revoked, with peer_gone when a rank is known
  /// failed (every rank takes part in every round). One atomic load when nothing is new.
  void check_control();

  std::uint32_t rank_;
  std::uint32_t world_;
  AllToAllSettings settings_;
  std::uint32_t window_;  // peers in flight, resolved
  std::uint32_t send_depth_;
  std::uint32_t receive_depth_;

  // The caller's memory: what a round uses of it, read once at build (nothing per round
  // touches the registrations), and a share of each registration, so that its keys stay
  // valid while the queue pairs (declared after, destroyed first) may use them. The fence lets
  // go of the shares with the queue pairs.
  std::uint64_t send_address_;
  std::size_t send_length_;
  std::uint32_t send_lkey_;
  std::span<std::byte> receive_bytes_;
  std::shared_ptr<ibv_mr> send_registration_;
  std::shared_ptr<ibv_mr> receive_registration_;

  std::optional<CompletionChannel> completion_channel_;
  CompletionQueue cq_;
  std::vector<std::optional<QueuePair>> qps_;     // [peer]
  std::vector<RemoteMemoryRegion> peer_receive_;  // [peer]: its receive memory

  // Per peer.
  std::vector<std::uint64_t> credits_from_;  // rounds the peer released of this rank's parts
  std::vector<std::uint32_t> credits_owed_;  // rounds released here the peer is not told of:
                                             // the next part to it carries them, or progress()
                                             // sends them alone
  std::vector<std::uint32_t> sends_outstanding_;
  std::vector<std::uint32_t> receives_posted_;
  std::vector<std::uint64_t> next_from_;  // the round its next part belongs to

  // Per slot: the size of each source's part (-1: not landed) and how many landed.
  std::vector<std::int64_t> part_sizes_;     // [slot * world + source]
  std::vector<std::uint32_t> parts_landed_;  // [slot]
  std::vector<bool> released_early_;         // [slot]: released before the rounds before it

  // Rounds: [0, released_) released, [released_, returned_) held by the caller,
  // [returned_, started_) in flight (started, not yet returned); together at most
  // slots_per_peer, each in its own slot.
  std::uint64_t started_ = 0;
  std::uint64_t returned_ = 0;
  std::uint64_t released_ = 0;
  std::uint64_t posting_ = 0;  // the oldest round in flight with parts not yet posted
  // Per slot, of the round in flight there: its parts, the next k of its shift schedule (to
  // rank + k), its writes complete.
  std::vector<std::span<const std::byte>> parts_;  // [slot * world + destination]
  std::vector<std::uint32_t> next_step_;           // [slot]
  std::vector<std::uint32_t> writes_done_;         // [slot]
  std::uint32_t in_window_ = 0;                    // parts posted and not complete, all rounds

  std::optional<std::string> failure_;  // the first failure's what()
  std::array<WorkCompletion, 32> batch_{};
  std::shared_ptr<ControlPlane> control_;  // the Node's, when it has fault tolerance
  std::uint64_t control_seen_ = 0;         // its generation last looked at
};

}  // namespace ibv::net::detail
