// SPDX-License-Identifier: MIT
// The address of an unreliable-datagram queue pair: what a peer needs to send to it (QPN,
// Q_Key, LID, GID, path MTU), with the two wire forms an Endpoint has (JSON and fixed binary).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/mtu.hpp"

namespace ibv {

/// What a sender needs to reach a UD queue pair (UdQueuePair::address()): its QP number, the
/// Q_Key it accepts, its LID (InfiniBand; 0 on RoCE) and GID (RoCE, and InfiniBand with a
/// global route), and its path MTU, so that a sender can refuse a datagram the receiver could
/// not take (a UD message is at most one packet). A plain value with two wire forms: JSON for
/// people and config files, a fixed 28-byte big-endian binary form with a version byte for
/// exchangers. Both parsers check every field's range and name the one that is wrong.
struct UdAddress {
  /// Size of to_bytes(): version (1), MTU code (1), LID (2), QPN (4), Q_Key (4), GID (16).
  static constexpr std::size_t kWireSize = 28;
  /// Version byte of the binary form.
  static constexpr std::uint8_t kWireVersion = 1;

  std::uint32_t qp_number = 0;  ///< 24 bits.
  std::uint32_t qkey = 0;       ///< The Q_Key the queue pair accepts (bit 31 clear).
  std::uint16_t lid = 0;        ///< 0 on RoCE.
  Gid gid;                      ///< All zero where the port has no GID in use.
  Mtu mtu = Mtu::mtu1024();     ///< The receiver's path MTU: the largest datagram it takes.

  /// {"qpn":1234,"qkey":286331153,"lid":0,"gid":"::ffff:10.0.0.1","mtu":1024}
  [[nodiscard]] std::string to_json() const;
  /// Parses to_json()'s form. Throws ibv::Error (invalid_argument) naming the bad or missing
  /// field: QPN must fit 24 bits, the Q_Key must have bit 31 clear (a controlled Q_Key), the
  /// MTU must be a path MTU (256 .. 4096), the GID an IPv6 text.
  [[nodiscard]] static UdAddress from_json(std::string_view json);

  /// The binary form: kWireSize bytes, integers big-endian.
  [[nodiscard]] std::array<std::byte, kWireSize> to_bytes() const noexcept;
  /// Parses to_bytes(); accepts exactly the bytes to_bytes() makes. Throws ibv::Error
  /// (invalid_argument) for a wrong size, an unknown version or out-of-range fields (as
  /// from_json).
  [[nodiscard]] static UdAddress from_bytes(std::span<const std::byte> bytes);

  /// "UD QPN 0x00012a Q_Key 0x11111111 LID 0 GID ::ffff:10.0.0.1 MTU 1024".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const UdAddress&, const UdAddress&) noexcept = default;
};

}  // namespace ibv
