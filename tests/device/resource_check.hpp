// SPDX-License-Identifier: MIT
// A gtest listener that fails a device test which leaves verbs resources behind: after each
// test this process must own no kernel verbs objects (PDs, CQs, QPs, MRs, SRQs, contexts, CM
// IDs on any RDMA device, as `rdma resource show` lists them), so a leaked QP or MR is named by
// the test that leaked it. (Child processes a test starts have exited, and so released theirs,
// before the test ends.) When it can not look (no `rdma` tool, no RDMA netlink), the run fails
// with the reason, as a failure of the first test to end; IBV_TEST_LEAK_CHECK=off switches the
// check off, and the run says so.
#pragma once

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace ibv::test {

/// Counts of this process's kernel verbs objects per device and kind, e.g. {"rxe0", "qp"} -> 2.
using ResourceCounts = std::map<std::pair<std::string, std::string>, long long>;

/// The kinds of object counted: `rdma resource show KIND` lists each with its owner's pid.
inline constexpr std::array<const char*, 7> kResourceKinds{"pd",  "cq",  "qp",   "mr",
                                                           "srq", "ctx", "cm_id"};

/// Every process's (and the kernel's) objects per device and kind, as `rdma resource show` sums
/// them up, read from RDMA netlink: one quick look, or nullopt (with `why`) if it can not be read.
std::optional<ResourceCounts> total_resource_counts(std::string& why);

/// The same totals as `rdma -j resource show` prints them (it starts the tool: slower), to test
/// total_resource_counts against.
std::optional<ResourceCounts> tool_resource_counts(std::string& why);

/// This process's objects as `rdma -j resource show KIND` lists them (only those it owns:
/// kernel objects and other processes' do not count), or nullopt (with `why`) if they can not
/// be read.
std::optional<ResourceCounts> own_resource_counts(std::string& why);

/// Fails each test after which this process owns more verbs objects than before it, and the run
/// when it can not tell (IBV_TEST_LEAK_CHECK=off, and only that, runs without the check). Between
/// tests it owns none (every test builds its own), so one quick look at the totals says whether
/// anything moved since the last test; only then are this process's own objects counted (which
/// tells a leak from another process's objects on a shared machine, or a child process's still
/// being torn down).
class ResourceLeakCheck : public ::testing::EmptyTestEventListener {
 public:
  void OnTestProgramStart(const ::testing::UnitTest& /*unit_test*/) override {
    const char* setting = std::getenv("IBV_TEST_LEAK_CHECK");
    const std::string mode = setting == nullptr ? "" : setting;
    if (mode == "off") {
      off_ = true;
      std::fprintf(stderr,
                   "[ leaks    ] the verbs resource leak check is OFF "
                   "(IBV_TEST_LEAK_CHECK=off): no test is checked for leaked objects\n");
      return;
    }
    if (!mode.empty() && mode != "on") {
      // Not a silent default: a misspelt "off" must not pass for one, nor the reverse.
      unchecked_ = "IBV_TEST_LEAK_CHECK must be 'on' or 'off' (or unset), not '" + mode + "'";
    }
    std::string why;
    baseline_ = total_resource_counts(why);
    // What this process owns before any test (main's rdma_cm warm-up context) is no test's
    // leak: without this, the first test after which another process's objects moved the
    // totals would be blamed for it.
    const auto own = baseline_ ? own_resource_counts(why) : std::nullopt;
    if (own) known_leaks_ = *own;
    if (!baseline_ || !own) {
      unchecked_ += (unchecked_.empty() ? "" : "; ") + why;
    }
    if (!unchecked_.empty()) {
      std::fprintf(stderr, "[ leaks    ] the verbs resource leak check can not run: %s\n",
                   unchecked_.c_str());
    }
  }
  void OnTestEnd(const ::testing::TestInfo& /*test*/) override {
    if (off_) return;
    if (!unchecked_.empty()) {
      // Once, on the first test to end, so that the JSON result holds it: gtest 1.12 writes
      // a failure outside any test (here, in OnTestProgramStart) as invalid JSON.
      if (!unchecked_reported_) {
        unchecked_reported_ = true;
        ADD_FAILURE() << "the verbs resource leak check can not run, so neither this test nor "
                         "any other is checked for leaked verbs objects: "
                      << unchecked_
                      << " (IBV_TEST_LEAK_CHECK=off runs the tests without the check)";
      }
      return;
    }
    std::string why;
    const auto total = total_resource_counts(why);
    if (total == baseline_) return;
    const auto own = total ? own_resource_counts(why) : std::nullopt;
    if (!own) {
      ADD_FAILURE() << "could not read the verbs resource counts after the test: " << why;
      return;
    }
    // Only what is new since the last look: a leak is blamed on the test that made it, once.
    std::string left;
    for (const auto& [key, count] : *own) {
      const auto known = known_leaks_.find(key);
      const long long before = known == known_leaks_.end() ? 0 : known->second;
      if (count > before) {
        left += " " + std::to_string(count - before) + " " + key.second + " on " + key.first + ";";
      }
    }
    known_leaks_ = *own;
    baseline_ = total;  // what else moved was another process's objects, or ours reported here
    if (!left.empty()) {
      ADD_FAILURE() << "verbs resources left behind by this test (rdma resource show, owned by "
                       "this process):"
                    << left;
    }
  }

 private:
  bool off_ = false;                        // IBV_TEST_LEAK_CHECK=off
  std::string unchecked_;                   // why the check can not run, if it can not
  bool unchecked_reported_ = false;         // that reason has failed a test
  std::optional<ResourceCounts> baseline_;  // the totals when the last test ended
  ResourceCounts known_leaks_;              // this process's objects already reported
};

}  // namespace ibv::test
