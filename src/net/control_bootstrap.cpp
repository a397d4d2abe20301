// SPDX-License-Identifier: MIT
// The in-band Bootstrap of a fault-tolerant Node: every collective is one exchange numbered by
// the view's epoch and a counter (every rank calls the same collectives in the same order, so
// the numbers agree), each entry sent to its rank in control messages; a rank known failed,
// or the deadline, ends it.
#include "net/control_bootstrap.hpp"

#include <cerrno>
#include <chrono>
#include <utility>

#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "net/control_plane.hpp"

namespace ibv::net::detail {

ControlBootstrap::ControlBootstrap(std::shared_ptr<ControlPlane> control, Duration timeout)
    : control_(std::move(control)),
      timeout_(timeout),
      rank_(control_->view_rank()),
      world_(control_->view_size()),
      epoch_(control_->epoch()) {}

std::string ControlBootstrap::description() const {
  return "the Node's control plane (in band, epoch " + std::to_string(epoch_) + ")";
}

template <typename Entry>
std::vector<std::vector<std::byte>> ControlBootstrap::exchange(const char* call, Entry&& entry) {
  if (poison_) {
    throw Error(ErrorKind::state, call, EIO, "an earlier exchange failed: " + *poison_,
                "this bootstrap is unusable; shrink the Node again to get a new one");
  }
  const std::uint64_t sequence = (epoch_ << 32U) | next_++;
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  std::vector<std::vector<std::byte>> received(world_);
  try {
    control_->start();  // before the first barrier: every rank is connected by now
    for (std::uint32_t peer = 0; peer < world_; ++peer) {
      if (peer != rank_) control_->exchange_send(sequence, peer, entry(peer));
    }
    for (std::uint32_t peer = 0; peer < world_; ++peer) {
      if (peer == rank_) {
        const std::span<const std::byte> own = entry(peer);
        received[peer].assign(own.begin(), own.end());
        continue;
      }
      auto bytes = control_->exchange_receive(sequence, peer, deadline);
      if (bytes) {
        received[peer] = std::move(*bytes);
        continue;
      }
      if (const auto failure = control_->failure_of(peer)) {
        throw Error(ErrorKind::peer_gone, call, EIO,
                    "exchange " + std::to_string(next_ - 1) + " over " + description() + ": " +
                        failure->to_string() + " has failed",
                    "shrink the Node again, and build on the new one");
      }
      throw Error(ErrorKind::timeout, call, ETIMEDOUT,
                  "exchange " + std::to_string(next_ - 1) + " over " + description() +
                      ": nothing from rank " + std::to_string(peer) + " within " +
                      ibv::detail::duration_text(timeout_),
                  "every rank of the Node must make the same calls of its in-band bootstrap in "
                  "the same order");
    }
    // Every entry of this rank has landed before it returns: it may leave next.
    control_->exchange_flush(deadline);
  } catch (const std::exception& error) {
    poison_ = error.what();
    throw;
  }
  return received;
}

std::vector<std::vector<std::byte>> ControlBootstrap::all_gather_bytes(
    std::span<const std::byte> mine) {
  return exchange("Node::in_band_bootstrap (all_gather)", [&](std::uint32_t) { return mine; });
}

std::vector<std::vector<std::byte>> ControlBootstrap::all_to_all_bytes(
    std::span<const std::vector<std::byte>> to_peer) {
  constexpr const char* kCall = "Node::in_band_bootstrap (all_to_all)";
  if (to_peer.size() != world_) {
    throw_invalid_argument(kCall, "to_peer",
                           "has " + std::to_string(to_peer.size()) +
                               " entries, not one per rank (" + std::to_string(world_) + ")");
  }
  return exchange(kCall,
                  [&](std::uint32_t peer) { return std::span<const std::byte>(to_peer[peer]); });
}

void ControlBootstrap::barrier() {
  static_cast<void>(exchange("Node::in_band_bootstrap (barrier)",
                             [](std::uint32_t) { return std::span<const std::byte>(); }));
}

}  // namespace ibv::net::detail
