// SPDX-License-Identifier: MIT
// Address handles (ibv_ah): where an unreliable-datagram send goes (a GID on RoCE, a LID on
// InfiniBand, or the sender of a received datagram), checked before the verb, RAII.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/port.hpp"
#include "ibv/verbs/protection_domain.hpp"
#include "ibv/verbs/ud_address.hpp"
#include "ibv/verbs/work_completion.hpp"

struct ibv_ah;
struct ibv_ah_attr;

namespace ibv {

/// How an address handle routes: the local port, the source GID index and the global route
/// header's fields. Checked by the AddressHandle factories before the verb (errors name the
/// setting): port 1..the device's port count (not_found); gid_index a valid entry of the port's
/// GID table within 0..255 (not_found / invalid_argument), default on RoCE
/// Context::default_gid_index (the RoCE v2 IPv4 entry, as a QueuePair's); service_level 0..15;
/// flow_label 0..0xFFFFF.
struct AddressHandleSettings {
  /// 1-based local port the datagrams leave through.
  PortNumber port{};
  /// Source GID index of the global route header; default: the RoCE v2 IPv4 entry on RoCE, 0 on
  /// InfiniBand (used there only when the destination is a GID).
  std::optional<std::uint32_t> gid_index;
  /// InfiniBand service level, 0..15.
  std::uint8_t service_level = 0;
  /// Global route header: traffic class (RoCE: DSCP and ECN bits of the IP header).
  std::uint8_t traffic_class = 0;
  /// Global route header: hop limit (RoCE: the IP TTL).
  std::uint8_t hop_limit = 64;
  /// Global route header: flow label, 20 bits (RoCE v2: feeds the UDP source port's hash).
  std::uint32_t flow_label = 0;
};

namespace detail {
/// What the copies of an AddressHandle share: the ibv_ah (destroyed with the state) and what it
/// was made of. One shared state, so that copying a handle into a request costs one reference
/// count.
struct AddressHandleState {
  ProtectionDomain pd;
  ibv_ah* ah = nullptr;
  Gid gid;
  std::uint16_t lid = 0;
  bool global = false;
  std::uint32_t gid_index = 0;
  std::uint8_t port = 1;
  AddressHandleState(ProtectionDomain domain, ibv_ah* handle) noexcept
      : pd(std::move(domain)), ah(handle) {}
  AddressHandleState(const AddressHandleState&) = delete;
  AddressHandleState& operator=(const AddressHandleState&) = delete;
  AddressHandleState(AddressHandleState&&) = delete;
  AddressHandleState& operator=(AddressHandleState&&) = delete;
  ~AddressHandleState();  // ibv_destroy_ah (a failure is reported on stderr), then the PD goes
};
}  // namespace detail

/// Where unreliable-datagram sends go: an ibv_ah on a protection domain. Made by the factories
/// below, which check their input before ibv_create_ah and throw ibv::Error naming what is
/// wrong. A cheap-to-copy handle: copies share one ibv_ah, destroyed with the last copy; it
/// keeps its protection domain (and so the device) alive.
///
/// No orphans: the device may read the address handle until a send that names it completes.
/// A UdSendRequest holds a copy, so the handle lives at least until the post; whoever owns
/// the pending send must keep one until its completion (the DatagramEndpoint keeps every
/// handle it made in its cache for its whole life).
class AddressHandle {
 public:
  /// To `gid` (RoCE, and InfiniBand with a global route): a global route header from the
  /// settings' GID index. Throws ibv::Error (invalid_argument) for an all-zero GID, and for
  /// the settings as AddressHandleSettings says.
  [[nodiscard]] static AddressHandle to_gid(const ProtectionDomain& pd, const Gid& gid,
                                            const AddressHandleSettings& settings = {});
  /// To `lid` on an InfiniBand port, without a global route header. Throws ibv::Error
  /// (invalid_argument) for LID 0, and on a RoCE port (Ethernet: there the GID is the address).
  [[nodiscard]] static AddressHandle to_lid(const ProtectionDomain& pd, std::uint16_t lid,
                                            const AddressHandleSettings& settings = {});
  /// To the queue pair `address` names: by GID on RoCE; on InfiniBand by LID, with a global
  /// route header when the address has a GID and the settings a GID index. (The QPN and Q_Key
  /// go into each send: UdSendRequest::to.)
  [[nodiscard]] static AddressHandle to(const ProtectionDomain& pd, const UdAddress& address,
                                        const AddressHandleSettings& settings = {});
  /// Back to the sender of a received datagram (ibv_init_ah_from_wc, then ibv_create_ah):
  /// `received` is its successful receive completion, `grh` the first 40 bytes of its receive
  /// buffer (the GRH area), `port` the port it came in on. Throws ibv::Error (invalid_argument)
  /// for a completion that is no successful receive, a GRH area shorter than 40 bytes, or a
  /// completion without a GRH on a RoCE port; the verb's error otherwise (EPROTONOSUPPORT: the
  /// GRH area is neither IPv6 nor RoCE v2's IPv4 form).
  [[nodiscard]] static AddressHandle reply_to(const ProtectionDomain& pd,
                                              const WorkCompletion& received,
                                              std::span<const std::byte> grh, PortNumber port = {});
  /// From address vector attributes made elsewhere (rdma_cm's multicast join gives them):
  /// checks the port and service level, and the GID index when is_global, then ibv_create_ah.
  [[nodiscard]] static AddressHandle from_attributes(const ProtectionDomain& pd,
                                                     const ibv_ah_attr& attributes);

  /// The protection domain it was created on (a UD queue pair sending through it must be on
  /// the same one: UdQueuePair::check).
  [[nodiscard]] const ProtectionDomain& protection_domain() const noexcept { return state_->pd; }
  /// The destination GID (all zero without a global route header).
  [[nodiscard]] const Gid& destination_gid() const noexcept { return state_->gid; }
  /// The destination LID (0 on RoCE).
  [[nodiscard]] std::uint16_t destination_lid() const noexcept { return state_->lid; }
  /// Whether packets carry a global route header.
  [[nodiscard]] bool is_global() const noexcept { return state_->global; }
  /// The source GID index of the global route header (meaningful when is_global()).
  [[nodiscard]] std::uint32_t gid_index() const noexcept { return state_->gid_index; }
  /// "AH to GID ::ffff:10.0.0.2 from GID index 1 port 1".
  [[nodiscard]] std::string to_string() const;

  /// The libibverbs address handle, owned by this handle (do not destroy it).
  [[nodiscard]] ibv_ah* native() const noexcept { return ah_; }

  friend bool operator==(const AddressHandle& a, const AddressHandle& b) noexcept {
    return a.ah_ == b.ah_;
  }

 private:
  AddressHandle(const ProtectionDomain& pd, const ibv_ah_attr& attributes,
                std::string_view operation);

  std::shared_ptr<const detail::AddressHandleState> state_;
  ibv_ah* ah_ = nullptr;
};

}  // namespace ibv
