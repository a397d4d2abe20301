// SPDX-License-Identifier: MIT
// Latency loops of ibvcpp perf, shaped like perftest's run_iter_lat_write (a ping-pong of RDMA
// writes, each side polling the last byte of its inbox for the peer's counter),
// run_iter_lat_send (a ping-pong of sends) and run_iter_lat (a sequence of blocking reads).
// The client starts the ping-pong and timestamps each of its posts. Each write, send and read
// is a blocking call (Channel::execute with the run's inline policy): the library's shortest
// path from post to completion, bounded by the channel's operation timeout (--timeout). With
// -c UD the ping-pong of sends runs on the slot's UD queue pair (the verbs layer): each send
// signaled and its completion polled, as perftest's latency test does with its TX depth of 1.
#include <array>
#include <atomic>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "ibvcpp/engine.hpp"
#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/statistics.hpp"

namespace ibvcpp::engine {
namespace {

/// The clock is read once every 4096 turns of a waiting loop.
constexpr std::uint32_t kCheckMask = 0xfffU;

/// The counter a side writes into the last byte of its message number `n` (1-based).
std::byte counter(std::uint64_t n) noexcept { return static_cast<std::byte>(n & 0xffU); }

/// Spins until `cell` holds `expected`; a peer silent for the timeout is a run failure.
void await_byte(const std::atomic_ref<std::byte>& cell, std::byte expected, const Session& session,
                std::uint64_t received) {
  StallWatch watch(session.timeout_ns(), kCheckMask);
  while (cell.load(std::memory_order_acquire) != expected) {
    if (watch.stalled()) {
      throw ToolError(ExitCode::run_failed,
                      "no RDMA write from the peer for " +
                          std::to_string(session.options.timeout.count()) + " s after " +
                          std::to_string(received - 1) + " of " +
                          std::to_string(session.options.iterations) + " (is it alive?)");
    }
  }
}

/// Spins on `poll()` (one look at a completion queue per turn, no clock read, unlike
/// PendingWork::wait(); it returns the completion once there is one) until it gives a
/// completion; a failed one throws ibv::WorkError, none within the timeout a ToolError naming
/// `what` and `suspect`.
template <typename Poll>
void spin_for_completion(Poll&& poll, const Session& session, std::string_view what,
                         std::string_view suspect) {
  StallWatch watch(session.timeout_ns(), kCheckMask);
  while (true) {
    if (const auto& done = poll()) {  // a reference where poll() gives one: no copy per turn
      if (!done->ok()) throw ibv::WorkError(*done, what);
      return;
    }
    if (watch.stalled()) {
      throw ToolError(ExitCode::run_failed, "no completion of " + std::string(what) + " for " +
                                                std::to_string(session.options.timeout.count()) +
                                                " s (" + std::string(suspect) + ")");
    }
  }
}

/// Spins on `work` (a receive posted ahead) until it completes.
void await(ibv::PendingWork& work, const Session& session, std::string_view what) {
  spin_for_completion(
      [&work]() -> const std::optional<ibv::WorkCompletion>& { return work.poll(); }, session, what,
      "is the peer alive?");
}

/// The ping-pong of RDMA writes. Returns the client's post timestamps (empty on the server).
std::vector<std::int64_t> write_pingpong(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  const bool client = options.is_client();
  auto& slot = session.qps.front();
  ibv::Channel& channel = *slot.channel;
  const std::span<std::byte> out = slot.outbox(size);
  const std::span<std::byte> in = slot.inbox(size);
  std::ranges::fill(out, std::byte{0});
  std::ranges::fill(in, std::byte{0});
  const std::array gather{slot.mr->gather(out)};
  const ibv::RemoteMemoryRegion remote = slot.peer.inbox.sub_region(0, size);
  const std::atomic_ref<std::byte> arrived(in.back());
  std::byte& mark = out.back();
  const ibv::InlineOptions post{.inline_data = options.inline_policy(size)};
  const std::uint64_t iterations = options.iterations;
  std::vector<std::int64_t> posted(client ? iterations : 0);

  session.sync();
  Heartbeat heartbeat(session.connection);
  try {
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    while (sent < iterations || received < iterations) {
      if (received < iterations && !(sent == 0 && client)) {
        ++received;
        await_byte(arrived, counter(received), session, received);
      }
      if (sent < iterations) {
        if (client) {
          posted[sent] = now_ns();
          heartbeat.beat(posted[sent]);
        }
        mark = counter(++sent);
        (void)channel.execute(ibv::op::Write{gather, remote}, post);
      }
    }
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
  return posted;
}

/// The ping-pong of sends; both sides keep rx-depth receives posted.
std::vector<std::int64_t> send_pingpong(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  const bool client = options.is_client();
  auto& slot = session.qps.front();
  ibv::Channel& channel = *slot.channel;
  const std::array gather{slot.mr->gather(slot.outbox(size))};
  const std::array into{slot.mr->scatter(slot.inbox(size))};
  const ibv::InlineOptions post{.inline_data = options.inline_policy(size)};
  const std::uint64_t iterations = options.iterations;
  const std::uint64_t depth = options.rx_depth();
  std::vector<std::int64_t> posted(client ? iterations : 0);
  WorkRing receives(depth);  // by receive number
  std::uint64_t posted_receives = 0;
  try {
    for (; posted_receives < depth; ++posted_receives) {
      receives.put(posted_receives, channel.post_receive(into));
    }
    session.sync();
    Heartbeat heartbeat(session.connection);
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    while (sent < iterations || received < iterations) {
      if (received < iterations && !(sent == 0 && client)) {
        await(receives.at(received), session, "a receive");
        receives.drop(received);
        ++received;
        if (posted_receives < iterations) {
          receives.put(posted_receives++, channel.post_receive(into));
        }
      }
      if (sent < iterations) {
        if (client) {
          posted[sent] = now_ns();
          heartbeat.beat(posted[sent]);
        }
        ++sent;
        (void)channel.execute(ibv::op::Send{gather}, post);
      }
    }
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
  return posted;
}

/// Blocking reads, one at a time (the client; the server's device answers).
std::vector<std::int64_t> read_sequence(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  auto& slot = session.qps.front();
  ibv::Channel& channel = *slot.channel;
  const std::array into{slot.mr->scatter(slot.inbox(size))};
  const ibv::RemoteMemoryRegion remote = slot.peer.outbox.sub_region(0, size);
  std::vector<std::int64_t> posted(options.iterations);
  session.sync();
  Heartbeat heartbeat(session.connection);
  try {
    for (auto& t : posted) {
      t = now_ns();
      heartbeat.beat(t);
      (void)channel.execute(ibv::op::Read{into, remote});
    }
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
  return posted;
}

/// Polls `cq` until one completion arrives (a lost datagram ends a ping-pong so: UD does not
/// resend).
void await_one(const ibv::CompletionQueue& cq, const Session& session, std::string_view what) {
  std::array<ibv::WorkCompletion, 1> polled{};
  spin_for_completion(
      [&]() -> std::optional<ibv::WorkCompletion> {
        const auto done = cq.poll(polled);
        if (done.empty()) return std::nullopt;
        return done.front();
      },
      session, what, "a datagram lost, or the peer gone?");
}

/// -c UD: the ping-pong of sends on the slot's UD queue pair; every message's receive is posted
/// before the start (rx depth: the iterations, at most 16000; reposted beyond that).
std::vector<std::int64_t> datagram_pingpong(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  const bool client = options.is_client();
  auto& slot = session.qps.front();
  const DatagramLane& lane = *slot.datagrams;
  const std::array gather{slot.mr->gather(slot.outbox(size))};
  ibv::UdSendRequest send = datagram_to_peer(slot, gather);
  if (options.sends_inline(size)) send.inline_data();
  const std::uint64_t iterations = options.iterations;
  std::vector<std::int64_t> posted(client ? iterations : 0);
  std::uint64_t posted_receives = 0;
  try {
    for (; posted_receives < options.rx_depth(); ++posted_receives) {
      post_datagram_receive(slot, size);
    }
    session.sync();
    Heartbeat heartbeat(session.connection);
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    while (sent < iterations || received < iterations) {
      if (received < iterations && !(sent == 0 && client)) {
        await_one(lane.recv_cq, session, "a receive");
        ++received;
        if (posted_receives < iterations) {
          post_datagram_receive(slot, size);
          ++posted_receives;
        }
      }
      if (sent < iterations) {
        if (client) {
          posted[sent] = now_ns();
          heartbeat.beat(posted[sent]);
        }
        ++sent;
        lane.qp.post_send(send);
        await_one(lane.send_cq, session, "a send");
      }
    }
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
  return posted;
}

}  // namespace

LatResult run_lat(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  for (const auto& slot : session.qps) {
    const auto& region = options.test.verb == Verb::read ? slot.peer.outbox : slot.peer.inbox;
    if (region.length() < size) {
      throw UsageError("size " + std::to_string(size) + " is larger than the peer's buffer (" +
                       std::to_string(region.length()) + " bytes)");
    }
  }
  std::vector<std::int64_t> posted;
  switch (options.test.verb) {
    case Verb::write: posted = write_pingpong(session, size); break;
    case Verb::send:
      posted = options.connection == Transport::ud ? datagram_pingpong(session, size)
                                                   : send_pingpong(session, size);
      break;
    case Verb::read:
      if (options.is_client()) {
        posted = read_sequence(session, size);
      } else {
        session.sync();
      }
      break;
  }
  if (!options.is_client()) {
    // The figures are the client's; it sends them when it is done.
    return decode_lat_result(
        session.connection.expect(MessageType::result, options.timeout, "the client's result")
            .text());
  }
  // perftest reports send and write as one-way (round trip / 2), read as the round trip.
  const unsigned rtt_factor = options.test.verb == Verb::read ? 1 : 2;
  const LatResult result{size, options.iterations, latency_statistics(posted, rtt_factor)};
  session.connection.send(MessageType::result, encode_result(result));
  return result;
}

}  // namespace ibvcpp::engine
