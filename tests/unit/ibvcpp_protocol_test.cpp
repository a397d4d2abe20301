// SPDX-License-Identifier: MIT
// ibvcpp perf's out-of-band messages: settings and the mismatch message that names the setting,
// queue pair addresses, results; and rejecting what another program would send.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/protocol.hpp"
#include "support/text.hpp"

namespace {

using ibv_test::contains;

using ibvcpp::PeerSettings;

PeerSettings settings() { return {"write_bw", {2, 65536}, 5000, 128, 1, 1024}; }

/// The ToolError code and message of `action`.
template <typename Action>
std::pair<ibvcpp::ExitCode, std::string> tool_error(Action&& action) {
  try {
    action();
  } catch (const ibvcpp::ToolError& error) {
    return {error.code(), error.what()};
  }
  return {ibvcpp::ExitCode::ok, ""};
}

TEST(IbvcppProtocol, SettingsRoundTrip) {
  const auto text = ibvcpp::encode_settings(settings());
  EXPECT_TRUE(contains(text, "\"tool\":\"ibvcpp\"")) << text;
  EXPECT_EQ(ibvcpp::decode_settings(text), settings());
}

TEST(IbvcppProtocol, SettingsOfOptions) {
  ibvcpp::PerfOptions options;
  options.test = {ibvcpp::Verb::send, ibvcpp::Measure::lat};
  options.sizes = {2, 4};
  options.iterations = 10;
  options.tx_depth = 1;
  options.qps = 1;
  EXPECT_EQ(ibvcpp::settings_of(options, 4096), (PeerSettings{"send_lat", {2, 4}, 10, 1, 1, 4096}));
}

TEST(IbvcppProtocol, AgreeingSettingsAndTheNegotiatedMtu) {
  auto peer = settings();
  peer.mtu = 4096;  // not compared: both sides use the smaller
  EXPECT_EQ(ibvcpp::settings_mismatch(settings(), peer, true), std::nullopt);
}

TEST(IbvcppProtocol, MismatchNamesTheSettingAndBothValues) {
  auto peer = settings();
  peer.iterations = 1000;
  auto message = ibvcpp::settings_mismatch(settings(), peer, true);
  ASSERT_TRUE(message);
  EXPECT_EQ(*message,
            "settings differ: the iterations (-n; this client has 5000, the server 1000)");
  message = ibvcpp::settings_mismatch(settings(), peer, false);
  EXPECT_EQ(*message,
            "settings differ: the iterations (-n; this server has 5000, the client 1000)");

  peer = settings();
  peer.test = "read_bw";
  EXPECT_TRUE(contains(*ibvcpp::settings_mismatch(settings(), peer, true),
                       "the test (this client has write_bw, the server read_bw)"));
  peer = settings();
  peer.sizes = {65536};
  EXPECT_TRUE(contains(*ibvcpp::settings_mismatch(settings(), peer, true),
                       "the message sizes (-s/-a/--sizes; this client has 2,65536, the server "
                       "65536)"));
  peer = settings();
  peer.tx_depth = 64;
  EXPECT_TRUE(contains(*ibvcpp::settings_mismatch(settings(), peer, true), "TX depth (-t;"));
  peer = settings();
  peer.qps = 2;
  EXPECT_TRUE(contains(*ibvcpp::settings_mismatch(settings(), peer, true),
                       "number of QPs (-q; this client has 1, the server 2)"));
}

TEST(IbvcppProtocol, PostListAndCqModerationMustAgree) {
  auto listed = settings();
  listed.post_list = 16;
  listed.cq_mod = 8;
  const auto text = ibvcpp::encode_settings(listed);
  EXPECT_TRUE(contains(text, "\"post_list\":16,\"cq_mod\":8")) << text;
  EXPECT_EQ(ibvcpp::decode_settings(text), listed);
  EXPECT_EQ(*ibvcpp::settings_mismatch(listed, settings(), true),
            "settings differ: the post list (-l; this client has 16, the server 1)");
  auto moderated = settings();
  moderated.cq_mod = 8;
  EXPECT_EQ(*ibvcpp::settings_mismatch(settings(), moderated, false),
            "settings differ: the CQ moderation (-Q; this server has none, the client 8)");
  // A peer from before -l and -Q sends neither: no post list, no -Q.
  const auto old = ibvcpp::decode_settings(
      R"({"tool":"ibvcpp","protocol":1,"test":"write_bw","sizes":[2,65536],"iterations":5000,)"
      R"("tx_depth":128,"qps":1,"mtu":1024})");
  EXPECT_EQ(old, settings());
  ibvcpp::PerfOptions options;
  options.post_list = 4;
  options.cq_mod = 2;
  EXPECT_EQ(ibvcpp::settings_of(options, 1024).post_list, 4U);
  EXPECT_EQ(ibvcpp::settings_of(options, 1024).cq_mod, 2U);
}

TEST(IbvcppProtocol, RejectsOtherPrograms) {
  for (const auto* text : {"", "garbage", R"({"tool":"perftest"})", R"({"tool":"ibvcpp"})"}) {
    const auto [code, message] = tool_error([&] { (void)ibvcpp::decode_settings(text); });
    EXPECT_EQ(code, ibvcpp::ExitCode::connection) << text;
    EXPECT_TRUE(contains(message, "does not speak ibvcpp's protocol")) << message;
  }
  const auto [code, message] =
      tool_error([] { (void)ibvcpp::decode_settings(R"({"tool":"ibvcpp","protocol":99})"); });
  EXPECT_EQ(code, ibvcpp::ExitCode::connection);
  EXPECT_TRUE(contains(message, "protocol 99")) << message;
}

TEST(IbvcppProtocol, AddressesRoundTrip) {
  ibvcpp::QpAddress a;
  a.endpoint.qp_number = 0x12;
  a.endpoint.psn = 0x345678;
  a.endpoint.gid = ibv::Gid::from_string("::ffff:10.0.0.1");
  a.inbox = ibv::RemoteMemoryRegion(0x1000 + 64, 64, 7);
  a.outbox = ibv::RemoteMemoryRegion(0x1000, 64, 7);
  ibvcpp::QpAddress b = a;
  b.endpoint.qp_number = 0x13;
  const std::vector<ibvcpp::QpAddress> both{a, b};
  const auto bytes = ibvcpp::encode_addresses(both);
  EXPECT_EQ(bytes.size(), 2 * ibvcpp::kQpAddressSize);
  EXPECT_EQ(ibvcpp::decode_addresses(bytes, 2), both);
  const auto [code, message] = tool_error([&] { (void)ibvcpp::decode_addresses(bytes, 3); });
  EXPECT_EQ(code, ibvcpp::ExitCode::connection);
  EXPECT_TRUE(contains(message, "for 3 QPs")) << message;
}

TEST(IbvcppProtocol, TheTransportMustAgreeAndDatagramAddressesRoundTrip) {
  auto ud = settings();
  ud.connection = "UD";
  EXPECT_EQ(ibvcpp::decode_settings(ibvcpp::encode_settings(ud)), ud);
  EXPECT_EQ(*ibvcpp::settings_mismatch(ud, settings(), true),
            "settings differ: the transport (-c; this client has UD, the server RC)");

  ibvcpp::QpAddress a;
  a.datagram = ibv::UdAddress{};
  a.datagram->qp_number = 0x21;
  a.datagram->qkey = 0x11111111;
  a.datagram->gid = ibv::Gid::from_string("::ffff:10.0.0.2");
  a.inbox = ibv::RemoteMemoryRegion(0x2000 + 1064, 1064, 9);
  a.outbox = ibv::RemoteMemoryRegion(0x2000, 1064, 9);
  const std::vector<ibvcpp::QpAddress> one{a};
  const auto bytes = ibvcpp::encode_addresses(one);
  EXPECT_EQ(bytes.size(), ibvcpp::kQpAddressSize);
  EXPECT_EQ(ibvcpp::decode_addresses(bytes, 1, ibvcpp::Transport::ud), one);
  // Read as an RC endpoint, a UD address is refused (its MTU byte is an endpoint's reserved
  // byte): a side that thought the other ran RC would stop here, not connect to garbage.
  const auto [code, message] = tool_error([&] { (void)ibvcpp::decode_addresses(bytes, 1); });
  EXPECT_EQ(code, ibvcpp::ExitCode::connection);
  EXPECT_TRUE(contains(message, "invalid address")) << message;
}

TEST(IbvcppProtocol, ResultsRoundTrip) {
  ibvcpp::BwResult bw;
  bw.bytes = 4096;
  bw.iterations = 5000;
  bw.stats = {1.5e9, 1.25e9, 305175.78125};
  const auto bw_back = ibvcpp::decode_bw_result(ibvcpp::encode_result(bw));
  EXPECT_EQ(bw_back.bytes, 4096U);
  EXPECT_EQ(bw_back.iterations, 5000U);
  EXPECT_DOUBLE_EQ(bw_back.stats.peak_bytes_per_s, 1.5e9);
  EXPECT_DOUBLE_EQ(bw_back.stats.avg_bytes_per_s, 1.25e9);
  EXPECT_DOUBLE_EQ(bw_back.stats.msg_rate_per_s, 305175.78125);

  ibvcpp::LatResult lat;
  lat.bytes = 2;
  lat.iterations = 1000;
  lat.stats = {1.1, 9.9, 2.2, 2.5, 0.3, 4.4, 8.8};
  const auto lat_back = ibvcpp::decode_lat_result(ibvcpp::encode_result(lat));
  EXPECT_EQ(lat_back.bytes, 2U);
  EXPECT_DOUBLE_EQ(lat_back.stats.t_min_us, 1.1);
  EXPECT_DOUBLE_EQ(lat_back.stats.t_max_us, 9.9);
  EXPECT_DOUBLE_EQ(lat_back.stats.t_typical_us, 2.2);
  EXPECT_DOUBLE_EQ(lat_back.stats.t_avg_us, 2.5);
  EXPECT_DOUBLE_EQ(lat_back.stats.t_stdev_us, 0.3);
  EXPECT_DOUBLE_EQ(lat_back.stats.p99_us, 4.4);
  EXPECT_DOUBLE_EQ(lat_back.stats.p999_us, 8.8);

  const auto [code, message] = tool_error([] { (void)ibvcpp::decode_lat_result("{}"); });
  EXPECT_EQ(code, ibvcpp::ExitCode::run_failed);
  EXPECT_TRUE(contains(message, "malformed result")) << message;
}

}  // namespace
