// SPDX-License-Identifier: MIT
// The path MTU of a queue pair: one of the five sizes the InfiniBand spec allows.
#pragma once

#include <compare>
#include <cstdint>

namespace ibv {

/// A path MTU: 256, 512, 1024, 2048 or 4096 bytes. Any other size is rejected at construction,
/// so a Mtu is always one the device can be given.
class Mtu {
 public:
  /// Throws ibv::Error (invalid_argument) unless `bytes` is 256, 512, 1024, 2048 or 4096.
  [[nodiscard]] static Mtu from_bytes(std::uint32_t bytes);
  /// From the verbs enum value (IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5); throws if out of range.
  [[nodiscard]] static Mtu from_native(int value);

  /// 256 bytes.
  [[nodiscard]] static constexpr Mtu mtu256() noexcept { return Mtu(1); }
  /// 512 bytes.
  [[nodiscard]] static constexpr Mtu mtu512() noexcept { return Mtu(2); }
  /// 1024 bytes.
  [[nodiscard]] static constexpr Mtu mtu1024() noexcept { return Mtu(3); }
  /// 2048 bytes.
  [[nodiscard]] static constexpr Mtu mtu2048() noexcept { return Mtu(4); }
  /// 4096 bytes.
  [[nodiscard]] static constexpr Mtu mtu4096() noexcept { return Mtu(5); }

  /// The MTU in bytes: 256 .. 4096.
  [[nodiscard]] constexpr std::uint32_t bytes() const noexcept { return 128U << code_; }
  /// The verbs enum value (enum ibv_mtu).
  [[nodiscard]] constexpr int native() const noexcept { return code_; }

  friend constexpr bool operator==(Mtu, Mtu) noexcept = default;
  friend constexpr auto operator<=>(Mtu a, Mtu b) noexcept { return a.code_ <=> b.code_; }

 private:
  constexpr explicit Mtu(int code) noexcept : code_(code) {}
  int code_;
};

}  // namespace ibv
