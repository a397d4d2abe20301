// SPDX-License-Identifier: MIT
// GlobalRouteHeader (IPv6 GRH or RoCE v2's IPv4 header, told apart as rdma-core does) and
// UdReceived (payload past the GRH area, source from the completion).
#include "ibv/verbs/ud_received.hpp"

#include <algorithm>
#include <string>

#include "ibv/error.hpp"

namespace ibv {
namespace {

constexpr std::size_t kSourceGid = 8;
constexpr std::size_t kDestinationGid = 24;
constexpr std::size_t kIpv4Source = GlobalRouteHeader::kIpv4Offset + 12;
constexpr std::size_t kIpv4Destination = GlobalRouteHeader::kIpv4Offset + 16;
constexpr std::size_t kIpv4HeaderSize = 20;

unsigned byte_at(std::span<const std::byte> bytes, std::size_t i) {
  return std::to_integer<unsigned>(bytes[i]);
}

// The IPv4 header checksum over 20 bytes is valid (sums to 0xFFFF with the stored checksum).
bool ipv4_checksum_ok(std::span<const std::byte> header) {
  std::uint32_t sum = 0;
  for (std::size_t i = 0; i < kIpv4HeaderSize; i += 2) {
    sum += (byte_at(header, i) << 8U) | byte_at(header, i + 1);
  }
  while ((sum >> 16U) != 0) sum = (sum & 0xFFFFU) + (sum >> 16U);
  return sum == 0xFFFFU;
}

Gid gid_at(std::span<const std::byte> bytes, std::size_t offset) {
  std::array<std::uint8_t, 16> raw{};
  for (std::size_t i = 0; i < raw.size(); ++i)
    raw[i] = std::to_integer<std::uint8_t>(bytes[offset + i]);
  return Gid(raw);
}

Gid ipv4_mapped_at(std::span<const std::byte> bytes, std::size_t offset) {
  std::array<std::uint8_t, 16> raw{};
  raw[10] = 0xFF;
  raw[11] = 0xFF;
  for (std::size_t i = 0; i < 4; ++i)
    raw[12 + i] = std::to_integer<std::uint8_t>(bytes[offset + i]);
  return Gid(raw);
}

}  // namespace

GlobalRouteHeader::GlobalRouteHeader(std::span<const std::byte, kSize> bytes) noexcept {
  std::copy(bytes.begin(), bytes.end(), bytes_.begin());
  const std::span<const std::byte> all(bytes_);
  const unsigned ip6_version = byte_at(all, 0) >> 4U;
  const unsigned ip4_version = byte_at(all, kIpv4Offset) >> 4U;
  const unsigned ip4_ihl = byte_at(all, kIpv4Offset) & 0x0FU;
  if (ip6_version != 6) {
    ipv4_ = ip4_version == 4;
  } else {
    ipv4_ = ip4_version == 4 && ip4_ihl == 5 &&
            ipv4_checksum_ok(all.subspan(kIpv4Offset, kIpv4HeaderSize));
  }
}

Gid GlobalRouteHeader::source_gid() const noexcept {
  return ipv4_ ? ipv4_mapped_at(bytes_, kIpv4Source) : gid_at(bytes_, kSourceGid);
}

Gid GlobalRouteHeader::destination_gid() const noexcept {
  return ipv4_ ? ipv4_mapped_at(bytes_, kIpv4Destination) : gid_at(bytes_, kDestinationGid);
}

std::span<const std::byte> GlobalRouteHeader::ipv4_header() const noexcept {
  if (!ipv4_) return {};
  return std::span<const std::byte>(bytes_).subspan(kIpv4Offset, kIpv4HeaderSize);
}

UdReceived::UdReceived(const WorkCompletion& completion, std::span<const std::byte> buffer) {
  constexpr std::string_view kOperation = "UdReceived";
  if (!completion.ok() || !completion.is_receive()) {
    throw_invalid_argument(kOperation, "completion " + completion.to_string(),
                           "is not a successful receive");
  }
  const std::size_t length = completion.byte_length();
  if (length < GlobalRouteHeader::kSize) {
    throw_invalid_argument(kOperation, "completion " + completion.to_string(),
                           "is shorter than the 40-byte GRH area every UD receive starts with "
                           "(is this a UD queue pair's receive?)");
  }
  if (length > buffer.size()) {
    throw_invalid_argument(
        kOperation, "completion " + completion.to_string(),
        "is longer than the buffer of " + std::to_string(buffer.size()) + " bytes given for it");
  }
  grh_area_ = buffer.first(GlobalRouteHeader::kSize);
  payload_ = buffer.subspan(GlobalRouteHeader::kSize, length - GlobalRouteHeader::kSize);
  source_.qp_number = completion.source_qp();
  source_.lid = completion.source_lid();
  if (completion.has_grh()) {
    grh_.emplace(grh_area_.first<GlobalRouteHeader::kSize>());
    source_.gid = grh_->source_gid();
  }
  immediate_ = completion.immediate();
}

}  // namespace ibv
