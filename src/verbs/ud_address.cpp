// SPDX-License-Identifier: MIT
// UdAddress wire forms: JSON (nlohmann_json, private to the library) and the fixed binary form.
#include "ibv/verbs/ud_address.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "detail/big_endian.hpp"
#include "ibv/error.hpp"

namespace ibv {
namespace {

constexpr std::uint32_t kMax24 = 0xFFFFFF;
// Q_Keys with bit 31 set are controlled (privileged) Q_Keys: a request carrying one is sent
// with the QP's own Q_Key instead, and an unprivileged QP may not be given one.
constexpr std::uint64_t kMaxQkey = 0x7FFFFFFF;

[[noreturn]] void bad(std::string_view operation, std::string_view problem) {
  throw Error(ErrorKind::invalid_argument, operation, EINVAL, problem);
}

std::uint64_t unsigned_field(const nlohmann::json& object, const char* name, std::uint64_t max,
                             std::string_view why) {
  const auto it = object.find(name);
  if (it == object.end())
    bad("UdAddress::from_json", std::string("field \"") + name + "\" is missing");
  if (!it->is_number_unsigned()) {
    bad("UdAddress::from_json",
        std::string("field \"") + name + "\" is not a non-negative integer");
  }
  const auto value = it->get<std::uint64_t>();
  if (value > max) {
    bad("UdAddress::from_json", std::string("field \"") + name + "\" = " + std::to_string(value) +
                                    " is above its maximum " + std::to_string(max) + " (" +
                                    std::string(why) + ")");
  }
  return value;
}

}  // namespace

std::string UdAddress::to_json() const {
  const nlohmann::json object = {{"qpn", qp_number},
                                 {"qkey", qkey},
                                 {"lid", lid},
                                 {"gid", gid.to_string()},
                                 {"mtu", mtu.bytes()}};
  return object.dump();
}

UdAddress UdAddress::from_json(std::string_view json) {
  const auto object = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) bad("UdAddress::from_json", "the text is not valid JSON");
  if (!object.is_object()) bad("UdAddress::from_json", "the JSON is not an object");
  UdAddress address;
  address.qp_number =
      static_cast<std::uint32_t>(unsigned_field(object, "qpn", kMax24, "a QPN has 24 bits"));
  address.qkey = static_cast<std::uint32_t>(
      unsigned_field(object, "qkey", kMaxQkey, "Q_Keys with bit 31 set are controlled Q_Keys"));
  address.lid = static_cast<std::uint16_t>(unsigned_field(object, "lid", 0xFFFF, "16 bits"));
  const auto mtu = unsigned_field(object, "mtu", 4096, "the largest path MTU");
  try {
    address.mtu = Mtu::from_bytes(static_cast<std::uint32_t>(mtu));
  } catch (const Error&) {
    bad("UdAddress::from_json", "field \"mtu\" = " + std::to_string(mtu) +
                                    " is not a path MTU (256, 512, 1024, 2048 or 4096)");
  }
  const auto gid = object.find("gid");
  if (gid == object.end()) bad("UdAddress::from_json", "field \"gid\" is missing");
  if (!gid->is_string()) bad("UdAddress::from_json", "field \"gid\" is not a string");
  try {
    address.gid = Gid::from_string(gid->get<std::string>());
  } catch (const Error& error) {
    bad("UdAddress::from_json", std::string("field \"gid\" is not a GID: ") + error.what());
  }
  return address;
}

std::array<std::byte, UdAddress::kWireSize> UdAddress::to_bytes() const noexcept {
  std::array<std::byte, kWireSize> out{};
  out[0] = std::byte{kWireVersion};
  out[1] = static_cast<std::byte>(mtu.native());
  detail::put_big_endian(&out[2], lid, 2);
  detail::put_big_endian(&out[4], qp_number, 4);
  detail::put_big_endian(&out[8], qkey, 4);
  for (std::size_t i = 0; i < 16; ++i) out[12 + i] = static_cast<std::byte>(gid.bytes()[i]);
  return out;
}

UdAddress UdAddress::from_bytes(std::span<const std::byte> bytes) {
  if (bytes.size() != kWireSize) {
    bad("UdAddress::from_bytes",
        "expected " + std::to_string(kWireSize) + " bytes, got " + std::to_string(bytes.size()));
  }
  if (bytes[0] != std::byte{kWireVersion}) {
    bad("UdAddress::from_bytes", "unknown wire version " +
                                     std::to_string(std::to_integer<int>(bytes[0])) +
                                     " (this library speaks version 1)");
  }
  const int mtu_code = std::to_integer<int>(bytes[1]);
  if (mtu_code < 1 || mtu_code > 5) {
    bad("UdAddress::from_bytes",
        "MTU code " + std::to_string(mtu_code) + " is out of range 1..5 (256 .. 4096 bytes)");
  }
  UdAddress address;
  address.mtu = Mtu::from_native(mtu_code);
  address.lid = static_cast<std::uint16_t>(detail::get_big_endian(&bytes[2], 2));
  const auto qpn = detail::get_big_endian(&bytes[4], 4);
  const auto qkey = detail::get_big_endian(&bytes[8], 4);
  if (qpn > kMax24)
    bad("UdAddress::from_bytes", "QPN " + std::to_string(qpn) + " does not fit 24 bits");
  if (qkey > kMaxQkey) {
    bad("UdAddress::from_bytes", "Q_Key " + std::to_string(qkey) +
                                     " has bit 31 set (a controlled Q_Key, which a UD "
                                     "address can not name)");
  }
  address.qp_number = static_cast<std::uint32_t>(qpn);
  address.qkey = static_cast<std::uint32_t>(qkey);
  std::array<std::uint8_t, 16> gid{};
  for (std::size_t i = 0; i < 16; ++i) gid[i] = std::to_integer<std::uint8_t>(bytes[12 + i]);
  address.gid = Gid(gid);
  return address;
}

std::string UdAddress::to_string() const {
  std::array<char, 160> text{};
  std::snprintf(text.data(), text.size(), "UD QPN 0x%06x Q_Key 0x%08x LID %u GID %s MTU %u",
                qp_number, qkey, static_cast<unsigned>(lid), gid.to_string().c_str(), mtu.bytes());
  return text.data();
}

}  // namespace ibv
