// MultiChannel's receives from a shared receive queue: the next message from any peer, the
// peers visited in turn.
#include <cerrno>
#include <chrono>
#include <string>

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
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (unsigned polls = 1;; ++polls) {
    if (auto received = poll_shared_any()) {
      if (!received->completion.ok()) {
        throw WorkError(received->completion, "MultiChannel::receive_shared_any (peer " +
                                                  std::to_string(received->peer) + ")");
      }
      return *received;
    }
    if (polls % kPollsPerClockRead == 0 && std::chrono::steady_clock::now() >= deadline) {
      throw_timeout("receive_shared_any", limit);
    }
  }
}

PeerMessage MultiChannel::receive_message_any(Timeout timeout) {
  check_timeout(timeout, "receive_message_any");
  const auto limit = timeout.value_or(timeouts_.operation);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (unsigned polls = 1;; ++polls) {
    if (auto received = poll_message_any()) return std::move(*received);
    if (polls % kPollsPerClockRead == 0 && std::chrono::steady_clock::now() >= deadline) {
      throw_timeout("receive_message_any", limit);
    }
  }
}

}  // namespace ibv
