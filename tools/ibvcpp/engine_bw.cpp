// SPDX-License-Identifier: MIT
// Bandwidth loops of ibvcpp perf, shaped like perftest's run_iter_bw / run_iter_bw_server:
// the client keeps tx-depth requests in flight per queue pair, signals one request in
// cq_moderation (and the last), timestamps every post and every polled completion; the server
// of a send test keeps rx-depth receives posted and reposts as they complete. With a post list
// (-l) the client posts each queue pair's list of requests, built once, with one doorbell.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "ibv/verbs/completion_queue.hpp"
#include "ibv/verbs/queue_pair.hpp"
#include "ibv/verbs/work_completion.hpp"
#include "ibv/verbs/work_request.hpp"
#include "ibvcpp/engine.hpp"
#include "ibvcpp/exit_code.hpp"
#include "ibvcpp/statistics.hpp"

namespace ibvcpp::engine {
namespace {

/// One queue pair's state in the client loop. Requests are retired in posting order: when the
/// oldest signaled request in flight completes, it and every unsignaled one before it are done
/// (the channel retires them), and their handles are polled and dropped.
struct Lane {
  explicit Lane(std::size_t depth) : in_flight(depth) {}

  ibv::Channel* channel = nullptr;
  std::array<ibv::GatherElement, 1> gather{};
  std::array<ibv::ScatterElement, 1> scatter{};
  ibv::RemoteMemoryRegion remote;
  WorkRing in_flight;                  // by request number
  std::deque<std::uint64_t> signaled;  // request numbers of signaled ones in flight
  std::uint64_t posted = 0;
  std::uint64_t retired = 0;
  std::uint64_t until_signal = 0;  // posts until the next signaled one (client_loop sets it)
};

template <Verb V>
ibv::PendingWork post(Lane& lane, ibv::PostOptions options) {
  if constexpr (V == Verb::send) {
    return lane.channel->post_send(lane.gather, options);
  } else if constexpr (V == Verb::write) {
    return lane.channel->post_write(lane.gather, lane.remote, options);
  } else {
    return lane.channel->post_read(lane.scatter, lane.remote, {.signaled = options.signaled});
  }
}

std::vector<Lane> make_lanes(Session& session, std::uint64_t size) {
  std::vector<Lane> lanes;
  lanes.reserve(session.qps.size());
  for (auto& slot : session.qps) {
    auto& lane = lanes.emplace_back(session.options.tx_depth);
    lane.channel = &*slot.channel;
    lane.gather[0] = slot.mr->gather(slot.outbox(size));
    lane.scatter[0] = slot.mr->scatter(slot.inbox(size));
    const auto& region =
        session.options.test.verb == Verb::read ? slot.peer.outbox : slot.peer.inbox;
    if (region.length() < size) {
      throw UsageError("size " + std::to_string(size) + " is larger than the peer's buffer (" +
                       std::to_string(region.length()) + " bytes)");
    }
    lane.remote = region.sub_region(0, size);
  }
  return lanes;
}

/// Retires the lane's oldest signaled request if it has completed: returns the time it was
/// seen complete (perftest's tcompleted), or nullopt.
std::optional<std::int64_t> retire(Lane& lane, std::uint64_t& total_retired) {
  const std::uint64_t last = lane.signaled.front();
  const auto done = lane.in_flight.at(last).poll();
  if (!done) return std::nullopt;
  const std::int64_t now = now_ns();
  if (!done->ok()) throw ibv::WorkError(*done, "bandwidth test");
  for (std::uint64_t k = lane.retired; k < last; ++k) {
    // Retired by the signaled completion: the channel has their completions already.
    const auto earlier = lane.in_flight.at(k).poll();
    if (!earlier || !earlier->ok()) {
      throw ibv::Error(ibv::ErrorKind::state, "bandwidth test", 0,
                       "a request before a completed signaled one was not retired");
    }
    lane.in_flight.drop(k);
  }
  lane.in_flight.drop(last);
  total_retired += last + 1 - lane.retired;
  lane.retired = last + 1;
  lane.signaled.pop_front();
  return now;
}

/// The clients' stall check, every 1024 passes of their loop: throws when nothing completed for
/// the session's timeout (`done` of `total` requests so far), else keeps the server informed.
void watch_progress(Session& session, std::uint32_t& spins, std::int64_t last_progress,
                    std::uint64_t done, std::size_t total, std::uint64_t size,
                    Heartbeat& heartbeat) {
  if ((++spins & 0x3ffU) != 0) return;
  const std::int64_t now = now_ns();
  if (now - last_progress > session.timeout_ns()) {
    throw ToolError(ExitCode::run_failed,
                    "no completion for " + std::to_string(session.options.timeout.count()) +
                        " s after " + std::to_string(done) + " of " + std::to_string(total) +
                        " requests of " + std::to_string(size) + " bytes (is the server alive?)");
  }
  heartbeat.beat(now);
}

/// The end of a client's run: the statistics, sent to the server and returned.
BwResult send_result(Session& session, std::uint64_t size, std::size_t total,
                     const std::vector<std::int64_t>& posted,
                     const std::vector<CompletionMark>& marks) {
  // The peak takes a while for many iterations: tell a waiting server that this side lives.
  session.connection.send(MessageType::heartbeat);
  const BwResult result{
      size, total,
      bandwidth_statistics(posted, marks, size, session.options.iterations <= kPeakIterationLimit),
      std::nullopt};
  session.connection.send(MessageType::result, encode_result(result));
  return result;
}

template <Verb V>
BwResult client_loop(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  const std::uint64_t iterations = options.iterations;
  const std::uint64_t depth = options.tx_depth;
  const std::uint64_t moderation = options.cq_moderation(size);
  std::vector<Lane> lanes = make_lanes(session, size);
  for (auto& lane : lanes) lane.until_signal = moderation;
  const std::size_t total = iterations * lanes.size();
  std::vector<std::int64_t> posted(total);
  std::vector<CompletionMark> marks;
  marks.reserve(total / moderation + lanes.size() + 1);
  const ibv::PostOptions unsignaled{.signaled = false, .inline_data = options.inline_policy(size)};
  const ibv::PostOptions signaled{.signaled = true, .inline_data = options.inline_policy(size)};

  session.sync();
  Heartbeat heartbeat(session.connection);
  std::size_t total_posted = 0;
  std::uint64_t total_retired = 0;
  std::uint64_t completed = 0;  // perftest's totccnt: cq_moderation per polled completion
  std::int64_t last_progress = now_ns();
  std::uint32_t spins = 0;
  try {
    while (total_retired < total) {
      for (auto& lane : lanes) {
        while (lane.posted < iterations && lane.posted - lane.retired < depth) {
          // Every moderation-th request, counted down (no division per post), and the last.
          const bool every = --lane.until_signal == 0;
          if (every) lane.until_signal = moderation;
          const bool signal = every || lane.posted == iterations - 1;
          posted[total_posted++] = now_ns();
          lane.in_flight.put(lane.posted, post<V>(lane, signal ? signaled : unsignaled));
          if (signal) lane.signaled.push_back(lane.posted);
          ++lane.posted;
        }
      }
      for (auto& lane : lanes) {
        if (lane.signaled.empty()) continue;
        const auto now = retire(lane, total_retired);
        if (!now) continue;
        completed += moderation;
        marks.push_back({completed >= total - 1 ? total - 1 : completed - 1, *now});
        last_progress = *now;
      }
      watch_progress(session, spins, last_progress, total_retired, total, size, heartbeat);
    }
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
  return send_result(session, size, total, posted, marks);
}

/// -l: one queue pair's post list, built once per size and posted as it is every time (perftest
/// reposts its list unchanged too): post_list requests linked in one ibv_post_send, every
/// moderation-th signaled, so each list ends with a signaled one. The Channel posts one request
/// per call, so this goes a layer down, to the Channel's queue pair (QueuePair::post_send of a
/// span: checked, linked in place, one doorbell) and its completion queue, polled here. The
/// Channel is not used meanwhile, so it never sees these completions; when the loop ends every
/// request has completed and every completion has been polled, and the Channel is as before.
struct ListLane {
  const ibv::QueuePair* qp = nullptr;
  const ibv::CompletionQueue* cq = nullptr;
  std::vector<ibv::SendRequest> list;
  std::uint64_t posted = 0;     // perftest's scnt
  std::uint64_t completed = 0;  // perftest's ccnt: moderation per polled completion
};

/// Request `index` of a lane's list (wr_id: its index, which nothing reads back).
template <Verb V>
ibv::SendRequest list_request(const Lane& lane, std::uint64_t index) {
  if constexpr (V == Verb::send) {
    return ibv::SendRequest::send(index, lane.gather);
  } else if constexpr (V == Verb::write) {
    return ibv::SendRequest::write(index, lane.gather, lane.remote);
  } else {
    return ibv::SendRequest::read(index, lane.scatter, lane.remote);
  }
}

template <Verb V>
BwResult client_list_loop(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  const std::uint64_t iterations = options.iterations;  // a multiple of the list (options)
  const std::uint64_t depth = options.tx_depth;
  const std::uint64_t list_size = options.post_list;
  const std::uint64_t moderation = options.cq_moderation(size);  // divides the list (options)
  // The requests refer to the lanes' elements: the lanes stay where they are from here on.
  const std::vector<Lane> lanes = make_lanes(session, size);
  std::vector<ListLane> lists(lanes.size());
  for (std::size_t q = 0; q < lanes.size(); ++q) {
    auto& lane = lists[q];
    lane.qp = &lanes[q].channel->queue_pair();
    lane.cq = &lane.qp->send_cq();
    lane.list.reserve(list_size);
    for (std::uint64_t j = 0; j < list_size; ++j) {
      auto& request = lane.list.emplace_back(list_request<V>(lanes[q], j));
      if ((j + 1) % moderation != 0) request.unsignaled();
      if (options.sends_inline(size)) request.inline_data();
    }
  }
  const std::size_t total = iterations * lanes.size();
  std::vector<std::int64_t> posted(total);
  std::vector<CompletionMark> marks;
  marks.reserve(total / moderation);
  std::array<ibv::WorkCompletion, 16> polled{};

  session.sync();
  Heartbeat heartbeat(session.connection);
  std::size_t total_posted = 0;
  std::uint64_t total_completed = 0;  // perftest's totccnt
  std::int64_t last_progress = now_ns();
  std::uint32_t spins = 0;
  try {
    while (total_completed < total) {
      for (auto& lane : lists) {
        while (lane.posted < iterations && lane.posted + list_size <= depth + lane.completed) {
          // Every request of the list was posted at this time.
          std::fill_n(posted.begin() + static_cast<std::ptrdiff_t>(total_posted), list_size,
                      now_ns());
          lane.qp->post_send(lane.list);
          lane.posted += list_size;
          total_posted += list_size;
        }
      }
      for (auto& lane : lists) {
        if (lane.completed == lane.posted) continue;
        const auto done = lane.cq->poll(polled);
        if (done.empty()) continue;
        const std::int64_t now = now_ns();
        for (const auto& completion : done) {
          if (!completion.ok()) throw ibv::WorkError(completion, "bandwidth test");
          lane.completed += moderation;
          total_completed += moderation;
          marks.push_back({total_completed - 1, now});
        }
        last_progress = now;
      }
      watch_progress(session, spins, last_progress, total_completed, total, size, heartbeat);
    }
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
  return send_result(session, size, total, posted, marks);
}

/// The server of a send test: keeps rx-depth receives posted per queue pair, reposts while
/// more messages are due, and measures from the start signal to the last receive (perftest's
/// server does not compute a peak).
BwResult send_server_loop(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  const std::uint64_t iterations = options.iterations;
  const std::uint64_t depth = options.rx_depth();
  struct Receiver {
    explicit Receiver(std::size_t capacity) : posted(capacity) {}
    ibv::Channel* channel = nullptr;
    std::array<ibv::ScatterElement, 1> into{};
    WorkRing posted;  // by receive number
    std::uint64_t posted_count = 0;
    std::uint64_t received = 0;
  };
  std::vector<Receiver> receivers;
  receivers.reserve(session.qps.size());
  const std::uint64_t total = iterations * session.qps.size();
  std::uint64_t total_received = 0;
  try {
    for (auto& slot : session.qps) {
      auto& r = receivers.emplace_back(depth);
      r.channel = &*slot.channel;
      r.into[0] = slot.mr->scatter(slot.inbox(size));
      for (; r.posted_count < depth; ++r.posted_count) {
        r.posted.put(r.posted_count, r.channel->post_receive(r.into));
      }
    }
    session.sync();
    const std::int64_t start = now_ns();
    StallWatch watch(session.timeout_ns(), 0x3ffU);
    while (total_received < total) {
      for (auto& r : receivers) {
        if (r.received == r.posted_count) continue;
        const auto done = r.posted.at(r.received).poll();
        if (!done) continue;
        if (!done->ok()) throw ibv::WorkError(*done, "send bandwidth test (receive)");
        r.posted.drop(r.received);
        ++r.received;
        ++total_received;
        if (r.posted_count < iterations) {
          r.posted.put(r.posted_count++, r.channel->post_receive(r.into));
        }
        watch.progress();
      }
      if (watch.stalled()) {
        throw ToolError(ExitCode::run_failed,
                        "no message for " + std::to_string(options.timeout.count()) + " s after " +
                            std::to_string(total_received) + " of " + std::to_string(total) +
                            " (is the client alive?)");
      }
    }
    const BwResult own{size, total, average_bandwidth(start, now_ns(), size, total), std::nullopt};
    // The client's figures arrive too; perftest's send server prints its own.
    (void)decode_bw_result(
        session.connection.expect(MessageType::result, options.timeout, "the client's result")
            .text());
    return own;
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
}

/// -c UD: one slot's sending side in the client loop. It posts either one request at a time
/// (signaled every moderation-th and the last: two requests built once, one of each kind) or
/// its list of post_list requests with one doorbell; each signaled completion retires every
/// request up to it. Requests are built once per size (perftest reposts its own unchanged
/// too), each holding the route to the peer. They refer to `gather`: a sender stays where it is.
class DatagramSender {
 public:
  DatagramSender(QueuePairSlot& slot, const PerfOptions& options, std::uint64_t size)
      : qp_(&slot.datagrams->qp),
        cq_(&slot.datagrams->send_cq),
        gather_{slot.mr->gather(slot.outbox(size))},
        iterations_(options.iterations),
        depth_(options.tx_depth),
        moderation_(options.cq_moderation(size)),
        list_size_(options.post_list),
        until_signal_(moderation_) {
    const auto made = [&](bool signal) {
      ibv::UdSendRequest request = datagram_to_peer(slot, gather_);
      if (!signal) request.unsignaled();
      if (options.sends_inline(size)) request.inline_data();
      return request;
    };
    if (list_size_ == 1) {
      signaled_one_.push_back(made(true));
      unsignaled_one_.push_back(made(false));
    } else {
      for (std::uint64_t j = 0; j < list_size_; ++j) {
        list_.push_back(made((j + 1) % moderation_ == 0));
      }
    }
  }
  DatagramSender(const DatagramSender&) = delete;
  DatagramSender& operator=(const DatagramSender&) = delete;
  DatagramSender(DatagramSender&&) = delete;
  DatagramSender& operator=(DatagramSender&&) = delete;
  ~DatagramSender() = default;

  /// Posts while the TX depth has room, each request's post time into `posted` from `next`.
  void post(std::vector<std::int64_t>& posted, std::size_t& next) {
    while (posted_ < iterations_ && posted_ + list_size_ <= retired_ + depth_) {
      const std::int64_t now = now_ns();
      if (list_size_ == 1) {
        const bool every = --until_signal_ == 0;
        if (every) until_signal_ = moderation_;
        const bool signal = every || posted_ == iterations_ - 1;
        posted[next++] = now;
        qp_->post_send(signal ? signaled_one_ : unsignaled_one_);
        if (signal) signaled_.push_back(posted_);
      } else {
        std::fill_n(posted.begin() + static_cast<std::ptrdiff_t>(next), list_size_, now);
        next += list_size_;
        qp_->post_send(list_);
        for (std::uint64_t j = moderation_ - 1; j < list_size_; j += moderation_) {
          signaled_.push_back(posted_ + j);
        }
      }
      posted_ += list_size_;
    }
  }

  /// Polls the send completions; each retires the requests up to its signaled one and adds a
  /// mark. Returns the time they were seen, or 0 when none were.
  std::int64_t retire(std::uint64_t& total_retired, std::vector<CompletionMark>& marks) {
    if (signaled_.empty()) return 0;
    const auto done = cq_->poll(polled_);
    if (done.empty()) return 0;
    const std::int64_t now = now_ns();
    for (const auto& completion : done) {
      if (!completion.ok()) throw ibv::WorkError(completion, "UD bandwidth test");
      const std::uint64_t last = signaled_.front();
      signaled_.pop_front();
      total_retired += last + 1 - retired_;
      retired_ = last + 1;
      marks.push_back({total_retired - 1, now});
    }
    return now;
  }

 private:
  const ibv::UdQueuePair* qp_;
  const ibv::CompletionQueue* cq_;
  std::array<ibv::GatherElement, 1> gather_;
  std::uint64_t iterations_;
  std::uint64_t depth_;
  std::uint64_t moderation_;
  std::uint64_t list_size_;
  std::uint64_t until_signal_;
  std::vector<ibv::UdSendRequest> signaled_one_;    // post_list 1: the signaled request
  std::vector<ibv::UdSendRequest> unsignaled_one_;  // post_list 1: the unsignaled request
  std::vector<ibv::UdSendRequest> list_;            // post_list > 1
  std::deque<std::uint64_t> signaled_;              // request numbers of signaled ones
  std::array<ibv::WorkCompletion, 16> polled_{};
  std::uint64_t posted_ = 0;
  std::uint64_t retired_ = 0;
};

/// -c UD, the client: as client_loop and client_list_loop, on the slots' UD queue pairs (one
/// DatagramSender each).
BwResult datagram_client_loop(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  std::deque<DatagramSender> senders;  // never moved: their requests refer to them
  for (auto& slot : session.qps) senders.emplace_back(slot, options, size);
  const std::size_t total = std::size_t{options.iterations} * senders.size();
  std::vector<std::int64_t> posted(total);
  std::vector<CompletionMark> marks;
  marks.reserve(total / options.cq_moderation(size) + senders.size() + 1);

  session.sync();
  Heartbeat heartbeat(session.connection);
  std::size_t total_posted = 0;
  std::uint64_t total_retired = 0;
  std::int64_t last_progress = now_ns();
  std::uint32_t spins = 0;
  try {
    while (total_retired < total) {
      for (auto& sender : senders) sender.post(posted, total_posted);
      for (auto& sender : senders) {
        if (const std::int64_t seen = sender.retire(total_retired, marks); seen != 0) {
          last_progress = seen;
        }
      }
      watch_progress(session, spins, last_progress, total_retired, total, size, heartbeat);
    }
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
  return send_result(session, size, total, posted, marks);
}

/// The client's result if it has arrived, without waiting (a heartbeat gives nullopt); any
/// other message is a failed run.
std::optional<BwResult> try_client_result(Session& session) {
  auto message = session.connection.try_receive();
  if (!message) return std::nullopt;
  if (message->type != MessageType::result) {
    throw ToolError(ExitCode::run_failed, "the client sent message '" +
                                              std::string(1, static_cast<char>(message->type)) +
                                              "' during the test (does it run the same ibvcpp "
                                              "version?)");
  }
  return decode_bw_result(message->text());
}

/// How long the server of a UD test waits for stragglers once the client's result is in: a
/// datagram still on its way arrives within this, one that does not is lost.
constexpr std::int64_t kDatagramGraceNs = 200'000'000;

/// -c UD, the server: as send_server_loop, but a datagram may be lost (rxe drops one that finds
/// no receive, silently). Receives for every message are posted up front (rx depth: the
/// iterations, at most 16000; reposted as they complete beyond that), and the loop ends when all
/// arrived, or when the client's result (how many it sent) is in and nothing more arrived for
/// kDatagramGraceNs. Its figures are its own: what arrived, from the start to the last arrival,
/// and how many were lost.
BwResult datagram_server_loop(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  const std::uint64_t iterations = options.iterations;
  struct DatagramReceiver {
    QueuePairSlot* slot = nullptr;
    std::uint64_t posted = 0;
    std::uint64_t received = 0;
  };
  std::vector<DatagramReceiver> receivers;
  receivers.reserve(session.qps.size());
  const std::uint64_t total = iterations * session.qps.size();
  std::uint64_t total_received = 0;
  std::array<ibv::WorkCompletion, 16> polled{};
  // Takes in what arrived on every queue pair, reposting while more are due; true if any did.
  const auto take_arrivals = [&] {
    bool arrived = false;
    for (auto& r : receivers) {
      if (r.received == r.posted) continue;
      for (const auto& completion : r.slot->datagrams->recv_cq.poll(polled)) {
        if (!completion.ok()) throw ibv::WorkError(completion, "UD bandwidth test (receive)");
        ++r.received;
        ++total_received;
        if (r.posted < iterations) {
          post_datagram_receive(*r.slot, size);
          ++r.posted;
        }
        arrived = true;
      }
    }
    return arrived;
  };
  try {
    for (auto& slot : session.qps) {
      auto& r = receivers.emplace_back(DatagramReceiver{&slot});
      for (; r.posted < options.rx_depth(); ++r.posted) post_datagram_receive(slot, size);
    }
    session.sync();
    const std::int64_t start = now_ns();
    std::int64_t last_arrival = start;
    std::optional<BwResult> client;             // its result: how many it sent
    std::int64_t client_done = 0;               // when its result came
    StallWatch watch(session.timeout_ns(), 0);  // looked at once in 1024 idle turns (spins)
    std::uint32_t spins = 0;
    while (total_received < total) {
      if (take_arrivals()) {
        last_arrival = now_ns();
        watch.progress();
        continue;
      }
      if ((++spins & 0x3ffU) != 0) continue;
      if (client) {
        if (now_ns() - std::max(client_done, last_arrival) > kDatagramGraceNs) break;  // lost
        continue;
      }
      client = try_client_result(session);
      if (client) {
        client_done = now_ns();
      } else if (watch.stalled()) {
        throw ToolError(ExitCode::run_failed,
                        "no datagram for " + std::to_string(options.timeout.count()) + " s after " +
                            std::to_string(total_received) + " of " + std::to_string(total) +
                            ", and no word from the client");
      }
    }
    BwResult own{size, total_received, average_bandwidth(start, last_arrival, size, total_received),
                 std::nullopt};
    if (!client) {
      client = decode_bw_result(
          session.connection.expect(MessageType::result, options.timeout, "the client's result")
              .text());
    }
    own.lost = client->iterations > total_received ? client->iterations - total_received : 0;
    if (*own.lost > 0) {
      std::fprintf(stderr, "ibvcpp: %llu of %llu datagrams of %llu bytes lost\n",
                   static_cast<unsigned long long>(*own.lost),
                   static_cast<unsigned long long>(client->iterations),
                   static_cast<unsigned long long>(size));
    }
    return own;
  } catch (const std::exception& error) {
    abort_run(error.what());
  }
}

}  // namespace

BwResult run_bw(Session& session, std::uint64_t size) {
  const auto& options = session.options;
  if (options.connection == Transport::ud) {
    return options.is_client() ? datagram_client_loop(session, size)
                               : datagram_server_loop(session, size);
  }
  if (options.is_client() && options.post_list > 1) {
    switch (options.test.verb) {
      case Verb::send: return client_list_loop<Verb::send>(session, size);
      case Verb::write: return client_list_loop<Verb::write>(session, size);
      case Verb::read: return client_list_loop<Verb::read>(session, size);
    }
  }
  if (options.is_client()) {
    switch (options.test.verb) {
      case Verb::send: return client_loop<Verb::send>(session, size);
      case Verb::write: return client_loop<Verb::write>(session, size);
      case Verb::read: return client_loop<Verb::read>(session, size);
    }
  }
  if (options.test.verb == Verb::send) return send_server_loop(session, size);
  // Write and read: the server's side is passive (the device answers); wait for the figures.
  session.sync();
  return decode_bw_result(
      session.connection.expect(MessageType::result, options.timeout, "the client's result")
          .text());
}

}  // namespace ibvcpp::engine
