// SPDX-License-Identifier: MIT
// Node, NodeBuilder and PreparedNode: building a rank, connecting it to every other rank
// (directly from their endpoints, or over a Bootstrap), and running its barriers.
#include "ibv/net/node.hpp"

#include <array>
#include <cerrno>
#include <cstdio>
#include <string>
#include <utility>

#include "detail/moved_from.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "ibv/net/bootstrap.hpp"
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
  return {std::move(channels), std::move(barrier), algorithm_, barrier_timeout_,
          std::move(datagrams)};
}

PreparedNode::PreparedNode(PreparedMultiChannel channels,
                           std::unique_ptr<detail::RdmaBarrier> barrier, BarrierAlgorithm algorithm,
                           Duration barrier_timeout, std::optional<DatagramEndpoint> datagrams)
    : channels_(std::move(channels)),
      barrier_(std::move(barrier)),
      algorithm_(algorithm),
      barrier_timeout_(barrier_timeout),
      datagrams_(std::move(datagrams)) {}

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
          .control = std::nullopt};
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
    queue_pairs[peer] = endpoint.queue_pair;
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
  return {std::move(channels), std::move(barrier_), algorithm_, barrier_timeout_,
          std::move(datagrams)};
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
  return node;
}

Node::Node(MultiChannel channels, std::unique_ptr<detail::RdmaBarrier> barrier,
           BarrierAlgorithm algorithm, Duration barrier_timeout,
           std::unique_ptr<NodeDatagrams> datagrams)
    : MultiChannel(std::move(channels)),
      barrier_(std::move(barrier)),
      algorithm_(algorithm),
      timeout_(barrier_timeout),
      datagrams_(std::move(datagrams)) {}

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
  barrier_->run(*this, group != nullptr ? *group : barrier_->all_ranks(), algorithm, timeout);
}

}  // namespace ibv::net
