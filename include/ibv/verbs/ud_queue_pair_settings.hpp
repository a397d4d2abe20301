// SPDX-License-Identifier: MIT
// The knobs of an unreliable-datagram queue pair: the Q_Key value type and UdQueuePairSettings.
#pragma once

#include <cstdint>
#include <optional>

#include "ibv/verbs/port.hpp"
#include "ibv/verbs/queue_pair_settings.hpp"

namespace ibv {

/// A Q_Key: the 32-bit key a UD queue pair accepts datagrams with. A datagram whose Q_Key is
/// not the receiving queue pair's is dropped by the receiver without a trace (no completion
/// on either side). Bit 31 marks controlled Q_Keys, which only privileged queue pairs may
/// hold (and a send naming one goes out with the sender's own Q_Key): refused here.
class QKey {
 public:
  /// Throws ibv::Error (invalid_argument) when bit 31 is set.
  explicit QKey(std::uint32_t value);
  /// 0x11111111, perftest's and rdma-core's examples' Q_Key.
  [[nodiscard]] static constexpr QKey default_value() noexcept { return QKey(Raw{0x11111111}); }
  /// The key, bit 31 clear.
  [[nodiscard]] constexpr std::uint32_t value() const noexcept { return value_; }
  friend constexpr bool operator==(QKey, QKey) noexcept = default;

 private:
  struct Raw {
    std::uint32_t value;
  };
  constexpr explicit QKey(Raw raw) noexcept : value_(raw.value) {}
  std::uint32_t value_;
};

/// Every setting of a UD queue pair, with defaults. Unset optionals are taken from the device
/// and port when the QP is built. Checked by UdQueuePairBuilder::build() before anything is
/// created, with errors naming the setting: port 1..physical_port_count (not_found);
/// gid_index a valid entry of the port's GID table within 0..255; pkey_index below the port's
/// P_Key table length; depths up to max_qp_wr; SGEs up to max_sge; max_inline_data granted.
struct UdQueuePairSettings {
  /// 1-based port; datagrams are sent and received there.
  PortNumber port{};
  /// The GID index this QP's UdAddress carries (RoCE: its source address); default:
  /// Context::default_gid_index (the RoCE v2 IPv4 entry). Address handles choose their own
  /// source GID index (AddressHandleSettings).
  std::optional<std::uint32_t> gid_index;
  /// The Q_Key it accepts (and sends with when a request names none): default 0x11111111.
  QKey qkey = QKey::default_value();
  /// Index into the port's P_Key table (0: the default partition).
  std::uint16_t pkey_index = 0;
  /// Send queue depth: requests posted and not yet completed; up to the device's max_qp_wr.
  QueueDepth max_send_wr{128};
  /// Receive queue depth (ignored with a shared receive queue); up to max_qp_wr.
  QueueDepth max_recv_wr{128};
  /// Most gather elements per send; up to the device's max_sge.
  SgeCount max_send_sge{1};
  /// Most scatter elements per receive (ignored with a shared receive queue); up to max_sge.
  SgeCount max_recv_sge{1};
  /// Inline bytes to ask for. Unset: InlineSize::kDefault, else 64, else 0, whichever the
  /// device takes first (as a QueuePair's). Set: exactly this, or building fails.
  std::optional<InlineSize> max_inline_data;
  /// First PSN of the send queue; default: random.
  std::optional<Psn> send_psn;
};

}  // namespace ibv
