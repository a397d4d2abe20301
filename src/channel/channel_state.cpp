// SPDX-License-Identifier: MIT
// ChannelState (ibv/channel/channel_state.hpp): the text of a state and of a condition.
#include "ibv/channel/channel_state.hpp"

#include <string>

namespace ibv {

std::string ChannelState::to_string() const {
  switch (condition_) {
    case Condition::usable: return "usable";
    case Condition::cancelled: return "cancelled by a timeout in " + std::string(operation_);
    case Condition::peer_gone:
      return status_ == WorkStatus::success ? "peer gone (disconnected)"
                                            : "peer gone (" + ibv::to_string(status_) + ")";
    case Condition::failed: return "failed (" + ibv::to_string(status_) + ")";
  }
  return "unknown";
}

std::string_view to_string(ChannelState::Condition condition) noexcept {
  switch (condition) {
    case ChannelState::Condition::usable: return "usable";
    case ChannelState::Condition::cancelled: return "cancelled";
    case ChannelState::Condition::peer_gone: return "peer_gone";
    case ChannelState::Condition::failed: return "failed";
  }
  return "unknown";
}

}  // namespace ibv
