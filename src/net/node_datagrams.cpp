// SPDX-License-Identifier: MIT
// NodeDatagrams: a Node rank's DatagramEndpoint with its peers addressed by rank, and received
// datagrams mapped back to their rank by source queue pair number and GID (or LID).
#include "ibv/net/node_datagrams.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv::net {

NodeDatagrams::NodeDatagrams(DatagramEndpoint endpoint, std::uint32_t rank,
                             std::vector<UdAddress> addresses)
    : endpoint_(std::move(endpoint)),
      rank_(rank),
      addresses_(std::move(addresses)),
      max_payload_all_(endpoint_.max_payload()) {
  by_qp_number_.reserve(addresses_.size());
  for (std::uint32_t r = 0; r < addresses_.size(); ++r) {
    by_qp_number_.emplace_back(addresses_[r].qp_number, r);
    max_payload_all_ = std::min(max_payload_all_, endpoint_.max_payload(addresses_[r]));
  }
  std::sort(by_qp_number_.begin(), by_qp_number_.end());
}

NodeDatagrams NodeDatagrams::regrouped(std::span<const std::uint32_t> survivors) && {
  std::vector<UdAddress> addresses;
  addresses.reserve(survivors.size());
  for (const std::uint32_t rank : survivors) addresses.push_back(addresses_.at(rank));
  const auto rank =
      static_cast<std::uint32_t>(std::ranges::lower_bound(survivors, rank_) - survivors.begin());
  return {std::move(endpoint_), rank, std::move(addresses)};
}

NodeDatagrams::NodeDatagrams(NodeDatagrams&&) noexcept = default;
NodeDatagrams& NodeDatagrams::operator=(NodeDatagrams&&) noexcept = default;
NodeDatagrams::~NodeDatagrams() = default;

const UdAddress& NodeDatagrams::checked(std::uint32_t rank, std::string_view operation) const {
  if (rank >= addresses_.size()) {
    throw_invalid_argument(operation, "rank " + std::to_string(rank),
                           "is not below the world size " + std::to_string(addresses_.size()));
  }
  return addresses_[rank];
}

const UdAddress& NodeDatagrams::address(std::uint32_t rank) const {
  return checked(rank, "NodeDatagrams::address");
}

std::uint32_t NodeDatagrams::max_payload(std::uint32_t rank) const {
  return endpoint_.max_payload(checked(rank, "NodeDatagrams::max_payload"));
}

void NodeDatagrams::send_to(std::uint32_t rank, std::span<const std::byte> payload) {
  endpoint_.send(checked(rank, "NodeDatagrams::send_to"), payload);
}

void NodeDatagrams::post_to(std::uint32_t rank, std::span<const std::byte> payload) {
  endpoint_.post(checked(rank, "NodeDatagrams::post_to"), payload);
}

void NodeDatagrams::flush(Duration timeout) { endpoint_.flush(timeout); }

std::optional<std::uint32_t> NodeDatagrams::rank_of(const DatagramMessage& message) const {
  const UdSource& source = message.source();
  const auto first = std::lower_bound(by_qp_number_.begin(), by_qp_number_.end(),
                                      std::pair{source.qp_number, std::uint32_t{0}});
  for (auto it = first; it != by_qp_number_.end() && it->first == source.qp_number; ++it) {
    const UdAddress& address = addresses_[it->second];
    // With a global route header (RoCE; InfiniBand across subnets) the source GID names the
    // port; without one (InfiniBand in a subnet) the LID does.
    if (source.gid ? *source.gid == address.gid : source.lid == address.lid) return it->second;
  }
  return std::nullopt;
}

std::optional<RankDatagram> NodeDatagrams::ranked(DatagramMessage message) {
  const auto rank = rank_of(message);
  if (!rank) {
    ++unknown_;
    message.release();
    return std::nullopt;
  }
  return RankDatagram{.rank = *rank, .message = std::move(message)};
}

std::optional<RankDatagram> NodeDatagrams::receive(Duration timeout) {
  ibv::detail::check_positive_timeout(timeout, "NodeDatagrams::receive");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return try_receive();
    std::optional<DatagramMessage> message = endpoint_.receive(Duration(deadline - now));
    if (!message) return std::nullopt;
    if (auto got = ranked(std::move(*message))) return got;
  }
}

std::optional<RankDatagram> NodeDatagrams::try_receive() {
  while (std::optional<DatagramMessage> message = endpoint_.try_receive()) {
    if (auto got = ranked(std::move(*message))) return got;
  }
  return std::nullopt;
}

SequenceCounts NodeDatagrams::counts(std::uint32_t rank) const {
  return endpoint_.counts(checked(rank, "NodeDatagrams::counts"));
}

}  // namespace ibv::net
