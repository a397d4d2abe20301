// SPDX-License-Identifier: MIT
// Tests RemoteAccess: the set operations, its text and the verbs access flags it maps to.
#include "ibv/verbs/access.hpp"

#include <infiniband/verbs.h>

#include <gtest/gtest.h>

namespace {

using ibv::RemoteAccess;

TEST(RemoteAccess, DefaultAndNoneAreEmpty) {
  constexpr RemoteAccess access;
  EXPECT_TRUE(access.empty());
  EXPECT_EQ(access, RemoteAccess::none());
  EXPECT_FALSE(access.allows_write());
  EXPECT_FALSE(access.allows_read());
  EXPECT_FALSE(access.allows_atomic());
}

TEST(RemoteAccess, EachRightAllowsOnlyItself) {
  EXPECT_TRUE(RemoteAccess::write().allows_write());
  EXPECT_FALSE(RemoteAccess::write().allows_read());
  EXPECT_FALSE(RemoteAccess::write().allows_atomic());

  EXPECT_FALSE(RemoteAccess::read().allows_write());
  EXPECT_TRUE(RemoteAccess::read().allows_read());
  EXPECT_FALSE(RemoteAccess::read().allows_atomic());

  EXPECT_FALSE(RemoteAccess::atomic().allows_write());
  EXPECT_FALSE(RemoteAccess::atomic().allows_read());
  EXPECT_TRUE(RemoteAccess::atomic().allows_atomic());

  EXPECT_FALSE(RemoteAccess::write().empty());
}

TEST(RemoteAccess, UnionCombinesRights) {
  constexpr auto write_read = RemoteAccess::write() | RemoteAccess::read();
  static_assert(write_read.allows_write() && write_read.allows_read());
  EXPECT_TRUE(write_read.allows_write());
  EXPECT_TRUE(write_read.allows_read());
  EXPECT_FALSE(write_read.allows_atomic());
  EXPECT_EQ(RemoteAccess::write() | RemoteAccess::read() | RemoteAccess::atomic(),
            RemoteAccess::all());
  EXPECT_EQ(RemoteAccess::read() | RemoteAccess::write(), write_read);
  EXPECT_EQ(RemoteAccess::read() | RemoteAccess::read(), RemoteAccess::read());
  EXPECT_EQ(RemoteAccess::read() | RemoteAccess::none(), RemoteAccess::read());
}

TEST(RemoteAccess, EqualityDistinguishesSets) {
  EXPECT_NE(RemoteAccess::write(), RemoteAccess::read());
  EXPECT_NE(RemoteAccess::all(), RemoteAccess::write() | RemoteAccess::read());
  EXPECT_NE(RemoteAccess::none(), RemoteAccess::atomic());
}

TEST(RemoteAccess, ContainsIsSubset) {
  const auto all = RemoteAccess::all();
  const auto write_read = RemoteAccess::write() | RemoteAccess::read();
  EXPECT_TRUE(all.contains(RemoteAccess::write()));
  EXPECT_TRUE(all.contains(write_read));
  EXPECT_TRUE(all.contains(all));
  EXPECT_TRUE(write_read.contains(RemoteAccess::read()));
  EXPECT_FALSE(write_read.contains(RemoteAccess::atomic()));
  EXPECT_FALSE(write_read.contains(all));
  EXPECT_FALSE(RemoteAccess::read().contains(write_read));
  // Every set contains the empty set; the empty set contains only itself.
  EXPECT_TRUE(RemoteAccess::none().contains(RemoteAccess::none()));
  EXPECT_TRUE(RemoteAccess::read().contains(RemoteAccess::none()));
  EXPECT_FALSE(RemoteAccess::none().contains(RemoteAccess::read()));
}

TEST(RemoteAccess, ToString) {
  EXPECT_EQ(RemoteAccess::none().to_string(), "none");
  EXPECT_EQ(RemoteAccess::write().to_string(), "write");
  EXPECT_EQ(RemoteAccess::read().to_string(), "read");
  EXPECT_EQ(RemoteAccess::atomic().to_string(), "atomic");
  EXPECT_EQ((RemoteAccess::read() | RemoteAccess::write()).to_string(), "write|read");
  EXPECT_EQ((RemoteAccess::atomic() | RemoteAccess::read()).to_string(), "read|atomic");
  EXPECT_EQ(RemoteAccess::all().to_string(), "write|read|atomic");
}

TEST(RemoteAccess, NativeAlwaysIncludesLocalWrite) {
  for (const auto access :
       {RemoteAccess::none(), RemoteAccess::write(), RemoteAccess::read(), RemoteAccess::atomic(),
        RemoteAccess::write() | RemoteAccess::read(), RemoteAccess::all()}) {
    EXPECT_NE(access.native_with_local_write() & IBV_ACCESS_LOCAL_WRITE, 0) << access.to_string();
  }
}

TEST(RemoteAccess, NativeMapsEachRightToItsFlag) {
  EXPECT_EQ(RemoteAccess::none().native_with_local_write(), IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(RemoteAccess::write().native_with_local_write(),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  EXPECT_EQ(RemoteAccess::read().native_with_local_write(),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
  EXPECT_EQ(RemoteAccess::atomic().native_with_local_write(),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
  EXPECT_EQ(RemoteAccess::all().native_with_local_write(),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                IBV_ACCESS_REMOTE_ATOMIC);
}

}  // namespace
