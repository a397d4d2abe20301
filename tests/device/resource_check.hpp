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
#include <nlohmann/json.hpp>

namespace ibv::test {

/// Counts of this process's kernel verbs objects per device and kind, e.g. {"rxe0", "qp"} -> 2.
using ResourceCounts = std::map<std::pair<std::string, std::string>, long long>;

/// The kinds of object counted: `rdma resource show KIND` lists each with its owner's pid.
inline constexpr std::array<const char*, 7> kResourceKinds{"pd",  "cq",  "qp",   "mr",
                                                           "srq", "ctx", "cm_id"};

/// What `command` prints on stdout and stderr, or nullopt if it can not be started.
inline std::optional<std::string> command_output(const std::string& command) {
  const std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen(command.c_str(), "r"), ::pclose);
  if (!pipe) return std::nullopt;
  std::string text;
  std::array<char, 4096> buffer{};
  while (const std::size_t n = std::fread(buffer.data(), 1, buffer.size(), pipe.get())) {
    text.append(buffer.data(), n);
  }
  return text;
}

/// The start of a command's output for a message: at most 200 characters, no trailing newline.
inline std::string output_excerpt(const std::string& text) {
  std::string excerpt = text.substr(0, 200);
  while (!excerpt.empty() && std::isspace(static_cast<unsigned char>(excerpt.back())) != 0) {
    excerpt.pop_back();
  }
  return excerpt;
}

/// The string member `key` of a JSON object ("?" if it has none).
inline std::string string_member(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get_ref<const std::string&>()
                                               : std::string("?");
}

/// Every process's (and the kernel's) objects per device and kind, as `rdma -j resource show`
/// sums them up: one quick look, or nullopt (with `why`) if it can not be read.
inline std::optional<ResourceCounts> total_resource_counts(std::string& why) {
  const auto text = command_output("rdma -j resource show 2>&1");
  const auto list = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  if (!list.is_array()) {
    why = text ? "'rdma -j resource show' printed no JSON list: " + output_excerpt(*text)
               : "could not run 'rdma' (iproute2)";
    return std::nullopt;
  }
  ResourceCounts counts;
  for (const auto& device : list) {
    if (!device.is_object()) continue;
    for (const auto& [kind, value] : device.items()) {
      if (kind != "ifindex" && kind != "ifname" && value.is_number_integer()) {
        counts[{string_member(device, "ifname"), kind}] = value.get<long long>();
      }
    }
  }
  return counts;
}

/// This process's objects as `rdma -j resource show KIND` lists them (only those it owns:
/// kernel objects and other processes' do not count), or nullopt (with `why`) if they can not
/// be read.
inline std::optional<ResourceCounts> own_resource_counts(std::string& why) {
  std::string command = "for kind in";
  for (const char* kind : kResourceKinds) command += std::string(" ") + kind;
  command += "; do rdma -j resource show $kind || echo failed; echo; done 2>&1";
  const auto text = command_output(command);
  if (!text) {
    why = "could not run 'rdma' (iproute2)";
    return std::nullopt;
  }
  const long long self = ::getpid();
  ResourceCounts counts;
  std::istringstream lines(*text);
  std::string line;
  std::size_t kind = 0;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    const auto list = nlohmann::json::parse(line, nullptr, false);
    if (!list.is_array() || kind >= kResourceKinds.size()) {
      why = "'rdma -j resource show' printed no JSON list: " + output_excerpt(*text);
      return std::nullopt;
    }
    for (const auto& object : list) {
      if (!object.is_object()) continue;
      const auto pid = object.find("pid");
      if (pid != object.end() && pid->is_number_integer() && pid->get<long long>() == self) {
        ++counts[{string_member(object, "ifname"), kResourceKinds[kind]}];
      }
    }
    ++kind;
  }
  if (kind != kResourceKinds.size()) {
    why = "'rdma -j resource show' printed " + std::to_string(kind) + " lists, not " +
          std::to_string(kResourceKinds.size()) + ": " + output_excerpt(*text);
    return std::nullopt;
  }
  return counts;
}

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
    if (!baseline_) {
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
