// SPDX-License-Identifier: MIT
// ibvcpp's reports for a fixed set of results: perftest's text layout (rows compared with lines
// perftest 6.06 printed), the header, the JSON document and its schema, progress lines, and the
// devices listing as text and JSON.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ibvcpp/devices.hpp"
#include "ibvcpp/report.hpp"
#include "support/text.hpp"

namespace {

using ibv_test::contains;

using ibvcpp::BwResult;
using ibvcpp::LatResult;
using ibvcpp::Measure;
using ibvcpp::RunInfo;
using ibvcpp::Verb;

RunInfo write_bw_client() {
  RunInfo info;
  info.test = {Verb::write, Measure::bw};
  info.client = true;
  info.device = "rxe0";
  info.link_layer = "Ethernet";
  info.mtu = 1024;
  info.gid_index = 1;
  info.qps = 1;
  info.iterations = 2000;
  info.tx_depth = 128;
  info.cq_moderation = 1;
  info.inline_size = 0;
  return info;
}

/// 36.75 and 26.5 MB/sec exactly, 418 messages per second.
BwResult bw_result() {
  BwResult result;
  result.bytes = 65536;
  result.iterations = 2000;
  result.stats.peak_bytes_per_s = 36.75 * 1048576;
  result.stats.avg_bytes_per_s = 26.5 * 1048576;
  result.stats.msg_rate_per_s = 418;
  return result;
}

LatResult lat_result() {
  LatResult result;
  result.bytes = 2;
  result.iterations = 200;
  result.stats = {23.17, 13687.63, 3938.96, 3106.46, 2322.31, 10345.27, 13687.63};
  return result;
}

TEST(IbvcppReport, BandwidthRowHasPerftestsLayout) {
  // perftest 6.06: " 65536      2000             35.04              26.11  \t\t   0.000418"
  EXPECT_EQ(ibvcpp::format_row(bw_result(), false),
            " 65536      2000             36.75              26.50  \t\t   0.000418\n");
}

TEST(IbvcppReport, BandwidthRowInGigabits) {
  auto result = bw_result();
  result.stats.peak_bytes_per_s = 125e6 * 2.5;  // 2.5 Gb/sec
  result.stats.avg_bytes_per_s = 125e6 * 1.25;
  EXPECT_EQ(ibvcpp::format_row(result, true),
            " 65536      2000             2.50               1.25   \t\t   0.000418\n");
  // Below 0.1 Gb/sec perftest switches to six decimals.
  result.stats.peak_bytes_per_s = 125e6 * 0.0625;
  result.stats.avg_bytes_per_s = 125e6 * 0.03125;
  EXPECT_EQ(ibvcpp::format_row(result, true),
            " 65536      2000           0.062500            0.031250            0.000418\n");
}

TEST(IbvcppReport, LatencyRowHasPerftestsLayout) {
  // perftest 6.06 printed exactly this line for these figures.
  EXPECT_EQ(ibvcpp::format_row(lat_result()),
            " 2       200          23.17          13687.63      3938.96  \t       3106.46     "
            "\t2322.31\t\t10345.27 \t\t13687.63\n");
}

TEST(IbvcppReport, ColumnTitles) {
  auto info = write_bw_client();
  EXPECT_EQ(ibvcpp::format_column_titles(info),
            " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
  info.report_gbits = true;
  EXPECT_TRUE(contains(ibvcpp::format_column_titles(info), "BW average[Gb/sec]"));
  info.test = {Verb::send, Measure::lat};
  EXPECT_EQ(ibvcpp::format_column_titles(info),
            " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
            "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n");
}

TEST(IbvcppReport, HeaderOfAClient) {
  const auto header = ibvcpp::format_header(write_bw_client());
  EXPECT_EQ(ibvcpp::result_line(), std::string(87, '-') + "\n");
  EXPECT_EQ(header.rfind(ibvcpp::result_line(), 0), 0U);  // starts with the separator
  EXPECT_TRUE(contains(header, "                    RDMA_Write BW Test\n"));
  EXPECT_TRUE(contains(header, " Dual-port       : OFF\t\tDevice         : rxe0\n"));
  EXPECT_TRUE(contains(header, " Number of qps   : 1\t\tTransport type : IB\n"));
  EXPECT_TRUE(contains(header, " TX depth        : 128\n"));
  EXPECT_TRUE(contains(header, " CQ Moderation   : 1\n"));
  EXPECT_TRUE(contains(header, " Mtu             : 1024[B]\n"));
  EXPECT_TRUE(contains(header, " Link type       : Ethernet\n"));
  EXPECT_TRUE(contains(header, " GID index       : 1\n"));
  EXPECT_TRUE(contains(header, " Max inline data : 0[B]\n"));
  EXPECT_TRUE(contains(header, " Post interface  : classic\n"));
  EXPECT_FALSE(contains(header, "RX depth"));
  EXPECT_FALSE(contains(header, "Outstand reads"));
  EXPECT_TRUE(contains(header, " rdma_cm QPs\t : OFF\n Data ex. method : Ethernet\n"));
}

TEST(IbvcppReport, HeaderSaysWhenRdmaCmConnectedTheQueuePairs) {
  auto info = write_bw_client();
  info.rdma_cm = true;
  const auto header = ibvcpp::format_header(info);
  EXPECT_TRUE(contains(header, " rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n")) << header;
}

TEST(IbvcppReport, HeaderAndJsonNameThePostInterface) {
  auto info = write_bw_client();
  info.post_interface = ibv::PostInterface::extended;
  EXPECT_TRUE(contains(ibvcpp::format_header(info), " Post interface  : extended\n"));
  const auto doc = nlohmann::json::parse(ibvcpp::format_json(info, std::vector<BwResult>{}));
  EXPECT_EQ(doc["post_interface"], "extended");
}

TEST(IbvcppReport, HeaderOfAServerAndOfOtherTests) {
  auto info = write_bw_client();
  info.client = false;
  info.test = {Verb::send, Measure::bw};
  info.rx_depth = 512;
  info.cq_moderation = 100;
  info.cq_moderation_large = 1;
  info.gid_index.reset();
  auto header = ibvcpp::format_header(info);
  EXPECT_TRUE(contains(header, "Send BW Test"));
  EXPECT_FALSE(contains(header, "TX depth"));  // perftest shows it on the client only
  EXPECT_TRUE(contains(header, " RX depth        : 512\n"));
  EXPECT_TRUE(contains(header, " CQ Moderation   : 100 (1 above 8192 B)\n"));
  EXPECT_FALSE(contains(header, "GID index"));

  info.test = {Verb::read, Measure::lat};
  info.outstanding_reads = 128;
  header = ibvcpp::format_header(info);
  EXPECT_TRUE(contains(header, "RDMA_Read Latency Test"));
  EXPECT_TRUE(contains(header, " Outstand reads  : 128\n"));
  EXPECT_FALSE(contains(header, "Max inline data"));
  EXPECT_FALSE(contains(header, "CQ Moderation"));  // bandwidth tests only
}

TEST(IbvcppReport, BandwidthJson) {
  const std::vector<BwResult> results{bw_result()};
  const auto text = ibvcpp::format_json(write_bw_client(), results);
  ASSERT_EQ(text.back(), '\n');
  const auto doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["tool"], "ibvcpp");
  EXPECT_EQ(doc["test"], "write_bw");
  EXPECT_EQ(doc["role"], "client");
  EXPECT_EQ(doc["device"], "rxe0");
  EXPECT_EQ(doc["ib_port"], 1);
  EXPECT_EQ(doc["link_layer"], "Ethernet");
  EXPECT_EQ(doc["gid_index"], 1);
  EXPECT_EQ(doc["mtu"], 1024);
  EXPECT_EQ(doc["qps"], 1);
  EXPECT_EQ(doc["tx_depth"], 128);
  EXPECT_EQ(doc["iterations"], 2000);
  EXPECT_EQ(doc["inline_size"], 0);
  EXPECT_EQ(doc["post_interface"], "classic");
  EXPECT_TRUE(doc.contains("version"));
  ASSERT_EQ(doc["results"].size(), 1U);
  const auto& r = doc["results"][0];
  EXPECT_EQ(r["bytes"], 65536);
  EXPECT_EQ(r["iterations"], 2000);
  EXPECT_DOUBLE_EQ(r["bw_peak_MBps"].get<double>(), 36.75);
  EXPECT_DOUBLE_EQ(r["bw_avg_MBps"].get<double>(), 26.5);
  EXPECT_DOUBLE_EQ(r["bw_avg_Gbps"].get<double>(), 26.5 * 1048576 / 125e6);
  EXPECT_DOUBLE_EQ(r["msg_rate_Mpps"].get<double>(), 0.000418);
}

TEST(IbvcppReport, PostListAndCqModerationInHeaderAndJson) {
  auto info = write_bw_client();
  auto header = ibvcpp::format_header(info);
  EXPECT_FALSE(contains(header, "Post List"));  // perftest prints it only above 1
  auto doc = nlohmann::json::parse(ibvcpp::format_json(info, std::vector<BwResult>{}));
  EXPECT_EQ(doc["post_list"], 1);
  EXPECT_EQ(doc["cq_moderation"], 1);
  EXPECT_FALSE(doc.contains("cq_moderation_above_8KiB"));

  info.post_list = 32;
  info.cq_moderation = 8;
  header = ibvcpp::format_header(info);
  EXPECT_TRUE(contains(header,
                       " TX depth        : 128\n Post List       : 32\n"
                       " CQ Moderation   : 8\n"))
      << header;
  info.client = false;  // the server shows them too: both sides must agree on them
  EXPECT_TRUE(contains(ibvcpp::format_header(info), " Post List       : 32\n"));
  doc = nlohmann::json::parse(ibvcpp::format_json(info, std::vector<BwResult>{}));
  EXPECT_EQ(doc["post_list"], 32);
  EXPECT_EQ(doc["cq_moderation"], 8);

  info.post_list = 1;
  info.cq_moderation = 100;
  info.cq_moderation_large = 1;
  doc = nlohmann::json::parse(ibvcpp::format_json(info, std::vector<BwResult>{}));
  EXPECT_EQ(doc["cq_moderation"], 100);
  EXPECT_EQ(doc["cq_moderation_above_8KiB"], 1);
  info.test = {Verb::write, Measure::lat};
  doc = nlohmann::json::parse(ibvcpp::format_json(info, std::vector<LatResult>{}));
  EXPECT_FALSE(doc.contains("post_list"));  // bandwidth tests only
  EXPECT_FALSE(doc.contains("cq_moderation"));
}

TEST(IbvcppReport, LatencyJson) {
  auto info = write_bw_client();
  info.test = {Verb::read, Measure::lat};
  info.client = false;
  info.gid_index.reset();
  info.outstanding_reads = 16;
  const std::vector<LatResult> results{lat_result(), lat_result()};
  const auto doc = nlohmann::json::parse(ibvcpp::format_json(info, results));
  EXPECT_EQ(doc["test"], "read_lat");
  EXPECT_EQ(doc["role"], "server");
  EXPECT_TRUE(doc["gid_index"].is_null());
  EXPECT_EQ(doc["outstanding_reads"], 16);
  EXPECT_FALSE(doc.contains("inline_size"));
  ASSERT_EQ(doc["results"].size(), 2U);
  const auto& r = doc["results"][1];
  EXPECT_EQ(r["bytes"], 2);
  EXPECT_EQ(r["iterations"], 200);
  EXPECT_DOUBLE_EQ(r["t_min_us"].get<double>(), 23.17);
  EXPECT_DOUBLE_EQ(r["t_max_us"].get<double>(), 13687.63);
  EXPECT_DOUBLE_EQ(r["t_typical_us"].get<double>(), 3938.96);
  EXPECT_DOUBLE_EQ(r["t_avg_us"].get<double>(), 3106.46);
  EXPECT_DOUBLE_EQ(r["t_stdev_us"].get<double>(), 2322.31);
  EXPECT_DOUBLE_EQ(r["p99_us"].get<double>(), 10345.27);
  EXPECT_DOUBLE_EQ(r["p999_us"].get<double>(), 13687.63);
}

TEST(IbvcppReport, EmptyResultsAreAnEmptyArray) {
  const auto doc =
      nlohmann::json::parse(ibvcpp::format_json(write_bw_client(), std::vector<BwResult>{}));
  EXPECT_TRUE(doc["results"].is_array());
  EXPECT_TRUE(doc["results"].empty());
}

TEST(IbvcppReport, ProgressLine) {
  EXPECT_EQ(ibvcpp::format_progress({Verb::write, Measure::bw}, 65536, 3, 23),
            "ibvcpp: write_bw: 65536 bytes done (3 of 23)\n");
}

// --- devices ---------------------------------------------------------------------------------

std::vector<ibvcpp::DeviceReport> one_device(bool verbose) {
  ibvcpp::DeviceReport device;
  device.info = {"rxe0", ibv::Guid{0x505400fffe123456}, ibv::NodeType::rnic,
                 ibv::Transport::infiniband};
  if (verbose) {
    ibv::DeviceAttributes attributes;
    attributes.firmware_version = "";
    attributes.vendor_id = 0xffffff;
    attributes.physical_port_count = 1;
    device.attributes = attributes;
    ibv::PortAttributes port;
    port.port = 1;
    port.state = ibv::PortState::active;
    port.link_layer = ibv::LinkLayer::ethernet;
    port.active_mtu = ibv::Mtu::mtu1024();
    port.max_mtu = ibv::Mtu::mtu4096();
    ibv::GidEntry link_local{ibv::Gid::from_string("fe80::5054:ff:fe12:3456"), 0, 1,
                             ibv::GidType::roce_v2, "dummy0"};
    ibv::GidEntry ipv4{ibv::Gid::from_string("::ffff:10.0.0.1"), 1, 1, ibv::GidType::roce_v2,
                       "dummy0"};
    device.ports.push_back({port, {link_local, ipv4}});
  }
  return {device};
}

TEST(IbvcppDevicesReport, TableLikeIbvDevices) {
  const auto text = ibvcpp::format_devices_text(one_device(false), false);
  EXPECT_EQ(text,
            "    device            node GUID            node type   transport\n"
            "    ------            -------------------  ----------  ----------\n"
            "    rxe0              5054:00ff:fe12:3456  RNIC        InfiniBand\n");
}

TEST(IbvcppDevicesReport, VerboseShowsPortsAndGidTable) {
  const auto text = ibvcpp::format_devices_text(one_device(true), true);
  EXPECT_TRUE(contains(text, "rxe0: node GUID 5054:00ff:fe12:3456, RNIC, InfiniBand\n")) << text;
  EXPECT_TRUE(
      contains(text, "  port 1: ACTIVE, link layer Ethernet, active MTU 1024 (max 4096), LID 0\n"))
      << text;
  EXPECT_TRUE(
      contains(text, "    1      ::ffff:10.0.0.1                          RoCE v2  dummy0\n"))
      << text;
  EXPECT_TRUE(contains(text, "fe80::5054:ff:fe12:3456")) << text;
}

TEST(IbvcppDevicesReport, VerboseErrorOfOneDevice) {
  auto devices = one_device(false);
  devices[0].error = "ibv_open_device failed";
  const auto text = ibvcpp::format_devices_text(devices, true);
  EXPECT_TRUE(contains(text, "  error: ibv_open_device failed\n")) << text;
  const auto doc = nlohmann::json::parse(ibvcpp::format_devices_json(devices, true));
  EXPECT_EQ(doc["devices"][0]["error"], "ibv_open_device failed");
}

TEST(IbvcppDevicesReport, Json) {
  auto doc = nlohmann::json::parse(ibvcpp::format_devices_json(one_device(false), false));
  EXPECT_EQ(doc["tool"], "ibvcpp");
  ASSERT_EQ(doc["devices"].size(), 1U);
  EXPECT_EQ(doc["devices"][0]["name"], "rxe0");
  EXPECT_EQ(doc["devices"][0]["node_guid"], "5054:00ff:fe12:3456");
  EXPECT_EQ(doc["devices"][0]["node_type"], "RNIC");
  EXPECT_EQ(doc["devices"][0]["transport"], "InfiniBand");
  EXPECT_FALSE(doc["devices"][0].contains("ports"));

  doc = nlohmann::json::parse(ibvcpp::format_devices_json(one_device(true), true));
  const auto& port = doc["devices"][0]["ports"][0];
  EXPECT_EQ(port["port"], 1);
  EXPECT_EQ(port["state"], "ACTIVE");
  EXPECT_EQ(port["link_layer"], "Ethernet");
  EXPECT_EQ(port["active_mtu"], 1024);
  EXPECT_EQ(port["max_mtu"], 4096);
  EXPECT_EQ(port["lid"], 0);
  ASSERT_EQ(port["gids"].size(), 2U);
  EXPECT_EQ(port["gids"][1]["index"], 1);
  EXPECT_EQ(port["gids"][1]["gid"], "::ffff:10.0.0.1");
  EXPECT_EQ(port["gids"][1]["type"], "RoCE v2");
  EXPECT_EQ(port["gids"][1]["netdev"], "dummy0");
  EXPECT_EQ(doc["devices"][0]["vendor_id"], 0xffffff);

  EXPECT_TRUE(nlohmann::json::parse(ibvcpp::format_devices_json({}, false))["devices"].empty());
}

}  // namespace
