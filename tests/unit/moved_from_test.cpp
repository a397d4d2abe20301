// SPDX-License-Identifier: MIT
// Tests the one error of a call on a moved-from object (detail/moved_from.hpp), and that the
// objects that give it can be moved, assigned to and destroyed without throwing.
#include "detail/moved_from.hpp"

#include <cerrno>
#include <cstdint>
#include <string>
#include <type_traits>

#include <gtest/gtest.h>

#include "ibv/collective/persistent_all_to_all.hpp"
#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/net/node.hpp"
#include "ibv/verbs/memory_region.hpp"
#include "support/error_matchers.hpp"

namespace {

using ibv_test::error_of;

// What a moved-from object still allows: destruction and assignment, neither of which throws.
template <typename T>
constexpr bool kMovesWithoutThrowing =
    std::is_nothrow_move_constructible_v<T>&& std::is_nothrow_move_assignable_v<T>&&
        std::is_nothrow_destructible_v<T> &&
    !std::is_copy_constructible_v<T>;
static_assert(kMovesWithoutThrowing<ibv::net::PersistentAllToAll>);
static_assert(kMovesWithoutThrowing<ibv::net::Node>);
static_assert(kMovesWithoutThrowing<ibv::net::PreparedNode>);
static_assert(kMovesWithoutThrowing<ibv::MemoryRegion>);

TEST(MovedFrom, TheErrorIsStateAndNamesTheCallAndTheObject) {
  const auto error = error_of([] {
    ibv::detail::throw_moved_from("PersistentAllToAll::start", "this PersistentAllToAll");
  });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ibv::ErrorKind::state);
  EXPECT_EQ(error->operation(), "PersistentAllToAll::start");
  EXPECT_EQ(error->errno_value(), EINVAL);
  const std::string what = error->what();
  EXPECT_NE(what.find("PersistentAllToAll::start failed: this PersistentAllToAll was moved from"),
            std::string::npos)
      << what;
  EXPECT_NE(what.find("destroyed or assigned to"), std::string::npos) << what;
}

TEST(MovedFrom, OnlyAMultiChannelOfNoRanksIsMovedFrom) {
  // A MultiChannel (a Node) has at least its own rank; a moved-from one has none.
  const auto error =
      error_of([] { ibv::detail::check_channels_not_moved_from(0, "MultiChannel::peers"); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ibv::ErrorKind::state);
  EXPECT_NE(std::string(error->what()).find("this MultiChannel or Node was moved from"),
            std::string::npos)
      << error->what();
  for (const std::uint32_t world : {1U, 2U, 0xffffffffU}) {
    EXPECT_FALSE(error_of([world] {
                   ibv::detail::check_channels_not_moved_from(world, "MultiChannel::peers");
                 }).has_value())
        << world;
  }
}

}  // namespace
