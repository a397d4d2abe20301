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

// The 12 bytes both forms start with: version, flags (version 2; reserved in version 1),
// reserved, rank, world size. Version 1 without a datagram address, else version 2.
void put_front(std::vector<std::byte>& out, bool has_datagram, std::uint32_t rank,
               std::uint32_t world_size) {
  // Built apart and copied in: GCC 12 at -O3 cannot see that `out` is never empty here and
  // warns of a null dereference when it is written through data().
  std::array<std::byte, 12> front{};
  front[0] =
      std::byte{has_datagram ? NodeEndpoint::kDatagramWireVersion : NodeEndpoint::kWireVersion};
  if (has_datagram) front[1] = std::byte{NodeEndpoint::kHasDatagramFlag};
  detail::put_big_endian(front.data() + 4, rank, 4);
  detail::put_big_endian(front.data() + 8, world_size, 4);
  std::copy(front.begin(), front.end(), out.begin());
}

// What the 12 bytes at the front say.
struct Front {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 0;
  bool has_datagram = false;
};

// Checks those 12 bytes (the caller checked there are 12).
Front check_front(std::span<const std::byte> bytes, std::string_view operation) {
  const auto version = std::to_integer<unsigned>(bytes[0]);
  const auto flags = std::to_integer<unsigned>(bytes[1]);
  Front front;
  if (version == NodeEndpoint::kDatagramWireVersion) {
    if ((flags & ~unsigned{NodeEndpoint::kHasDatagramFlag}) != 0) {
      bad("flags " + std::to_string(flags) +
              " name something this version does not know (a newer ibverbs-cpp on the peer?)",
          operation);
    }
    // One form per value (decode accepts only what encode makes): version 2 exists for the
    // datagram address, and a form without one is version 1.
    if ((flags & NodeEndpoint::kHasDatagramFlag) == 0) {
      bad("version 2 without a datagram address (flag 1 clear): that form is version 1", operation);
    }
    front.has_datagram = true;
  } else if (version != NodeEndpoint::kWireVersion) {
    bad("version " + std::to_string(version) + " is neither 1 nor 2 (a different ibverbs-cpp " +
            "version on the peer?)",
        operation);
  } else if (flags != 0) {
    bad("the reserved bytes are not zero", operation);
  }
  if (bytes[2] != std::byte{0} || bytes[3] != std::byte{0}) {
    bad("the reserved bytes are not zero", operation);
  }
  front.rank = static_cast<std::uint32_t>(detail::get_big_endian(bytes.data() + 4, 4));
  front.world_size = static_cast<std::uint32_t>(detail::get_big_endian(bytes.data() + 8, 4));
  if (front.rank >= front.world_size) {
    bad("rank " + std::to_string(front.rank) + " is not below its world size " +
            std::to_string(front.world_size),
        operation);
  }
  return front;
}

UdAddress datagram_address(std::span<const std::byte> bytes, std::string_view operation) {
  try {
    return UdAddress::from_bytes(bytes);
  } catch (const Error& error) {
    bad(std::string("the datagram address: ") + error.what(), operation);
  }
}

}  // namespace

std::vector<std::byte> NodeEndpoint::to_bytes() const {
  const std::size_t address_size = datagram ? UdAddress::kWireSize : 0;
  std::vector<std::byte> out(kHeaderSize + address_size + queue_pairs.size() * Endpoint::kWireSize);
  put_front(out, datagram.has_value(), rank, world_size);
  const auto region = barrier.to_bytes();
  auto next = std::copy(region.begin(), region.end(), out.begin() + 12);
  if (datagram) {
    const auto address = datagram->to_bytes();
    next = std::copy(address.begin(), address.end(), next);
  }
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
  const Front front = check_front(bytes, kFromBytes);
  endpoint.rank = front.rank;
  endpoint.world_size = front.world_size;
  const std::size_t header = kHeaderSize + (front.has_datagram ? UdAddress::kWireSize : 0);
  const std::size_t expected = header + std::size_t{endpoint.world_size} * Endpoint::kWireSize;
  if (bytes.size() != expected) {
    bad(std::to_string(bytes.size()) + " bytes do not hold a header" +
        (front.has_datagram ? ", a datagram address" : "") + " and " +
        std::to_string(endpoint.world_size) + " endpoints of " +
        std::to_string(Endpoint::kWireSize) + " bytes (" + std::to_string(expected) + " bytes)");
  }
  try {
    endpoint.barrier =
        RemoteMemoryRegion::from_bytes(bytes.subspan(12, RemoteMemoryRegion::kWireSize));
  } catch (const Error& error) {
    bad(std::string("the barrier region: ") + error.what());
  }
  if (front.has_datagram) {
    endpoint.datagram =
        datagram_address(bytes.subspan(kHeaderSize, UdAddress::kWireSize), kFromBytes);
  }
  endpoint.queue_pairs.reserve(endpoint.world_size);
  for (std::size_t i = 0; i < endpoint.world_size; ++i) {
    try {
      endpoint.queue_pairs.push_back(Endpoint::from_bytes(
          bytes.subspan(header + i * Endpoint::kWireSize, Endpoint::kWireSize)));
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
  return {.rank = rank,
          .world_size = world_size,
          .queue_pair = queue_pairs[peer],
          .barrier = barrier,
          .datagram = datagram};
}

std::vector<std::byte> PeerEndpoint::to_bytes() const {
  std::vector<std::byte> out(datagram ? kDatagramWireSize : kWireSize);
  put_front(out, datagram.has_value(), rank, world_size);
  const auto endpoint = queue_pair.to_bytes();
  const auto region = barrier.to_bytes();
  auto next = std::copy(endpoint.begin(), endpoint.end(), out.begin() + 12);
  next = std::copy(region.begin(), region.end(), next);
  if (datagram) {
    const auto address = datagram->to_bytes();
    std::copy(address.begin(), address.end(), next);
  }
  return out;
}

PeerEndpoint PeerEndpoint::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() < 12) {
    bad(std::to_string(bytes.size()) + " bytes instead of " + std::to_string(kWireSize) + " (or " +
            std::to_string(kDatagramWireSize) + " with a datagram address)",
        kPeerFromBytes);
  }
  const Front front = check_front(bytes, kPeerFromBytes);
  const std::size_t expected = front.has_datagram ? kDatagramWireSize : kWireSize;
  if (bytes.size() != expected) {
    bad(std::to_string(bytes.size()) + " bytes instead of " + std::to_string(expected) +
            (front.has_datagram ? " (with a datagram address)" : ""),
        kPeerFromBytes);
  }
  PeerEndpoint endpoint;
  endpoint.rank = front.rank;
  endpoint.world_size = front.world_size;
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
  if (front.has_datagram) {
    endpoint.datagram =
        datagram_address(bytes.subspan(kWireSize, UdAddress::kWireSize), kPeerFromBytes);
  }
  return endpoint;
}

}  // namespace ibv::net
