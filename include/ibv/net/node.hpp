// SPDX-License-Identifier: MIT
// Node: one rank of a job. A MultiChannel to every other rank, plus the rank's identity and
// barriers over RDMA. Built in two phases like every connection here: NodeBuilder ->
// PreparedNode (each peer gets its PeerEndpoint) -> handshake -> Node; connect() does the
// exchange over any ibv::net::Bootstrap (a hosts file's Exchanger, a Rendezvous, PMIx).
//
//   const auto config = ibv::net::NetworkConfig::from_file("network.json");
//   ibv::net::Exchanger exchanger(config, rank);
//   const ibv::Context context = ibv::open_device(config.host(rank).ibdev);
//   const ibv::ProtectionDomain pd(context);
//   ibv::net::Node node =
//       ibv::net::NodeBuilder(pd, config, rank).build().connect(exchanger);
//   node.barrier();                       // every rank
//   node.barrier(std::array{0U, rank});  // rank 0 and this rank (the other rank calls it too)
//
// Barriers, their timeouts and poisoning: the Node's class comment, and docs/barriers.md.
// Datagrams to any rank (opt-in, NodeBuilder::datagrams()): node_datagrams.hpp.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ibv/channel/channel.hpp"
#include "ibv/datagram/datagram_endpoint.hpp"
#include "ibv/duration.hpp"
#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/net/barrier_schedule.hpp"
#include "ibv/net/fault_tolerance.hpp"
#include "ibv/net/network_config.hpp"
#include "ibv/net/node_datagrams.hpp"
#include "ibv/net/node_endpoint.hpp"
#include "ibv/verbs/protection_domain.hpp"

namespace ibv::net {

class Bootstrap;
class PreparedNode;
class Node;

namespace detail {
class AllToAllCore;
class ControlBootstrap;
class ControlPlane;
class RdmaBarrier;
}  // namespace detail

/// Per-call choices of a barrier; unset fields take the Node's defaults.
struct BarrierOptions {
  std::optional<BarrierAlgorithm> algorithm{};  ///< Every participant must use the same.
  std::optional<Duration> timeout{};            ///< Positive.
};

/// Settings of a Node: its protection domain, rank and world size, the default barrier
/// algorithm and timeout, and what every per-peer channel gets (see ChannelBuilder).
class NodeBuilder {
 public:
  /// Throws ibv::Error (invalid_argument) when world_size is 0 or rank is not below it (test:
  /// `BadInputDevice.MultiChannelAndNodeBuilders`).
  NodeBuilder(ProtectionDomain pd, std::uint32_t rank, std::uint32_t world_size);
  /// Rank `rank` of the world `config` describes. Throws ibv::Error (invalid_argument) when
  /// `rank` is not a rank of `config` (test: `BadInputDevice.MultiChannelAndNodeBuilders`).
  NodeBuilder(ProtectionDomain pd, const NetworkConfig& config, std::uint32_t rank);

  /// Default: dissemination (ceil(log2 n) rounds).
  NodeBuilder& barrier_algorithm(BarrierAlgorithm algorithm) noexcept;
  /// Default: 30 s. Throws at build() when not positive.
  NodeBuilder& barrier_timeout(Duration timeout) noexcept;
  /// What every per-peer channel is built with (ChannelSettings, see ChannelBuilder), all at
  /// once; the named setters below set one field each.
  NodeBuilder& settings(const ChannelSettings& settings);
  /// The queue pair settings of every channel (ChannelSettings::queue_pair).
  NodeBuilder& queue_pair(const QueuePairSettings& settings) noexcept;
  /// The timeouts of every channel (ChannelSettings::timeouts); `operation` is also the
  /// default timeout of the Node's blocking and batch calls.
  NodeBuilder& timeouts(const ChannelTimeouts& timeouts) noexcept;
  /// Entries of each channel's completion queue (ChannelSettings::completion_queue_size).
  NodeBuilder& completion_queue_size(int entries) noexcept;
  /// How the per-peer channels wait, barriers included (see MultiChannelBuilder::wait_mode:
  /// with a mode that sleeps, one completion channel covers every peer).
  NodeBuilder& wait_mode(const WaitMode& mode) noexcept;
  /// Attaches every per-peer completion queue to `channel` (see
  /// MultiChannelBuilder::completion_channel).
  NodeBuilder& completion_channel(const CompletionChannel& channel);
  /// Every channel takes its receives from `srq` (ChannelSettings::shared_receive_queue).
  NodeBuilder& shared_receive_queue(SharedReceiveQueue srq) noexcept;
  /// Every channel takes its receives from `pool` (ChannelSettings::shared_receive_pool).
  NodeBuilder& shared_receive_pool(SharedReceivePool pool) noexcept;
  /// Gives the rank a datagram endpoint (a UD queue pair in the Node's protection domain, see
  /// DatagramEndpoint) for small control messages to any rank: Node::datagrams(). Its address
  /// rides in the Node's own bootstrap exchange (version 2 of PeerEndpoint / NodeEndpoint), so
  /// there is no extra round. Off by default; a Node without it makes no UD queue pair and
  /// sends the same bytes as before. Every rank of a world must make the same choice, with the
  /// same Q_Key: the handshake refuses a mismatch with ibv::Error (invalid_argument) naming the
  /// rank (tests: `NodeDatagrams.ARankThatDidNotOptInFailsTheHandshakeOnEveryRankNamingARank`,
  /// `NodeDatagrams.ARankWithAnotherQKeyFailsTheHandshake`). An unset settings.gid_index takes the
  /// queue pair settings' gid_index (queue_pair()) when that one is set. The settings are checked
  /// at build().
  NodeBuilder& datagrams(const DatagramSettings& settings);
  /// Makes the Node watch its peers so that it can survive a lost rank: a control queue pair
  /// per peer and a detector thread that probes one peer (FaultToleranceSettings says how
  /// often and how long), so that a dead rank is named to every survivor within
  /// settings.detection_bound() whether or not anything is in flight to it, and any rank may
  /// revoke the Node (Node::revoke()). Its addresses ride in the Node's own bootstrap exchange
  /// (no extra round). Off by default; a Node without it makes no extra queue pair or thread
  /// and sends the same bytes as before. Every rank of a world must make the same choice: the
  /// handshake refuses a mismatch with ibv::Error (invalid_argument) naming the rank (test:
  /// `FaultTolerance.ARankWithoutItFailsTheHandshakeNamingTheRank`). The
  /// detector starts once every rank is connected: at the end of connect(), or, after
  /// handshake(), at the end of the first barrier. The story: docs/fault-tolerance.md.
  NodeBuilder& fault_tolerance(const FaultToleranceSettings& settings = {});
  /// The fault tolerance settings, when fault_tolerance() was called.
  [[nodiscard]] const std::optional<FaultToleranceSettings>& fault_tolerance_settings()
      const noexcept {
    return fault_tolerance_;
  }
  /// The datagram settings, when datagrams() was called.
  [[nodiscard]] const std::optional<DatagramSettings>& datagram_settings() const noexcept {
    return datagrams_;
  }

  /// What every per-peer channel will be built with.
  [[nodiscard]] const ChannelSettings& settings() const noexcept { return channels_.settings(); }

  /// Makes the queue pairs (and the datagram endpoint, when asked for) and registers the
  /// barrier slots.
  [[nodiscard]] PreparedNode build() const;

 private:
  MultiChannelBuilder channels_;
  BarrierAlgorithm algorithm_ = BarrierAlgorithm::dissemination;
  Duration barrier_timeout_{std::chrono::seconds(30)};
  std::optional<DatagramSettings> datagrams_;
  std::optional<FaultToleranceSettings> fault_tolerance_;
};

/// A Node whose queue pairs exist but are not connected. Move-only.
class PreparedNode {
 public:
  /// Takes over the queue pairs and barrier slots; the moved-from object may only be
  /// destroyed or assigned to: endpoint(), endpoint_for(), handshake() and connect() throw
  /// ibv::Error (state) saying it was moved from (also after handshake() or connect(), which
  /// move from it; test: `PreparedNodeHandshake.AMovedFromOrHandshakenOneThrowsState`).
  PreparedNode(PreparedNode&&) noexcept;
  /// Releases this object's queue pairs and takes over `other`'s.
  PreparedNode& operator=(PreparedNode&&) noexcept;
  PreparedNode(const PreparedNode&) = delete;
  PreparedNode& operator=(const PreparedNode&) = delete;
  ~PreparedNode();

  /// This rank.
  [[nodiscard]] std::uint32_t rank() const noexcept { return channels_.rank(); }
  /// The number of ranks, this one included.
  [[nodiscard]] std::uint32_t world_size() const noexcept { return channels_.world_size(); }
  /// What every other rank needs from this one, all at once.
  [[nodiscard]] NodeEndpoint endpoint() const;
  /// What `peer` needs from this one: endpoint().for_peer(peer) without the rest.
  [[nodiscard]] PeerEndpoint endpoint_for(std::uint32_t peer) const;

  /// Connects to every peer. `remote[r]` is what rank r sent this rank (the entry at rank() is
  /// ignored). Everything is checked first: a wrong count, an entry from another rank or for
  /// another world size, barrier slots too small, a rank with a datagram endpoint when this one
  /// has none or the other way round, or one whose Q_Key differs, throw ibv::Error
  /// (invalid_argument) naming it (tests: `PreparedNodeHandshake.ChecksEveryEndpointFirst`,
  /// `NodeDatagrams.ARankThatDidNotOptInFailsTheHandshakeOnEveryRankNamingARank`,
  /// `NodeDatagrams.ARankWithAnotherQKeyFailsTheHandshake`). The peers must have handshaken too
  /// before this Node posts anything to them (connect() sees to that).
  [[nodiscard]] Node handshake(std::span<const PeerEndpoint> remote) &&;
  /// handshake() from every rank's whole NodeEndpoint (index = rank), with the same checks.
  [[nodiscard]] Node handshake(std::span<const NodeEndpoint> remote) &&;
  /// Sends each peer its PeerEndpoint over `bootstrap` (Bootstrap::all_to_all: this rank
  /// receives O(world size) bytes), handshakes, then waits in bootstrap.barrier() so that no
  /// rank returns before every rank's queue pairs are connected. Throws ibv::Error
  /// (invalid_argument) when the bootstrap is for another rank or world size (untested:
  /// `invalid_argument`, no test passes a bootstrap of another rank), and the bootstrap's own
  /// errors as they are (peer_gone, for one, naming a rank that died during the exchange; test:
  /// `RankFaultExchange.ARankThatDiesAfterItsHelloBeforeItsDataIsNamed`).
  [[nodiscard]] Node connect(Bootstrap& bootstrap) &&;

 private:
  friend class NodeBuilder;  // NodeBuilder::build() makes every PreparedNode
  PreparedNode(PreparedMultiChannel channels, std::unique_ptr<detail::RdmaBarrier> barrier,
               BarrierAlgorithm algorithm, Duration barrier_timeout,
               std::optional<DatagramEndpoint> datagrams,
               std::unique_ptr<detail::ControlPlane> control);
  /// This rank's datagram address, when it has datagrams.
  [[nodiscard]] std::optional<UdAddress> datagram_address() const;
  /// Throws ibv::Error (invalid_argument) naming `peer` when its datagram address (`theirs`)
  /// does not match this rank's choice, or its Q_Key differs (tests:
  /// `NodeDatagrams.ARankThatDidNotOptInFailsTheHandshakeOnEveryRankNamingARank`,
  /// `NodeDatagrams.ARankWithAnotherQKeyFailsTheHandshake`).
  void check_datagram_choice(std::uint32_t peer, const std::optional<UdAddress>& theirs) const;
  /// Throws ibv::Error (invalid_argument) naming `peer` when its control part (`theirs`) does
  /// not match this rank's choice of fault tolerance (test:
  /// `FaultTolerance.ARankWithoutItFailsTheHandshakeNamingTheRank`), or its control block is too
  /// small.
  void check_control_choice(std::uint32_t peer, const std::optional<ControlEndpoint>& theirs) const;
  /// This rank's control part for `peer`, when it has fault tolerance.
  [[nodiscard]] std::optional<ControlEndpoint> control_for(std::uint32_t peer) const;
  PreparedMultiChannel channels_;
  std::unique_ptr<detail::RdmaBarrier> barrier_;
  BarrierAlgorithm algorithm_;
  Duration barrier_timeout_;
  std::optional<DatagramEndpoint> datagrams_;
  std::unique_ptr<detail::ControlPlane> control_;
};

struct ShrunkNode;

/// One connected rank of a job: every MultiChannel call (it is one), barriers over RDMA, and,
/// when built with NodeBuilder::datagrams(), datagrams to any rank (datagrams()). Move-only;
/// not thread-safe.
///
/// - barrier() returns once every rank, or every rank of a subset, has entered it; each is
///   bounded by a timeout (barrier_timeout(), or BarrierOptions::timeout).
/// - A failed barrier poisons the Node's barrier: every later one throws ibv::Error (state) at
///   once, naming the first failure (test:
///   `NodeBarrier.TimesOutWhenARankNeverArrivesAndIsPoisonedAfter`). Rebuild the Node on every rank
///   to go on.
/// - A barrier orders arrivals, not data: complete your own writes to a peer before entering
///   a barrier after which that peer reads them.
///
/// How barriers work: [docs/barriers.md](docs/barriers.md); how the ranks find each other:
/// [docs/bootstrap.md](docs/bootstrap.md).
class Node : public MultiChannel {
 public:
  /// Takes over the channels and the barrier; the moved-from Node may only be destroyed or
  /// assigned to. Its calls throw ibv::Error (state) saying it was moved from (test:
  /// `NodeMovedFrom.EveryCallThatNeedsItsChannelsOrBarrierThrowsState`): barrier(),
  /// datagrams(), and every MultiChannel call that needs a channel or the peers (channel(),
  /// execute(), post(), post_all(), peers(), peer_of(), the completion fd and shared-receive
  /// calls; a scope's posts). Its noexcept getters answer without throwing (world_size() is
  /// 0 then).
  Node(Node&&) noexcept;
  /// Releases this Node's channels and barrier and takes over `other`'s.
  Node& operator=(Node&&) noexcept;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  ~Node();

  /// Waits until every rank has entered this barrier. Throws ibv::Error: timeout when not all
  /// arrived in time (naming the ranks still awaited and the round; test:
  /// `NodeBarrier.TimesOutWhenARankNeverArrivesAndIsPoisonedAfter`), peer_gone when a signal to a
  /// rank failed because the rank vanished (naming it; other signal failures have their
  /// completion's kind; test:
  /// `RankFaultBarrier.CentralizedLeaderKilledSignalFailsWithFiniteRetries`), state when the
  /// barrier was poisoned by an earlier failure (test:
  /// `NodeBarrier.TimesOutWhenARankNeverArrivesAndIsPoisonedAfter`), invalid_argument for bad
  /// options (test: `NodeBarrier.ABadSubsetIsRejectedAndPoisonsNothing`). A failure poisons the
  /// barrier (see the class comment). On a Node with fault tolerance (NodeBuilder::
  /// fault_tolerance()) it also throws revoked at once, pending or later, when a rank revoked
  /// the Node (test: `FaultTolerance.ARevokeEndsEveryRanksBarrierNamingTheRevoker`), and
  /// peer_gone, within the detection bound, when a rank it waits for, or a member that crashed,
  /// is known failed, naming it and how it was found (tests:
  /// `FaultToleranceKill.ABarrierWaitingForAKilledRankEndsPeerGoneLongBeforeItsTimeout`,
  /// `FaultTolerance.ARankThatDestroysItsNodeIsNamedAsLeftAndEndsTheBarrierWaitingForIt`).
  void barrier(BarrierOptions options = {});
  /// Waits until every rank of `ranks` has entered this barrier: a sorted, duplicate-free list
  /// of ranks that includes this one; every rank in it must make the same call. A bad list
  /// throws ibv::Error (invalid_argument) naming the problem and does not poison anything (test:
  /// `NodeBarrier.ABadSubsetIsRejectedAndPoisonsNothing`).
  void barrier(std::span<const std::uint32_t> ranks, BarrierOptions options = {});

  /// The default algorithm of barrier().
  [[nodiscard]] BarrierAlgorithm barrier_algorithm() const noexcept { return algorithm_; }
  /// The default timeout of barrier().
  [[nodiscard]] Duration barrier_timeout() const noexcept { return timeout_; }
  /// Whether an earlier barrier failed, so that every barrier now throws.
  [[nodiscard]] bool barrier_poisoned() const noexcept;

  /// Whether this Node has a datagram endpoint (NodeBuilder::datagrams()).
  [[nodiscard]] bool has_datagrams() const noexcept { return datagrams_ != nullptr; }
  /// This rank's datagram endpoint, every rank addressed by its number (NodeDatagrams). The
  /// reference stays valid while this Node lives (also when it is moved). Throws ibv::Error
  /// (state) when the Node was built without NodeBuilder::datagrams() (test:
  /// `NodeDatagrams.ANodeWithoutThemHasNoneAndSendsVersionOneEndpoints`).
  [[nodiscard]] NodeDatagrams& datagrams();

  /// Whether this Node watches its peers (NodeBuilder::fault_tolerance()).
  [[nodiscard]] bool has_fault_tolerance() const noexcept { return control_ != nullptr; }
  /// Every rank this rank knows to have failed, by rank, each with how it learned it. A rank
  /// once in it stays (fail-stop): its channel is moved to the error state here, so nothing it
  /// still writes lands in this rank's memory. Throws ibv::Error (state) when the Node has no
  /// fault tolerance (test: `FaultTolerance.ANodeWithoutItSaysSo`).
  [[nodiscard]] std::vector<RankFailure> failed_ranks();
  /// Acknowledges every failure known now (failed_ranks()); returns how many ranks are
  /// acknowledged in all. As MPI's MPI_Comm_failure_ack: a record of which failures the
  /// caller has seen, for acknowledged_failures(). Throws as failed_ranks().
  std::size_t acknowledge_failures();
  /// The ranks acknowledge_failures() acknowledged, by rank (MPI_Comm_failure_get_acked).
  [[nodiscard]] std::vector<std::uint32_t> acknowledged_failures() const;
  /// Revokes the Node on every rank: each rank's pending and later barriers end with ibv::Error
  /// (revoked) naming this rank, within the detection bound's probe interval and a write's
  /// latency, instead of their timeout. The mark travels as an RDMA write into every peer's
  /// control block, and every rank passes it on once, so it arrives even when this rank dies
  /// right after. Irreversible. Throws as failed_ranks().
  void revoke();
  /// Agrees with every other surviving rank on a value, as MPI's MPI_Comm_agree: each rank
  /// gives `flags` and the failures it knows, and every rank that returns gets the same
  /// AgreedValue (the AND of the flags, the union of the failures), also when more ranks fail
  /// while it runs (a uniform agreement: a rank that returns and then dies got the same value
  /// as the survivors). Every surviving rank must call it as often as the others. A revoked
  /// Node agrees too (that is what it is for). Failure-free, it costs 2 ceil(log2 n) messages
  /// per rank over the control queue pairs (a dissemination all-reduce, then a dissemination
  /// barrier); after a failure, a Paxos-like recovery led by the lowest surviving rank.
  /// Throws ibv::Error: timeout when it did not decide within `timeout` (default: the
  /// barrier timeout; test: `FaultTolerance.AnAgreementALiveRankNeverJoinsTimesOut`), state
  /// without fault tolerance (test: `FaultTolerance.ANodeWithoutItSaysSo`).
  /// How it works: docs/fault-tolerance.md.
  [[nodiscard]] AgreedValue agree(std::uint32_t flags, std::optional<Duration> timeout = {});
  /// The rank that revoked this Node, if one did (this one included).
  [[nodiscard]] std::optional<std::uint32_t> revoked_by() const;
  /// The Node of the surviving ranks, as MPI's MPI_Comm_shrink: the ranks agree (agree()) on
  /// which have failed, and every other rank goes on in a new Node, numbered densely in the
  /// same order. Collective: every surviving rank calls it, as it would agree(). Kept, not
  /// made again: the protection domain, the caller's registered memory, the channels between
  /// survivors (the same connections; work pending on them stays pending), the datagram
  /// endpoint and the control plane, which goes on watching; no bootstrap, no handshake. The
  /// new Node is in a new epoch: it is not revoked, its barriers start afresh (and no signal
  /// of this Node counts in them), and a rank lost stays out for good. A channel of this rank
  /// in the error state counts as its peer lost. This Node is left moved-from. Throws
  /// ibv::Error: timeout as agree() does, and this Node is unchanged then (test:
  /// `FaultTolerance.AnAgreementALiveRankNeverJoinsTimesOut`, of agree()); state without fault
  /// tolerance (test: `FaultTolerance.ANodeWithoutItSaysSo`); ibv::Error (state) when the
  /// survivors agreed that this rank failed, out for good (untested: `state`, no test makes a
  /// live rank be declared failed yet); ibv::Error (state) when half the ranks or fewer
  /// survive and FaultToleranceSettings::survivors_need_a_majority is set, this Node
  /// unchanged (test:
  /// `FaultToleranceKill.AStoppedRankIsDeclaredFailedAndFencedItsLateWriteLandsNowhere`: the
  /// stopped rank, continued, sees every other rank fail and may not go on alone). Tests:
  /// `FaultToleranceKill.RankZeroKilledInABarrierTheSurvivorsShrinkAndMoveEveryByte`,
  /// `FaultTolerance.TheSurvivorsOfARevokedNodeShrinkAndTheirNodeIsNotRevoked`. How to go on
  /// after a lost rank: docs/fault-tolerance.md.
  [[nodiscard]] ShrunkNode shrink(std::optional<Duration> timeout = {}) &&;
  /// A Bootstrap over this Node's control plane (in band: SENDs on the control queue pairs, no
  /// TCP) with this Node's rank and world: what a shrunken Node builds its collectives with (a
  /// PersistentAllToAll), since the bootstrap it started with has another world and may need
  /// a rank that is gone (a rendezvous's root). Every exchange ends within the barrier timeout,
  /// or as soon as a rank it needs is known failed (peer_gone). The reference stays valid while
  /// this Node lives, also when it is moved. Throws ibv::Error (state) without fault tolerance
  /// (test: `FaultTolerance.ANodeWithoutItSaysSo`).
  [[nodiscard]] Bootstrap& in_band_bootstrap();

 private:
  friend class PreparedNode;          // PreparedNode::handshake() makes every Node
  friend class detail::AllToAllCore;  // a collective watches the Node's control plane
  Node(MultiChannel channels, std::unique_ptr<detail::RdmaBarrier> barrier,
       BarrierAlgorithm algorithm, Duration barrier_timeout,
       std::unique_ptr<NodeDatagrams> datagrams, std::shared_ptr<detail::ControlPlane> control);
  /// The control plane; throws ibv::Error (state) from `operation` when there is none (test:
  /// `FaultTolerance.ANodeWithoutItSaysSo`).
  detail::ControlPlane& control(std::string_view operation) const;
  /// Moves the channel of every rank known failed to the error state, once each.
  void fence_failed();
  /// Runs a barrier of `group`, or of every rank when it is null (that group is made once).
  void run_barrier(const BarrierGroup* group, const BarrierOptions& options);

  std::unique_ptr<detail::RdmaBarrier> barrier_;
  BarrierAlgorithm algorithm_;
  Duration timeout_;
  std::unique_ptr<NodeDatagrams> datagrams_;
  std::shared_ptr<detail::ControlPlane> control_;      // shared with the Node's collectives
  std::unique_ptr<detail::ControlBootstrap> in_band_;  // made by the first in_band_bootstrap()
  std::vector<bool> fenced_;                 // [rank]: its channel moved to the error state
  std::uint64_t fenced_generation_ = 0;      // the control plane's generation fenced up to
  std::vector<std::uint32_t> acknowledged_;  // by rank
};

/// What Node::shrink() gives: the survivors' Node and where each rank went.
struct ShrunkNode {
  /// The survivors' Node: this rank is node.rank() of node.world_size() in it.
  Node node;
  /// [rank in the old Node]: its rank in `node`, or none when it was lost.
  std::vector<std::optional<std::uint32_t>> new_rank;
  /// The old Node's ranks that were lost, ascending.
  std::vector<std::uint32_t> lost;
};

}  // namespace ibv::net
