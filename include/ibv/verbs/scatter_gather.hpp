// SPDX-License-Identifier: MIT
// Scatter/gather elements: pieces of registered memory named in work requests.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace ibv {

namespace detail {
/// What both element kinds are: one ibv_sge (address, length, lkey), and nothing else, so that
/// a span of elements is an array of ibv_sge.
class SgeElement {
 public:
  [[nodiscard]] constexpr std::uint64_t address() const noexcept { return sge_.addr; }
  [[nodiscard]] constexpr std::uint32_t length() const noexcept { return sge_.length; }
  [[nodiscard]] constexpr std::uint32_t lkey() const noexcept { return sge_.lkey; }
  [[nodiscard]] constexpr const ibv_sge& native() const noexcept { return sge_; }

 protected:
  constexpr SgeElement() noexcept : sge_{} {}
  constexpr explicit SgeElement(ibv_sge sge) noexcept : sge_(sge) {}

 private:
  ibv_sge sge_;
};
}  // namespace detail

/// A piece of registered memory the device reads from (send, RDMA write source). Made by
/// MemoryRegion::gather(), which checks that it lies inside the region. Layout-compatible with
/// ibv_sge, so a span of elements is posted without copying. A distinct type from
/// ScatterElement, so a send can not be given memory meant to be written into, or back.
///
/// Its accessors come from detail::SgeElement (this header), which the reference leaves out:
/// `address()`, `length()` (bytes), `lkey()` and `native()` (the ibv_sge).
class GatherElement : public detail::SgeElement {
 public:
  /// An empty element (no bytes), e.g. to fill an array before assigning real ones.
  constexpr GatherElement() noexcept = default;
  /// Unchecked construction from raw parts; prefer MemoryRegion::gather().
  static constexpr GatherElement from_raw(std::uint64_t address, std::uint32_t length,
                                          std::uint32_t lkey) noexcept {
    return GatherElement(ibv_sge{address, length, lkey});
  }

 private:
  constexpr explicit GatherElement(ibv_sge sge) noexcept : SgeElement(sge) {}
};

/// A piece of registered memory the device writes into (receive, RDMA read destination).
/// Made by MemoryRegion::scatter(), checked like GatherElement. Accessors as GatherElement's:
/// `address()`, `length()`, `lkey()`, `native()`.
class ScatterElement : public detail::SgeElement {
 public:
  /// An empty element (no bytes).
  constexpr ScatterElement() noexcept = default;
  /// Unchecked construction from raw parts; prefer MemoryRegion::scatter().
  static constexpr ScatterElement from_raw(std::uint64_t address, std::uint32_t length,
                                           std::uint32_t lkey) noexcept {
    return ScatterElement(ibv_sge{address, length, lkey});
  }

 private:
  constexpr explicit ScatterElement(ibv_sge sge) noexcept : SgeElement(sge) {}
};

static_assert(sizeof(GatherElement) == sizeof(ibv_sge) && std::is_standard_layout_v<GatherElement>);
static_assert(sizeof(ScatterElement) == sizeof(ibv_sge) &&
              std::is_standard_layout_v<ScatterElement>);

/// Total bytes of a list of elements (64-bit: a list may exceed 4 GiB in sum).
template <typename Element>
[[nodiscard]] constexpr std::uint64_t total_length(std::span<const Element> elements) noexcept {
  if (elements.size() == 1) return elements.front().length();  // the common case, no loop
  std::uint64_t sum = 0;
  for (const auto& e : elements) sum += e.length();
  return sum;
}

}  // namespace ibv
