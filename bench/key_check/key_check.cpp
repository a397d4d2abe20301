// SPDX-License-Identifier: MIT
// key_check: what the check that each element's memory region belongs to the queue pair's
// protection domain (detail::LocalKeys::refusal, on every post) costs when its cache misses,
// without a device: the keys are numbers and the device a fake address, as in
// tests/unit/local_keys_test.cpp. bench/key_check/run makes the report.
//
// Usage: key_check REGIONS CHECKS REPEATS
// Prints one line per case and thread count: case, threads, the median over REPEATS (after one
// not counted) of the nanoseconds per check of the first thread (the others do the same on a
// domain of their own on the same device, at the same time). Cases:
//   cached     one region, always in the cache (the inline check alone)
//   domain     REGIONS regions of the domain checked round robin: most miss the 512-entry cache
//   no_domain  keys the library never registered (elements made from_raw)
//   registry   the registry's look-up (LocalKeys::owner, under its mutex) of the same keys as
//              domain: what each cache miss cost before the domain's and the device's key sets
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "ibv/verbs/local_keys.hpp"

namespace {

using ibv::detail::KeyOwner;
using ibv::detail::LocalKeys;

enum class Case { cached, domain, no_domain, registry };

/// Local keys as providers hand them out: a region index above a key byte.
std::uint32_t lkey_of(std::uint32_t index) { return (index << 8U) | ((index * 37U) & 0xffU); }

/// `checks` checks of `what` on `keys`, whose regions are base + 1 .. base + regions; the
/// nanoseconds per check. `failed` counts checks that did not pass.
double run(const LocalKeys& keys, Case what, std::uint32_t base, std::uint32_t regions, long checks,
           std::atomic<long>& failed) {
  long bad = 0;
  const auto start = std::chrono::steady_clock::now();
  for (long n = 0; n < checks; ++n) {
    const std::uint32_t index = what == Case::cached
                                    ? base + 1
                                    : base + 1 + static_cast<std::uint32_t>((n * 7919) % regions);
    const std::uint32_t lkey =
        what == Case::no_domain ? lkey_of(index + 0x100000U) : lkey_of(index);
    if (what == Case::registry) {
      bad += keys.owner(lkey) == KeyOwner::this_domain ? 0 : 1;
    } else {
      const ibv_sge element{0x1000, 8, lkey};
      bad += keys.refusal(&element, 1).has_value() ? 1 : 0;
    }
  }
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  failed.fetch_add(bad);
  return took.count() / static_cast<double>(checks);
}

long positive(const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value <= 0 || value > 100'000'000) {
    std::fprintf(stderr, "key_check: '%s' is not a count (1 .. 100000000)\n", text);
    std::exit(2);  // NOLINT(concurrency-mt-unsafe): before any thread
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: key_check REGIONS CHECKS REPEATS\n");
    return 2;
  }
  const auto regions = static_cast<std::uint32_t>(std::min(positive(argv[1]), 1'000'000L));
  const long checks = positive(argv[2]);
  const long repeats = positive(argv[3]);
  const int device = 0;
  const auto* context = reinterpret_cast<const ibv_context*>(&device);  // NOLINT: a fake device
  constexpr std::uint32_t kThreads = 2;
  std::deque<LocalKeys> domains;  // one per thread, all on the device
  for (std::uint32_t t = 0; t < kThreads; ++t) {
    LocalKeys& keys = domains.emplace_back(context);
    for (std::uint32_t i = 1; i <= regions; ++i) keys.add(lkey_of(t * 2'000'000U + i));
  }
  std::atomic<long> failed{0};
  struct Named {
    Case what;
    const char* name;
  };
  const std::array cases{Named{Case::cached, "cached"}, Named{Case::domain, "domain"},
                         Named{Case::no_domain, "no_domain"}, Named{Case::registry, "registry"}};
  for (const auto& c : cases) {
    for (std::uint32_t threads = 1; threads <= kThreads; ++threads) {
      std::vector<double> times;
      for (long r = -1; r < repeats; ++r) {  // -1: a warm-up, not counted
        std::vector<std::thread> others;
        for (std::uint32_t t = 1; t < threads; ++t) {
          others.emplace_back(
              [&, t] { (void)run(domains[t], c.what, t * 2'000'000U, regions, checks, failed); });
        }
        const double took = run(domains[0], c.what, 0, regions, checks, failed);
        if (r >= 0) times.push_back(took);
        for (auto& other : others) other.join();
      }
      std::nth_element(times.begin(), times.begin() + static_cast<long>(times.size() / 2),
                       times.end());
      std::printf("%s\t%u\t%.2f\n", c.name, threads, times[times.size() / 2]);
    }
  }
  if (failed.load() != 0) {
    std::fprintf(stderr, "key_check: %ld checks did not pass\n", failed.load());
    return 1;
  }
  for (std::uint32_t t = 0; t < kThreads; ++t) {
    for (std::uint32_t i = 1; i <= regions; ++i) domains[t].remove(lkey_of(t * 2'000'000U + i));
  }
  return 0;
}
