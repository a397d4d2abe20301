// NodeEndpoint: its binary form, checked field by field when parsed.
#include "ibv/net/node_endpoint.hpp"

#include <algorithm>
#include <string>

#include "detail/big_endian.hpp"
#include "ibv/error.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kFromBytes = "NodeEndpoint::from_bytes";

[[noreturn]] void bad(std::string_view problem) {
  throw_invalid_argument(kFromBytes, "bytes", problem);
}

}  // namespace

std::vector<std::byte> NodeEndpoint::to_bytes() const {
  std::vector<std::byte> out(kHeaderSize + queue_pairs.size() * Endpoint::kWireSize);
  out[0] = std::byte{kWireVersion};
  detail::put_big_endian(out.data() + 4, rank, 4);
  detail::put_big_endian(out.data() + 8, world_size, 4);
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
  if (bytes[0] != std::byte{kWireVersion}) {
    bad("version " + std::to_string(std::to_integer<int>(bytes[0])) + " is not " +
        std::to_string(kWireVersion) + " (a different ibverbs-cpp version on the peer?)");
  }
  if (bytes[1] != std::byte{0} || bytes[2] != std::byte{0} || bytes[3] != std::byte{0}) {
    bad("the reserved bytes are not zero");
  }
  NodeEndpoint endpoint;
  endpoint.rank = static_cast<std::uint32_t>(detail::get_big_endian(bytes.data() + 4, 4));
  endpoint.world_size = static_cast<std::uint32_t>(detail::get_big_endian(bytes.data() + 8, 4));
  if (endpoint.rank >= endpoint.world_size) {
    bad("rank " + std::to_string(endpoint.rank) + " is not below its world size " +
        std::to_string(endpoint.world_size));
  }
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

}  // namespace ibv::net
