// SPDX-License-Identifier: MIT
// MultiChannelScope and MultiManualScope: peer-addressed posting kept until the scope ends.
#include "ibv/multi_channel/multi_channel_scope.hpp"

#include <cstdio>
#include <utility>

#include "ibv/multi_channel/multi_channel.hpp"

namespace ibv {
namespace detail {

ChannelCore& MultiScopeBase::peer_core(std::uint32_t peer) {
  return *channels_.channel(peer).core_;
}

PendingWork& MultiScopeBase::keep(std::uint32_t peer, PendingWork work) {
  return work_.keep(std::move(work), peer);
}

}  // namespace detail

void MultiManualScope::close() {
  if (closed_) return;
  closed_ = true;
  work_.close("MultiManualScope::close");
}

MultiManualScope::~MultiManualScope() {
  if (closed_) return;
  closed_ = true;
  work_.abandon("MultiManualScope");
}

}  // namespace ibv
