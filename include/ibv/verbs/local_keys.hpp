// SPDX-License-Identifier: MIT
// The local keys of a protection domain: which memory regions' lkeys its queue pairs accept, so
// that a request whose element belongs to a region of another protection domain is refused
// before it is posted (the device would fail it, or for inline data not notice at all).
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ibv::detail {

/// Who registered a local key, as far as the library knows.
enum class KeyOwner : std::uint8_t {
  this_domain,     ///< a memory region of this protection domain
  another_domain,  ///< a memory region of another protection domain on the same device
  unknown,         ///< not registered through the library (an element made from_raw)
};

class KeyTable;  // open addressing over atomic slots (src/verbs/local_keys.cpp)

/// A set of local keys that any thread reads without a lock, while the library's registry of
/// regions, under its lock, adds and removes them: a hash table, rebuilt into another table
/// when removed keys fill it and grown by doubling. A table it replaced stays for readers that
/// may still probe it: one of a smaller size until the set goes, one of the current size until
/// kRebuildsBeforeReuse more rebuilds have passed (then it is cleared and used again), so that
/// the set holds at most a few tables of its size. A reader may miss a key being added at that
/// moment, or, stalled inside contains() for that many rebuilds, one that was there all along;
/// it never finds one that is not there.
class KeySet {
 public:
  KeySet() noexcept;
  KeySet(const KeySet&) = delete;
  KeySet& operator=(const KeySet&) = delete;
  KeySet(KeySet&&) = delete;
  KeySet& operator=(KeySet&&) = delete;
  ~KeySet();

  /// Whether `lkey` is in the set (no lock).
  [[nodiscard]] bool contains(std::uint32_t lkey) const noexcept;
  /// Adds `lkey` (under the registry's lock).
  void insert(std::uint32_t lkey);
  /// Removes `lkey` if it is there (under the registry's lock).
  void erase(std::uint32_t lkey) noexcept;
  /// How many tables it keeps, the current one included (under the registry's lock; for tests).
  [[nodiscard]] std::size_t table_count() const noexcept { return tables_.size(); }

 private:
  static constexpr std::size_t kRebuildsBeforeReuse = 4;
  /// The keys of `full` (null: none) in a table with room for as many again, made the current
  /// one: a new table, or a replaced one of the same size old enough to reuse.
  KeyTable* rebuilt(KeyTable* full);

  std::atomic<KeyTable*> current_{nullptr};        // null until the first insert()
  std::vector<std::unique_ptr<KeyTable>> tables_;  // current_ and the ones it replaced
  std::vector<KeyTable*> spares_;  // replaced tables of the current size, the oldest first
};

/// The local keys of the memory regions registered on one protection domain (through
/// ProtectionDomain's register_* or a MemoryRegion wrapping an ibv_mr), for the check on every
/// post that each element's region belongs to the queue pair's domain, in three steps:
/// - a small cache, which answers known() with one load and a compare, inline in the post. Of
///   two keys that hash to one entry, it holds the one registered last;
/// - when it misses (refusal()), the set of every key of the domain, then the set of every key
///   the library registered on the device: so a domain with many regions, or two hot keys that
///   share a cache entry, or an element made from_raw for memory registered outside the library,
///   costs a probe or two, never a lock;
/// - only a key of another domain is looked up (owner()) in the library's registry of every
///   region, under its lock, to be refused with a message that says so.
/// Thread-safe: regions may come and go while other threads post.
class LocalKeys {
 public:
  /// The keys of a protection domain on `context`'s device.
  explicit LocalKeys(const ibv_context* context);
  LocalKeys(const LocalKeys&) = delete;
  LocalKeys& operator=(const LocalKeys&) = delete;
  LocalKeys(LocalKeys&&) = delete;
  LocalKeys& operator=(LocalKeys&&) = delete;
  ~LocalKeys();

  /// Whether `lkey` is cached as a key of this domain's regions. False says nothing: ask
  /// refusal() or owner().
  [[nodiscard]] bool known(std::uint32_t lkey) const noexcept {
    return entries_[slot(lkey)].load(std::memory_order_relaxed) == tag(lkey);
  }
  /// Whether known() holds for each of `count` elements (an sg_list): the check on every post.
  [[nodiscard]] bool all_known(const ibv_sge* elements, std::size_t count) const noexcept {
    // NOLINTBEGIN(cppcoreguidelines-pro-bounds-pointer-arithmetic): sg_list is an array
    if (count == 1) [[likely]]
      return known(elements->lkey);
    for (const ibv_sge* element = elements; element != elements + count; ++element) {
      if (!known(element->lkey)) return false;
    }
    return true;
    // NOLINTEND(cppcoreguidelines-pro-bounds-pointer-arithmetic)
  }
  /// Whether `lkey` is a key of this domain's regions, by the cache or the set of every key
  /// (no lock). False: not registered on this domain through the library, or being added or
  /// removed just now (ask owner()).
  [[nodiscard]] bool holds(std::uint32_t lkey) const noexcept;
  /// Who registered `lkey` on the domain's device; caches it when it is this domain.
  [[nodiscard]] KeyOwner owner(std::uint32_t lkey) const;
  /// Why a check refuses `count` elements (an sg_list), or nothing: the first element whose
  /// memory region is known to be registered on another protection domain of the device.
  /// Elements whose key the library does not know (made from_raw for memory registered
  /// elsewhere) pass: the device checks those. all_known() first, so that it costs a compare
  /// per element when it passes.
  [[nodiscard]] std::optional<std::string> refusal(const ibv_sge* elements,
                                                   std::size_t count) const {
    if (all_known(elements, count)) [[likely]]
      return std::nullopt;
    return refusal_slowly(elements, count);
  }

  /// A region with `lkey` was registered on this domain.
  void add(std::uint32_t lkey);
  /// That region is deregistered (its key may be given to another region).
  void remove(std::uint32_t lkey) noexcept;

 private:
  static constexpr std::size_t kSlots = 512;
  [[nodiscard]] static std::size_t slot(std::uint32_t lkey) noexcept {
    return (lkey * 0x9E3779B1U) >> 23U;  // the top 9 bits: 0..511
  }
  [[nodiscard]] static std::uint64_t tag(std::uint32_t lkey) noexcept {
    return std::uint64_t{lkey} + 1U;  // never 0, the empty entry; one add
  }
  void cache(std::uint32_t lkey) const noexcept {
    entries_[slot(lkey)].store(tag(lkey), std::memory_order_relaxed);
  }
  /// refusal() once all_known() said no: looks each uncached key up.
  [[nodiscard]] std::optional<std::string> refusal_slowly(const ibv_sge* elements,
                                                          std::size_t count) const;

  const ibv_context* context_;  // the device: keys are unique on a device, not across them
  mutable std::array<std::atomic<std::uint64_t>, kSlots> entries_{};
  KeySet mine_;     // every key of this domain
  KeySet* device_;  // every key the library registered on the device (the registry's)
};

}  // namespace ibv::detail
