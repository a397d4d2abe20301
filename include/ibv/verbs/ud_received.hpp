// SPDX-License-Identifier: MIT
// A datagram received on a UD queue pair: its source (QPN, LID, GID from the global route
// header) and its payload, which starts 40 bytes into the receive buffer, past the GRH area.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

/// The first 40 bytes of every UD receive buffer: the global route header area. On InfiniBand
/// and RoCE over IPv6 it is the IPv6-format GRH (source GID at bytes 8..23, destination at
/// 24..39). On RoCE v2 over IPv4 the first 20 bytes are unspecified (zero on rxe) and the IPv4
/// header fills the last 20 (source address at bytes 32..35, destination at 36..39). Which form
/// it is follows rdma-core's rule (ibv_init_ah_from_wc): an IPv4 header is taken when the
/// first byte's version is not 6 and byte 20's is 4, or byte 20 starts a 20-byte IPv4 header
/// with a valid checksum.
class GlobalRouteHeader {
 public:
  /// Bytes at the start of every UD receive.
  static constexpr std::size_t kSize = 40;
  /// Offset of the IPv4 header on RoCE v2 over IPv4.
  static constexpr std::size_t kIpv4Offset = 20;

  /// The header in `bytes` (exactly kSize bytes, copied).
  explicit GlobalRouteHeader(std::span<const std::byte, kSize> bytes) noexcept;

  /// Whether the area holds RoCE v2's IPv4 header (in its last 20 bytes).
  [[nodiscard]] bool is_ipv4() const noexcept { return ipv4_; }
  /// The source's GID: the IPv6 source address, or "::ffff:a.b.c.d" from the IPv4 source.
  [[nodiscard]] Gid source_gid() const noexcept;
  /// The destination GID (the receiver's own, or a multicast group), as source_gid().
  [[nodiscard]] Gid destination_gid() const noexcept;
  /// The IPv4 header (bytes 20..39) when is_ipv4(), else empty.
  [[nodiscard]] std::span<const std::byte> ipv4_header() const noexcept;
  /// The 40 bytes as received.
  [[nodiscard]] std::span<const std::byte, kSize> bytes() const noexcept { return bytes_; }

 private:
  std::array<std::byte, kSize> bytes_{};
  bool ipv4_ = false;
};

/// Where a received datagram came from.
struct UdSource {
  std::uint32_t qp_number = 0;  ///< The sending queue pair (completion's src_qp).
  std::uint16_t lid = 0;        ///< The sender's LID (InfiniBand; 0 on RoCE).
  /// The sender's GID, from the global route header when the completion says there is one.
  std::optional<Gid> gid;
  friend bool operator==(const UdSource&, const UdSource&) noexcept = default;
};

/// A successful receive on a UD queue pair, read against its buffer: the payload past the GRH
/// area, the source, the immediate data. A view: it refers to the caller's buffer.
class UdReceived {
 public:
  /// Reads `completion` (a successful receive of a UD queue pair) against `buffer`, the
  /// contiguous memory its receive request scattered into. Throws ibv::Error
  /// (invalid_argument) for a completion that is not a successful receive, one shorter than
  /// the 40-byte GRH area, or longer than `buffer`.
  UdReceived(const WorkCompletion& completion, std::span<const std::byte> buffer);

  /// The datagram's bytes: buffer[40, byte_length).
  [[nodiscard]] std::span<const std::byte> payload() const noexcept { return payload_; }
  /// Who sent it.
  [[nodiscard]] const UdSource& source() const noexcept { return source_; }
  /// The global route header, when the completion says one arrived (always on RoCE).
  [[nodiscard]] const std::optional<GlobalRouteHeader>& grh() const noexcept { return grh_; }
  /// The GRH area of the buffer (its first 40 bytes), for AddressHandle::reply_to.
  [[nodiscard]] std::span<const std::byte> grh_area() const noexcept { return grh_area_; }
  /// Immediate data, host byte order, when the sender sent some.
  [[nodiscard]] std::optional<std::uint32_t> immediate() const noexcept { return immediate_; }

 private:
  std::span<const std::byte> payload_;
  std::span<const std::byte> grh_area_;
  UdSource source_;
  std::optional<GlobalRouteHeader> grh_;
  std::optional<std::uint32_t> immediate_;
};

}  // namespace ibv
