// SPDX-License-Identifier: MIT
// Private: the Bootstrap of a fault-tolerant Node over its own control plane (in band): the
// Node's ranks and world, its collectives carried by the control queue pairs' SENDs. What a
// shrunken Node builds its collectives with, when the bootstrap it started with no longer
// matches it (another world) or needs a rank that is gone (the rendezvous's root).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ibv/duration.hpp"
#include "ibv/net/bootstrap.hpp"

namespace ibv::net::detail {

class ControlPlane;

class ControlBootstrap final : public Bootstrap {
 public:
  /// For the control plane's view as it is now; every exchange is bounded by `timeout`.
  ControlBootstrap(std::shared_ptr<ControlPlane> control, Duration timeout);

  [[nodiscard]] std::uint32_t rank() const noexcept override { return rank_; }
  [[nodiscard]] std::uint32_t world_size() const noexcept override { return world_; }
  [[nodiscard]] std::string description() const override;
  [[nodiscard]] std::vector<std::vector<std::byte>> all_gather_bytes(
      std::span<const std::byte> mine) override;
  [[nodiscard]] std::vector<std::vector<std::byte>> all_to_all_bytes(
      std::span<const std::vector<std::byte>> to_peer) override;
  void barrier() override;

 private:
  /// Sends `entry(r)` to every other rank r and returns what each sent this rank (own entry:
  /// `entry(rank())`), as the next exchange; a failure poisons this bootstrap.
  template <typename Entry>
  std::vector<std::vector<std::byte>> exchange(const char* call, Entry&& entry);

  std::shared_ptr<ControlPlane> control_;
  Duration timeout_;
  std::uint32_t rank_;
  std::uint32_t world_;
  std::uint64_t epoch_;
  std::uint32_t next_ = 0;  // the next exchange's number in this epoch
  std::optional<std::string> poison_;
};

}  // namespace ibv::net::detail
