// SPDX-License-Identifier: MIT
// MulticastGroup: membership of an IP multicast group joined through rdma_cm, what a sender
// needs to reach the group, and the unreliable-datagram queue pairs attached to receive from it.
//
// How multicast works on RoCE v2 (and why rdma_cm): a datagram sent to the group's GID
// (::ffff:239.1.2.3) is a UDP/IP packet to the IP multicast address, which the network delivers
// only to hosts that joined the IP group (IGMP). rdma_join_multicast on an id bound to the
// device's IP address is what makes the host join the IP group on the device's netdev (the
// kernel's rdma_cm calls ip_mc_inc_group, which sends the IGMP report); the verbs call
// ibv_attach_mcast alone only tells the device which queue pairs get the group's datagrams,
// and a host that has not joined the IP group drops them before the device sees them. On
// InfiniBand the join is a subnet-administrator request instead; the class is the same.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "ibv/duration.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/port.hpp"

struct ibv_ah_attr;

namespace ibv {

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
///     // receivers: a UD queue pair whose Q_Key is group.qkey(), then
///     group.attach(receiver_qp);
///     // senders: to group.address_handle(pd), QP number MulticastGroup::kQpNumber, group.qkey()
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
/// sends the IGMP leave), also when the constructor fails after the join was requested. An
/// attached queue pair is kept alive by the group until it is detached: a device refuses to
/// destroy a queue pair still attached to a group.
///
/// Delivery is unreliable datagram delivery: no acknowledgement, no order across senders, a
/// datagram that finds no posted receive is dropped, and so is one whose Q_Key differs from the
/// receiving queue pair's. A sender attached to the group receives its own datagrams too
/// (multicast loopback).
class MulticastGroup {
 public:
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
  /// The group's GID (MGID) from the join: ::ffff:239.1.2.3 on RoCE v2.
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

  /// Whether the membership is still held (false once left, or moved from).
  [[nodiscard]] bool joined() const noexcept;
  /// Detaches every attached queue pair and leaves the group now, as the destructor does;
  /// afterwards only joined() and the accessors of what the join said may be used. Calling it
  /// again does nothing. Throws ibv::Error when rdma_leave_multicast fails (the membership
  /// counts as left either way).
  void leave();

 private:
  struct State;
  std::unique_ptr<State> state_;
  [[nodiscard]] const State& joined_state(std::string_view operation) const;
};

}  // namespace ibv
