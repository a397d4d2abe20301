// MultiChannel's receives from a shared receive queue: the next message from any peer, the
// peers visited in turn.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/verbs/error.hpp"

namespace ibv {
namespace {

constexpr unsigned kPollsPerClockRead = 32;

std::string milliseconds(std::chrono::nanoseconds duration) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(duration).count()) +
         " ms";
}

void check_timeout(const MultiChannel::Timeout& timeout, std::string_view operation) {
  if (timeout && timeout->count() <= 0) {
    throw_invalid_argument("MultiChannel::" + std::string(operation),
                           "timeout " + std::to_string(timeout->count()) + " ns",
                           "is not positive");
  }
}

[[noreturn]] void throw_timeout(std::string_view operation, std::chrono::nanoseconds limit) {
  throw Error(ErrorKind::timeout, "MultiChannel::" + std::string(operation), ETIMEDOUT,
              "no message arrived from any peer within " + milliseconds(limit),
              "are the peers sending, and (on a plain shared receive queue) are receives posted?");
}

/// Calls `poll` until it gives a value or `limit` has passed, by the peers' WaitMode (every
/// peer's channel has the same): spinning, or, in a mode that sleeps (after its spin), arming
/// every peer's completion queue, polling again, then sleeping on the completion channel they
/// share. nullopt when the time is up.
template <typename Poll>
auto wait_for_any(std::vector<std::optional<Channel>>& channels, std::chrono::nanoseconds limit,
                  Poll&& poll) -> decltype(poll()) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + limit;
  const Channel* first = nullptr;
  for (const auto& channel : channels) {
    if (channel) {
      first = &*channel;
      break;
    }
  }
  const WaitMode mode = first != nullptr ? first->wait_mode() : WaitMode::spin();
  const auto spin_end = mode.strategy == WaitStrategy::spin_then_block
                            ? std::min(deadline, Clock::now() + mode.spin_for)
                            : deadline;
  if (mode.strategy != WaitStrategy::block) {
    for (unsigned polls = 1;; ++polls) {
      if (auto value = poll()) return value;
      if (polls % kPollsPerClockRead == 0 && Clock::now() >= spin_end) break;
    }
    if (mode.strategy == WaitStrategy::spin) return std::nullopt;
  }
  // Sleeping, race-free: arm every queue and take in what completed, check, then sleep.
  for (;;) {
    if (auto value = poll()) return value;
    for (auto& channel : channels) {
      if (channel) channel->arm_completion_fd();
    }
    if (auto value = poll()) return value;
    const auto now = Clock::now();
    if (now >= deadline) return std::nullopt;
    (void)first->completion_channel()->wait_and_consume(deadline - now);
  }
}
}  // namespace

std::optional<PeerCompletion> MultiChannel::poll_shared_any() {
  const auto world = world_size();
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
  check_timeout(timeout, "receive_message_any");
  const auto limit = timeout.value_or(timeouts_.operation);
  auto received = wait_for_any(channels_, limit, [&] { return poll_message_any(); });
  if (!received) throw_timeout("receive_message_any", limit);
  return std::move(*received);
}

}  // namespace ibv
