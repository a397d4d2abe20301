// SPDX-License-Identifier: MIT
// Test helper: checks that an action throws ibv::Error of a given kind whose message mentions
// given words.
#pragma once

#include <exception>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "ibv/error.hpp"

namespace ibv_test {

/// Runs `action` and returns the ibv::Error it threw, or nullopt when it threw nothing. Any
/// other exception propagates (and fails the test).
template <typename Action>
std::optional<ibv::Error> error_of(Action&& action) {
  try {
    std::forward<Action>(action)();
  } catch (const ibv::Error& error) {
    return error;
  }
  return std::nullopt;
}

/// Success when `action` throws an ibv::Error of `kind` whose what() contains every string of
/// `mentions`; otherwise a failure that says what happened instead.
template <typename Action>
::testing::AssertionResult throws_error(ibv::ErrorKind kind, Action&& action,
                                        std::initializer_list<std::string_view> mentions = {}) {
  std::optional<ibv::Error> error;
  try {
    error = error_of(std::forward<Action>(action));
  } catch (const std::exception& other) {
    return ::testing::AssertionFailure() << "threw a non-ibv::Error exception: " << other.what();
  }
  if (!error) return ::testing::AssertionFailure() << "threw nothing";
  if (error->kind() != kind) {
    return ::testing::AssertionFailure()
           << "threw kind " << ibv::to_string(error->kind()) << " instead of "
           << ibv::to_string(kind) << ": " << error->what();
  }
  const std::string what = error->what();
  for (const auto mention : mentions) {
    if (what.find(mention) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message does not mention \"" << mention << "\": " << what;
    }
  }
  return ::testing::AssertionSuccess() << what;
}

/// throws_error() for the most common kind.
template <typename Action>
::testing::AssertionResult throws_invalid_argument(
    Action&& action, std::initializer_list<std::string_view> mentions = {}) {
  return throws_error(ibv::ErrorKind::invalid_argument, std::forward<Action>(action), mentions);
}

}  // namespace ibv_test
