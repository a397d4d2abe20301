// SPDX-License-Identifier: MIT
// The agreement messages' wire form (described in agreement.hpp): little-endian, a version and
// a kind byte, failed sets as bitmaps; decoding checks every length before reading.
#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ibv/error.hpp"
#include "net/agreement.hpp"

namespace ibv::net::detail {
namespace {

constexpr std::string_view kDecode = "decode_agreement_message";
constexpr std::array<std::string_view, 10> kKindNames = {
    "reduce", "confirm", "recover",  "prepare", "promise",
    "nack",   "accept",  "accepted", "commit",  "decided"};
static_assert(kKindNames.size() == std::variant_size_v<AgreementMessage::Body>);

[[noreturn]] void bad_input(const std::string& problem, std::string_view hint = {}) {
  throw Error(ErrorKind::protocol, kDecode, EPROTO, problem, hint);
}

class Writer {
 public:
  explicit Writer(std::vector<std::byte>& out) : out_(out) {}
  void u8(std::uint8_t value) { out_.push_back(static_cast<std::byte>(value)); }
  void u32(std::uint32_t value) { little_endian(value, 4); }
  void u64(std::uint64_t value) { little_endian(value, 8); }
  void ballot(const Ballot& ballot) {
    u32(ballot.round);
    u32(ballot.rank);
  }
  void value(const AgreementValue& value) {
    u32(value.flags);
    const std::size_t length = value.failed.empty() ? 0 : (value.failed.ranks().back() / 8) + 1;
    u32(static_cast<std::uint32_t>(length));
    const std::size_t at = out_.size();
    out_.resize(at + length);
    for (const std::uint32_t rank : value.failed)
      out_[at + (rank / 8)] |= std::byte{1} << (rank % 8);
  }

  void operator()(const agreement::Reduce& m) {
    u32(m.round);
    u64(m.fingerprint);
    value(m.partial);
  }
  void operator()(const agreement::Confirm& m) {
    u32(m.round);
    u64(m.fingerprint);
  }
  void operator()(const agreement::Recover& /*unused*/) {}
  void operator()(const agreement::Prepare& m) { ballot(m.ballot); }
  void operator()(const agreement::Promise& m) {
    ballot(m.ballot);
    u8(m.accepted ? 1 : 0);
    if (m.accepted) {
      ballot(m.accepted->ballot);
      value(m.accepted->value);
    }
    value(m.contribution);
  }
  void operator()(const agreement::Nack& m) {
    ballot(m.ballot);
    ballot(m.promised);
  }
  void operator()(const agreement::Accept& m) {
    ballot(m.ballot);
    value(m.value);
  }
  void operator()(const agreement::Accepted& m) { ballot(m.ballot); }
  void operator()(const agreement::Commit& m) {
    ballot(m.ballot);
    value(m.value);
  }
  void operator()(const agreement::Decided& m) { value(m.value); }

 private:
  void little_endian(std::uint64_t value, unsigned bytes) {
    for (unsigned i = 0; i < bytes; ++i) u8(static_cast<std::uint8_t>(value >> (8U * i)));
  }
  std::vector<std::byte>& out_;
};

class Reader {
 public:
  Reader(std::span<const std::byte> in, std::string_view kind) : in_(in), kind_(kind) {}
  std::uint8_t u8(std::string_view field) { return static_cast<std::uint8_t>(get(1, field)); }
  std::uint32_t u32(std::string_view field) { return static_cast<std::uint32_t>(get(4, field)); }
  std::uint64_t u64(std::string_view field) { return get(8, field); }
  Ballot ballot(std::string_view field) {
    const std::uint32_t round = u32(field);
    return {.round = round, .rank = u32(field)};
  }
  AgreementValue value(std::string_view field) {
    AgreementValue value{.flags = u32(field), .failed = {}};
    const std::uint32_t length = u32(field);
    need(length, field);
    const auto bitmap = in_.subspan(at_, length);
    if (length > 0 && bitmap.back() == std::byte{0}) {
      bad_input(std::string("the failed-set bitmap of the ") + std::string(field) + " of a " +
                std::string(kind_) + " message ends in a zero byte (not the shortest form)");
    }
    for (std::uint32_t i = 0; i < length; ++i) {
      for (unsigned bit = 0; bit < 8; ++bit) {
        if (std::to_integer<unsigned>(bitmap[i] >> bit) & 1U) value.failed.insert((i * 8) + bit);
      }
    }
    at_ += length;
    return value;
  }
  void finish() const {
    if (at_ != in_.size()) {
      bad_input(std::to_string(in_.size() - at_) + " bytes left over after a " +
                std::string(kind_) + " message of " + std::to_string(at_) + " bytes");
    }
  }

 private:
  void need(std::size_t bytes, std::string_view field) const {
    if (in_.size() - at_ < bytes) {
      bad_input("truncated " + std::string(kind_) + " message: its " + std::string(field) +
                " needs " + std::to_string(bytes) + " bytes at offset " + std::to_string(at_) +
                ", only " + std::to_string(in_.size() - at_) + " follow");
    }
  }
  std::uint64_t get(unsigned bytes, std::string_view field) {
    need(bytes, field);
    std::uint64_t value = 0;
    for (unsigned i = 0; i < bytes; ++i) {
      value |= std::to_integer<std::uint64_t>(in_[at_ + i]) << (8U * i);
    }
    at_ += bytes;
    return value;
  }
  std::span<const std::byte> in_;
  std::string_view kind_;
  std::size_t at_ = 0;
};

AgreementMessage::Body decode_body(std::uint8_t kind, Reader& in) {
  using namespace agreement;  // NOLINT(google-build-using-namespace): the message structs
  switch (kind) {
    case 1: {
      const std::uint32_t round = in.u32("round");
      const std::uint64_t fingerprint = in.u64("fingerprint");
      return Reduce{.round = round, .fingerprint = fingerprint, .partial = in.value("partial")};
    }
    case 2: {
      const std::uint32_t round = in.u32("round");
      return Confirm{.round = round, .fingerprint = in.u64("fingerprint")};
    }
    case 3: return Recover{};
    case 4: return Prepare{in.ballot("ballot")};
    case 5: {
      Promise promise{.ballot = in.ballot("ballot"), .accepted = {}, .contribution = {}};
      const std::uint8_t has_accepted = in.u8("accepted flag");
      if (has_accepted > 1) {
        bad_input("a promise message's accepted flag is " + std::to_string(has_accepted) +
                  " (0 or 1 expected)");
      }
      if (has_accepted == 1) {
        const Ballot ballot = in.ballot("accepted ballot");
        promise.accepted = Proposal{.ballot = ballot, .value = in.value("accepted value")};
      }
      promise.contribution = in.value("contribution");
      return promise;
    }
    case 6: {
      const Ballot ballot = in.ballot("ballot");
      return Nack{.ballot = ballot, .promised = in.ballot("promised ballot")};
    }
    case 7: {
      const Ballot ballot = in.ballot("ballot");
      return Accept{.ballot = ballot, .value = in.value("value")};
    }
    case 8: return Accepted{in.ballot("ballot")};
    case 9: {
      const Ballot ballot = in.ballot("ballot");
      return Commit{.ballot = ballot, .value = in.value("value")};
    }
    default: return Decided{in.value("value")};
  }
}

}  // namespace

std::vector<std::byte> encode_agreement_message(const AgreementMessage& message) {
  std::vector<std::byte> bytes;
  Writer out(bytes);
  out.u8(Agreement::kWireVersion);
  out.u8(static_cast<std::uint8_t>(message.body.index() + 1));
  out.u64(message.instance);
  std::visit(out, message.body);
  return bytes;
}

AgreementMessage decode_agreement_message(std::span<const std::byte> bytes) {
  if (bytes.size() < 2) {
    bad_input("got " + std::to_string(bytes.size()) +
              " bytes; an agreement message starts with a version and a kind byte");
  }
  const auto version = std::to_integer<unsigned>(bytes[0]);
  if (version != Agreement::kWireVersion) {
    bad_input("the message speaks agreement protocol version " + std::to_string(version) +
                  "; this library speaks version " + std::to_string(Agreement::kWireVersion),
              "run the same ibverbs-cpp version on every rank");
  }
  const auto kind = std::to_integer<std::uint8_t>(bytes[1]);
  if (kind == 0 || kind > kKindNames.size()) {
    bad_input("unknown agreement message kind " + std::to_string(kind) + " (1.." +
              std::to_string(kKindNames.size()) + " expected)");
  }
  Reader in(bytes.subspan(2), kKindNames[kind - 1]);
  AgreementMessage message;
  message.instance = in.u64("instance");
  message.body = decode_body(kind, in);
  in.finish();
  return message;
}

}  // namespace ibv::net::detail
