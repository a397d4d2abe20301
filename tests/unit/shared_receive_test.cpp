// SPDX-License-Identifier: MIT
// Tests the device-free parts of shared receives: async event names and descriptions, and an
// empty ReceivedMessage (what a moved-from or released message is).
#include <infiniband/verbs.h>

#include <set>
#include <string>
#include <utility>

#include <gtest/gtest.h>

#include "ibv/channel/received_message.hpp"
#include "ibv/verbs/async_event.hpp"

namespace {

TEST(AsyncEventType, NamesAreThoseOfVerbs) {
  std::set<std::string> names;
  for (int value = IBV_EVENT_CQ_ERR; value <= IBV_EVENT_WQ_FATAL; ++value) {
    const auto type = static_cast<ibv::AsyncEventType>(value);
    const std::string name(ibv::to_string(type));
    EXPECT_EQ(name, ibv_event_type_str(static_cast<ibv_event_type>(value)));
    EXPECT_NE(name, "unknown") << value;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), std::size_t{IBV_EVENT_WQ_FATAL} + 1) << "every name distinct";
  EXPECT_EQ(ibv::to_string(ibv::AsyncEventType::srq_limit_reached), "SRQ limit reached");
  EXPECT_EQ(static_cast<int>(ibv::AsyncEventType::qp_last_wqe_reached),
            IBV_EVENT_QP_LAST_WQE_REACHED);
}

TEST(AsyncEvent, DescribesWhatItConcerns) {
  ibv::AsyncEvent port_event;
  port_event.type = ibv::AsyncEventType::port_error;
  port_event.port = 1;
  EXPECT_EQ(port_event.to_string(), "port error (port 1)");

  ibv::AsyncEvent srq_event;
  srq_event.type = ibv::AsyncEventType::srq_limit_reached;
  const ibv_srq queue{};
  srq_event.srq = &queue;  // identity only
  EXPECT_EQ(srq_event.to_string(), "SRQ limit reached (SRQ)");
}

TEST(ReceivedMessage, AnEmptyMessageHoldsNothingAndReleasesNothing) {
  ibv::ReceivedMessage message;
  EXPECT_FALSE(message.holds_buffer());
  EXPECT_TRUE(message.data().empty());
  message.release();  // no pool: nothing to post
  ibv::ReceivedMessage moved(std::move(message));
  EXPECT_FALSE(moved.holds_buffer());
  ibv::ReceivedMessage assigned;
  assigned = std::move(moved);
  EXPECT_FALSE(assigned.holds_buffer());
  EXPECT_TRUE(assigned.data().empty());
}

}  // namespace
