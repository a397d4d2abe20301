// SPDX-License-Identifier: MIT
// Wire<T>: how a value travels as bytes through the out-of-band exchanger
// (ibv::net::Exchanger::exchange<T>), with the encodings for the library's own types, strings,
// byte vectors, unsigned integers and vectors of anything that has an encoding.
#pragma once

#include <cerrno>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "ibv/error.hpp"

namespace ibv::net {

/// The byte encoding of a T for the exchanger: a specialization provides
///
///   static std::vector<std::byte> encode(const T& value);
///   static T decode(std::span<const std::byte> bytes);  // throws ibv::Error on bad input
///
/// where decode(encode(v)) == v and decode() accepts exactly the bytes encode() made: it gets
/// the whole message a peer sent (no more, no less) and must reject anything else, preferably
/// with ibv::Error of kind protocol (errno EPROTO) saying what is wrong, since the bytes come from
/// another process, as the decodes below do (test: `Wire.UnsignedIntegerOfTheWrongSizeIsRejected`).
///
/// Provided here: types with to_bytes() (a contiguous range of std::byte) and a static
/// from_bytes(std::span<const std::byte>), such as ibv::Endpoint and ibv::RemoteMemoryRegion;
/// std::string and std::vector<std::byte> (the bytes as they are); unsigned integers
/// (big-endian, exactly sizeof(T) bytes); and std::vector<T> of any such T (a u32 count, then
/// each element as a u32 length and its encoding, big-endian; decode checks every length against
/// the bytes that are actually there before allocating).
///
/// For a type of your own, either give it to_bytes()/from_bytes() members, or specialize Wire
/// in namespace ibv::net before the first exchange<T>() of that type, e.g. by building on the
/// encodings above:
///
///   struct Sample { std::uint32_t id; std::string name; };
///   namespace ibv::net {
///   template <>
///   struct Wire<Sample> {
///     static std::vector<std::byte> encode(const Sample& s) {
///       return Wire<std::vector<std::string>>::encode({std::to_string(s.id), s.name});
///     }
///     static Sample decode(std::span<const std::byte> bytes) { ... }
///   };
///   }  // namespace ibv::net
template <typename T>
struct Wire;

/// True when Wire<T> exists with the encode() and decode() described at Wire.
template <typename T>
concept WireSerializable = requires(const T& value, std::span<const std::byte> bytes) {
  { Wire<T>::encode(value) } -> std::same_as<std::vector<std::byte>>;
  { Wire<T>::decode(bytes) } -> std::same_as<T>;
};

/// A type with its own binary form: to_bytes() gives a contiguous range of std::byte and
/// T::from_bytes(std::span<const std::byte>) parses it back (ibv::Endpoint,
/// ibv::RemoteMemoryRegion).
template <typename T>
concept ByteConvertible = requires(const T& value, std::span<const std::byte> bytes) {
  { value.to_bytes() } -> std::ranges::contiguous_range;
  requires std::same_as<std::ranges::range_value_t<decltype(value.to_bytes())>, std::byte>;
  { T::from_bytes(bytes) } -> std::same_as<T>;
};

namespace wire_detail {

/// Throws the protocol Error of a decode that got bytes it can not accept (test:
/// `Wire.UnsignedIntegerOfTheWrongSizeIsRejected`).
[[noreturn]] inline void reject(std::string_view operation, const std::string& problem) {
  throw Error(ErrorKind::protocol, operation, EPROTO, problem);
}

/// Appends `value` as 4 bytes, most significant first.
inline void put_u32(std::vector<std::byte>& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) {
    out.push_back(static_cast<std::byte>((value >> static_cast<unsigned>(shift)) & 0xffU));
  }
}

/// Reads 4 bytes, most significant first; `in` holds at least 4.
[[nodiscard]] inline std::uint32_t get_u32(std::span<const std::byte> in) noexcept {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) value = (value << 8U) | std::to_integer<std::uint32_t>(in[i]);
  return value;
}

/// Checks that `size` fits the u32 of the vector encoding.
inline std::uint32_t checked_u32(std::string_view what, std::size_t size) {
  if (size > std::numeric_limits<std::uint32_t>::max()) {
    throw_invalid_argument("Wire<std::vector<T>>::encode", what,
                           std::to_string(size) + " does not fit the 32 bits of the encoding");
  }
  return static_cast<std::uint32_t>(size);
}

}  // namespace wire_detail

/// Types with to_bytes() and from_bytes(): those bytes as they are.
template <ByteConvertible T>
struct Wire<T> {
  /// value.to_bytes() as a vector.
  static std::vector<std::byte> encode(const T& value) {
    const auto bytes = value.to_bytes();
    return {std::ranges::begin(bytes), std::ranges::end(bytes)};
  }
  /// T::from_bytes(bytes); its errors pass through.
  static T decode(std::span<const std::byte> bytes) { return T::from_bytes(bytes); }
};

/// Unsigned integers (not bool): sizeof(T) bytes, big-endian.
template <typename T>
requires(std::unsigned_integral<T> && !std::same_as<T, bool>) struct Wire<T> {
  /// The sizeof(T) bytes of `value`, most significant first.
  static std::vector<std::byte> encode(const T& value) {
    std::vector<std::byte> bytes(sizeof(T));
    auto rest = static_cast<std::uintmax_t>(value);
    for (std::size_t i = sizeof(T); i-- > 0;) {
      bytes[i] = static_cast<std::byte>(rest & 0xffU);
      rest >>= 8U;
    }
    return bytes;
  }
  /// Throws ibv::Error (protocol) unless `bytes` holds exactly sizeof(T) bytes (test:
  /// `Wire.UnsignedIntegerOfTheWrongSizeIsRejected`).
  static T decode(std::span<const std::byte> bytes) {
    if (bytes.size() != sizeof(T)) {
      wire_detail::reject("Wire<unsigned integer>::decode",
                          "expected " + std::to_string(sizeof(T)) + " bytes (a big-endian " +
                              std::to_string(sizeof(T) * 8) + "-bit unsigned integer), got " +
                              std::to_string(bytes.size()));
    }
    std::uintmax_t value = 0;
    for (const std::byte b : bytes) value = (value << 8U) | std::to_integer<std::uintmax_t>(b);
    return static_cast<T>(value);
  }
};

/// Strings: their bytes, no terminator. Any bytes decode (no UTF-8 check).
template <>
struct Wire<std::string> {
  /// The characters as bytes.
  static std::vector<std::byte> encode(const std::string& value) {
    const auto bytes = std::as_bytes(std::span(value));
    return {bytes.begin(), bytes.end()};
  }
  /// The bytes as characters.
  static std::string decode(std::span<const std::byte> bytes) {
    std::string text(bytes.size(), '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      text[i] = static_cast<char>(std::to_integer<unsigned char>(bytes[i]));
    }
    return text;
  }
};

/// Byte vectors: as they are.
template <>
struct Wire<std::vector<std::byte>> {
  /// A copy of `value`.
  static std::vector<std::byte> encode(const std::vector<std::byte>& value) { return value; }
  /// A copy of `bytes`.
  static std::vector<std::byte> decode(std::span<const std::byte> bytes) {
    return {bytes.begin(), bytes.end()};
  }
};

/// Vectors of any WireSerializable T: a u32 element count, then every element as a u32 length
/// and its encoding (big-endian).
template <WireSerializable T>
struct Wire<std::vector<T>> {
  /// Throws ibv::Error (invalid_argument) for more than 2^32 - 1 elements or an element
  /// encoding of more than 2^32 - 1 bytes (untested: `invalid_argument`, no test makes 2^32
  /// elements or an element of 4 GiB).
  static std::vector<std::byte> encode(const std::vector<T>& values) {
    std::vector<std::byte> out;
    wire_detail::put_u32(out, wire_detail::checked_u32("element count", values.size()));
    for (const T& value : values) {
      const std::vector<std::byte> element = Wire<T>::encode(value);
      wire_detail::put_u32(out, wire_detail::checked_u32("element size", element.size()));
      out.insert(out.end(), element.begin(), element.end());
    }
    return out;
  }

  /// Throws ibv::Error (protocol) when the count or a length claims more bytes than there are,
  /// or bytes are left over (tests: `Wire.VectorShorterThanItsCountIsRejected`,
  /// `Wire.HugeCountIsRejectedBeforeAllocating`, `Wire.LeftOverBytesAreRejected`); an element's own
  /// decode errors pass through. The count is checked against the bytes present before anything is
  /// allocated.
  static std::vector<T> decode(std::span<const std::byte> bytes) {
    constexpr std::string_view kOperation = "Wire<std::vector<T>>::decode";
    if (bytes.size() < 4) {
      wire_detail::reject(kOperation, "got " + std::to_string(bytes.size()) +
                                          " bytes; a vector starts with a 4-byte element count");
    }
    const std::uint32_t count = wire_detail::get_u32(bytes);
    std::span<const std::byte> rest = bytes.subspan(4);
    if (count > rest.size() / 4) {
      wire_detail::reject(kOperation,
                          "the element count " + std::to_string(count) + " needs at least " +
                              std::to_string(std::size_t{count} * 4) + " more bytes, but only " +
                              std::to_string(rest.size()) + " follow");
    }
    std::vector<T> values;
    values.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      if (rest.size() < 4) {
        wire_detail::reject(kOperation, "element " + std::to_string(i) + " of " +
                                            std::to_string(count) + " has no room for its length");
      }
      const std::uint32_t length = wire_detail::get_u32(rest);
      rest = rest.subspan(4);
      if (length > rest.size()) {
        wire_detail::reject(kOperation, "element " + std::to_string(i) + " of " +
                                            std::to_string(count) + " claims " +
                                            std::to_string(length) + " bytes, but only " +
                                            std::to_string(rest.size()) + " remain");
      }
      values.push_back(Wire<T>::decode(rest.first(length)));
      rest = rest.subspan(length);
    }
    if (!rest.empty()) {
      wire_detail::reject(kOperation, std::to_string(rest.size()) + " bytes left over after the " +
                                          std::to_string(count) + " elements");
    }
    return values;
  }
};

}  // namespace ibv::net
