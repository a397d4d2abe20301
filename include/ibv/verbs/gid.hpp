// SPDX-License-Identifier: MIT
// GIDs (128-bit global port addresses) and the entries of a port's GID table.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

union ibv_gid;

namespace ibv {

/// A 128-bit GID in network byte order. On RoCE it is an IPv6 address (IPv4 addresses appear
/// IPv4-mapped, "::ffff:a.b.c.d"); on InfiniBand, subnet prefix and port GUID.
class Gid {
 public:
  /// The all-zero GID (what an unset table entry holds).
  constexpr Gid() noexcept = default;
  /// The GID of these 16 bytes, network byte order.
  constexpr explicit Gid(const std::array<std::uint8_t, 16>& bytes) noexcept : bytes_(bytes) {}
  /// The GID in a verbs ibv_gid.
  explicit Gid(const ibv_gid& raw) noexcept;

  /// Parses the IPv6 text form ("fe80::1", "::ffff:10.0.0.1"); throws ibv::Error otherwise.
  [[nodiscard]] static Gid from_string(std::string_view text);

  /// The 16 bytes, network byte order.
  [[nodiscard]] constexpr const std::array<std::uint8_t, 16>& bytes() const noexcept {
    return bytes_;
  }
  /// As a verbs ibv_gid.
  [[nodiscard]] ibv_gid to_native() const noexcept;
  /// Whether all 16 bytes are zero (an unset entry).
  [[nodiscard]] bool is_zero() const noexcept;
  /// True for "::ffff:a.b.c.d", the form RoCE v2 uses for IPv4 addresses.
  [[nodiscard]] bool is_ipv4_mapped() const noexcept;
  /// "a.b.c.d" for an IPv4-mapped GID.
  [[nodiscard]] std::optional<std::string> ipv4() const;
  /// The IPv6 text form, e.g. "fe80::5054:ff:fe12:3456" or "::ffff:10.0.2.15".
  [[nodiscard]] std::string to_string() const;

  friend constexpr bool operator==(const Gid&, const Gid&) noexcept = default;

 private:
  std::array<std::uint8_t, 16> bytes_{};
};

/// Which protocol a GID table entry is for.
enum class GidType : std::uint8_t {
  infiniband,  ///< InfiniBand (also RoCE v1 on old kernels that do not tell them apart).
  roce_v1,     ///< RoCE v1: Ethernet frames, not routable.
  roce_v2,     ///< RoCE v2: UDP/IP (port 4791), routable. The usual choice on Ethernet.
};

/// "IB", "RoCE v1" or "RoCE v2".
[[nodiscard]] std::string_view to_string(GidType type) noexcept;

/// One valid entry of a port's GID table, with the network device it belongs to.
struct GidEntry {
  Gid gid;                             ///< The GID.
  std::uint32_t index = 0;             ///< Its index in the port's table (the gid_index).
  std::uint8_t port = 0;               ///< The port, 1-based.
  GidType type = GidType::infiniband;  ///< InfiniBand, RoCE v1 or RoCE v2.
  /// The netdev behind the entry on RoCE ("eth0"); empty on InfiniBand.
  std::string netdev;

  /// One line for people: "1  ::ffff:10.0.2.15  RoCE v2  eth0".
  [[nodiscard]] std::string to_string() const;
};

}  // namespace ibv
