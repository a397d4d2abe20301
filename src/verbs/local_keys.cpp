// SPDX-License-Identifier: MIT
// LocalKeys: the registry of every memory region's local key (under one lock), the lock-free key
// sets of each protection domain and each device (KeySet), and each domain's cache.
#include "ibv/verbs/local_keys.hpp"

#include <bit>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ibv::detail {

/// One table of a KeySet: open addressing with linear probing over atomic slots, each holding
/// a key's tag (the key + 1), 0 (empty) or kRemoved (a key that was removed: a probe goes on
/// past it). Written under the registry's lock, and kept at most half full (removed slots
/// counted), so that every probe ends at an empty slot; read without a lock, by contains().
class KeyTable {
 public:
  /// Empty, with 2^bits slots (1 <= bits <= 31).
  explicit KeyTable(unsigned bits)
      : shift_(32U - bits), mask_((std::size_t{1} << bits) - 1), slots_(mask_ + 1) {}

  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }
  /// Slots in use: keys and removed ones.
  [[nodiscard]] std::size_t used() const noexcept { return used_; }

  /// Whether the table holds `lkey`. Without a lock: a key added or the table rebuilt
  /// concurrently may be missed, never one that is not there.
  [[nodiscard]] bool contains(std::uint32_t lkey) const noexcept { return find(lkey) != kAbsent; }
  /// Adds `lkey`, which it does not hold; the caller keeps it at most half full.
  void insert(std::uint32_t lkey) noexcept {
    std::size_t i = home(lkey);
    while (slots_[i].load(std::memory_order_relaxed) != 0) i = (i + 1) & mask_;
    slots_[i].store(tag_of(lkey), std::memory_order_relaxed);
    ++used_;
  }
  /// Marks `lkey` removed, if it holds it.
  void erase(std::uint32_t lkey) noexcept {
    if (const std::size_t i = find(lkey); i != kAbsent) {
      slots_[i].store(kRemoved, std::memory_order_relaxed);
    }
  }
  /// The keys it holds.
  [[nodiscard]] std::vector<std::uint32_t> keys() const {
    std::vector<std::uint32_t> held;
    for (std::size_t i = 0; i <= mask_; ++i) {
      const std::uint64_t tag = slots_[i].load(std::memory_order_relaxed);
      if (tag != 0 && tag != kRemoved) held.push_back(static_cast<std::uint32_t>(tag - 1U));
    }
    return held;
  }
  /// Empties it (concurrent readers may miss keys until they are inserted again).
  void clear() noexcept {
    for (std::size_t i = 0; i <= mask_; ++i) slots_[i].store(0, std::memory_order_relaxed);
    used_ = 0;
  }

 private:
  static constexpr std::uint64_t kRemoved = ~std::uint64_t{0};  // above every tag (< 2^32 + 1)
  [[nodiscard]] static std::uint64_t tag_of(std::uint32_t lkey) noexcept {
    return std::uint64_t{lkey} + 1U;  // never 0, the empty slot
  }
  [[nodiscard]] std::size_t home(std::uint32_t lkey) const noexcept {
    return (lkey * 0x9E3779B1U) >> shift_;  // the top bits of a multiplicative hash
  }
  static constexpr std::size_t kAbsent = ~std::size_t{0};
  /// The index of the slot holding `lkey`, or kAbsent: the probe from its home slot to an
  /// empty one (or round the whole table, which a half-full table never needs).
  [[nodiscard]] std::size_t find(std::uint32_t lkey) const noexcept {
    const std::uint64_t tag = tag_of(lkey);
    for (std::size_t i = home(lkey), probes = 0; probes <= mask_; i = (i + 1) & mask_, ++probes) {
      const std::uint64_t held = slots_[i].load(std::memory_order_relaxed);
      if (held == tag) return i;
      if (held == 0) return kAbsent;
    }
    return kAbsent;
  }

  unsigned shift_;
  std::size_t mask_;
  std::vector<std::atomic<std::uint64_t>> slots_;  // value-initialized: all empty
  std::size_t used_ = 0;
};

namespace {

/// The domain of every local key registered through the library, by device (keys are unique on
/// a device while their regions live, not across devices).
struct Registry {
  std::mutex mutex;
  std::map<std::pair<const ibv_context*, std::uint32_t>, const LocalKeys*> owners;
  // The same keys by device, for readers without the lock. A device's set stays for the
  // process (a few bytes once its regions are gone): its domains point to it.
  std::map<const ibv_context*, KeySet> devices;
};

Registry& registry() {
  // Never destroyed: a region destroyed during static destruction still finds it.
  static auto* const instance = new Registry;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

/// A new table's size for `keys` keys: a quarter full at most, so that as many again can be
/// added or removed before it is rebuilt; 1024 slots (8 KiB) at least, so that even a set of a
/// few keys is rebuilt only after 256 registrations (a replaced table is reused four rebuilds
/// later: 1,024 registrations, milliseconds of them, for a reader to stall through).
unsigned table_bits(std::size_t keys) noexcept {
  return std::max(10U, static_cast<unsigned>(std::bit_width(4 * keys)));
}

}  // namespace

KeySet::KeySet() noexcept = default;

KeySet::~KeySet() = default;

bool KeySet::contains(std::uint32_t lkey) const noexcept {
  const KeyTable* table = current_.load(std::memory_order_acquire);
  return table != nullptr && table->contains(lkey);
}

void KeySet::insert(std::uint32_t lkey) {
  KeyTable* table = current_.load(std::memory_order_relaxed);  // only written here, locked
  if (table != nullptr && table->contains(lkey)) return;       // added twice
  // Full (keys and removed ones): rebuilt into another table.
  if (table == nullptr || 2 * (table->used() + 1) > table->capacity()) table = rebuilt(table);
  table->insert(lkey);
}

KeyTable* KeySet::rebuilt(KeyTable* full) {
  const std::vector<std::uint32_t> held =
      full != nullptr ? full->keys() : std::vector<std::uint32_t>{};
  unsigned bits = table_bits(held.size() + 1);
  KeyTable* table = nullptr;
  if (full != nullptr && full->capacity() >= std::size_t{1} << bits) {
    // Never smaller: so however keys come and go, the set keeps a few tables of one size.
    bits = static_cast<unsigned>(std::bit_width(full->capacity()) - 1);
    if (spares_.size() >= kRebuildsBeforeReuse) {
      table = spares_.front();
      spares_.erase(spares_.begin());
      table->clear();
    }
  }
  if (table == nullptr) {
    tables_.push_back(std::make_unique<KeyTable>(bits));
    table = tables_.back().get();
  }
  for (const std::uint32_t key : held) table->insert(key);
  current_.store(table, std::memory_order_release);
  if (full != nullptr && full->capacity() == table->capacity()) {
    spares_.push_back(full);
  } else {
    spares_.clear();  // a larger size now: the smaller tables are never reused
  }
  return table;
}

void KeySet::erase(std::uint32_t lkey) noexcept {
  // From the tables it replaced too: a reader that took one before it was replaced may still
  // probe it.
  for (const auto& table : tables_) table->erase(lkey);
}

LocalKeys::LocalKeys(const ibv_context* context)
    : context_(context), device_([&] {
        Registry& all = registry();
        const std::scoped_lock lock(all.mutex);
        return &all.devices[context];
      }()) {}

LocalKeys::~LocalKeys() = default;

bool LocalKeys::holds(std::uint32_t lkey) const noexcept {
  return known(lkey) || mine_.contains(lkey);
}

KeyOwner LocalKeys::owner(std::uint32_t lkey) const {
  Registry& all = registry();
  const std::scoped_lock lock(all.mutex);
  const auto found = all.owners.find({context_, lkey});
  if (found == all.owners.end()) return KeyOwner::unknown;
  if (found->second != this) return KeyOwner::another_domain;
  cache(lkey);
  return KeyOwner::this_domain;
}

std::optional<std::string> LocalKeys::refusal_slowly(const ibv_sge* elements,
                                                     std::size_t count) const {
  const std::span<const ibv_sge> list(elements, count);
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::uint32_t lkey = list[i].lkey;
    // This domain's, or none the library registered on the device (the device judges it):
    // no lock. Else another domain's, most likely: the registry says.
    if (holds(lkey) || !device_->contains(lkey)) continue;
    if (owner(lkey) == KeyOwner::another_domain) {
      return "has element " + std::to_string(i) + " (lkey " + std::to_string(lkey) +
             ") in a memory region registered on another protection domain than the "
             "queue's: register the buffer on the protection domain the queue pair (or "
             "channel, or shared receive queue) was built on";
    }
  }
  return std::nullopt;
}

void LocalKeys::add(std::uint32_t lkey) {
  Registry& all = registry();
  const std::scoped_lock lock(all.mutex);
  all.owners[{context_, lkey}] = this;
  cache(lkey);
  mine_.insert(lkey);
  device_->insert(lkey);
}

void LocalKeys::remove(std::uint32_t lkey) noexcept {
  Registry& all = registry();
  const std::scoped_lock lock(all.mutex);
  if (const auto found = all.owners.find({context_, lkey});
      found != all.owners.end() && found->second == this) {
    all.owners.erase(found);
    device_->erase(lkey);
  }
  std::uint64_t expected = tag(lkey);
  entries_[slot(lkey)].compare_exchange_strong(expected, 0, std::memory_order_relaxed);
  mine_.erase(lkey);
}

}  // namespace ibv::detail
