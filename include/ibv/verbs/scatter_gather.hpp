// Scatter/gather elements: pieces of registered memory named in work requests.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace ibv {

/// A piece of registered memory the device reads from (send, RDMA write source). Made by
/// MemoryRegion::gather(), which checks that it lies inside the region. Layout-compatible with
/// ibv_sge, so a span of elements is posted without copying.
class GatherElement {
 public:
  /// An empty element (no bytes), e.g. to fill an array before assigning real ones.
  constexpr GatherElement() noexcept : sge_{} {}
  /// Unchecked construction from raw parts; prefer MemoryRegion::gather().
  static constexpr GatherElement from_raw(std::uint64_t address, std::uint32_t length,
                                          std::uint32_t lkey) noexcept {
    return GatherElement(ibv_sge{address, length, lkey});
  }
  [[nodiscard]] constexpr std::uint64_t address() const noexcept { return sge_.addr; }
  [[nodiscard]] constexpr std::uint32_t length() const noexcept { return sge_.length; }
  [[nodiscard]] constexpr std::uint32_t lkey() const noexcept { return sge_.lkey; }
  [[nodiscard]] constexpr const ibv_sge& native() const noexcept { return sge_; }

 private:
  constexpr explicit GatherElement(ibv_sge sge) noexcept : sge_(sge) {}
  ibv_sge sge_;
};

/// A piece of registered memory the device writes into (receive, RDMA read destination).
/// Made by MemoryRegion::scatter(), checked like GatherElement.
class ScatterElement {
 public:
  /// An empty element (no bytes).
  constexpr ScatterElement() noexcept : sge_{} {}
  static constexpr ScatterElement from_raw(std::uint64_t address, std::uint32_t length,
                                           std::uint32_t lkey) noexcept {
    return ScatterElement(ibv_sge{address, length, lkey});
  }
  [[nodiscard]] constexpr std::uint64_t address() const noexcept { return sge_.addr; }
  [[nodiscard]] constexpr std::uint32_t length() const noexcept { return sge_.length; }
  [[nodiscard]] constexpr std::uint32_t lkey() const noexcept { return sge_.lkey; }
  [[nodiscard]] constexpr const ibv_sge& native() const noexcept { return sge_; }

 private:
  constexpr explicit ScatterElement(ibv_sge sge) noexcept : sge_(sge) {}
  ibv_sge sge_;
};

static_assert(sizeof(GatherElement) == sizeof(ibv_sge) && std::is_standard_layout_v<GatherElement>);
static_assert(sizeof(ScatterElement) == sizeof(ibv_sge) &&
              std::is_standard_layout_v<ScatterElement>);

/// Total bytes of a list of elements (64-bit: a list may exceed 4 GiB in sum).
template <typename Element>
[[nodiscard]] constexpr std::uint64_t total_length(std::span<const Element> elements) noexcept {
  std::uint64_t sum = 0;
  for (const auto& e : elements) sum += e.length();
  return sum;
}

}  // namespace ibv
