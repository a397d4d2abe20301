// SPDX-License-Identifier: MIT
// Allocation: mmap'ed page-aligned memory in normal, huge or transparent huge pages, bound to a
// NUMA node on request, with errors that say how to configure what is missing.
#include "ibv/memory/allocation.hpp"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <utility>

#include "ibv/error.hpp"
#include "memory/size_math.hpp"
#include "memory/sysfs.hpp"

namespace ibv {
namespace {

constexpr std::string_view kOperation = "Allocation";
const std::string kHugePagesDir = "/sys/kernel/mm/hugepages";
const std::string kThpDir = "/sys/kernel/mm/transparent_hugepage";

std::string huge_dir(std::size_t page_size) {
  return kHugePagesDir + "/hugepages-" + std::to_string(page_size / 1024) + "kB";
}

// "2 MiB, 1 GiB" from the directories of /sys/kernel/mm/hugepages.
std::string offered_huge_page_sizes() {
  std::string list;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kHugePagesDir, ec)) {
    const std::string name = entry.path().filename().string();  // hugepages-2048kB
    if (name.rfind("hugepages-", 0) != 0 || name.size() < 13) continue;
    const std::string kb = name.substr(10, name.size() - 12);
    if (!list.empty()) list += ", ";
    list += detail::size_text(static_cast<std::size_t>(std::stoull(kb)) * 1024);
  }
  return list.empty() ? std::string("none") : list;
}

// The nodes libnuma allows allocation on, "0,1" style.
std::string nodes_with_memory() {
  std::vector<int> nodes;
  for (int node = 0; node <= numa_max_node(); ++node) {
    if (numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(node)) != 0) {
      nodes.push_back(node);
    }
  }
  return format_cpu_list(nodes);
}

void check_numa_node(int node) {
  if (node < 0) {
    throw_invalid_argument(kOperation, "numa_node", std::to_string(node) + " is negative");
  }
  if (numa_available() < 0) {
    throw Error(ErrorKind::unsupported, kOperation, ENOSYS,
                "NUMA node " + std::to_string(node) +
                    " asked for, but NUMA is not available here (get_mempolicy fails)",
                "a kernel without CONFIG_NUMA, or a seccomp policy (containers) that refuses the "
                "NUMA system calls; allocate without numa_node");
  }
  if (node > numa_max_node() ||
      numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(node)) == 0) {
    throw Error(ErrorKind::not_found, kOperation, ENODEV,
                "NUMA node " + std::to_string(node) +
                    " does not exist or has no memory this process may use; nodes with memory: " +
                    nodes_with_memory(),
                "see /sys/devices/system/node/ or `numactl --hardware`");
  }
}

void bind_to_node(void* data, std::size_t size, int node) {
  bitmask* mask = numa_allocate_nodemask();
  numa_bitmask_setbit(mask, static_cast<unsigned>(node));
  const long rc =
      mbind(data, size, MPOL_BIND, mask->maskp, mask->size + 1, MPOL_MF_STRICT | MPOL_MF_MOVE);
  const int error = errno;
  numa_bitmask_free(mask);
  if (rc != 0) {
    throw Error(error == ENOSYS || error == EPERM ? ErrorKind::unsupported : ErrorKind::resource,
                "mbind", error,
                "binding " + detail::size_text(size) + " to NUMA node " + std::to_string(node));
  }
}

[[noreturn]] void throw_huge_page_error(int error, std::size_t size, std::size_t page_size) {
  const std::size_t needed = size / page_size;
  std::string detail = "mmap(MAP_HUGETLB) of " + detail::size_text(size) + " in " +
                       detail::size_text(page_size) + " huge pages (" + std::to_string(needed) +
                       (needed == 1 ? " page)" : " pages)");
  if (error != ENOMEM) throw Error(ErrorKind::resource, kOperation, error, detail);
  const auto counts = huge_page_counts(page_size);
  const std::size_t total = counts ? counts->total : 0;
  const std::size_t free = counts ? counts->free : 0;
  const bool is_default = page_size == default_huge_page_size();
  const std::string file =
      is_default ? "/proc/sys/vm/nr_hugepages" : huge_dir(page_size) + "/nr_hugepages";
  const std::size_t wanted = total + (needed > free ? needed - free : 0);
  std::string hint = "the kernel has " + std::to_string(total) + " huge pages of " +
                     detail::size_text(page_size) + " reserved (nr_hugepages), " +
                     std::to_string(free) + " free, and this needs " + std::to_string(needed) +
                     "; reserve more as root, e.g. `echo " + std::to_string(wanted) + " > " + file +
                     "`";
  if (is_default) hint += " (or hugepagesz=/hugepages= on the kernel command line)";
  hint += ", or use AllocationOptions::transparent_huge_pages() or normal pages";
  throw Error(ErrorKind::resource, kOperation, error, detail, hint);
}

std::size_t transparent_huge_page_size() {
  const auto text = detail::read_text_file(kThpDir + "/enabled");
  if (!text) {
    throw Error(ErrorKind::unsupported, kOperation, ENOENT,
                "transparent huge pages asked for, but " + kThpDir +
                    "/enabled does not exist (a kernel without CONFIG_TRANSPARENT_HUGEPAGE)",
                "use PageKind::huge (reserved huge pages) or normal pages");
  }
  if (text->find("[never]") != std::string::npos) {
    throw Error(ErrorKind::unsupported, kOperation, EINVAL,
                "transparent huge pages asked for, but " + kThpDir + "/enabled is \"never\"",
                "as root: `echo madvise > " + kThpDir +
                    "/enabled` (or transparent_hugepage=madvise on the kernel command line)");
  }
  const auto size = detail::read_integer_file(kThpDir + "/hpage_pmd_size");
  return size && *size > 0 ? static_cast<std::size_t>(*size) : std::size_t{2} << 20U;
}

}  // namespace

std::string_view to_string(PageKind kind) noexcept {
  switch (kind) {
    case PageKind::normal: return "normal";
    case PageKind::huge: return "huge";
    case PageKind::transparent_huge: return "transparent_huge";
  }
  return "unknown";
}

std::size_t system_page_size() noexcept {
  static const auto size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t default_huge_page_size() {
  const auto meminfo = detail::read_text_file("/proc/meminfo");
  if (!meminfo) return 0;
  const auto at = meminfo->find("Hugepagesize:");
  if (at == std::string::npos) return 0;
  std::istringstream line(meminfo->substr(at + 13));
  std::size_t kb = 0;
  line >> kb;
  return kb * 1024;
}

std::optional<HugePageCounts> huge_page_counts(std::size_t page_size) {
  if (page_size == 0) page_size = default_huge_page_size();
  if (page_size == 0) return std::nullopt;
  const auto total = detail::read_integer_file(huge_dir(page_size) + "/nr_hugepages");
  const auto free = detail::read_integer_file(huge_dir(page_size) + "/free_hugepages");
  if (!total || !free) return std::nullopt;
  return HugePageCounts{page_size, static_cast<std::size_t>(*total),
                        static_cast<std::size_t>(*free)};
}

Allocation::Allocation(std::size_t size, const AllocationOptions& options)
    : requested_size_(size), pages_(options.pages), numa_node_(options.numa_node) {
  if (size == 0) throw_invalid_argument(kOperation, "size", "is 0 (nothing to allocate)");
  if (options.numa_node) check_numa_node(*options.numa_node);

  int flags = MAP_PRIVATE | MAP_ANONYMOUS;
  std::size_t align_extra = 0;  // transparent huge pages: map more, then trim to alignment
  switch (options.pages) {
    case PageKind::normal: page_size_ = system_page_size(); break;
    case PageKind::huge: {
      page_size_ = options.huge_page_size != 0 ? options.huge_page_size : default_huge_page_size();
      if (options.huge_page_size != 0 &&
          (!std::has_single_bit(page_size_) || page_size_ < system_page_size())) {
        throw_invalid_argument(
            kOperation, "huge_page_size",
            std::to_string(page_size_) + " is not a power of two of at least the page size");
      }
      if (page_size_ == 0 || !std::filesystem::exists(huge_dir(page_size_))) {
        throw Error(ErrorKind::unsupported, kOperation, EINVAL,
                    "huge pages of " +
                        (page_size_ == 0 ? std::string("the default size") +
                                               " (no Hugepagesize in /proc/meminfo)"
                                         : detail::size_text(page_size_)) +
                        " asked for, but the kernel does not offer them; sizes offered: " +
                        offered_huge_page_sizes(),
                    "choose one of the offered sizes (1 GiB pages need the CPU flag pdpe1gb)");
      }
      flags |= MAP_HUGETLB | (std::countr_zero(page_size_) << MAP_HUGE_SHIFT);
      break;
    }
    case PageKind::transparent_huge:
      page_size_ = transparent_huge_page_size();
      align_extra = page_size_;
      break;
  }
  size_ = detail::page_rounded_size(kOperation, size, page_size_);
  if (size_ > SIZE_MAX - align_extra) {
    throw_invalid_argument(kOperation, "size", std::to_string(size) + " is too large to align");
  }

  void* mapped = mmap(nullptr, size_ + align_extra, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (mapped == MAP_FAILED) {
    const int error = errno;
    if (options.pages == PageKind::huge) throw_huge_page_error(error, size_, page_size_);
    throw Error(ErrorKind::resource, kOperation, error,
                "mmap of " + detail::size_text(size_ + align_extra));
  }
  auto* begin = static_cast<std::byte*>(mapped);
  if (align_extra != 0) {  // trim to a huge-page-aligned window of size_ bytes
    const auto address = reinterpret_cast<std::uintptr_t>(begin);
    const std::size_t head = (page_size_ - address % page_size_) % page_size_;
    if (head != 0) munmap(begin, head);
    const std::size_t tail = align_extra - head;
    if (tail != 0) munmap(begin + head + size_, tail);
    begin += head;
  }
  data_ = begin;
  try {
    if (options.pages == PageKind::transparent_huge && madvise(data_, size_, MADV_HUGEPAGE) != 0) {
      throw Error(ErrorKind::unsupported, "madvise", errno,
                  "MADV_HUGEPAGE on " + detail::size_text(size_));
    }
    if (options.numa_node) bind_to_node(data_, size_, *options.numa_node);
  } catch (...) {
    release();
    throw;
  }
}

Allocation::Allocation(Allocation&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      requested_size_(std::exchange(other.requested_size_, 0)),
      page_size_(other.page_size_),
      pages_(other.pages_),
      numa_node_(other.numa_node_) {}

Allocation& Allocation::operator=(Allocation&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    requested_size_ = std::exchange(other.requested_size_, 0);
    page_size_ = other.page_size_;
    pages_ = other.pages_;
    numa_node_ = other.numa_node_;
  }
  return *this;
}

Allocation::~Allocation() { release(); }

void Allocation::release() noexcept {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

std::string Allocation::to_string() const {
  std::ostringstream out;
  out << "Allocation " << detail::size_text(size_);
  if (requested_size_ != size_) out << " (asked " << requested_size_ << " B)";
  switch (pages_) {
    case PageKind::normal: out << " in " << detail::size_text(page_size_) << " pages"; break;
    case PageKind::huge: out << " in " << detail::size_text(page_size_) << " huge pages"; break;
    case PageKind::transparent_huge:
      out << " advised for " << detail::size_text(page_size_) << " transparent huge pages";
      break;
  }
  if (numa_node_) out << ", NUMA node " << *numa_node_;
  out << " at " << static_cast<const void*>(data_);
  return out.str();
}

}  // namespace ibv
