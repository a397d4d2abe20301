// SPDX-License-Identifier: MIT
// bench/hot_path/channel_loop.cpp: the hot path of raw_loop.c (one small request of each
// operation, posted and waited for: an RDMA write, a send with its receive, an RDMA read, a
// fetch-and-add, a compare-and-swap) through the library, in each of its styles, with the
// default settings. bench/hot_path/run counts its instructions with callgrind in the measured_*
// functions only, and compares them with hot_path_raw's.
//
// Usage: hot_path_channel REQUESTS OP-STYLE [OP-STYLE...]
//   OP: write, send, read, fetch_add, compare_swap; STYLE: below. Each variant named is
//   warmed up (200 requests, not counted) and measured (REQUESTS requests: in a batch of 16,
//   REQUESTS / 16 batches rounded up) in turn, in one process: callgrind writes one part per
//   variant, in the order given (bench/hot_path/lib.sh names them). Prints a line per variant:
//   op, style, requests measured, requests per iteration, whether its sends and writes went
//   inline, the post interface its queue pairs used.
//   device: $IBV_TEST_DEVICE, else the first active device; GID index: $IBV_TEST_GID_INDEX,
//   else the library's default (the RoCE v2 IPv4 entry); post interface: $HOT_PATH_POST
//   (extended or classic), else the library's default, classic (QueuePairSettings).
//
// Every style uses the generic calls (ibv/channel/operation.hpp's values, given to execute,
// post or async); `op` below is the operation (op::Write{from, remote}, ...), made once before
// the loop. A send is a receive posted first and the send, both waited for. Per iteration:
//   verbs           not the Channel but the verbs layer under it, on a loopback queue pair of
//                   its own with the same settings: QueuePair::post_send of the request made
//                   with the verbs layer's constructor (SendRequest::write(wr_id, ...), ...)
//                   (and post_receive), then CompletionQueue::poll until the completions
//                   arrive (into a buffer kept across requests); inline when the queue pair grants
//                   8 bytes of inline data, as the Channel's default InlinePolicy::automatic does
//   blocking        channel.execute(op)
//   unpolled_wait   channel.post(op).wait()
//   unpolled_poll   w = channel.post(op); while (!w.poll()) {}
//   scoped          channel.scope([&](ibv::ChannelScope& s) { s.post(op); })
//   batch16         channel.scope([&](ibv::ChannelScope& s) { s.post_all(16 copies of op); }):
//                   16 requests per iteration in one list, one doorbell, as raw_loop.c's
//                   batch (figures per request; a send's 16 receives are one list too)
//   multi_blocking  multi.execute(1, op) from rank 0 of a 2-rank MultiChannel world built in
//                   (op in its peer form, op::PeerWrite..., its region tagged with peer 1)
//                   this process on the same device (rank 1 posts the send's receive:
//                   multi1.post(0, op::Receive{into}))
//   coroutine       one ibv::Task that co_awaits ibv::async(channel, op) REQUESTS times, spawned
//                   on an ibv::EventLoop and run to its end: the whole run is measured (the
//                   loop, the task's frame and its start included)
// The loopback Channel's and the world's queue pairs all write, read and update one registered
// buffer: 8 bytes from its start into its second half (write, send), from its start into its
// second half (read), and an 8-byte word at 3072 with the result at 1024 (atomics).
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

constexpr std::size_t kBufferSize = 4096;
constexpr std::size_t kMessageSize = 8;
constexpr std::size_t kHalf = kBufferSize / 2;
constexpr std::size_t kResult = 1024;  // the atomics' old value lands here
constexpr std::size_t kWord = 3072;    // the atomics' target word
constexpr std::size_t kBatch = 16;
constexpr long kWarmUp = 200;
constexpr std::uint64_t kMaxSpins = 2'000'000'000;

enum class Op : std::uint8_t { write, send, read, fetch_add, compare_swap };
enum class Style : std::uint8_t {
  verbs,
  blocking,
  unpolled_wait,
  unpolled_poll,
  scoped,
  batch16,
  multi_blocking,
  coroutine
};

struct Loop {
  ibv::Channel& channel;
  ibv::MultiChannel& multi;  // rank 0 of the world: posts to peer 1
  ibv::MultiChannel& peer;   // rank 1: posts the receives of rank 0's sends
  const ibv::QueuePair& qp;  // the verbs style's own queue pair and completion queue
  const ibv::CompletionQueue& cq;
  std::uint64_t& next_wr_id;
  // The verbs style's poll buffer, kept across requests as the Channel keeps its own (and as
  // raw_loop.c's uninitialised ibv_wc array costs nothing to declare).
  std::span<ibv::WorkCompletion> completions;
  // The verbs style posts inline, as the Channel's automatic policy does.
  bool verbs_inline = false;
  ibv::op::Write write;
  ibv::op::Send send;
  ibv::op::Receive receive;
  ibv::op::Read read;
  ibv::op::FetchAdd fetch_add;
  ibv::op::CompareSwap compare_swap;
  // The MultiChannel's forms, their regions tagged with peer 1.
  ibv::op::PeerWrite peer_write;
  ibv::op::PeerRead peer_read;
  ibv::op::PeerFetchAdd peer_fetch_add;
  ibv::op::PeerCompareSwap peer_compare_swap;
};

template <Op op>
const auto& operation(const Loop& loop) {
  if constexpr (op == Op::write) {
    return loop.write;
  } else if constexpr (op == Op::send) {
    return loop.send;
  } else if constexpr (op == Op::read) {
    return loop.read;
  } else if constexpr (op == Op::fetch_add) {
    return loop.fetch_add;
  } else {
    return loop.compare_swap;
  }
}

// operation<op>() as a MultiChannel takes it (the peer forms; a send is the same).
template <Op op>
const auto& peer_operation(const Loop& loop) {
  if constexpr (op == Op::write) {
    return loop.peer_write;
  } else if constexpr (op == Op::send) {
    return loop.send;
  } else if constexpr (op == Op::read) {
    return loop.peer_read;
  } else if constexpr (op == Op::fetch_add) {
    return loop.peer_fetch_add;
  } else {
    return loop.peer_compare_swap;
  }
}

// The verbs style's wait: poll until `expected` completions have arrived, all successful.
// Inlined into the loop, as raw_loop.c's wait_for is.
[[gnu::always_inline]] inline void poll_for(const ibv::CompletionQueue& cq,
                                            std::span<ibv::WorkCompletion> completions,
                                            std::size_t expected) {
  std::uint64_t spins = 0;
  while (expected > 0) {
    const auto done = cq.poll(completions.first(expected));
    for (const auto& completion : done) {
      if (!completion.ok()) throw ibv::WorkError(completion);
    }
    expected -= done.size();
    if (done.empty() && ++spins > kMaxSpins) throw std::runtime_error("a request did not complete");
  }
}

// Polls `work` until its completion arrives, as a user's loop would: one poll() per turn, the
// completion taken from the poll that brought it.
void spin_until_complete(ibv::PendingWork& work) {
  std::uint64_t spins = 0;
  std::optional<ibv::WorkCompletion> completion;
  while (!(completion = work.poll())) {
    if (++spins > kMaxSpins) throw std::runtime_error("a request did not complete");
  }
  if (!completion->ok()) throw ibv::WorkError(*completion);
}

void check(const ibv::WorkCompletion& completion) {
  if (!completion.ok()) throw ibv::WorkError(completion);
}

// The verbs style's request, made with the verbs layer's own constructors (SendRequest::write,
// ::send), as a user of that layer writes it: the Channel's operation types (op::Write) are the
// layer above, and their optional immediate is a branch that raw_loop.c does not take.
template <Op op>
[[gnu::always_inline]] inline ibv::SendRequest verbs_request(const Loop& loop,
                                                             std::uint64_t wr_id) {
  if constexpr (op == Op::write) {
    return ibv::SendRequest::write(wr_id, loop.write.data.span(), loop.write.destination);
  } else if constexpr (op == Op::send) {
    return ibv::SendRequest::send(wr_id, loop.send.data.span());
  } else {
    return operation<op>(loop).request(wr_id);
  }
}

// Inlined into the loop, as raw_loop.c's once is.
template <Op op>
[[gnu::always_inline]] inline void verbs_once(const Loop& loop) {
  if constexpr (op == Op::send) {
    ibv::ReceiveRequest receive = loop.receive.request(loop.next_wr_id++);
    loop.qp.post_receive(receive);
  }
  ibv::SendRequest request = verbs_request<op>(loop, loop.next_wr_id++);
  if constexpr (op == Op::write || op == Op::send) {
    if (loop.verbs_inline) request.inline_data();
  }
  loop.qp.post_send(request);
  poll_for(loop.cq, loop.completions, op == Op::send ? 2 : 1);
}

// N copies of `value` in an array.
template <std::size_t N, typename T>
std::array<T, N> copies(const T& value) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<T, N>{((void)I, value)...};
  }
  (std::make_index_sequence<N>());
}

// One request in the blocking or an unpolled style, waited for.
template <Style style, typename Operation>
void single(ibv::Channel& channel, const Operation& request) {
  if constexpr (style == Style::blocking) {
    check(channel.execute(request));
  } else if constexpr (style == Style::unpolled_wait) {
    check(channel.post(request).wait());
  } else {
    ibv::PendingWork work = channel.post(request);
    spin_until_complete(work);
  }
}

// One iteration of a style that is not a coroutine.
template <Op op, Style style>
void once(const Loop& loop) {
  ibv::Channel& channel = loop.channel;
  const auto& request = operation<op>(loop);
  if constexpr (style == Style::verbs) {
    verbs_once<op>(loop);
  } else if constexpr (style == Style::scoped) {
    channel.scope([&](ibv::ChannelScope& scope) {
      if constexpr (op == Op::send) scope.post(loop.receive);
      scope.post(request);
    });
  } else if constexpr (style == Style::batch16) {
    // The same operation 16 times, as raw_loop.c's batch: one list, one doorbell.
    const auto requests = copies<kBatch>(request);
    channel.scope([&](ibv::ChannelScope& scope) {
      if constexpr (op == Op::send) scope.post_all(copies<kBatch>(loop.receive));
      scope.post_all(requests);
    });
  } else if constexpr (style == Style::multi_blocking) {
    const auto& peer_request = peer_operation<op>(loop);
    if constexpr (op == Op::send) {
      ibv::PendingWork receive = loop.peer.post(0, loop.receive);
      check(loop.multi.execute(1, peer_request));
      check(receive.wait());
    } else {
      check(loop.multi.execute(1, peer_request));
    }
  } else if constexpr (op == Op::send) {
    // The receive first, as raw_loop.c posts it, then the send in the style, then the receive.
    ibv::PendingWork receive = channel.post(loop.receive);
    single<style>(channel, request);
    if constexpr (style == Style::unpolled_poll) {
      spin_until_complete(receive);
    } else {
      check(receive.wait());
    }
  } else {
    single<style>(channel, request);
  }
}

// The coroutine style: one task awaiting `iterations` requests in turn.
template <Op op>
ibv::Task<> awaiting(const Loop& loop, long iterations) {
  for (long i = 0; i < iterations; ++i) {
    if constexpr (op == Op::send) {
      ibv::AsyncWork receive = ibv::async(loop.channel, loop.receive);
      check(co_await ibv::async(loop.channel, loop.send));
      check(co_await receive);
    } else {
      check(co_await ibv::async(loop.channel, operation<op>(loop)));
    }
  }
}

template <Op op, Style style>
void repeat(const Loop& loop, long iterations) {
  if constexpr (style == Style::coroutine) {
    ibv::EventLoop events;
    events.spawn(awaiting<op>(loop, iterations));
    if (!events.run()) throw std::runtime_error("the coroutine did not finish");
  } else {
    for (long i = 0; i < iterations; ++i) once<op, style>(loop);
  }
}

// The measured loops, one function per variant so that callgrind's dump-before finds each.
// bench/hot_path/lib.sh has callgrind start a fresh count on entering measured_* and write it
// out on entering end_of_measurement, so that set-up, the warm-up (the same code, run through
// warm_up()) and what follows are not counted.
template <Op op, Style style>
[[gnu::noinline]] void measured_(const Loop& loop, long n) {
  repeat<op, style>(loop, n);
}

volatile int measurement_ended = 0;
[[gnu::noinline]] void end_of_measurement() { measurement_ended = 1; }

template <Op op, Style style>
[[gnu::noinline]] void warm_up(const Loop& loop, long n) {
  repeat<op, style>(loop, n);
}

using LoopFunction = void (*)(const Loop&, long);

struct Variant {
  std::string_view op;
  std::string_view style;
  LoopFunction measured;
  LoopFunction warm_up;
  std::size_t requests_per_iteration;
};

constexpr std::array<std::string_view, 5> kOpNames{"write", "send", "read", "fetch_add",
                                                   "compare_swap"};
constexpr std::array<std::string_view, 8> kStyleNames{"verbs",          "blocking", "unpolled_wait",
                                                      "unpolled_poll",  "scoped",   "batch16",
                                                      "multi_blocking", "coroutine"};

template <Op op, Style style>
constexpr Variant variant() {
  return Variant{kOpNames.at(static_cast<std::size_t>(op)),
                 kStyleNames.at(static_cast<std::size_t>(style)), measured_<op, style>,
                 warm_up<op, style>, style == Style::batch16 ? kBatch : 1};
}

template <Op op>
constexpr std::array<Variant, 8> variants_of() {
  return {variant<op, Style::verbs>(),          variant<op, Style::blocking>(),
          variant<op, Style::unpolled_wait>(),  variant<op, Style::unpolled_poll>(),
          variant<op, Style::scoped>(),         variant<op, Style::batch16>(),
          variant<op, Style::multi_blocking>(), variant<op, Style::coroutine>()};
}

constexpr auto kVariants = [] {
  std::array<Variant, 40> all{};
  std::size_t next = 0;
  for (const auto& of : {variants_of<Op::write>(), variants_of<Op::send>(), variants_of<Op::read>(),
                         variants_of<Op::fetch_add>(), variants_of<Op::compare_swap>()}) {
    for (const Variant& v : of) all.at(next++) = v;
  }
  return all;
}();

const char* environment(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): single-threaded
  return value != nullptr && *value != '\0' ? value : nullptr;
}

const Variant* find_variant(std::string_view name) {
  const auto* found = std::ranges::find_if(kVariants, [&](const Variant& v) {
    return name.size() == v.op.size() + 1 + v.style.size() && name.starts_with(v.op) &&
           name[v.op.size()] == '-' && name.ends_with(v.style);
  });
  return found != kVariants.end() ? found : nullptr;
}

// Two ranks of a MultiChannel world on one device, connected to each other in this process.
std::vector<ibv::MultiChannel> connect_world(const ibv::ProtectionDomain& pd,
                                             const ibv::QueuePairSettings& settings) {
  constexpr std::uint32_t kWorld = 2;
  std::vector<ibv::PreparedMultiChannel> prepared;
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    ibv::MultiChannelBuilder builder(pd, rank, kWorld);
    builder.queue_pair(settings);
    prepared.push_back(builder.build());
  }
  std::vector<std::vector<std::optional<ibv::Endpoint>>> remote(
      kWorld, std::vector<std::optional<ibv::Endpoint>>(kWorld));
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    remote.at(rank).at(1 - rank) = prepared.at(1 - rank).endpoint_for(rank);
  }
  std::vector<ibv::MultiChannel> world;
  for (std::uint32_t rank = 0; rank < kWorld; ++rank) {
    world.push_back(std::move(prepared.at(rank)).handshake(remote.at(rank)));
  }
  return world;
}

int usage() {
  std::fprintf(stderr, "usage: hot_path_channel REQUESTS OP-STYLE [OP-STYLE...]\n  OP:");
  for (const auto op : kOpNames)
    std::fprintf(stderr, " %.*s", static_cast<int>(op.size()), op.data());
  std::fprintf(stderr, "\n  STYLE:");
  for (const auto style : kStyleNames) {
    std::fprintf(stderr, " %.*s", static_cast<int>(style.size()), style.data());
  }
  std::fprintf(stderr, "\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.size() < 2) return usage();
  const long requests = std::strtol(argv[1], nullptr, 10);
  std::vector<const Variant*> chosen;
  for (std::size_t i = 1; i < args.size(); ++i) {
    chosen.push_back(find_variant(args[i]));
    if (chosen.back() == nullptr) {
      std::fprintf(stderr, "hot_path_channel: no variant %s\n", argv[i + 1]);
      return usage();
    }
  }
  if (requests <= 0) return usage();

  const char* device = environment("IBV_TEST_DEVICE");
  const ibv::Context context =
      device != nullptr ? ibv::open_device(device) : ibv::open_first_active_device();
  const ibv::ProtectionDomain pd(context);
  ibv::QueuePairSettings settings;
  if (const char* gid = environment("IBV_TEST_GID_INDEX")) {
    settings.gid_index = static_cast<std::uint32_t>(std::strtoul(gid, nullptr, 10));
  }
  // The post interface: $HOT_PATH_POST (extended or classic), else the library's default
  // (classic).
  if (const char* post = environment("HOT_PATH_POST")) {
    const std::string_view name(post);
    if (name != "extended" && name != "classic") {
      std::fprintf(stderr, "hot_path_channel: HOT_PATH_POST is extended or classic\n");
      return 2;
    }
    settings.post_interface =
        name == "extended" ? ibv::PostInterface::extended : ibv::PostInterface::classic;
  }
  ibv::PreparedChannel prepared = ibv::ChannelBuilder(pd).queue_pair(settings).build();
  const ibv::Endpoint self = prepared.endpoint();
  ibv::Channel channel = std::move(prepared).handshake(self);
  std::vector<ibv::MultiChannel> world = connect_world(pd, settings);
  // The verbs style's queue pair: the same settings, its own completion queue of the same size.
  const int entries = static_cast<int>(settings.max_send_wr.value() + settings.max_recv_wr.value());
  const ibv::CompletionQueue cq(context, entries);
  ibv::PreparedQueuePair prepared_qp = ibv::QueuePairBuilder(pd, cq, cq).settings(settings).build();
  const ibv::Endpoint qp_self = prepared_qp.endpoint();
  const ibv::QueuePair qp = std::move(prepared_qp).handshake(qp_self);
  std::uint64_t next_wr_id = 1;
  std::array<ibv::WorkCompletion, 2> completions{};

  std::vector<std::byte> buffer(kBufferSize);
  const ibv::MemoryRegion mr = pd.register_remote_accessible(buffer, ibv::RemoteAccess::all());
  const std::span<std::byte> bytes(buffer);
  std::fill_n(buffer.begin(), kMessageSize, std::byte{0x5a});
  const std::array from{mr.gather(bytes.first(kMessageSize))};
  const std::array into{mr.scatter(bytes.subspan(kHalf, kMessageSize))};
  const ibv::RemoteMemoryRegion head = mr.remote().sub_region(0, kMessageSize);
  const ibv::RemoteMemoryRegion half = mr.remote().sub_region(kHalf, kMessageSize);
  const ibv::RemoteMemoryRegion word = mr.remote().sub_region(kWord, sizeof(std::uint64_t));
  const ibv::ScatterElement result = mr.scatter(bytes.subspan(kResult, sizeof(std::uint64_t)));
  const Loop loop{
      .channel = channel,
      .multi = world.at(0),
      .peer = world.at(1),
      .qp = qp,
      .cq = cq,
      .next_wr_id = next_wr_id,
      .completions = completions,
      .verbs_inline = qp.max_inline_data() >= kMessageSize,
      .write = {.data = from, .destination = half},
      .send = {.data = from},
      .receive = {.into = into},
      .read = {.into = into, .source = head},
      .fetch_add = {.result = result, .target = word, .add = 1},
      .compare_swap = {.result = result, .target = word, .expected = 0, .desired = 0},
      .peer_write = {.data = from, .destination = {1, half}},
      .peer_read = {.into = into, .source = {1, head}},
      .peer_fetch_add = {.result = result, .target = {1, word}, .add = 1},
      .peer_compare_swap = {.result = result, .target = {1, word}, .expected = 0, .desired = 0}};

  // What every queue pair of the run posts with (the same settings).
  const ibv::PostInterface post_interface = channel.queue_pair().settings().post_interface;
  for (const Variant* variant : chosen) {
    const std::uint64_t inline_before =
        channel.inline_posts() + world.at(0).channel(1).inline_posts();
    // Whole iterations: a batch of 16 runs ceil(requests / 16) of them.
    const auto per = static_cast<long>(variant->requests_per_iteration);
    const long iterations = (requests + per - 1) / per;
    variant->warm_up(loop, (kWarmUp + per - 1) / per);
    variant->measured(loop, iterations);
    end_of_measurement();
    const bool posts_data = variant->op == "write" || variant->op == "send";
    const bool inline_posts =
        posts_data &&
        (variant->style == "verbs"
             ? loop.verbs_inline
             : channel.inline_posts() + world.at(0).channel(1).inline_posts() > inline_before);
    std::printf("channel %.*s %.*s requests %ld requests_per_iteration %zu inline %s post %s\n",
                static_cast<int>(variant->op.size()), variant->op.data(),
                static_cast<int>(variant->style.size()), variant->style.data(), iterations * per,
                variant->requests_per_iteration, posts_data ? (inline_posts ? "yes" : "no") : "-",
                post_interface == ibv::PostInterface::extended ? "extended" : "classic");
  }

  if (!std::ranges::equal(bytes.first(kMessageSize), bytes.subspan(kHalf, kMessageSize))) {
    std::fprintf(stderr, "hot_path_channel: the data did not arrive\n");
    return 1;
  }
  // Leave without destructors (nothing after the measurement matters).
  static_cast<void>(std::fflush(stdout));
  std::_Exit(0);
} catch (const std::exception& error) {
  std::fprintf(stderr, "hot_path_channel: %s\n", error.what());
  return 1;
}
