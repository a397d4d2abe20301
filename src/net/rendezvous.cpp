// SPDX-License-Identifier: MIT
// Rendezvous: the TCP star of a job without a hosts file. The root runs one poll() loop per
// collective over its listener and every member's connection; a member runs one over its single
// connection to the root. Every socket is non-blocking and every loop has one deadline.
//
// Payload of every data message, both ways (after the header of exchange_message.hpp):
//   operation (1 byte: 1 all_gather, 2 all_to_all, 3 barrier), entry count (4 bytes), then per
//   entry its length (4 bytes) and its bytes; integers big-endian. A member sends 1 entry
//   (all_gather), world size entries (all_to_all, one per rank) or none (barrier); the root
//   answers with world size entries (every rank's, or every rank's entry for that member) or none.
// Payload of an abort (root to member): the ErrorKind (1 byte), the errno (4 bytes), the text.
#include "ibv/net/rendezvous.hpp"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <climits>
#include <exception>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "detail/big_endian.hpp"
#include "detail/brief_quote.hpp"
#include "detail/positive_timeout.hpp"
#include "ibv/error.hpp"
#include "ibv/net/exchange_message.hpp"
#include "net/tcp_link.hpp"

namespace ibv::net {
namespace {

using detail::Clock;
using detail::Fd;
using detail::kMaxReasons;
using detail::kMaxStrays;
using detail::Link;
using detail::Progress;

constexpr std::string_view kConstruct = "Rendezvous::Rendezvous";
constexpr std::string_view kLimit = "RendezvousOptions::max_message_size";

constexpr std::uint8_t kAllGather = 1;
constexpr std::uint8_t kAllToAll = 2;
constexpr std::uint8_t kBarrier = 3;

// How much longer than the timeout a connected member waits for the root's answer: the root's
// account of a failure is worth more than a member's own "the root did not answer".
constexpr std::chrono::seconds kRootGrace{2};
// How long a root that failed before its deadline keeps its port open to tell ranks that had
// not reached it yet why (they would otherwise find the port closed and wait out their timeout
// on "refused"). It stops as soon as every rank has been told.
constexpr std::chrono::seconds kRootLinger{2};

std::string_view operation_name(std::uint8_t operation) {
  switch (operation) {
    case kAllGather: return "Rendezvous::all_gather";
    case kAllToAll: return "Rendezvous::all_to_all";
    default: return "Rendezvous::barrier";
  }
}

std::string_view collective_name(std::uint8_t operation) {
  switch (operation) {
    case kAllGather: return "all_gather";
    case kAllToAll: return "all_to_all";
    case kBarrier: return "barrier";
    default: return "an unknown collective";
  }
}

// 1 + 4 + the entries with their lengths, saturated at the protocol's 32-bit limit.
std::size_t encoded_size(std::size_t entries, std::size_t bytes) {
  const long double size =
      5.0L + 4.0L * static_cast<long double>(entries) + static_cast<long double>(bytes);
  constexpr auto kMax = std::numeric_limits<std::uint32_t>::max();
  return size >= kMax ? kMax : static_cast<std::size_t>(size);
}

void put_u32(std::vector<std::byte>& out, std::size_t value) {
  const std::size_t at = out.size();
  out.resize(at + 4);
  ibv::detail::put_big_endian(out.data() + at, value, 4);
}

template <typename Entries>
std::vector<std::byte> encode(std::uint8_t operation, const Entries& entries) {
  std::size_t bytes = 0;
  for (const auto& entry : entries) bytes += entry.size();
  std::vector<std::byte> out;
  out.reserve(5 + 4 * entries.size() + bytes);
  out.push_back(std::byte{operation});
  put_u32(out, entries.size());
  for (const auto& entry : entries) {
    put_u32(out, entry.size());
    out.insert(out.end(), entry.begin(), entry.end());
  }
  return out;
}

// A decoded payload: its operation and entries (views into the payload).
struct Decoded {
  std::uint8_t operation = 0;
  std::vector<std::span<const std::byte>> entries;
};

// Decodes a payload from `peer`; throws the protocol error naming what is wrong.
Decoded decode(std::span<const std::byte> payload, const std::string& peer,
               std::string_view operation) {
  const auto bad = [&](const std::string& problem) {
    throw Error(ErrorKind::protocol, operation, EPROTO,
                peer + " sent a rendezvous message that " + problem);
  };
  if (payload.size() < 5) bad("is " + std::to_string(payload.size()) + " bytes, too short");
  Decoded decoded;
  decoded.operation = std::to_integer<std::uint8_t>(payload[0]);
  if (decoded.operation < kAllGather || decoded.operation > kBarrier) {
    bad("names collective " + std::to_string(decoded.operation) + ", which does not exist");
  }
  const auto count = ibv::detail::get_big_endian(payload.data() + 1, 4);
  if (count > (payload.size() - 5) / 4) {
    bad("announces " + std::to_string(count) + " entries in " + std::to_string(payload.size()) +
        " bytes");
  }
  decoded.entries.reserve(count);
  std::size_t at = 5;
  for (std::size_t i = 0; i < count; ++i) {
    if (payload.size() - at < 4) bad("ends inside the length of entry " + std::to_string(i));
    const auto length = ibv::detail::get_big_endian(payload.data() + at, 4);
    at += 4;
    if (payload.size() - at < length) {
      bad("ends inside entry " + std::to_string(i) + " (" + std::to_string(length) + " bytes)");
    }
    decoded.entries.push_back(payload.subspan(at, length));
    at += length;
  }
  if (at != payload.size()) {
    bad("has " + std::to_string(payload.size() - at) + " bytes after its last entry");
  }
  return decoded;
}

// How many entries a member sends for `operation`, and how many the root answers with.
std::size_t member_entries(std::uint8_t operation, std::uint32_t world) {
  if (operation == kAllGather) return 1;
  return operation == kAllToAll ? world : 0;
}
std::size_t root_entries(std::uint8_t operation, std::uint32_t world) {
  return operation == kBarrier ? 0 : world;
}

// What to poll a link for: its message while it has not arrived, room while ours is not sent.
short wanted_events(const Link& link) {
  short events = 0;
  if (!link.received) events = static_cast<short>(events | POLLIN);
  if (!link.flushed()) events = static_cast<short>(events | POLLOUT);
  return events;
}
// An error or hang-up counts as both: the read or write that follows reports it.
bool readable(const pollfd& entry) { return (entry.revents & (POLLIN | POLLERR | POLLHUP)) != 0; }
bool writable(const pollfd& entry) { return (entry.revents & (POLLOUT | POLLERR | POLLHUP)) != 0; }

// Milliseconds from now until `wake`, for poll(): 0 when it has passed.
int poll_ms(Clock::time_point wake) {
  const Clock::time_point now = Clock::now();
  if (wake <= now) return 0;
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
  return static_cast<int>(std::min<std::chrono::milliseconds::rep>(wait, INT_MAX));
}

// Raises this process's descriptor limit to at least `needed` where the hard limit allows: the
// root holds a socket per rank, more than the usual soft limit of 1,024 at large jobs.
void allow_descriptors(std::size_t needed) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
  limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, std::max<rlim_t>(needed, limit.rlim_cur));
  static_cast<void>(setrlimit(RLIMIT_NOFILE, &limit));  // best effort: accept() names EMFILE
}

}  // namespace

RootAddress RootAddress::parse(std::string_view text) {
  constexpr std::string_view kParse = "RootAddress::parse";
  const auto bad = [&](std::string_view problem) {
    throw_invalid_argument(
        kParse, "address " + ibv::detail::quote_briefly(text),
        std::string(problem) + " (expected host:port, e.g. node01:18515 or [fe80::1]:18515)");
  };
  std::string_view host;
  std::string_view port;
  if (text.starts_with('[')) {
    const auto close = text.find(']');
    if (close == std::string_view::npos) bad("has an unclosed '['");
    host = text.substr(1, close - 1);
    if (text.substr(close + 1, 1) != ":") bad("has no ':port' after ']'");
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) bad("has no ':port'");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) bad("is an IPv6 address without [brackets]");
  }
  if (host.empty()) bad("has an empty host");
  unsigned value = 0;
  const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || error != std::errc{} || end != port.data() + port.size() || value == 0 ||
      value > 65535) {
    bad("has a port that is not a number in 1..65535");
  }
  return {.host = std::string(host), .port = static_cast<std::uint16_t>(value)};
}

std::string RootAddress::to_string() const { return detail::host_port(host, std::to_string(port)); }

// The sockets of a Rendezvous and the collective under way: the root's listener, members and
// strays, or a member's connection to the root.
class Rendezvous::State {
 public:
  State(RootAddress root, std::uint32_t rank, std::uint32_t world, RendezvousOptions options);

  std::vector<std::vector<std::byte>> run(std::uint8_t operation,
                                          std::span<const std::vector<std::byte>> entries);
  // Closes everything; the root first tells every connected member `error`.
  void fail(const std::exception& error) noexcept;
  // The root, after a failure: tells the ranks that connect until every rank has been told or
  // `until`, each one `abort`, then closes them.
  void tell_latecomers(std::span<const std::byte> abort, Clock::time_point until);

  std::string poison;  // what() of the failure that made this Rendezvous unusable

 private:
  [[nodiscard]] bool is_root() const noexcept { return rank_ == 0; }
  [[nodiscard]] MessageHeader header(MessageKind kind, std::size_t payload) const noexcept {
    return {.kind = kind,
            .sender_rank = rank_,
            .world_size = world_,
            .sequence = sequence_,
            .payload_length = static_cast<std::uint32_t>(payload)};
  }
  [[nodiscard]] HeaderExpectation expectation(MessageKind kind, std::uint32_t sender,
                                              const std::string& peer,
                                              std::size_t max_payload) const noexcept {
    return {.kind = kind,
            .world_size = world_,
            .receiver_rank = rank_,
            .sender_rank = sender,
            .sequence = sequence_,
            .max_payload = max_payload,
            .peer = peer,
            .operation = operation_,
            .limit = kLimit,
            .hello_from = HelloFrom::any_other_rank,
            .accept_abort = !is_root()};
  }

  // The root.
  std::vector<std::vector<std::byte>> run_root(std::span<const std::vector<std::byte>> entries);
  void poll_root();
  [[nodiscard]] std::vector<std::vector<std::byte>> root_result(
      std::span<const std::vector<std::byte>> entries) const;
  void accept_all();
  void serve_stray(std::size_t index);
  void read_member(std::uint32_t member);
  void answer(std::span<const std::vector<std::byte>> own);
  [[noreturn]] void throw_root_timeout() const;

  // A member.
  std::vector<std::vector<std::byte>> run_member(std::span<const std::vector<std::byte>> entries);
  void poll_member(Clock::time_point wake);
  void read_answer();
  void dial_root(Clock::time_point now);
  void finish_connect();
  [[noreturn]] void throw_abort() const;
  [[noreturn]] void throw_member_timeout(bool connected) const;

  RootAddress root_;
  std::uint32_t rank_;
  std::uint32_t world_;
  RendezvousOptions options_;
  std::uint32_t sequence_ = 0;
  std::uint8_t collective_ = kAllGather;  // the collective under way
  std::string_view operation_ = operation_name(kAllGather);
  Clock::time_point deadline_;

  // The root: members_[r] is rank r's connection once it said hello (none for rank 0).
  Fd listener_;
  std::vector<Link> members_;
  std::vector<Link> strays_;
  std::vector<Decoded> received_;                // by rank: this collective's message
  std::vector<std::vector<std::byte>> replies_;  // by rank, or one shared reply at [0]
  std::vector<pollfd> polls_;                    // poll_root()'s entries, and their tags
  std::vector<std::size_t> tags_;

  // A member: its connection to the root.
  Link root_link_;
  detail::Dial dial_;
  std::vector<std::byte> message_;  // this collective's payload
};

Rendezvous::State::State(RootAddress root, std::uint32_t rank, std::uint32_t world,
                         RendezvousOptions options)
    : root_(std::move(root)), rank_(rank), world_(world), options_(std::move(options)) {
  if (is_root()) {
    members_.resize(world_);
    received_.resize(world_);
    allow_descriptors(std::size_t{world_} + kMaxStrays + 64);
    listener_ = detail::listen_tcp(
        {.address = options_.listen_address,
         .port = root_.port,
         .operation = kConstruct,
         .what = "the rendezvous root's port " + std::to_string(root_.port) + " on " +
                 (options_.listen_address.empty() ? std::string("*") : options_.listen_address),
         .other_port_hint = "choose another port for the job (IBV_BOOTSTRAP=host:port)",
         .address_option = "RendezvousOptions::listen_address"});
  } else {
    root_link_.name = "the root (rank 0 at " + root_.to_string() + ")";
    dial_ = detail::Dial(root_.host, root_.port);
  }
}

std::vector<std::vector<std::byte>> Rendezvous::State::run(
    std::uint8_t operation, std::span<const std::vector<std::byte>> entries) {
  collective_ = operation;
  operation_ = operation_name(operation);
  deadline_ = Clock::now() + options_.timeout;
  auto result = is_root() ? run_root(entries) : run_member(entries);
  ++sequence_;
  return result;
}

// --- the root ----------------------------------------------------------------------------------

std::vector<std::vector<std::byte>> Rendezvous::State::run_root(
    std::span<const std::vector<std::byte>> entries) {
  for (std::uint32_t member = 1; member < world_; ++member) {
    Link& link = members_[member];
    link.operation = operation_;
    link.expect_message();
    link.queue({}, {});
    received_[member] = {};
  }
  for (Link& stray : strays_) stray.operation = operation_;

  bool answered = false;
  while (true) {
    if (!answered && std::all_of(members_.begin() + 1, members_.end(),
                                 [](const Link& link) { return link.received; })) {
      answer(entries);
      answered = true;
    }
    if (answered && std::all_of(members_.begin() + 1, members_.end(),
                                [](const Link& link) { return link.flushed(); })) {
      break;
    }
    if (Clock::now() >= deadline_) throw_root_timeout();
    poll_root();
  }
  std::vector<std::vector<std::byte>> result = root_result(entries);
  for (std::uint32_t member = 1; member < world_; ++member) {
    members_[member].out_payload = {};
    members_[member].in.payload.clear();
    received_[member] = {};
  }
  replies_.clear();
  return result;
}

void Rendezvous::State::poll_root() {
  // Tags of the poll entries: a member's rank, kStray + a stray's index, or kListener.
  constexpr std::size_t kListener = SIZE_MAX;
  constexpr std::size_t kStray = std::size_t{1} << 40U;
  polls_.clear();
  tags_.clear();
  polls_.push_back({.fd = listener_.get(), .events = POLLIN, .revents = 0});
  tags_.push_back(kListener);
  for (std::uint32_t member = 1; member < world_; ++member) {
    const Link& link = members_[member];
    const short events = wanted_events(link);
    if (!link.fd.valid() || events == 0) continue;
    polls_.push_back({.fd = link.fd.get(), .events = events, .revents = 0});
    tags_.push_back(member);
  }
  for (std::size_t index = 0; index < strays_.size(); ++index) {
    polls_.push_back({.fd = strays_[index].fd.get(), .events = POLLIN, .revents = 0});
    tags_.push_back(kStray + index);
  }
  if (::poll(polls_.data(), polls_.size(), poll_ms(deadline_)) < 0) {
    if (errno == EINTR) return;
    detail::throw_resource(operation_, errno, "poll()");
  }
  for (std::size_t i = 0; i < polls_.size(); ++i) {
    const pollfd& entry = polls_[i];
    if (entry.revents == 0) continue;
    if (tags_[i] == kListener) {
      accept_all();
    } else if (tags_[i] >= kStray) {
      serve_stray(tags_[i] - kStray);
    } else {
      const auto member = static_cast<std::uint32_t>(tags_[i]);
      if (readable(entry)) read_member(member);
      if (writable(entry) && members_[member].fd.valid()) members_[member].transmit();
    }
  }
  std::erase_if(strays_, [](const Link& link) { return !link.fd.valid(); });
}

std::vector<std::vector<std::byte>> Rendezvous::State::root_result(
    std::span<const std::vector<std::byte>> entries) const {
  // all_gather: every rank's entry; all_to_all: what every rank sent to the root (its entry 0).
  std::vector<std::vector<std::byte>> result;
  if (collective_ == kBarrier) return result;
  result.resize(world_);
  result[0] = entries[0];
  for (std::uint32_t member = 1; member < world_; ++member) {
    const auto entry = received_[member].entries[0];
    result[member].assign(entry.begin(), entry.end());
  }
  return result;
}

void Rendezvous::State::accept_all() {
  while (auto link =
             detail::accept_link(listener_, operation_, "accept() on the rendezvous port")) {
    detail::make_room(strays_, kMaxStrays + world_);  // every member dials the root
    strays_.push_back(std::move(*link));
    serve_stray(strays_.size() - 1);  // its hello may be here already
  }
}

void Rendezvous::State::serve_stray(std::size_t index) {
  Link& stray = strays_[index];
  if (!detail::receive_hello(stray, expectation(MessageKind::hello, 0, stray.name, 0))) return;
  const std::uint32_t member = stray.in.parsed->sender_rank;
  if (members_[member].fd.valid()) {
    throw Error(ErrorKind::protocol, operation_, EPROTO,
                stray.name + " introduced itself as rank " + std::to_string(member) +
                    ", but rank " + std::to_string(member) + " is already connected (" +
                    members_[member].name + "): a duplicate rank",
                "two processes were started with the same rank, or another job uses this "
                "rendezvous address");
  }
  Link link = std::move(stray);  // leaves the stray without a descriptor: dropped
  link.name = "rank " + std::to_string(member) + " (connected from " + link.address + ")";
  link.expect_message();
  members_[member] = std::move(link);
  read_member(member);  // its first message may be here already
}

void Rendezvous::State::read_member(std::uint32_t member) {
  Link& link = members_[member];
  if (link.received || !link.fd.valid()) return;
  const std::size_t most =
      encoded_size(member_entries(collective_, world_), options_.max_message_size);
  switch (link.receive(expectation(MessageKind::data, member, link.name, most))) {
    case Progress::waiting: return;
    case Progress::closed:
      throw Error(ErrorKind::peer_gone, operation_, ECONNRESET,
                  link.name + " closed the connection " + link.received_so_far() + " for " +
                      std::string(collective_name(collective_)) + " " + std::to_string(sequence_) +
                      ": it failed or exited",
                  "see that rank's own error");
    case Progress::complete: break;
  }
  Decoded decoded = decode(link.in.payload, link.name, operation_);
  if (decoded.operation != collective_) {
    throw Error(ErrorKind::protocol, operation_, EPROTO,
                link.name + " called " + std::string(collective_name(decoded.operation)) +
                    " where the root called " + std::string(collective_name(collective_)) +
                    " (collective " + std::to_string(sequence_) + ")",
                "every rank must make the same bootstrap calls in the same order");
  }
  if (decoded.entries.size() != member_entries(collective_, world_)) {
    throw Error(ErrorKind::protocol, operation_, EPROTO,
                link.name + " sent " + std::to_string(decoded.entries.size()) + " entries for " +
                    std::string(collective_name(collective_)) + "; " +
                    std::to_string(member_entries(collective_, world_)) + " were expected");
  }
  received_[member] = std::move(decoded);
  link.received = true;
}

void Rendezvous::State::answer(std::span<const std::vector<std::byte>> own) {
  const auto send = [&](std::uint32_t member, std::span<const std::byte> reply) {
    Link& link = members_[member];
    const std::array<MessageHeader, 1> head{header(MessageKind::data, reply.size())};
    link.queue(head, reply);
    link.transmit();
  };
  replies_.clear();
  if (collective_ == kAllToAll) {
    replies_.resize(world_);
    std::vector<std::span<const std::byte>> column(world_);
    for (std::uint32_t member = 1; member < world_; ++member) {
      column[0] = own[member];
      for (std::uint32_t sender = 1; sender < world_; ++sender) {
        column[sender] = received_[sender].entries[member];
      }
      replies_[member] = encode(kAllToAll, column);
    }
    for (std::uint32_t member = 1; member < world_; ++member) send(member, replies_[member]);
    return;
  }
  std::vector<std::span<const std::byte>> row;
  if (collective_ == kAllGather) {
    row.resize(world_);
    row[0] = own[0];
    for (std::uint32_t sender = 1; sender < world_; ++sender) {
      row[sender] = received_[sender].entries[0];
    }
  }
  replies_.push_back(encode(collective_, row));  // one reply for every member
  for (std::uint32_t member = 1; member < world_; ++member) send(member, replies_[0]);
}

void Rendezvous::State::throw_root_timeout() const {
  std::vector<std::uint32_t> waiting;
  std::string reasons;
  const std::string collective =
      std::string(collective_name(collective_)) + " " + std::to_string(sequence_);
  for (std::uint32_t member = 1; member < world_; ++member) {
    const Link& link = members_[member];
    if (link.fd.valid() && link.received && link.flushed()) continue;
    waiting.push_back(member);
    if (waiting.size() > kMaxReasons) continue;
    if (!reasons.empty()) reasons += "; ";
    if (!link.fd.valid()) {
      reasons += "rank " + std::to_string(member) + " never connected to port " +
                 std::to_string(root_.port) +
                 ": is it running, with IBV_BOOTSTRAP=" + root_.to_string() +
                 " and a world size of " + std::to_string(world_) + "?";
    } else if (!link.received) {
      reasons += link.in.header_got == 0
                     ? link.name + " sent nothing for " + collective
                     : link.name + " sent only " + link.in.progress() + " of its message";
    } else {
      reasons += link.name + " took only " + std::to_string(link.head_sent + link.payload_sent) +
                 " of the " + std::to_string(link.out_head.size() + link.out_payload.size()) +
                 " bytes of our answer";
    }
  }
  if (waiting.size() > kMaxReasons) {
    reasons += "; and " + std::to_string(waiting.size() - kMaxReasons) + " more";
  }
  throw Error(ErrorKind::timeout, operation_, ETIMEDOUT,
              "the rendezvous root timed out after " +
                  ibv::detail::duration_text(options_.timeout) + " of " + collective +
                  " waiting for " + detail::rank_list(waiting) + " (" + reasons + ")",
              "every rank must make the same bootstrap calls; raise RendezvousOptions::timeout "
              "when the ranks start further apart");
}

// --- a member ----------------------------------------------------------------------------------

std::vector<std::vector<std::byte>> Rendezvous::State::run_member(
    std::span<const std::vector<std::byte>> entries) {
  message_ = encode(collective_, entries);
  root_link_.operation = operation_;
  root_link_.expect_message();
  if (root_link_.fd.valid() && !root_link_.connecting) {
    const std::array<MessageHeader, 1> head{header(MessageKind::data, message_.size())};
    root_link_.queue(head, message_);
    root_link_.transmit();
  }
  const Clock::time_point answer_deadline =
      deadline_ + std::min<Duration>(options_.timeout, kRootGrace);
  while (!root_link_.received || !root_link_.flushed()) {
    const Clock::time_point now = Clock::now();
    const bool connected = root_link_.fd.valid() && !root_link_.connecting;
    if (!root_link_.fd.valid()) dial_root(now);
    if (now >= (connected ? answer_deadline : deadline_)) throw_member_timeout(connected);
    poll_member(connected ? answer_deadline : deadline_);
  }
  Decoded decoded = decode(root_link_.in.payload, root_link_.name, operation_);
  if (decoded.operation != collective_ ||
      decoded.entries.size() != root_entries(collective_, world_)) {
    throw Error(ErrorKind::protocol, operation_, EPROTO,
                root_link_.name + " answered " + std::string(collective_name(collective_)) +
                    " with " + std::to_string(decoded.entries.size()) + " entries of " +
                    std::string(collective_name(decoded.operation)));
  }
  std::vector<std::vector<std::byte>> result;
  result.reserve(decoded.entries.size());
  for (const auto entry : decoded.entries) result.emplace_back(entry.begin(), entry.end());
  root_link_.out_payload = {};
  return result;
}

void Rendezvous::State::poll_member(Clock::time_point wake) {
  pollfd entry{.fd = root_link_.fd.get(), .events = 0, .revents = 0};
  if (!root_link_.fd.valid()) {
    wake = std::min(wake, dial_.next_attempt());
  } else if (root_link_.connecting) {
    entry.events = POLLOUT;
    wake = std::min(wake, root_link_.connect_start + detail::kConnectAttemptLimit);
  } else {
    entry.events = wanted_events(root_link_);
  }
  if (::poll(&entry, root_link_.fd.valid() ? 1 : 0, poll_ms(wake)) < 0) {
    if (errno == EINTR) return;
    detail::throw_resource(operation_, errno, "poll()");
  }
  if (root_link_.connecting) {
    if (entry.revents != 0) {
      finish_connect();
    } else if (Clock::now() - root_link_.connect_start >= detail::kConnectAttemptLimit) {
      root_link_.fd.reset();
      root_link_.connecting = false;
      dial_.failed(ETIMEDOUT, Clock::now(), options_.retry_interval);
    }
    return;
  }
  if (readable(entry) && !root_link_.received) read_answer();
  if (writable(entry) && root_link_.fd.valid()) root_link_.transmit();
}

void Rendezvous::State::read_answer() {
  const std::size_t most = std::max(encoded_size(root_entries(collective_, world_),
                                                 std::size_t{world_} * options_.max_message_size),
                                    detail::kMaxAbortPayload);
  switch (root_link_.receive(expectation(MessageKind::data, 0, root_link_.name, most))) {
    case Progress::waiting: return;
    case Progress::complete: root_link_.received = true; break;
    case Progress::closed:
      throw Error(ErrorKind::peer_gone, operation_, ECONNRESET,
                  root_link_.name + " closed the connection " + root_link_.received_so_far() +
                      " for " + std::string(collective_name(collective_)) + " " +
                      std::to_string(sequence_),
                  "the root failed or exited: see its own error");
  }
  if (root_link_.in.parsed->kind == MessageKind::abort) throw_abort();
}

void Rendezvous::State::dial_root(Clock::time_point now) {
  if (dial_.start(root_link_, now, options_.retry_interval)) finish_connect();
}

void Rendezvous::State::finish_connect() {
  if (!dial_.finish(root_link_, options_.retry_interval)) return;
  detail::set_no_delay(root_link_.fd);
  const std::array<MessageHeader, 2> head{
      MessageHeader{.kind = MessageKind::hello, .sender_rank = rank_, .world_size = world_},
      header(MessageKind::data, message_.size())};
  root_link_.queue(head, message_);
  root_link_.transmit();
}

void Rendezvous::State::throw_abort() const {
  detail::throw_abort(root_link_.in.payload, operation_,
                      root_link_.name + " ended the job during " +
                          std::string(collective_name(collective_)) + " " +
                          std::to_string(sequence_));
}

void Rendezvous::State::throw_member_timeout(bool connected) const {
  const std::string collective =
      std::string(collective_name(collective_)) + " " + std::to_string(sequence_);
  std::string reason = connected ? root_link_.name + " did not answer " + collective +
                                       " (it answers when every "
                                       "rank has called it)"
                                 : dial_.waiting_reason(root_link_.name);
  throw Error(ErrorKind::timeout, operation_, ETIMEDOUT,
              "rank " + std::to_string(rank_) + " timed out after " +
                  ibv::detail::duration_text(options_.timeout) + " of " + collective + ": " +
                  reason,
              connected ? "some rank did not make the same bootstrap call: see the root's error"
                        : "start the root (rank 0) with the same IBV_BOOTSTRAP address, or raise "
                          "RendezvousOptions::timeout");
}

void Rendezvous::State::fail(const std::exception& error) noexcept {
  if (is_root()) {
    // Best effort and without waiting: one non-blocking send of the abort to every connected
    // member and identified stray; a member whose socket is full learns it from the close.
    try {
      const std::vector<std::byte> message =
          detail::abort_message(header(MessageKind::abort, 0), error);
      // A member mid-way through a message of ours would read the abort as its rest: it then
      // fails on the garbled answer or the close, either way with an error.
      for (const Link& link : members_) detail::send_best_effort(link.fd, message);
      // Unidentified connections are ranks that have not said hello yet, or strangers, whom
      // an abort does not hurt.
      for (const Link& link : strays_) detail::send_best_effort(link.fd, message);
      const auto* known = dynamic_cast<const Error*>(&error);
      if (known == nullptr || known->kind() != ErrorKind::timeout) {
        // A timeout gave the missing ranks all the time there was; any other failure may be
        // quicker than ranks that are still starting.
        tell_latecomers(message, std::min(deadline_, Clock::now() + kRootLinger));
      }
    } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory; the close still tells them
    }
  }
  listener_.reset();
  for (Link& link : members_) link.fd.reset();
  strays_.clear();
  root_link_.fd.reset();
}

void Rendezvous::State::tell_latecomers(std::span<const std::byte> abort, Clock::time_point until) {
  const auto connected = [](const Link& link) { return link.fd.valid(); };
  std::size_t told = static_cast<std::size_t>(std::ranges::count_if(members_, connected)) +
                     static_cast<std::size_t>(std::ranges::count_if(strays_, connected));
  std::vector<Fd> latecomers;
  while (told + 1 < world_ && listener_.valid()) {
    pollfd entry{.fd = listener_.get(), .events = POLLIN, .revents = 0};
    const int ready = ::poll(&entry, 1, poll_ms(until));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) break;  // `until`, or poll() failed: those accepted get one last drain
    while (told + 1 < world_) {
      Fd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) break;
      detail::send_best_effort(fd, abort);
      ::shutdown(fd.get(), SHUT_WR);
      latecomers.push_back(std::move(fd));
      ++told;
    }
  }
  // Keep each latecomer until it closes (it reads the abort and fails): closing a socket with
  // its hello unread would reset the connection, and the reset can overtake the abort.
  std::vector<pollfd> open;
  open.reserve(latecomers.size());
  for (const Fd& fd : latecomers) open.push_back({.fd = fd.get(), .events = POLLIN, .revents = 0});
  std::array<std::byte, 512> sink{};
  while (!open.empty()) {
    const int ready = ::poll(open.data(), open.size(), poll_ms(until));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return;
    std::erase_if(open, [&](const pollfd& entry) {
      if (entry.revents == 0) return false;
      ssize_t got = 0;
      do {
        got = ::recv(entry.fd, sink.data(), sink.size(), MSG_DONTWAIT);
      } while (got > 0);
      return got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    });
  }
}

// --- Rendezvous --------------------------------------------------------------------------------

Rendezvous::Rendezvous(RootAddress root, std::uint32_t rank, std::uint32_t world_size,
                       RendezvousOptions options)
    : root_(std::move(root)), rank_(rank), world_size_(world_size), options_(std::move(options)) {
  if (world_size_ == 0) throw_invalid_argument(kConstruct, "world_size 0", "must be at least 1");
  if (rank_ >= world_size_) {
    throw_invalid_argument(kConstruct, "rank " + std::to_string(rank_),
                           "is not below the world size " + std::to_string(world_size_));
  }
  if (root_.port == 0) throw_invalid_argument(kConstruct, "root.port 0", "must be 1..65535");
  if (root_.host.empty() && rank_ != 0) {
    throw_invalid_argument(kConstruct, "root.host", "is empty: the other ranks must dial it");
  }
  detail::check_options(kConstruct, options_.timeout, options_.retry_interval,
                        options_.max_message_size);
  if (world_size_ > 1) state_ = std::make_unique<State>(root_, rank_, world_size_, options_);
}

Rendezvous::Rendezvous(Rendezvous&& other) noexcept = default;
Rendezvous& Rendezvous::operator=(Rendezvous&& other) noexcept = default;
Rendezvous::~Rendezvous() = default;

std::string Rendezvous::description() const {
  return "TCP rendezvous at " + root_.to_string() + " (rank " + std::to_string(rank_) + " of " +
         std::to_string(world_size_) + ")";
}

std::vector<std::vector<std::byte>> Rendezvous::all_gather_bytes(std::span<const std::byte> mine) {
  const std::array<std::vector<std::byte>, 1> entries{
      std::vector<std::byte>(mine.begin(), mine.end())};
  return run(kAllGather, entries);
}

std::vector<std::vector<std::byte>> Rendezvous::all_to_all_bytes(
    std::span<const std::vector<std::byte>> to_peer) {
  if (to_peer.size() != world_size_) {
    throw_invalid_argument(operation_name(kAllToAll), "to_peer",
                           "has " + std::to_string(to_peer.size()) +
                               " entries; it needs one per rank: " + std::to_string(world_size_));
  }
  return run(kAllToAll, to_peer);
}

void Rendezvous::barrier() { (void)run(kBarrier, {}); }

std::vector<std::vector<std::byte>> Rendezvous::run(
    std::uint8_t operation, std::span<const std::vector<std::byte>> entries) {
  const std::string_view name = operation_name(operation);
  std::size_t total = 0;
  for (const auto& entry : entries) total += entry.size();
  if (total > options_.max_message_size) {
    throw_invalid_argument(name, "the contribution of " + std::to_string(total) + " bytes",
                           "exceeds the maximum of " + std::to_string(options_.max_message_size) +
                               " (RendezvousOptions::max_message_size); nothing was sent");
  }
  if (world_size_ == 1) {
    if (operation == kBarrier) return {};
    return {entries[0]};
  }
  if (!state_) throw Error(ErrorKind::state, name, EINVAL, "this Rendezvous was moved from");
  if (!state_->poison.empty()) {
    throw Error(ErrorKind::state, name, EINVAL,
                "rank " + std::to_string(rank_) +
                    ": an earlier collective failed and closed this Rendezvous (the earlier "
                    "failure: " +
                    state_->poison + ")",
                "make a new Rendezvous on every rank and start over");
  }
  try {
    return state_->run(operation, entries);
  } catch (const std::exception& error) {
    state_->poison = error.what();
    state_->fail(error);
    throw;
  } catch (...) {
    state_->poison = "an exception that is not a std::exception";
    state_->fail(std::runtime_error(state_->poison));
    throw;
  }
}

}  // namespace ibv::net
