// SPDX-License-Identifier: MIT
// The ibvcpp command line: every option of `perf` and `devices`, perftest's defaults, and the
// usage errors (exit status 2) with messages that name the option.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/options.hpp"
#include "support/text.hpp"

namespace {

using ibv_test::contains;

using ibvcpp::Measure;
using ibvcpp::PerfOptions;
using ibvcpp::Verb;

ibvcpp::Command parse(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> list(args);
  return ibvcpp::parse_command_line(list);
}

PerfOptions perf(std::initializer_list<std::string_view> args) {
  auto command = parse(args);
  EXPECT_TRUE(std::holds_alternative<PerfOptions>(command));
  return std::get<PerfOptions>(command);
}

/// The UsageError message of parsing `args` ("" when it parsed).
std::string usage_error(std::initializer_list<std::string_view> args) {
  try {
    (void)parse(args);
  } catch (const ibvcpp::UsageError& error) {
    EXPECT_EQ(error.code(), ibvcpp::ExitCode::usage);
    return error.what();
  }
  return "";
}

// --- tests and roles -------------------------------------------------------------------------

TEST(IbvcppOptions, ParsesEveryTestKind) {
  for (const auto* verb : {"send", "write", "read"}) {
    for (const auto* measure : {"bw", "lat"}) {
      const auto options = perf({"perf", verb, measure});
      EXPECT_EQ(options.test.name(), std::string(verb) + "_" + measure);
      EXPECT_EQ(ibvcpp::TestKind::from_name(options.test.name()), options.test);
    }
  }
  EXPECT_EQ(ibvcpp::TestKind::from_name("write"), std::nullopt);
  EXPECT_EQ(ibvcpp::TestKind::from_name("write_xx"), std::nullopt);
  EXPECT_EQ((ibvcpp::TestKind{Verb::write, Measure::bw}.title()), "RDMA_Write BW Test");
  EXPECT_EQ((ibvcpp::TestKind{Verb::send, Measure::lat}.title()), "Send Latency Test");
  EXPECT_EQ((ibvcpp::TestKind{Verb::read, Measure::lat}.title()), "RDMA_Read Latency Test");
}

TEST(IbvcppOptions, AnAddressMakesTheClient) {
  EXPECT_FALSE(perf({"perf", "write", "bw"}).is_client());
  const auto client = perf({"perf", "write", "bw", "10.0.0.1"});
  EXPECT_TRUE(client.is_client());
  EXPECT_EQ(client.server, "10.0.0.1");
  // Options may come before, between and after the words.
  const auto mixed = perf({"-s", "64", "perf", "-n", "10", "read", "lat", "host", "-p", "9000"});
  EXPECT_EQ(mixed.test.name(), "read_lat");
  EXPECT_EQ(mixed.server, "host");
  EXPECT_EQ(mixed.sizes, std::vector<std::uint64_t>{64});
  EXPECT_EQ(mixed.iterations, 10U);
  EXPECT_EQ(mixed.tcp_port, 9000);
}

// --- perftest's defaults ---------------------------------------------------------------------

TEST(IbvcppOptions, BandwidthDefaultsArePerftests) {
  const auto write = perf({"perf", "write", "bw"});
  EXPECT_EQ(write.sizes, std::vector<std::uint64_t>{65536});
  EXPECT_EQ(write.iterations, 5000U);  // ib_write_bw
  EXPECT_EQ(write.tx_depth, 128U);
  EXPECT_EQ(write.qps, 1U);
  EXPECT_EQ(write.ib_port, 1);
  EXPECT_EQ(write.tcp_port, 18515);
  EXPECT_EQ(write.inline_size, 0U);
  EXPECT_FALSE(write.device);
  EXPECT_FALSE(write.gid_index);
  EXPECT_FALSE(write.mtu);
  EXPECT_FALSE(write.report_gbits);
  EXPECT_FALSE(write.json);
  EXPECT_EQ(write.timeout, std::chrono::seconds(30));
  EXPECT_EQ(perf({"perf", "send", "bw"}).iterations, 1000U);  // ib_send_bw, ib_read_bw
  EXPECT_EQ(perf({"perf", "read", "bw"}).iterations, 1000U);
}

TEST(IbvcppOptions, LatencyDefaultsArePerftests) {
  for (const auto* verb : {"send", "write", "read"}) {
    const auto options = perf({"perf", verb, "lat"});
    EXPECT_EQ(options.sizes, std::vector<std::uint64_t>{2});
    EXPECT_EQ(options.iterations, 1000U);
    EXPECT_EQ(options.tx_depth, 1U);
    EXPECT_EQ(options.cq_moderation(2), 1U);
  }
}

TEST(IbvcppOptions, CqModerationFollowsPerftest) {
  const auto options = perf({"perf", "write", "bw"});
  EXPECT_EQ(options.cq_moderation(2), 100U);
  EXPECT_EQ(options.cq_moderation(8192), 100U);
  EXPECT_EQ(options.cq_moderation(8193), 1U);  // large messages: every one signaled
  const auto all = perf({"perf", "write", "bw", "-a"});
  EXPECT_EQ(all.cq_moderation(8388608), 100U);  // but not with -a
  const auto shallow = perf({"perf", "write", "bw", "-t", "16", "-s", "64"});
  EXPECT_EQ(shallow.cq_moderation(64), 16U);  // never above the TX depth
  const auto few = perf({"perf", "write", "bw", "-n", "20", "-s", "64"});
  EXPECT_EQ(few.tx_depth, 20U);  // the TX depth never above the iterations
  EXPECT_EQ(few.cq_moderation(64), 20U);
}

TEST(IbvcppOptions, RxDepthIsPerftestsCappedByIterations) {
  EXPECT_EQ(perf({"perf", "send", "bw"}).rx_depth(), 512U);
  EXPECT_EQ(perf({"perf", "send", "bw", "-n", "100"}).rx_depth(), 100U);
}

// --- every option ----------------------------------------------------------------------------

TEST(IbvcppOptions, ParsesEveryPerfOption) {
  const auto o =
      perf({"perf",   "send",      "bw",   "-d",    "mlx5_0", "-i", "2",     "-x",
            "3",      "-s",        "4096", "-n",    "77",     "-p", "20000", "-m",
            "2048",   "-t",        "64",   "-q",    "4",      "-I", "128",   "--report_gbits",
            "--json", "--timeout", "9",    "server"});
  EXPECT_EQ(o.device, "mlx5_0");
  EXPECT_EQ(o.ib_port, 2);
  EXPECT_EQ(o.gid_index, 3U);
  EXPECT_EQ(o.sizes, std::vector<std::uint64_t>{4096});
  EXPECT_EQ(o.iterations, 77U);
  EXPECT_EQ(o.tcp_port, 20000);
  EXPECT_EQ(o.mtu, 2048U);
  EXPECT_EQ(o.tx_depth, 64U);
  EXPECT_EQ(o.qps, 4U);
  EXPECT_EQ(o.inline_size, 128U);
  EXPECT_TRUE(o.report_gbits);
  EXPECT_TRUE(o.json);
  EXPECT_EQ(o.timeout, std::chrono::seconds(9));
  EXPECT_EQ(o.server, "server");
  EXPECT_TRUE(o.sends_inline(128));
  EXPECT_FALSE(o.sends_inline(129));
}

TEST(IbvcppOptions, LongFormsAndAttachedValues) {
  const auto o = perf({"perf", "write", "bw", "--ib-dev=rxe0", "--ib-port", "1", "--gid-index=1",
                       "--size=64", "--iters", "10", "--port=1234", "--mtu=1024", "--tx-depth=8",
                       "--qp=2", "--inline_size=32", "--report-gbits"});
  EXPECT_EQ(o.device, "rxe0");
  EXPECT_EQ(o.gid_index, 1U);
  EXPECT_EQ(o.sizes, std::vector<std::uint64_t>{64});
  EXPECT_EQ(o.iterations, 10U);
  EXPECT_EQ(o.tcp_port, 1234);
  EXPECT_EQ(o.mtu, 1024U);
  EXPECT_EQ(o.tx_depth, 8U);
  EXPECT_EQ(o.qps, 2U);
  EXPECT_EQ(o.inline_size, 32U);
  EXPECT_TRUE(o.report_gbits);
  const auto attached = perf({"perf", "write", "bw", "-s64", "-n10", "-x0", "-drxe0"});
  EXPECT_EQ(attached.sizes, std::vector<std::uint64_t>{64});
  EXPECT_EQ(attached.iterations, 10U);
  EXPECT_EQ(attached.gid_index, 0U);
  EXPECT_EQ(attached.device, "rxe0");
  EXPECT_EQ(perf({"perf", "write", "bw", "--inline-size", "7"}).inline_size, 7U);
}

TEST(IbvcppOptions, AllSizesAreTwoToEightMebibytes) {
  const auto o = perf({"perf", "write", "bw", "-a"});
  ASSERT_EQ(o.sizes.size(), 23U);
  EXPECT_EQ(o.sizes.front(), 2U);
  EXPECT_EQ(o.sizes.back(), 8388608U);
  for (std::size_t i = 1; i < o.sizes.size(); ++i) EXPECT_EQ(o.sizes[i], 2 * o.sizes[i - 1]);
  EXPECT_TRUE(o.all_sizes);
  EXPECT_EQ(o.max_size(), 8388608U);
  EXPECT_EQ(perf({"perf", "write", "bw", "--all"}).sizes.size(), 23U);
}

TEST(IbvcppOptions, SizeListKeepsItsOrder) {
  const auto o = perf({"perf", "write", "bw", "--sizes", "2,4,65535,65537,1"});
  EXPECT_EQ(o.sizes, (std::vector<std::uint64_t>{2, 4, 65535, 65537, 1}));
  EXPECT_EQ(o.max_size(), 65537U);
  EXPECT_FALSE(o.all_sizes);
}

TEST(IbvcppOptions, ReadTestsSendNothingInline) {
  EXPECT_EQ(perf({"perf", "read", "bw", "-I", "64"}).inline_size, 0U);
  EXPECT_FALSE(perf({"perf", "read", "lat", "-I", "64"}).sends_inline(2));
  EXPECT_TRUE(perf({"perf", "write", "lat", "-I", "64"}).sends_inline(2));
}

TEST(IbvcppOptions, DevicesCommand) {
  auto command = parse({"devices"});
  ASSERT_TRUE(std::holds_alternative<ibvcpp::DevicesOptions>(command));
  EXPECT_FALSE(std::get<ibvcpp::DevicesOptions>(command).verbose);
  EXPECT_FALSE(std::get<ibvcpp::DevicesOptions>(command).json);
  command = parse({"devices", "-v", "--json"});
  EXPECT_TRUE(std::get<ibvcpp::DevicesOptions>(command).verbose);
  EXPECT_TRUE(std::get<ibvcpp::DevicesOptions>(command).json);
  EXPECT_TRUE(std::get<ibvcpp::DevicesOptions>(parse({"devices", "--verbose"})).verbose);
}

TEST(IbvcppOptions, HelpEverywhere) {
  for (const auto& args : {std::vector<std::string_view>{"-h"}, {"--help"}, {"help"}}) {
    const auto command = ibvcpp::parse_command_line(args);
    ASSERT_TRUE(std::holds_alternative<ibvcpp::HelpRequest>(command));
    EXPECT_TRUE(contains(std::get<ibvcpp::HelpRequest>(command).text, "ibvcpp devices"));
  }
  const auto perf_help = parse({"perf", "-h"});
  EXPECT_TRUE(contains(std::get<ibvcpp::HelpRequest>(perf_help).text, "--inline_size"));
  EXPECT_TRUE(contains(std::get<ibvcpp::HelpRequest>(perf_help).text, "Exit status"));
  // -h wins over anything wrong elsewhere on the line.
  EXPECT_TRUE(std::holds_alternative<ibvcpp::HelpRequest>(parse({"perf", "write", "bw", "-h"})));
  const auto devices_help = parse({"devices", "-h"});
  EXPECT_TRUE(contains(std::get<ibvcpp::HelpRequest>(devices_help).text, "--json"));
}

// --- usage errors ----------------------------------------------------------------------------

TEST(IbvcppOptions, RejectsMissingOrUnknownCommandsAndTests) {
  EXPECT_TRUE(contains(usage_error({}), "no command"));
  EXPECT_TRUE(contains(usage_error({"frobnicate"}), "unknown command 'frobnicate'"));
  EXPECT_TRUE(contains(usage_error({"perf"}), "needs a test"));
  EXPECT_TRUE(contains(usage_error({"perf", "write"}), "needs a test"));
  EXPECT_TRUE(contains(usage_error({"perf", "atomic", "bw"}), "unknown verb 'atomic'"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "both"}), "unknown measurement 'both'"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "a", "b"}), "more than one server"));
  EXPECT_TRUE(contains(usage_error({"devices", "extra"}), "unexpected argument 'extra'"));
}

TEST(IbvcppOptions, RejectsUnknownOptionsAndMissingValues) {
  EXPECT_TRUE(
      contains(usage_error({"perf", "write", "bw", "--bogus"}), "unknown option '--bogus'"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-Z"}), "unknown option '-Z'"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-s"}), "-s needs a value"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "--size"}), "--size needs a value"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "--json=yes"}), "takes no value"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-ab"}), "takes no value"));
  EXPECT_TRUE(contains(usage_error({"devices", "-s", "4"}), "-s does not apply"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-v"}), "-v does not apply"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-d", ""}), "-d needs a name"));
}

TEST(IbvcppOptions, RejectsSizesOutOfRange) {
  const auto too_big = usage_error({"perf", "write", "bw", "-s", "8388609"});
  EXPECT_TRUE(contains(too_big, "8388609")) << too_big;
  EXPECT_TRUE(contains(too_big, "larger than 8388608")) << too_big;
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-s", "99999999999999999999999"}),
                       "larger than"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-s", "0"}), "invalid size '0'"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-s", "4k"}), "invalid size '4k'"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-s", "-4"}), "invalid size '-4'"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "--sizes", "2,,4"}), "invalid size ''"));
  EXPECT_TRUE(
      contains(usage_error({"perf", "write", "bw", "--sizes", "2,9000000"}), "larger than"));
  EXPECT_EQ(usage_error({"perf", "write", "bw", "-s", "8388608"}), "");
}

TEST(IbvcppOptions, SizeOptionsExcludeEachOther) {
  EXPECT_TRUE(
      contains(usage_error({"perf", "write", "bw", "-a", "-s", "4"}), "exclude each other"));
  EXPECT_TRUE(
      contains(usage_error({"perf", "write", "bw", "-a", "--sizes", "4"}), "exclude each other"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-s", "2", "--sizes", "4"}),
                       "exclude each other"));
}

TEST(IbvcppOptions, RejectsNumbersOutOfRange) {
  const auto check = [](std::initializer_list<std::string_view> args, std::string_view part) {
    const auto message = usage_error(args);
    EXPECT_TRUE(contains(message, part)) << message;
  };
  check({"perf", "write", "bw", "-n", "4"}, "'4' for -n (expected 5..100000000)");
  check({"perf", "write", "bw", "-n", "ten"}, "'ten' for -n");
  check({"perf", "write", "bw", "-i", "0"}, "for -i (expected 1..255)");
  check({"perf", "write", "bw", "-i", "256"}, "for -i");
  check({"perf", "write", "bw", "-p", "0"}, "for -p (expected 1..65535)");
  check({"perf", "write", "bw", "-p", "65536"}, "for -p");
  check({"perf", "write", "bw", "-m", "1000"}, "256, 512, 1024, 2048 or 4096");
  check({"perf", "write", "bw", "-m", "8192"}, "for -m (expected 256..4096)");
  check({"perf", "write", "bw", "-t", "0"}, "for -t (expected 1..16384)");
  check({"perf", "write", "bw", "-q", "0"}, "for -q (expected 1..256)");
  check({"perf", "write", "bw", "-I", "70000"}, "for -I (expected 0..65536)");
  check({"perf", "write", "bw", "-x", "-1"}, "for -x");
  check({"perf", "write", "bw", "--timeout", "0"}, "for --timeout (expected 1..86400)");
  check({"perf", "write", "lat", "-q", "2"}, "latency tests run on one queue pair");
  check({"perf", "write", "bw", "-n", "100000000", "-q", "2"}, "more than 100000000 requests");
  for (const auto* mtu : {"256", "512", "1024", "2048", "4096"}) {
    EXPECT_EQ(perf({"perf", "write", "bw", "-m", mtu}).mtu, std::stoul(mtu));
  }
}

// --- -l (post list) and -Q (CQ moderation), perftest's rules -------------------------------

TEST(IbvcppOptions, PostListAndCqModerationFollowPerftest) {
  const auto plain = perf({"perf", "write", "bw"});
  EXPECT_EQ(plain.post_list, 1U);
  EXPECT_FALSE(plain.cq_mod);
  // -l alone: the moderation is the list (one signaled request per list), at any size.
  const auto list = perf({"perf", "write", "bw", "-s", "8", "-n", "4992", "-l", "16"});
  EXPECT_EQ(list.post_list, 16U);
  EXPECT_FALSE(list.cq_mod);
  EXPECT_EQ(list.cq_moderation(8), 16U);
  EXPECT_EQ(list.cq_moderation(65536), 16U);
  // -l with -Q: -Q, which divides the list.
  const auto both = perf({"perf", "write", "bw", "-n", "3200", "--post_list=32", "--cq-mod=8"});
  EXPECT_EQ(both.post_list, 32U);
  EXPECT_EQ(both.cq_mod, 8U);
  EXPECT_EQ(both.cq_moderation(8), 8U);
  EXPECT_EQ(perf({"perf", "send", "bw", "--post-list", "4", "-n", "400"}).post_list, 4U);
  // -Q alone: also above 8 KiB (perftest warns there, and keeps it), at most the TX depth.
  const auto moderated = perf({"perf", "write", "bw", "-Q", "50"});
  EXPECT_EQ(moderated.cq_moderation(8), 50U);
  EXPECT_EQ(moderated.cq_moderation(65536), 50U);
  EXPECT_EQ(perf({"perf", "write", "bw", "-Q1024", "-t", "64"}).cq_moderation(8), 64U);
  // -Q above the TX depth is capped before it must divide the list: -t 16 -Q 64 -l 16 is 16.
  EXPECT_EQ(perf({"perf", "read", "bw", "-n", "160", "-t", "16", "-Q", "64", "-l", "16"})
                .cq_moderation(8),
            16U);
  // A list as deep as the TX depth; -l 1 is the default and fits any -n, and latency tests.
  EXPECT_EQ(perf({"perf", "write", "bw", "-n", "1280", "-t", "128", "-l", "128"}).post_list, 128U);
  EXPECT_EQ(perf({"perf", "write", "bw", "-n", "77", "-l", "1"}).post_list, 1U);
  EXPECT_EQ(perf({"perf", "write", "lat", "-l", "1"}).post_list, 1U);
  const auto help = std::get<ibvcpp::HelpRequest>(parse({"perf", "-h"})).text;
  EXPECT_TRUE(contains(help, "-l, --post_list=<n>")) << help;
  EXPECT_TRUE(contains(help, "-Q, --cq-mod=<n>")) << help;
}

TEST(IbvcppOptions, RejectsBadPostListsAndCqModeration) {
  const auto check = [](std::initializer_list<std::string_view> args, std::string_view part) {
    const auto message = usage_error(args);
    EXPECT_TRUE(contains(message, part)) << message;
  };
  check({"perf", "write", "bw", "-l", "0"}, "'0' for -l (expected 1..16384)");
  check({"perf", "write", "bw", "-l", "16k"}, "'16k' for -l");
  check({"perf", "write", "bw", "--post_list"}, "--post_list needs a value");
  check({"perf", "write", "bw", "-Q", "0"}, "'0' for -Q (expected 1..1024)");
  check({"perf", "write", "bw", "--cq-mod=1025"}, "'1025' for --cq-mod (expected 1..1024)");
  // ib_write_bw's default -n 5000 is no multiple of 16.
  check({"perf", "write", "bw", "-l", "16"}, "-n 5000 is not a multiple of -l 16");
  check({"perf", "write", "bw", "-n", "1024", "-l", "256"},
        "-l 256 is more than the TX depth 128 (-t, at most -n)");
  EXPECT_EQ(usage_error({"perf", "write", "bw", "-n", "40", "-l", "40", "-t", "64"}), "");  // -t 40
  check({"perf", "write", "bw", "-n", "60", "-l", "30", "-t", "16"}, "more than the TX depth 16");
  check({"perf", "write", "bw", "-n", "3200", "-l", "32", "-Q", "12"},
        "-l 32 is not a multiple of the CQ moderation 12 (-Q 12)");
  check({"perf", "write", "bw", "-n", "480", "-l", "24", "-Q", "64", "-t", "32"},
        "the CQ moderation 32 (-Q 64, capped at the TX depth)");
  check({"perf", "write", "lat", "-l", "2"}, "-l 2: post lists are for bw tests");
  check({"perf", "send", "lat", "-Q", "4"}, "-Q 4: CQ moderation is for bw tests");
}

}  // namespace

// --- --post-interface ----------------------------------------------------------------------

namespace {

TEST(IbvcppOptions, PostInterfaceIsClassicUnlessExtendedIsAsked) {
  EXPECT_EQ(perf({"perf", "write", "bw"}).post_interface, ibv::PostInterface::classic);
  EXPECT_EQ(perf({"perf", "write", "lat", "--post-interface", "extended"}).post_interface,
            ibv::PostInterface::extended);
  EXPECT_EQ(perf({"perf", "send", "bw", "--post_interface=classic"}).post_interface,
            ibv::PostInterface::classic);
  const auto message = usage_error({"perf", "write", "bw", "--post-interface", "new"});
  EXPECT_TRUE(contains(message, "invalid value 'new' for --post-interface")) << message;
  EXPECT_TRUE(contains(message, "expected classic or extended")) << message;
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "--post-interface"}), "needs a value"));
}

}  // namespace

// --- -R (rdma_cm) ----------------------------------------------------------------------------

namespace {

TEST(IbvcppOptions, RdmaCmFlag) {
  EXPECT_FALSE(perf({"perf", "write", "bw"}).rdma_cm);
  EXPECT_TRUE(perf({"perf", "write", "bw", "-R"}).rdma_cm);
  EXPECT_TRUE(perf({"perf", "send", "lat", "--rdma_cm", "10.0.0.1"}).rdma_cm);
  // rdma_cm chooses the GID and the path MTU: -x and -m can not be applied.
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-R", "-x", "1"}), "-x"));
  EXPECT_TRUE(contains(usage_error({"perf", "write", "bw", "-R", "-m", "1024"}), "-m"));
}

TEST(IbvcppOptions, DatagramsAreSendTestsWithEveryReceivePostedUpFront) {
  EXPECT_EQ(perf({"perf", "send", "bw"}).connection, ibvcpp::Transport::rc);
  EXPECT_EQ(perf({"perf", "send", "bw", "-c", "RC"}).connection, ibvcpp::Transport::rc);
  const auto bw = perf({"perf", "send", "bw", "-c", "UD", "-n", "20000"});
  EXPECT_EQ(bw.connection, ibvcpp::Transport::ud);
  EXPECT_EQ(bw.rx_depth(), ibvcpp::kMaxUdRxDepth);  // perftest's UC_MAX_RX
  EXPECT_EQ(perf({"perf", "send", "lat", "--connection=UD"}).rx_depth(), 1000U);  // -n
  EXPECT_EQ(perf({"perf", "send", "bw", "-c", "UD", "-l", "10", "-n", "100"}).post_list, 10U);
  EXPECT_EQ(ibvcpp::transport_name(ibvcpp::Transport::ud), "UD");
  EXPECT_EQ(ibvcpp::transport_name(ibvcpp::Transport::rc), "RC");
}

TEST(IbvcppOptions, RejectsWhatDatagramsCanNotDo) {
  const auto write = usage_error({"perf", "write", "bw", "-c", "UD"});
  EXPECT_TRUE(contains(write, "-c UD carries sends only")) << write;
  EXPECT_TRUE(contains(write, "'ibvcpp perf send bw -c UD'")) << write;
  EXPECT_TRUE(contains(usage_error({"perf", "read", "lat", "-c", "UD"}), "no RDMA read"));
  EXPECT_TRUE(contains(usage_error({"perf", "send", "bw", "-c", "UD", "-R"}), "-R"));
  EXPECT_TRUE(
      contains(usage_error({"perf", "send", "bw", "-c", "UD", "--post-interface", "extended"}),
               "ibv_post_send"));
  const auto other = usage_error({"perf", "send", "bw", "-c", "UC"});
  EXPECT_TRUE(contains(other, "invalid value 'UC' for -c (expected RC or UD)")) << other;
}

TEST(IbvcppOptions, DatagramSizesFitThePathMtu) {
  auto given = perf({"perf", "send", "bw", "-c", "UD", "--sizes", "2,1024"});
  ibvcpp::fit_datagram_sizes(given, 1024);
  EXPECT_EQ(given.sizes, (std::vector<std::uint64_t>{2, 1024}));
  try {
    ibvcpp::fit_datagram_sizes(given, 512);
    ADD_FAILURE() << "a size above the MTU was accepted";
  } catch (const ibvcpp::UsageError& error) {
    EXPECT_TRUE(contains(error.what(), "size 1024 is above the path MTU 512")) << error.what();
  }
  // -a: the sizes up to the MTU, as perftest runs -a over UD.
  auto all = perf({"perf", "send", "lat", "-c", "UD", "-a"});
  ibvcpp::fit_datagram_sizes(all, 1024);
  EXPECT_EQ(all.sizes, (std::vector<std::uint64_t>{2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}));
  // RC: untouched.
  auto rc = perf({"perf", "send", "bw", "-s", "65536"});
  ibvcpp::fit_datagram_sizes(rc, 1024);
  EXPECT_EQ(rc.sizes, (std::vector<std::uint64_t>{65536}));
}

}  // namespace
