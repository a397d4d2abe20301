// SPDX-License-Identifier: MIT
// The checks of MultiChannel's peer-addressed calls that are not inline: a post_all element
// checked before anything is posted, and the errors of a foreign region and of a rank listed
// twice.
#include <string>

#include "channel/channel_core.hpp"
#include "detail/moved_from.hpp"
#include "ibv/error.hpp"
#include "ibv/multi_channel/multi_channel.hpp"

namespace ibv {
namespace {

/// Why a region of `owner` can not be used for `peer` ("belongs to peer 2, not to peer 3 ...").
std::string foreign_region_problem(std::uint32_t peer, std::uint32_t owner) {
  return "belongs to peer " + std::to_string(owner) + ", not to peer " + std::to_string(peer) +
         " (its rkey and addresses mean nothing on peer " + std::to_string(peer) + "'s device)";
}

std::string element(std::size_t index) { return "operations[" + std::to_string(index) + "]"; }

/// Throws unless `peer` has a channel in `channels` and `owner`, if any, is `peer`.
void check_peer(const MultiChannel& channels, const char* call, std::size_t index,
                std::uint32_t peer, std::optional<std::uint32_t> owner) {
  ibv::detail::check_channels_not_moved_from(channels.world_size(), call);
  const std::string where = element(index) + ".peer " + std::to_string(peer);
  if (peer == channels.rank()) {
    throw_invalid_argument(call, where,
                           "is this rank itself: a MultiChannel has no channel to its own rank; "
                           "nothing was posted");
  }
  if (peer >= channels.world_size()) {
    throw_invalid_argument(call, where,
                           "is not a rank: the world size is " +
                               std::to_string(channels.world_size()) + " (ranks 0.." +
                               std::to_string(channels.world_size() - 1) + "); nothing was posted");
  }
  if (owner && *owner != peer) {
    throw_invalid_argument(call, element(index) + ".operation's remote region",
                           foreign_region_problem(peer, *owner) + "; nothing was posted");
  }
}

/// Runs the queue pair's own checks of `request` (QueuePair::check), naming the element.
template <typename Request>
void check_request(MultiChannel& channels, const char* call, std::size_t index, std::uint32_t peer,
                   const Request& request) {
  try {
    channels.channel(peer).queue_pair().check(request);
  } catch (const Error& error) {
    throw_invalid_argument(call, element(index),
                           "(to peer " + std::to_string(peer) + ") does not fit its queue pair: " +
                               error.what() + "; nothing was posted");
  }
}

}  // namespace

void op::detail::throw_foreign_region(const char* call, std::uint32_t peer, std::uint32_t owner) {
  throw_invalid_argument(call,
                         "the remote region of the operation for peer " + std::to_string(peer),
                         foreign_region_problem(peer, owner) + "; nothing was posted");
}

void op::detail::throw_listed_twice(std::span<const std::uint32_t> peers, std::uint32_t peer) {
  throw_invalid_argument("ibv::op::to_each", "peer " + std::to_string(peer),
                         "is listed twice among the " + std::to_string(peers.size()) +
                             " peers (to_each addresses each peer once)");
}

void detail::check_addressed(MultiChannel& channels, const char* call, std::size_t index,
                             std::uint32_t peer, std::optional<std::uint32_t> owner,
                             SendRequest request, PostOptions options) {
  check_peer(channels, call, index, peer, owner);
  apply_inline(request, options.inline_data, channels.channel(peer).queue_pair().max_inline_data());
  check_request(channels, call, index, peer, request);
}

void detail::check_addressed(MultiChannel& channels, const char* call, std::size_t index,
                             std::uint32_t peer, const ReceiveRequest& request) {
  check_peer(channels, call, index, peer, std::nullopt);
  check_request(channels, call, index, peer, request);
}

}  // namespace ibv
