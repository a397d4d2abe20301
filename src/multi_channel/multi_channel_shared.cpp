// SPDX-License-Identifier: MIT
// MultiChannel's receives from a shared receive queue: the next message from any peer, the
// peers visited in turn.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "channel/wait_loop.hpp"
#include "detail/moved_from.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "ibv/multi_channel/multi_channel.hpp"

namespace ibv {
namespace {

void check_timeout(const MultiChannel::Timeout& timeout, std::string_view operation) {
  detail::check_positive_timeout(timeout, detail::QualifiedName{"MultiChannel::", operation});
}

[[noreturn]] void throw_timeout(std::string_view operation, Duration limit) {
  throw Error(ErrorKind::timeout, "MultiChannel::" + std::string(operation), ETIMEDOUT,
              "no message arrived from any peer within " + detail::duration_text(limit),
              "are the peers sending, and (on a plain shared receive queue) are receives posted?");
}

/// Calls `poll` until it gives a value or `limit` has passed, by the peers' WaitMode (every
/// peer's channel has the same): wait_by_mode over every peer's completion queue, which share
/// one completion channel. nullopt when the time is up.
template <typename Poll>
auto wait_for_any(std::vector<std::optional<Channel>>& channels, Duration limit, Poll&& poll)
    -> decltype(poll()) {
  const Channel* first = nullptr;
  for (const auto& channel : channels) {
    if (channel) {
      first = &*channel;
      break;
    }
  }
  decltype(poll()) value;
  detail::wait_by_mode(
      first != nullptr ? first->wait_mode() : WaitMode::spin(),
      std::chrono::steady_clock::now() + limit,
      [&] {
        value = poll();
        return value.has_value();
      },
      [&] {
        for (auto& channel : channels) {
          if (channel) channel->arm_completion_fd();
        }
      },
      [&](std::chrono::steady_clock::duration left) {
        (void)first->completion_channel()->wait_and_consume(left);
      },
      [](std::chrono::steady_clock::time_point) {});
  return value;
}
}  // namespace

std::optional<PeerCompletion> MultiChannel::poll_shared_any() {
  const auto world = world_size();
  detail::check_channels_not_moved_from(world, "MultiChannel::poll_shared_any");
  for (std::uint32_t step = 0; step < world; ++step) {
    const std::uint32_t peer = (next_shared_ + step) % world;
    if (!channels_[peer]) continue;
    if (auto completion = channels_[peer]->poll_shared()) {
      next_shared_ = (peer + 1) % world;
      return PeerCompletion{peer, *completion};
    }
  }
  return std::nullopt;
}

std::optional<PeerMessage> MultiChannel::poll_message_any() {
  const auto world = world_size();
  detail::check_channels_not_moved_from(world, "MultiChannel::poll_message_any");
  for (std::uint32_t step = 0; step < world; ++step) {
    const std::uint32_t peer = (next_shared_ + step) % world;
    if (!channels_[peer]) continue;
    std::optional<ReceivedMessage> message;
    try {
      message = channels_[peer]->poll_message();
    } catch (const WorkError& error) {
      next_shared_ = (peer + 1) % world;
      throw WorkError(error.completion(), "MultiChannel, message from peer " +
                                              std::to_string(peer) + ": " + error.operation());
    }
    if (message) {
      next_shared_ = (peer + 1) % world;
      return PeerMessage{peer, std::move(*message)};
    }
  }
  return std::nullopt;
}

PeerCompletion MultiChannel::receive_shared_any(Timeout timeout) {
  detail::check_channels_not_moved_from(world_size(), "MultiChannel::receive_shared_any");
  check_timeout(timeout, "receive_shared_any");
  const auto limit = timeout.value_or(timeouts_.operation);
  auto received = wait_for_any(channels_, limit, [&] { return poll_shared_any(); });
  if (!received) throw_timeout("receive_shared_any", limit);
  if (!received->completion.ok()) {
    throw WorkError(received->completion, "MultiChannel::receive_shared_any (peer " +
                                              std::to_string(received->peer) + ")");
  }
  return *received;
}

PeerMessage MultiChannel::receive_message_any(Timeout timeout) {
  detail::check_channels_not_moved_from(world_size(), "MultiChannel::receive_message_any");
  check_timeout(timeout, "receive_message_any");
  const auto limit = timeout.value_or(timeouts_.operation);
  auto received = wait_for_any(channels_, limit, [&] { return poll_message_any(); });
  if (!received) throw_timeout("receive_message_any", limit);
  return std::move(*received);
}

}  // namespace ibv
