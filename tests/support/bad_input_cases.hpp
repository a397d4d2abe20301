// SPDX-License-Identifier: MIT
// Test helper for the bad-input sweep (tests/unit/bad_input_test.cpp and
// tests/device/bad_input_test.cpp): a table of (entry point, argument, value) cases, each either
// the last valid value (must be accepted) or an invalid one (must throw ibv::Error of a kind whose
// message names the argument), run one by one under SCOPED_TRACE so every failing case is
// reported by name.
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/error.hpp"
#include "support/error_matchers.hpp"

namespace ibv_test {

/// One (entry point, argument, value) case of the sweep.
struct BadInputCase {
  std::string entry;     ///< "QueuePairBuilder::build", "Psn", ...
  std::string argument;  ///< "gid_index", "timeout", ...
  std::string value;     ///< the value tried, as text ("0", "max + 1", "-1 ms")
  std::function<void()> action;
  /// Empty: the value is valid and must be accepted. Otherwise the words the error message
  /// must contain (the argument's name first, as the library spells it).
  std::vector<std::string> mentions;
  ibv::ErrorKind kind = ibv::ErrorKind::invalid_argument;
};

/// A case that must be rejected with `kind` and a message containing every word of `mentions`.
inline BadInputCase rejects(std::string entry, std::string argument, std::string value,
                            std::function<void()> action, std::vector<std::string> mentions,
                            ibv::ErrorKind kind = ibv::ErrorKind::invalid_argument) {
  return {std::move(entry),  std::move(argument), std::move(value),
          std::move(action), std::move(mentions), kind};
}

/// A case with a valid (boundary) value that must be accepted.
inline BadInputCase accepts(std::string entry, std::string argument, std::string value,
                            std::function<void()> action) {
  return {std::move(entry), std::move(argument), std::move(value), std::move(action), {}};
}

/// Runs every case under SCOPED_TRACE, printing the message of each rejected one; prints and
/// returns how many were run (the README quotes the sum of these lines).
inline std::size_t run_cases(const std::vector<BadInputCase>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE(c.entry + " " + c.argument + " = " + c.value);
    std::optional<ibv::Error> error;
    try {
      error = error_of(c.action);
    } catch (const std::exception& other) {
      ADD_FAILURE() << "threw a non-ibv::Error exception: " << other.what();
      continue;
    }
    if (c.mentions.empty()) {
      EXPECT_FALSE(error.has_value()) << "a valid value was rejected: " << error->what();
      continue;
    }
    if (!error) {
      ADD_FAILURE() << "accepted";
      continue;
    }
    EXPECT_EQ(error->kind(), c.kind) << ibv::to_string(error->kind()) << ": " << error->what();
    const std::string what = error->what();
    // The message itself, so a log shows what a user would read for each case.
    std::printf("[ rejected ] %s %s = %s: %s\n", c.entry.c_str(), c.argument.c_str(),
                c.value.c_str(), what.c_str());
    for (const auto& mention : c.mentions) {
      EXPECT_NE(what.find(mention), std::string::npos)
          << "the message does not mention \"" << mention << "\": " << what;
    }
  }
  std::printf("[ cases    ] %zu (entry point, argument, value) cases\n", cases.size());
  ::testing::Test::RecordProperty("cases", static_cast<int>(cases.size()));
  return cases.size();
}

}  // namespace ibv_test
