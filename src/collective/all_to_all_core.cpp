// SPDX-License-Identifier: MIT
// The machinery of a PersistentAllToAll (see all_to_all_core.hpp): building and connecting,
// the progress of a round (completions in, parts and credits out), and failing safely.
#include "collective/all_to_all_core.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "channel/wait_loop.hpp"
#include "detail/big_endian.hpp"
#include "detail/moved_from.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/net/bootstrap.hpp"
#include "ibv/net/node.hpp"
#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_request.hpp"
#include "net/control_plane.hpp"
#include "net/unanswered_rank.hpp"

namespace ibv::net::detail {
namespace {

constexpr const char* kBuild = "PersistentAllToAll";
constexpr std::uint64_t kKindShift = 62;
constexpr std::uint64_t kSlotMask = (std::uint64_t{1} << 30U) - 1U;
// On a fault-tolerant Node, a wait that sleeps looks at the control plane at least this often.
constexpr auto kControlLook = std::chrono::milliseconds(10);

/// What one rank tells each peer at build: a tag, the shape, its queue pair for the peer and
/// its receive memory. Big-endian, fixed size.
struct BuildMessage {
  static constexpr std::array<std::byte, 4> kTag{std::byte{'A'}, std::byte{'2'}, std::byte{'A'},
                                                 std::byte{1}};
  static constexpr std::size_t kSize =
      4 + 4 + 4 + 8 + Endpoint::kWireSize + RemoteMemoryRegion::kWireSize;
  std::uint32_t world = 0;
  std::uint32_t slots_per_peer = 0;
  std::uint64_t slot_size = 0;
  Endpoint queue_pair;
  RemoteMemoryRegion receive_memory;

  [[nodiscard]] std::vector<std::byte> encode() const {
    std::vector<std::byte> bytes(kSize);
    std::byte* out = bytes.data();
    std::memcpy(out, kTag.data(), kTag.size());
    ibv::detail::put_big_endian(out + 4, world, 4);
    ibv::detail::put_big_endian(out + 8, slots_per_peer, 4);
    ibv::detail::put_big_endian(out + 12, slot_size, 8);
    const auto endpoint = queue_pair.to_bytes();
    std::memcpy(out + 20, endpoint.data(), endpoint.size());
    const auto region = receive_memory.to_bytes();
    std::memcpy(out + 20 + endpoint.size(), region.data(), region.size());
    return bytes;
  }
  /// Throws ibv::Error (protocol) naming `sender` when the bytes are not a BuildMessage.
  [[nodiscard]] static BuildMessage decode(std::span<const std::byte> bytes, std::uint32_t sender) {
    if (bytes.size() != kSize || !std::equal(kTag.begin(), kTag.end(), bytes.begin())) {
      throw Error(ErrorKind::protocol, kBuild, EPROTO,
                  "rank " + std::to_string(sender) + " sent " + std::to_string(bytes.size()) +
                      " bytes that are not an all-to-all's slots and queue pair",
                  "does every rank build its PersistentAllToAll at the same point of the job?");
    }
    BuildMessage message;
    message.world = static_cast<std::uint32_t>(ibv::detail::get_big_endian(bytes.data() + 4, 4));
    message.slots_per_peer =
        static_cast<std::uint32_t>(ibv::detail::get_big_endian(bytes.data() + 8, 4));
    message.slot_size = ibv::detail::get_big_endian(bytes.data() + 12, 8);
    message.queue_pair = Endpoint::from_bytes(bytes.subspan(20, Endpoint::kWireSize));
    message.receive_memory = RemoteMemoryRegion::from_bytes(
        bytes.subspan(20 + Endpoint::kWireSize, RemoteMemoryRegion::kWireSize));
    return message;
  }
};

/// "ranks 1, 2 and 5" (at most 8 named, then "and N more").
std::string rank_list(const std::vector<std::uint32_t>& ranks) {
  constexpr std::size_t kNamed = 8;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kNamed; ++i) {
    if (i > 0) text += (i + 1 == ranks.size()) ? " and " : ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kNamed) text += " and " + std::to_string(ranks.size() - kNamed) + " more";
  return text;
}

/// `memory`, checked not to be moved from before anything reads its registration.
const MemoryRegion& registered(const MemoryRegion& memory, const char* argument) {
  if (!memory.shared()) {
    ibv::detail::throw_moved_from(kBuild, std::string(argument) + ", a MemoryRegion,");
  }
  return memory;
}

void check_settings(const AllToAllSettings& settings) {
  if (settings.slot_size == 0 || settings.slot_size > AllToAllSettings::kMaxSlotSize) {
    throw_invalid_argument(kBuild, "slot_size",
                           std::to_string(settings.slot_size) + " is not within 1.." +
                               std::to_string(AllToAllSettings::kMaxSlotSize) +
                               " (a part's size travels in 24 bits of immediate data)");
  }
  if (settings.slots_per_peer < 2 || settings.slots_per_peer > AllToAllSettings::kMaxSlotsPerPeer) {
    throw_invalid_argument(kBuild, "slots_per_peer",
                           std::to_string(settings.slots_per_peer) + " is not within 2.." +
                               std::to_string(AllToAllSettings::kMaxSlotsPerPeer));
  }
  ibv::detail::check_positive_timeout(settings.timeout, kBuild);
  if (settings.wait_mode && settings.wait_mode->strategy == WaitStrategy::spin_then_block) {
    ibv::detail::check_positive(settings.wait_mode->spin_for, "wait_mode.spin_for", kBuild);
  }
}

void check_memory(const ProtectionDomain& pd, const MemoryRegion& send_memory,
                  const MemoryRegion& receive_memory, const AllToAllSettings& settings,
                  std::uint32_t world) {
  if (!(send_memory.protection_domain() == pd)) {
    throw_invalid_argument(kBuild, "send_memory",
                           "is registered on another protection domain than the Node's");
  }
  if (!(receive_memory.protection_domain() == pd)) {
    throw_invalid_argument(kBuild, "receive_memory",
                           "is registered on another protection domain than the Node's");
  }
  if (!receive_memory.remote_access().allows_write()) {
    throw_invalid_argument(kBuild, "receive_memory",
                           "is registered without remote write access (the peers write their "
                           "parts into it): register it with RemoteAccess::write()");
  }
  // world x slots x slot_size: each factor is bounded (2^32, 64, 2^24), the product fits.
  const std::uint64_t needed = std::uint64_t{world} * settings.slots_per_peer * settings.slot_size;
  if (receive_memory.length() < needed) {
    throw_invalid_argument(
        kBuild, "receive_memory",
        "has " + std::to_string(receive_memory.length()) + " bytes; " + std::to_string(world) +
            " ranks x " + std::to_string(settings.slots_per_peer) + " slots x " +
            std::to_string(settings.slot_size) + " bytes need " + std::to_string(needed));
  }
}

}  // namespace

AllToAllSizing size_all_to_all(std::uint32_t world, std::uint32_t slots_per_peer,
                               const DeviceAttributes& device) {
  AllToAllSizing sizing{.send_queue = 2 * slots_per_peer + 1,
                        .receive_queue = 2 * slots_per_peer,
                        .completion_queue = 1};
  if (sizing.send_queue > static_cast<std::uint32_t>(std::max(device.max_qp_wr, 0))) {
    throw_invalid_argument(kBuild, "slots_per_peer",
                           std::to_string(slots_per_peer) + " needs send queues of " +
                               std::to_string(sizing.send_queue) +
                               " entries (2 x slots + 1), over the device's max_qp_wr " +
                               std::to_string(device.max_qp_wr));
  }
  const std::uint64_t entries =
      std::uint64_t{world - 1} * (sizing.send_queue + sizing.receive_queue);
  if (entries > static_cast<std::uint64_t>(std::max(device.max_cqe, 0))) {
    throw_invalid_argument(kBuild, "slots_per_peer",
                           std::to_string(slots_per_peer) + " with " + std::to_string(world - 1) +
                               " peers needs a completion queue of " + std::to_string(entries) +
                               " entries (peers x (4 x slots + 1)), over the device's max_cqe " +
                               std::to_string(device.max_cqe) + ": use fewer slots per peer");
  }
  sizing.completion_queue = std::max(1, static_cast<int>(entries));
  return sizing;
}

std::uint64_t AllToAllCore::wr_id(WorkKind kind, std::uint32_t peer, std::uint32_t slot) noexcept {
  return (static_cast<std::uint64_t>(kind) << kKindShift) | (std::uint64_t{slot} << 32U) | peer;
}

AllToAllCore::AllToAllCore(Node& node, Bootstrap& bootstrap, const MemoryRegion& send_memory,
                           const MemoryRegion& receive_memory, const AllToAllSettings& settings)
    : rank_(node.rank()),
      world_(node.world_size()),
      settings_(settings),
      window_(settings.peers_in_flight == 0
                  ? node.world_size() - 1
                  : std::min(settings.peers_in_flight, node.world_size() - 1)),
      send_depth_(2 * settings.slots_per_peer + 1),  // size_all_to_all() checks them
      receive_depth_(2 * settings.slots_per_peer),
      send_address_(registered(send_memory, "send_memory").address()),
      send_length_(send_memory.length()),
      send_lkey_(send_memory.lkey()),
      receive_bytes_(registered(receive_memory, "receive_memory").bytes()),
      send_registration_(send_memory.shared()),
      receive_registration_(receive_memory.shared()),
      cq_([&] {
        // Everything is checked before anything is created.
        if (node.world_size() == 0) ibv::detail::throw_moved_from(kBuild, "the Node");
        if (bootstrap.rank() != node.rank() || bootstrap.world_size() != node.world_size()) {
          throw_invalid_argument(kBuild, "bootstrap",
                                 "is for rank " + std::to_string(bootstrap.rank()) + " of " +
                                     std::to_string(bootstrap.world_size()) +
                                     ", the Node is rank " + std::to_string(node.rank()) + " of " +
                                     std::to_string(node.world_size()));
        }
        check_settings(settings);
        const ProtectionDomain& pd = node.protection_domain();
        check_memory(pd, send_memory, receive_memory, settings, node.world_size());
        const AllToAllSizing sizing = size_all_to_all(node.world_size(), settings.slots_per_peer,
                                                      pd.context().query_device());
        const WaitMode mode = settings.wait_mode.value_or(
            node.world_size() > 1 ? node.channel((node.rank() + 1) % node.world_size()).wait_mode()
                                  : WaitMode::spin());
        settings_.wait_mode = mode;
        if (settings.completion_channel) {
          completion_channel_ = settings.completion_channel;
        } else if (mode.sleeps()) {
          completion_channel_.emplace(pd.context());
        }
        return completion_channel_
                   ? CompletionQueue(pd.context(), sizing.completion_queue, *completion_channel_)
                   : CompletionQueue(pd.context(), sizing.completion_queue);
      }()),
      qps_(world_),
      peer_receive_(world_),
      credits_from_(world_, 0),
      credits_owed_(world_, 0),
      sends_outstanding_(world_, 0),
      receives_posted_(world_, 0),
      next_from_(world_, 0),
      part_sizes_(std::size_t{world_} * settings.slots_per_peer, -1),
      parts_landed_(settings.slots_per_peer, 0),
      released_early_(settings.slots_per_peer, false),
      parts_(std::size_t{world_} * settings.slots_per_peer),
      next_step_(settings.slots_per_peer, 0),
      writes_done_(settings.slots_per_peer, 0),
      control_(node.control_) {
  settings_.peers_in_flight = window_;
  settings_.timeout = settings.timeout.value_or(node.timeouts().operation);
  settings_.completion_channel = completion_channel_;

  // A queue pair per peer, like the Node's own (port, GID, MTU, timeouts, retries), with the
  // depths the slots need; receives posted before any peer can write.
  std::vector<std::optional<PreparedQueuePair>> prepared(world_);
  std::vector<std::vector<std::byte>> to_peer(world_);
  const RemoteMemoryRegion mine = receive_memory.remote();
  for (std::uint32_t peer = 0; peer < world_; ++peer) {
    if (peer == rank_) continue;
    QueuePairSettings qp_settings = node.channel(peer).queue_pair().settings();
    qp_settings.access = RemoteAccess::write();
    qp_settings.max_send_wr = QueueDepth(send_depth_);
    qp_settings.max_recv_wr = QueueDepth(receive_depth_);
    qp_settings.max_send_sge = SgeCount(1);
    qp_settings.max_recv_sge = SgeCount(1);
    qp_settings.max_inline_data.reset();
    qp_settings.send_psn.reset();
    prepared[peer].emplace(
        QueuePairBuilder(node.protection_domain(), cq_, cq_).settings(qp_settings).build());
    std::vector<ReceiveRequest> receives;
    receives.reserve(receive_depth_);
    for (std::uint32_t i = 0; i < receive_depth_; ++i) {
      receives.emplace_back(wr_id(WorkKind::receive, peer), std::span<const ScatterElement>{});
    }
    prepared[peer]->post_receive(receives);
    receives_posted_[peer] = receive_depth_;
    to_peer[peer] = BuildMessage{.world = world_,
                                 .slots_per_peer = settings.slots_per_peer,
                                 .slot_size = settings.slot_size,
                                 .queue_pair = prepared[peer]->endpoint(),
                                 .receive_memory = mine}
                        .encode();
  }
  const std::vector<std::vector<std::byte>> from_peer = bootstrap.all_to_all_bytes(to_peer);
  for (std::uint32_t peer = 0; peer < world_; ++peer) {
    if (peer == rank_) continue;
    const BuildMessage message = BuildMessage::decode(from_peer[peer], peer);
    if (message.world != world_ || message.slots_per_peer != settings.slots_per_peer ||
        message.slot_size != settings.slot_size) {
      throw_invalid_argument(
          kBuild, "settings",
          "differ between ranks: rank " + std::to_string(peer) + " has slot_size " +
              std::to_string(message.slot_size) + ", slots_per_peer " +
              std::to_string(message.slots_per_peer) + " in a world of " +
              std::to_string(message.world) + "; this rank " + std::to_string(rank_) + " has " +
              std::to_string(settings.slot_size) + ", " + std::to_string(settings.slots_per_peer) +
              " in " + std::to_string(world_) + " (every rank must build the same shape)");
    }
    if (message.receive_memory.length() <
        std::uint64_t{world_} * settings.slots_per_peer * settings.slot_size) {
      throw Error(ErrorKind::protocol, kBuild, EPROTO,
                  "rank " + std::to_string(peer) + " offers receive memory of " +
                      std::to_string(message.receive_memory.length()) +
                      " bytes, too small for its slots");
    }
    peer_receive_[peer] = message.receive_memory;
    qps_[peer].emplace(std::move(*prepared[peer]).handshake(message.queue_pair));
  }
  // No rank writes before every rank's queue pairs are connected and its receives posted.
  bootstrap.barrier();
}

AllToAllCore::~AllToAllCore() = default;  // destroying the queue pairs ends the device's access

void AllToAllCore::check_usable(const char* call) const {
  if (failure_) [[unlikely]] {
    throw Error(ErrorKind::state, call, EPERM,
                "the all-to-all failed earlier and does no more work: " + *failure_,
                "rebuild it on every rank");
  }
}

void AllToAllCore::start(std::span<const std::span<const std::byte>> parts) {
  constexpr const char* kCall = "PersistentAllToAll::start";
  check_usable(kCall);
  if (started_ >= released_ + settings_.slots_per_peer) {
    throw Error(ErrorKind::state, kCall, EBUSY,
                "round " + std::to_string(started_) + " needs the slots of round " +
                    std::to_string(started_ - settings_.slots_per_peer) +
                    ", which this rank still holds or has in flight (all " +
                    std::to_string(settings_.slots_per_peer) +
                    " slots per peer are taken: " + std::to_string(returned_ - released_) +
                    " rounds held, " + std::to_string(started_ - returned_) + " in flight)",
                in_flight() ? "wait() for a round, or release one (AllToAllRound::release)"
                            : "release a round (AllToAllRound::release) before starting the next");
  }
  if (parts.size() != world_) {
    throw_invalid_argument(kCall, "parts",
                           "has " + std::to_string(parts.size()) + " entries, not one per rank (" +
                               std::to_string(world_) + "); nothing was posted");
  }
  for (std::uint32_t r = 0; r < world_; ++r) {
    const auto part = parts[r];
    if (part.size() > settings_.slot_size) {
      throw_invalid_argument(kCall, "parts[" + std::to_string(r) + "]",
                             "has " + std::to_string(part.size()) + " bytes, over the slot size " +
                                 std::to_string(settings_.slot_size) + "; nothing was posted");
    }
    const auto address = reinterpret_cast<std::uintptr_t>(part.data());
    if (!part.empty() && (address < send_address_ || address - send_address_ > send_length_ ||
                          part.size() > send_length_ - (address - send_address_))) {
      throw_invalid_argument(kCall, "parts[" + std::to_string(r) + "]",
                             "is not within the send memory the all-to-all was built with; "
                             "nothing was posted");
    }
  }
  const std::uint64_t round = started_;
  const std::uint32_t slot = slot_of(round);
  std::copy(parts.begin(), parts.end(),
            parts_.begin() + static_cast<std::ptrdiff_t>(book_index(slot, 0)));
  next_step_[slot] = 1;
  writes_done_[slot] = 0;
  ++started_;
  // The own part: a local copy into its slot.
  const std::span<const std::byte> own = parts[rank_];
  if (!own.empty()) {
    std::memcpy(receive_bytes_.data() + book_index(slot, rank_) * settings_.slot_size, own.data(),
                own.size());
  }
  part_sizes_[book_index(slot, rank_)] = static_cast<std::int64_t>(own.size());
  ++parts_landed_[slot];
  post_parts();
}

void AllToAllCore::post_parts() {
  // Round by round, oldest first: a round's parts go out only once the round before it has
  // posted all of its own.
  for (; posting_ < started_; ++posting_) {
    const std::uint64_t round = posting_;
    const std::uint32_t slot = slot_of(round);
    std::uint32_t& step = next_step_[slot];
    for (; step < world_; ++step) {
      if (in_window_ >= window_) return;
      const std::uint32_t peer = (rank_ + step) % world_;
      if (round >= credits_from_[peer] + settings_.slots_per_peer) return;  // no credit yet
      if (sends_outstanding_[peer] >= send_depth_) return;
      const std::span<const std::byte> part = parts_[book_index(slot, peer)];
      const auto element =
          GatherElement::from_raw(reinterpret_cast<std::uintptr_t>(part.data()),
                                  static_cast<std::uint32_t>(part.size()), send_lkey_);
      const RemoteMemoryRegion& theirs = peer_receive_[peer];
      const RemoteMemoryRegion destination(
          theirs.address() + book_index(slot, rank_) * settings_.slot_size, settings_.slot_size,
          theirs.rkey());
      // The part carries the credits this rank owes the peer, as many as its bits hold.
      const std::uint32_t carried = std::min(credits_owed_[peer], AllToAllImmediate::kMaxCarried);
      SendRequest request = SendRequest::write_with_immediate(
          wr_id(WorkKind::part, peer, slot),
          part.empty() ? std::span<const GatherElement>{} : std::span(&element, 1), destination,
          AllToAllImmediate::part(round, static_cast<std::uint32_t>(part.size()), carried));
      qps_[peer]->post_send(request);
      credits_owed_[peer] -= carried;
      ++sends_outstanding_[peer];
      ++in_window_;
    }
  }
}

void AllToAllCore::post_credits() {
  // The credits no part carried go alone, a zero-byte send with immediate data each, but for
  // the peers whose parts in the round being posted wait only for room (the window, a send
  // queue), not for a credit: room comes without any peer's help, so those parts go out soon
  // and carry them. A part waiting for its credit could wait for this rank's, so from the
  // first such part on, credits go alone.
  std::uint32_t carrier_from = world_;
  std::uint32_t carrier_to = world_;
  bool looked = false;
  for (std::uint32_t peer = 0; peer < world_; ++peer) {
    if (credits_owed_[peer] == 0 || peer == rank_) continue;
    if (!looked && posting_ < started_) {
      looked = true;
      carrier_from = next_step_[slot_of(posting_)];
      carrier_to = carrier_from;
      while (carrier_to < world_ &&
             posting_ < credits_from_[(rank_ + carrier_to) % world_] + settings_.slots_per_peer) {
        ++carrier_to;
      }
    }
    const std::uint32_t step = (peer + world_ - rank_) % world_;
    if (step >= carrier_from && step < carrier_to) continue;  // its part carries them
    if (sends_outstanding_[peer] >= send_depth_) continue;    // the next progress() sends them
    SendRequest request = SendRequest::send_with_immediate(
        wr_id(WorkKind::credit, peer), {}, AllToAllImmediate::credit(credits_owed_[peer]));
    qps_[peer]->post_send(request);
    ++sends_outstanding_[peer];
    credits_owed_[peer] = 0;
  }
}

void AllToAllCore::post_receive(std::uint32_t peer) {
  ReceiveRequest request(wr_id(WorkKind::receive, peer), {});
  qps_[peer]->post_receive(request);
  ++receives_posted_[peer];
}

void AllToAllCore::progress() {
  for (;;) {
    const std::span<WorkCompletion> done = cq_.poll(batch_);
    for (const WorkCompletion& completion : done) take(completion);
    if (done.size() < batch_.size()) break;
  }
  post_parts();  // first, so that the parts carry what credits they can
  post_credits();
}

void AllToAllCore::take(const WorkCompletion& completion) {
  const std::uint64_t id = completion.wr_id();
  const auto kind = static_cast<WorkKind>(id >> kKindShift);
  const auto peer = static_cast<std::uint32_t>(id);
  if (kind == WorkKind::receive) {
    --receives_posted_[peer];
  } else {
    --sends_outstanding_[peer];
  }
  if (!completion.ok()) [[unlikely]]
    fail_completion(completion);
  switch (kind) {
    case WorkKind::part:
      ++writes_done_[static_cast<std::uint32_t>((id >> 32U) & kSlotMask)];
      --in_window_;
      break;
    case WorkKind::credit: break;
    case WorkKind::receive:
      post_receive(peer);
      take_message(peer, completion);
      break;
  }
}

void AllToAllCore::take_message(std::uint32_t peer, const WorkCompletion& completion) {
  const std::optional<std::uint32_t> immediate = completion.immediate();
  if (!immediate) [[unlikely]] {
    fail_protocol(peer, "sent a message without immediate data");
  }
  // A credit alone, or credits a part carries.
  credits_from_[peer] += AllToAllImmediate::credits(*immediate);
  if (credits_from_[peer] > started_) [[unlikely]] {
    fail_protocol(peer, "released round " + std::to_string(credits_from_[peer] - 1) +
                            ", which this rank has not sent");
  }
  if (AllToAllImmediate::is_credit(*immediate)) return;
  const std::uint64_t round = next_from_[peer];
  if (AllToAllImmediate::round_bits(*immediate) != (round & AllToAllImmediate::kRoundMask))
      [[unlikely]] {
    fail_protocol(peer, "wrote a part of round " +
                            std::to_string(AllToAllImmediate::round_bits(*immediate)) +
                            " (modulo 32) where round " + std::to_string(round) +
                            " was due: a part of the wrong round is not data");
  }
  if (round >= released_ + settings_.slots_per_peer) [[unlikely]] {
    fail_protocol(peer, "wrote round " + std::to_string(round) +
                            " into a slot this rank still holds (no credit was given for it)");
  }
  const std::uint32_t size = AllToAllImmediate::size(*immediate);
  if (size > settings_.slot_size) [[unlikely]] {
    fail_protocol(peer, "wrote a part of " + std::to_string(size) + " bytes, over the slot size " +
                            std::to_string(settings_.slot_size));
  }
  const std::uint32_t slot = slot_of(round);
  part_sizes_[book_index(slot, peer)] = size;
  ++parts_landed_[slot];
  ++next_from_[peer];
}

bool AllToAllCore::round_complete() const noexcept {
  if (!in_flight()) return false;
  const std::uint32_t slot = slot_of(returned_);
  return next_step_[slot] == world_ && writes_done_[slot] == world_ - 1 &&
         parts_landed_[slot] == world_;
}

AllToAllRound AllToAllCore::finish_round() {
  ++returned_;
  return {weak_from_this(), returned_ - 1};
}

std::optional<AllToAllRound> AllToAllCore::poll() {
  constexpr const char* kCall = "PersistentAllToAll::poll";
  check_usable(kCall);
  if (!in_flight()) {
    throw Error(ErrorKind::state, kCall, EPERM, "no round is started", "start() one first");
  }
  progress();
  if (round_complete()) return finish_round();
  check_control();
  return std::nullopt;
}

AllToAllRound AllToAllCore::wait(std::optional<Duration> timeout) {
  constexpr const char* kCall = "PersistentAllToAll::wait";
  check_usable(kCall);
  ibv::detail::check_positive_timeout(timeout, kCall);
  if (!in_flight()) {
    throw Error(ErrorKind::state, kCall, EPERM, "no round is started", "start() one first");
  }
  const Duration limit = timeout.value_or(*settings_.timeout);
  const bool done = ibv::detail::wait_by_mode(
      *settings_.wait_mode, Clock::now() + limit,
      [&] {
        progress();
        if (round_complete()) return true;
        check_control();
        return false;
      },
      [&] { cq_.request_notification(); },
      [&](Clock::duration left) {
        // A failure or a revoke raises no completion here: sleep no longer than a look at the
        // control plane may wait.
        (void)completion_channel_->wait_and_consume(
            control_ ? std::min<Clock::duration>(left, kControlLook) : left);
      },
      [](Clock::time_point) {});
  if (!done) fail_timeout(limit);
  return finish_round();
}

std::span<const std::byte> AllToAllCore::part(std::uint64_t round, std::uint32_t source) const {
  constexpr const char* kCall = "AllToAllRound::part";
  if (source >= world_) {
    throw_invalid_argument(
        kCall, "source",
        std::to_string(source) + " is not a rank of a world of " + std::to_string(world_));
  }
  const std::uint32_t slot = slot_of(round);
  if (round < released_ || round >= returned_ || released_early_[slot]) {
    throw Error(
        ErrorKind::state, kCall, EPERM,
        "round " + std::to_string(round) + " was released: its slots are the senders' again");
  }
  const std::size_t index = book_index(slot, source);
  return {receive_bytes_.data() + index * settings_.slot_size,
          static_cast<std::size_t>(part_sizes_[index])};
}

void AllToAllCore::release(std::uint64_t round) noexcept {
  if (round < released_ || round >= returned_) return;
  released_early_[slot_of(round)] = true;
  std::uint32_t advanced = 0;
  while (released_ < returned_ && released_early_[slot_of(released_)]) {
    const std::uint32_t slot = slot_of(released_);
    released_early_[slot] = false;
    std::fill_n(part_sizes_.begin() + static_cast<std::ptrdiff_t>(book_index(slot, 0)), world_, -1);
    parts_landed_[slot] = 0;
    ++released_;
    ++advanced;
  }
  if (advanced == 0 || failure_) return;
  // Owed, not sent: the next start() carries them in its parts, and the next poll() or
  // wait() sends alone what no part carried (one message per peer and round saved).
  for (std::uint32_t peer = 0; peer < world_; ++peer) {
    if (peer != rank_) credits_owed_[peer] += advanced;
  }
}

int AllToAllCore::completion_fd() const {
  if (!completion_channel_) {
    throw Error(ErrorKind::state, "PersistentAllToAll::completion_fd", EPERM,
                "the all-to-all has no completion channel",
                "give AllToAllSettings::completion_channel, or a wait mode that sleeps");
  }
  return completion_channel_->fd();
}

void AllToAllCore::arm_completion_fd() {
  (void)completion_fd();  // throws without a channel
  cq_.request_notification();
}

std::size_t AllToAllCore::consume_completion_events() {
  (void)completion_fd();
  return completion_channel_->consume_events();
}

void AllToAllCore::fence() noexcept {
  // Destroyed, not only moved to the error state: ibv_destroy_qp returns once the device is
  // done with the queue pair, so no peer writes into the slots and no request reads the send
  // memory afterwards, without waiting for flushed completions (rxe on Linux 6.1 does not flush
  // the requests still queued on a queue pair that failed by itself, retry exceeded: a wait
  // for them would last until its deadline). The peers' queue pairs to this rank then fail too.
  for (auto& qp : qps_) qp.reset();
  // Nothing of the collective uses the keys any more: a region whose handle the caller let go
  // of is deregistered now, and its remote key means nothing to the peers.
  send_registration_.reset();
  receive_registration_.reset();
}

void AllToAllCore::check_control() {
  if (!control_) return;
  const std::uint64_t generation = control_->generation();
  if (generation == control_seen_) return;
  control_seen_ = generation;
  if (const auto revoker = control_->revoked_by()) {
    fail(Error(ErrorKind::revoked, "PersistentAllToAll", ECANCELED,
               "round " + std::to_string(returned_) + ": the Node was revoked by rank " +
                   std::to_string(*revoker),
               "the all-to-all is fenced now: shrink the Node (Node::shrink) and build the "
               "collective again on it"));
  }
  const std::vector<RankFailure> failures = control_->failures();
  if (!failures.empty()) {
    fail(Error(ErrorKind::peer_gone, "PersistentAllToAll", EIO,
               "round " + std::to_string(returned_) + ": " + failures.front().to_string() +
                   " has failed, and every round needs every rank",
               "the all-to-all is fenced now: shrink the Node (Node::shrink) and build the "
               "collective again on it, over the same memory"));
  }
}

void AllToAllCore::fail_completion(const WorkCompletion& completion) {
  const std::uint64_t id = completion.wr_id();
  const auto kind = static_cast<WorkKind>(id >> kKindShift);
  const auto peer = static_cast<std::uint32_t>(id);
  std::string what = "PersistentAllToAll: ";
  switch (kind) {
    case WorkKind::part: {
      const auto slot = static_cast<std::uint32_t>((id >> 32U) & kSlotMask);
      std::uint64_t round = returned_;
      while (round < started_ && slot_of(round) != slot) ++round;  // the one in flight there
      what += "the part of round " + std::to_string(round) + " to rank " + std::to_string(peer);
      break;
    }
    case WorkKind::credit: what += "a credit to rank " + std::to_string(peer); break;
    case WorkKind::receive: what += "a receive for rank " + std::to_string(peer); break;
  }
  if (kind_of(completion.status()) == ErrorKind::peer_gone) {
    what += qps_.at(peer) ? " (" + unanswered_rank_text(peer, qps_[peer]->settings()) + ")"
                          : std::string(" (rank gone, or too slow to answer)");
  }
  fail(WorkError(completion, what));
}

void AllToAllCore::fail_protocol(std::uint32_t peer, const std::string& what) {
  fail(Error(ErrorKind::protocol, "PersistentAllToAll", EPROTO,
             "rank " + std::to_string(peer) + " " + what));
}

void AllToAllCore::fail_timeout(Duration limit) {
  const std::uint64_t round = returned_;  // the oldest in flight: the one waited for
  const std::uint32_t slot = slot_of(round);
  std::vector<std::uint32_t> no_part;
  std::vector<std::uint32_t> no_credit;
  std::vector<std::uint32_t> unacknowledged;
  for (std::uint32_t step = 1; step < world_; ++step) {
    const std::uint32_t peer = (rank_ + step) % world_;
    const std::uint32_t source = (rank_ + world_ - step) % world_;
    if (part_sizes_[book_index(slot, source)] < 0) no_part.push_back(source);
    if (step >= next_step_[slot] && round >= credits_from_[peer] + settings_.slots_per_peer) {
      no_credit.push_back(peer);
    }
    if (sends_outstanding_[peer] > 0) unacknowledged.push_back(peer);
  }
  std::string detail = "round " + std::to_string(round) + " was not complete within " +
                       ibv::detail::duration_text(limit);
  if (!no_part.empty()) detail += "; no part yet from " + rank_list(no_part);
  if (!no_credit.empty()) {
    detail += "; no credit yet from " + rank_list(no_credit) + " (round " +
              std::to_string(round - settings_.slots_per_peer) + " still held there)";
  }
  if (!unacknowledged.empty())
    detail += "; writes not acknowledged by " + rank_list(unacknowledged);
  fail(Error(ErrorKind::timeout, "PersistentAllToAll::wait", ETIMEDOUT, detail,
             "are those ranks alive and running the same rounds? The all-to-all is fenced now: "
             "rebuild it on every rank"));
}

}  // namespace ibv::net::detail
