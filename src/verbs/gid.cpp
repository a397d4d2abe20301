// SPDX-License-Identifier: MIT
// Gid text forms and GID table entry formatting.
#include "ibv/verbs/gid.hpp"

#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "detail/brief_quote.hpp"
#include "ibv/error.hpp"

namespace ibv {

Gid::Gid(const ibv_gid& raw) noexcept { std::memcpy(bytes_.data(), raw.raw, bytes_.size()); }

Gid Gid::from_string(std::string_view text) {
  const std::string copy(text);
  std::array<std::uint8_t, 16> bytes{};
  // inet_pton reads up to the first NUL: text with one inside must not pass as its prefix.
  if (copy.find('\0') != std::string::npos ||
      inet_pton(AF_INET6, copy.c_str(), bytes.data()) != 1) {
    throw_invalid_argument("Gid::from_string", detail::quote_briefly(text),
                           "is not a GID in IPv6 text form (e.g. fe80::1 or ::ffff:10.0.0.1)");
  }
  return Gid(bytes);
}

ibv_gid Gid::to_native() const noexcept {
  ibv_gid raw{};
  std::memcpy(raw.raw, bytes_.data(), bytes_.size());
  return raw;
}

bool Gid::is_zero() const noexcept {
  return std::ranges::all_of(bytes_, [](std::uint8_t b) { return b == 0; });
}

bool Gid::is_ipv4_mapped() const noexcept {
  for (std::size_t i = 0; i < 10; ++i) {
    if (bytes_[i] != 0) return false;
  }
  return bytes_[10] == 0xff && bytes_[11] == 0xff;
}

std::optional<std::string> Gid::ipv4() const {
  if (!is_ipv4_mapped()) return std::nullopt;
  return std::to_string(bytes_[12]) + "." + std::to_string(bytes_[13]) + "." +
         std::to_string(bytes_[14]) + "." + std::to_string(bytes_[15]);
}

std::string Gid::to_string() const {
  if (is_ipv4_mapped()) return "::ffff:" + *ipv4();
  std::array<char, INET6_ADDRSTRLEN> text{};
  inet_ntop(AF_INET6, bytes_.data(), text.data(), text.size());
  return text.data();
}

std::string_view to_string(GidType type) noexcept {
  switch (type) {
    case GidType::infiniband: return "IB";
    case GidType::roce_v1: return "RoCE v1";
    case GidType::roce_v2: return "RoCE v2";
  }
  return "unknown";
}

std::string GidEntry::to_string() const {
  std::string text =
      std::to_string(index) + "  " + gid.to_string() + "  " + std::string(ibv::to_string(type));
  if (!netdev.empty()) text += "  " + netdev;
  return text;
}

}  // namespace ibv
