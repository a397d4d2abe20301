// SPDX-License-Identifier: MIT
// PeerCompletion and PeerMessage: a receive from a MultiChannel's shared receive queue, with
// the peer whose message it took.
#pragma once

#include <cstdint>

#include "ibv/channel/received_message.hpp"
#include "ibv/verbs/work_completion.hpp"

namespace ibv {

/// A shared receive's completion (MultiChannel::receive_shared_any) and the rank of the peer
/// whose message consumed it.
struct PeerCompletion {
  /// The rank of the peer whose message consumed the receive.
  std::uint32_t peer = 0;
  /// The receive's completion (its wr_id is the shared receive's).
  WorkCompletion completion;
};

/// A message in a SharedReceivePool buffer (MultiChannel::receive_message_any) and the rank of
/// the peer that sent it. Releasing `message` posts its buffer back to the pool.
struct PeerMessage {
  /// The rank of the peer that sent it.
  std::uint32_t peer = 0;
  /// The message in its pool buffer.
  ReceivedMessage message;
};

}  // namespace ibv
