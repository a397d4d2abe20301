// SPDX-License-Identifier: MIT
// The control plane of a fault-tolerant Node: a detector thread probing the ring successor
// with 8-byte RDMA reads, failure reports written as monotone bitmaps into every peer's control
// block (a torn read of one is still a correct, older view), a doorbell word that says a report
// landed, the revoke mark passed on by every rank that sees it, and the agreement's messages.
// Over 500 lines: detection, reports, revoke and the agreement's transport share this one
// class's queue pairs, buffers and locks.
#include "net/control_plane.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <numeric>

#include "detail/big_endian.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv::net::detail {
namespace {

constexpr std::size_t kRevokeWord = 0;
constexpr std::size_t kDoorbellWord = 1;
constexpr std::size_t kHeartbeatWord = 2;  // the detector's tick count: its process runs
constexpr std::size_t kFirstSlotWord = 3;
// How many requests to one peer may be in flight before the next report waits for a tick.
constexpr std::size_t kMostInFlight = 8;
constexpr int kTicksPerProbe = FaultToleranceSettings::kReadsPerProbeInterval;
// Agreement messages: receives posted and send buffers per peer. An agreement sends a peer at
// most a few messages per ballot; more wait in a backlog, never in the device.
constexpr std::size_t kMessageSlots = 8;
// Decided agreements kept to answer ranks still in them.
constexpr std::size_t kKeptInstances = 8;

// The most bytes an encoded agreement message of a world of `world_size` ranks takes: a fixed
// part and at most two failed sets (a Promise's accepted value and contribution).
// At least kLeastMessageBytes, so that an in-band exchange's entries (endpoints, addresses, a
// few hundred bytes) take few chunks.
constexpr std::size_t kLeastMessageBytes = 512;
std::size_t message_bytes_for(std::uint32_t world_size) noexcept {
  return std::max(kLeastMessageBytes, 96 + 2 * (4 + (std::size_t{world_size} + 7) / 8));
}
// Every this many ticks the report slots are read whole even without a doorbell (a report
// whose doorbell landed before its bitmap is then still seen).
constexpr int kTicksPerFullRead = 16;

bool test_bit(std::span<const std::uint64_t> set, std::uint32_t rank) noexcept {
  return ((set[rank / 64] >> (rank % 64)) & 1U) != 0;
}

std::vector<std::uint32_t> every_rank(std::uint32_t world_size) {
  std::vector<std::uint32_t> ranks(world_size);
  std::iota(ranks.begin(), ranks.end(), 0U);
  return ranks;
}

// An in-band exchange chunk (not an agreement message, which starts with its version, 1): this
// byte, the sequence (8 bytes), the entry's length and this chunk's offset in it (4 bytes
// each, big-endian), then the chunk's bytes.
constexpr auto kExchangeChunk = std::byte{0xe7};
constexpr std::size_t kChunkHeader = 17;
// While an agree() or an exchange waits, its thread looks for messages without pausing until
// none has come for kLookWithoutPause (what a Node's barrier spins by default), then sleeps
// on the control queues' completion channel.
constexpr auto kLookWithoutPause = std::chrono::microseconds(50);

// A revoke mark: the epoch of the view revoked, and the revoker's rank (as built) + 1.
std::uint64_t revoke_mark(std::uint32_t epoch, std::uint32_t revoker) noexcept {
  return (std::uint64_t{epoch} << 32) | (std::uint64_t{revoker} + 1U);
}

std::uint64_t load(const std::uint64_t& word) noexcept {
  // The device may be writing it: read it as one 64-bit value.
  return std::atomic_ref<const std::uint64_t>(word).load(std::memory_order_acquire);
}

}  // namespace

std::size_t ControlPlane::block_bytes(std::uint32_t world_size) noexcept {
  return (kFirstSlotWord + std::size_t{world_size} * ((world_size + 63) / 64)) *
         sizeof(std::uint64_t);
}

ControlPlane::ControlPlane(const ProtectionDomain& pd, std::uint32_t rank, std::uint32_t world_size,
                           const FaultToleranceSettings& settings, const QueuePairSettings& base)
    : rank_(rank),
      world_size_(world_size),
      words_per_set_((world_size + 63) / 64),
      settings_(settings),
      block_(block_bytes(world_size) / sizeof(std::uint64_t), 0),
      outgoing_(kFirstSlotWord + words_per_set_, 0),
      probe_landing_(kFirstSlotWord, 0),
      block_mr_(pd.register_remote_accessible(std::as_writable_bytes(std::span(block_)),
                                              RemoteAccess::read() | RemoteAccess::write())),
      outgoing_mr_(pd.register_local(std::as_writable_bytes(std::span(outgoing_)))),
      probe_mr_(pd.register_local(std::as_writable_bytes(std::span(probe_landing_)))),
      completion_channel_(pd.context()),
      failures_(world_size),
      members_(every_rank(world_size)),
      view_of_(every_rank(world_size)),
      failed_bits_(words_per_set_),
      in_flight_(world_size),
      told_(world_size, 0),
      told_revoked_(world_size, 0),
      left_(world_size, false),
      control_fenced_(world_size, false),
      message_bytes_(message_bytes_for(world_size)),
      receive_buffers_(std::size_t{world_size} * kMessageSlots * message_bytes_),
      send_buffers_(std::size_t{world_size} * kMessageSlots * message_bytes_),
      receive_mr_(pd.register_local(receive_buffers_)),
      send_mr_(pd.register_local(send_buffers_)),
      receives_(world_size),
      sends_(world_size),
      next_send_slot_(world_size, 0),
      backlog_(world_size) {
  QueuePairSettings queue_pair = base;
  queue_pair.ack_timeout = settings.probe_ack_timeout;
  queue_pair.retry_count = settings.probe_retries;
  queue_pair.access = RemoteAccess::read() | RemoteAccess::write();
  queue_pair.max_send_wr = QueueDepth(4 * kMostInFlight + kMessageSlots);
  queue_pair.max_recv_wr = QueueDepth(kMessageSlots);
  // A peer whose receives are all taken is busy, not gone: its detector reposts them.
  queue_pair.rnr_retry = RnrRetryCount::infinite();
  queue_pair.max_inline_data.reset();
  // A request still in flight when its handle is dropped ends within the retry budget.
  const auto budget =
      std::chrono::nanoseconds(retry_budget(settings.probe_ack_timeout, settings.probe_retries));
  prepared_.emplace(
      MultiChannelBuilder(pd, rank, world_size)
          .completion_channel(completion_channel_)
          .queue_pair(queue_pair)
          .timeouts({.operation = Duration(4 * budget), .drop = Duration(4 * budget)})
          .completion_queue_size(static_cast<int>(4 * kMostInFlight + 2 * kMessageSlots))
          .build());
}

ControlPlane::~ControlPlane() {
  if (detector_.joinable()) {
    {
      const std::scoped_lock lock(stop_mutex_);
      stopping_ = true;
    }
    stop_changed_.notify_all();
    detector_.join();
  }
  if (!channels_) return;
  const std::scoped_lock lock(agreement_mutex_, post_mutex_);
  send_backlogs();
  tell_peers_left();
  end_queue_pairs();
}

void ControlPlane::send_backlogs() {
  // Within the detection bound: a peer that takes nothing in that long is as good as gone.
  const auto until = Clock::now() + settings_.detection_bound();
  for (bool waiting = true; waiting && Clock::now() < until;) {
    waiting = false;
    for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
      if (peer == rank_ || known_failed(peer)) continue;
      try {
        static_cast<void>(pump_messages(peer));
      } catch (const std::exception&) {  // a broken queue pair: nothing more goes there
        backlog_[peer].clear();
      }
      waiting = waiting || !backlog_[peer].empty();
    }
  }
}

void ControlPlane::tell_peers_left() {
  // Room for the marks: a peer's queue of requests in flight may be full.
  for (auto& works : in_flight_) {
    for (auto& work : works) settle(work);
    works.clear();
  }
  outgoing_[kFirstSlotWord + rank_ / 64] |= std::uint64_t{1} << (rank_ % 64);
  outgoing_[kDoorbellWord] += std::uint64_t{1} << 32;
  try {
    for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
      if (peer == rank_ || known_failed(peer)) continue;
      const auto slot = peer_blocks_[peer].sub_region(
          (kFirstSlotWord + std::size_t{rank_} * words_per_set_) * sizeof(std::uint64_t),
          words_per_set_ * sizeof(std::uint64_t));
      const std::array bitmap{
          outgoing_mr_.gather(std::span(outgoing_).subspan(kFirstSlotWord, words_per_set_))};
      static_cast<void>(post(peer, op::PeerWrite{bitmap, slot}));
      const std::array doorbell{outgoing_mr_.gather(std::span(&outgoing_[kDoorbellWord], 1))};
      static_cast<void>(post(
          peer, op::PeerWrite{doorbell, peer_blocks_[peer].element<std::uint64_t>(kDoorbellWord)}));
    }
    for (auto& works : in_flight_) {
      for (auto& work : works) static_cast<void>(work.wait_for(settings_.detection_bound()));
    }
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): leaving anyway
  }
}

void ControlPlane::end_queue_pairs() {
  // The receives never complete by themselves: flush every control queue pair, so that no
  // handle waits when it is dropped.
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_) continue;
    try {
      channels_->channel(peer).queue_pair().move_to_error();
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): already unusable
    }
  }
  // Their flushes are expected: take them here, so that no dropped handle reports one.
  const auto take = [&](PendingWork& work) { settle(work); };
  for (auto& posted : receives_) {
    for (auto& [slot, work] : posted) settle(work);
  }
  for (auto& posted : sends_) std::ranges::for_each(posted, take);
  for (auto& works : in_flight_) std::ranges::for_each(works, take);
  if (probe_) settle(*probe_);
}

void ControlPlane::settle(PendingWork& work) const noexcept {
  try {
    static_cast<void>(work.wait_for(settings_.detection_bound()));
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): failed or flushed: over
  }
}

Endpoint ControlPlane::endpoint_for(std::uint32_t peer) const {
  return prepared_->endpoint_for(peer);
}

void ControlPlane::handshake(std::span<const std::optional<Endpoint>> queue_pairs,
                             std::span<const RemoteMemoryRegion> blocks) {
  peer_blocks_.clear();
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    peer_blocks_.emplace_back(peer, blocks[peer]);
  }
  channels_.emplace(std::move(*prepared_).handshake(queue_pairs));
  prepared_.reset();
  outgoing_[kDoorbellWord] = rank_ + 1U;
  const std::scoped_lock lock(post_mutex_);
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_) continue;
    for (std::size_t slot = 0; slot < kMessageSlots; ++slot) post_receive(peer, slot);
  }
}

void ControlPlane::post_receive(std::uint32_t peer, std::size_t slot) {
  const std::size_t at = (std::size_t{peer} * kMessageSlots + slot) * message_bytes_;
  const std::array into{
      receive_mr_.scatter(std::span(receive_buffers_).subspan(at, message_bytes_))};
  receives_[peer].emplace_back(slot, channels_->post(peer, op::Receive{into}));
}

void ControlPlane::start() {
  if (detector_.joinable() || !channels_) return;
  detector_ = std::thread([this] { run(); });
}

std::optional<std::uint32_t> ControlPlane::view_rank(std::uint32_t rank) const {
  if (rank >= view_of_.size() || view_of_[rank] == kNotInView) return std::nullopt;
  return view_of_[rank];
}

RankFailure ControlPlane::in_view(RankFailure failure) const {
  const std::uint32_t rank = view_of_[failure.rank];
  failure.reported_by = view_rank(failure.reported_by).value_or(rank);
  failure.rank = rank;
  return failure;
}

std::vector<RankFailure> ControlPlane::failures() const {
  const std::scoped_lock lock(state_mutex_);
  std::vector<RankFailure> known;
  for (const std::uint32_t member : members_) {
    if (failures_[member]) known.push_back(in_view(*failures_[member]));
  }
  return known;
}

std::optional<RankFailure> ControlPlane::failure_of(std::uint32_t rank) const {
  const std::scoped_lock lock(state_mutex_);
  if (rank >= members_.size() || !failures_[members_[rank]]) return std::nullopt;
  return in_view(*failures_[members_[rank]]);
}

std::optional<std::uint32_t> ControlPlane::revoked_by() const {
  const std::scoped_lock lock(state_mutex_);
  if (revoke_mark_ == 0 || (revoke_mark_ >> 32) != epoch_) return std::nullopt;
  return view_rank(static_cast<std::uint32_t>(revoke_mark_ & 0xffffffffU) - 1U);
}

std::uint32_t ControlPlane::epoch() const {
  const std::scoped_lock lock(state_mutex_);
  return epoch_;
}

void ControlPlane::shrink_view(std::span<const std::uint32_t> survivors, FailureCause cause) {
  std::vector<std::uint32_t> lost;
  {
    const std::scoped_lock lock(state_mutex_);
    std::vector<std::uint32_t> members;
    members.reserve(survivors.size());
    for (const std::uint32_t rank : survivors) members.push_back(members_.at(rank));
    for (const std::uint32_t member : members_) {
      if (!std::ranges::binary_search(members, member)) lost.push_back(member);
    }
    members_ = std::move(members);
    std::ranges::fill(view_of_, kNotInView);
    for (std::uint32_t rank = 0; rank < members_.size(); ++rank) view_of_[members_[rank]] = rank;
    ++epoch_;
  }
  for (const std::uint32_t rank : lost) record(rank, cause, rank_);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  if (!channels_) return;
  const std::scoped_lock lock(post_mutex_);
  fence_control();
  try {
    send_news();
  } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): the detector's next tick
                                     // sends it again
  }
}

bool ControlPlane::known_failed(std::uint32_t rank) const noexcept {
  return ((failed_bits_[rank / 64].load(std::memory_order_acquire) >> (rank % 64)) & 1U) != 0;
}

std::uint64_t ControlPlane::word(std::size_t index) const noexcept { return load(block_[index]); }

bool ControlPlane::record(std::uint32_t rank, FailureCause cause, std::uint32_t reported_by) {
  if (rank == rank_ || rank >= world_size_) return false;
  {
    const std::scoped_lock lock(state_mutex_);
    if (failures_[rank]) return false;
    failures_[rank] = RankFailure{
        .rank = rank, .cause = cause, .reported_by = reported_by, .known = Clock::now()};
    failed_bits_[rank / 64].fetch_or(std::uint64_t{1} << (rank % 64), std::memory_order_release);
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

bool ControlPlane::record_revocation(std::uint64_t mark) {
  {
    const std::scoped_lock lock(state_mutex_);
    const std::uint64_t epoch = mark >> 32;
    if (epoch < epoch_ || (revoke_mark_ != 0 && (revoke_mark_ >> 32) >= epoch)) return false;
    revoke_mark_ = mark;
  }
  generation_.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

void ControlPlane::declare_failed(std::uint32_t rank, FailureCause cause) {
  std::uint32_t member = 0;
  {
    const std::scoped_lock lock(state_mutex_);
    if (rank >= members_.size()) return;
    member = members_[rank];
  }
  if (!record(member, cause, rank_)) return;
  if (!channels_) return;
  const std::scoped_lock lock(post_mutex_);
  send_news();
}

void ControlPlane::revoke() {
  record_revocation(revoke_mark(epoch(), rank_));
  if (!channels_) return;
  const std::scoped_lock lock(post_mutex_);
  send_news();
}

std::optional<std::uint32_t> ControlPlane::ring_successor() const {
  for (std::uint32_t step = 1; step < world_size_; ++step) {
    const std::uint32_t peer = (rank_ + step) % world_size_;
    if (!known_failed(peer)) return peer;
  }
  return std::nullopt;
}

bool ControlPlane::post(std::uint32_t peer, const op::PeerWrite& write) {
  auto& works = in_flight_[peer];
  if (works.size() >= kMostInFlight || known_failed(peer)) return false;
  works.push_back(channels_->post(peer, write));
  return true;
}

void ControlPlane::run() {
  const auto tick_length = std::chrono::nanoseconds(settings_.probe_interval) / kTicksPerProbe;
  auto next_probe = Clock::now();
  int ticks = 0;
  std::unique_lock lock(stop_mutex_);
  while (!stopping_) {
    lock.unlock();
    const auto now = Clock::now();
    const bool probe_due = now >= next_probe;
    if (probe_due) next_probe = now + settings_.probe_interval;
    try {
      read_block(++ticks % kTicksPerFullRead == 0);
      tick(probe_due);
      static_cast<void>(drive_agreements());
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
      // A post the device refused: the peer's queue pair is broken, which the next tick's
      // completions show; nothing here may end the thread.
    }
    lock.lock();
    stop_changed_.wait_for(lock, tick_length, [&] { return stopping_; });
  }
}

void ControlPlane::tick(bool probe_due) {
  std::atomic_ref<std::uint64_t>(block_[kHeartbeatWord]).fetch_add(1, std::memory_order_relaxed);
  const std::scoped_lock lock(post_mutex_);
  reap();
  fence_control();
  if (probe_due && !probe_) {
    if (const auto successor = ring_successor()) {
      const std::array into{probe_mr_.scatter(std::span(probe_landing_))};
      probing_ = *successor;
      probe_.emplace(channels_->post(
          *successor, op::PeerRead{into, peer_blocks_[*successor].sub_region(
                                             0, probe_landing_.size() * sizeof(std::uint64_t))}));
    }
  }
  send_news();
}

void ControlPlane::reap() {
  if (probe_) {
    if (const auto& completion = probe_->poll()) {
      const std::uint32_t peer = *probing_;
      const bool ok = completion->ok();
      probe_.reset();
      probing_.reset();
      if (!ok) {
        record(peer, FailureCause::probe, rank_);
      } else {
        if (const std::uint64_t mark = load(probe_landing_[kRevokeWord]); mark != 0) {
          record_revocation(mark);
        }
        watch_heartbeat(peer, load(probe_landing_[kHeartbeatWord]));
      }
    }
  }
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    std::erase_if(in_flight_[peer], [&](PendingWork& work) {
      const auto& completion = work.poll();
      if (!completion) return false;
      if (!completion->ok()) record(peer, FailureCause::completion, rank_);
      return true;
    });
  }
}

void ControlPlane::watch_heartbeat(std::uint32_t peer, std::uint64_t heartbeat) {
  const auto now = Clock::now();
  if (watched_ != peer || heartbeat != watched_heartbeat_) {
    watched_ = peer;
    watched_heartbeat_ = heartbeat;
    watched_since_ = now;
    return;
  }
  if (now - watched_since_ > std::chrono::nanoseconds(settings_.stall_timeout)) {
    record(peer, FailureCause::stalled, rank_);
  }
}

void ControlPlane::fence_control() {
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_ || control_fenced_[peer] || !known_failed(peer)) continue;
    control_fenced_[peer] = true;
    try {
      channels_->channel(peer).queue_pair().move_to_error();
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): unusable already
    }
  }
}

void ControlPlane::read_block(bool full) {
  if (const std::uint64_t mark = word(kRevokeWord); mark != 0) record_revocation(mark);
  const std::uint64_t doorbell = word(kDoorbellWord);
  if (!full && doorbell == doorbell_seen_) return;
  doorbell_seen_ = doorbell;
  // A sender's own bit in its slot says it left in good order. Those first, so that a rank
  // that left is recorded as such even when another rank's report of it is there too.
  const auto slot_word = [&](std::uint32_t sender, std::uint32_t rank) {
    return word(kFirstSlotWord + std::size_t{sender} * words_per_set_ + rank / 64);
  };
  for (std::uint32_t sender = 0; sender < world_size_; ++sender) {
    if (sender == rank_ || known_failed(sender)) continue;
    if (((slot_word(sender, sender) >> (sender % 64)) & 1U) != 0) {
      left_[sender] = record(sender, FailureCause::left, sender);
    }
  }
  // Then the reports. A crashed sender's are not taken (it is fenced); one that left in good
  // order was sound until it left, and what it reported before is still news to this rank.
  std::vector<std::uint64_t> slot(words_per_set_);
  for (std::uint32_t sender = 0; sender < world_size_; ++sender) {
    if (sender == rank_ || (known_failed(sender) && !left_[sender])) continue;
    const std::size_t first = kFirstSlotWord + std::size_t{sender} * words_per_set_;
    for (std::size_t w = 0; w < words_per_set_; ++w) slot[w] = word(first + w);
    for (std::uint32_t rank = 0; rank < world_size_; ++rank) {
      if (test_bit(slot, rank) && !known_failed(rank)) record(rank, FailureCause::report, sender);
    }
  }
}

void ControlPlane::send_news() {
  // This rank's bitmap is what it knows; it only ever gains bits, so rewriting it while an
  // earlier write of it is in flight sends an older or newer view, never a wrong one.
  std::uint64_t gained = 0;
  for (std::size_t w = 0; w < words_per_set_; ++w) {
    const std::uint64_t bits = failed_bits_[w].load(std::memory_order_acquire);
    gained |= bits & ~outgoing_[kFirstSlotWord + w];
    outgoing_[kFirstSlotWord + w] |= bits;
  }
  if (gained != 0) {
    ++report_generation_;
    outgoing_[kDoorbellWord] += std::uint64_t{1} << 32;
  }
  std::uint64_t mark = 0;
  {
    const std::scoped_lock lock(state_mutex_);
    mark = revoke_mark_;
  }
  if (mark != 0) outgoing_[kRevokeWord] = mark;
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_ || known_failed(peer)) continue;
    const auto& block = peer_blocks_[peer];
    if (mark != 0 && told_revoked_[peer] != mark) {
      const std::array source{outgoing_mr_.gather(std::span(&outgoing_[kRevokeWord], 1))};
      if (post(peer, op::PeerWrite{source, block.element<std::uint64_t>(kRevokeWord)})) {
        told_revoked_[peer] = mark;
      }
    }
    if (told_[peer] == report_generation_) continue;
    if (in_flight_[peer].size() + 2 > kMostInFlight) continue;
    const auto slot = block.sub_region(
        (kFirstSlotWord + std::size_t{rank_} * words_per_set_) * sizeof(std::uint64_t),
        words_per_set_ * sizeof(std::uint64_t));
    const std::array bitmap{
        outgoing_mr_.gather(std::span(outgoing_).subspan(kFirstSlotWord, words_per_set_))};
    const std::array doorbell{outgoing_mr_.gather(std::span(&outgoing_[kDoorbellWord], 1))};
    if (post(peer, op::PeerWrite{bitmap, slot}) &&
        post(peer, op::PeerWrite{doorbell, block.element<std::uint64_t>(kDoorbellWord)})) {
      told_[peer] = report_generation_;
    }
  }
}

RankSet ControlPlane::failed_set() const {
  RankSet failed;
  for (std::uint32_t rank = 0; rank < world_size_; ++rank) {
    if (known_failed(rank)) failed.insert(rank);
  }
  return failed;
}

void ControlPlane::sleep_until_completion(Clock::time_point deadline) {
  // Armed first, then looked at once more, so that no completion is missed; at most a tick,
  // since the detector's news of a failure comes without one.
  const auto longest = std::min<Clock::duration>(
      deadline - Clock::now(), std::chrono::nanoseconds(settings_.probe_interval) / kTicksPerProbe);
  try {
    {
      const std::scoped_lock both(agreement_mutex_, post_mutex_);
      channels_->arm_completion_fd();
    }
    if (drive_agreements() || longest <= Clock::duration::zero()) return;
    static_cast<void>(completion_channel_.wait_and_consume(Duration(longest)));
  } catch (const std::exception&) {
    // No peer to arm (a Node of one), or a post the device refused (the detector's next tick
    // sees the broken queue pair): a short pause instead.
    std::this_thread::sleep_for(std::min<Clock::duration>(kLookWithoutPause, longest));
  }
}

bool ControlPlane::drive_until(std::unique_lock<std::mutex>& lock, Clock::time_point deadline,
                               const std::function<bool()>& done) {
  auto last_message = Clock::now();
  bool finished = done();
  while (!finished && Clock::now() < deadline) {
    // This thread takes and sends the messages itself: no hand-off to the detector thread on
    // the way of each message.
    lock.unlock();
    bool progressed = false;
    try {
      progressed = drive_agreements();
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch)
      // A post the device refused: the detector's next tick sees the broken queue pair.
    }
    if (progressed) last_message = Clock::now();
    if (!progressed && Clock::now() - last_message >= kLookWithoutPause) {
      sleep_until_completion(deadline);
      last_message = Clock::now() - kLookWithoutPause;  // look once more, then sleep again
    }
    lock.lock();
    finished = done();
  }
  return finished;
}

AgreementValue ControlPlane::agree(std::uint32_t flags, Duration timeout) {
  std::unique_lock lock(agreement_mutex_);
  const std::uint64_t instance = next_instance_++;
  const RankSet failed = failed_set();
  std::vector<bool> told(world_size_, false);
  for (const std::uint32_t rank : failed) told[rank] = true;
  Instance& started =
      instances_
          .try_emplace(instance, Instance{Agreement(rank_, world_size_, instance, failed,
                                                    AgreementValue{.flags = flags, .failed = {}}),
                                          std::move(told)})
          .first->second;
  started.agreement.start();
  if (const auto early = early_.find(instance); early != early_.end()) {
    for (const auto& [from, message] : early->second) started.agreement.on_message(from, message);
    early_.erase(early);
  }
  const bool decided = drive_until(lock, Clock::now() + std::chrono::nanoseconds(timeout), [&] {
    return instances_.at(instance).agreement.decided().has_value();
  });
  if (!decided) {
    throw Error(ErrorKind::timeout, "Node::agree", ETIMEDOUT,
                "agreement " + std::to_string(instance) + " did not decide within " +
                    ibv::detail::duration_text(timeout),
                "every surviving rank must call agree() as often as this one; a rank that "
                "never does holds the others up");
  }
  AgreementValue value = *instances_.at(instance).agreement.decided();
  RankSet in_view;
  {
    const std::scoped_lock state(state_mutex_);
    for (const std::uint32_t rank : value.failed) {
      if (const auto view = view_rank(rank)) in_view.insert(*view);
    }
  }
  // What the others knew, this rank knows now: every survivor holds the same failed set.
  for (const std::uint32_t rank : value.failed) record(rank, FailureCause::report, rank_);
  value.failed = std::move(in_view);
  return value;
}

bool ControlPlane::take_messages() {
  bool changed = false;
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    auto& posted = receives_[peer];
    while (!posted.empty()) {
      const auto& completion = posted.front().second.poll();
      if (!completion) break;
      const std::size_t slot = posted.front().first;
      const bool ok = completion->ok();
      const std::size_t length = completion->byte_length();
      posted.pop_front();
      if (!ok) break;  // flushed: the peer is gone, or this plane is closing
      changed = true;
      const std::size_t at = (std::size_t{peer} * kMessageSlots + slot) * message_bytes_;
      const auto bytes = std::span(receive_buffers_).subspan(at, std::min(length, message_bytes_));
      if (!bytes.empty() && bytes[0] == kExchangeChunk) {
        // An exchange entry counts whoever sent it: it landed before the peer's fence (nothing
        // lands after), so it is what the peer sent while it was sound. A peer may finish an
        // exchange and leave, or die, before this rank takes its entry; how this rank learned
        // of it (the peer's own mark, or another rank's report) must not decide.
        take_chunk(peer, bytes);
      } else if (!known_failed(peer)) {  // the agreements were told it failed: not its votes
        try {
          const AgreementMessage message = decode_agreement_message(bytes);
          if (const auto found = instances_.find(message.instance); found != instances_.end()) {
            found->second.agreement.on_message(peer, message);
          } else if (message.instance >= next_instance_) {
            early_[message.instance].emplace_back(peer, message);
          }
        } catch (const Error&) {  // NOLINT(bugprone-empty-catch)
          // Not a message of this version: a peer's bug; the agreement goes on without it.
        }
      }
      if (!known_failed(peer)) post_receive(peer, slot);
    }
  }
  return changed;
}

bool ControlPlane::drive_agreements() {
  const std::scoped_lock lock(agreement_mutex_, post_mutex_);
  bool changed = take_messages();
  // Failures the agreements have not been told of yet (only when something is new).
  const std::uint64_t generation = generation_.load(std::memory_order_acquire);
  const bool news = generation != agreements_generation_;
  agreements_generation_ = generation;
  for (auto& [instance, entry] : instances_) {
    if (!news) break;
    for (std::uint32_t rank = 0; rank < world_size_; ++rank) {
      if (rank != rank_ && !entry.told_failed[rank] && known_failed(rank)) {
        entry.told_failed[rank] = true;
        entry.agreement.on_failure(rank);
        changed = true;
      }
    }
  }
  // What they queued.
  for (auto& [instance, entry] : instances_) {
    for (AgreementOutgoing& out : entry.agreement.take_outbox()) {
      send_message(out.to, encode_agreement_message(out.message));
    }
  }
  // Sends that completed free their slots (an exchange_flush() waits for that); backlogs go
  // out.
  for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
    changed = pump_messages(peer) || changed;
  }
  // The oldest decided instances go once there are more than kKeptInstances: a rank still in
  // one of those is that many agreements behind.
  while (instances_.size() > kKeptInstances && instances_.begin()->second.agreement.decided()) {
    instances_.erase(instances_.begin());
  }
  return changed;
}

void ControlPlane::send_message(std::uint32_t peer, std::vector<std::byte> bytes) {
  if (peer == rank_ || peer >= world_size_ || known_failed(peer)) return;
  if (sends_[peer].size() >= kMessageSlots || !backlog_[peer].empty()) {
    backlog_[peer].push_back(std::move(bytes));
    return;
  }
  post_message(peer, bytes);
}

bool ControlPlane::pump_messages(std::uint32_t peer) {
  bool freed = false;
  while (!sends_[peer].empty() && sends_[peer].front().poll()) {
    sends_[peer].pop_front();
    freed = true;
  }
  while (!backlog_[peer].empty() && sends_[peer].size() < kMessageSlots && !known_failed(peer)) {
    post_message(peer, backlog_[peer].front());
    backlog_[peer].pop_front();
  }
  return freed;
}

void ControlPlane::post_message(std::uint32_t peer, std::span<const std::byte> bytes) {
  if (bytes.size() > message_bytes_) {
    throw Error(ErrorKind::protocol, "ControlPlane::post_message", EMSGSIZE,
                "a control message of " + std::to_string(bytes.size()) +
                    " bytes does not fit its buffer of " + std::to_string(message_bytes_));
  }
  const std::size_t slot = next_send_slot_[peer]++ % kMessageSlots;
  const std::size_t at = (std::size_t{peer} * kMessageSlots + slot) * message_bytes_;
  const auto buffer = std::span(send_buffers_).subspan(at, bytes.size());
  std::copy(bytes.begin(), bytes.end(), buffer.begin());
  const std::array data{send_mr_.gather(buffer)};
  sends_[peer].push_back(channels_->post(peer, op::Send{data}));
}

std::uint32_t ControlPlane::view_size() const {
  const std::scoped_lock lock(state_mutex_);
  return static_cast<std::uint32_t>(members_.size());
}

std::uint32_t ControlPlane::view_rank() const {
  const std::scoped_lock lock(state_mutex_);
  return view_of_[rank_];
}

void ControlPlane::exchange_send(std::uint64_t sequence, std::uint32_t peer,
                                 std::span<const std::byte> bytes) {
  std::uint32_t member = 0;
  {
    const std::scoped_lock lock(state_mutex_);
    member = members_.at(peer);
  }
  const std::size_t room = message_bytes_ - kChunkHeader;
  const std::scoped_lock lock(agreement_mutex_, post_mutex_);
  std::size_t offset = 0;
  do {
    const std::size_t length = std::min(room, bytes.size() - offset);
    std::array<std::byte, kChunkHeader> header{};
    header[0] = kExchangeChunk;
    ibv::detail::put_big_endian(&header[1], sequence, 8);
    ibv::detail::put_big_endian(&header[9], bytes.size(), 4);
    ibv::detail::put_big_endian(&header[13], offset, 4);
    std::vector<std::byte> chunk(header.begin(), header.end());
    const auto part = bytes.subspan(offset, length);
    chunk.insert(chunk.end(), part.begin(), part.end());
    send_message(member, std::move(chunk));
    offset += length;
  } while (offset < bytes.size());
}

void ControlPlane::take_chunk(std::uint32_t peer, std::span<const std::byte> chunk) {
  if (chunk.size() < kChunkHeader) return;  // a peer's bug: nothing to take
  const std::uint64_t sequence = ibv::detail::get_big_endian(&chunk[1], 8);
  const std::uint64_t total = ibv::detail::get_big_endian(&chunk[9], 4);
  const std::uint64_t offset = ibv::detail::get_big_endian(&chunk[13], 4);
  const auto payload = chunk.subspan(kChunkHeader);
  Entry& entry = entries_[{sequence, peer}];
  if (!entry.sized) {
    entry.bytes.resize(total);
    entry.sized = true;
  }
  if (total != entry.bytes.size() || offset > total || payload.size() > total - offset) {
    return;  // does not fit the entry it names
  }
  std::ranges::copy(payload, entry.bytes.begin() + static_cast<std::ptrdiff_t>(offset));
  entry.received += payload.size();
}

void ControlPlane::exchange_flush(Clock::time_point deadline) {
  std::unique_lock lock(agreement_mutex_);
  drive_until(lock, deadline, [&] {
    for (std::uint32_t peer = 0; peer < world_size_; ++peer) {
      if (peer == rank_ || known_failed(peer)) continue;
      if (!backlog_[peer].empty() || !sends_[peer].empty()) return false;
    }
    return true;
  });
}

std::optional<std::vector<std::byte>> ControlPlane::exchange_receive(std::uint64_t sequence,
                                                                     std::uint32_t peer,
                                                                     Clock::time_point deadline) {
  std::uint32_t member = 0;
  {
    const std::scoped_lock lock(state_mutex_);
    member = members_.at(peer);
  }
  std::unique_lock lock(agreement_mutex_);
  const auto complete = [&] {
    const auto found = entries_.find({sequence, member});
    return found != entries_.end() && found->second.sized &&
           found->second.received >= found->second.bytes.size();
  };
  // A rank may finish the exchange and leave (or die) while its entry waits to be taken, and
  // this rank may hear of it first: give the entry a probe interval once the rank is known
  // failed.
  std::optional<Clock::time_point> given_up;
  drive_until(lock, deadline, [&] {
    if (complete()) return true;
    if (!known_failed(member)) return false;
    const auto now = Clock::now();
    if (!given_up) given_up = now + std::chrono::nanoseconds(settings_.probe_interval);
    return now >= *given_up;
  });
  if (!complete()) return std::nullopt;
  const auto found = entries_.find({sequence, member});
  std::vector<std::byte> bytes = std::move(found->second.bytes);
  entries_.erase(found);
  return bytes;
}

}  // namespace ibv::net::detail
