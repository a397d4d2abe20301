// Exchanger: the TCP mesh of the out-of-band exchange. Every socket is non-blocking and one
// poll() loop per exchange drives everything at once (connection attempts and their retries,
// accepting, identifying, sending and receiving on every connection) under one deadline, so
// that large messages in both directions can not deadlock and no peer can make us wait longer.
#include "ibv/net/exchanger.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "detail/positive_timeout.hpp"
#include "ibv/net/exchange_message.hpp"
#include "net/incoming_message.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kConstruct = "Exchanger::Exchanger";
constexpr std::string_view kExchange = "Exchanger::exchange";

// Connections accepted but not yet identified by a hello, at most; beyond, the oldest is closed.
constexpr std::size_t kMaxStrays = 64;
// A connection attempt that gets no answer this long is abandoned (the next address, or a
// retry, may do better than a host that drops our SYNs).
constexpr std::chrono::milliseconds kConnectAttemptLimit{3000};

using Clock = std::chrono::steady_clock;

// Owns one file descriptor and closes it.
class Fd {
 public:
  Fd() noexcept = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  ~Fd() { reset(); }

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int errno_value) {
  std::array<char, 128> buffer{};
  return strerror_r(errno_value, buffer.data(), buffer.size());  // GNU: returns the text
}

// "node04:18515", "[fe80::1]:18515".
std::string host_port(std::string_view host, std::string_view port) {
  std::string text;
  if (host.find(':') != std::string_view::npos) {
    text += '[';
    text += host;
    text += ']';
  } else {
    text += host;
  }
  text += ':';
  text += port;
  return text;
}

std::string host_port(const HostConfig& host) {
  return host_port(host.hostname, std::to_string(host.port));
}

// A socket address with its length.
struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;

  [[nodiscard]] const sockaddr* get() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage);
  }
};

// "10.0.0.3:41234", "[::1]:41234"; IPv4-mapped IPv6 addresses as IPv4.
std::string address_text(const Address& address) {
  std::array<char, NI_MAXHOST> host{};
  std::array<char, NI_MAXSERV> service{};
  if (getnameinfo(address.get(), address.length, host.data(), host.size(), service.data(),
                  service.size(), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown address";
  }
  std::string_view name = host.data();
  if (name.starts_with("::ffff:") && name.find('.') != std::string_view::npos) {
    name.remove_prefix(7);
  }
  return host_port(name, service.data());
}

void set_no_delay(const Fd& fd) noexcept {
  const int on = 1;
  // Best effort: without it, small messages only wait for Nagle's algorithm.
  static_cast<void>(::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on));
}

// A socket connected to itself: dialling a local port nobody listens on can, rarely, pick that
// very port as its own ephemeral port (a TCP simultaneous open).
bool is_self_connection(const Fd& fd) {
  Address local;
  Address remote;
  local.length = sizeof local.storage;
  remote.length = sizeof remote.storage;
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local.storage), &local.length) != 0 ||
      getpeername(fd.get(), reinterpret_cast<sockaddr*>(&remote.storage), &remote.length) != 0) {
    return false;
  }
  return address_text(local) == address_text(remote);
}

bool is_resource_errno(int errno_value) {
  return errno_value == EMFILE || errno_value == ENFILE || errno_value == ENOBUFS ||
         errno_value == ENOMEM;
}

[[noreturn]] void throw_resource(std::string_view operation, int errno_value,
                                 const std::string& detail) {
  throw Error(ErrorKind::resource, operation, errno_value, detail,
              errno_value == EMFILE ? "the process ran out of file descriptors (`ulimit -n`)"
                                    : std::string_view{});
}

using detail::IncomingMessage;
using detail::Progress;

// One TCP connection: a peer rank's, or a stray one accepted and not yet identified.
struct Link {
  Fd fd;
  std::string name;                 // the peer as messages name it
  std::string address;              // numeric address of the other end, once known
  bool connecting = false;          // a non-blocking connect() in progress (dialled links)
  Clock::time_point connect_start;  // when that attempt started

  IncomingMessage in;     // the message being received: header, then payload
  bool received = false;  // this exchange's message from the peer is complete

  // What is being sent: our headers (hello and/or data), then the shared payload.
  std::vector<std::byte> out_head;
  std::size_t head_sent = 0;
  std::span<const std::byte> out_payload;
  std::size_t payload_sent = 0;

  [[nodiscard]] bool flushed() const noexcept {
    return head_sent == out_head.size() && payload_sent == out_payload.size();
  }
  [[nodiscard]] bool done() const noexcept {
    return fd.valid() && !connecting && received && flushed();
  }
  void expect_message() noexcept {
    in.reset();
    received = false;
  }
  void queue(const MessageHeader& data, std::span<const std::byte> data_payload, bool with_hello,
             const MessageHeader& hello) {
    out_head.clear();
    head_sent = 0;
    if (with_hello) {
      const auto bytes = hello.encode();
      out_head.insert(out_head.end(), bytes.begin(), bytes.end());
    }
    const auto bytes = data.encode();
    out_head.insert(out_head.end(), bytes.begin(), bytes.end());
    out_payload = data_payload;
    payload_sent = 0;
  }

  // Reads what has arrived of the current message, never past its end, checking the header as
  // it comes in (IncomingMessage::receive_from, which the fuzz target runs too). Throws the
  // protocol error of a bad header, the connection error of a broken connection.
  Progress receive(const HeaderExpectation& expected) {
    int error = 0;
    const Progress progress = in.receive_from(
        [&](std::span<std::byte> target) {
          return ::recv(fd.get(), target.data(), target.size(), 0);
        },
        expected, error);
    if (error != 0) {
      throw Error(ErrorKind::connection, kExchange, error,
                  name + " broke the connection " + received_so_far());
    }
    return progress;
  }

  // "after 10 of the 24 header bytes (truncated message)" and the like.
  [[nodiscard]] std::string received_so_far() const { return in.received_so_far(); }

  // Sends what the socket takes; true when everything queued is sent.
  bool transmit() {
    while (!flushed()) {
      std::array<iovec, 2> parts{};
      std::size_t count = 0;
      if (head_sent < out_head.size()) {
        parts[count++] = {out_head.data() + head_sent, out_head.size() - head_sent};
      }
      if (payload_sent < out_payload.size()) {
        // sendmsg() only reads the buffer; iovec has no const version.
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast)
        parts[count++] = {const_cast<std::byte*>(out_payload.data()) + payload_sent,
                          out_payload.size() - payload_sent};
      }
      msghdr message{};
      message.msg_iov = parts.data();
      message.msg_iovlen = count;
      const ssize_t n = ::sendmsg(fd.get(), &message, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
        const int error = errno;
        const std::size_t total = out_head.size() + out_payload.size();
        throw Error(ErrorKind::connection, kExchange, error,
                    name + " closed the connection before taking our message (" +
                        std::to_string(head_sent + payload_sent) + " of " + std::to_string(total) +
                        " bytes sent)",
                    "the peer failed or stopped: see its own error");
      }
      auto sent = static_cast<std::size_t>(n);
      const std::size_t from_head = std::min(sent, out_head.size() - head_sent);
      head_sent += from_head;
      payload_sent += sent - from_head;
    }
    return true;
  }
};

// Dialling one higher rank: its addresses and how the attempts went.
struct Dial {
  std::vector<Address> addresses;
  std::size_t next = 0;  // attempts so far select the address: addresses[next % size]
  Clock::time_point next_attempt{};
  unsigned attempts = 0;
  unsigned refused = 0;
  int last_errno = 0;
  std::string resolve_failure;  // why the host name did not resolve, if it did not
};

// A timeout message names at most this many ranks, and explains at most kMaxReasons of them.
constexpr std::size_t kMaxListed = 16;
constexpr std::size_t kMaxReasons = 4;

// "rank 3", "ranks 1, 3", "ranks 1, 2, ..., 16 and 84 more".
std::string rank_list(const std::vector<std::uint32_t>& ranks) {
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kMaxListed; ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kMaxListed)
    text += " and " + std::to_string(ranks.size() - kMaxListed) + " more";
  return text;
}

}  // namespace

// The sockets of an Exchanger and the progress of the exchange under way.
struct Exchanger::State {
  State(const NetworkConfig& config, std::uint32_t own_rank, ExchangerOptions exchanger_options);

  std::vector<std::vector<std::byte>> run(std::span<const std::byte> payload);
  void close_all() noexcept;

  std::vector<HostConfig> hosts;
  std::uint32_t rank;
  ExchangerOptions options;

  Fd listener;
  std::vector<Link> peers;  // by rank; peers[rank] unused
  std::vector<Dial> dials;  // by rank; used for the higher ranks
  std::vector<Link> strays;
  bool mesh_built = false;
  std::uint32_t sequence = 0;
  std::string poison;  // what() of the failure that made this Exchanger unusable

  // The exchange under way.
  std::span<const std::byte> mine;
  Clock::time_point deadline;

 private:
  [[nodiscard]] std::uint32_t world() const noexcept {
    return static_cast<std::uint32_t>(hosts.size());
  }
  [[nodiscard]] MessageHeader data_header() const noexcept {
    return {.kind = MessageKind::data,
            .sender_rank = rank,
            .world_size = world(),
            .sequence = sequence,
            .payload_length = static_cast<std::uint32_t>(mine.size())};
  }
  [[nodiscard]] HeaderExpectation expectation(MessageKind kind, std::uint32_t sender,
                                              const std::string& peer) const noexcept {
    return {.kind = kind,
            .world_size = world(),
            .receiver_rank = rank,
            .sender_rank = sender,
            .sequence = sequence,
            .max_payload = options.max_message_size,
            .peer = peer,
            .operation = kExchange};
  }

  void open_listener();
  [[nodiscard]] bool all_done() const noexcept;
  void start_due_connects(Clock::time_point now);
  void attempt(std::uint32_t peer, Clock::time_point now);
  void resolve(std::uint32_t peer);
  void attempt_failed(std::uint32_t peer, int errno_value, Clock::time_point now);
  void finish_connect(std::uint32_t peer);
  void connected(std::uint32_t peer);
  void accept_all();
  void serve_stray(std::size_t index);
  void identify(std::size_t index);
  void read_peer(std::uint32_t peer);
  void poll_set(std::vector<pollfd>& entries, std::vector<std::size_t>& tags) const;
  void handle(const pollfd& entry, std::size_t tag);
  [[nodiscard]] int poll_timeout_ms(Clock::time_point now) const;
  [[nodiscard]] std::string waiting_reason(std::uint32_t peer) const;
  [[noreturn]] void throw_timeout() const;
};

Exchanger::State::State(const NetworkConfig& config, std::uint32_t own_rank,
                        ExchangerOptions exchanger_options)
    : hosts(config.hosts().begin(), config.hosts().end()),
      rank(own_rank),
      options(std::move(exchanger_options)),
      peers(config.world_size()),
      dials(config.world_size()) {
  for (std::uint32_t peer = rank + 1; peer < world(); ++peer) {
    peers[peer].name = "rank " + std::to_string(peer) + " at " + host_port(hosts[peer]);
  }
  if (world() > 1) open_listener();
}

void Exchanger::State::open_listener() {
  const std::uint16_t port = hosts[rank].port;
  const std::string port_text = std::to_string(port);
  std::vector<Address> candidates;
  if (options.listen_address.empty()) {
    Address any6;
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&any6.storage);
    v6->sin6_family = AF_INET6;
    v6->sin6_addr = in6addr_any;
    v6->sin6_port = htons(port);
    any6.length = sizeof(sockaddr_in6);
    Address any4;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&any4.storage);
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    v4->sin_port = htons(port);
    any4.length = sizeof(sockaddr_in);
    candidates = {any6, any4};
  } else {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const int status =
        getaddrinfo(options.listen_address.c_str(), port_text.c_str(), &hints, &found);
    if (status != 0) {
      throw_invalid_argument(kConstruct,
                             "options.listen_address \"" + options.listen_address + "\"",
                             std::string("does not resolve: ") + gai_strerror(status));
    }
    for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
      Address address;
      std::memcpy(&address.storage, at->ai_addr, at->ai_addrlen);
      address.length = at->ai_addrlen;
      candidates.push_back(address);
    }
    freeaddrinfo(found);
  }

  const std::string where = options.listen_address.empty() ? "*" : options.listen_address;
  int last_errno = EAFNOSUPPORT;
  for (const Address& address : candidates) {
    const int family = address.storage.ss_family;
    Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last_errno = errno;
      if (is_resource_errno(last_errno)) throw_resource(kConstruct, last_errno, "socket()");
      continue;  // e.g. no IPv6 on this host: try the next candidate
    }
    const int on = 1;
    const int off = 0;
    static_cast<void>(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on));
    if (family == AF_INET6 && options.listen_address.empty()) {
      static_cast<void>(::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off));
    }
    if (::bind(fd.get(), address.get(), address.length) != 0 ||
        ::listen(fd.get(), SOMAXCONN) != 0) {
      last_errno = errno;
      if (last_errno == EAFNOSUPPORT || last_errno == EADDRNOTAVAIL) continue;
      break;
    }
    listener = std::move(fd);
    return;
  }
  const std::string what = "port " + port_text + " of rank " + std::to_string(rank) + " on " +
                           where + " (" + host_port(hosts[rank]) + " in the configuration)";
  switch (last_errno) {
    case EADDRINUSE:
      throw Error(ErrorKind::resource, kConstruct, last_errno,
                  what +
                      " is in use: another process holds it, e.g. a previous run of this job "
                      "that is still running, or another service",
                  "find it with `ss -ltnp 'sport = :" + port_text +
                      "'` and stop it, or configure another port for rank " + std::to_string(rank));
    case EACCES:
    case EPERM:
      throw Error(ErrorKind::permission, kConstruct, last_errno,
                  "can not listen on " + what + ": it is a privileged port",
                  "use a port above 1023, or grant CAP_NET_BIND_SERVICE");
    case EADDRNOTAVAIL:
      throw Error(
          ErrorKind::invalid_argument, kConstruct, last_errno,
          "can not listen on " + what + ": \"" + where + "\" is not an address of this host",
          "set ExchangerOptions::listen_address to an address of this host, or leave it "
          "empty for all of them");
    default: throw_resource(kConstruct, last_errno, "can not listen on " + what);
  }
}

void Exchanger::State::close_all() noexcept {
  listener.reset();
  for (Link& link : peers) {
    link.fd.reset();
    link.out_payload = {};
  }
  strays.clear();
  mine = {};
}

bool Exchanger::State::all_done() const noexcept {
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    if (peer != rank && !peers[peer].done()) return false;
  }
  return true;
}

void Exchanger::State::start_due_connects(Clock::time_point now) {
  for (std::uint32_t peer = rank + 1; peer < world(); ++peer) {
    Link& link = peers[peer];
    if (link.fd.valid()) {
      if (link.connecting && now - link.connect_start >= kConnectAttemptLimit) {
        link.fd.reset();
        link.connecting = false;
        attempt_failed(peer, ETIMEDOUT, now);
      }
      continue;
    }
    if (now >= dials[peer].next_attempt) attempt(peer, now);
  }
}

void Exchanger::State::resolve(std::uint32_t peer) {
  Dial& dial = dials[peer];
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_ADDRCONFIG;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(hosts[peer].port);
  const int status = getaddrinfo(hosts[peer].hostname.c_str(), port.c_str(), &hints, &found);
  if (status != 0) {
    dial.resolve_failure = status == EAI_SYSTEM ? errno_text(errno) : gai_strerror(status);
    return;
  }
  dial.resolve_failure.clear();
  for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
    Address address;
    std::memcpy(&address.storage, at->ai_addr, at->ai_addrlen);
    address.length = at->ai_addrlen;
    dial.addresses.push_back(address);
  }
  freeaddrinfo(found);
}

void Exchanger::State::attempt(std::uint32_t peer, Clock::time_point now) {
  Dial& dial = dials[peer];
  Link& link = peers[peer];
  ++dial.attempts;
  if (dial.addresses.empty()) {
    resolve(peer);  // retried at every attempt: the name may appear later (containers)
    if (dial.addresses.empty()) {
      dial.next_attempt = now + options.retry_interval;
      return;
    }
  }
  const Address& address = dial.addresses[dial.next % dial.addresses.size()];
  Fd fd(::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    const int error = errno;
    if (is_resource_errno(error)) throw_resource(kExchange, error, "socket() for " + link.name);
    attempt_failed(peer, error, now);
    return;
  }
  link.address = address_text(address);
  const bool at_once = ::connect(fd.get(), address.get(), address.length) == 0;
  if (!at_once && errno != EINPROGRESS && errno != EINTR) {  // EINTR: it goes on asynchronously
    attempt_failed(peer, errno, now);
    return;
  }
  link.fd = std::move(fd);
  link.connecting = true;
  link.connect_start = now;
  if (at_once) finish_connect(peer);  // the same checks as a connection that took a while
}

void Exchanger::State::attempt_failed(std::uint32_t peer, int errno_value, Clock::time_point now) {
  Dial& dial = dials[peer];
  dial.last_errno = errno_value;
  if (errno_value == ECONNREFUSED) ++dial.refused;
  ++dial.next;
  // The next address at once; after the last one, a pause.
  const bool round_done = dial.addresses.empty() || dial.next % dial.addresses.size() == 0;
  dial.next_attempt = round_done ? now + options.retry_interval : now;
}

void Exchanger::State::finish_connect(std::uint32_t peer) {
  Link& link = peers[peer];
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(link.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
  if (error == 0 && is_self_connection(link.fd)) error = ECONNREFUSED;
  link.connecting = false;
  if (error != 0) {
    link.fd.reset();
    attempt_failed(peer, error, Clock::now());
    return;
  }
  connected(peer);
}

void Exchanger::State::connected(std::uint32_t peer) {
  Link& link = peers[peer];
  set_no_delay(link.fd);
  link.expect_message();
  const MessageHeader hello{.kind = MessageKind::hello, .sender_rank = rank, .world_size = world()};
  link.queue(data_header(), mine, /*with_hello=*/true, hello);
  link.transmit();
}

void Exchanger::State::accept_all() {
  while (true) {
    Address address;
    address.length = sizeof address.storage;
    Fd fd(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&address.storage), &address.length,
                    SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      const int error = errno;
      if (error == EAGAIN || error == EWOULDBLOCK) return;
      if (is_resource_errno(error)) throw_resource(kExchange, error, "accept() on our port");
      continue;  // EINTR, ECONNABORTED, network errors of that one connection
    }
    set_no_delay(fd);
    const auto live = std::count_if(strays.begin(), strays.end(),
                                    [](const Link& link) { return link.fd.valid(); });
    if (static_cast<std::size_t>(live) >= kMaxStrays) {
      const auto oldest = std::find_if(strays.begin(), strays.end(),
                                       [](const Link& link) { return link.fd.valid(); });
      oldest->fd.reset();
    }
    Link link;
    link.fd = std::move(fd);
    link.address = address_text(address);
    link.name = "a connection from " + link.address;
    strays.push_back(std::move(link));
    serve_stray(strays.size() - 1);  // what it sent may be here already
  }
}

void Exchanger::State::serve_stray(std::size_t index) {
  Link& stray = strays[index];
  if (!stray.fd.valid()) return;
  switch (stray.receive(expectation(MessageKind::hello, 0, stray.name))) {
    case Progress::waiting: return;
    case Progress::complete: identify(index); return;
    case Progress::closed:
      if (stray.in.header_got == 0) {
        stray.fd.reset();  // connected and left without a word: a port probe, not a rank
        return;
      }
      throw Error(
          ErrorKind::connection, kExchange, ECONNRESET,
          stray.name + " closed the connection " + stray.received_so_far() + " of its hello");
  }
}

void Exchanger::State::identify(std::size_t index) {
  const std::uint32_t sender = strays[index].in.parsed->sender_rank;
  if (peers[sender].fd.valid()) {
    throw Error(ErrorKind::protocol, kExchange, EPROTO,
                strays[index].name + " introduced itself as rank " + std::to_string(sender) +
                    ", but rank " + std::to_string(sender) + " is already connected (" +
                    peers[sender].name + "): a duplicate rank",
                "two processes were started with the same rank, or a stray client connected to "
                "this port");
  }
  Link link = std::move(strays[index]);  // leaves the stray without a descriptor: dropped
  link.name = "rank " + std::to_string(sender) + " (" + hosts[sender].hostname +
              ", connected from " + link.address + ")";
  link.expect_message();
  link.queue(data_header(), mine, /*with_hello=*/false, {});
  peers[sender] = std::move(link);
  read_peer(sender);  // its data message may be here already
  peers[sender].transmit();
}

void Exchanger::State::read_peer(std::uint32_t peer) {
  Link& link = peers[peer];
  if (link.received) return;
  switch (link.receive(expectation(MessageKind::data, peer, link.name))) {
    case Progress::waiting: return;
    case Progress::complete: link.received = true; return;
    case Progress::closed:
      throw Error(ErrorKind::connection, kExchange, ECONNRESET,
                  link.name + " closed the connection " + link.received_so_far() +
                      " for exchange " + std::to_string(sequence),
                  "the peer failed or stopped: see its own error");
  }
}

// Tags of the poll entries: kListenerTag, a peer rank, or kStrayTag + index.
constexpr std::size_t kListenerTag = SIZE_MAX;
constexpr std::size_t kStrayTag = std::size_t{1} << 40U;

void Exchanger::State::handle(const pollfd& entry, std::size_t tag) {
  if (entry.revents == 0) return;
  if (tag == kListenerTag) {
    accept_all();
    return;
  }
  if (tag >= kStrayTag) {
    serve_stray(tag - kStrayTag);
    return;
  }
  const auto peer = static_cast<std::uint32_t>(tag);
  Link& link = peers[peer];
  if (!link.fd.valid()) return;
  if (link.connecting) {
    finish_connect(peer);
    return;
  }
  const auto problem = static_cast<short>(POLLERR | POLLHUP);
  if ((entry.revents & (POLLIN | problem)) != 0) read_peer(peer);
  if ((entry.revents & (POLLOUT | problem)) != 0) link.transmit();
}

int Exchanger::State::poll_timeout_ms(Clock::time_point now) const {
  Clock::time_point wake = deadline;
  if (!mesh_built) {
    for (std::uint32_t peer = rank + 1; peer < world(); ++peer) {
      const Link& link = peers[peer];
      if (!link.fd.valid()) wake = std::min(wake, dials[peer].next_attempt);
      if (link.connecting) wake = std::min(wake, link.connect_start + kConnectAttemptLimit);
    }
  }
  if (wake <= now) return 0;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(wait, INT_MAX));
}

void Exchanger::State::poll_set(std::vector<pollfd>& entries,
                                std::vector<std::size_t>& tags) const {
  entries.clear();
  tags.clear();
  if (listener.valid()) {
    entries.push_back({.fd = listener.get(), .events = POLLIN, .revents = 0});
    tags.push_back(kListenerTag);
  }
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    const Link& link = peers[peer];
    if (peer == rank || !link.fd.valid()) continue;
    short events = 0;
    if (link.connecting) {
      events = POLLOUT;
    } else {
      if (!link.received) events = static_cast<short>(events | POLLIN);
      if (!link.flushed()) events = static_cast<short>(events | POLLOUT);
    }
    if (events == 0) continue;  // done with this peer for this exchange
    entries.push_back({.fd = link.fd.get(), .events = events, .revents = 0});
    tags.push_back(peer);
  }
  for (std::size_t index = 0; index < strays.size(); ++index) {
    if (!strays[index].fd.valid()) continue;
    entries.push_back({.fd = strays[index].fd.get(), .events = POLLIN, .revents = 0});
    tags.push_back(kStrayTag + index);
  }
}

std::vector<std::vector<std::byte>> Exchanger::State::run(std::span<const std::byte> payload) {
  mine = payload;
  deadline = Clock::now() + options.timeout;
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    Link& link = peers[peer];
    if (peer == rank || !link.fd.valid()) continue;  // unconnected: queued once connected
    link.expect_message();
    link.queue(data_header(), mine, /*with_hello=*/false, {});
  }

  std::vector<pollfd> entries;
  std::vector<std::size_t> tags;
  while (true) {
    const Clock::time_point now = Clock::now();
    if (!mesh_built) start_due_connects(now);
    if (all_done()) break;
    if (now >= deadline) throw_timeout();
    poll_set(entries, tags);
    if (::poll(entries.data(), entries.size(), poll_timeout_ms(now)) < 0) {
      if (errno == EINTR) continue;
      throw_resource(kExchange, errno, "poll()");
    }
    for (std::size_t i = 0; i < entries.size(); ++i) handle(entries[i], tags[i]);
    std::erase_if(strays, [](const Link& link) { return !link.fd.valid(); });
  }

  mesh_built = true;
  std::vector<std::vector<std::byte>> entries_by_rank(world());
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    if (peer == rank) {
      entries_by_rank[peer].assign(mine.begin(), mine.end());
    } else {
      entries_by_rank[peer] = std::move(peers[peer].in.payload);
      peers[peer].out_payload = {};  // the caller's buffer: not ours to keep
    }
  }
  mine = {};
  ++sequence;
  return entries_by_rank;
}

std::string Exchanger::State::waiting_reason(std::uint32_t peer) const {
  const Link& link = peers[peer];
  const std::string exchange = "exchange " + std::to_string(sequence);
  if (peer < rank && !link.fd.valid()) {
    return "rank " + std::to_string(peer) + " (" + hosts[peer].hostname +
           ") never connected to our port " + std::to_string(hosts[rank].port) + ": is it running?";
  }
  if (peer > rank && (!link.fd.valid() || link.connecting)) {
    const Dial& dial = dials[peer];
    if (!dial.resolve_failure.empty()) {
      return link.name + " could not be dialled: its host name does not resolve (" +
             dial.resolve_failure + ")";
    }
    // The history counts more than the attempt that happened to be in flight at the deadline.
    if (dial.last_errno == ECONNREFUSED) {
      return link.name + " refused the connection " + std::to_string(dial.refused) +
             (dial.refused == 1 ? " time" : " times") + ": is it running?";
    }
    if (dial.last_errno != 0) {
      return link.name + " could not be reached in " + std::to_string(dial.attempts) +
             " attempts: " + errno_text(dial.last_errno);
    }
    return link.name + " did not answer our connection attempt";
  }
  if (!link.received) {
    if (link.in.header_got == 0) return link.name + " sent nothing for " + exchange;
    return link.name + " sent only " + link.in.progress() + " of its message for " + exchange;
  }
  return link.name + " took only " + std::to_string(link.head_sent + link.payload_sent) +
         " of the " + std::to_string(link.out_head.size() + link.out_payload.size()) +
         " bytes of our message";
}

void Exchanger::State::throw_timeout() const {
  std::vector<std::uint32_t> waiting;
  std::string reasons;
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    if (peer == rank || peers[peer].done()) continue;
    waiting.push_back(peer);
    if (waiting.size() > kMaxReasons) continue;
    if (!reasons.empty()) reasons += "; ";
    reasons += waiting_reason(peer);
  }
  if (waiting.size() > kMaxReasons) {
    reasons += "; and " + std::to_string(waiting.size() - kMaxReasons) + " more";
  }
  throw Error(ErrorKind::timeout, kExchange, ETIMEDOUT,
              "rank " + std::to_string(rank) + " timed out after " +
                  ibv::detail::duration_text(options.timeout) + " waiting for " +
                  rank_list(waiting) + " (" + reasons + ")",
              "every rank must call exchange() equally often; raise ExchangerOptions::timeout "
              "when the ranks start further apart");
}

Exchanger::Exchanger(NetworkConfig config, std::uint32_t rank, ExchangerOptions options)
    : config_(std::move(config)), rank_(rank), options_(std::move(options)) {
  if (rank_ >= config_.world_size()) {
    throw_invalid_argument(kConstruct, "rank " + std::to_string(rank_),
                           "is outside the network configuration of " +
                               std::to_string(config_.world_size()) + " ranks (0.." +
                               std::to_string(config_.world_size() - 1) + ")");
  }
  ibv::detail::check_positive(options_.timeout, "options.timeout", kConstruct);
  ibv::detail::check_positive(options_.retry_interval, "options.retry_interval", kConstruct);
  if (options_.max_message_size == 0 ||
      options_.max_message_size > std::numeric_limits<std::uint32_t>::max()) {
    throw_invalid_argument(kConstruct,
                           "options.max_message_size " + std::to_string(options_.max_message_size),
                           "is outside 1 .. 4294967295 (the 32-bit length of the protocol)");
  }
  state_ = std::make_unique<State>(config_, rank_, options_);
}

Exchanger::Exchanger(Exchanger&& other) noexcept = default;
Exchanger& Exchanger::operator=(Exchanger&& other) noexcept = default;
Exchanger::~Exchanger() = default;

std::vector<std::vector<std::byte>> Exchanger::exchange_bytes(std::span<const std::byte> mine) {
  if (!state_) {
    throw Error(ErrorKind::state, kExchange, EINVAL, "this Exchanger was moved from");
  }
  if (!state_->poison.empty()) {
    throw Error(ErrorKind::state, kExchange, EINVAL,
                "rank " + std::to_string(rank_) +
                    ": an earlier exchange failed and poisoned this Exchanger, its connections "
                    "are closed (the earlier failure: " +
                    state_->poison + ")",
                "make a new Exchanger on every rank and start the exchanges over");
  }
  if (mine.size() > options_.max_message_size) {
    throw_invalid_argument(kExchange, "the message of " + std::to_string(mine.size()) + " bytes",
                           "exceeds the maximum of " + std::to_string(options_.max_message_size) +
                               " (ExchangerOptions::max_message_size); nothing was sent");
  }
  if (config_.world_size() == 1) return {std::vector<std::byte>(mine.begin(), mine.end())};
  try {
    return state_->run(mine);
  } catch (const std::exception& error) {
    state_->poison = error.what();
    state_->close_all();
    throw;
  } catch (...) {
    state_->poison = "an exception that is not a std::exception";
    state_->close_all();
    throw;
  }
}

void Exchanger::throw_undecodable(std::uint32_t sender, const Error& error) const {
  throw Error(ErrorKind::protocol, kExchange, EPROTO,
              "rank " + std::to_string(sender) + " (" + host_port(config_.host(sender)) +
                  ") sent an entry that does not decode: " + error.what(),
              "every rank must exchange the same type");
}

}  // namespace ibv::net
