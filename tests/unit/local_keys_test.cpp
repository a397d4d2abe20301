// SPDX-License-Identifier: MIT
// detail::LocalKeys without a device (the keys are numbers, the devices fake addresses): every
// key of a domain with many regions is held without the registry, removed keys are not, keys
// of another domain are refused and keys of none pass, and regions coming and going on one
// thread never make another thread's check refuse a live key or a key of no domain.
#include "ibv/verbs/local_keys.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/text.hpp"

namespace {

using ibv::detail::KeyOwner;
using ibv::detail::LocalKeys;
using ibv_test::contains;

/// A stand-in for a device: LocalKeys only compares its address.
const ibv_context* fake_device(const int& tag) {
  return reinterpret_cast<const ibv_context*>(
      &tag);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
}

/// Local keys as providers hand them out: a region index above a key byte.
std::uint32_t lkey_of(std::uint32_t index) { return (index << 8U) | ((index * 37U) & 0xffU); }

ibv_sge element(std::uint32_t lkey) { return ibv_sge{0x1000, 8, lkey}; }

TEST(LocalKeys, EveryKeyOfADomainWithManyRegionsIsHeldThoughTheCacheCannotHoldThemAll) {
  const int device = 0;
  LocalKeys keys(fake_device(device));
  constexpr std::uint32_t kRegions = 4096;  // eight times the cache's entries
  for (std::uint32_t i = 1; i <= kRegions; ++i) keys.add(lkey_of(i));
  std::uint32_t cached = 0;
  std::uint32_t held = 0;
  for (std::uint32_t i = 1; i <= kRegions; ++i) {
    cached += keys.known(lkey_of(i)) ? 1U : 0U;
    held += keys.holds(lkey_of(i)) ? 1U : 0U;
    const ibv_sge sge = element(lkey_of(i));
    EXPECT_FALSE(keys.refusal(&sge, 1).has_value()) << i;
  }
  EXPECT_EQ(held, kRegions);    // the table of every key, without the registry's lock
  EXPECT_LT(cached, kRegions);  // the cache alone could not say
  EXPECT_GT(cached, 0U);
  EXPECT_EQ(keys.owner(lkey_of(7)), KeyOwner::this_domain);
}

TEST(LocalKeys, TwoKeysThatShareACacheEntryAreBothHeld) {
  const int device = 0;
  LocalKeys keys(fake_device(device));
  // Find a key that shares the first one's cache entry: only the last added is cached.
  std::vector<std::uint32_t> colliding;
  for (std::uint32_t i = 2; colliding.empty() && i < 100000; ++i) {
    LocalKeys probe(fake_device(device));
    probe.add(lkey_of(1));
    probe.add(lkey_of(i));
    if (!probe.known(lkey_of(1))) colliding = {lkey_of(1), lkey_of(i)};
    probe.remove(lkey_of(1));
    probe.remove(lkey_of(i));
  }
  ASSERT_EQ(colliding.size(), 2U);
  keys.add(colliding[0]);
  keys.add(colliding[1]);
  EXPECT_FALSE(keys.known(colliding[0]));
  EXPECT_TRUE(keys.holds(colliding[0]));
  EXPECT_TRUE(keys.holds(colliding[1]));
  const std::vector<ibv_sge> both{element(colliding[0]), element(colliding[1])};
  EXPECT_FALSE(keys.refusal(both.data(), both.size()).has_value());
}

TEST(LocalKeys, RemovedKeysAreNotHeldAndManyComingAndGoingKeepTheRestHeld) {
  const int device = 0;
  LocalKeys keys(fake_device(device));
  std::vector<bool> live(20000, false);
  // Rounds of registering and deregistering, so that the set is rebuilt into another table
  // (many removed keys) and grows (many live ones).
  std::uint32_t next = 1;
  for (int round = 0; round < 30; ++round) {
    for (int i = 0; i < 400 && next < live.size(); ++i, ++next) {
      keys.add(lkey_of(next));
      live[next] = true;
    }
    for (std::uint32_t i = 1; i < next; i += 3) {
      if (live[i]) {
        keys.remove(lkey_of(i));
        live[i] = false;
      }
    }
    for (std::uint32_t i = 1; i < next; ++i) {
      ASSERT_EQ(keys.holds(lkey_of(i)), live[i]) << "round " << round << ", region " << i;
    }
  }
  // Many regions, then few, then many again: the set is rebuilt, never into a smaller table.
  for (std::uint32_t i = 1; i < next; ++i) {
    if (live[i] && i % 50 != 0) {
      keys.remove(lkey_of(i));
      live[i] = false;
    }
  }
  for (int i = 0; i < 3000 && next < live.size(); ++i, ++next) {
    keys.add(lkey_of(next));
    live[next] = true;
  }
  for (std::uint32_t i = 1; i < next; ++i) ASSERT_EQ(keys.holds(lkey_of(i)), live[i]) << i;
  // A removed key is unknown to the registry too: it passes, for the device to judge.
  EXPECT_EQ(keys.owner(lkey_of(1)), KeyOwner::unknown);
}

TEST(LocalKeys, KeysComingAndGoingForeverKeepAFewTables) {
  ibv::detail::KeySet keys;  // single-threaded here: no registry lock needed
  std::vector<std::uint32_t> live;
  // 300 keys live at a time, 200,000 added and removed in all: the set is rebuilt hundreds of
  // times, into a few tables of one size that take turns.
  for (std::uint32_t i = 1; i <= 200000; ++i) {
    keys.insert(lkey_of(i));
    live.push_back(lkey_of(i));
    if (live.size() > 300) {
      keys.erase(live.front());
      ASSERT_FALSE(keys.contains(live.front())) << i;
      live.erase(live.begin());
    }
  }
  for (const std::uint32_t lkey : live) EXPECT_TRUE(keys.contains(lkey));
  // 1024 slots at first, then 2048 (four times the keys) and at most four replaced ones of that
  // size: 6 tables.
  EXPECT_EQ(keys.table_count(), 6U);
}

TEST(LocalKeys, AnotherDomainsKeyIsRefusedAndAKeyOfNoDomainPasses) {
  const int device = 0;
  const int other_device = 0;
  LocalKeys mine(fake_device(device));
  LocalKeys theirs(fake_device(device));
  LocalKeys elsewhere(fake_device(other_device));
  for (std::uint32_t i = 1; i <= 1000; ++i) mine.add(lkey_of(i));
  theirs.add(lkey_of(5000));
  elsewhere.add(lkey_of(6000));

  const ibv_sge foreign = element(lkey_of(5000));
  const auto refusal = mine.refusal(&foreign, 1);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_TRUE(contains(*refusal, "another protection domain")) << *refusal;
  EXPECT_FALSE(mine.holds(lkey_of(5000)));
  EXPECT_EQ(mine.owner(lkey_of(5000)), KeyOwner::another_domain);

  // Keys are unique on a device only: one of another device, or of no domain, passes.
  const std::vector<ibv_sge> unknown{element(lkey_of(6000)), element(lkey_of(7000))};
  EXPECT_FALSE(mine.refusal(unknown.data(), unknown.size()).has_value());
  EXPECT_EQ(mine.owner(lkey_of(6000)), KeyOwner::unknown);

  // Deregistered there, the key is no domain's: it passes.
  theirs.remove(lkey_of(5000));
  EXPECT_FALSE(mine.refusal(&foreign, 1).has_value());
  EXPECT_EQ(mine.owner(lkey_of(5000)), KeyOwner::unknown);
  // Registered again, on a domain made later: refused again.
  LocalKeys later(fake_device(device));
  later.add(lkey_of(5000));
  EXPECT_TRUE(mine.refusal(&foreign, 1).has_value());
  later.remove(lkey_of(5000));
  elsewhere.remove(lkey_of(6000));
}

TEST(LocalKeys, RegionsComingAndGoingOnOneThreadNeverRefuseAnotherThreadsLiveKeys) {
  const int device = 0;
  LocalKeys keys(fake_device(device));
  constexpr std::uint32_t kStable = 600;  // checked all along: more than the cache holds
  for (std::uint32_t i = 1; i <= kStable; ++i) keys.add(lkey_of(i));
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> checks{0};
  std::thread poster([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      for (std::uint32_t i = 1; i <= kStable; ++i) {
        // A key of the domain, and one of no domain (as from_raw): both pass.
        const std::vector<ibv_sge> sges{element(lkey_of(i)), element(lkey_of(900000 + i))};
        if (keys.refusal(sges.data(), sges.size()).has_value()) {
          refused.fetch_add(1, std::memory_order_relaxed);
        }
      }
      checks.fetch_add(kStable, std::memory_order_relaxed);
    }
  });
  // Regions of the same domain and of another one come and go meanwhile: the tables grow and
  // are rebuilt.
  LocalKeys other(fake_device(device));
  for (std::uint32_t round = 0; round < 40; ++round) {
    const std::uint32_t first = 100000 + round * 1000;
    for (std::uint32_t i = first; i < first + 500; ++i) {
      keys.add(lkey_of(i));
      other.add(lkey_of(i + 500));
    }
    for (std::uint32_t i = first; i < first + 500; ++i) {
      keys.remove(lkey_of(i));
      other.remove(lkey_of(i + 500));
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (checks.load(std::memory_order_relaxed) < std::uint64_t{10} * kStable &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  stop.store(true, std::memory_order_relaxed);
  poster.join();
  EXPECT_EQ(refused.load(), 0U);
  EXPECT_GE(checks.load(), std::uint64_t{10} * kStable);
}

}  // namespace
