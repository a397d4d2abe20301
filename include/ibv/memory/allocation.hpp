// SPDX-License-Identifier: MIT
// Allocation: page-aligned memory the library allocates (and frees) for the caller, optionally
// in huge pages or on a chosen NUMA node, ready to be registered.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ibv {

/// What pages back an Allocation.
enum class PageKind {
  normal,            ///< The system page size (4 KiB on x86-64).
  huge,              ///< Explicit huge pages (mmap MAP_HUGETLB) from the kernel's reserved pool.
  transparent_huge,  ///< Normal memory advised for transparent huge pages (madvise).
};

/// "normal", "huge", "transparent_huge".
[[nodiscard]] std::string_view to_string(PageKind kind) noexcept;

/// How to allocate. The defaults give page-aligned, zeroed memory in normal pages on whatever
/// NUMA node the kernel chooses (first touch).
struct AllocationOptions {
  /// Normal pages, huge pages (hugetlbfs, reserved), or transparent huge pages.
  PageKind pages = PageKind::normal;
  /// For PageKind::huge: the huge page size in bytes (e.g. 2 MiB, 1 GiB); 0 = the system's
  /// default huge page size (Hugepagesize in /proc/meminfo). Ignored for the other kinds.
  std::size_t huge_page_size = 0;
  /// Bind the memory to this NUMA node (mbind MPOL_BIND, via libnuma); nullopt = no binding.
  std::optional<int> numa_node;

  /// Explicit huge pages of `page_size` bytes (0: the default huge page size).
  [[nodiscard]] static constexpr AllocationOptions huge_pages(std::size_t page_size = 0) noexcept {
    AllocationOptions options;
    options.pages = PageKind::huge;
    options.huge_page_size = page_size;
    return options;
  }
  /// Normal memory advised for transparent huge pages.
  [[nodiscard]] static constexpr AllocationOptions transparent_huge_pages() noexcept {
    AllocationOptions options;
    options.pages = PageKind::transparent_huge;
    return options;
  }
  /// These options, bound to NUMA node `node`: `AllocationOptions::huge_pages().on_node(0)`.
  [[nodiscard]] constexpr AllocationOptions on_node(int node) const noexcept {
    AllocationOptions options = *this;
    options.numa_node = node;
    return options;
  }
};

/// Owning, page-aligned anonymous memory (mmap'ed; unmapped by the destructor). Move-only.
/// The size asked for is rounded up to the page size in use (the system page, the huge page
/// size, or the transparent huge page size for PageKind::transparent_huge, so that the kernel
/// can back it with whole huge pages); the memory starts zeroed.
///
/// Throws ibv::Error:
/// - invalid_argument: size 0, a size whose rounding overflows, a negative NUMA node, a huge
///   page size that is not a power of two;
/// - resource: not enough free huge pages (the message names the page size, how many pages
///   were needed, nr_hugepages and free_hugepages of that size and the sysfs file to write, or
///   /proc/sys/vm/nr_hugepages for the default size), or mmap's ENOMEM for normal pages;
/// - unsupported: a huge page size the kernel does not offer (listing those it does),
///   transparent huge pages disabled ("never") or absent, NUMA unavailable (kernel without
///   NUMA, or a seccomp policy refusing the NUMA system calls);
/// - not_found: a NUMA node that does not exist or has no memory (listing those that do).
class Allocation {
 public:
  /// Allocates at least `size` bytes as `options` say.
  explicit Allocation(std::size_t size, const AllocationOptions& options = {});

  /// Takes `other`'s memory; `other` is left empty.
  Allocation(Allocation&& other) noexcept;
  /// Frees this object's memory, then takes `other`'s.
  Allocation& operator=(Allocation&& other) noexcept;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();

  /// The memory (empty for a moved-from Allocation).
  [[nodiscard]] std::span<std::byte> bytes() const noexcept { return {data_, size_}; }
  /// The start of the memory, page-aligned (null for a moved-from Allocation).
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  /// The size mapped: the size asked for, rounded up to page_size().
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// The size asked for.
  [[nodiscard]] std::size_t requested_size() const noexcept { return requested_size_; }
  /// The page size the size was rounded to (the huge page size for huge pages).
  [[nodiscard]] std::size_t page_size() const noexcept { return page_size_; }
  /// The kind of pages it was allocated with.
  [[nodiscard]] PageKind pages() const noexcept { return pages_; }
  /// The node the memory is bound to, nullopt when unbound.
  [[nodiscard]] std::optional<int> numa_node() const noexcept { return numa_node_; }

  /// "Allocation 8 MiB (asked 5000000 B) in 2 MiB huge pages, NUMA node 0 at 0x7f..".
  [[nodiscard]] std::string to_string() const;

 private:
  void release() noexcept;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t requested_size_ = 0;
  std::size_t page_size_ = 0;
  PageKind pages_ = PageKind::normal;
  std::optional<int> numa_node_;
};

/// The system page size (sysconf(_SC_PAGESIZE)).
[[nodiscard]] std::size_t system_page_size() noexcept;

/// The default huge page size (Hugepagesize in /proc/meminfo), 0 when the kernel has none.
[[nodiscard]] std::size_t default_huge_page_size();

/// Free and total reserved huge pages of one size, as the kernel reports them in
/// `/sys/kernel/mm/hugepages/hugepages-<size>kB/`.
struct HugePageCounts {
  std::size_t page_size = 0;  ///< Bytes.
  std::size_t total = 0;      ///< nr_hugepages
  std::size_t free = 0;       ///< free_hugepages
};

/// The counts for `page_size` (0 = the default size); nullopt when the kernel does not offer
/// that size.
[[nodiscard]] std::optional<HugePageCounts> huge_page_counts(std::size_t page_size = 0);

}  // namespace ibv
