// SPDX-License-Identifier: MIT
// Command-line parsing of ibvcpp. A small getopt_long-like parser of its own (no global state,
// so that it can be tested): options may come anywhere, as `-s 64`, `-s64`, `--size 64` or
// `--size=64`; `--` ends the options.
#include "ibvcpp/options.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <string>
#include <system_error>

#include "ibvcpp/exit_code.hpp"

namespace ibvcpp {
namespace {

enum class Opt : std::uint8_t {
  help,
  verbose,
  json,
  device,
  ib_port,
  gid_index,
  size,
  all,
  sizes,
  iters,
  tcp_port,
  mtu,
  tx_depth,
  qps,
  post_list,
  cq_mod,
  inline_size,
  post_interface,
  report_gbits,
  timeout,
  rdma_cm,
  connection,
};

struct OptionSpec {
  Opt opt;
  char short_name;  // '\0': long only
  std::string_view long_name;
  bool takes_value;
};

constexpr std::array<OptionSpec, 26> kOptions{{
    {Opt::help, 'h', "help", false},
    {Opt::verbose, 'v', "verbose", false},
    {Opt::json, '\0', "json", false},
    {Opt::device, 'd', "ib-dev", true},
    {Opt::ib_port, 'i', "ib-port", true},
    {Opt::gid_index, 'x', "gid-index", true},
    {Opt::size, 's', "size", true},
    {Opt::all, 'a', "all", false},
    {Opt::sizes, '\0', "sizes", true},
    {Opt::iters, 'n', "iters", true},
    {Opt::tcp_port, 'p', "port", true},
    {Opt::mtu, 'm', "mtu", true},
    {Opt::tx_depth, 't', "tx-depth", true},
    {Opt::qps, 'q', "qp", true},
    {Opt::post_list, 'l', "post_list", true},
    {Opt::post_list, '\0', "post-list", true},
    {Opt::cq_mod, 'Q', "cq-mod", true},
    {Opt::inline_size, 'I', "inline_size", true},
    {Opt::inline_size, '\0', "inline-size", true},
    {Opt::post_interface, '\0', "post-interface", true},
    {Opt::post_interface, '\0', "post_interface", true},
    {Opt::report_gbits, '\0', "report_gbits", false},
    {Opt::report_gbits, '\0', "report-gbits", false},
    {Opt::timeout, '\0', "timeout", true},
    {Opt::rdma_cm, 'R', "rdma_cm", false},
    {Opt::connection, 'c', "connection", true},
}};

/// One option as it appeared, with its value (if it takes one).
struct ParsedOption {
  Opt opt;
  std::string spelling;  // "-s" or "--size", for messages
  std::string value;
};

/// The options and the positional words of an argument list.
struct SplitArguments {
  std::vector<ParsedOption> options;
  std::vector<std::string_view> words;
};

const OptionSpec* find_short(char name) {
  const auto* it = std::ranges::find(kOptions, name, &OptionSpec::short_name);
  return it == kOptions.end() || name == '\0' ? nullptr : it;
}

const OptionSpec* find_long(std::string_view name) {
  const auto* it = std::ranges::find(kOptions, name, &OptionSpec::long_name);
  return it == kOptions.end() ? nullptr : it;
}

SplitArguments split_arguments(std::span<const std::string_view> args) {
  SplitArguments split;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (arg == "--") {
      split.words.insert(split.words.end(), args.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                         args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      split.words.push_back(arg);
      continue;
    }
    const OptionSpec* spec = nullptr;
    std::string spelling;
    std::optional<std::string_view> attached;
    if (arg[1] == '-') {
      const std::string_view body = arg.substr(2);
      const auto equals = body.find('=');
      const std::string_view name = body.substr(0, equals);
      spec = find_long(name);
      spelling = "--" + std::string(name);
      if (equals != std::string_view::npos) attached = body.substr(equals + 1);
    } else {
      spec = find_short(arg[1]);
      spelling = std::string(arg.substr(0, 2));
      if (arg.size() > 2) attached = arg.substr(2);
    }
    if (spec == nullptr) throw UsageError("unknown option '" + std::string(arg) + "'");
    ParsedOption parsed{spec->opt, spelling, {}};
    if (spec->takes_value) {
      if (attached) {
        parsed.value = std::string(*attached);
      } else if (i + 1 < args.size()) {
        parsed.value = std::string(args[++i]);
      } else {
        throw UsageError("option " + spelling + " needs a value");
      }
    } else if (attached) {
      throw UsageError("option " + spelling + " takes no value (got '" + std::string(arg) + "')");
    }
    split.options.push_back(std::move(parsed));
  }
  return split;
}

/// The UsageError of a value `option` does not take: the value, the option, and in parentheses
/// what it takes (`takes`).
[[noreturn]] void reject_value(const ParsedOption& option, const std::string& takes) {
  throw UsageError("invalid value '" + option.value + "' for " + option.spelling + " (" + takes +
                   ")");
}

/// A decimal number in [min, max]; anything else is a UsageError naming the option.
std::uint64_t parse_number(const ParsedOption& option, std::uint64_t min, std::uint64_t max) {
  const std::string& text = option.value;
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < min ||
      value > max) {
    reject_value(option, "expected " + std::to_string(min) + ".." + std::to_string(max));
  }
  return value;
}

std::uint64_t parse_size(const ParsedOption& option, std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool whole = !text.empty() && end == text.data() + text.size();
  if (whole &&
      (error == std::errc::result_out_of_range || (error == std::errc() && value > kMaxSize))) {
    throw UsageError("size " + std::string(text) + " (" + option.spelling + ") is larger than " +
                     std::to_string(kMaxSize) + " bytes (8 MiB), the most the buffers hold");
  }
  if (!whole || error != std::errc() || value == 0) {
    throw UsageError("invalid size '" + std::string(text) + "' for " + option.spelling +
                     " (expected 1.." + std::to_string(kMaxSize) + " bytes)");
  }
  return value;
}

std::vector<std::uint64_t> parse_size_list(const ParsedOption& option) {
  std::vector<std::uint64_t> sizes;
  std::string_view rest = option.value;
  while (true) {
    const auto comma = rest.find(',');
    sizes.push_back(parse_size(option, rest.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return sizes;
}

std::optional<Verb> parse_verb(std::string_view word) {
  if (word == "send") return Verb::send;
  if (word == "write") return Verb::write;
  if (word == "read") return Verb::read;
  return std::nullopt;
}

std::optional<Measure> parse_measure(std::string_view word) {
  if (word == "bw") return Measure::bw;
  if (word == "lat") return Measure::lat;
  return std::nullopt;
}

bool wants_help(const SplitArguments& split) {
  return std::ranges::any_of(split.options,
                             [](const ParsedOption& o) { return o.opt == Opt::help; });
}

/// Rejects options that the command does not have.
void reject_foreign(const SplitArguments& split, std::initializer_list<Opt> allowed,
                    std::string_view command) {
  for (const auto& option : split.options) {
    if (std::ranges::find(allowed, option.opt) == allowed.end()) {
      throw UsageError("option " + option.spelling + " does not apply to '" + std::string(command) +
                       "'");
    }
  }
}

DevicesOptions parse_devices(const SplitArguments& split) {
  reject_foreign(split, {Opt::help, Opt::verbose, Opt::json}, "ibvcpp devices");
  if (split.words.size() > 1) {
    throw UsageError("unexpected argument '" + std::string(split.words[1]) +
                     "' for 'ibvcpp devices'");
  }
  DevicesOptions options;
  for (const auto& option : split.options) {
    if (option.opt == Opt::verbose) options.verbose = true;
    if (option.opt == Opt::json) options.json = true;
  }
  return options;
}

/// The sizes to run: exactly one of -s, -a, --sizes, else the default.
void resolve_sizes(PerfOptions& options, const std::optional<ParsedOption>& size,
                   const std::optional<ParsedOption>& sizes) {
  const int given = (size ? 1 : 0) + (sizes ? 1 : 0) + (options.all_sizes ? 1 : 0);
  if (given > 1) throw UsageError("-s, -a and --sizes exclude each other: give one of them");
  if (size) {
    options.sizes = {parse_size(*size, size->value)};
  } else if (sizes) {
    options.sizes = parse_size_list(*sizes);
  } else if (options.all_sizes) {
    for (std::uint64_t s = 2; s <= kMaxSize; s *= 2) options.sizes.push_back(s);
  } else {
    options.sizes = {options.test.measure == Measure::bw ? std::uint64_t{65536} : std::uint64_t{2}};
  }
}

/// Applies one option to `options`; -s and --sizes are kept aside for resolve_sizes().
void apply_perf_option(PerfOptions& options, const ParsedOption& option,
                       std::optional<ParsedOption>& size, std::optional<ParsedOption>& sizes,
                       bool& tx_depth_given) {
  switch (option.opt) {
    case Opt::json: options.json = true; break;
    case Opt::device:
      if (option.value.empty()) throw UsageError("option " + option.spelling + " needs a name");
      options.device = option.value;
      break;
    case Opt::ib_port:
      options.ib_port = static_cast<std::uint8_t>(parse_number(option, 1, 255));
      break;
    case Opt::gid_index:
      options.gid_index = static_cast<std::uint32_t>(parse_number(option, 0, 65535));
      break;
    case Opt::size: size = option; break;
    case Opt::all: options.all_sizes = true; break;
    case Opt::sizes: sizes = option; break;
    case Opt::iters:
      options.iterations =
          static_cast<std::uint32_t>(parse_number(option, kMinIterations, kMaxIterations));
      break;
    case Opt::tcp_port:
      options.tcp_port = static_cast<std::uint16_t>(parse_number(option, 1, 65535));
      break;
    case Opt::mtu: {
      const auto mtu = static_cast<std::uint32_t>(parse_number(option, 256, 4096));
      if (mtu != 256 && mtu != 512 && mtu != 1024 && mtu != 2048 && mtu != 4096) {
        reject_value(option, "the path MTU is 256, 512, 1024, 2048 or 4096");
      }
      options.mtu = mtu;
      break;
    }
    case Opt::tx_depth:
      options.tx_depth = static_cast<std::uint32_t>(parse_number(option, 1, 16384));
      tx_depth_given = true;
      break;
    case Opt::qps: options.qps = static_cast<std::uint32_t>(parse_number(option, 1, 256)); break;
    case Opt::post_list:
      options.post_list = static_cast<std::uint32_t>(parse_number(option, 1, 16384));
      break;
    case Opt::cq_mod:
      options.cq_mod = static_cast<std::uint32_t>(parse_number(option, 1, kMaxCqModeration));
      break;
    case Opt::inline_size:
      options.inline_size = static_cast<std::uint32_t>(parse_number(option, 0, 65536));
      break;
    case Opt::post_interface:
      if (option.value == "classic") {
        options.post_interface = ibv::PostInterface::classic;
      } else if (option.value == "extended") {
        options.post_interface = ibv::PostInterface::extended;
      } else {
        reject_value(option, "expected classic or extended");
      }
      break;
    case Opt::report_gbits: options.report_gbits = true; break;
    case Opt::timeout:
      options.timeout = std::chrono::seconds(parse_number(option, 1, 86400));
      break;
    case Opt::rdma_cm: options.rdma_cm = true; break;
    case Opt::connection:
      if (option.value == "RC") {
        options.connection = Transport::rc;
      } else if (option.value == "UD") {
        options.connection = Transport::ud;
      } else {
        reject_value(option, "expected RC or UD");
      }
      break;
    case Opt::help:
    case Opt::verbose:
      throw UsageError("option " + option.spelling + " does not apply to 'ibvcpp perf'");
  }
}

/// -l and -Q, by perftest's rules, once -n and -t are resolved: bw tests only; every post a
/// whole list (the iterations a multiple of it) that fits in the TX depth (perftest would wait
/// for room forever); the list a multiple of the moderation, so that each list ends with a
/// signaled request.
void check_post_list(const PerfOptions& options) {
  if (options.test.measure == Measure::lat) {
    if (options.post_list > 1) {
      throw UsageError("-l " + std::to_string(options.post_list) +
                       ": post lists are for bw tests (latency tests post one request at a "
                       "time)");
    }
    if (options.cq_mod) {
      throw UsageError("-Q " + std::to_string(*options.cq_mod) +
                       ": CQ moderation is for bw tests (latency tests signal every request)");
    }
    return;
  }
  if (options.post_list == 1) return;
  const std::string list = "-l " + std::to_string(options.post_list);
  if (options.iterations % options.post_list != 0) {
    throw UsageError("-n " + std::to_string(options.iterations) + " is not a multiple of " + list +
                     " (every post is a whole list; the default -n is 5000 for write "
                     "bw, 1000 otherwise)");
  }
  if (options.post_list > options.tx_depth) {
    throw UsageError(list + " is more than the TX depth " + std::to_string(options.tx_depth) +
                     " (-t, at most -n): a list must fit in the requests in flight");
  }
  if (options.cq_mod) {
    const std::uint32_t moderation = std::min(*options.cq_mod, options.tx_depth);
    if (options.post_list % moderation != 0) {
      throw UsageError(list + " is not a multiple of the CQ moderation " +
                       std::to_string(moderation) + " (-Q " + std::to_string(*options.cq_mod) +
                       (moderation != *options.cq_mod ? ", capped at the TX depth" : "") +
                       "): each list must end with a signaled request");
    }
  }
}

/// -c UD by perftest's rules: sends only (a UD queue pair has no remote memory to write or
/// read), no rdma_cm (ibvcpp exchanges UD addresses over its TCP connection), the classic post
/// interface (UdQueuePair posts with ibv_post_send).
void check_datagram_options(const PerfOptions& options) {
  if (options.connection != Transport::ud) return;
  if (options.test.verb != Verb::send) {
    throw UsageError("-c UD carries sends only (UD has no RDMA " +
                     std::string(options.test.verb == Verb::write ? "write" : "read") +
                     "): run 'ibvcpp perf send " +
                     (options.test.measure == Measure::bw ? "bw" : "lat") + " -c UD'");
  }
  if (options.rdma_cm) {
    throw UsageError("-c UD can not be used with -R: the UD addresses travel over TCP");
  }
  if (options.post_interface == ibv::PostInterface::extended) {
    throw UsageError(
        "--post-interface extended does not apply to -c UD: UD queue pairs post "
        "with ibv_post_send");
  }
}

PerfOptions parse_perf(const SplitArguments& split) {
  // words: "perf", verb, measure, [server]
  if (split.words.size() < 3) {
    throw UsageError("'ibvcpp perf' needs a test: {send|write|read} {bw|lat}");
  }
  PerfOptions options;
  const auto verb = parse_verb(split.words[1]);
  const auto measure = parse_measure(split.words[2]);
  if (!verb) {
    throw UsageError("unknown verb '" + std::string(split.words[1]) +
                     "' (expected send, write or read)");
  }
  if (!measure) {
    throw UsageError("unknown measurement '" + std::string(split.words[2]) +
                     "' (expected bw or lat)");
  }
  options.test = {*verb, *measure};
  if (split.words.size() == 4) {
    options.server = std::string(split.words[3]);
  } else if (split.words.size() > 4) {
    throw UsageError("more than one server address given ('" + std::string(split.words[3]) +
                     "', '" + std::string(split.words[4]) + "')");
  }

  std::optional<ParsedOption> size;
  std::optional<ParsedOption> sizes;
  bool tx_depth_given = false;
  for (const auto& option : split.options) {
    apply_perf_option(options, option, size, sizes, tx_depth_given);
  }
  resolve_sizes(options, size, sizes);

  const bool bw = options.test.measure == Measure::bw;
  if (options.iterations == 0) {
    // perftest: 5000 for ib_write_bw, 1000 for every other test.
    options.iterations = bw && options.test.verb == Verb::write ? 5000 : 1000;
  }
  if (!tx_depth_given) options.tx_depth = bw ? 128 : 1;
  options.tx_depth = std::min(options.tx_depth, options.iterations);  // as perftest
  if (options.rdma_cm && options.gid_index) {
    throw UsageError("-x can not be used with -R: rdma_cm chooses the GID of the address");
  }
  if (options.rdma_cm && options.mtu) {
    throw UsageError("-m can not be used with -R: rdma_cm chooses the path MTU");
  }
  if (!bw && options.qps > 1) {
    throw UsageError("-q " + std::to_string(options.qps) +
                     ": latency tests run on one queue pair (-q is for bw tests)");
  }
  check_post_list(options);
  check_datagram_options(options);
  if (std::uint64_t{options.iterations} * options.qps > kMaxIterations) {
    throw UsageError("-n " + std::to_string(options.iterations) + " with -q " +
                     std::to_string(options.qps) + " is more than " +
                     std::to_string(kMaxIterations) +
                     " requests per size (a timestamp of each is kept)");
  }
  if (options.test.verb == Verb::read) options.inline_size = 0;  // as perftest
  return options;
}

}  // namespace

std::string TestKind::name() const {
  std::string name = verb == Verb::send ? "send" : verb == Verb::write ? "write" : "read";
  return name + (measure == Measure::bw ? "_bw" : "_lat");
}

std::string TestKind::title() const {
  std::string title = verb == Verb::send    ? "Send"
                      : verb == Verb::write ? "RDMA_Write"
                                            : "RDMA_Read";
  return title + (measure == Measure::bw ? " BW Test" : " Latency Test");
}

std::optional<TestKind> TestKind::from_name(std::string_view name) {
  const auto underscore = name.find('_');
  if (underscore == std::string_view::npos) return std::nullopt;
  const auto verb = parse_verb(name.substr(0, underscore));
  const auto measure = parse_measure(name.substr(underscore + 1));
  if (!verb || !measure) return std::nullopt;
  return TestKind{*verb, *measure};
}

std::uint64_t PerfOptions::max_size() const noexcept {
  return sizes.empty() ? 0 : *std::ranges::max_element(sizes);
}

std::uint32_t PerfOptions::cq_moderation(std::uint64_t size) const noexcept {
  if (test.measure == Measure::lat) return 1;
  std::uint32_t moderation = kDefaultCqModeration;
  if (cq_mod) {
    moderation = *cq_mod;  // as perftest: also above 8 KiB
  } else if (post_list > 1) {
    return post_list;  // at most the TX depth (check_post_list)
  } else if (size > kCqModerationSizeLimit && !all_sizes) {
    moderation = 1;
  }
  return std::max<std::uint32_t>(1, std::min(moderation, tx_depth));
}

std::uint32_t PerfOptions::rx_depth() const noexcept {
  return std::min(connection == Transport::ud ? kMaxUdRxDepth : kDefaultRxDepth, iterations);
}

std::string_view transport_name(Transport transport) noexcept {
  return transport == Transport::ud ? "UD" : "RC";
}

void fit_datagram_sizes(PerfOptions& options, std::uint32_t mtu) {
  if (options.connection != Transport::ud) return;
  if (options.all_sizes) {
    std::erase_if(options.sizes, [mtu](std::uint64_t size) { return size > mtu; });
    return;
  }
  for (const auto size : options.sizes) {
    if (size > mtu) {
      throw UsageError("size " + std::to_string(size) + " is above the path MTU " +
                       std::to_string(mtu) + ": a UD message is one packet (-c UD)");
    }
  }
}

Command parse_command_line(std::span<const std::string_view> args) {
  const SplitArguments split = split_arguments(args);
  if (split.words.empty()) {
    if (wants_help(split)) return HelpRequest{general_usage()};
    throw UsageError("no command given (expected 'devices' or 'perf')");
  }
  const std::string_view command = split.words.front();
  if (command == "devices") {
    if (wants_help(split)) return HelpRequest{devices_usage()};
    return parse_devices(split);
  }
  if (command == "perf") {
    if (wants_help(split)) return HelpRequest{perf_usage()};
    return parse_perf(split);
  }
  if (command == "help") return HelpRequest{general_usage()};
  throw UsageError("unknown command '" + std::string(command) + "' (expected 'devices' or 'perf')");
}

std::string general_usage() {
  return "Usage:\n"
         "  ibvcpp devices [-v] [--json]        list RDMA devices (-v: ports and GID tables)\n"
         "  ibvcpp perf {send|write|read} {bw|lat} [options]           start a server\n"
         "  ibvcpp perf {send|write|read} {bw|lat} [options] <server>  connect to <server>\n"
         "  mpirun -np 2 ibvcpp perf {send|write|read} {bw|lat} [options]   server and client\n"
         "  ibvcpp <command> -h                 help on a command\n"
         "\n"
         "Exit status: 0 ok, 1 the test failed at run time, 2 usage error or settings that\n"
         "differ between client and server, 3 device problem, 4 connection problem.\n";
}

std::string devices_usage() {
  return "Usage: ibvcpp devices [-v] [--json]\n"
         "\n"
         "Lists the RDMA devices of this host (name, node GUID, node type, transport).\n"
         "  -v, --verbose   also every port: state, MTU, link layer, LID and GID table\n"
         "      --json      one JSON document instead of the table\n"
         "  -h, --help      this text\n";
}

std::string perf_usage() {
  return "Usage:\n"
         "  ibvcpp perf {send|write|read} {bw|lat} [options]            start a server\n"
         "  ibvcpp perf {send|write|read} {bw|lat} [options] <server>   connect to <server>\n"
         "  mpirun -np 2 ibvcpp perf {send|write|read} {bw|lat} [options]    both, launched\n"
         "\n"
         "Measures like perftest's ib_{send,write,read}_{bw,lat}; both sides must be given the\n"
         "same test, sizes, iterations, TX depth, QPs, post list and CQ moderation (they\n"
         "check each other).\n"
         "\n"
         "Started by a launcher as 2 ranks (mpirun, srun, or IBV_BOOTSTRAP set) and given no\n"
         "<server>, rank 0 is the server and rank 1 its client: they meet through PMIx or\n"
         "IBV_BOOTSTRAP's rendezvous, and rank 0 prints the report. Without -d, IBV_DEVICE\n"
         "chooses the device (a comma list: one per local rank).\n"
         "\n"
         "Options (perftest's meanings and defaults):\n"
         "  -d, --ib-dev=<dev>         RDMA device (default: IBV_DEVICE, else the first with\n"
         "                             an active port)\n"
         "  -i, --ib-port=<port>       port of the device (default 1)\n"
         "  -x, --gid-index=<index>    GID index (default: the RoCE v2 IPv4 entry on Ethernet)\n"
         "  -s, --size=<bytes>         message size, 1..8388608 (default 65536 bw, 2 lat)\n"
         "  -a, --all                  sizes 2..8388608 in powers of two\n"
         "      --sizes=<list>         comma-separated sizes, e.g. 2,4,65535,65537\n"
         "  -n, --iters=<n>            iterations per size, at least 5\n"
         "                             (default 5000 for write bw, 1000 otherwise)\n"
         "  -p, --port=<port>          TCP port of the exchange (default 18515)\n"
         "  -m, --mtu=<bytes>          path MTU 256..4096 (default: the port's active MTU)\n"
         "  -t, --tx-depth=<n>         requests in flight (default 128 bw, 1 lat)\n"
         "  -q, --qp=<n>               queue pairs, bw tests (default 1)\n"
         "  -l, --post_list=<n>        post n requests linked, one doorbell (bw tests;\n"
         "                             default 1): -n a multiple of n, n at most -t\n"
         "  -Q, --cq-mod=<n>           signal one request in n, 1..1024 (bw tests; default:\n"
         "                             the post list with -l, else 100, 1 above 8 KiB unless\n"
         "                             -a; at most -t); with -l, a divisor of the list\n"
         "  -I, --inline_size=<bytes>  send and write up to this size inline (default 0)\n"
         "      --post-interface=<how> classic (ibv_post_send, the default) or extended\n"
         "                             (ibv_wr_start .. ibv_wr_complete, perftest's default)\n"
         "      --report_gbits         bandwidth in Gb/sec (10^9 bit), not MB/sec (2^20 byte)\n"
         "      --json                 one JSON document on stdout instead of the tables\n"
         "      --timeout=<seconds>    wait at most this long for a client, and for a silent\n"
         "                             peer during the test (default 30)\n"
         "  -R, --rdma_cm              connect the queue pairs with rdma_cm (at <server>, an IP\n"
         "                             address, on the rdma_cm port -p) instead of exchanging\n"
         "                             endpoints over TCP; -x and -m do not apply\n"
         "  -c, --connection=<RC|UD>   the transport (default RC); UD: send tests only, every\n"
         "                             size at most the path MTU (-a: the sizes up to it),\n"
         "                             receives for every message posted up front (at most\n"
         "                             16000), no -R\n"
         "  -h, --help                 this text\n"
         "\n"
         "Exit status: 0 ok, 1 the test failed at run time, 2 usage error or settings that\n"
         "differ between client and server, 3 device problem, 4 connection problem.\n";
}

}  // namespace ibvcpp
