// SPDX-License-Identifier: MIT
// Which remote operations a memory region or queue pair admits.
#pragma once

#include <cstdint>
#include <string>

namespace ibv {

/// A set of remote access rights: RDMA write, RDMA read, atomics. Local write is always granted
/// by the library where needed, so it is not part of this set.
class RemoteAccess {
 public:
  constexpr RemoteAccess() noexcept = default;

  /// No remote access: local use only.
  [[nodiscard]] static constexpr RemoteAccess none() noexcept { return {}; }
  /// Peers may RDMA-write into it.
  [[nodiscard]] static constexpr RemoteAccess write() noexcept { return RemoteAccess(kWrite); }
  /// Peers may RDMA-read from it.
  [[nodiscard]] static constexpr RemoteAccess read() noexcept { return RemoteAccess(kRead); }
  /// Peers may run atomics (fetch-and-add, compare-and-swap) on it.
  [[nodiscard]] static constexpr RemoteAccess atomic() noexcept { return RemoteAccess(kAtomic); }
  /// Write, read and atomics.
  [[nodiscard]] static constexpr RemoteAccess all() noexcept {
    return RemoteAccess(kWrite | kRead | kAtomic);
  }

  /// Whether the set has RDMA write.
  [[nodiscard]] constexpr bool allows_write() const noexcept { return (bits_ & kWrite) != 0; }
  /// Whether the set has RDMA read.
  [[nodiscard]] constexpr bool allows_read() const noexcept { return (bits_ & kRead) != 0; }
  /// Whether the set has atomics.
  [[nodiscard]] constexpr bool allows_atomic() const noexcept { return (bits_ & kAtomic) != 0; }
  /// Whether the set is none().
  [[nodiscard]] constexpr bool empty() const noexcept { return bits_ == 0; }
  /// Whether every right in `other` is also in this set.
  [[nodiscard]] constexpr bool contains(RemoteAccess other) const noexcept {
    return (bits_ & other.bits_) == other.bits_;
  }

  /// The verbs access flags (IBV_ACCESS_*), with local write added.
  [[nodiscard]] int native_with_local_write() const noexcept;
  /// "write|read", "none".
  [[nodiscard]] std::string to_string() const;

  friend constexpr RemoteAccess operator|(RemoteAccess a, RemoteAccess b) noexcept {
    return RemoteAccess(static_cast<std::uint8_t>(a.bits_ | b.bits_));
  }
  friend constexpr bool operator==(RemoteAccess, RemoteAccess) noexcept = default;

 private:
  static constexpr std::uint8_t kWrite = 1;
  static constexpr std::uint8_t kRead = 2;
  static constexpr std::uint8_t kAtomic = 4;
  constexpr explicit RemoteAccess(std::uint8_t bits) noexcept : bits_(bits) {}
  std::uint8_t bits_ = 0;
};

}  // namespace ibv
