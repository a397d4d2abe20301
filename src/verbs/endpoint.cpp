// SPDX-License-Identifier: MIT
// Endpoint wire forms: JSON (nlohmann_json, private to the library) and the fixed binary form.
#include "ibv/verbs/endpoint.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "detail/big_endian.hpp"
#include "ibv/error.hpp"

namespace ibv {
namespace {

constexpr std::uint32_t kMax24 = 0xFFFFFF;

[[noreturn]] void bad(std::string_view operation, std::string_view problem) {
  throw Error(ErrorKind::invalid_argument, operation, EINVAL, problem);
}

std::uint64_t unsigned_field(const nlohmann::json& object, const char* name, std::uint64_t max) {
  const auto it = object.find(name);
  if (it == object.end())
    bad("Endpoint::from_json", std::string("field \"") + name + "\" is missing");
  if (!it->is_number_unsigned()) {
    bad("Endpoint::from_json", std::string("field \"") + name + "\" is not a non-negative integer");
  }
  const auto value = it->get<std::uint64_t>();
  if (value > max) {
    bad("Endpoint::from_json", std::string("field \"") + name + "\" = " + std::to_string(value) +
                                   " is above its maximum " + std::to_string(max));
  }
  return value;
}

}  // namespace

std::string Endpoint::to_json() const {
  const nlohmann::json object = {
      {"qpn", qp_number}, {"lid", lid}, {"gid", gid.to_string()}, {"psn", psn}};
  return object.dump();
}

Endpoint Endpoint::from_json(std::string_view json) {
  const auto object = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) bad("Endpoint::from_json", "the text is not valid JSON");
  if (!object.is_object()) bad("Endpoint::from_json", "the JSON is not an object");
  Endpoint endpoint;
  endpoint.qp_number = static_cast<std::uint32_t>(unsigned_field(object, "qpn", kMax24));
  endpoint.lid = static_cast<std::uint16_t>(unsigned_field(object, "lid", 0xFFFF));
  endpoint.psn = static_cast<std::uint32_t>(unsigned_field(object, "psn", kMax24));
  const auto gid = object.find("gid");
  if (gid == object.end()) bad("Endpoint::from_json", "field \"gid\" is missing");
  if (!gid->is_string()) bad("Endpoint::from_json", "field \"gid\" is not a string");
  try {
    endpoint.gid = Gid::from_string(gid->get<std::string>());
  } catch (const Error& error) {
    bad("Endpoint::from_json", std::string("field \"gid\" is not a GID: ") + error.what());
  }
  return endpoint;
}

std::array<std::byte, Endpoint::kWireSize> Endpoint::to_bytes() const noexcept {
  std::array<std::byte, kWireSize> out{};
  out[0] = std::byte{kWireVersion};
  detail::put_big_endian(&out[2], lid, 2);
  detail::put_big_endian(&out[4], qp_number, 4);
  detail::put_big_endian(&out[8], psn, 4);
  for (std::size_t i = 0; i < 16; ++i) out[12 + i] = static_cast<std::byte>(gid.bytes()[i]);
  return out;
}

Endpoint Endpoint::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != kWireSize) {
    bad("Endpoint::from_bytes",
        "expected " + std::to_string(kWireSize) + " bytes, got " + std::to_string(bytes.size()));
  }
  if (bytes[0] != std::byte{kWireVersion}) {
    bad("Endpoint::from_bytes", "unknown wire version " +
                                    std::to_string(std::to_integer<int>(bytes[0])) +
                                    " (this library speaks version 1)");
  }
  // Reserved for a later version: a sender of this version writes zero, so anything else is
  // not an endpoint of ours (and would be lost by a re-encode).
  if (bytes[1] != std::byte{0}) {
    bad("Endpoint::from_bytes", "the reserved byte is " +
                                    std::to_string(std::to_integer<int>(bytes[1])) +
                                    " instead of zero");
  }
  Endpoint endpoint;
  endpoint.lid = static_cast<std::uint16_t>(detail::get_big_endian(&bytes[2], 2));
  const auto qpn = detail::get_big_endian(&bytes[4], 4);
  const auto psn = detail::get_big_endian(&bytes[8], 4);
  if (qpn > kMax24)
    bad("Endpoint::from_bytes", "QPN " + std::to_string(qpn) + " does not fit 24 bits");
  if (psn > kMax24)
    bad("Endpoint::from_bytes", "PSN " + std::to_string(psn) + " does not fit 24 bits");
  endpoint.qp_number = static_cast<std::uint32_t>(qpn);
  endpoint.psn = static_cast<std::uint32_t>(psn);
  std::array<std::uint8_t, 16> gid{};
  for (std::size_t i = 0; i < 16; ++i) gid[i] = std::to_integer<std::uint8_t>(bytes[12 + i]);
  endpoint.gid = Gid(gid);
  return endpoint;
}

std::string Endpoint::to_string() const {
  std::array<char, 128> text{};
  std::snprintf(text.data(), text.size(), "QPN 0x%06x LID %u GID %s PSN 0x%06x", qp_number,
                static_cast<unsigned>(lid), gid.to_string().c_str(), psn);
  return text.data();
}

}  // namespace ibv
