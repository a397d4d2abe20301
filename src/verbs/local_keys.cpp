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

KeyOwner LocalKeys::owner(const ibv_context* context, std::uint32_t lkey) const {
  Registry& all = registry();
  const std::scoped_lock lock(all.mutex);
  const auto found = all.owners.find({context, lkey});
  if (found == all.owners.end()) return KeyOwner::unknown;
  if (found->second != this) return KeyOwner::another_domain;
  cache(lkey);
  return KeyOwner::this_domain;
}

std::optional<std::size_t> LocalKeys::first_foreign(const ibv_context* context,
                                                    const ibv_sge* elements,
                                                    std::size_t count) const {
  const std::span<const ibv_sge> list(elements, count);
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!known(list[i].lkey) && owner(context, list[i].lkey) == KeyOwner::another_domain) {
      return i;
    }
  }
  return std::nullopt;
}

std::string LocalKeys::foreign_reason(std::size_t index, const ibv_sge* elements) {
  const std::span<const ibv_sge> list(elements, index + 1);
  return "has element " + std::to_string(index) + " (lkey " + std::to_string(list[index].lkey) +
         ") in a memory region registered on another protection domain than the queue's: "
         "register the buffer on the protection domain the queue pair (or channel, or shared "
         "receive queue) was built on";
}

void LocalKeys::add(const ibv_context* context, std::uint32_t lkey) {
  Registry& all = registry();
  const std::scoped_lock lock(all.mutex);
  all.owners[{context, lkey}] = this;
  cache(lkey);
}

void LocalKeys::remove(const ibv_context* context, std::uint32_t lkey) noexcept {
  Registry& all = registry();
  const std::scoped_lock lock(all.mutex);
  if (const auto found = all.owners.find({context, lkey});
      found != all.owners.end() && found->second == this) {
    all.owners.erase(found);
  }
  std::uint64_t expected = tag(lkey);
  entries_[slot(lkey)].compare_exchange_strong(expected, 0, std::memory_order_relaxed);
}

}  // namespace ibv::detail
