// SPDX-License-Identifier: MIT
// The invariants a fuzz target asserts beyond "no crash": a violated one throws
// InvariantViolation, which is not an ibv::Error, so it escapes the target. Under libFuzzer an
// escaping exception aborts (a crash, with the input saved); in the unit test that replays the
// corpus it is a test failure naming the input.
#pragma once

#include <stdexcept>
#include <string>

namespace ibv_fuzz {

/// A fuzz target found the library breaking one of its documented promises.
class InvariantViolation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Throws InvariantViolation("invariant broken: " + what) unless `condition` holds.
inline void check(bool condition, const std::string& what) {
  if (!condition) throw InvariantViolation("invariant broken: " + what);
}

}  // namespace ibv_fuzz
