// SPDX-License-Identifier: MIT
// ElementList: the scatter/gather elements an operation value names, held so that the value is
// safe to keep (in a vector, a member, a coroutine frame): up to kInlineElements are copied into
// the value itself; a longer list is a span of the caller's, which a temporary container can not
// give (that does not compile). See docs/operations.md, "Keeping operations".
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <ranges>
#include <span>
#include <type_traits>
#include <utility>

namespace ibv::op {

/// How many elements an operation value holds in itself (copied); more are the caller's span.
inline constexpr std::size_t kInlineElements = 4;

template <typename Element>
class ElementList;

namespace detail {
/// True for the containers an ElementList copies whole: a std::array of at most
/// kInlineElements elements.
template <typename Container, typename Element>
inline constexpr bool fits_inline = false;
template <typename Element, std::size_t N>
inline constexpr bool fits_inline<std::array<Element, N>, Element> = N <= kInlineElements;

/// A contiguous range of `Element` that an ElementList would hold by reference (not an
/// ElementList itself, which is copied as a value, nor a std::array it holds inline).
template <typename Range, typename Element>
concept HeldByReference = std::ranges::contiguous_range<Range> && std::ranges::sized_range<Range> &&
                          std::same_as<std::ranges::range_value_t<Range>, Element> &&
                          !std::same_as<std::remove_cvref_t<Range>, ElementList<Element>> &&
                          !fits_inline<std::remove_cvref_t<Range>, Element>;

/// A temporary container that an ElementList would have to hold by reference (a std::span,
/// which is the caller's view of memory it keeps, is not one).
template <typename Range, typename Element>
concept TemporaryContainer =
    HeldByReference<Range, Element> && !std::is_lvalue_reference_v<Range> &&
    !std::ranges::borrowed_range<Range>;

/// A std::array of at most kInlineElements `Element`s, which an ElementList copies.
template <typename Array, typename Element>
concept InlineArray = fits_inline<Array, Element>;
}  // namespace detail

/// The elements of one operation, in order. Holds up to kInlineElements of them in itself,
/// copied when the list is made: one element, or a std::array of up to kInlineElements (also
/// a temporary one: `op::Send{std::array{a, b}}`). Holds any other list by reference: a
/// std::span, or a container that is not a temporary (a std::vector, a longer std::array),
/// which must then outlive the operation value and every post of it. A temporary container
/// that it would hold by reference does not compile (test:
/// `ElementList.TakesWhatItCanHoldAndATemporaryItWouldPointIntoDoesNotCompile`), so neither
/// `op::Send{std::vector{a, b}}` nor a long temporary array can leave a value pointing at freed
/// memory. A copy holds its own copies of the elements held inline (and the same reference
/// otherwise).
///
/// `Element` is GatherElement (what is sent or written) or ScatterElement (where data lands).
template <typename Element>
class ElementList {
 public:
  /// No elements (a send of no bytes, a receive of immediate data only).
  ElementList() noexcept : data_(storage_.data()) {}
  /// One element, copied.
  ElementList(const Element& element) noexcept  // NOLINT(google-explicit-constructor): as a span
      : data_(storage_.data()), size_(1) {
    storage_[0] = element;
  }
  /// Up to kInlineElements, copied (a temporary array is fine).
  template <detail::InlineArray<Element> Array>
  ElementList(const Array& elements) noexcept  // NOLINT(google-explicit-constructor)
      : data_(storage_.data()), size_(elements.size()) {
    std::copy(elements.begin(), elements.end(), storage_.begin());
  }
  /// The caller's elements, by reference: they must outlive this list and every post of it.
  ElementList(std::span<const Element> elements) noexcept  // NOLINT(google-explicit-constructor)
      : data_(elements.data()), size_(elements.size()) {}
  /// A container that is not a temporary (a std::vector, a std::array of more than
  /// kInlineElements), by reference, as a span.
  template <detail::HeldByReference<Element> Range>
  ElementList(Range& elements) noexcept  // NOLINT(google-explicit-constructor)
      : ElementList(
            std::span<const Element>(std::ranges::data(elements), std::ranges::size(elements))) {}
  /// A temporary container this list would have to hold by reference: refused at compile time
  /// (keep the container in a variable, or use at most kInlineElements in a std::array).
  /// Deleted, and not for an ElementList: it hides no copy or move.
  template <detail::TemporaryContainer<Element> Range>
  ElementList(Range&& elements) = delete;  // NOLINT(bugprone-forwarding-reference-overload)

  /// Copies the room for inline elements whole (no branch, no loop) and points at the copy's
  /// own when `other` holds its elements inline.
  ElementList(const ElementList& other) noexcept
      : storage_(other.storage_),
        data_(other.holds_inline() ? storage_.data() : other.data_),
        size_(other.size_) {}
  /// As the copy constructor.
  ElementList& operator=(const ElementList& other) noexcept {
    if (this == &other) return *this;
    storage_ = other.storage_;
    data_ = other.holds_inline() ? storage_.data() : other.data_;
    size_ = other.size_;
    return *this;
  }
  /// A move is a copy (nothing to steal: the elements are in the value or the caller's).
  // NOLINTNEXTLINE(performance-move-constructor-init): a copy is the move
  ElementList(ElementList&& other) noexcept : ElementList(std::as_const(other)) {}
  /// As the move constructor.
  ElementList& operator=(ElementList&& other) noexcept {
    *this = std::as_const(other);
    return *this;
  }
  ~ElementList() = default;

  /// The elements, in order: valid while this list (for inline ones) or the caller's memory
  /// (for a list held by reference) is.
  [[nodiscard]] std::span<const Element> span() const noexcept { return {data_, size_}; }
  /// How many elements.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// True for no elements.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The first element, for a range-for over the list.
  [[nodiscard]] const Element* begin() const noexcept { return data_; }
  /// Past the last element.
  [[nodiscard]] const Element* end() const noexcept { return data_ + size_; }
  /// True when the elements are copies held in this list (not the caller's memory).
  [[nodiscard]] bool holds_inline() const noexcept { return data_ == storage_.data(); }

 private:
  /// Room for kInlineElements, always initialized (empty elements where unused), so that a
  /// copy is a plain copy of it: a by-reference list pays for zeroing it once when made.
  std::array<Element, kInlineElements> storage_{};
  const Element* data_;  // storage_.data(), or the caller's elements
  std::size_t size_ = 0;
};

}  // namespace ibv::op
