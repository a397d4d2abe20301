// bench/hot_path/channel_loop.cpp: the hot path of raw_loop.c (a small RDMA write, and a send
// with its receive, each posted and waited for) through the library's Channel, in each of its
// styles, on a loopback channel with the default settings. bench/hot_path/run counts its
// instructions with callgrind in the measured_* functions only, and compares them with
// hot_path_raw's.
//
// Usage: hot_path_channel {write|send} {blocking|unpolled_wait|unpolled_poll|scoped|verbs}
//                         ITERATIONS
//   device: $IBV_TEST_DEVICE, else the first active device; GID index: $IBV_TEST_GID_INDEX,
//   else the library's default (the RoCE v2 IPv4 entry).
//
// The styles, per iteration (the elements and the remote region are made once, before the loop):
//   blocking       write: channel.write(from, remote)
//                  send:  r = channel.post_receive(into); channel.send(from); r.wait()
//   unpolled_wait  write: channel.post_write(from, remote).wait()
//                  send:  r = post_receive(into); s = post_send(from); s.wait(); r.wait()
//   unpolled_poll  the same, with `while (!work.poll())` instead of wait()
//   scoped         channel.scope([&](ibv::ChannelScope& s) { s.post_write(from, remote); })
//                  send: the scope posts the receive and the send, and waits for both at its end
//   verbs          not the Channel but the verbs layer under it, on a queue pair of its own
//                  with the same settings: QueuePair::post_send (and post_receive) of a
//                  SendRequest, then CompletionQueue::poll until the completions arrive;
//                  inline (SendRequest::inline_data) when the queue pair grants 8 bytes of
//                  inline data, as the Channel's default InlinePolicy::automatic does
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

constexpr std::size_t kBufferSize = 4096;
constexpr std::size_t kMessageSize = 8;
constexpr std::size_t kHalf = kBufferSize / 2;
constexpr int kWarmUp = 200;
constexpr std::uint64_t kMaxSpins = 2'000'000'000;

enum class Op : std::uint8_t { write, send };
enum class Style : std::uint8_t { blocking, unpolled_wait, unpolled_poll, scoped, verbs };

struct Loop {
  ibv::Channel& channel;
  const ibv::QueuePair& qp;  // the verbs style's own queue pair and completion queue
  const ibv::CompletionQueue& cq;
  std::uint64_t& next_wr_id;
  std::span<const ibv::GatherElement> from;
  std::span<const ibv::ScatterElement> into;
  ibv::RemoteMemoryRegion remote;
  bool verbs_inline;  // the verbs style posts inline, as the Channel's automatic policy does
};

// The verbs style's wait: poll until `expected` completions have arrived, all successful.
void poll_for(const ibv::CompletionQueue& cq, std::size_t expected) {
  std::array<ibv::WorkCompletion, 2> completions{};
  std::uint64_t spins = 0;
  while (expected > 0) {
    const auto done = cq.poll(std::span(completions).first(expected));
    for (const auto& completion : done) {
      if (!completion.ok()) throw ibv::WorkError(completion);
    }
    expected -= done.size();
    if (done.empty() && ++spins > kMaxSpins) throw std::runtime_error("a request did not complete");
  }
}

void spin_until_complete(ibv::PendingWork& work) {
  std::uint64_t spins = 0;
  while (!work.poll()) {
    if (++spins > kMaxSpins) throw std::runtime_error("a request did not complete");
  }
  if (!work.poll()->ok()) throw ibv::WorkError(*work.poll());
}

template <Op op, Style style>
void once(const Loop& loop) {
  ibv::Channel& channel = loop.channel;
  if constexpr (op == Op::write) {
    if constexpr (style == Style::blocking) {
      channel.write(loop.from, loop.remote);
    } else if constexpr (style == Style::unpolled_wait) {
      channel.post_write(loop.from, loop.remote).wait();
    } else if constexpr (style == Style::unpolled_poll) {
      ibv::PendingWork work = channel.post_write(loop.from, loop.remote);
      spin_until_complete(work);
    } else if constexpr (style == Style::verbs) {
      ibv::SendRequest request = ibv::SendRequest::write(loop.next_wr_id++, loop.from, loop.remote);
      if (loop.verbs_inline) request.inline_data();
      loop.qp.post_send(request);
      poll_for(loop.cq, 1);
    } else {
      channel.scope([&](ibv::ChannelScope& scope) { scope.post_write(loop.from, loop.remote); });
    }
  } else {
    if constexpr (style == Style::blocking) {
      ibv::PendingWork receive = channel.post_receive(loop.into);
      channel.send(loop.from);
      receive.wait();
    } else if constexpr (style == Style::unpolled_wait) {
      ibv::PendingWork receive = channel.post_receive(loop.into);
      ibv::PendingWork send = channel.post_send(loop.from);
      send.wait();
      receive.wait();
    } else if constexpr (style == Style::unpolled_poll) {
      ibv::PendingWork receive = channel.post_receive(loop.into);
      ibv::PendingWork send = channel.post_send(loop.from);
      spin_until_complete(send);
      spin_until_complete(receive);
    } else if constexpr (style == Style::verbs) {
      loop.qp.post_receive(loop.next_wr_id++, loop.into);
      ibv::SendRequest request = ibv::SendRequest::send(loop.next_wr_id++, loop.from);
      if (loop.verbs_inline) request.inline_data();
      loop.qp.post_send(request);
      poll_for(loop.cq, 2);
    } else {
      channel.scope([&](ibv::ChannelScope& scope) {
        scope.post_receive(loop.into);
        scope.post_send(loop.from);
      });
    }
  }
}

template <Op op, Style style>
void repeat(const Loop& loop, long iterations) {
  for (long i = 0; i < iterations; ++i) once<op, style>(loop);
}

// The measured loops. bench/hot_path/run has callgrind start a fresh count on entering
// measured_* and write it out on entering end_of_measurement, so that set-up, the warm-up
// (the same code, run through warm_up()) and what follows are not counted.
[[gnu::noinline]] void measured_write_blocking(const Loop& loop, long n) {
  repeat<Op::write, Style::blocking>(loop, n);
}
[[gnu::noinline]] void measured_write_unpolled_wait(const Loop& loop, long n) {
  repeat<Op::write, Style::unpolled_wait>(loop, n);
}
[[gnu::noinline]] void measured_write_unpolled_poll(const Loop& loop, long n) {
  repeat<Op::write, Style::unpolled_poll>(loop, n);
}
[[gnu::noinline]] void measured_write_scoped(const Loop& loop, long n) {
  repeat<Op::write, Style::scoped>(loop, n);
}
[[gnu::noinline]] void measured_write_verbs(const Loop& loop, long n) {
  repeat<Op::write, Style::verbs>(loop, n);
}
[[gnu::noinline]] void measured_send_blocking(const Loop& loop, long n) {
  repeat<Op::send, Style::blocking>(loop, n);
}
[[gnu::noinline]] void measured_send_unpolled_wait(const Loop& loop, long n) {
  repeat<Op::send, Style::unpolled_wait>(loop, n);
}
[[gnu::noinline]] void measured_send_unpolled_poll(const Loop& loop, long n) {
  repeat<Op::send, Style::unpolled_poll>(loop, n);
}
[[gnu::noinline]] void measured_send_scoped(const Loop& loop, long n) {
  repeat<Op::send, Style::scoped>(loop, n);
}
[[gnu::noinline]] void measured_send_verbs(const Loop& loop, long n) {
  repeat<Op::send, Style::verbs>(loop, n);
}

volatile int measurement_ended = 0;
[[gnu::noinline]] void end_of_measurement() { measurement_ended = 1; }

using LoopFunction = void (*)(const Loop&, long);

struct Variant {
  std::string_view op;
  std::string_view style;
  LoopFunction measured;
  LoopFunction warm_up;
};

template <Op op, Style style>
[[gnu::noinline]] void warm_up(const Loop& loop, long n) {
  repeat<op, style>(loop, n);
}

constexpr std::array kVariants{
    Variant{"write", "blocking", measured_write_blocking, warm_up<Op::write, Style::blocking>},
    Variant{"write", "unpolled_wait", measured_write_unpolled_wait,
            warm_up<Op::write, Style::unpolled_wait>},
    Variant{"write", "unpolled_poll", measured_write_unpolled_poll,
            warm_up<Op::write, Style::unpolled_poll>},
    Variant{"write", "scoped", measured_write_scoped, warm_up<Op::write, Style::scoped>},
    Variant{"write", "verbs", measured_write_verbs, warm_up<Op::write, Style::verbs>},
    Variant{"send", "blocking", measured_send_blocking, warm_up<Op::send, Style::blocking>},
    Variant{"send", "unpolled_wait", measured_send_unpolled_wait,
            warm_up<Op::send, Style::unpolled_wait>},
    Variant{"send", "unpolled_poll", measured_send_unpolled_poll,
            warm_up<Op::send, Style::unpolled_poll>},
    Variant{"send", "scoped", measured_send_scoped, warm_up<Op::send, Style::scoped>},
    Variant{"send", "verbs", measured_send_verbs, warm_up<Op::send, Style::verbs>},
};

const char* environment(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): single-threaded
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  const auto* variant =
      args.size() == 3
          ? std::ranges::find_if(
                kVariants, [&](const Variant& v) { return v.op == args[0] && v.style == args[1]; })
          : kVariants.end();
  const long iterations = args.size() == 3 ? std::strtol(argv[3], nullptr, 10) : 0;
  if (variant == kVariants.end() || iterations <= 0) {
    std::fprintf(stderr,
                 "usage: hot_path_channel {write|send} "
                 "{blocking|unpolled_wait|unpolled_poll|scoped|verbs} ITERATIONS\n");
    return 2;
  }

  const char* device = environment("IBV_TEST_DEVICE");
  const ibv::Context context =
      device != nullptr ? ibv::open_device(device) : ibv::open_first_active_device();
  const ibv::ProtectionDomain pd(context);
  ibv::QueuePairSettings settings;
  if (const char* gid = environment("IBV_TEST_GID_INDEX")) {
    settings.gid_index = static_cast<std::uint32_t>(std::strtoul(gid, nullptr, 10));
  }
  ibv::PreparedChannel prepared = ibv::ChannelBuilder(pd).queue_pair(settings).build();
  const ibv::Endpoint self = prepared.endpoint();
  ibv::Channel channel = std::move(prepared).handshake(self);
  // The verbs style's queue pair: the same settings, its own completion queue of the same size.
  const int entries = static_cast<int>(settings.max_send_wr.value() + settings.max_recv_wr.value());
  const ibv::CompletionQueue cq(context, entries);
  ibv::PreparedQueuePair prepared_qp = ibv::QueuePairBuilder(pd, cq, cq).settings(settings).build();
  const ibv::Endpoint qp_self = prepared_qp.endpoint();
  const ibv::QueuePair qp = std::move(prepared_qp).handshake(qp_self);
  std::uint64_t next_wr_id = 1;

  std::vector<std::byte> buffer(kBufferSize);
  const ibv::MemoryRegion mr = pd.register_remote_accessible(buffer, ibv::RemoteAccess::write());
  const std::span<std::byte> bytes(buffer);
  std::fill_n(buffer.begin(), kMessageSize, std::byte{0x5a});
  const std::array from{mr.gather(bytes.first(kMessageSize))};
  const std::array into{mr.scatter(bytes.subspan(kHalf, kMessageSize))};
  const Loop loop{channel,
                  qp,
                  cq,
                  next_wr_id,
                  from,
                  into,
                  mr.remote().sub_region(kHalf, kMessageSize),
                  qp.max_inline_data() >= kMessageSize};

  variant->warm_up(loop, kWarmUp);
  variant->measured(loop, iterations);
  end_of_measurement();

  const auto head = bytes.first(kMessageSize);
  if (!std::ranges::equal(head, bytes.subspan(kHalf, kMessageSize))) {
    std::fprintf(stderr, "hot_path_channel: the data did not arrive\n");
    return 1;
  }
  const bool inline_posts =
      variant->style == "verbs" ? loop.verbs_inline : channel.inline_posts() > 0;
  std::printf("channel %s %s iterations %ld inline %s\n", argv[1], argv[2], iterations,
              inline_posts ? "yes" : "no");
  // Leave without destructors (nothing after the measurement matters).
  static_cast<void>(std::fflush(stdout));
  std::_Exit(0);
} catch (const std::exception& error) {
  std::fprintf(stderr, "hot_path_channel: %s\n", error.what());
  return 1;
}
