// SPDX-License-Identifier: MIT
// DatagramEndpoint: the UD queue pair, the send buffers (a free list), the receive pool (lent
// as DatagramMessages and posted again on release), the address-handle cache per destination,
// the per-sender sequence accounting and the bounded waits (the Channel's wait loop).
#include "ibv/datagram/datagram_endpoint.hpp"

#include <infiniband/verbs.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "channel/wait_loop.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "ibv/verbs/completion_channel.hpp"
#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/memory_region.hpp"

namespace ibv {
namespace detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kMaxQpNumber = 0xFFFFFF;
constexpr std::size_t kGrh = GlobalRouteHeader::kSize;
constexpr std::size_t kHeader = DatagramHeader::kSize;

using GidBytes = std::array<std::uint8_t, 16>;
// A destination queue pair: QPN, GID, LID (not its Q_Key: a send with a wrong Q_Key takes a
// sequence number too, so that its loss shows as a gap). A route (one address handle): GID, LID.
using DestinationKey = std::tuple<std::uint32_t, GidBytes, std::uint16_t>;
using RouteKey = std::tuple<GidBytes, std::uint16_t>;
// A sender: QPN, GID (zero without a GRH), LID.
using SenderKey = std::tuple<std::uint32_t, GidBytes, std::uint16_t>;

// What the endpoint keeps of a destination queue pair: the address handle of its route (one
// per route, shared by the queue pairs behind it) and the sequence number of its next datagram.
struct Destination {
  AddressHandle ah;
  std::uint64_t next_sequence = 0;
};

SenderKey key_of(const UdSource& source) {
  return {source.qp_number, source.gid ? source.gid->bytes() : GidBytes{}, source.lid};
}

ProtectionDomain checked_pd(const ProtectionDomain& pd, const DatagramSettings& settings) {
  constexpr std::string_view kOperation = "DatagramEndpoint";
  check_positive(settings.timeout, "timeout", kOperation);
  const auto device = pd.context().query_device();
  for (const auto& [name, value] : {std::pair{"receive_buffers", settings.receive_buffers},
                                    std::pair{"send_buffers", settings.send_buffers}}) {
    if (value == 0 || std::cmp_greater(value, device.max_qp_wr)) {
      throw_invalid_argument(
          kOperation, std::string(name) + " " + std::to_string(value),
          "is out of range 1.." + std::to_string(device.max_qp_wr) + " (the device's max_qp_wr)");
    }
  }
  if (settings.service_level > 15) {
    throw_invalid_argument(kOperation, "service_level " + std::to_string(settings.service_level),
                           "is out of range 0..15 (the 4-bit InfiniBand service level)");
  }
  return pd;
}

std::optional<CompletionChannel> channel_for(const ProtectionDomain& pd, const WaitMode& mode) {
  if (!mode.sleeps()) return std::nullopt;
  return CompletionChannel(pd.context());
}

CompletionQueue queue_for(const ProtectionDomain& pd, std::uint32_t entries,
                          const std::optional<CompletionChannel>& channel) {
  return channel ? CompletionQueue(pd.context(), static_cast<int>(entries), *channel)
                 : CompletionQueue(pd.context(), static_cast<int>(entries));
}

UdQueuePair build_queue_pair(const ProtectionDomain& pd, const DatagramSettings& settings,
                             const CompletionQueue& send_cq, const CompletionQueue& recv_cq) {
  UdQueuePairSettings s;
  s.port = settings.port;
  s.gid_index = settings.gid_index;
  s.qkey = settings.qkey;
  s.max_send_wr = QueueDepth(settings.send_buffers);
  s.max_recv_wr = QueueDepth(settings.receive_buffers);
  return UdQueuePairBuilder(pd, send_cq, recv_cq).settings(s).build();
}

}  // namespace

/// Everything an endpoint owns; shared with the messages it lends (which post their buffer
/// back through it). Declaration order is destruction order reversed: the queue pair goes
/// first, then the address handles, then the memory.
struct DatagramCore {
  DatagramCore(const ProtectionDomain& domain, const DatagramSettings& s)
      : settings(s),
        pd(checked_pd(domain, s)),
        channel(channel_for(pd, s.wait_mode)),
        send_cq(queue_for(pd, s.send_buffers, channel)),
        recv_cq(queue_for(pd, s.receive_buffers, channel)),
        mtu(pd.context().query_port(s.port).active_mtu.bytes()),  // a UD QP's max message
        receive_slot(kGrh + mtu),
        receive_memory(receive_slot * s.receive_buffers),
        send_memory(static_cast<std::size_t>(mtu) * s.send_buffers),
        receive_mr(pd.register_local(receive_memory)),
        send_mr(pd.register_local(send_memory)),
        in_flight(s.send_buffers, 0) {
    qp.emplace(build_queue_pair(pd, s, send_cq, recv_cq));
    route.port = s.port;
    route.gid_index = qp->gid_index();
    route.service_level = s.service_level;
    route.traffic_class = s.traffic_class;
    route.hop_limit = s.hop_limit;
    free_sends.reserve(s.send_buffers);
    for (std::uint32_t i = s.send_buffers; i > 0; --i) free_sends.push_back(i - 1);
    for (std::uint32_t i = 0; i < s.receive_buffers; ++i) post_receive(i);
  }

  [[nodiscard]] std::span<std::byte> receive_buffer(std::uint32_t index) {
    return std::span(receive_memory).subspan(index * receive_slot, receive_slot);
  }

  void post_receive(std::uint32_t index) {
    // The endpoint's own registered buffer, its bounds known: the element is made unchecked
    // (post_receive checks the key and bounds against the protection domain anyway).
    const auto buffer = receive_buffer(index);
    const std::array elements{
        ScatterElement::from_raw(reinterpret_cast<std::uintptr_t>(buffer.data()),
                                 static_cast<std::uint32_t>(buffer.size()), receive_mr.lkey())};
    ReceiveRequest request(index, elements);
    qp->post_receive(request);
    posted_receives.fetch_add(1, std::memory_order_relaxed);
  }

  // Waits on `cq` as the wait mode says until `done()` or `deadline`.
  template <typename Done>
  bool wait_on(const CompletionQueue& cq, Clock::time_point deadline, Done&& done) {
    return wait_by_mode(
        settings.wait_mode, deadline, done, [&cq] { cq.request_notification(); },
        [this](Clock::duration left) { channel->wait_and_consume(left); },
        [](Clock::time_point /*now*/) {});
  }

  // Takes in the send completions there are: their buffers are free again; a failed one is
  // kept to be thrown.
  void poll_sends() {
    for (;;) {
      const auto polled = send_cq.poll(send_batch);
      for (const auto& completion : polled) {
        const auto slot = static_cast<std::uint32_t>(completion.wr_id());
        if (!completion.ok() && !failed_send) failed_send = completion;
        if (slot < in_flight.size() && in_flight[slot] != 0) {
          in_flight[slot] = 0;
          free_sends.push_back(slot);
        }
      }
      if (polled.size() < send_batch.size()) return;
    }
  }

  void throw_if_unusable(std::string_view operation) {
    if (failed_send) {
      const auto completion = *failed_send;
      broken = true;
      throw WorkError(completion, operation);
    }
    if (broken) {
      throw Error(ErrorKind::state, operation, EINVAL,
                  "the endpoint is unusable after an earlier send failed or timed out",
                  "build a new DatagramEndpoint");
    }
  }

  // Gives up on the sends in flight: the queue pair goes to error, so the device touches none
  // of their buffers, and the endpoint is unusable.
  [[noreturn]] void give_up(std::string_view operation, std::string_view what) {
    broken = true;
    try {
      qp->move_to_error();
    } catch (const Error&) {  // the timeout below says more than a failed transition would
    }
    throw Error(ErrorKind::timeout, operation, ETIMEDOUT,
                std::string(what) + " within " + duration_text(settings.timeout) +
                    "; the queue pair was moved to error, the endpoint is unusable",
                "a local send completes in microseconds: is the device or its port down?");
  }

  AddressHandle& address_handle(const UdAddress& to) {
    const RouteKey key{to.gid.bytes(), to.lid};
    if (const auto found = routes.find(key); found != routes.end()) return found->second;
    return routes.emplace(key, AddressHandle::to(pd, to, route)).first->second;
  }

  // A destination's address handle and next sequence number: one look-up per send, none when
  // it is the last destination sent to (a stream to one peer, or a reply). Map nodes stay put.
  Destination& destination_of(const UdAddress& to) {
    const DestinationKey key{to.qp_number, to.gid.bytes(), to.lid};
    if (last_destination != nullptr && last_destination->first == key) {
      return last_destination->second;
    }
    auto found = destinations.find(key);
    if (found == destinations.end()) {
      found = destinations.emplace(key, Destination{address_handle(to), 0}).first;
    }
    last_destination = &*found;
    return found->second;
  }

  [[nodiscard]] std::uint32_t max_payload(const UdAddress& to) const noexcept {
    return std::min(mtu, to.mtu.bytes()) - static_cast<std::uint32_t>(kHeader);
  }

  void send(const UdAddress& to, std::span<const std::byte> payload, bool wait_for_completion,
            std::string_view operation) {
    throw_if_unusable(operation);
    if (to.qp_number > kMaxQpNumber) {
      throw_invalid_argument(operation, to.to_string(), "has a QPN that does not fit 24 bits");
    }
    static_cast<void>(QKey(to.qkey));  // throws for a controlled Q_Key
    if (payload.size() > max_payload(to)) {
      throw_invalid_argument(operation, "payload of " + std::to_string(payload.size()) + " bytes",
                             "is more than the " + std::to_string(max_payload(to)) +
                                 " bytes a datagram to " + to.to_string() + " carries (path MTU " +
                                 std::to_string(std::min(mtu, to.mtu.bytes())) + " minus the " +
                                 std::to_string(kHeader) + "-byte header); nothing was posted");
    }
    Destination& destination = destination_of(to);
    // The clock is read only when a wait is needed: each wait is bounded by settings.timeout.
    if (free_sends.empty()) poll_sends();
    if (free_sends.empty() && !wait_on(send_cq, Clock::now() + settings.timeout, [this] {
          poll_sends();
          return !free_sends.empty() || failed_send.has_value();
        })) {
      give_up(operation, "no send buffer came free");
    }
    throw_if_unusable(operation);
    const std::uint32_t slot = free_sends.back();
    const auto buffer =
        std::span(send_memory)
            .subspan(static_cast<std::size_t>(slot) * mtu, kHeader + payload.size());
    DatagramHeader{destination.next_sequence}.write(buffer.first<kHeader>());
    std::copy(payload.begin(), payload.end(), buffer.subspan(kHeader).begin());
    const std::array elements{
        // our own buffer: unchecked, as post_receive's
        GatherElement::from_raw(reinterpret_cast<std::uintptr_t>(buffer.data()),
                                static_cast<std::uint32_t>(buffer.size()), send_mr.lkey())};
    auto request = UdSendRequest::to(slot, elements, destination.ah, to);
    if (buffer.size() <= qp->max_inline_data()) request.inline_data();
    qp->post_send(request);  // throws before anything is taken when the device refuses
    free_sends.pop_back();
    in_flight[slot] = 1;
    ++destination.next_sequence;
    ++sends_posted;
    if (!wait_for_completion) return;
    poll_sends();
    if (in_flight[slot] != 0 && !wait_on(send_cq, Clock::now() + settings.timeout, [this, slot] {
          poll_sends();
          return in_flight[slot] == 0;
        })) {
      give_up(operation, "the send did not complete");
    }
    throw_if_unusable(operation);
  }

  void flush(Duration timeout) {
    constexpr std::string_view kOperation = "DatagramEndpoint::flush";
    check_positive_timeout(timeout, kOperation);
    throw_if_unusable(kOperation);
    const auto deadline = Clock::now() + timeout;
    if (!wait_on(send_cq, deadline, [this] {
          poll_sends();
          return free_sends.size() == in_flight.size() || failed_send.has_value();
        })) {
      give_up(kOperation, "the posted sends did not complete");
    }
    throw_if_unusable(kOperation);
  }

  // The next datagram of ours from the receive queue, if one has arrived.
  std::optional<DatagramMessage> next(const std::shared_ptr<DatagramCore>& self);

  DatagramSettings settings;
  ProtectionDomain pd;
  std::optional<CompletionChannel> channel;
  CompletionQueue send_cq;
  CompletionQueue recv_cq;
  std::uint32_t mtu;
  std::size_t receive_slot;
  std::vector<std::byte> receive_memory;
  std::vector<std::byte> send_memory;
  MemoryRegion receive_mr;
  MemoryRegion send_mr;
  AddressHandleSettings route;
  std::map<RouteKey, AddressHandle> routes;  // kept for the endpoint's life: no orphans
  std::map<DestinationKey, Destination> destinations;
  std::pair<const DestinationKey, Destination>* last_destination = nullptr;
  std::array<WorkCompletion, 16> send_batch;  // not zeroed per poll
  std::array<WorkCompletion, 1> receive_one;
  std::map<SenderKey, std::pair<UdSource, SequenceTracker>> senders;
  std::pair<const SenderKey, std::pair<UdSource, SequenceTracker>>* last_sender = nullptr;

  // A sender's entry: one look-up per datagram, none when it is the last sender's (a stream).
  std::pair<UdSource, SequenceTracker>& sender_of(const UdSource& source) {
    const SenderKey key = key_of(source);
    if (last_sender == nullptr || last_sender->first != key) {
      last_sender = &*senders.try_emplace(key).first;
      last_sender->second.first = source;
    }
    return last_sender->second;
  }
  std::vector<std::uint32_t> free_sends;
  std::vector<std::uint8_t> in_flight;
  std::optional<WorkCompletion> failed_send;
  std::atomic<std::uint32_t> posted_receives{0};
  std::uint64_t sends_posted = 0;
  std::uint64_t foreign = 0;
  bool broken = false;
  std::optional<UdQueuePair> qp;  // destroyed before the handles and buffers
  // After the queue pair: destroyed first, which detaches it from each group and leaves.
  std::vector<std::pair<std::string, MulticastGroup>> groups;

  UdAddress join(std::string_view group, std::string_view local_address,
                 const MulticastOptions& options) {
    constexpr std::string_view kOperation = "DatagramEndpoint::join";
    if (std::ranges::any_of(groups, [&](const auto& entry) { return entry.first == group; })) {
      throw Error(ErrorKind::state, kOperation, EINVAL,
                  "group " + std::string(group) + " is joined already",
                  "leave() it first to join it again");
    }
    MulticastGroup membership(group, local_address, options);
    if (!options.send_only) membership.attach_borrowed(*qp, kOperation);  // checks, then attaches
    UdAddress destination = membership.destination();
    groups.emplace_back(std::string(group), std::move(membership));
    return destination;
  }

  bool leave(std::string_view group) {
    const auto it =
        std::ranges::find_if(groups, [&](const auto& entry) { return entry.first == group; });
    if (it == groups.end()) return false;
    MulticastGroup membership = std::move(it->second);
    groups.erase(it);
    membership.leave();  // detaches the queue pair first
    return true;
  }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// DatagramMessage

DatagramMessage::DatagramMessage(DatagramMessage&& other) noexcept
    : core_(std::move(other.core_)),
      buffer_(other.buffer_),
      data_(other.data_),
      source_(other.source_),
      sender_(other.sender_),
      sequence_(other.sequence_),
      lost_before_(other.lost_before_) {}

DatagramMessage& DatagramMessage::operator=(DatagramMessage&& other) noexcept {
  if (this != &other) {
    release();
    core_ = std::move(other.core_);
    buffer_ = other.buffer_;
    data_ = other.data_;
    source_ = other.source_;
    sender_ = other.sender_;
    sequence_ = other.sequence_;
    lost_before_ = other.lost_before_;
  }
  return *this;
}

DatagramMessage::~DatagramMessage() { release(); }

void DatagramMessage::release() noexcept {
  if (!core_) return;
  const auto core = std::move(core_);
  data_ = {};
  try {
    core->post_receive(buffer_);
  } catch (...) {  // NOLINT(bugprone-empty-catch): release() does not throw
    // The queue pair is in error (the endpoint gave up): the buffer stays unposted.
  }
}

std::optional<DatagramMessage> detail::DatagramCore::next(
    const std::shared_ptr<DatagramCore>& self) {
  for (;;) {
    const auto polled = recv_cq.poll(receive_one);
    if (polled.empty()) return std::nullopt;
    posted_receives.fetch_sub(1, std::memory_order_relaxed);
    const WorkCompletion& completion = polled.front();
    const auto index = static_cast<std::uint32_t>(completion.wr_id());
    if (!completion.ok()) {
      broken = true;
      throw WorkError(completion, "DatagramEndpoint::receive");
    }
    const UdReceived received(completion, receive_buffer(index));
    const auto header = DatagramHeader::read(received.payload());
    if (!header) {
      ++foreign;
      post_receive(index);
      continue;
    }
    auto& [source, tracker] = sender_of(received.source());
    DatagramMessage message;
    message.lost_before_ = tracker.record(header->sequence);
    message.core_ = self;
    message.buffer_ = index;
    message.data_ = received.payload().subspan(kHeader);
    message.source_ = received.source();
    message.sequence_ = header->sequence;
    message.sender_ = UdAddress{source.qp_number, settings.qkey.value(), source.lid,
                                source.gid.value_or(Gid{}), Mtu::from_bytes(mtu)};
    return message;
  }
}

// ---------------------------------------------------------------------------------------------
// DatagramEndpoint

DatagramEndpoint::DatagramEndpoint(const ProtectionDomain& pd, const DatagramSettings& settings)
    : core_(std::make_shared<detail::DatagramCore>(pd, settings)) {}

DatagramEndpoint::DatagramEndpoint(DatagramEndpoint&&) noexcept = default;
DatagramEndpoint& DatagramEndpoint::operator=(DatagramEndpoint&& other) noexcept {
  if (this != &other) {
    if (core_) core_->groups.clear();  // as the destructor
    core_ = std::move(other.core_);
  }
  return *this;
}
DatagramEndpoint::~DatagramEndpoint() {
  // Messages still lent keep the core alive, but the groups are left now: nothing of them
  // arrives for an endpoint that is gone.
  if (core_) core_->groups.clear();
}

UdAddress DatagramEndpoint::address() const { return core_->qp->address(); }

std::uint32_t DatagramEndpoint::max_payload() const noexcept {
  return core_->mtu - static_cast<std::uint32_t>(DatagramHeader::kSize);
}

std::uint32_t DatagramEndpoint::max_payload(const UdAddress& to) const noexcept {
  return core_->max_payload(to);
}

void DatagramEndpoint::send(const UdAddress& to, std::span<const std::byte> payload) {
  core_->send(to, payload, true, "DatagramEndpoint::send");
}

void DatagramEndpoint::post(const UdAddress& to, std::span<const std::byte> payload) {
  core_->send(to, payload, false, "DatagramEndpoint::post");
}

void DatagramEndpoint::flush(Duration timeout) { core_->flush(timeout); }

std::optional<DatagramMessage> DatagramEndpoint::receive(Duration timeout) {
  detail::check_positive_timeout(timeout, "DatagramEndpoint::receive");
  if (auto message = core_->next(core_)) return message;
  std::optional<DatagramMessage> message;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  core_->wait_on(core_->recv_cq, deadline, [&] {
    message = core_->next(core_);
    return message.has_value();
  });
  return message;
}

std::optional<DatagramMessage> DatagramEndpoint::try_receive() { return core_->next(core_); }

std::vector<DatagramSenderCounts> DatagramEndpoint::counts() const {
  std::vector<DatagramSenderCounts> result;
  result.reserve(core_->senders.size());
  for (const auto& sender : core_->senders) {
    result.push_back({sender.second.first, sender.second.second.counts()});
  }
  return result;
}

SequenceCounts DatagramEndpoint::counts(const UdAddress& sender) const {
  for (const auto& entry : core_->senders) {
    const UdSource& source = entry.second.first;
    // With a global route header the GID names the sender; without one (InfiniBand within a
    // subnet) only the LID does, and the address's GID (the port's) is not in the datagram.
    if (source.qp_number == sender.qp_number &&
        (source.gid ? *source.gid == sender.gid : source.lid == sender.lid)) {
      return entry.second.second.counts();
    }
  }
  return {};
}

std::uint64_t DatagramEndpoint::foreign_datagrams() const noexcept { return core_->foreign; }

std::uint32_t DatagramEndpoint::receive_buffers_posted() const noexcept {
  return core_->posted_receives.load(std::memory_order_relaxed);
}

std::uint32_t DatagramEndpoint::sends_in_flight() const noexcept {
  return static_cast<std::uint32_t>(core_->in_flight.size() - core_->free_sends.size());
}

std::size_t DatagramEndpoint::cached_destinations() const noexcept { return core_->routes.size(); }

UdAddress DatagramEndpoint::join(std::string_view group, std::string_view local_address,
                                 const MulticastOptions& options) {
  return core_->join(group, local_address, options);
}

bool DatagramEndpoint::leave(std::string_view group) { return core_->leave(group); }

std::vector<std::string> DatagramEndpoint::groups() const {
  std::vector<std::string> names;
  names.reserve(core_->groups.size());
  for (const auto& entry : core_->groups) names.push_back(entry.first);
  return names;
}

const UdQueuePair& DatagramEndpoint::queue_pair() const noexcept { return *core_->qp; }

}  // namespace ibv
