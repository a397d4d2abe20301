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

// The flags of a version 2 form that this version knows.
constexpr unsigned kKnownFlags = NodeEndpoint::kHasDatagramFlag | NodeEndpoint::kHasControlFlag;
static_assert(NodeEndpoint::kHasDatagramFlag == PeerEndpoint::kHasDatagramFlag &&
              NodeEndpoint::kHasControlFlag == PeerEndpoint::kHasControlFlag &&
              NodeEndpoint::kWireVersion == PeerEndpoint::kWireVersion &&
              NodeEndpoint::kDatagramWireVersion == PeerEndpoint::kDatagramWireVersion);

// What the 12 bytes at the front say, besides rank and world size: which optional parts follow.
struct Parts {
  bool datagram = false;
  bool control = false;
};

// The 12 bytes both forms start with: version, flags (version 2; reserved in version 1),
// reserved, rank, world size. Version 1 without optional parts, else version 2.
void put_front(std::vector<std::byte>& out, Parts parts, std::uint32_t rank,
               std::uint32_t world_size) {
  // Built apart and copied in: GCC 12 at -O3 cannot see that `out` is never empty here and
  // warns of a null dereference when it is written through data().
  std::array<std::byte, 12> front{};
  const bool version_two = parts.datagram || parts.control;
  front[0] =
      std::byte{version_two ? NodeEndpoint::kDatagramWireVersion : NodeEndpoint::kWireVersion};
  if (parts.datagram) front[1] |= std::byte{NodeEndpoint::kHasDatagramFlag};
  if (parts.control) front[1] |= std::byte{NodeEndpoint::kHasControlFlag};
  detail::put_big_endian(front.data() + 4, rank, 4);
  detail::put_big_endian(front.data() + 8, world_size, 4);
  std::copy(front.begin(), front.end(), out.begin());
}

// What the 12 bytes at the front say.
struct Front {
  std::uint32_t rank = 0;
  std::uint32_t world_size = 0;
  Parts parts;
};

// Checks those 12 bytes (the caller checked there are 12).
Front check_front(std::span<const std::byte> bytes, std::string_view operation) {
  const auto version = std::to_integer<unsigned>(bytes[0]);
  const auto flags = std::to_integer<unsigned>(bytes[1]);
  Front front;
  if (version == NodeEndpoint::kDatagramWireVersion) {
    if ((flags & ~kKnownFlags) != 0) {
      bad("flags " + std::to_string(flags) +
              " name something this version does not know (a newer ibverbs-cpp on the peer?)",
          operation);
    }
    // One form per value (decode accepts only what encode makes): version 2 exists for the
    // optional parts, and a form without any is version 1.
    if (flags == 0) {
      bad("version 2 without flags (no datagram address, no control part): that form is "
          "version 1",
          operation);
    }
    front.parts.datagram = (flags & NodeEndpoint::kHasDatagramFlag) != 0;
    front.parts.control = (flags & NodeEndpoint::kHasControlFlag) != 0;
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

// The parts' parsers, each naming the part (`what`) in front of the part parser's complaint.
Endpoint endpoint_at(std::span<const std::byte> bytes, const std::string& what,
                     std::string_view operation) {
  try {
    return Endpoint::from_bytes(bytes);
  } catch (const Error& error) {
    bad(what + ": " + error.what(), operation);
  }
}

RemoteMemoryRegion region_at(std::span<const std::byte> bytes, const std::string& what,
                             std::string_view operation) {
  try {
    return RemoteMemoryRegion::from_bytes(bytes);
  } catch (const Error& error) {
    bad(what + ": " + error.what(), operation);
  }
}

UdAddress datagram_address(std::span<const std::byte> bytes, std::string_view operation) {
  try {
    return UdAddress::from_bytes(bytes);
  } catch (const Error& error) {
    bad(std::string("the datagram address: ") + error.what(), operation);
  }
}

// Copies a part's binary form to `next`; returns where the next part goes.
template <typename Value>
std::vector<std::byte>::iterator put(const Value& value, std::vector<std::byte>::iterator next) {
  const auto bytes = value.to_bytes();
  return std::copy(bytes.begin(), bytes.end(), next);
}

}  // namespace

std::vector<std::byte> NodeEndpoint::to_bytes() const {
  if (control && control->queue_pairs.size() != queue_pairs.size()) {
    throw_invalid_argument("NodeEndpoint::to_bytes", "control",
                           "holds " + std::to_string(control->queue_pairs.size()) +
                               " queue pairs; it needs one per entry of queue_pairs: " +
                               std::to_string(queue_pairs.size()));
  }
  const std::size_t header =
      kHeaderSize + (datagram ? UdAddress::kWireSize : 0) + (control ? kControlHeaderSize : 0);
  const std::size_t endpoints = queue_pairs.size() * (control ? 2 : 1);
  std::vector<std::byte> out(header + endpoints * Endpoint::kWireSize);
  put_front(out, {.datagram = datagram.has_value(), .control = control.has_value()}, rank,
            world_size);
  auto next = put(barrier, out.begin() + 12);
  if (datagram) next = put(*datagram, next);
  if (control) next = put(control->block, next);
  for (const Endpoint& endpoint : queue_pairs) next = put(endpoint, next);
  if (control) {
    for (const Endpoint& endpoint : control->queue_pairs) next = put(endpoint, next);
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
  const std::size_t address_at = kHeaderSize;
  const std::size_t block_at = address_at + (front.parts.datagram ? UdAddress::kWireSize : 0);
  const std::size_t header = block_at + (front.parts.control ? kControlHeaderSize : 0);
  const std::size_t world = endpoint.world_size;
  const std::size_t control_at = header + world * Endpoint::kWireSize;
  const std::size_t expected = control_at + (front.parts.control ? world * Endpoint::kWireSize : 0);
  if (bytes.size() != expected) {
    bad(std::to_string(bytes.size()) + " bytes do not hold a header" +
        (front.parts.datagram ? ", a datagram address" : "") +
        (front.parts.control ? ", a control block" : "") + " and " + std::to_string(world) +
        " endpoints of " + std::to_string(Endpoint::kWireSize) + " bytes" +
        (front.parts.control ? " and as many control endpoints" : "") + " (" +
        std::to_string(expected) + " bytes)");
  }
  endpoint.barrier =
      region_at(bytes.subspan(12, RemoteMemoryRegion::kWireSize), "the barrier region", kFromBytes);
  if (front.parts.datagram) {
    endpoint.datagram =
        datagram_address(bytes.subspan(address_at, UdAddress::kWireSize), kFromBytes);
  }
  const auto endpoints = [&](std::size_t at, const std::string& name) {
    std::vector<Endpoint> out;
    out.reserve(world);
    for (std::size_t i = 0; i < world; ++i) {
      out.push_back(endpoint_at(bytes.subspan(at + i * Endpoint::kWireSize, Endpoint::kWireSize),
                                name + "[" + std::to_string(i) + "]", kFromBytes));
    }
    return out;
  };
  std::optional<RemoteMemoryRegion> control_block;  // parsed in the order of the bytes
  if (front.parts.control) {
    control_block =
        region_at(bytes.subspan(block_at, kControlHeaderSize), "the control block", kFromBytes);
  }
  endpoint.queue_pairs = endpoints(header, "queue_pairs");
  if (control_block) {
    endpoint.control = NodeControl{.queue_pairs = endpoints(control_at, "control->queue_pairs"),
                                   .block = *control_block};
  }
  return endpoint;
}

PeerEndpoint NodeEndpoint::for_peer(std::uint32_t peer) const {
  constexpr std::string_view kOperation = "NodeEndpoint::for_peer";
  if (peer >= queue_pairs.size()) {
    throw_invalid_argument(
        kOperation, "peer " + std::to_string(peer),
        "has no entry: the endpoint holds " + std::to_string(queue_pairs.size()) + " queue pairs");
  }
  std::optional<ControlEndpoint> peer_control;
  if (control) {
    if (peer >= control->queue_pairs.size()) {
      throw_invalid_argument(kOperation, "peer " + std::to_string(peer),
                             "has no entry in the control part: it holds " +
                                 std::to_string(control->queue_pairs.size()) + " queue pairs");
    }
    peer_control =
        ControlEndpoint{.queue_pair = control->queue_pairs[peer], .block = control->block};
  }
  return {.rank = rank,
          .world_size = world_size,
          .queue_pair = queue_pairs[peer],
          .barrier = barrier,
          .datagram = datagram,
          .control = peer_control};
}

std::vector<std::byte> PeerEndpoint::to_bytes() const {
  std::vector<std::byte> out(kWireSize + (datagram ? UdAddress::kWireSize : 0) +
                             (control ? kControlWireSize : 0));
  put_front(out, {.datagram = datagram.has_value(), .control = control.has_value()}, rank,
            world_size);
  auto next = put(queue_pair, out.begin() + 12);
  next = put(barrier, next);
  if (datagram) next = put(*datagram, next);
  if (control) {
    next = put(control->queue_pair, next);
    put(control->block, next);
  }
  return out;
}

PeerEndpoint PeerEndpoint::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() < 12) {
    bad(std::to_string(bytes.size()) + " bytes instead of " + std::to_string(kWireSize) +
            " (or more with a datagram address or a control part)",
        kPeerFromBytes);
  }
  const Front front = check_front(bytes, kPeerFromBytes);
  const std::size_t control_at = kWireSize + (front.parts.datagram ? UdAddress::kWireSize : 0);
  const std::size_t expected = control_at + (front.parts.control ? kControlWireSize : 0);
  if (bytes.size() != expected) {
    std::string parts;
    if (front.parts.datagram) parts = "a datagram address";
    if (front.parts.control) parts += parts.empty() ? "a control part" : " and a control part";
    bad(std::to_string(bytes.size()) + " bytes instead of " + std::to_string(expected) +
            (parts.empty() ? "" : " (with " + parts + ")"),
        kPeerFromBytes);
  }
  PeerEndpoint endpoint;
  endpoint.rank = front.rank;
  endpoint.world_size = front.world_size;
  endpoint.queue_pair =
      endpoint_at(bytes.subspan(12, Endpoint::kWireSize), "the queue pair", kPeerFromBytes);
  endpoint.barrier =
      region_at(bytes.subspan(12 + Endpoint::kWireSize, RemoteMemoryRegion::kWireSize),
                "the barrier region", kPeerFromBytes);
  if (front.parts.datagram) {
    endpoint.datagram =
        datagram_address(bytes.subspan(kWireSize, UdAddress::kWireSize), kPeerFromBytes);
  }
  if (front.parts.control) {
    endpoint.control = ControlEndpoint{
        .queue_pair = endpoint_at(bytes.subspan(control_at, Endpoint::kWireSize),
                                  "the control queue pair", kPeerFromBytes),
        .block = region_at(
            bytes.subspan(control_at + Endpoint::kWireSize, RemoteMemoryRegion::kWireSize),
            "the control block", kPeerFromBytes)};
  }
  return endpoint;
}

}  // namespace ibv::net
