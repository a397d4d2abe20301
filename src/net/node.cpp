// SPDX-License-Identifier: MIT
// Node, NodeBuilder and PreparedNode: building a rank, connecting it to every other rank
// (directly from their endpoints, or over a Bootstrap), and running its barriers.
#include "ibv/net/node.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "detail/moved_from.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "ibv/net/bootstrap.hpp"
#include "net/control_bootstrap.hpp"
#include "net/control_plane.hpp"
#include "net/rdma_barrier.hpp"

namespace ibv::net {
namespace {

/// Throws ibv::Error (state) from `operation` unless `barrier` is there: a PreparedNode hands
/// it to its Node at handshake() (so handshake() and connect() move from it too), and a Node
/// hands it over when moved, so an object without it was moved from.
void check_not_moved_from(const std::unique_ptr<detail::RdmaBarrier>& barrier,
                          std::string_view what, std::string_view operation) {
  if (!barrier) [[unlikely]]
    ibv::detail::throw_moved_from(operation, what);
}

}  // namespace

NodeBuilder::NodeBuilder(ProtectionDomain pd, std::uint32_t rank, std::uint32_t world_size)
    : channels_(std::move(pd), rank, world_size) {}

NodeBuilder::NodeBuilder(ProtectionDomain pd, const NetworkConfig& config, std::uint32_t rank)
    : NodeBuilder(std::move(pd), config.host(rank).rank,
                  static_cast<std::uint32_t>(config.world_size())) {}

NodeBuilder& NodeBuilder::barrier_algorithm(BarrierAlgorithm algorithm) noexcept {
  algorithm_ = algorithm;
  return *this;
}

NodeBuilder& NodeBuilder::barrier_timeout(Duration timeout) noexcept {
  barrier_timeout_ = timeout;
  return *this;
}

NodeBuilder& NodeBuilder::settings(const ChannelSettings& settings) {
  channels_.settings(settings);
  return *this;
}

NodeBuilder& NodeBuilder::completion_queue_size(int entries) noexcept {
  channels_.completion_queue_size(entries);
  return *this;
}

NodeBuilder& NodeBuilder::shared_receive_queue(SharedReceiveQueue srq) noexcept {
  channels_.shared_receive_queue(std::move(srq));
  return *this;
}

NodeBuilder& NodeBuilder::shared_receive_pool(SharedReceivePool pool) noexcept {
  channels_.shared_receive_pool(std::move(pool));
  return *this;
}

NodeBuilder& NodeBuilder::datagrams(const DatagramSettings& settings) {
  datagrams_ = settings;
  return *this;
}

NodeBuilder& NodeBuilder::fault_tolerance(const FaultToleranceSettings& settings) {
  fault_tolerance_ = settings;
  return *this;
}

NodeBuilder& NodeBuilder::queue_pair(const QueuePairSettings& settings) noexcept {
  channels_.queue_pair(settings);
  return *this;
}

NodeBuilder& NodeBuilder::timeouts(const ChannelTimeouts& timeouts) noexcept {
  channels_.timeouts(timeouts);
  return *this;
}

NodeBuilder& NodeBuilder::wait_mode(const WaitMode& mode) noexcept {
  channels_.wait_mode(mode);
  return *this;
}

NodeBuilder& NodeBuilder::completion_channel(const CompletionChannel& channel) {
  channels_.completion_channel(channel);
  return *this;
}

PreparedNode NodeBuilder::build() const {
  ibv::detail::check_positive(barrier_timeout_, "barrier_timeout", "NodeBuilder::build");
  (void)round_count(algorithm_, 1);  // rejects a value that is not one of the enumerators
  // The channels first: their settings are checked against the device before anything is
  // made, so bad settings do not register the barrier slots just to free them again.
  PreparedMultiChannel channels = channels_.build();
  auto barrier =
      std::make_unique<detail::RdmaBarrier>(channels_.protection_domain(), channels_.rank(),
                                            channels_.world_size(), channels_.settings().wait_mode);
  std::optional<DatagramEndpoint> datagrams;
  if (datagrams_) {
    DatagramSettings settings = *datagrams_;
    if (!settings.gid_index) settings.gid_index = channels_.settings().queue_pair.gid_index;
    datagrams.emplace(channels_.protection_domain(), settings);
  }
  std::unique_ptr<detail::ControlPlane> control;
  if (fault_tolerance_) {
    ibv::detail::check_positive(fault_tolerance_->probe_interval,
                                "fault_tolerance settings.probe_interval", "NodeBuilder::build");
    ibv::detail::check_positive(fault_tolerance_->stall_timeout,
                                "fault_tolerance settings.stall_timeout", "NodeBuilder::build");
    control = std::make_unique<detail::ControlPlane>(
        channels_.protection_domain(), channels_.rank(), channels_.world_size(), *fault_tolerance_,
        channels_.settings().queue_pair);
  }
  return {std::move(channels), std::move(barrier),   algorithm_,
          barrier_timeout_,    std::move(datagrams), std::move(control)};
}

PreparedNode::PreparedNode(PreparedMultiChannel channels,
                           std::unique_ptr<detail::RdmaBarrier> barrier, BarrierAlgorithm algorithm,
                           Duration barrier_timeout, std::optional<DatagramEndpoint> datagrams,
                           std::unique_ptr<detail::ControlPlane> control)
    : channels_(std::move(channels)),
      barrier_(std::move(barrier)),
      algorithm_(algorithm),
      barrier_timeout_(barrier_timeout),
      datagrams_(std::move(datagrams)),
      control_(std::move(control)) {}

PreparedNode::PreparedNode(PreparedNode&&) noexcept = default;
PreparedNode& PreparedNode::operator=(PreparedNode&&) noexcept = default;
PreparedNode::~PreparedNode() = default;

NodeEndpoint PreparedNode::endpoint() const {
  check_not_moved_from(barrier_, "this PreparedNode", "PreparedNode::endpoint");
  NodeEndpoint endpoint{.rank = rank(),
                        .world_size = world_size(),
                        .queue_pairs = {},
                        .barrier = barrier_->slots(),
                        .datagram = datagram_address(),
                        .control = std::nullopt};
  endpoint.queue_pairs.reserve(world_size());
  for (const auto& queue_pair : channels_.endpoints()) {
    endpoint.queue_pairs.push_back(queue_pair.value_or(Endpoint{}));
  }
  if (control_) {
    NodeControl control{.queue_pairs = {}, .block = control_->block()};
    control.queue_pairs.reserve(world_size());
    for (std::uint32_t peer = 0; peer < world_size(); ++peer) {
      control.queue_pairs.push_back(control_for(peer)->queue_pair);
    }
    endpoint.control = std::move(control);
  }
  return endpoint;
}

PeerEndpoint PreparedNode::endpoint_for(std::uint32_t peer) const {
  check_not_moved_from(barrier_, "this PreparedNode", "PreparedNode::endpoint_for");
  const auto& endpoints = channels_.endpoints();
  if (peer >= endpoints.size()) {
    throw_invalid_argument("PreparedNode::endpoint_for", "peer " + std::to_string(peer),
                           "is not below the world size " + std::to_string(world_size()));
  }
  return {.rank = rank(),
          .world_size = world_size(),
          .queue_pair = endpoints[peer].value_or(Endpoint{}),
          .barrier = barrier_->slots(),
          .datagram = datagram_address(),
          .control = control_for(peer)};
}

std::optional<ControlEndpoint> PreparedNode::control_for(std::uint32_t peer) const {
  if (!control_) return std::nullopt;
  return ControlEndpoint{.queue_pair = peer == rank() ? Endpoint{} : control_->endpoint_for(peer),
                         .block = control_->block()};
}

std::optional<UdAddress> PreparedNode::datagram_address() const {
  if (!datagrams_) return std::nullopt;
  return datagrams_->address();
}

Node PreparedNode::handshake(std::span<const NodeEndpoint> remote) && {
  check_not_moved_from(barrier_, "this PreparedNode", "PreparedNode::handshake");
  std::vector<PeerEndpoint> mine(remote.size());
  for (std::uint32_t peer = 0; peer < remote.size(); ++peer) {
    const NodeEndpoint& endpoint = remote[peer];
    if (peer == rank()) {
      mine[peer].barrier = endpoint.barrier;  // as given; only the other entries are checked
      continue;
    }
    if (endpoint.world_size != world_size() || endpoint.queue_pairs.size() != world_size()) {
      throw_invalid_argument("PreparedNode::handshake", "remote[" + std::to_string(peer) + "]",
                             "is for a world of " + std::to_string(endpoint.world_size) +
                                 " ranks with " + std::to_string(endpoint.queue_pairs.size()) +
                                 " queue pairs; this world has " + std::to_string(world_size()) +
                                 " (are both ranks started from the same configuration?)");
    }
    mine[peer] = endpoint.for_peer(rank());
  }
  return std::move(*this).handshake(std::span<const PeerEndpoint>(mine));
}

Node PreparedNode::handshake(std::span<const PeerEndpoint> remote) && {
  constexpr std::string_view kOperation = "PreparedNode::handshake";
  check_not_moved_from(barrier_, "this PreparedNode", kOperation);
  const std::uint32_t world = world_size();
  if (remote.size() != world) {
    throw_invalid_argument(kOperation, "remote endpoints",
                           "has " + std::to_string(remote.size()) +
                               " entries; it needs one per rank: " + std::to_string(world));
  }
  std::vector<std::optional<Endpoint>> queue_pairs(world);
  std::vector<PeerRemoteMemoryRegion> slots;
  slots.reserve(world);
  const auto needed = barrier_->max_rounds() * world * sizeof(std::uint64_t);
  for (std::uint32_t peer = 0; peer < world; ++peer) {
    const PeerEndpoint& endpoint = remote[peer];
    slots.emplace_back(peer, endpoint.barrier);
    if (peer == rank()) continue;
    const std::string where = "remote[" + std::to_string(peer) + "]";
    if (endpoint.rank != peer) {
      throw_invalid_argument(kOperation, where,
                             "is rank " + std::to_string(endpoint.rank) + "'s endpoint, not rank " +
                                 std::to_string(peer) + "'s");
    }
    if (endpoint.world_size != world) {
      throw_invalid_argument(kOperation, where,
                             "is for a world of " + std::to_string(endpoint.world_size) +
                                 " ranks; this world has " + std::to_string(world) +
                                 " (are both ranks started from the same configuration?)");
    }
    if (endpoint.barrier.length() < needed) {
      throw_invalid_argument(kOperation, where,
                             "has barrier slots of " + std::to_string(endpoint.barrier.length()) +
                                 " bytes; a world of " + std::to_string(world) + " needs " +
                                 std::to_string(needed));
    }
    check_datagram_choice(peer, endpoint.datagram);
    check_control_choice(peer, endpoint.control);
    queue_pairs[peer] = endpoint.queue_pair;
  }
  if (control_) {
    std::vector<std::optional<Endpoint>> control_pairs(world);
    std::vector<RemoteMemoryRegion> blocks(world);
    for (std::uint32_t peer = 0; peer < world; ++peer) {
      if (peer == rank()) continue;
      control_pairs[peer] = remote[peer].control->queue_pair;
      blocks[peer] = remote[peer].control->block;
    }
    control_->handshake(control_pairs, blocks);
  }
  std::unique_ptr<NodeDatagrams> datagrams;
  if (datagrams_) {
    std::vector<UdAddress> addresses(world);
    for (std::uint32_t peer = 0; peer < world; ++peer) {
      addresses[peer] = peer == rank() ? datagrams_->address() : *remote[peer].datagram;
    }
    datagrams.reset(new NodeDatagrams(std::move(*datagrams_), rank(), std::move(addresses)));
    datagrams_.reset();
  }
  MultiChannel channels = std::move(channels_).handshake(queue_pairs);
  barrier_->set_peer_slots(std::move(slots));
  return {std::move(channels), std::move(barrier_),  algorithm_,
          barrier_timeout_,    std::move(datagrams), std::move(control_)};
}

void PreparedNode::check_control_choice(std::uint32_t peer,
                                        const std::optional<ControlEndpoint>& theirs) const {
  constexpr std::string_view kOperation = "PreparedNode::handshake";
  const std::string who = "rank " + std::to_string(peer);
  constexpr std::string_view kSame =
      ": every rank must make the same NodeBuilder::fault_tolerance() choice (is that rank's "
      "ibverbs-cpp older than fault tolerance on a Node, or its configuration another?)";
  if (control_ && !theirs) {
    throw_invalid_argument(
        kOperation, who,
        "sent no control part, and this rank has fault tolerance on" + std::string(kSame));
  }
  if (!control_ && theirs) {
    throw_invalid_argument(kOperation, who,
                           "has fault tolerance on, and this rank has it off" + std::string(kSame));
  }
  if (control_ && theirs->block.length() < detail::ControlPlane::block_bytes(world_size())) {
    throw_invalid_argument(kOperation, who,
                           "has a control block of " + std::to_string(theirs->block.length()) +
                               " bytes; a world of " + std::to_string(world_size()) + " needs " +
                               std::to_string(detail::ControlPlane::block_bytes(world_size())));
  }
}

void PreparedNode::check_datagram_choice(std::uint32_t peer,
                                         const std::optional<UdAddress>& theirs) const {
  constexpr std::string_view kOperation = "PreparedNode::handshake";
  const std::string who = "rank " + std::to_string(peer);
  constexpr std::string_view kSame =
      ": every rank must make the same NodeBuilder::datagrams() choice (is that rank's "
      "ibverbs-cpp older than datagrams on a Node, or its configuration another?)";
  if (datagrams_ && !theirs) {
    throw_invalid_argument(
        kOperation, who,
        "sent no datagram address, and this rank has datagrams on" + std::string(kSame));
  }
  if (!datagrams_ && theirs) {
    throw_invalid_argument(kOperation, who,
                           "has datagrams on, and this rank has them off" + std::string(kSame));
  }
  if (datagrams_ && theirs->qkey != datagrams_->address().qkey) {
    const auto hex = [](std::uint32_t qkey) {
      std::array<char, 16> text{};
      std::snprintf(text.data(), text.size(), "0x%08x", qkey);
      return std::string(text.data());
    };
    throw_invalid_argument(kOperation, who,
                           "takes datagrams with Q_Key " + hex(theirs->qkey) + ", this rank with " +
                               hex(datagrams_->address().qkey) +
                               ": each would drop the other's datagrams unseen "
                               "(DatagramSettings::qkey must be the same on every rank)");
  }
}

Node PreparedNode::connect(Bootstrap& bootstrap) && {
  check_not_moved_from(barrier_, "this PreparedNode", "PreparedNode::connect");
  if (bootstrap.rank() != rank() || bootstrap.world_size() != world_size()) {
    throw_invalid_argument("PreparedNode::connect", "bootstrap",
                           "is rank " + std::to_string(bootstrap.rank()) + " of " +
                               std::to_string(bootstrap.world_size()) + "; this node is rank " +
                               std::to_string(rank()) + " of " + std::to_string(world_size()));
  }
  std::vector<PeerEndpoint> mine;
  mine.reserve(world_size());
  for (std::uint32_t peer = 0; peer < world_size(); ++peer) mine.push_back(endpoint_for(peer));
  const std::vector<PeerEndpoint> remote = bootstrap.all_to_all<PeerEndpoint>(mine);
  Node node = std::move(*this).handshake(std::span<const PeerEndpoint>(remote));
  // Every rank's queue pairs are ready to receive once every rank has got here.
  bootstrap.barrier();
  if (node.control_) node.control_->start();
  return node;
}

Node::Node(MultiChannel channels, std::unique_ptr<detail::RdmaBarrier> barrier,
           BarrierAlgorithm algorithm, Duration barrier_timeout,
           std::unique_ptr<NodeDatagrams> datagrams, std::shared_ptr<detail::ControlPlane> control)
    : MultiChannel(std::move(channels)),
      barrier_(std::move(barrier)),
      algorithm_(algorithm),
      timeout_(barrier_timeout),
      datagrams_(std::move(datagrams)),
      control_(std::move(control)),
      fenced_(control_ ? world_size() : 0, false) {}

Node::Node(Node&&) noexcept = default;
Node& Node::operator=(Node&&) noexcept = default;
Node::~Node() = default;

bool Node::barrier_poisoned() const noexcept { return barrier_ && barrier_->poisoned(); }

NodeDatagrams& Node::datagrams() {
  check_not_moved_from(barrier_, "this Node", "Node::datagrams");
  if (!datagrams_) {
    throw Error(ErrorKind::state, "Node::datagrams", EINVAL,
                "this Node was built without datagrams",
                "call NodeBuilder::datagrams() on every rank");
  }
  return *datagrams_;
}

void Node::barrier(BarrierOptions options) { run_barrier(nullptr, options); }

void Node::barrier(std::span<const std::uint32_t> ranks, BarrierOptions options) {
  // Before the group is made, which a moved-from Node's world size of 0 would refuse.
  check_not_moved_from(barrier_, "this Node", "Node::barrier");
  const auto group = BarrierGroup::subset({ranks.begin(), ranks.end()}, rank(), world_size());
  run_barrier(&group, options);
}

void Node::run_barrier(const BarrierGroup* group, const BarrierOptions& options) {
  check_not_moved_from(barrier_, "this Node", "Node::barrier");
  const auto timeout = options.timeout.value_or(timeout_);
  ibv::detail::check_positive_timeout(timeout, "Node::barrier", "the barrier was not entered");
  const auto algorithm = options.algorithm.value_or(algorithm_);
  (void)round_count(algorithm, 1);  // rejects a value that is not one of the enumerators
  if (control_) fence_failed();
  barrier_->run(*this, group != nullptr ? *group : barrier_->all_ranks(), algorithm, timeout,
                control_.get());
  // Every rank has connected once a barrier passed: the detector may probe them now.
  if (control_) control_->start();
}

detail::ControlPlane& Node::control(std::string_view operation) const {
  check_not_moved_from(barrier_, "this Node", operation);
  if (!control_) {
    throw Error(ErrorKind::state, operation, EINVAL, "this Node was built without fault tolerance",
                "call NodeBuilder::fault_tolerance() on every rank");
  }
  return *control_;
}

void Node::fence_failed() {
  const std::uint64_t generation = control_->generation();
  if (generation == fenced_generation_) return;  // nothing new: no allocation per barrier
  fenced_generation_ = generation;
  for (const RankFailure& failure : control_->failures()) {
    if (fenced_[failure.rank]) continue;
    fenced_[failure.rank] = true;
    try {
      channel(failure.rank).queue_pair().move_to_error();
    } catch (const Error&) {  // NOLINT(bugprone-empty-catch): a queue pair the device already
                              // tore down lets nothing through either
    }
  }
}

std::vector<RankFailure> Node::failed_ranks() {
  std::vector<RankFailure> failures = control("Node::failed_ranks").failures();
  fence_failed();
  return failures;
}

std::size_t Node::acknowledge_failures() {
  for (const RankFailure& failure : failed_ranks()) {
    if (!std::ranges::binary_search(acknowledged_, failure.rank)) {
      acknowledged_.insert(std::ranges::upper_bound(acknowledged_, failure.rank), failure.rank);
    }
  }
  return acknowledged_.size();
}

std::vector<std::uint32_t> Node::acknowledged_failures() const { return acknowledged_; }

void Node::revoke() { control("Node::revoke").revoke(); }

AgreedValue Node::agree(std::uint32_t flags, std::optional<Duration> timeout) {
  detail::ControlPlane& plane = control("Node::agree");
  const Duration bound = timeout.value_or(timeout_);
  ibv::detail::check_positive_timeout(bound, "Node::agree", "no agreement was started");
  plane.start();  // after handshake() without a barrier yet: every rank is connected by now
  const detail::AgreementValue value = plane.agree(flags, bound);
  fence_failed();
  return {.flags = value.flags, .failed = {value.failed.begin(), value.failed.end()}};
}

ShrunkNode Node::shrink(std::optional<Duration> timeout) && {
  detail::ControlPlane& plane = control("Node::shrink");
  const Duration bound = timeout.value_or(timeout_);
  ibv::detail::check_positive_timeout(bound, "Node::shrink", "nothing was changed");
  const auto deadline = std::chrono::steady_clock::now() + bound;
  plane.start();
  // A channel broken without this Node fencing it (its retry budget ran out, or it was misused)
  // reaches its peer no more: for this rank that peer is lost, and the agreement tells the
  // others, so that no survivor keeps a channel its peer cannot use.
  fence_failed();
  for (std::uint32_t peer = 0; peer < world_size(); ++peer) {
    if (peer == rank() || fenced_[peer]) continue;
    if (channel(peer).queue_pair().query_state() == "ERR") {
      plane.declare_failed(peer, FailureCause::completion);
    }
  }
  const detail::AgreementValue agreed = plane.agree(0, bound);
  if (agreed.failed.contains(rank())) {
    throw Error(ErrorKind::state, "Node::shrink", ECANCELED,
                "the surviving ranks agreed that rank " + std::to_string(rank()) +
                    " (this one) failed: another rank declared it failed",
                "a rank declared failed is out of the Node for good (it was too slow to answer "
                "within the detection bound, or a channel to it broke); end this rank's part");
  }
  const std::size_t surviving = world_size() - agreed.failed.size();
  if (plane.settings().survivors_need_a_majority && 2 * surviving <= world_size()) {
    throw Error(ErrorKind::state, "Node::shrink", ECANCELED,
                "only " + std::to_string(surviving) + " of the Node's " +
                    std::to_string(world_size()) +
                    " ranks survive: not a majority, which "
                    "FaultToleranceSettings::survivors_need_a_majority asks for",
                "this side may be cut off from the others (or declared failed by them) and "
                "must not go on alone; end this rank's part, or restart the job");
  }
  fence_failed();  // every rank lost, also those only the others knew
  ShrunkNode shrunk{.node = std::move(*this), .new_rank = {}, .lost = {}};
  Node& old = shrunk.node;
  std::vector<std::uint32_t> survivors;
  for (std::uint32_t rank = 0; rank < old.world_size(); ++rank) {
    if (agreed.failed.contains(rank)) {
      shrunk.lost.push_back(rank);
      shrunk.new_rank.emplace_back();
    } else {
      shrunk.new_rank.emplace_back(static_cast<std::uint32_t>(survivors.size()));
      survivors.push_back(rank);
    }
  }
  old.barrier_->shrink(survivors, plane.epoch() + 1, deadline);
  plane.shrink_view(survivors, FailureCause::report);
  std::unique_ptr<NodeDatagrams> datagrams;
  if (old.datagrams_) {
    datagrams = std::make_unique<NodeDatagrams>(std::move(*old.datagrams_).regrouped(survivors));
    old.datagrams_.reset();
  }
  std::unique_ptr<detail::RdmaBarrier> barrier = std::move(old.barrier_);
  std::shared_ptr<detail::ControlPlane> kept_control = std::move(old.control_);
  const BarrierAlgorithm algorithm = old.algorithm_;
  const Duration barrier_timeout = old.timeout_;
  MultiChannel channels = std::move(old).regrouped(survivors);
  // Every part is out of the old Node now; the survivors' Node takes its place.
  shrunk.node = Node(std::move(channels), std::move(barrier), algorithm, barrier_timeout,
                     std::move(datagrams), std::move(kept_control));
  return shrunk;
}

Bootstrap& Node::in_band_bootstrap() {
  static_cast<void>(control("Node::in_band_bootstrap"));  // throws without fault tolerance
  if (!in_band_) in_band_ = std::make_unique<detail::ControlBootstrap>(control_, timeout_);
  return *in_band_;
}

std::optional<std::uint32_t> Node::revoked_by() const {
  return control("Node::revoked_by").revoked_by();
}

}  // namespace ibv::net
