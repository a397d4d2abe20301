// SPDX-License-Identifier: MIT
// MulticastGroup: membership of an IP multicast group joined through rdma_cm, what a sender
// needs to reach the group, and the unreliable-datagram queue pairs attached to receive from it.
//
// How multicast works on RoCE v2 (and why rdma_cm): a datagram sent to the group's GID
// ("::ffff:239.1.2.3") is a UDP/IP packet to the IP multicast address, which the network delivers
// only to hosts that joined the IP group (IGMP). rdma_join_multicast on an id bound to the
// device's IP address is what makes the host join the IP group on the device's netdev (the
// kernel's rdma_cm calls ip_mc_inc_group, which sends the IGMP report); the verbs call
// ibv_attach_mcast alone only tells the device which queue pairs get the group's datagrams,
// and a host that has not joined the IP group drops them before the device sees them. On
// InfiniBand the join is a subnet-administrator request instead; the class is the same.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ibv/duration.hpp"
#include "ibv/verbs/address_handle.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/port.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/ud_address.hpp"
#include "ibv/verbs/ud_queue_pair.hpp"

struct ibv_ah_attr;

namespace ibv {

namespace detail {
struct DatagramCore;
}  // namespace detail

/// Settings of a MulticastGroup join.
struct MulticastOptions {
  /// How long the constructor waits for rdma_cm's answer (RDMA_CM_EVENT_MULTICAST_JOIN). On
  /// RoCE the join completes locally within milliseconds; on InfiniBand the subnet
  /// administrator answers. Must be positive.
  Duration join_timeout{std::chrono::seconds(5)};
  /// Join as a send-only member: the group's address-handle attributes and Q_Key are given, but
  /// the host does not join the IP group (no IGMP report) and no queue pair may be attached.
  /// For a process that only sends to the group (RoCE v2 needs no membership to send).
  bool send_only = false;
};

/// One membership of an IP multicast group, joined through rdma_cm on the RDMA device whose
/// netdev has the local address, and left on destruction. Move-only; one thread at a time.
///
///     ibv::MulticastGroup group("239.1.2.3", "10.0.0.1");
///     // a receiver: a UD queue pair with the group's Q_Key, handed to the group
///     ibv::UdQueuePair& receiver = group.attach(
///         ibv::UdQueuePairBuilder(pd, cq, cq).qkey(ibv::QKey(group.qkey())).build());
///     // a sender (any UD queue pair on the device): through the group's address handle
///     auto send = ibv::UdSendRequest::to(1, data, group.address_handle(pd), group.destination());
///
/// The constructor checks its input before it creates anything (ibv::Error invalid_argument:
/// the group must be an IPv4 multicast literal, 224.0.0.0/4, or an IPv6 one, ff00::/8; the
/// local address an IP literal of this host; the timeout positive), binds an rdma_cm id
/// (UDP port space) to the local address (not_found when no RDMA device serves it), joins with
/// rdma_join_multicast and waits up to the join timeout for the answer: timeout when none came,
/// the event's error for RDMA_CM_EVENT_MULTICAST_ERROR, unsupported for an IPv6 group on RoCE
/// v2 (the kernel joins only IPv4 groups there). Every error names the group.
///
/// Contract of the membership: destruction (or leave()) detaches every attached queue pair
/// (ibv_detach_mcast) and leaves the group (rdma_leave_multicast: the last member on the host
/// sends the IGMP leave), also when the constructor fails after the join was requested.
///
/// Attached queue pairs belong to the group: attach() takes the UdQueuePair and returns a
/// reference to it (valid while the group lives, moves included), detach() hands it back. So a
/// queue pair can never be destroyed while attached, which devices refuse (IBA o10-2.2.3: rxe
/// answers EBUSY and the queue pair would leak); the group detaches each before destroying it.
///
/// Delivery is unreliable datagram delivery: no acknowledgement, no order across senders, a
/// datagram that finds no posted receive is dropped, and so is one whose Q_Key differs from the
/// receiving queue pair's. A sender attached to the group receives its own datagrams too
/// (multicast loopback).
class MulticastGroup {
 public:
  /// The Q_Key rdma_cm gives every group joined in its UDP port space (RDMA_UDP_QKEY): what a
  /// receiving queue pair's Q_Key must be.
  static constexpr std::uint32_t kRdmaCmQkey = 0x01234567;
  /// The destination QP number of every datagram to a multicast group (0xFFFFFF).
  static constexpr std::uint32_t kQpNumber = 0xFFFFFF;

  /// Joins `group` on the device of `local_address` (checks and errors: see the class comment).
  MulticastGroup(std::string_view group, std::string_view local_address,
                 MulticastOptions options = {});
  /// Takes over the membership; the moved-from object is left (no membership, every accessor
  /// but joined() then throws ibv::Error state).
  MulticastGroup(MulticastGroup&&) noexcept;
  /// Leaves this membership (as the destructor), then takes over the other.
  MulticastGroup& operator=(MulticastGroup&&) noexcept;
  MulticastGroup(const MulticastGroup&) = delete;
  MulticastGroup& operator=(const MulticastGroup&) = delete;
  /// Detaches every attached queue pair and leaves the group; never throws (a failure of the
  /// verbs is written to stderr).
  ~MulticastGroup();

  /// The group's address as given ("239.1.2.3").
  [[nodiscard]] const std::string& group() const;
  /// The local address the membership is bound to ("10.0.0.1").
  [[nodiscard]] const std::string& local_address() const;
  /// The RDMA device the local address belongs to ("rxe0").
  [[nodiscard]] const std::string& device_name() const;
  /// The device's port the group was joined on.
  [[nodiscard]] PortNumber port() const;
  /// The group's GID (MGID) from the join: "::ffff:239.1.2.3" on RoCE v2.
  [[nodiscard]] Gid mgid() const;
  /// The group's LID (MLID) from the join: 0 on RoCE, assigned by the subnet manager on
  /// InfiniBand.
  [[nodiscard]] std::uint16_t mlid() const;
  /// The Q_Key of the group (from the join event; rdma_cm's UDP port space uses 0x01234567).
  /// Senders put it into every datagram; a receiving queue pair must have it as its own Q_Key.
  [[nodiscard]] std::uint32_t qkey() const;
  /// Whether this is a send-only membership (MulticastOptions::send_only).
  [[nodiscard]] bool send_only() const;
  /// The address vector a sender's address handle needs (rdma_cm's, from the join event: the
  /// MGID as destination GID, the source GID index of the local address, hop limit, port).
  [[nodiscard]] const ibv_ah_attr& address_vector() const;

  /// The destination of a datagram to the group, as a UdAddress: QP number kQpNumber, the
  /// group's Q_Key, MLID, MGID, and the port's active MTU (the largest datagram).
  [[nodiscard]] UdAddress destination() const;
  /// An address handle to the group on `pd` (which must be on device_name()), made from
  /// address_vector(): what a sender's UdSendRequest goes through. Senders need not be
  /// attached; an attached sender receives its own datagrams too.
  [[nodiscard]] AddressHandle address_handle(const ProtectionDomain& pd) const;

  /// Attaches `qp` to the group (ibv_attach_mcast with the MGID and MLID of the join) and keeps
  /// it: the returned reference stays valid until detach() or the group's end. Throws
  /// ibv::Error before attaching: state for a send-only membership or one already left;
  /// invalid_argument for a queue pair on another device or port than the group, or whose Q_Key
  /// is not qkey() (the device would drop every datagram of the group without a trace). The
  /// queue pair is destroyed with the group if it was not detached; on an error it is destroyed
  /// at once, unattached.
  UdQueuePair& attach(UdQueuePair qp);
  /// Detaches `qp` (an attached queue pair of this group) and hands it back; from now on it
  /// receives nothing of the group. Throws ibv::Error: invalid_argument when it is not one of
  /// this group's; the verb's error when ibv_detach_mcast fails (it then stays attached).
  [[nodiscard]] UdQueuePair detach(const UdQueuePair& qp);
  /// Queue pairs the group holds (attached, or still held after leave()).
  [[nodiscard]] std::size_t attached_count() const;

  /// Whether the membership is still held (false once left, or moved from).
  [[nodiscard]] bool joined() const noexcept;
  /// Detaches every attached queue pair and leaves the group now, as the destructor does; the
  /// queue pairs stay with the group (detach() hands them back) but receive nothing of it.
  /// Afterwards attach() throws; the accessors of what the join said still answer. Calling it
  /// again does nothing. Throws ibv::Error when rdma_leave_multicast fails (the membership
  /// counts as left either way).
  void leave();

 private:
  // A DatagramEndpoint attaches its own queue pair, which it keeps and destroys only after the
  // group (docs/datagrams.md, "Multicast on a DatagramEndpoint").
  friend struct detail::DatagramCore;
  struct State;
  std::unique_ptr<State> state_;
  [[nodiscard]] const State& joined_state(std::string_view operation) const;
  /// attach()'s checks and ibv_attach_mcast of `qp`; `owned` holds it when the group does.
  void attach_member(UdQueuePair& qp, std::unique_ptr<UdQueuePair> owned,
                     std::string_view operation);
  /// Attaches a queue pair the caller keeps: the caller must destroy the group (which detaches
  /// it) before the queue pair. detach() refuses it.
  void attach_borrowed(UdQueuePair& qp, std::string_view operation);
};

}  // namespace ibv
