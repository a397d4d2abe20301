// SPDX-License-Identifier: MIT
// rc_pingpong: rdma-core's ibv_rc_pingpong written with ibverbs-cpp. It speaks the same
// out-of-band TCP protocol and runs the same ping-pong of sends over a reliable-connected queue
// pair, so either side may be the original program:
//
//     server$ ibv_rc_pingpong -d rxe0 -g 1 -n 200           (or: rc_pingpong -d rxe0 -g 1 -n 200)
//     client$ rc_pingpong -d rxe0 -g 1 -n 200 SERVER-HOST   (or: ibv_rc_pingpong ... SERVER-HOST)
//
// Both sides must be given the same -s, -n, -m and -p. On RoCE (Ethernet ports, e.g. Soft-RoCE
// rxe0) ibv_rc_pingpong needs -g; this program picks a GID index itself when -g is not given.
// Every wait is bounded by -T (default 60 s). Exit status 0 on success, 1 on any error.
//
// The exchange, as in ibv_rc_pingpong:
//   1. both sides create their queue pair; the server listens on the TCP port;
//   2. the client connects and writes its address "LID:QPN:PSN:GID" (52 bytes with the NUL);
//   3. the server reads it, connects its queue pair, posts receives and answers with its own
//      address; the client connects its queue pair, posts receives and writes "done";
//   4. the client sends the first message; each side sends its next message once its previous
//      send and one receive have completed, until both have sent and received -n messages.
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Command line

struct Options {
  std::optional<std::string> server;  // a host name makes this side the client
  std::uint16_t tcp_port = 18515;
  std::optional<std::string> device;  // default: the first device found
  std::uint8_t ib_port = 1;
  std::uint32_t size = 4096;
  std::uint32_t mtu = 1024;
  std::uint32_t rx_depth = 500;
  std::uint32_t iters = 1000;
  std::uint8_t service_level = 0;
  std::optional<std::uint32_t> gid_index;  // default: none on InfiniBand, automatic on RoCE
  bool validate = false;
  std::chrono::seconds timeout{60};
};

/// A bad command line: main prints the message and the usage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void print_usage(std::FILE* out, const char* program) {
  std::fprintf(out,
               "Usage:\n"
               "  %s            start a server and wait for connection\n"
               "  %s <host>     connect to server at <host>\n"
               "\n"
               "Options:\n"
               "  -p, --port=<port>      listen on/connect to port <port> (default 18515)\n"
               "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n"
               "  -i, --ib-port=<port>   use port <port> of IB device (default 1)\n"
               "  -s, --size=<size>      size of message to exchange (default 4096)\n"
               "  -m, --mtu=<size>       path MTU (default 1024)\n"
               "  -r, --rx-depth=<dep>   number of receives to post at a time (default 500)\n"
               "  -n, --iters=<iters>    number of exchanges (default 1000)\n"
               "  -l, --sl=<sl>          service level value (default 0)\n"
               "  -g, --gid-idx=<gid index> local port gid index. Default: on InfiniBand no GID\n"
               "                         (route by LID, as ibv_rc_pingpong does); on Ethernet\n"
               "                         (RoCE) ibverbs-cpp chooses the index automatically,\n"
               "                         because RoCE needs a GID (ibv_rc_pingpong needs -g)\n"
               "  -c, --chk              validate received buffer (give it to both sides)\n"
               "  -T, --timeout=<secs>   give up when the peer or the device has been silent\n"
               "                         this long (default 60; not in ibv_rc_pingpong)\n"
               "  -h, --help             show this help\n"
               "ibv_rc_pingpong's -e, -o, -O, -P, -t, -j and -N are not supported.\n",
               program, program);
}

/// Parses a number the way ibv_rc_pingpong does (strtoul base 0: decimal, 0x hex, 0 octal),
/// but rejects trailing text and values outside [min, max].
std::uint64_t parse_number(const char* text, std::string_view option, std::uint64_t min,
                           std::uint64_t max) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || *text == '-' || value < min || value > max) {
    throw UsageError("invalid value '" + std::string(text) + "' for " + std::string(option) +
                     " (expected " + std::to_string(min) + ".." + std::to_string(max) + ")");
  }
  return value;
}

template <typename T>
T parse_option(std::string_view option, std::uint64_t min, std::uint64_t max) {
  return static_cast<T>(parse_number(optarg, option, min, max));
}

/// Returns the options, or nullopt when --help was asked for. Throws UsageError.
std::optional<Options> parse_options(int argc, char** argv) {
  static constexpr std::array<option, 13> kLongOptions{{
      {"port", required_argument, nullptr, 'p'},
      {"ib-dev", required_argument, nullptr, 'd'},
      {"ib-port", required_argument, nullptr, 'i'},
      {"size", required_argument, nullptr, 's'},
      {"mtu", required_argument, nullptr, 'm'},
      {"rx-depth", required_argument, nullptr, 'r'},
      {"iters", required_argument, nullptr, 'n'},
      {"sl", required_argument, nullptr, 'l'},
      {"gid-idx", required_argument, nullptr, 'g'},
      {"chk", no_argument, nullptr, 'c'},
      {"timeout", required_argument, nullptr, 'T'},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  }};
  constexpr std::uint64_t kIntMax = 0x7fffffff;  // ibv_rc_pingpong prints counts with %d
  Options options;
  int c = 0;
  while ((c = getopt_long(argc, argv, "p:d:i:s:m:r:n:l:g:cT:h", kLongOptions.data(), nullptr)) !=
         -1) {
    switch (c) {
      case 'p': options.tcp_port = parse_option<std::uint16_t>("-p", 1, 65535); break;
      case 'd': options.device = optarg; break;
      case 'i': options.ib_port = parse_option<std::uint8_t>("-i", 1, 255); break;
      case 's': options.size = parse_option<std::uint32_t>("-s", 1, kIntMax); break;
      case 'm': options.mtu = parse_option<std::uint32_t>("-m", 256, 4096); break;
      case 'r': options.rx_depth = parse_option<std::uint32_t>("-r", 1, kIntMax - 1); break;
      case 'n': options.iters = parse_option<std::uint32_t>("-n", 1, kIntMax); break;
      case 'l': options.service_level = parse_option<std::uint8_t>("-l", 0, 15); break;
      case 'g': options.gid_index = parse_option<std::uint32_t>("-g", 0, 255); break;
      case 'c': options.validate = true; break;
      case 'T': options.timeout = std::chrono::seconds(parse_number(optarg, "-T", 1, 86400)); break;
      case 'h': return std::nullopt;
      default: throw UsageError("unknown option or missing argument");  // getopt said which
    }
  }
  if (optind == argc - 1) {
    options.server = argv[optind];
  } else if (optind < argc) {
    throw UsageError("more than one server name given");
  }
  if (options.mtu != 256 && options.mtu != 512 && options.mtu != 1024 && options.mtu != 2048 &&
      options.mtu != 4096) {
    throw UsageError("invalid value for -m: the path MTU is 256, 512, 1024, 2048 or 4096");
  }
  return options;
}

// ---------------------------------------------------------------------------------------------
// TCP: a small RAII file descriptor and reads, writes, connect and accept with deadlines.

class FileDescriptor {
 public:
  FileDescriptor() noexcept = default;
  explicit FileDescriptor(int fd) noexcept : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int error) { return std::strerror(error); }

/// Waits until `fd` is ready for `events` (POLLIN / POLLOUT); throws when `deadline` passes.
void wait_until_ready(const FileDescriptor& fd, short events, Clock::time_point deadline,
                      std::string_view what, std::chrono::seconds timeout) {
  while (true) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      throw std::runtime_error("timed out after " + std::to_string(timeout.count()) +
                               " s waiting for " + std::string(what));
    }
    pollfd entry{fd.get(), events, 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(left.count()));
    if (ready > 0) return;
    if (ready < 0 && errno != EINTR) throw std::runtime_error("poll: " + errno_text(errno));
  }
}

/// Reads exactly `out.size()` bytes (ibv_rc_pingpong reads each message with one read()).
void read_exactly(const FileDescriptor& fd, std::span<char> out, std::chrono::seconds timeout,
                  std::string_view what) {
  const auto deadline = Clock::now() + timeout;
  std::size_t done = 0;
  while (done < out.size()) {
    wait_until_ready(fd, POLLIN, deadline, what, timeout);
    const ssize_t n = ::recv(fd.get(), out.subspan(done).data(), out.size() - done, 0);
    if (n == 0) {
      throw std::runtime_error("the peer closed the connection after " + std::to_string(done) +
                               " of " + std::to_string(out.size()) + " bytes of " +
                               std::string(what) + " (did the peer fail? see its output)");
    }
    if (n < 0 && errno != EINTR && errno != EAGAIN) {
      throw std::runtime_error("reading " + std::string(what) + ": " + errno_text(errno));
    }
    if (n > 0) done += static_cast<std::size_t>(n);
  }
}

void write_all(const FileDescriptor& fd, std::span<const char> data, std::chrono::seconds timeout,
               std::string_view what) {
  const auto deadline = Clock::now() + timeout;
  std::size_t done = 0;
  while (done < data.size()) {
    wait_until_ready(fd, POLLOUT, deadline, what, timeout);
    // MSG_NOSIGNAL: a peer that went away is an error message, not a SIGPIPE.
    const ssize_t n = ::send(fd.get(), data.subspan(done).data(), data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR && errno != EAGAIN) {
      throw std::runtime_error("writing " + std::string(what) + ": " + errno_text(errno));
    }
    if (n > 0) done += static_cast<std::size_t>(n);
  }
}

using AddressList = std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)>;

/// Resolves `host` (nullptr: the wildcard address, for listening) and `port`, IPv4 or IPv6.
AddressList resolve(const char* host, std::uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = host == nullptr ? AI_PASSIVE : 0;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host, service.c_str(), &hints, &list); rc != 0) {
    throw std::runtime_error(std::string(::gai_strerror(rc)) + " for " +
                             (host != nullptr ? host : "port") + ":" + service);
  }
  return {list, &::freeaddrinfo};
}

/// Connects to the server, trying each of its addresses in turn (like ibv_rc_pingpong); a
/// connection attempt that hangs gives up after `timeout`.
FileDescriptor connect_to_server(const std::string& host, std::uint16_t port,
                                 std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string last_error = "no address";
  const AddressList addresses = resolve(host.c_str(), port);
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    FileDescriptor fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol));
    if (!fd.valid()) {
      last_error = "socket: " + errno_text(errno);
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last_error = errno_text(errno);
        continue;
      }
      wait_until_ready(fd, POLLOUT, deadline, "the TCP connection to " + host, timeout);
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        last_error = errno_text(error);
        continue;
      }
    }
    return fd;
  }
  throw std::runtime_error("couldn't connect to " + host + ":" + std::to_string(port) + ": " +
                           last_error + " (is the server running?)");
}

/// Listens on `port` (first wildcard address that binds, as ibv_rc_pingpong does), accepts one
/// client within `timeout` and stops listening.
FileDescriptor accept_client(std::uint16_t port, std::chrono::seconds timeout) {
  FileDescriptor listener;
  std::string last_error = "no address";
  const AddressList addresses = resolve(nullptr, port);
  for (const addrinfo* a = addresses.get(); a != nullptr && !listener.valid(); a = a->ai_next) {
    FileDescriptor fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol));
    const int on = 1;
    if (fd.valid() && ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) == 0 &&
        ::bind(fd.get(), a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd.get(), 1) == 0) {
      listener = std::move(fd);
    } else {
      last_error = errno_text(errno);
    }
  }
  if (!listener.valid()) {
    throw std::runtime_error("couldn't listen to TCP port " + std::to_string(port) + ": " +
                             last_error);
  }
  wait_until_ready(listener, POLLIN, Clock::now() + timeout,
                   "a client on TCP port " + std::to_string(port), timeout);
  FileDescriptor client(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK));
  if (!client.valid()) throw std::runtime_error("accept: " + errno_text(errno));
  return client;
}

// ---------------------------------------------------------------------------------------------
// The address message of ibv_rc_pingpong: "%04x:%06x:%06x:%s" with LID, QPN, PSN and the GID as
// 32 hex digits, sent with its NUL in a buffer of exactly this size.

constexpr std::size_t kMessageSize = sizeof "0000:000000:000000:00000000000000000000000000000000";
using Message = std::array<char, kMessageSize>;

/// The client's final word, NUL included (5 bytes).
constexpr std::string_view kDone{"done", sizeof "done"};

/// The GID as ibv_rc_pingpong's gid_to_wire_gid() writes it: each 32-bit quarter through
/// htonl() and "%08x", which on any host is the 16 bytes in network order as hex digits.
std::string gid_to_wire(const ibv::Gid& gid) {
  std::string hex;
  for (const std::uint8_t byte : gid.bytes()) {
    std::array<char, 3> two{};
    std::snprintf(two.data(), two.size(), "%02x", static_cast<unsigned>(byte));
    hex += two.data();
  }
  return hex;
}

ibv::Gid gid_from_wire(std::string_view hex) {
  std::array<std::uint8_t, 16> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char* first = hex.data() + 2 * i;
    const auto [end, error] = std::from_chars(first, first + 2, bytes.at(i), 16);
    if (error != std::errc{} || end != first + 2) throw std::invalid_argument("bad GID digit");
  }
  return ibv::Gid(bytes);
}

Message encode_address(const ibv::Endpoint& address) {
  Message message{};
  std::snprintf(message.data(), message.size(), "%04x:%06x:%06x:%s",
                static_cast<unsigned>(address.lid), static_cast<unsigned>(address.qp_number),
                static_cast<unsigned>(address.psn), gid_to_wire(address.gid).c_str());
  return message;
}

std::uint32_t parse_hex_field(std::string_view field, std::uint32_t max) {
  std::uint32_t value = 0;
  const auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value, 16);
  if (field.empty() || error != std::errc{} || end != field.data() + field.size() || value > max) {
    throw std::invalid_argument("bad field '" + std::string(field) + "'");
  }
  return value;
}

/// Parses the peer's address message; throws with the text received when it is malformed.
ibv::Endpoint decode_address(const Message& message) {
  const std::string_view text(message.data(), ::strnlen(message.data(), message.size()));
  try {
    std::array<std::string_view, 4> fields{};
    std::string_view rest = text;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const auto colon = i + 1 < fields.size() ? rest.find(':') : rest.size();
      if (colon == std::string_view::npos) throw std::invalid_argument("too few fields");
      fields.at(i) = rest.substr(0, colon);
      rest.remove_prefix(std::min(colon + 1, rest.size()));
    }
    if (fields[3].size() != 32) throw std::invalid_argument("the GID is not 32 hex digits");
    ibv::Endpoint address;
    address.lid = static_cast<std::uint16_t>(parse_hex_field(fields[0], 0xffff));
    address.qp_number = parse_hex_field(fields[1], 0xffffff);
    address.psn = parse_hex_field(fields[2], 0xffffff);
    address.gid = gid_from_wire(fields[3]);
    return address;
  } catch (const std::invalid_argument& error) {
    throw std::runtime_error("malformed address from the peer: \"" + std::string(text) + "\" (" +
                             error.what() + ")");
  }
}

void send_address(const FileDescriptor& peer, const ibv::Endpoint& address,
                  std::chrono::seconds timeout) {
  write_all(peer, encode_address(address), timeout, "the local address");
}

ibv::Endpoint receive_address(const FileDescriptor& peer, std::chrono::seconds timeout) {
  Message message{};
  read_exactly(peer, message, timeout, "the remote address");
  return decode_address(message);
}

void receive_done(const FileDescriptor& peer, std::chrono::seconds timeout) {
  std::array<char, kDone.size()> word{};
  read_exactly(peer, word, timeout, "\"done\" from the client");
  if (std::string_view(word.data(), word.size()) != kDone) {
    throw std::runtime_error("expected \"done\" from the client");
  }
}

/// "  local address:  LID 0x0000, QPN 0x000011, PSN 0x2f1a3b, GID ::ffff:10.0.0.1", exactly as
/// ibv_rc_pingpong prints it.
void print_address(const char* label, const ibv::Endpoint& address) {
  std::printf("  %s LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", label,
              static_cast<unsigned>(address.lid), static_cast<unsigned>(address.qp_number),
              static_cast<unsigned>(address.psn), address.gid.to_string().c_str());
}

// ---------------------------------------------------------------------------------------------
// Verbs set-up

/// The device named by -d, else the first device found (ibv_rc_pingpong's default).
ibv::Context open_chosen_device(const Options& options) {
  if (options.device) return ibv::open_device(*options.device);
  const auto devices = ibv::list_devices();
  if (devices.empty()) throw std::runtime_error("no RDMA devices found (see ibv_devices)");
  return ibv::open_device(devices.front().name);
}

/// ibv_rc_pingpong's queue pair: one send at a time, rx_depth receives, no remote access (only
/// sends and receives), a random first PSN, the -m path MTU and the -l service level.
ibv::PreparedQueuePair build_queue_pair(const Options& options, const ibv::ProtectionDomain& pd,
                                        const ibv::CompletionQueue& cq) {
  ibv::QueuePairBuilder builder(pd, cq, cq);
  builder.port(ibv::PortNumber{options.ib_port})
      .access(ibv::RemoteAccess::none())
      .max_send_wr(ibv::QueueDepth(1))
      .max_recv_wr(ibv::QueueDepth(options.rx_depth))
      .mtu(ibv::Mtu::from_bytes(options.mtu))
      .send_psn(ibv::Psn::random())  // ibv_rc_pingpong: lrand48() & 0xffffff
      .service_level(options.service_level);
  // Without -g the library chooses the GID index on Ethernet (RoCE) ports and uses no GID on
  // InfiniBand ports.
  if (options.gid_index) builder.gid_index(*options.gid_index);
  return builder.build();
}

/// What this side sends the peer. Without -g on InfiniBand, ibv_rc_pingpong sends an all-zero
/// GID (and its peer then routes by LID only); do the same.
ibv::Endpoint local_address(const ibv::PreparedQueuePair& prepared, const Options& options,
                            const ibv::PortAttributes& port) {
  ibv::Endpoint address = prepared.endpoint();
  if (port.link_layer != ibv::LinkLayer::ethernet) {
    if (address.lid == 0) {
      throw std::runtime_error("couldn't get local LID: port " + std::to_string(port.port) +
                               " has LID 0 (is a subnet manager running?)");
    }
    if (!options.gid_index) address.gid = ibv::Gid{};
  }
  return address;
}

/// Catches the combination ibv_rc_pingpong fails on obscurely (no GID on RoCE), with a way out.
void check_remote_address(const ibv::Endpoint& remote, const ibv::PortAttributes& port) {
  if (remote.gid.is_zero() && port.link_layer == ibv::LinkLayer::ethernet) {
    throw std::runtime_error(
        "the peer sent no GID (all zeros), but this is a RoCE (Ethernet) port, where the GID is "
        "the address: give the peer a GID index, e.g. ibv_rc_pingpong -g <index> (the GID table "
        "is in `ibv_devinfo -v`)");
  }
}

// ---------------------------------------------------------------------------------------------
// The ping-pong

/// -c, as in ibv_rc_pingpong: before its first send the client marks the first byte of every
/// page with "page number % sizeof(char)" (which is always 0); after the last message the server
/// checks those bytes.
constexpr std::byte kPageMark{0};
constexpr std::byte kFill{0x7b};  // ibv_rc_pingpong's initial buffer contents

std::size_t page_size() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

void mark_pages(std::span<std::byte> buffer) {
  for (std::size_t i = 0; i < buffer.size(); i += page_size()) buffer[i] = kPageMark;
}

/// Prints "invalid data in page N" for each bad page, like ibv_rc_pingpong; returns their count.
std::size_t check_pages(std::span<const std::byte> buffer) {
  std::size_t invalid = 0;
  for (std::size_t i = 0; i < buffer.size(); i += page_size()) {
    if (buffer[i] != kPageMark) {
      std::printf("invalid data in page %zu\n", i / page_size());
      ++invalid;
    }
  }
  return invalid;
}

/// Runs ibv_rc_pingpong's loop on a connected queue pair whose sends and receives complete in
/// one CQ. Sends go out of, and receives land in, the same buffer (the whole memory region).
/// Holds pointers into itself (requests -> elements), so it stays where it was made.
class PingPong {
 public:
  PingPong(const ibv::QueuePair& qp, const ibv::CompletionQueue& cq, const ibv::MemoryRegion& mr,
           const Options& options)
      : qp_(qp),
        cq_(cq),
        send_element_(mr.gather_all()),
        receive_element_(mr.scatter_all()),
        send_(ibv::SendRequest::send(kSendWrId, std::span(&send_element_, 1))),
        receives_(options.rx_depth,
                  ibv::ReceiveRequest(kReceiveWrId, std::span(&receive_element_, 1))),
        iters_(options.iters) {
    // Small messages go inline when the device allows it, as in ibv_rc_pingpong.
    if (qp.max_inline_data() >= mr.length()) send_.inline_data();
    post_receives(options.rx_depth);
  }
  PingPong(const PingPong&) = delete;
  PingPong& operator=(const PingPong&) = delete;
  ~PingPong() = default;

  /// The client starts: its first send.
  void send_first() { post_send(); }

  /// Polls until both sides have sent and received `iters` messages. Throws ibv::WorkError for a
  /// failed completion, std::runtime_error when nothing completes for `idle_timeout`.
  void run(std::chrono::seconds idle_timeout) {
    std::array<ibv::WorkCompletion, 2> batch{};
    auto last_progress = Clock::now();
    while (sends_done_ < iters_ || receives_done_ < iters_) {
      const auto completions = cq_.poll(batch);
      if (completions.empty()) {
        if (Clock::now() - last_progress > idle_timeout) throw stalled(idle_timeout);
        continue;
      }
      last_progress = Clock::now();
      for (const auto& completion : completions) handle(completion);
    }
  }

 private:
  static constexpr std::uint64_t kReceiveWrId = 1;  // ibv_rc_pingpong's PINGPONG_RECV_WRID
  static constexpr std::uint64_t kSendWrId = 2;     // PINGPONG_SEND_WRID

  void post_receives(std::uint32_t count) {
    qp_.post_receive(std::span(receives_).first(count));  // one doorbell for the batch
    receives_posted_ += count;
  }

  void post_send() {
    qp_.post_send(send_);
    send_outstanding_ = true;
    awaiting_receive_ = true;
  }

  void handle(const ibv::WorkCompletion& completion) {
    if (!completion.ok()) {
      throw ibv::WorkError(completion, completion.wr_id() == kSendWrId ? "send" : "receive");
    }
    if (completion.wr_id() == kSendWrId) {
      ++sends_done_;
      send_outstanding_ = false;
    } else if (completion.wr_id() == kReceiveWrId) {
      ++receives_done_;
      awaiting_receive_ = false;
      // Top the receive queue up again when it is nearly empty.
      if (--receives_posted_ <= 1) post_receives(receives_size() - receives_posted_);
    } else {
      throw std::runtime_error("completion for unknown wr_id " +
                               std::to_string(completion.wr_id()));
    }
    // The next message goes out once the last one was sent and the peer's answer is in.
    if (sends_done_ < iters_ && !send_outstanding_ && !awaiting_receive_) post_send();
  }

  [[nodiscard]] std::uint32_t receives_size() const {
    return static_cast<std::uint32_t>(receives_.size());
  }

  [[nodiscard]] std::runtime_error stalled(std::chrono::seconds idle_timeout) const {
    return std::runtime_error("no completion for " + std::to_string(idle_timeout.count()) +
                              " s after " + std::to_string(sends_done_) + " of " +
                              std::to_string(iters_) + " sends and " +
                              std::to_string(receives_done_) + " of " + std::to_string(iters_) +
                              " receives (does the peer run with the same -n and -s?)");
  }

  const ibv::QueuePair& qp_;
  const ibv::CompletionQueue& cq_;
  ibv::GatherElement send_element_;
  ibv::ScatterElement receive_element_;
  ibv::SendRequest send_;
  std::vector<ibv::ReceiveRequest> receives_;  // rx_depth identical receives, posted in batches
  std::uint32_t iters_;
  std::uint32_t receives_posted_ = 0;
  std::uint32_t sends_done_ = 0;
  std::uint32_t receives_done_ = 0;
  bool send_outstanding_ = false;
  bool awaiting_receive_ = true;  // both sides wait for a message before they answer
};

/// The two result lines of ibv_rc_pingpong (both directions count: size * iters * 2 bytes).
void print_results(const Options& options, Clock::duration elapsed) {
  const double usec = std::chrono::duration<double, std::micro>(elapsed).count();
  const auto bytes = static_cast<long long>(options.size) * options.iters * 2;
  std::printf("%lld bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec / 1e6,
              static_cast<double>(bytes) * 8. / usec);
  std::printf("%u iters in %.2f seconds = %.2f usec/iter\n", options.iters, usec / 1e6,
              usec / options.iters);
}

// ---------------------------------------------------------------------------------------------

int run(const Options& options) {
  const bool is_client = options.server.has_value();
  const ibv::Context context = open_chosen_device(options);
  const ibv::PortAttributes port = context.query_port(ibv::PortNumber{options.ib_port});
  const ibv::ProtectionDomain pd(context);
  std::vector<std::byte> buffer(options.size, kFill);
  const ibv::MemoryRegion mr = pd.register_local(buffer);
  const ibv::CompletionQueue cq(context, static_cast<int>(options.rx_depth) + 1);
  ibv::PreparedQueuePair prepared = build_queue_pair(options, pd, cq);

  const ibv::Endpoint local = local_address(prepared, options, port);
  print_address("local address: ", local);

  // The exchange: client writes first; the server answers once its QP is connected and its
  // receives are posted; the client closes with "done".
  FileDescriptor peer = is_client
                            ? connect_to_server(*options.server, options.tcp_port, options.timeout)
                            : accept_client(options.tcp_port, options.timeout);
  if (is_client) send_address(peer, local, options.timeout);
  const ibv::Endpoint remote = receive_address(peer, options.timeout);
  check_remote_address(remote, port);
  const ibv::QueuePair qp = std::move(prepared).handshake(remote);
  PingPong pingpong(qp, cq, mr, options);  // posts rx_depth receives
  if (is_client) {
    write_all(peer, kDone, options.timeout, "\"done\"");
  } else {
    send_address(peer, local, options.timeout);
    receive_done(peer, options.timeout);
  }
  peer.reset();  // the TCP connection is done with, as in ibv_rc_pingpong
  print_address("remote address:", remote);

  if (is_client) {
    if (options.validate) mark_pages(buffer);
    pingpong.send_first();
  }
  const auto start = Clock::now();
  pingpong.run(options.timeout);
  print_results(options, Clock::now() - start);

  if (!is_client && options.validate && check_pages(buffer) > 0) {
    std::fprintf(stderr, "rc_pingpong: error: the received buffer failed validation (-c)\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines appear in order even through a pipe
  try {
    const auto options = parse_options(argc, argv);
    if (!options) {
      print_usage(stdout, argv[0]);
      return 0;
    }
    return run(*options);
  } catch (const UsageError& error) {
    std::fprintf(stderr, "rc_pingpong: %s\n\n", error.what());
    print_usage(stderr, argv[0]);
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "rc_pingpong: error: %s\n", error.what());
    return 1;
  }
}
