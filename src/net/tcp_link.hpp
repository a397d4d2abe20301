// SPDX-License-Identifier: MIT
// Private to the library (not installed): the TCP pieces every out-of-band bootstrap shares
// (the Exchanger's mesh, the Rendezvous's star): an owned descriptor, socket addresses and their
// text, a listening socket with errors a person can act on, a non-blocking dial that retries
// refused connections, and one framed connection (Link) that receives checked messages and
// sends queued ones without blocking.
#pragma once

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibv/duration.hpp"
#include "ibv/net/exchange_message.hpp"
#include "net/incoming_message.hpp"

namespace ibv::net::detail {

using Clock = std::chrono::steady_clock;

/// A connection attempt that gets no answer this long is abandoned (the next address, or a
/// retry, may do better than a host that drops our SYNs).
inline constexpr std::chrono::milliseconds kConnectAttemptLimit{3000};
/// Connections accepted but not yet identified by a hello, at most, beyond the ranks that may
/// legitimately dial us at once (see make_room()): every one of them may be connected and not
/// have said hello yet when hundreds start together, and closing one fails that rank.
inline constexpr std::size_t kMaxStrays = 64;
/// A timeout message explains at most this many of the ranks it waited for.
inline constexpr std::size_t kMaxReasons = 4;

/// Owns one file descriptor and closes it.
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

/// A socket address with its length.
struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;

  [[nodiscard]] const sockaddr* get() const noexcept {
    return reinterpret_cast<const sockaddr*>(&storage);
  }
};

/// strerror_r's text of an errno value.
[[nodiscard]] std::string errno_text(int errno_value);
/// "node04:18515", "[fe80::1]:18515".
[[nodiscard]] std::string host_port(std::string_view host, std::string_view port);
/// "10.0.0.3:41234", "[::1]:41234"; IPv4-mapped IPv6 addresses as IPv4.
[[nodiscard]] std::string address_text(const Address& address);
/// TCP_NODELAY, best effort: without it small messages only wait for Nagle's algorithm.
void set_no_delay(const Fd& fd) noexcept;
/// Out of descriptors or memory: the process's problem, not the peer's.
[[nodiscard]] bool is_resource_errno(int errno_value) noexcept;
/// ErrorKind::resource for `errno_value`, with the `ulimit -n` hint for EMFILE.
[[noreturn]] void throw_resource(std::string_view operation, int errno_value,
                                 const std::string& detail);
/// The abort message (MessageKind::abort) that a rank which fails sends its peers, so that their
/// errors name the cause: `head` (its kind and payload_length set here), then the payload: the
/// ErrorKind (1 byte; driver for an exception that is not an ibv::Error), the errno (4 bytes,
/// big-endian), then `error`'s message without its "Class::operation failed: " prefix, at most
/// 2,048 bytes.
[[nodiscard]] std::vector<std::byte> abort_message(MessageHeader head, const std::exception& error);
/// One non-blocking send of `message` on `fd`, best effort: whatever the socket has no room for
/// is dropped (the close that follows still tells the peer).
void send_best_effort(const Fd& fd, std::span<const std::byte> message) noexcept;
/// The largest abort payload abort_message() makes: what a receiver must accept for an abort.
inline constexpr std::size_t kMaxAbortPayload = 5 + 2048;
/// Throws the ibv::Error that the abort `payload` from a peer carries (its kind and errno) in
/// `operation`: "`sender`: the peer's sentence". A payload too short to decode gives protocol
/// and "(no reason given)".
[[noreturn]] void throw_abort(std::span<const std::byte> payload, std::string_view operation,
                              const std::string& sender);

/// "rank 3", "ranks 1, 3", "ranks 1, 2, ..., 16 and 84 more".
[[nodiscard]] std::string rank_list(const std::vector<std::uint32_t>& ranks);

/// The checks every TCP bootstrap's options share: `timeout` and `retry_interval` positive,
/// `max_message_size` within 1 .. 2^32 - 1 (the protocol's 32-bit length). Throws ibv::Error
/// (invalid_argument) naming "options.<field>" and `operation`.
void check_options(std::string_view operation, Duration timeout, Duration retry_interval,
                   std::size_t max_message_size);

/// What a listening socket is for, as its errors name it.
struct ListenRequest {
  std::string address;              ///< Empty: the wildcard address (IPv6 and IPv4), else resolved.
  std::uint16_t port = 0;           ///< The port to listen on.
  std::string_view operation;       ///< The operation errors name.
  std::string what;                 ///< "port 18515 of rank 2 on * (node03:18515 in ...)".
  std::string other_port_hint;      ///< What to do when the port is in use (after "stop it, or ").
  std::string_view address_option;  ///< The option that set `address`, for its errors.
};

/// A non-blocking listening socket (SO_REUSEADDR, backlog SOMAXCONN) as `request` asks. Throws
/// ibv::Error: resource when the port is in use (with the `ss` command that finds its holder),
/// permission for a privileged port, invalid_argument for an address that does not resolve or
/// is not of this host.
[[nodiscard]] Fd listen_tcp(const ListenRequest& request);

struct Link;

/// Connection attempts a second that the dials of all processes on one machine together stay
/// under once they have backed off (dial_pause_limit()): a refused attempt costs a socket,
/// a connect and a close in the kernel, and hundreds of ranks retrying hundreds of peers would
/// starve the processes that are still starting (bench/bootstrap/notes.md).
inline constexpr double kMachineDialRate = 20'000.0;
/// The longest pause between a dial's rounds (the cap of Dial's back-off), for a process that
/// retries `dials` peers while `local_ranks` processes of the job share its machine: at least
/// a second, so that small jobs connect as soon as a peer listens; longer when
/// dials x local_ranks attempts a second would pass kMachineDialRate; at most 10 s.
[[nodiscard]] Duration dial_pause_limit(std::size_t dials, std::size_t local_ranks) noexcept;

/// The state of one outgoing connection that is retried until it succeeds: the peer's
/// addresses (resolved again at every attempt until they resolve), which to try next, and what
/// the attempts met, for the message of a timeout.
class Dial {
 public:
  Dial() = default;
  /// Dials `host`:`port`, pausing between rounds of failed attempts from the retry interval up
  /// to `pause_limit` (or the retry interval when that is longer).
  Dial(std::string host, std::uint16_t port, Duration pause_limit = std::chrono::seconds(1))
      : host_(std::move(host)), port_(port), pause_limit_(pause_limit) {}

  /// Starts a non-blocking connect() to the next address when one is due, into `link` (its
  /// descriptor, address, `connecting` and start time): true when it connected at once, so that
  /// finish() is due now; otherwise wait for the socket to poll writable. Leaves `link` without
  /// a descriptor when none is due or the attempt failed at once (counted, and retried after
  /// `retry_interval`).
  [[nodiscard]] bool start(Link& link, Clock::time_point now, Duration retry_interval);
  /// Completes the attempt in `link`, whose socket is connected or polled writable: true when
  /// it is connected; otherwise the failure is counted and the socket closed.
  [[nodiscard]] bool finish(Link& link, Duration retry_interval);
  /// Counts a failed attempt (ETIMEDOUT for one that took kConnectAttemptLimit).
  void failed(int errno_value, Clock::time_point now, Duration retry_interval);

  [[nodiscard]] Clock::time_point next_attempt() const noexcept { return next_attempt_; }
  /// Why the peer, as `peer` names it, is not connected yet: "rank 3 at node04:18515 refused
  /// the connection 57 times: is it running?" and the like.
  [[nodiscard]] std::string waiting_reason(const std::string& peer) const;

 private:
  void resolve();
  // The pause after a round of failed attempts: growing, jittered.
  [[nodiscard]] Duration backoff(Duration retry_interval);

  std::string host_;
  std::uint16_t port_ = 0;
  std::vector<Address> addresses_;
  std::size_t next_ = 0;  // attempts so far select the address: addresses_[next_ % size]
  Clock::time_point next_attempt_{};
  unsigned attempts_ = 0;
  unsigned refused_ = 0;
  int last_errno_ = 0;
  std::string resolve_failure_;  // why the host name did not resolve, if it did not
  Duration pause_limit_ = std::chrono::seconds(1);
  Duration pause_{};
  std::optional<std::minstd_rand> random_;
};

/// One TCP connection carrying framed messages (ibv/net/exchange_message.hpp): a peer rank's,
/// or one accepted and not yet identified.
struct Link {
  Fd fd;
  std::string name;                 // the peer as messages name it
  std::string address;              // numeric address of the other end, once known
  std::string_view operation;       // the operation errors name
  bool connecting = false;          // a non-blocking connect() in progress (dialled links)
  Clock::time_point connect_start;  // when that attempt started

  IncomingMessage in;     // the message being received: header, then payload
  bool received = false;  // the message expected from the peer is complete

  // What is being sent: our headers, then a payload (the caller's; it must outlive the send).
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
  /// Replaces what is queued with `headers` (encoded back to back) and then `payload`.
  void queue(std::span<const MessageHeader> headers, std::span<const std::byte> payload);

  /// Reads what has arrived of the current message, never past its end, checking the header as
  /// it comes in. Throws the protocol error of a bad header, the peer_gone error of a broken
  /// connection.
  Progress receive(const HeaderExpectation& expected);
  /// "after 10 of the 24 header bytes (truncated message)" and the like.
  [[nodiscard]] std::string received_so_far() const { return in.received_so_far(); }
  /// Sends what the socket takes; true when everything queued is sent. Throws ibv::Error
  /// (peer_gone) when the peer is gone.
  bool transmit();
};

/// Reads what has arrived of the hello of a connection not yet identified: true once it is
/// complete (in stray.in.parsed). A connection that closes before sending a byte is closed
/// quietly (a port probe, not a rank); one that closes inside its hello throws ibv::Error
/// (connection); a bad header throws the protocol error.
[[nodiscard]] bool receive_hello(Link& stray, const HeaderExpectation& expected);

/// Closes the oldest of `links` that is still open when `most` or more are: connections not
/// yet identified are capped, so that a crowd of clients can not exhaust the descriptors.
void make_room(std::vector<Link>& links, std::size_t most) noexcept;

/// The next connection waiting on `listener` (non-blocking, TCP_NODELAY) as a Link named "a
/// connection from 10.0.0.3:41234", or nullopt when none is waiting. Skips connections that
/// broke before they were taken; throws ibv::Error (resource) naming `what` when the process
/// is out of descriptors or memory.
[[nodiscard]] std::optional<Link> accept_link(const Fd& listener, std::string_view operation,
                                              const std::string& what);

}  // namespace ibv::net::detail
