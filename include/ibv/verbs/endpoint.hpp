// SPDX-License-Identifier: MIT
// The address of a prepared queue pair, sent to the peer out of band before the handshake.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "ibv/verbs/gid.hpp"

namespace ibv {

/// What a peer needs to connect to a queue pair: QP number, LID (InfiniBand), GID (RoCE, and
/// InfiniBand across subnets) and the first packet sequence number. A plain value with two
/// wire forms: JSON for people and config files, a fixed 28-byte binary form for exchangers.
struct Endpoint {
  /// Size of to_bytes(): version (1), reserved (1), LID (2), QPN (4), PSN (4), GID (16);
  /// integers big-endian.
  static constexpr std::size_t kWireSize = 28;
  /// Version byte of the binary form.
  static constexpr std::uint8_t kWireVersion = 1;

  std::uint32_t qp_number = 0;  ///< 24 bits.
  std::uint16_t lid = 0;        ///< 0 on RoCE.
  Gid gid;                      ///< All zero where the port has no GID in use (IB without GRH).
  std::uint32_t psn = 0;        ///< 24 bits.

  /// {"qpn":1234,"lid":0,"gid":"::ffff:10.0.2.15","psn":5678}
  [[nodiscard]] std::string to_json() const;
  /// Parses to_json()'s form. Throws ibv::Error (invalid_argument) naming the bad or missing
  /// field; QPN and PSN must fit 24 bits.
  [[nodiscard]] static Endpoint from_json(std::string_view json);

  /// The binary form: kWireSize bytes, big-endian.
  [[nodiscard]] std::array<std::byte, kWireSize> to_bytes() const noexcept;
  /// Parses to_bytes(); accepts exactly the bytes to_bytes() makes. Throws ibv::Error
  /// (invalid_argument) for a wrong size, an unknown version, a non-zero reserved byte or
  /// out-of-range fields.
  [[nodiscard]] static Endpoint from_bytes(std::span<const std::byte> bytes);

  /// "QPN 0x00012a LID 0 GID ::ffff:10.0.2.15 PSN 0x3f2a1b".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const Endpoint&, const Endpoint&) noexcept = default;
};

}  // namespace ibv
