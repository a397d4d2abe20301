// SPDX-License-Identifier: MIT
// Text (perftest's layout) and JSON reports of ibvcpp perf.
#include "ibvcpp/report.hpp"

#include <array>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "ibv/version.hpp"
#include "ibvcpp/text.hpp"

namespace ibvcpp {
namespace {

/// snprintf into a std::string (the formats are perftest's printf formats).

std::string role_of(const RunInfo& info) { return info.client ? "client" : "server"; }

const char* post_interface_name(ibv::PostInterface interface) {
  return interface == ibv::PostInterface::extended ? "extended" : "classic";
}

nlohmann::ordered_json json_head(const RunInfo& info) {
  nlohmann::ordered_json doc;
  doc["tool"] = "ibvcpp";
  doc["version"] = std::string(ibv::version());
  doc["test"] = info.test.name();
  doc["role"] = role_of(info);
  doc["device"] = info.device;
  doc["ib_port"] = info.ib_port;
  doc["link_layer"] = info.link_layer;
  doc["gid_index"] =
      info.gid_index ? nlohmann::ordered_json(*info.gid_index) : nlohmann::ordered_json(nullptr);
  doc["connection"] = std::string(transport_name(info.connection));
  doc["mtu"] = info.mtu;
  doc["qps"] = info.qps;
  doc["tx_depth"] = info.tx_depth;
  doc["iterations"] = info.iterations;
  if (info.test.measure == Measure::bw) {
    doc["post_list"] = info.post_list;
    doc["cq_moderation"] = info.cq_moderation;
    if (info.cq_moderation_large && *info.cq_moderation_large != info.cq_moderation) {
      doc["cq_moderation_above_8KiB"] = *info.cq_moderation_large;
    }
  }
  if (info.test.verb == Verb::read) {
    doc["outstanding_reads"] = info.outstanding_reads;
  } else {
    doc["inline_size"] = info.inline_size;
  }
  doc["post_interface"] = post_interface_name(info.post_interface);
  return doc;
}

}  // namespace

std::string result_line() { return std::string(87, '-') + "\n"; }

std::string format_header(const RunInfo& info) {
  std::string text = result_line();
  text += "                    " + info.test.title() + "\n";
  text += format_text(" Dual-port       : OFF\t\tDevice         : %s\n", info.device.c_str());
  text += format_text(" Number of qps   : %u\t\tTransport type : IB\n", info.qps);
  text += format_text(" Connection type : %s\t\tUsing SRQ      : OFF\n",
                      std::string(transport_name(info.connection)).c_str());
  text += format_text(" Tool            : ibvcpp %s (ibverbs-cpp %s)\n",
                      std::string(ibv::version()).c_str(),
                      info.connection == Transport::ud ? "UdQueuePair" : "Channel");
  if (info.client) text += format_text(" TX depth        : %u\n", info.tx_depth);
  if (info.test.verb == Verb::send && !info.client) {
    text += format_text(" RX depth        : %u\n", info.rx_depth);
  }
  if (info.test.measure == Measure::bw && info.post_list > 1) {
    text += format_text(" Post List       : %u\n", info.post_list);
  }
  if (info.test.measure == Measure::bw) {
    if (info.cq_moderation_large && *info.cq_moderation_large != info.cq_moderation) {
      text += format_text(" CQ Moderation   : %u (%u above %u B)\n", info.cq_moderation,
                          *info.cq_moderation_large, static_cast<unsigned>(kCqModerationSizeLimit));
    } else {
      text += format_text(" CQ Moderation   : %u\n", info.cq_moderation);
    }
  }
  text += format_text(" Mtu             : %u[B]\n", info.mtu);
  text += format_text(" Link type       : %s\n", info.link_layer.c_str());
  if (info.gid_index) text += format_text(" GID index       : %u\n", *info.gid_index);
  if (info.test.verb == Verb::read) {
    text += format_text(" Outstand reads  : %u\n", info.outstanding_reads);
  } else {
    text += format_text(" Max inline data : %u[B]\n", info.inline_size);
  }
  text += format_text(" Post interface  : %s\n", post_interface_name(info.post_interface));
  text += info.rdma_cm ? " rdma_cm QPs\t : ON\n" : " rdma_cm QPs\t : OFF\n";
  text += info.rdma_cm ? " Data ex. method : rdma_cm\n" : " Data ex. method : Ethernet\n";
  text += result_line();
  return text;
}

std::string format_column_titles(const RunInfo& info) {
  if (info.test.measure == Measure::lat) {
    return " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
           "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n";
  }
  if (info.report_gbits) {
    return " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n";
  }
  return " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n";
}

std::string format_row(const BwResult& result, bool report_gbits) {
  const auto bytes = static_cast<unsigned long>(result.bytes);
  const auto iterations = static_cast<unsigned long>(result.iterations);
  const double peak = report_gbits ? to_gbit_per_s(result.stats.peak_bytes_per_s)
                                   : to_mb_per_s(result.stats.peak_bytes_per_s);
  const double average = report_gbits ? to_gbit_per_s(result.stats.avg_bytes_per_s)
                                      : to_mb_per_s(result.stats.avg_bytes_per_s);
  const double rate = to_mpps(result.stats.msg_rate_per_s);
  // perftest prints small Gb/sec figures with more digits (REPORT_FMT_EXT).
  if (report_gbits && average < 0.1) {
    return format_text(" %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf\n",
                       bytes, iterations, peak, average, rate);
  }
  return format_text(" %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf\n", bytes,
                     iterations, peak, average, rate);
}

std::string format_row(const LatResult& result) {
  const auto& s = result.stats;
  return format_text(
      " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f"
      "\t\t%-7.2f \t\t%-7.2f\n",
      static_cast<unsigned long>(result.bytes), static_cast<unsigned long>(result.iterations),
      s.t_min_us, s.t_max_us, s.t_typical_us, s.t_avg_us, s.t_stdev_us, s.p99_us, s.p999_us);
}

std::string format_json(const RunInfo& info, std::span<const BwResult> results) {
  nlohmann::ordered_json doc = json_head(info);
  doc["results"] = nlohmann::ordered_json::array();
  for (const auto& r : results) {
    doc["results"].push_back({
        {"bytes", r.bytes},
        {"iterations", r.iterations},
        {"bw_peak_MBps", to_mb_per_s(r.stats.peak_bytes_per_s)},
        {"bw_avg_MBps", to_mb_per_s(r.stats.avg_bytes_per_s)},
        {"bw_peak_Gbps", to_gbit_per_s(r.stats.peak_bytes_per_s)},
        {"bw_avg_Gbps", to_gbit_per_s(r.stats.avg_bytes_per_s)},
        {"msg_rate_Mpps", to_mpps(r.stats.msg_rate_per_s)},
    });
    if (r.lost) doc["results"].back()["datagrams_lost"] = *r.lost;
  }
  return doc.dump() + "\n";
}

std::string format_json(const RunInfo& info, std::span<const LatResult> results) {
  nlohmann::ordered_json doc = json_head(info);
  doc["results"] = nlohmann::ordered_json::array();
  for (const auto& r : results) {
    const auto& s = r.stats;
    doc["results"].push_back({
        {"bytes", r.bytes},
        {"iterations", r.iterations},
        {"t_min_us", s.t_min_us},
        {"t_max_us", s.t_max_us},
        {"t_typical_us", s.t_typical_us},
        {"t_avg_us", s.t_avg_us},
        {"t_stdev_us", s.t_stdev_us},
        {"p99_us", s.p99_us},
        {"p999_us", s.p999_us},
    });
  }
  return doc.dump() + "\n";
}

std::string format_progress(const TestKind& test, std::uint64_t bytes, std::size_t done,
                            std::size_t total) {
  return "ibvcpp: " + test.name() + ": " + std::to_string(bytes) + " bytes done (" +
         std::to_string(done) + " of " + std::to_string(total) + ")\n";
}

}  // namespace ibvcpp
