// SPDX-License-Identifier: MIT
// Tests Wire<T>, the byte encodings of the exchanger: which types have one (the concept), the
// exact layouts, round trips, a user specialization, and the rejection of truncated, oversized
// and left-over input.
#include "ibv/net/wire.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/verbs/endpoint.hpp"
#include "ibv/verbs/gid.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "support/error_matchers.hpp"

// A type of the user's, with a Wire specialization built on the provided encodings.
namespace wire_test {
struct Sample {
  std::uint32_t id = 0;
  std::string name;
  friend bool operator==(const Sample&, const Sample&) = default;
};
}  // namespace wire_test

namespace ibv::net {
template <>
struct Wire<wire_test::Sample> {
  static std::vector<std::byte> encode(const wire_test::Sample& sample) {
    std::vector<std::byte> bytes = Wire<std::uint32_t>::encode(sample.id);
    const std::vector<std::byte> name = Wire<std::string>::encode(sample.name);
    bytes.insert(bytes.end(), name.begin(), name.end());
    return bytes;
  }
  static wire_test::Sample decode(std::span<const std::byte> bytes) {
    if (bytes.size() < 4) wire_detail::reject("Wire<Sample>::decode", "too short");
    return {.id = Wire<std::uint32_t>::decode(bytes.first(4)),
            .name = Wire<std::string>::decode(bytes.subspan(4))};
  }
};
}  // namespace ibv::net

namespace {

using ibv::ErrorKind;
using ibv::net::Wire;
using ibv::net::WireSerializable;
using ibv_test::throws_error;

std::vector<std::byte> bytes_of(std::initializer_list<unsigned> values) {
  std::vector<std::byte> bytes;
  for (const unsigned value : values) bytes.push_back(static_cast<std::byte>(value));
  return bytes;
}

template <typename T>
T round_trip(const T& value) {
  return Wire<T>::decode(Wire<T>::encode(value));
}

ibv::Endpoint endpoint(std::uint32_t n) {
  ibv::Endpoint value;
  value.qp_number = 0x100 + n;
  value.lid = static_cast<std::uint16_t>(n);
  value.gid = ibv::Gid::from_string("fe80::" + std::to_string(n + 1));
  value.psn = 0x2000 + n;
  return value;
}

// --- which types travel ------------------------------------------------------------------------

static_assert(WireSerializable<ibv::Endpoint>);
static_assert(WireSerializable<ibv::RemoteMemoryRegion>);
static_assert(WireSerializable<std::string>);
static_assert(WireSerializable<std::vector<std::byte>>);
static_assert(WireSerializable<std::uint8_t>);
static_assert(WireSerializable<std::uint16_t>);
static_assert(WireSerializable<std::uint32_t>);
static_assert(WireSerializable<std::uint64_t>);
static_assert(WireSerializable<std::vector<std::uint32_t>>);
static_assert(WireSerializable<std::vector<std::vector<std::string>>>);
static_assert(WireSerializable<std::vector<ibv::Endpoint>>);
static_assert(WireSerializable<wire_test::Sample>);
static_assert(WireSerializable<std::vector<wire_test::Sample>>);
static_assert(!WireSerializable<int>);
static_assert(!WireSerializable<bool>);
static_assert(!WireSerializable<double>);
static_assert(!WireSerializable<std::vector<int>>);
static_assert(!WireSerializable<ibv::Gid>);

// --- unsigned integers -------------------------------------------------------------------------

TEST(Wire, UnsignedIntegersAreBigEndianOfTheirOwnSize) {
  EXPECT_EQ(Wire<std::uint32_t>::encode(0x01020304U), bytes_of({1, 2, 3, 4}));
  EXPECT_EQ(Wire<std::uint16_t>::encode(std::uint16_t{0xABCD}), bytes_of({0xAB, 0xCD}));
  EXPECT_EQ(Wire<std::uint8_t>::encode(std::uint8_t{7}), bytes_of({7}));
  EXPECT_EQ(Wire<std::uint64_t>::encode(0x0102030405060708ULL), bytes_of({1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(Wire, UnsignedIntegersRoundTrip) {
  for (const std::uint64_t value : {0ULL, 1ULL, 0xFFFFFFFFFFFFFFFFULL, 0x8000000000000001ULL}) {
    EXPECT_EQ(round_trip(value), value);
  }
  EXPECT_EQ(round_trip(std::uint32_t{0xDEADBEEF}), 0xDEADBEEFU);
  EXPECT_EQ(round_trip(std::uint16_t{0}), 0U);
}

TEST(Wire, UnsignedIntegerOfTheWrongSizeIsRejected) {
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [] {
                             static_cast<void>(Wire<std::uint32_t>::decode(bytes_of({1, 2, 3})));
                           },
                           {"expected 4 bytes", "32-bit", "got 3"}));
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [] {
                             static_cast<void>(Wire<std::uint16_t>::decode(bytes_of({1, 2, 3, 4})));
                           },
                           {"expected 2 bytes", "got 4"}));
}

// --- strings and bytes ------------------------------------------------------------------------

TEST(Wire, StringsAreTheirBytes) {
  EXPECT_EQ(Wire<std::string>::encode("IBV"), bytes_of({'I', 'B', 'V'}));
  EXPECT_TRUE(Wire<std::string>::encode("").empty());
  const std::string binary("a\0b\xff", 4);
  EXPECT_EQ(round_trip(binary), binary);
  EXPECT_EQ(round_trip(std::string()), "");
  EXPECT_EQ(round_trip(std::string(100000, 'x')), std::string(100000, 'x'));
}

TEST(Wire, ByteVectorsAreAsTheyAre) {
  const std::vector<std::byte> bytes = bytes_of({0, 1, 0xff, 0x80});
  EXPECT_EQ(Wire<std::vector<std::byte>>::encode(bytes), bytes);
  EXPECT_EQ(round_trip(bytes), bytes);
  EXPECT_TRUE(round_trip(std::vector<std::byte>{}).empty());
}

// --- types with to_bytes() / from_bytes() ------------------------------------------------------

TEST(Wire, EndpointUsesItsOwnBinaryForm) {
  const ibv::Endpoint value = endpoint(3);
  const auto own = value.to_bytes();
  EXPECT_EQ(Wire<ibv::Endpoint>::encode(value), std::vector<std::byte>(own.begin(), own.end()));
  EXPECT_EQ(round_trip(value), value);
}

TEST(Wire, RemoteMemoryRegionUsesItsOwnBinaryForm) {
  const ibv::RemoteMemoryRegion value(0x7f0000001000, 65536, 0xabcd);
  const auto own = value.to_bytes();
  EXPECT_EQ(Wire<ibv::RemoteMemoryRegion>::encode(value),
            std::vector<std::byte>(own.begin(), own.end()));
  EXPECT_EQ(round_trip(value), value);
}

TEST(Wire, FromBytesErrorsPassThrough) {
  EXPECT_TRUE(throws_error(ErrorKind::invalid_argument,
                           [] {
                             static_cast<void>(Wire<ibv::Endpoint>::decode(bytes_of({1, 0, 0})));
                           },
                           {"expected 28 bytes, got 3"}));
}

// --- user types -------------------------------------------------------------------------------

TEST(Wire, UserSpecializationRoundTripsAlsoInsideVectors) {
  const wire_test::Sample sample{.id = 42, .name = "detector 7"};
  EXPECT_EQ(round_trip(sample), sample);
  const std::vector<wire_test::Sample> samples = {
      sample, {.id = 0, .name = ""}, {.id = 9, .name = "x"}};
  EXPECT_EQ(round_trip(samples), samples);
}

// --- vectors -----------------------------------------------------------------------------------

TEST(Wire, VectorLayoutIsCountThenLengthPrefixedElements) {
  const std::vector<std::uint16_t> values = {1, 0x0203};
  EXPECT_EQ(Wire<std::vector<std::uint16_t>>::encode(values),
            bytes_of({0, 0, 0, 2, 0, 0, 0, 2, 0, 1, 0, 0, 0, 2, 2, 3}));
  EXPECT_EQ(Wire<std::vector<std::uint16_t>>::encode({}), bytes_of({0, 0, 0, 0}));
}

TEST(Wire, VectorsRoundTrip) {
  const std::vector<std::string> strings = {"", "a", std::string(1000, 'z')};
  EXPECT_EQ(round_trip(strings), strings);
  const std::vector<std::vector<std::uint32_t>> nested = {{}, {1, 2, 3}, {0xFFFFFFFF}};
  EXPECT_EQ(round_trip(nested), nested);
  const std::vector<ibv::Endpoint> endpoints = {endpoint(0), endpoint(1), endpoint(2)};
  EXPECT_EQ(round_trip(endpoints), endpoints);
  EXPECT_TRUE(round_trip(std::vector<std::string>{}).empty());
}

TEST(Wire, VectorShorterThanItsCountIsRejected) {
  EXPECT_TRUE(
      throws_error(ErrorKind::protocol,
                   [] {
                     static_cast<void>(Wire<std::vector<std::string>>::decode(bytes_of({0, 0, 1})));
                   },
                   {"got 3 bytes", "4-byte element count"}));
}

TEST(Wire, HugeCountIsRejectedBeforeAllocating) {
  // 4294967295 elements would need 16 GiB of lengths alone; 8 bytes follow.
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [] {
                             static_cast<void>(Wire<std::vector<std::string>>::decode(
                                 bytes_of({0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})));
                           },
                           {"element count 4294967295", "only 8 follow"}));
}

TEST(Wire, ElementLongerThanTheRestIsRejected) {
  // One element claiming 100 bytes, 2 present.
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [] {
                             static_cast<void>(Wire<std::vector<std::string>>::decode(
                                 bytes_of({0, 0, 0, 1, 0, 0, 0, 100, 'h', 'i'})));
                           },
                           {"element 0 of 1 claims 100 bytes", "only 2 remain"}));
}

TEST(Wire, TruncatedElementLengthIsRejected) {
  // Count 2 (8 bytes follow, enough for two lengths), element 0 = "a", then 3 bytes: element
  // 1's length is cut short.
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [] {
                             static_cast<void>(Wire<std::vector<std::string>>::decode(
                                 bytes_of({0, 0, 0, 2, 0, 0, 0, 1, 'a', 0, 0, 0})));
                           },
                           {"element 1 of 2 has no room for its length"}));
}

TEST(Wire, LeftOverBytesAreRejected) {
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [] {
                             static_cast<void>(Wire<std::vector<std::string>>::decode(
                                 bytes_of({0, 0, 0, 1, 0, 0, 0, 1, 'a', 'b', 'c'})));
                           },
                           {"2 bytes left over after the 1 elements"}));
}

TEST(Wire, ElementDecodeErrorsPassThrough) {
  // One element of 3 bytes where a u32 needs 4.
  EXPECT_TRUE(throws_error(ErrorKind::protocol,
                           [] {
                             static_cast<void>(Wire<std::vector<std::uint32_t>>::decode(
                                 bytes_of({0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 3})));
                           },
                           {"expected 4 bytes", "got 3"}));
}

}  // namespace
