// SPDX-License-Identifier: MIT
// Unit tests of the rdma_cm layer's pure checks: IP address literals and ConnectOptions, which
// Channel::connect and ChannelListener reject before they create anything, and the kind an
// rdma_cm call's errno becomes.
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cerrno>
#include <string>

#include <gtest/gtest.h>

#include "cm/address.hpp"
#include "cm/cm_id.hpp"
#include "ibv/error.hpp"

namespace ibv::detail {
namespace {

using namespace std::chrono_literals;

ErrorKind kind_of(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.kind();
  }
  return ErrorKind::unsupported;  // "did not throw"
}

TEST(CmAddress, ParsesIpv4WithThePort) {
  auto address = parse_address("10.0.0.1", 7471, "test", false);
  const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
  EXPECT_EQ(in->sin_family, AF_INET);
  EXPECT_EQ(ntohs(in->sin_port), 7471);
  EXPECT_EQ(ntohl(in->sin_addr.s_addr), 0x0A000001U);
  EXPECT_EQ(address.text, "10.0.0.1:7471");
}

TEST(CmAddress, ParsesIpv6WithOrWithoutBrackets) {
  for (const char* text : {"fe80::1", "[fe80::1]"}) {
    auto address = parse_address(text, 1, "test", false);
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    EXPECT_EQ(in6->sin6_family, AF_INET6) << text;
    EXPECT_EQ(ntohs(in6->sin6_port), 1) << text;
    EXPECT_EQ(address.text, "[fe80::1]:1") << text;
  }
}

TEST(CmAddress, RejectsNamesAndMalformedAddresses) {
  for (const char* text : {"", "server.example", "10.0.0", "10.0.0.256", "10.0.0.1:7471",
                           " 10.0.0.1", "[10.0.0.1]", "fe80::1::2", "[]", "*"}) {
    EXPECT_EQ(kind_of([&] { (void)parse_address(text, 1, "test", false); }),
              ErrorKind::invalid_argument)
        << '"' << text << '"';
  }
  try {
    (void)parse_address("server.example", 1, "Channel::connect", false);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("server.example"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("not resolved"), std::string::npos) << e.what();
  }
}

TEST(CmAddress, ListenersTakeTheWildcards) {
  for (const char* text : {"", "*", "0.0.0.0"}) {
    auto address = parse_address(text, 0, "test", true);
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    EXPECT_EQ(in->sin_family, AF_INET) << text;
    EXPECT_EQ(in->sin_addr.s_addr, htonl(INADDR_ANY)) << text;
    EXPECT_TRUE(is_any_address(text)) << text;
  }
  EXPECT_EQ(parse_address("::", 0, "test", true).storage.ss_family, AF_INET6);
  EXPECT_FALSE(is_any_address("10.0.0.1"));
}

/// The message of the Error `call` throws ("" when it throws none).
std::string message_of(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CmMulticastGroup, TakesIpv4AndIpv6MulticastLiterals) {
  // Both ends of 224.0.0.0/4, and ff00::/8 with and without brackets.
  for (const char* text : {"224.0.0.0", "239.1.2.3", "239.255.255.255", "224.0.0.1"}) {
    auto address = parse_multicast_group(text, "test");
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    EXPECT_EQ(in->sin_family, AF_INET) << text;
    EXPECT_EQ(in->sin_port, 0) << text;
    EXPECT_EQ(address.text, text);
  }
  const auto parsed = parse_multicast_group("239.1.2.3", "test");
  EXPECT_EQ(ntohl(reinterpret_cast<const sockaddr_in*>(&parsed.storage)->sin_addr.s_addr),
            0xEF010203U);
  for (const char* text : {"ff0e::1", "[ff02::1:2]", "ff12:401b:ffff::1"}) {
    auto address = parse_multicast_group(text, "test");
    EXPECT_EQ(address.storage.ss_family, AF_INET6) << text;
    EXPECT_EQ(address.text.front(), 'f') << text;  // brackets dropped
  }
}

TEST(CmMulticastGroup, RefusesWhatIsNoGroupAndSaysWhy) {
  // Just outside 224.0.0.0/4 on both sides, unicast, wildcard, broadcast, names, ports, junk.
  for (const char* text : {"223.255.255.255", "240.0.0.0", "10.0.0.1", "0.0.0.0", "255.255.255.255",
                           "fe80::1", "::", "::ffff:239.1.2.3", ""}) {
    EXPECT_EQ(kind_of([&] { (void)parse_multicast_group(text, "test"); }),
              ErrorKind::invalid_argument)
        << '"' << text << '"';
  }
  EXPECT_NE(message_of([] { (void)parse_multicast_group("10.0.0.1", "MulticastGroup"); })
                .find("group \"10.0.0.1\" is not a multicast address: IPv4 groups are "
                      "224.0.0.0 to 239.255.255.255"),
            std::string::npos);
  EXPECT_NE(message_of([] {
              (void)parse_multicast_group("fe80::1", "MulticastGroup");
            }).find("IPv6 groups start with ff"),
            std::string::npos);
  for (const char* text : {"group.example", "239.1.2.3:4791", "239.1.2", " 239.1.2.3"}) {
    const std::string message =
        message_of([&] { (void)parse_multicast_group(text, "MulticastGroup"); });
    EXPECT_NE(message.find("is not an IPv4 or IPv6 multicast address literal"), std::string::npos)
        << message;
    EXPECT_NE(message.find(std::string("\"") + text + "\""), std::string::npos) << message;
  }
  // A huge or binary text is quoted briefly.
  const std::string huge(100000, '9');
  const std::string message = message_of([&] { (void)parse_multicast_group(huge, "test"); });
  EXPECT_LT(message.size(), 400U) << message;
  EXPECT_NE(message.find("(100000 bytes)"), std::string::npos) << message;
  EXPECT_EQ(
      kind_of([] { (void)parse_multicast_group(std::string_view("239.1.2.3\0x", 11), "test"); }),
      ErrorKind::invalid_argument);
}

TEST(CmOptions, DefaultsPass) { EXPECT_NO_THROW(check_options(ConnectOptions{}, "test")); }

TEST(CmOptions, EveryTimeoutMustBePositive) {
  using Field = Duration ConnectOptions::*;
  for (Field field : {&ConnectOptions::address_timeout, &ConnectOptions::route_timeout,
                      &ConnectOptions::connect_timeout}) {
    for (auto value : {0ms, -5ms}) {
      ConnectOptions options;
      options.*field = value;
      EXPECT_EQ(kind_of([&] { check_options(options, "test"); }), ErrorKind::invalid_argument);
    }
  }
  ConnectOptions options;
  options.channel.timeouts.operation = 0ms;
  EXPECT_EQ(kind_of([&] { check_options(options, "test"); }), ErrorKind::invalid_argument);
  options = {};
  options.channel.timeouts.drop = -1ms;
  EXPECT_EQ(kind_of([&] { check_options(options, "test"); }), ErrorKind::invalid_argument);
  EXPECT_EQ(kind_of([] { check_positive(0ms, "timeout", "test"); }), ErrorKind::invalid_argument);
}

// An address with no route through an RDMA device, one that no host answers for, and a refused
// connection could not be made: connection errors. A peer that does not answer in time is a
// timeout. (Which errno a real network gives is for the device test
// Cm.UnreachableAddressFailsWithinItsTimeouts.)
TEST(CmError, NoRouteAndARefusalAreConnectionErrorsAndSilenceIsATimeout) {
  for (const int errno_value : {ENETUNREACH, EHOSTUNREACH, ECONNREFUSED}) {
    SCOPED_TRACE(errno_value);
    EXPECT_EQ(kind_of([&] { throw_cm_error("rdma_resolve_addr", errno_value, "resolving x"); }),
              ErrorKind::connection);
  }
  EXPECT_EQ(kind_of([] { throw_cm_error("rdma_connect", ETIMEDOUT, "connecting to x"); }),
            ErrorKind::timeout);
  try {
    throw_cm_error("rdma_resolve_addr", ENETUNREACH, "resolving 192.0.2.1:7471");
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rdma_resolve_addr failed: resolving 192.0.2.1:7471"), std::string::npos)
        << what;
    EXPECT_EQ(e.errno_value(), ENETUNREACH) << what;
  }
}

TEST(CmOptions, GidIndexAndCompletionQueueSize) {
  ConnectOptions options;
  options.channel.queue_pair.gid_index = 1;
  EXPECT_EQ(kind_of([&] { check_options(options, "test"); }), ErrorKind::invalid_argument);
  options = {};
  options.channel.completion_queue_size = 0;
  EXPECT_EQ(kind_of([&] { check_options(options, "test"); }), ErrorKind::invalid_argument);
  options.channel.completion_queue_size = 512;
  EXPECT_NO_THROW(check_options(options, "test"));
}

}  // namespace
}  // namespace ibv::detail
