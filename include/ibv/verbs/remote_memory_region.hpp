// SPDX-License-Identifier: MIT
// A peer's memory region as this side names it in RDMA operations: address, length, rkey.
// Sub-regions, array elements and struct fields are derived with bounds and overflow checks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "ibv/verbs/access.hpp"

namespace ibv {

namespace detail {
[[noreturn]] void throw_remote_region_error(std::string_view operation, std::string_view problem);
/// The error of element<T>(index) past the end: names the index, the element count and size.
[[noreturn]] void throw_element_index_error(std::uint64_t index, std::uint64_t count,
                                            std::size_t element_size, std::uint64_t length);
/// The error of field() on a region smaller than its struct.
[[noreturn]] void throw_field_error(std::size_t struct_size, std::uint64_t length);
}  // namespace detail

/// The remote side of an RDMA write, read or atomic: `length` bytes at `address` in the peer's
/// address space, reachable with `rkey`. A plain value (what a peer sends over the wire); the
/// peer keeps the region registered while it is in use.
///
/// Everything derived from it stays inside it: sub_region(), element<T>() and field() check
/// bounds and overflow and throw ibv::Error (invalid_argument) instead of wrapping around.
///
/// It may also know which remote rights the region was registered with (access()): a region
/// made by MemoryRegion::remote() knows them, and everything derived from it keeps them; one
/// built from parts or parsed from the wire does not (the 20-byte wire form carries no rights),
/// unless with_access() declares them. Operations check what is known before posting (an
/// atomic on a region known to lack atomic access is rejected); what is not known is left to
/// the peer's device, which fails the request with remote_access_error.
class RemoteMemoryRegion {
 public:
  /// Size of to_bytes(): address (8), length (8), rkey (4), big-endian.
  static constexpr std::size_t kWireSize = 20;

  constexpr RemoteMemoryRegion() noexcept = default;
  /// Throws ibv::Error (invalid_argument) when address + length overflows 64 bits.
  RemoteMemoryRegion(std::uint64_t address, std::uint64_t length, std::uint32_t rkey);

  /// The start, as the peer's device addresses it.
  [[nodiscard]] constexpr std::uint64_t address() const noexcept { return address_; }
  /// Its length in bytes.
  [[nodiscard]] constexpr std::uint64_t length() const noexcept { return length_; }
  /// The remote key the peer's device checks requests against.
  [[nodiscard]] constexpr std::uint32_t rkey() const noexcept { return rkey_; }
  /// The remote rights the region is known to have been registered with; nullopt if unknown.
  [[nodiscard]] constexpr const std::optional<RemoteAccess>& access() const noexcept {
    return access_;
  }
  /// A copy that declares the region's rights (e.g. as the peer announced them).
  [[nodiscard]] constexpr RemoteMemoryRegion with_access(RemoteAccess access) const noexcept {
    RemoteMemoryRegion copy = *this;
    copy.access_ = access;
    return copy;
  }

  /// `length` bytes starting `offset` bytes into this region.
  [[nodiscard]] RemoteMemoryRegion sub_region(std::uint64_t offset, std::uint64_t length) const;
  /// Everything from `offset` to the end.
  [[nodiscard]] RemoteMemoryRegion sub_region_from(std::uint64_t offset) const;

  /// Treats the region as an array of T and returns element `index` (sizeof(T) bytes). Throws
  /// ibv::Error (invalid_argument) naming the index and the element count unless
  /// index < element_count<T>() (no overflow: the check is a division).
  template <typename T>
  [[nodiscard]] RemoteMemoryRegion element(std::uint64_t index) const {
    static_assert(std::is_trivially_copyable_v<T>, "only trivially copyable types travel by RDMA");
    if (index >= element_count<T>()) {
      detail::throw_element_index_error(index, element_count<T>(), sizeof(T), length_);
    }
    return sub_region(index * sizeof(T), sizeof(T));
  }
  /// Number of whole T that fit in the region.
  template <typename T>
  [[nodiscard]] constexpr std::uint64_t element_count() const noexcept {
    return length_ / sizeof(T);
  }

  /// Treats the start of the region as an S and returns the bytes of its member `field`:
  /// `remote.element<Record>(7).field(&Record::count)`. S must be standard-layout and
  /// trivially copyable, so its layout is the same on both sides of the wire (for peers built
  /// by the same compiler for the same ABI).
  template <typename S, typename F>
  [[nodiscard]] RemoteMemoryRegion field(F S::*member) const {
    static_assert(std::is_standard_layout_v<S> && std::is_trivially_copyable_v<S>,
                  "field offsets are only defined for standard-layout, trivially copyable types");
    if (length_ < sizeof(S)) detail::throw_field_error(sizeof(S), length_);
    return sub_region(offset_of(member), sizeof(F));
  }

  /// Byte offset of a data member, computed without a macro.
  template <typename S, typename F>
  [[nodiscard]] static std::uint64_t offset_of(F S::*member) noexcept {
    // An object representation, never constructed: only addresses are taken.
    alignas(S) static const std::array<std::byte, sizeof(S)> storage{};
    const auto* object = static_cast<const S*>(static_cast<const void*>(storage.data()));
    const auto* field_address = static_cast<const void*>(&(object->*member));
    return static_cast<std::uint64_t>(static_cast<const std::byte*>(field_address) -
                                      storage.data());
  }

  /// Fixed 20-byte big-endian form, for sending to a peer.
  [[nodiscard]] std::array<std::byte, kWireSize> to_bytes() const noexcept;
  /// Parses to_bytes(); throws ibv::Error (invalid_argument) on a wrong size or an overflow.
  [[nodiscard]] static RemoteMemoryRegion from_bytes(std::span<const std::byte> bytes);

  /// "remote MR 4096 B at 0x7f12.. rkey 0x1234".
  [[nodiscard]] std::string to_string() const;

  /// Same address, length and rkey: the known rights are what this side knows about the
  /// region, not part of which region it is (a region sent over the wire and parsed back
  /// equals the original).
  friend constexpr bool operator==(const RemoteMemoryRegion& a,
                                   const RemoteMemoryRegion& b) noexcept {
    return a.address_ == b.address_ && a.length_ == b.length_ && a.rkey_ == b.rkey_;
  }

 private:
  std::uint64_t address_ = 0;
  std::uint64_t length_ = 0;
  std::uint32_t rkey_ = 0;
  std::optional<RemoteAccess> access_;  // known rights; not on the wire
};

}  // namespace ibv
