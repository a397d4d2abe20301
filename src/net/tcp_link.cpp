// SPDX-License-Identifier: MIT
// The shared TCP pieces of the bootstraps: address text, listening, retried dials and framed
// non-blocking connections.
#include "net/tcp_link.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <random>

#include "detail/big_endian.hpp"
#include "detail/brief_quote.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"

namespace ibv::net::detail {
namespace {

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

// Every address `host` resolves to at `port`; the failure's text in `failure` when none.
std::vector<Address> resolve_host(const std::string& host, std::uint16_t port, int flags,
                                  std::string& failure) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = flags;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  const int status = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
  std::vector<Address> addresses;
  if (status != 0) {
    failure = status == EAI_SYSTEM ? errno_text(errno) : gai_strerror(status);
    return addresses;
  }
  failure.clear();
  for (const addrinfo* at = found; at != nullptr; at = at->ai_next) {
    Address address;
    std::memcpy(&address.storage, at->ai_addr, at->ai_addrlen);
    address.length = at->ai_addrlen;
    addresses.push_back(address);
  }
  freeaddrinfo(found);
  return addresses;
}

std::vector<Address> wildcard_addresses(std::uint16_t port) {
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
  return {any6, any4};
}

}  // namespace

std::string errno_text(int errno_value) {
  std::array<char, 128> buffer{};
  return strerror_r(errno_value, buffer.data(), buffer.size());  // GNU: returns the text
}

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
  static_cast<void>(::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof on));
}

bool is_resource_errno(int errno_value) noexcept {
  return errno_value == EMFILE || errno_value == ENFILE || errno_value == ENOBUFS ||
         errno_value == ENOMEM;
}

void throw_resource(std::string_view operation, int errno_value, const std::string& detail) {
  throw Error(ErrorKind::resource, operation, errno_value, detail,
              errno_value == EMFILE ? "the process ran out of file descriptors (`ulimit -n`)"
                                    : std::string_view{});
}

namespace {
constexpr std::size_t kAbortHeadSize = 5;  // kind, errno
constexpr std::size_t kMaxAbortText = kMaxAbortPayload - kAbortHeadSize;
}  // namespace

std::vector<std::byte> abort_message(MessageHeader head, const std::exception& error) {
  ErrorKind kind = ErrorKind::driver;
  int code = EIO;
  if (const auto* known = dynamic_cast<const Error*>(&error)) {
    kind = known->kind();
    code = known->errno_value();
  }
  // The sentence without its "Exchanger::exchange failed: " prefix, which the receiver's own
  // error repeats in its own words.
  std::string_view text(error.what());
  if (const auto prefix = text.find(" failed: ");
      prefix != std::string_view::npos &&
      text.substr(0, prefix).find("::") != std::string_view::npos) {
    text.remove_prefix(prefix + 9);
  }
  text = text.substr(0, kMaxAbortText);
  head.kind = MessageKind::abort;
  head.payload_length = static_cast<std::uint32_t>(kAbortHeadSize + text.size());
  const auto encoded = head.encode();
  std::vector<std::byte> message(encoded.size() + head.payload_length);
  std::copy(encoded.begin(), encoded.end(), message.begin());
  std::byte* payload = message.data() + encoded.size();
  payload[0] = static_cast<std::byte>(kind);
  ibv::detail::put_big_endian(payload + 1, static_cast<std::uint32_t>(code), 4);
  std::transform(text.begin(), text.end(), payload + kAbortHeadSize,
                 [](char c) { return static_cast<std::byte>(c); });
  return message;
}

void send_best_effort(const Fd& fd, std::span<const std::byte> message) noexcept {
  if (!fd.valid()) return;
  static_cast<void>(::send(fd.get(), message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT));
}

void throw_abort(std::span<const std::byte> payload, std::string_view operation,
                 const std::string& sender) {
  ErrorKind kind = ErrorKind::protocol;
  int error = ECONNABORTED;
  std::string text = "(no reason given)";
  if (payload.size() >= kAbortHeadSize) {
    const auto sent_kind = std::to_integer<unsigned>(payload[0]);
    if (sent_kind <= static_cast<unsigned>(ErrorKind::peer_gone)) {  // the last kind
      kind = static_cast<ErrorKind>(sent_kind);
    }
    error = static_cast<int>(ibv::detail::get_big_endian(payload.data() + 1, 4));
    const auto rest = payload.subspan(kAbortHeadSize)
                          .first(std::min(payload.size() - kAbortHeadSize, kMaxAbortText));
    text.assign(reinterpret_cast<const char*>(rest.data()), rest.size());  // NOLINT: bytes
  }
  throw Error(kind, operation, error, sender + ": " + text);
}

std::string rank_list(const std::vector<std::uint32_t>& ranks) {
  constexpr std::size_t kMaxListed = 16;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kMaxListed; ++i) {
    if (i != 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kMaxListed) {
    text += " and " + std::to_string(ranks.size() - kMaxListed) + " more";
  }
  return text;
}

Fd listen_tcp(const ListenRequest& request) {
  const std::string port_text = std::to_string(request.port);
  std::vector<Address> candidates;
  if (request.address.empty()) {
    candidates = wildcard_addresses(request.port);
  } else {
    std::string failure;
    candidates = resolve_host(request.address, request.port, AI_PASSIVE | AI_NUMERICSERV, failure);
    if (candidates.empty()) {
      throw_invalid_argument(
          request.operation,
          std::string(request.address_option) + " " + ibv::detail::quote_briefly(request.address),
          "does not resolve: " + failure);
    }
  }

  const std::string where = request.address.empty() ? "*" : request.address;
  int last_errno = EAFNOSUPPORT;
  for (const Address& address : candidates) {
    const int family = address.storage.ss_family;
    Fd fd(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      last_errno = errno;
      if (is_resource_errno(last_errno)) throw_resource(request.operation, last_errno, "socket()");
      continue;  // e.g. no IPv6 on this host: try the next candidate
    }
    const int on = 1;
    const int off = 0;
    static_cast<void>(::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on));
    if (family == AF_INET6 && request.address.empty()) {
      static_cast<void>(::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off));
    }
    if (::bind(fd.get(), address.get(), address.length) != 0 ||
        ::listen(fd.get(), SOMAXCONN) != 0) {
      last_errno = errno;
      if (last_errno == EAFNOSUPPORT || last_errno == EADDRNOTAVAIL) continue;
      break;
    }
    return fd;
  }
  switch (last_errno) {
    case EADDRINUSE:
      throw Error(ErrorKind::resource, request.operation, last_errno,
                  request.what +
                      " is in use: another process holds it, e.g. a previous run of this job "
                      "that is still running, or another service",
                  "find it with `ss -ltnp 'sport = :" + port_text + "'` and stop it, or " +
                      request.other_port_hint);
    case EACCES:
    case EPERM:
      throw Error(ErrorKind::permission, request.operation, last_errno,
                  "can not listen on " + request.what + ": it is a privileged port",
                  "use a port above 1023, or grant CAP_NET_BIND_SERVICE");
    case EADDRNOTAVAIL:
      throw Error(ErrorKind::invalid_argument, request.operation, last_errno,
                  "can not listen on " + request.what + ": " + ibv::detail::quote_briefly(where) +
                      " is not an address of this host",
                  "set " + std::string(request.address_option) +
                      " to an address of this host, or leave it empty for all of them");
    default: throw_resource(request.operation, last_errno, "can not listen on " + request.what);
  }
}

void Dial::resolve() {
  addresses_ = resolve_host(host_, port_, AI_NUMERICSERV | AI_ADDRCONFIG, resolve_failure_);
}

void check_options(std::string_view operation, Duration timeout, Duration retry_interval,
                   std::size_t max_message_size) {
  ibv::detail::check_positive(timeout, "options.timeout", operation);
  ibv::detail::check_positive(retry_interval, "options.retry_interval", operation);
  if (max_message_size == 0 || max_message_size > std::numeric_limits<std::uint32_t>::max()) {
    throw_invalid_argument(operation,
                           "options.max_message_size " + std::to_string(max_message_size),
                           "is outside 1 .. 4294967295 (the 32-bit length of the protocol)");
  }
}

bool Dial::start(Link& link, Clock::time_point now, Duration retry_interval) {
  link.fd.reset();
  link.connecting = false;
  if (now < next_attempt_) return false;
  ++attempts_;
  if (addresses_.empty()) {
    resolve();  // retried at every attempt: the name may appear later (containers)
    if (addresses_.empty()) {
      next_attempt_ = now + retry_interval;
      return false;
    }
  }
  const Address& target = addresses_[next_ % addresses_.size()];
  Fd fd(::socket(target.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    const int error = errno;
    if (is_resource_errno(error))
      throw_resource(link.operation, error, "socket() for " + link.name);
    failed(error, now, retry_interval);
    return false;
  }
  std::string address = address_text(target);
  const bool at_once = ::connect(fd.get(), target.get(), target.length) == 0;
  if (!at_once && errno != EINPROGRESS && errno != EINTR) {  // EINTR: it goes on asynchronously
    failed(errno, now, retry_interval);
    return false;
  }
  link.fd = std::move(fd);
  link.address = std::move(address);
  link.connecting = true;
  link.connect_start = now;
  return at_once;
}

bool Dial::finish(Link& link, Duration retry_interval) {
  link.connecting = false;
  int error = 0;
  socklen_t length = sizeof error;
  if (getsockopt(link.fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
  if (error == 0 && is_self_connection(link.fd)) error = ECONNREFUSED;
  if (error == 0) return true;
  link.fd.reset();
  failed(error, Clock::now(), retry_interval);
  return false;
}

void Dial::failed(int errno_value, Clock::time_point now, Duration retry_interval) {
  last_errno_ = errno_value;
  if (errno_value == ECONNREFUSED) ++refused_;
  ++next_;
  // The next address at once; after the last one, a pause.
  const bool round_done = addresses_.empty() || next_ % addresses_.size() == 0;
  next_attempt_ = round_done ? now + backoff(retry_interval) : now;
}

Duration dial_pause_limit(std::size_t dials, std::size_t local_ranks) noexcept {
  const double seconds =
      static_cast<double>(dials) * static_cast<double>(local_ranks) / kMachineDialRate;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(std::clamp(seconds, 1.0, 10.0)));
}

Duration Dial::backoff(Duration retry_interval) {
  // Each pause half as long again as the one before, up to the limit (or retry_interval when
  // that is longer), spread over 75-125 %: hundreds of ranks that dial one port that is not
  // up yet do not come back in step, and a port that stays shut costs few attempts. A long
  // limit also starts the pauses higher (a sixteenth of it), so that the crowd backs off in a
  // few rounds, not in a dozen.
  const Duration longest = std::max(retry_interval, pause_limit_);
  pause_ = pause_.count() == 0 ? std::max<Duration>(retry_interval, longest / 16)
                               : std::min<Duration>(pause_ * 3 / 2, longest);
  if (!random_.has_value()) {
    random_.emplace(static_cast<std::uint_fast32_t>(::getpid()) * 2654435761U ^
                    static_cast<std::uint_fast32_t>(port_));
  }
  std::uniform_int_distribution<int> percent(75, 125);
  return std::chrono::nanoseconds(pause_.count() / 100 * percent(*random_));
}

std::string Dial::waiting_reason(const std::string& peer) const {
  if (!resolve_failure_.empty()) {
    return peer + " could not be dialled: its host name does not resolve (" + resolve_failure_ +
           ")";
  }
  // The history counts more than the attempt that happened to be in flight at the deadline.
  if (last_errno_ == ECONNREFUSED) {
    return peer + " refused the connection " + std::to_string(refused_) +
           (refused_ == 1 ? " time" : " times") + ": is it running?";
  }
  if (last_errno_ != 0) {
    return peer + " could not be reached in " + std::to_string(attempts_) +
           " attempts: " + errno_text(last_errno_);
  }
  return peer + " did not answer our connection attempt";
}

bool receive_hello(Link& stray, const HeaderExpectation& expected) {
  if (!stray.fd.valid()) return false;
  switch (stray.receive(expected)) {
    case Progress::waiting: return false;
    case Progress::complete: return true;
    case Progress::closed: break;
  }
  if (stray.in.header_got == 0) {
    stray.fd.reset();
    return false;
  }
  throw Error(ErrorKind::connection, stray.operation, ECONNRESET,
              stray.name + " closed the connection " + stray.received_so_far() + " of its hello");
}

void make_room(std::vector<Link>& links, std::size_t most) noexcept {
  const auto open = [](const Link& link) { return link.fd.valid(); };
  if (static_cast<std::size_t>(std::count_if(links.begin(), links.end(), open)) < most) return;
  std::find_if(links.begin(), links.end(), open)->fd.reset();
}

std::optional<Link> accept_link(const Fd& listener, std::string_view operation,
                                const std::string& what) {
  while (true) {
    Address address;
    address.length = sizeof address.storage;
    Fd fd(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&address.storage), &address.length,
                    SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd.valid()) {
      const int error = errno;
      if (error == EAGAIN || error == EWOULDBLOCK) return std::nullopt;
      if (is_resource_errno(error)) throw_resource(operation, error, what);
      continue;  // EINTR, ECONNABORTED, network errors of that one connection
    }
    set_no_delay(fd);
    Link link;
    link.fd = std::move(fd);
    link.operation = operation;
    link.address = address_text(address);
    link.name = "a connection from " + link.address;
    return link;
  }
}

void Link::queue(std::span<const MessageHeader> headers, std::span<const std::byte> payload) {
  out_head.clear();
  head_sent = 0;
  for (const MessageHeader& header : headers) {
    const auto bytes = header.encode();
    out_head.insert(out_head.end(), bytes.begin(), bytes.end());
  }
  out_payload = payload;
  payload_sent = 0;
}

Progress Link::receive(const HeaderExpectation& expected) {
  int error = 0;
  const Progress progress = in.receive_from(
      [&](std::span<std::byte> target) {
        return ::recv(fd.get(), target.data(), target.size(), 0);
      },
      expected, error);
  if (error != 0) {
    throw Error(ErrorKind::peer_gone, operation, error,
                name + " broke the connection " + received_so_far());
  }
  return progress;
}

bool Link::transmit() {
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
      throw Error(ErrorKind::peer_gone, operation, error,
                  name + " closed the connection before taking our message (" +
                      std::to_string(head_sent + payload_sent) + " of " + std::to_string(total) +
                      " bytes sent)",
                  "the peer failed or stopped: see its own error");
    }
    const auto sent = static_cast<std::size_t>(n);
    const std::size_t from_head = std::min(sent, out_head.size() - head_sent);
    head_sent += from_head;
    payload_sent += sent - from_head;
  }
  return true;
}

}  // namespace ibv::net::detail
