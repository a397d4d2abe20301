// SPDX-License-Identifier: MIT
// Tests ibv::Error (message composition, error code, kind, copying), throw_invalid_argument and
// throw_verb_error (errno classification and the per-verb hints).
#include "ibv/error.hpp"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <gtest/gtest.h>

#include "support/error_matchers.hpp"
#include "support/text.hpp"

namespace {

using ibv_test::contains;

using ibv_test::error_of;
using ibv_test::throws_error;

// The locked-memory limit as the memlock hint prints it.
std::string memlock_text(const rlimit& limit) {
  return limit.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                         : std::to_string(limit.rlim_cur / 1024) + " KiB";
}

// --- Error -----------------------------------------------------------------------------------

TEST(Error, WhatIsOneSentenceWithOperationDetailErrnoAndHint) {
  const ibv::Error error(ibv::ErrorKind::resource, "ibv_reg_mr", ENOMEM, "64 KiB at 0x1000",
                         "raise the limit");
  const std::string expected = std::string("ibv_reg_mr failed: 64 KiB at 0x1000 (") +
                               std::strerror(ENOMEM) + ", errno 12). Hint: raise the limit";
  EXPECT_EQ(std::string(error.what()), expected);
}

TEST(Error, WhatMentionsEachPart) {
  const ibv::Error error(ibv::ErrorKind::permission, "ibv_open_device", EACCES, "mlx5_0",
                         "join the rdma group");
  const std::string what = error.what();
  EXPECT_TRUE(contains(what, "ibv_open_device")) << what;
  EXPECT_TRUE(contains(what, "mlx5_0")) << what;
  EXPECT_TRUE(contains(what, std::strerror(EACCES))) << what;
  EXPECT_TRUE(contains(what, "errno " + std::to_string(EACCES))) << what;
  EXPECT_TRUE(contains(what, "Hint: join the rdma group")) << what;
}

TEST(Error, NoHintPartWithoutAHint) {
  const ibv::Error error(ibv::ErrorKind::driver, "ibv_poll_cq", EIO, "the CQ is broken");
  const std::string what = error.what();
  EXPECT_FALSE(contains(what, "Hint")) << what;
  EXPECT_TRUE(error.hint().empty());
  EXPECT_TRUE(contains(what, "ibv_poll_cq failed: the CQ is broken")) << what;
  EXPECT_TRUE(contains(what, "errno 5")) << what;
}

TEST(Error, NoErrnoPartForErrnoZeroAndNoDetailSeparatorWithoutDetail) {
  EXPECT_EQ(std::string(ibv::Error(ibv::ErrorKind::state, "op", 0, "detail").what()),
            "op failed: detail");
  const std::string without_detail = ibv::Error(ibv::ErrorKind::driver, "op", EIO, "").what();
  EXPECT_EQ(without_detail, std::string("op failed (") + std::strerror(EIO) + ", errno 5)");
}

TEST(Error, CodeIsTheErrnoInTheGenericCategory) {
  const ibv::Error error(ibv::ErrorKind::timeout, "wait", ETIMEDOUT, "no event");
  EXPECT_EQ(error.code().category(), std::generic_category());
  EXPECT_EQ(error.code().value(), ETIMEDOUT);
  EXPECT_EQ(error.errno_value(), ETIMEDOUT);
  EXPECT_EQ(error.code(), std::errc::timed_out);
}

TEST(Error, KeepsKindOperationAndHint) {
  const ibv::Error error(ibv::ErrorKind::not_found, "open_device", ENODEV, "no rxe9", "list them");
  EXPECT_EQ(error.kind(), ibv::ErrorKind::not_found);
  EXPECT_EQ(error.operation(), "open_device");
  EXPECT_EQ(error.hint(), "list them");
}

TEST(Error, IsCatchableAsSystemErrorWithTheSameMessage) {
  std::string expected;
  try {
    throw ibv::Error(ibv::ErrorKind::resource, "ibv_create_cq", ENOMEM, "1024 entries", "hint");
  } catch (const std::system_error& error) {
    expected = ibv::Error(ibv::ErrorKind::resource, "ibv_create_cq", ENOMEM, "1024 entries", "hint")
                   .what();
    EXPECT_EQ(std::string(error.what()), expected);
    EXPECT_EQ(error.code().value(), ENOMEM);
  }
  EXPECT_FALSE(expected.empty()) << "not caught as std::system_error";
}

TEST(Error, IsCatchableAsStdException) {
  bool caught = false;
  try {
    throw ibv::Error(ibv::ErrorKind::driver, "op", EIO, "detail");
  } catch (const std::exception& error) {
    caught = true;
    EXPECT_TRUE(contains(error.what(), "op failed: detail")) << error.what();
  }
  EXPECT_TRUE(caught);
}

TEST(Error, CopiesKeepTheMessage) {
  const ibv::Error original(ibv::ErrorKind::resource, "ibv_reg_mr", ENOMEM, "detail", "hint");
  const ibv::Error copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_STREQ(copy.what(), original.what());
  EXPECT_EQ(copy.kind(), original.kind());
  EXPECT_EQ(copy.code(), original.code());
  EXPECT_EQ(copy.hint(), original.hint());

  ibv::Error assigned(ibv::ErrorKind::driver, "other", EIO, "other detail");
  assigned = original;
  EXPECT_STREQ(assigned.what(), original.what());
  EXPECT_EQ(assigned.operation(), "ibv_reg_mr");
}

TEST(Error, MessageOutlivesTheOriginal) {
  std::string expected;
  std::optional<ibv::Error> copy;
  {
    const ibv::Error original(ibv::ErrorKind::state, "op", EINVAL, "temporary detail");
    expected = original.what();
    copy = original;
  }
  EXPECT_EQ(std::string(copy->what()), expected);
}

// --- to_string(ErrorKind) --------------------------------------------------------------------

TEST(ErrorKind, NamesAreTheEnumeratorNames) {
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::invalid_argument), "invalid_argument");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::not_found), "not_found");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::resource), "resource");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::permission), "permission");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::unsupported), "unsupported");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::driver), "driver");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::timeout), "timeout");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::state), "state");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::protocol), "protocol");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::connection), "connection");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::receiver_not_ready), "receiver_not_ready");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::peer_gone), "peer_gone");
  EXPECT_EQ(ibv::to_string(ibv::ErrorKind::revoked), "revoked");
}

// A vanished peer is one kind, peer_gone, distinct from connection (could not connect at all).
TEST(ErrorKind, PeerGoneIsItsOwnKindAndTheKindOfAnUnacknowledgedRequest) {
  EXPECT_NE(ibv::ErrorKind::peer_gone, ibv::ErrorKind::connection);
  EXPECT_EQ(ibv::kind_of(ibv::WorkStatus::retry_exceeded), ibv::ErrorKind::peer_gone);
  EXPECT_EQ(ibv::kind_of(ibv::WorkStatus::response_timeout), ibv::ErrorKind::peer_gone);
  EXPECT_EQ(ibv::kind_of(ibv::WorkStatus::rnr_retry_exceeded), ibv::ErrorKind::receiver_not_ready);
  EXPECT_EQ(ibv::kind_of(ibv::WorkStatus::remote_access_error), ibv::ErrorKind::permission);
  EXPECT_EQ(ibv::kind_of(ibv::WorkStatus::work_request_flushed), ibv::ErrorKind::state);
}

// Only the timeout that cancelled a channel says so; other errors, timeouts included, do not.
TEST(Error, ChannelCancelledIsTrueOnlyForTheTimeoutThatCancelledAChannel) {
  const ibv::Error cancelled =
      ibv::Error::cancelled_channel("Channel::execute", "receive wr_id 3 did not complete", "h");
  EXPECT_TRUE(cancelled.channel_cancelled());
  EXPECT_EQ(cancelled.kind(), ibv::ErrorKind::timeout);
  EXPECT_EQ(cancelled.errno_value(), ETIMEDOUT);
  EXPECT_EQ(cancelled.operation(), "Channel::execute");
  EXPECT_EQ(cancelled.hint(), "h");
  const ibv::Error copy = cancelled;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(copy.channel_cancelled());

  const ibv::Error timeout(ibv::ErrorKind::timeout, "PendingWork::wait", ETIMEDOUT,
                           "still pending");
  EXPECT_FALSE(timeout.channel_cancelled());
  EXPECT_FALSE(ibv::Error(ibv::ErrorKind::driver, "op", EIO, "x").channel_cancelled());
}

TEST(ErrorKind, ProtocolAndConnectionErrorsKeepTheirKindAndErrno) {
  const ibv::Error protocol(ibv::ErrorKind::protocol, "Exchanger::exchange", EPROTO,
                            "rank 2 sent a message with magic 0x47455420");
  EXPECT_EQ(protocol.kind(), ibv::ErrorKind::protocol);
  EXPECT_EQ(protocol.errno_value(), EPROTO);
  EXPECT_TRUE(contains(protocol.what(), "Exchanger::exchange failed: rank 2 sent"))
      << protocol.what();

  const ibv::Error connection(ibv::ErrorKind::connection, "Exchanger::exchange", ECONNRESET,
                              "rank 1 closed the connection");
  EXPECT_EQ(connection.kind(), ibv::ErrorKind::connection);
  EXPECT_EQ(connection.code(), std::errc::connection_reset);
  EXPECT_TRUE(contains(connection.what(), "rank 1 closed the connection")) << connection.what();
}

// --- throw_invalid_argument ------------------------------------------------------------------

TEST(ThrowInvalidArgument, NamesOperationArgumentAndProblem) {
  const auto error = error_of([] {
    ibv::throw_invalid_argument("QueuePairBuilder::max_send_sge", "max_send_sge 40",
                                "exceeds the device's max_sge of 30");
  });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ibv::ErrorKind::invalid_argument);
  EXPECT_EQ(error->errno_value(), EINVAL);
  EXPECT_EQ(error->operation(), "QueuePairBuilder::max_send_sge");
  const std::string what = error->what();
  EXPECT_TRUE(contains(what,
                       "QueuePairBuilder::max_send_sge failed: max_send_sge 40 exceeds the "
                       "device's max_sge of 30"))
      << what;
}

// --- throw_verb_error ------------------------------------------------------------------------

TEST(ThrowVerbError, ClassifiesByErrno) {
  struct Case {
    int errno_value;
    ibv::ErrorKind kind;
  };
  for (const auto& c : {
           Case{EINVAL, ibv::ErrorKind::invalid_argument},
           Case{ERANGE, ibv::ErrorKind::invalid_argument},
           Case{ENOENT, ibv::ErrorKind::not_found},
           Case{ENODEV, ibv::ErrorKind::not_found},
           Case{ENXIO, ibv::ErrorKind::not_found},
           Case{ENODATA, ibv::ErrorKind::not_found},
           Case{ENOMEM, ibv::ErrorKind::resource},
           Case{ENOSPC, ibv::ErrorKind::resource},
           Case{EAGAIN, ibv::ErrorKind::resource},
           Case{EMFILE, ibv::ErrorKind::resource},
           Case{ENFILE, ibv::ErrorKind::resource},
           Case{EPERM, ibv::ErrorKind::permission},
           Case{EACCES, ibv::ErrorKind::permission},
           Case{EOPNOTSUPP, ibv::ErrorKind::unsupported},
           Case{ENOSYS, ibv::ErrorKind::unsupported},
           Case{EPROTONOSUPPORT, ibv::ErrorKind::unsupported},
           Case{ETIMEDOUT, ibv::ErrorKind::timeout},
           Case{EIO, ibv::ErrorKind::driver},
           Case{EFAULT, ibv::ErrorKind::driver},
           Case{EBUSY, ibv::ErrorKind::driver},
       }) {
    const auto error = error_of([&c] { ibv::throw_verb_error("ibv_some_verb", c.errno_value); });
    ASSERT_TRUE(error.has_value()) << c.errno_value;
    EXPECT_EQ(error->kind(), c.kind) << "errno " << c.errno_value << ": " << error->what();
    EXPECT_EQ(error->errno_value(), c.errno_value);
    EXPECT_EQ(error->operation(), "ibv_some_verb");
  }
}

TEST(ThrowVerbError, IncludesTheDetail) {
  EXPECT_TRUE(throws_error(ibv::ErrorKind::driver,
                           [] { ibv::throw_verb_error("ibv_modify_qp", EIO, "INIT -> RTR"); },
                           {"ibv_modify_qp failed: INIT -> RTR", "errno 5"}));
}

TEST(ThrowVerbError, UnknownVerbAndErrnoHasNoHint) {
  const auto error = error_of([] { ibv::throw_verb_error("ibv_some_verb", EIO, "detail"); });
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(error->hint().empty());
  EXPECT_FALSE(contains(error->what(), "Hint")) << error->what();
}

TEST(ThrowVerbError, RegisterMemoryOutOfMemoryPointsToTheLockedMemoryLimit) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &limit), 0);
  for (const char* verb : {"ibv_reg_mr", "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr"}) {
    for (const int errno_value : {ENOMEM, EAGAIN}) {
      const auto error = error_of([&] { ibv::throw_verb_error(verb, errno_value, "4 GiB"); });
      ASSERT_TRUE(error.has_value());
      EXPECT_EQ(error->kind(), ibv::ErrorKind::resource);
      const std::string what = error->what();
      EXPECT_TRUE(contains(what, "Hint:")) << what;
      EXPECT_TRUE(contains(error->hint(), "ulimit -l")) << what;
      EXPECT_TRUE(contains(error->hint(), "now " + memlock_text(limit))) << what;
    }
  }
}

TEST(ThrowVerbError, MemlockHintReportsTheLimitInForce) {
  rlimit original{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &original), 0);
  if (original.rlim_max != RLIM_INFINITY && original.rlim_max < rlim_t{64} * 1024) {
    GTEST_SKIP() << "hard memlock limit below 64 KiB";
  }
  rlimit lowered = original;
  lowered.rlim_cur = rlim_t{64} * 1024;  // lowering the soft limit needs no privilege
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &lowered), 0);
  const auto error = error_of([] { ibv::throw_verb_error("ibv_reg_mr", ENOMEM); });
  ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &original), 0);
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(contains(error->hint(), "now 64 KiB")) << error->what();
}

TEST(ThrowVerbError, CreateCqOutOfMemoryPointsToTheLockedMemoryLimit) {
  EXPECT_TRUE(throws_error(ibv::ErrorKind::resource,
                           [] { ibv::throw_verb_error("ibv_create_cq", ENOMEM); },
                           {"Hint:", "ulimit -l"}));
}

TEST(ThrowVerbError, RegisterMemoryOtherHints) {
  EXPECT_TRUE(throws_error(ibv::ErrorKind::driver,
                           [] { ibv::throw_verb_error("ibv_reg_mr", EFAULT); },
                           {"Hint:", "not mapped"}));
  EXPECT_TRUE(throws_error(ibv::ErrorKind::unsupported,
                           [] { ibv::throw_verb_error("ibv_reg_dmabuf_mr", EOPNOTSUPP); },
                           {"Hint:", "cannot register"}));
}

TEST(ThrowVerbError, PostSendOutOfMemoryPointsToMaxSendWr) {
  EXPECT_TRUE(throws_error(ibv::ErrorKind::resource,
                           [] { ibv::throw_verb_error("ibv_post_send", ENOMEM); },
                           {"Hint:", "max_send_wr"}));
  // Not the memlock hint: a full send queue has nothing to do with pinned memory.
  const auto error = error_of([] { ibv::throw_verb_error("ibv_post_send", ENOMEM); });
  ASSERT_TRUE(error.has_value());
  EXPECT_FALSE(contains(error->hint(), "ulimit")) << error->what();
}

TEST(ThrowVerbError, PostRecvOutOfMemoryPointsToMaxRecvWr) {
  EXPECT_TRUE(throws_error(ibv::ErrorKind::resource,
                           [] { ibv::throw_verb_error("ibv_post_recv", ENOMEM); },
                           {"Hint:", "max_recv_wr"}));
}

TEST(ThrowVerbError, PostWithEinvalPointsToTheQpState) {
  for (const char* verb : {"ibv_post_send", "ibv_post_recv"}) {
    EXPECT_TRUE(throws_error(ibv::ErrorKind::invalid_argument,
                             [verb] { ibv::throw_verb_error(verb, EINVAL); }, {"Hint:", "ERR"}))
        << verb;
  }
}

TEST(ThrowVerbError, CreateQpHintsAtQueueLimits) {
  for (const int errno_value : {ENOMEM, EINVAL}) {
    const auto error =
        error_of([errno_value] { ibv::throw_verb_error("ibv_create_qp", errno_value); });
    ASSERT_TRUE(error.has_value());
    EXPECT_TRUE(contains(error->hint(), "queue depth")) << error->what();
  }
}

TEST(ThrowVerbError, OpenDevicePermissionPointsToUverbs) {
  for (const int errno_value : {EACCES, EPERM}) {
    EXPECT_TRUE(
        throws_error(ibv::ErrorKind::permission,
                     [errno_value] { ibv::throw_verb_error("ibv_open_device", errno_value); },
                     {"Hint:", "/dev/infiniband/uverbs"}))
        << errno_value;
  }
}

TEST(ThrowVerbError, HintsAreSpecificToTheVerb) {
  // ENOMEM on a verb without a hint of its own gets none (not the memlock hint).
  const auto error = error_of([] { ibv::throw_verb_error("ibv_alloc_pd", ENOMEM); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->kind(), ibv::ErrorKind::resource);
  EXPECT_TRUE(error->hint().empty()) << error->what();
}

}  // namespace
