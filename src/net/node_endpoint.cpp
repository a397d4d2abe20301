// SPDX-License-Identifier: MIT
// NodeEndpoint and PeerEndpoint: their binary forms, checked field by field when parsed.
#include "ibv/net/node_endpoint.hpp"

#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <utility>

#include "detail/big_endian.hpp"
#include "ibv/error.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kFromBytes = "NodeEndpoint::from_bytes";
constexpr std::string_view kPeerFromBytes = "PeerEndpoint::from_bytes";

[[noreturn]] void bad(std::string_view problem, std::string_view operation = kFromBytes) {
  throw_invalid_argument(operation, "bytes", problem);
}

// The 12 bytes both forms start with: version, reserved, rank, world size.
void put_front(std::vector<std::byte>& out, std::uint8_t version, std::uint32_t rank,
               std::uint32_t world_size) {
  // Built apart and copied in: GCC 12 at -O3 cannot see that `out` is never empty here and
  // warns of a null dereference when it is written through data().
  std::array<std::byte, 12> front{};
  front[0] = std::byte{version};
  detail::put_big_endian(front.data() + 4, rank, 4);
  detail::put_big_endian(front.data() + 8, world_size, 4);
  std::copy(front.begin(), front.end(), out.begin());
}

// Checks those 12 bytes (the caller checked there are 12) and returns rank and world size.
std::pair<std::uint32_t, std::uint32_t> check_front(std::span<const std::byte> bytes,
                                                    std::uint8_t version,
                                                    std::string_view operation) {
  if (bytes[0] != std::byte{version}) {
    bad("version " + std::to_string(std::to_integer<int>(bytes[0])) + " is not " +
            std::to_string(version) + " (a different ibverbs-cpp version on the peer?)",
        operation);
  }
  if (bytes[1] != std::byte{0} || bytes[2] != std::byte{0} || bytes[3] != std::byte{0}) {
    bad("the reserved bytes are not zero", operation);
  }
  const auto rank = static_cast<std::uint32_t>(detail::get_big_endian(bytes.data() + 4, 4));
  const auto world_size = static_cast<std::uint32_t>(detail::get_big_endian(bytes.data() + 8, 4));
  if (rank >= world_size) {
    bad("rank " + std::to_string(rank) + " is not below its world size " +
            std::to_string(world_size),
        operation);
  }
  return {rank, world_size};
}

}  // namespace

std::vector<std::byte> NodeEndpoint::to_bytes() const {
  std::vector<std::byte> out(kHeaderSize + queue_pairs.size() * Endpoint::kWireSize);
  put_front(out, kWireVersion, rank, world_size);
  const auto region = barrier.to_bytes();
  std::copy(region.begin(), region.end(), out.begin() + 12);
  std::byte* next = out.data() + kHeaderSize;
  for (const Endpoint& endpoint : queue_pairs) {
    const auto bytes = endpoint.to_bytes();
    next = std::copy(bytes.begin(), bytes.end(), next);
  }
  return out;
}

NodeEndpoint NodeEndpoint::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() < kHeaderSize) {
    bad(std::to_string(bytes.size()) + " bytes are too few: the header alone takes " +
        std::to_string(kHeaderSize));
  }
  NodeEndpoint endpoint;
  std::tie(endpoint.rank, endpoint.world_size) = check_front(bytes, kWireVersion, kFromBytes);
  const std::size_t endpoints = (bytes.size() - kHeaderSize) / Endpoint::kWireSize;
  if ((bytes.size() - kHeaderSize) % Endpoint::kWireSize != 0 || endpoints != endpoint.world_size) {
    bad(std::to_string(bytes.size()) + " bytes do not hold a header and " +
        std::to_string(endpoint.world_size) + " endpoints of " +
        std::to_string(Endpoint::kWireSize) + " bytes (" +
        std::to_string(kHeaderSize + std::size_t{endpoint.world_size} * Endpoint::kWireSize) +
        " bytes)");
  }
  try {
    endpoint.barrier =
        RemoteMemoryRegion::from_bytes(bytes.subspan(12, RemoteMemoryRegion::kWireSize));
  } catch (const Error& error) {
    bad(std::string("the barrier region: ") + error.what());
  }
  endpoint.queue_pairs.reserve(endpoints);
  for (std::size_t i = 0; i < endpoints; ++i) {
    try {
      endpoint.queue_pairs.push_back(Endpoint::from_bytes(
          bytes.subspan(kHeaderSize + i * Endpoint::kWireSize, Endpoint::kWireSize)));
    } catch (const Error& error) {
      bad("queue_pairs[" + std::to_string(i) + "]: " + error.what());
    }
  }
  return endpoint;
}

PeerEndpoint NodeEndpoint::for_peer(std::uint32_t peer) const {
  if (peer >= queue_pairs.size()) {
    throw_invalid_argument(
        "NodeEndpoint::for_peer", "peer " + std::to_string(peer),
        "has no entry: the endpoint holds " + std::to_string(queue_pairs.size()) + " queue pairs");
  }
  return {
      .rank = rank, .world_size = world_size, .queue_pair = queue_pairs[peer], .barrier = barrier};
}

std::vector<std::byte> PeerEndpoint::to_bytes() const {
  std::vector<std::byte> out(kWireSize);
  put_front(out, kWireVersion, rank, world_size);
  const auto endpoint = queue_pair.to_bytes();
  const auto region = barrier.to_bytes();
  std::copy(region.begin(), region.end(),
            std::copy(endpoint.begin(), endpoint.end(), out.begin() + 12));
  return out;
}

PeerEndpoint PeerEndpoint::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != kWireSize) {
    bad(std::to_string(bytes.size()) + " bytes instead of " + std::to_string(kWireSize),
        kPeerFromBytes);
  }
  PeerEndpoint endpoint;
  std::tie(endpoint.rank, endpoint.world_size) = check_front(bytes, kWireVersion, kPeerFromBytes);
  try {
    endpoint.queue_pair = Endpoint::from_bytes(bytes.subspan(12, Endpoint::kWireSize));
  } catch (const Error& error) {
    bad(std::string("the queue pair: ") + error.what(), kPeerFromBytes);
  }
  try {
    endpoint.barrier = RemoteMemoryRegion::from_bytes(
        bytes.subspan(12 + Endpoint::kWireSize, RemoteMemoryRegion::kWireSize));
  } catch (const Error& error) {
    bad(std::string("the barrier region: ") + error.what(), kPeerFromBytes);
  }
  return endpoint;
}

}  // namespace ibv::net
