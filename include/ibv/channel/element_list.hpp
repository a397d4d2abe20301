// SPDX-License-Identifier: MIT
// ElementList: the scatter/gather elements an operation value names, held so that the value is
// safe to keep (in a vector, a member, a coroutine frame): up to kInlineElements are copied into
// the value itself; a longer list is a span of the caller's, which a temporary container can not
// give (that does not compile). See docs/operations.md, "Keeping operations".
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <memory>
#include <ranges>
#include <span>
#include <type_traits>

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
/// ElementList itself, which is copied as a value).
template <typename Range, typename Element>
concept ElementRange = std::ranges::contiguous_range<Range> && std::ranges::sized_range<Range> &&
                       std::same_as<std::ranges::range_value_t<Range>, Element> &&
                       !std::same_as<std::remove_cvref_t<Range>, ElementList<Element>>;
}  // namespace detail

/// The elements of one operation, in order. Holds up to kInlineElements of them in itself,
/// copied when the list is made: one element, or a std::array of up to kInlineElements (also
/// a temporary one: `op::Send{std::array{a, b}}`). Holds any other list by reference: a
/// std::span, or a container that is not a temporary (a std::vector, a longer std::array),
/// which must then outlive the operation value and every post of it. A temporary container
/// that it would hold by reference does not compile, so neither `op::Send{std::vector{a, b}}`
/// nor a long temporary array can leave a value pointing at freed memory. A copy holds its own
/// copies of the elements held inline (and the same reference otherwise).
///
/// `Element` is GatherElement (what is sent or written) or ScatterElement (where data lands).
template <typename Element>
class ElementList {
 public:
  /// No elements (a send of no bytes, a receive of immediate data only).
  ElementList() noexcept : data_(storage_.elements) {}
  /// One element, copied.
  ElementList(const Element& element) noexcept  // NOLINT(google-explicit-constructor): as a span
      : data_(storage_.elements), size_(1) {
    std::construct_at(&storage_.elements[0], element);
  }
  /// Up to kInlineElements, copied (a temporary array is fine).
  template <std::size_t N>
  requires(N <= kInlineElements) ElementList(const std::array<Element, N>& elements) noexcept
      // NOLINTNEXTLINE(google-explicit-constructor): converts as a span does
      : data_(storage_.elements), size_(N) {
    for (std::size_t i = 0; i < N; ++i) std::construct_at(&storage_.elements[i], elements[i]);
  }
  /// The caller's elements, by reference: they must outlive this list and every post of it.
  ElementList(std::span<const Element> elements) noexcept  // NOLINT(google-explicit-constructor)
      : data_(elements.data()), size_(elements.size()) {}
  /// A container that is not a temporary (a std::vector, a std::array of more than
  /// kInlineElements), by reference, as a span.
  template <detail::ElementRange<Element> Range>
  requires(!detail::fits_inline<std::remove_cv_t<Range>, Element>)
      ElementList(Range& elements) noexcept  // NOLINT(google-explicit-constructor)
      : ElementList(std::span<const Element>(std::ranges::data(elements),
                                             std::ranges::size(elements))) {}
  /// A temporary container this list would have to hold by reference: refused at compile time
  /// (keep the container in a variable, or use at most kInlineElements in a std::array).
  template <detail::ElementRange<Element> Range>
  requires(!std::is_lvalue_reference_v<Range> && !std::ranges::borrowed_range<Range> &&
           !detail::fits_inline<std::remove_cv_t<Range>, Element>)
  ElementList(Range&& elements) = delete;

  /// Copies the room for inline elements whole (no branch, no loop) and points at the copy's
  /// own when `other` holds its elements inline.
  ElementList(const ElementList& other) noexcept
      : storage_(other.storage_),
        data_(other.holds_inline() ? storage_.elements : other.data_),
        size_(other.size_) {}
  /// As the copy constructor.
  ElementList& operator=(const ElementList& other) noexcept {
    storage_ = other.storage_;
    data_ = other.holds_inline() ? storage_.elements : other.data_;
    size_ = other.size_;
    return *this;
  }
  ~ElementList() = default;

  /// The elements, in order: valid while this list (for inline ones) or the caller's memory
  /// (for a list held by reference) is.
  [[nodiscard]] std::span<const Element> span() const noexcept {
    return {data_, size_};
  }
  /// How many elements.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// True for no elements.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// The first element, for a range-for over the list.
  [[nodiscard]] const Element* begin() const noexcept { return data_; }
  /// Past the last element.
  [[nodiscard]] const Element* end() const noexcept { return data_ + size_; }
  /// True when the elements are copies held in this list (not the caller's memory).
  [[nodiscard]] bool holds_inline() const noexcept { return data_ == storage_.elements; }

 private:
  /// Room for kInlineElements, left uninitialized until copied into (a list held by reference
  /// costs no zeroing of it); copied as bytes with the list (what is unmade is never read).
  union Storage {
    Storage() noexcept {}  // NOLINT(modernize-use-equals-default): leaves `elements` unmade
    // NOLINTNEXTLINE(cppcoreguidelines-avoid-c-arrays): raw room, constructed element by element
    Element elements[kInlineElements];
  };
  static_assert(std::is_trivially_copyable_v<Element> && std::is_trivially_destructible_v<Element>);

  Storage storage_;
  const Element* data_;  // storage_.elements, or the caller's elements
  std::size_t size_ = 0;
};

}  // namespace ibv::op
