// LocalKeys: the registry of every memory region's local key, by device, and each protection
// domain's cache of its own.
#include "ibv/verbs/local_keys.hpp"

#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>

namespace ibv::detail {
namespace {

/// The domain of every local key registered through the library, by device (keys are unique on
/// a device while their regions live, not across devices).
struct Registry {
  std::mutex mutex;
  std::map<std::pair<const ibv_context*, std::uint32_t>, const LocalKeys*> owners;
};

Registry& registry() {
  // Never destroyed: a region destroyed during static destruction still finds it.
  static auto* const instance = new Registry;  // NOLINT(cppcoreguidelines-owning-memory)
  return *instance;
}

}  // namespace

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
    if (!known(list[i].lkey) && owner(list[i].lkey) == KeyOwner::another_domain) {
      return "has element " + std::to_string(i) + " (lkey " + std::to_string(list[i].lkey) +
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
}

void LocalKeys::remove(std::uint32_t lkey) noexcept {
  Registry& all = registry();
  const std::scoped_lock lock(all.mutex);
  if (const auto found = all.owners.find({context_, lkey});
      found != all.owners.end() && found->second == this) {
    all.owners.erase(found);
  }
  std::uint64_t expected = tag(lkey);
  entries_[slot(lkey)].compare_exchange_strong(expected, 0, std::memory_order_relaxed);
}

}  // namespace ibv::detail
