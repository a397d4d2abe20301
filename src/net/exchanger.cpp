// SPDX-License-Identifier: MIT
// Exchanger: the TCP mesh of the out-of-band exchange. Every socket is non-blocking and one
// event loop per exchange drives everything at once (connection attempts and their retries,
// accepting, identifying, sending and receiving on every connection) under one deadline, so
// that large messages in both directions can not deadlock and no peer can make us wait longer.
// The loop waits with epoll, whose set follows each link's interest as it changes: a wake-up
// costs the kernel what is ready, not all N-1 sockets as poll() did (O(N^3) for the whole job).
#include "ibv/net/exchanger.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
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
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "detail/positive_timeout.hpp"
#include "ibv/net/exchange_message.hpp"
#include "net/tcp_link.hpp"

namespace ibv::net {
namespace {

constexpr std::string_view kConstruct = "Exchanger::Exchanger";
constexpr std::string_view kExchange = "Exchanger::exchange";

// Tags of the epoll entries: kListenerTag, a peer rank, or kStrayTag + the stray's descriptor.
constexpr std::uint64_t kListenerTag = std::uint64_t{1} << 62U;
constexpr std::uint64_t kStrayTag = std::uint64_t{1} << 61U;

using detail::Clock;
using detail::Dial;
using detail::Fd;
using detail::kConnectAttemptLimit;
using detail::kMaxReasons;
using detail::kMaxStrays;
using detail::Link;
using detail::Progress;
using detail::throw_resource;

std::string host_port(const HostConfig& host) {
  return detail::host_port(host.hostname, std::to_string(host.port));
}

bool is_loopback(const sockaddr* address) {
  if (address->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    return (ntohl(v4->sin_addr.s_addr) >> 24U) == 127U;
  }
  if (address->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) != 0;
  }
  return false;
}

// The numeric address a rank listens on by default: its entry's host name when that is a
// numeric address; for a name, the first address it resolves to that is not a loopback one
// (Debian maps a machine's own name to 127.0.1.1, which the other hosts can not reach); empty
// (all addresses) when there is none.
std::string own_address(const std::string& hostname) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICHOST;
  addrinfo* found = nullptr;
  if (getaddrinfo(hostname.c_str(), nullptr, &hints, &found) == 0) {
    freeaddrinfo(found);
    return hostname;
  }
  hints.ai_flags = AI_ADDRCONFIG;
  if (getaddrinfo(hostname.c_str(), nullptr, &hints, &found) != 0) return {};
  std::string address;
  for (const addrinfo* at = found; at != nullptr && address.empty(); at = at->ai_next) {
    if (is_loopback(at->ai_addr)) continue;
    std::array<char, NI_MAXHOST> text{};
    if (getnameinfo(at->ai_addr, at->ai_addrlen, text.data(), text.size(), nullptr, 0,
                    NI_NUMERICHOST) == 0) {
      address = text.data();
    }
  }
  freeaddrinfo(found);
  return address;
}

/// Adds, changes or removes (`operation`) `fd` in the epoll set `epoll`, watched for `events`
/// under `tag`; where the set holds it already, or no longer, the other operation does it.
void watch(const Fd& epoll, int fd, std::uint64_t tag, std::uint32_t events, int operation) {
  epoll_event event{.events = events, .data = {.u64 = tag}};
  if (::epoll_ctl(epoll.get(), operation, fd, &event) == 0) return;
  // A peer's descriptor that came from a stray is in the set already (under the stray's tag);
  // one taken out (nothing to wait for) is not.
  if (operation == EPOLL_CTL_DEL && errno == ENOENT) return;
  const int retry = errno == EEXIST ? EPOLL_CTL_MOD : errno == ENOENT ? EPOLL_CTL_ADD : -1;
  if (retry >= 0 && ::epoll_ctl(epoll.get(), retry, fd, &event) == 0) return;
  throw_resource(kExchange, errno, "epoll_ctl()");
}

}  // namespace

// The sockets of an Exchanger and the progress of the exchange under way.
struct Exchanger::State {
  State(const NetworkConfig& config, std::uint32_t own_rank, ExchangerOptions exchanger_options);

  // One exchange: `outgoing[peer]` goes to peer (the entry at our rank is ignored).
  std::vector<std::vector<std::byte>> run(std::span<const std::span<const std::byte>> outgoing);
  void close_all() noexcept;
  // Sends every connected peer that is not mid-way through a message of ours an abort carrying
  // `error`, best effort, so that its error names the cause and not just our close.
  void tell_peers(const std::exception& error) const noexcept;

  std::vector<HostConfig> hosts;
  std::uint32_t rank;
  ExchangerOptions options;

  Fd listener;
  Fd epoll;                 // watches the listener, the strays and every peer link
  std::vector<Link> peers;  // by rank; peers[rank] unused
  // What the epoll set holds for each peer: its descriptor and events, as last told to it.
  struct Watched {
    int fd = -1;
    std::uint32_t events = 0;
  };
  std::vector<Watched> watched;  // by rank
  std::vector<Dial> dials;       // by rank; used for the higher ranks
  std::vector<Link> strays;
  bool mesh_built = false;
  std::uint32_t sequence = 0;
  std::string poison;  // what() of the failure that made this Exchanger unusable

  // The exchange under way.
  std::span<const std::span<const std::byte>> out;
  Clock::time_point deadline;

 private:
  [[nodiscard]] std::uint32_t world() const noexcept {
    return static_cast<std::uint32_t>(hosts.size());
  }
  [[nodiscard]] MessageHeader data_header(std::uint32_t peer) const noexcept {
    return {.kind = MessageKind::data,
            .sender_rank = rank,
            .world_size = world(),
            .sequence = sequence,
            .payload_length = static_cast<std::uint32_t>(out[peer].size())};
  }
  [[nodiscard]] HeaderExpectation expectation(MessageKind kind, std::uint32_t sender,
                                              const std::string& peer) const noexcept {
    return {.kind = kind,
            .world_size = world(),
            .receiver_rank = rank,
            .sender_rank = sender,
            .sequence = sequence,
            // A data message, or the abort of a peer that failed (its error, up to 2 kB).
            .max_payload = kind == MessageKind::data
                               ? std::max(options.max_message_size, detail::kMaxAbortPayload)
                               : options.max_message_size,
            .peer = peer,
            .operation = kExchange,
            .accept_abort = kind == MessageKind::data};
  }

  void open_listener();
  [[nodiscard]] bool all_done() const noexcept;
  void start_due_connects(Clock::time_point now);
  void finish_connect(std::uint32_t peer);
  void connected(std::uint32_t peer);
  void accept_all();
  void serve_stray(std::size_t index);
  void identify(std::size_t index);
  void read_peer(std::uint32_t peer);
  void watch_peers();
  void handle(std::uint32_t revents, std::uint64_t tag);
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
      watched(config.world_size()),
      dials(config.world_size()) {
  // This rank dials every higher rank; the ranks of its machine do likewise at the same time.
  const auto local_ranks = static_cast<std::size_t>(std::ranges::count_if(
      hosts, [&](const HostConfig& host) { return host.hostname == hosts[rank].hostname; }));
  const Duration pause_limit = detail::dial_pause_limit(world() - 1 - rank, local_ranks);
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    peers[peer].operation = kExchange;
    if (peer <= rank) continue;
    peers[peer].name = "rank " + std::to_string(peer) + " at " + host_port(hosts[peer]);
    dials[peer] = Dial(hosts[peer].hostname, hosts[peer].port, pause_limit);
  }
  if (world() > 1) {
    open_listener();
    epoll = Fd(::epoll_create1(EPOLL_CLOEXEC));
    if (!epoll.valid()) throw_resource(kConstruct, errno, "epoll_create1()");
    watch(epoll, listener.get(), kListenerTag, EPOLLIN, EPOLL_CTL_ADD);
  }
}

void Exchanger::State::open_listener() {
  const std::string port = std::to_string(hosts[rank].port);
  const auto listen_on = [&](const std::string& address) {
    const std::string where = address.empty() ? "*" : address;
    return detail::listen_tcp(
        {.address = address == "*" ? std::string() : address,
         .port = hosts[rank].port,
         .operation = kConstruct,
         .what = "port " + port + " of rank " + std::to_string(rank) + " on " + where + " (" +
                 host_port(hosts[rank]) + " in the configuration)",
         .other_port_hint = "configure another port for rank " + std::to_string(rank),
         .address_option = "ExchangerOptions::listen_address"});
  };
  if (!options.listen_address.empty()) {
    listener = listen_on(options.listen_address);
    return;
  }
  // By default the address this rank's entry names, so that ranks of one machine with
  // different addresses can share a port (two rails, the multi-host testbed); all addresses
  // when that is not an address of this host (NAT, a name that resolves elsewhere).
  const std::string own = own_address(hosts[rank].hostname);
  if (!own.empty()) {
    try {
      listener = listen_on(own);
      return;
    } catch (const Error& error) {
      if (error.errno_value() != EADDRNOTAVAIL && error.kind() != ErrorKind::invalid_argument) {
        throw;
      }
    }
  }
  listener = listen_on("*");
}

void Exchanger::State::tell_peers(const std::exception& error) const noexcept {
  try {
    const std::vector<std::byte> message = detail::abort_message(
        {.sender_rank = rank, .world_size = world(), .sequence = sequence}, error);
    for (std::uint32_t peer = 0; peer < world(); ++peer) {
      const Link& link = peers[peer];
      // Mid-way through our message, the peer would read the abort as the rest of it.
      if (peer == rank || link.connecting) continue;
      if (link.head_sent != 0 && !link.flushed()) continue;
      detail::send_best_effort(link.fd, message);
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the close still tells them
  }
}

void Exchanger::State::close_all() noexcept {
  listener.reset();
  for (Link& link : peers) {
    link.fd.reset();
    link.out_payload = {};
  }
  strays.clear();
  out = {};
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
        dials[peer].failed(ETIMEDOUT, now, options.retry_interval);
      }
      continue;
    }
    // A connection that completed at once passes the same checks as one that took a while.
    const bool at_once = dials[peer].start(link, now, options.retry_interval);
    if (link.fd.valid()) watched[peer] = {};  // a new descriptor, maybe with an old number
    if (at_once) finish_connect(peer);
  }
}

void Exchanger::State::finish_connect(std::uint32_t peer) {
  if (dials[peer].finish(peers[peer], options.retry_interval)) connected(peer);
}

void Exchanger::State::connected(std::uint32_t peer) {
  Link& link = peers[peer];
  detail::set_no_delay(link.fd);
  link.expect_message();
  const std::array<MessageHeader, 2> headers{
      MessageHeader{.kind = MessageKind::hello, .sender_rank = rank, .world_size = world()},
      data_header(peer)};
  link.queue(headers, out[peer]);
  link.transmit();
}

void Exchanger::State::accept_all() {
  while (auto link = detail::accept_link(listener, kExchange, "accept() on our port")) {
    detail::make_room(strays, kMaxStrays + rank);  // the lower ranks dial us
    watch(epoll, link->fd.get(), kStrayTag | static_cast<std::uint64_t>(link->fd.get()), EPOLLIN,
          EPOLL_CTL_ADD);
    strays.push_back(std::move(*link));
    serve_stray(strays.size() - 1);  // what it sent may be here already
  }
}

void Exchanger::State::serve_stray(std::size_t index) {
  Link& stray = strays[index];
  if (detail::receive_hello(stray, expectation(MessageKind::hello, 0, stray.name))) {
    identify(index);
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
  const std::array<MessageHeader, 1> header{data_header(sender)};
  link.queue(header, out[sender]);
  peers[sender] = std::move(link);
  watched[sender] = {};  // its descriptor is in the set under its stray tag: watch_peers() moves it
  read_peer(sender);     // its data message may be here already
  peers[sender].transmit();
}

void Exchanger::State::read_peer(std::uint32_t peer) {
  Link& link = peers[peer];
  if (link.received) return;
  switch (link.receive(expectation(MessageKind::data, peer, link.name))) {
    case Progress::waiting: return;
    case Progress::complete:
      link.received = true;
      if (link.in.parsed->kind == MessageKind::abort) {
        detail::throw_abort(link.in.payload, kExchange,
                            link.name + " failed during exchange " + std::to_string(sequence));
      }
      return;
    case Progress::closed:
      throw Error(ErrorKind::peer_gone, kExchange, ECONNRESET,
                  link.name + " closed the connection " + link.received_so_far() +
                      " for exchange " + std::to_string(sequence),
                  "the peer failed or stopped: see its own error");
  }
}

void Exchanger::State::handle(std::uint32_t revents, std::uint64_t tag) {
  if (revents == 0) return;
  if (tag == kListenerTag) {
    accept_all();
    return;
  }
  if ((tag & kStrayTag) != 0) {
    const auto fd = static_cast<int>(tag & ~kStrayTag);
    const auto stray = std::ranges::find_if(
        strays, [&](const Link& link) { return link.fd.valid() && link.fd.get() == fd; });
    if (stray != strays.end()) serve_stray(static_cast<std::size_t>(stray - strays.begin()));
    return;
  }
  const auto peer = static_cast<std::uint32_t>(tag);
  Link& link = peers[peer];
  if (!link.fd.valid()) return;
  if (link.connecting) {
    finish_connect(peer);
    return;
  }
  const std::uint32_t problem = EPOLLERR | EPOLLHUP;
  if ((revents & (EPOLLIN | problem)) != 0) read_peer(peer);
  if ((revents & (EPOLLOUT | problem)) != 0) link.transmit();
}

int Exchanger::State::poll_timeout_ms(Clock::time_point now) const {
  Clock::time_point wake = deadline;
  if (!mesh_built) {
    for (std::uint32_t peer = rank + 1; peer < world(); ++peer) {
      const Link& link = peers[peer];
      if (!link.fd.valid()) wake = std::min(wake, dials[peer].next_attempt());
      if (link.connecting) wake = std::min(wake, link.connect_start + kConnectAttemptLimit);
    }
  }
  if (wake <= now) return 0;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(wait, INT_MAX));
}

void Exchanger::State::watch_peers() {
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    const Link& link = peers[peer];
    Watched& now = watched[peer];
    if (peer == rank || !link.fd.valid()) {
      now = {};  // closing a descriptor takes it out of the set
      continue;
    }
    std::uint32_t events = 0;
    if (link.connecting) {
      events = EPOLLOUT;
    } else {
      if (!link.received) events |= EPOLLIN;
      if (!link.flushed()) events |= EPOLLOUT;
    }
    const int fd = link.fd.get();
    if (fd == now.fd && events == now.events) continue;
    // Out of the set while there is nothing to wait for: epoll reports a hang-up even to an
    // entry that asks for no events, and a finished peer's close would wake us in a loop.
    const bool in_set = fd == now.fd && now.events != 0;
    if (events == 0) {
      watch(epoll, fd, peer, 0, EPOLL_CTL_DEL);
    } else {
      watch(epoll, fd, peer, events, in_set ? EPOLL_CTL_MOD : EPOLL_CTL_ADD);
    }
    now = {.fd = fd, .events = events};
  }
}

std::vector<std::vector<std::byte>> Exchanger::State::run(
    std::span<const std::span<const std::byte>> outgoing) {
  out = outgoing;
  deadline = Clock::now() + options.timeout;
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    Link& link = peers[peer];
    if (peer == rank || !link.fd.valid()) continue;  // unconnected: queued once connected
    link.expect_message();
    const std::array<MessageHeader, 1> header{data_header(peer)};
    link.queue(header, out[peer]);
  }

  std::array<epoll_event, 64> ready{};
  while (true) {
    const Clock::time_point now = Clock::now();
    if (!mesh_built) start_due_connects(now);
    if (all_done()) break;
    if (now >= deadline) throw_timeout();
    watch_peers();
    const int count = ::epoll_wait(epoll.get(), ready.data(), static_cast<int>(ready.size()),
                                   poll_timeout_ms(now));
    if (count < 0) {
      if (errno == EINTR) continue;
      throw_resource(kExchange, errno, "epoll_wait()");
    }
    // New and unidentified connections first, as poll() did: a violation found there (a
    // duplicate rank) then fails this exchange before our message goes out in the same round.
    const auto events = std::span(ready).first(static_cast<std::size_t>(count));
    for (const bool connections : {true, false}) {
      for (const epoll_event& event : events) {
        const bool connection = event.data.u64 == kListenerTag || (event.data.u64 & kStrayTag) != 0;
        if (connection == connections) handle(event.events, event.data.u64);
      }
    }
    std::erase_if(strays, [](const Link& link) { return !link.fd.valid(); });
  }

  mesh_built = true;
  std::vector<std::vector<std::byte>> entries_by_rank(world());
  for (std::uint32_t peer = 0; peer < world(); ++peer) {
    if (peer == rank) {
      entries_by_rank[peer].assign(out[peer].begin(), out[peer].end());
    } else {
      entries_by_rank[peer] = std::move(peers[peer].in.payload);
      peers[peer].out_payload = {};  // the caller's buffer: not ours to keep
    }
  }
  out = {};
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
    return dials[peer].waiting_reason(link.name);
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
                  detail::rank_list(waiting) + " (" + reasons + ")",
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
  detail::check_options(kConstruct, options_.timeout, options_.retry_interval,
                        options_.max_message_size);
  state_ = std::make_unique<State>(config_, rank_, options_);
}

Exchanger::Exchanger(Exchanger&& other) noexcept = default;
Exchanger& Exchanger::operator=(Exchanger&& other) noexcept = default;
Exchanger::~Exchanger() = default;

std::vector<std::vector<std::byte>> Exchanger::exchange_bytes(std::span<const std::byte> mine) {
  if (mine.size() > options_.max_message_size) {
    throw_invalid_argument(kExchange, "the message of " + std::to_string(mine.size()) + " bytes",
                           "exceeds the maximum of " + std::to_string(options_.max_message_size) +
                               " (ExchangerOptions::max_message_size); nothing was sent");
  }
  const std::vector<std::span<const std::byte>> outgoing(world_size(), mine);
  return run(outgoing);
}

std::vector<std::vector<std::byte>> Exchanger::all_to_all_bytes(
    std::span<const std::vector<std::byte>> to_peer) {
  if (to_peer.size() != world_size()) {
    throw_invalid_argument(kExchange, "to_peer",
                           "has " + std::to_string(to_peer.size()) +
                               " entries; it needs one per rank: " + std::to_string(world_size()));
  }
  std::vector<std::span<const std::byte>> outgoing(to_peer.begin(), to_peer.end());
  for (std::uint32_t peer = 0; peer < world_size(); ++peer) {
    if (peer != rank_ && outgoing[peer].size() > options_.max_message_size) {
      throw_invalid_argument(kExchange,
                             "to_peer[" + std::to_string(peer) + "] of " +
                                 std::to_string(outgoing[peer].size()) + " bytes",
                             "exceeds the maximum of " + std::to_string(options_.max_message_size) +
                                 " (ExchangerOptions::max_message_size); nothing was sent");
    }
  }
  return run(outgoing);
}

void Exchanger::barrier() { (void)exchange_bytes({}); }

std::string Exchanger::description() const {
  return "hosts file (TCP mesh of " + std::to_string(world_size()) + " ranks)";
}

std::vector<std::vector<std::byte>> Exchanger::run(
    std::span<const std::span<const std::byte>> outgoing) {
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
  if (world_size() == 1) return {std::vector<std::byte>(outgoing[0].begin(), outgoing[0].end())};
  try {
    return state_->run(outgoing);
  } catch (const std::exception& error) {
    state_->poison = error.what();
    state_->tell_peers(error);
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
