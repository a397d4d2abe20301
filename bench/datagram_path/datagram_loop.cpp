// SPDX-License-Identifier: MIT
// bench/datagram_path/datagram_loop.cpp: raw_ud_loop.c's datagram path (an 8-byte datagram
// sent to the sender's own UD queue pair and received) through the library: its verbs layer,
// and the safe DatagramEndpoint. bench/datagram_path/run counts its instructions with callgrind
// in the measured_* functions only, and compares them with datagram_path_raw's.
//
// Usage: datagram_path_loop DATAGRAMS VARIANT [VARIANT...]
//   Each variant named is warmed up (200 datagrams, not counted) and measured (DATAGRAMS
//   datagrams) in turn, in one process: callgrind writes one part per variant, in the order
//   given. Per datagram:
//   verbs         a UdQueuePair with its own send and receive CompletionQueues (the default
//                 UdQueuePairSettings): a ReceiveRequest made and posted (40 bytes of GRH area
//                 plus the message), the UdSendRequest (to its own address through an
//                 AddressHandle to its own GID, inline when granted) built once before the loop
//                 and posted again, then CompletionQueue::poll of the send and the receive CQ
//                 until both completions are in
//   endpoint      a DatagramEndpoint (default DatagramSettings: spin wait): send(self, 8 bytes),
//                 the blocking send (post, then wait for its completion), then receive(timeout)
//                 until the message is there, then release() (which posts its buffer again).
//                 The endpoint puts its 12-byte DatagramHeader before the payload: 20 bytes go
//                 on the wire
//   endpoint_try  the same with a try_receive() loop in place of receive(timeout)
//   device: $IBV_TEST_DEVICE, else the first active device; GID index: $IBV_TEST_GID_INDEX,
//   else the library's default (the RoCE v2 IPv4 entry).
// Prints a line per variant: its name, datagrams measured, whether its sends went inline.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

constexpr std::size_t kBufferSize = 4096;
constexpr std::size_t kMessageSize = 8;
constexpr std::size_t kGrh = ibv::GlobalRouteHeader::kSize;
constexpr std::size_t kInto = kBufferSize / 2;
constexpr long kWarmUp = 200;
constexpr std::uint64_t kMaxSpins = 2'000'000'000;
constexpr auto kTimeout = std::chrono::seconds(10);

struct Loop {
  // The verbs variant: its queue pair, completion queues, request and receive element.
  const ibv::UdQueuePair& qp;
  ibv::UdSendRequest& send;
  std::span<const ibv::ScatterElement, 1> into;
  // The endpoint variants.
  ibv::DatagramEndpoint& endpoint;
  const ibv::UdAddress& self;
  std::span<const std::byte> payload;
};

// The verbs variant's wait: poll the send and the receive CQ until one completion has arrived
// on each, all successful, as raw_ud_loop.c's wait_for does (CompletionQueue::poll is inline:
// both call the provider's poll_cq).
[[gnu::always_inline]] inline void poll_both(const ibv::UdQueuePair& qp) {
  std::array<ibv::WorkCompletion, 1> sent{};
  std::array<ibv::WorkCompletion, 1> received{};
  bool send_done = false;
  bool recv_done = false;
  std::uint64_t spins = 0;
  while (!send_done || !recv_done) {
    std::size_t n = 0;
    if (!send_done) {
      const auto done = qp.send_cq().poll(sent);
      if (!done.empty()) {
        if (!done.front().ok()) throw ibv::WorkError(done.front());
        send_done = true;
      }
      n += done.size();
    }
    if (!recv_done) {
      const auto done = qp.recv_cq().poll(received);
      if (!done.empty()) {
        if (!done.front().ok()) throw ibv::WorkError(done.front());
        if (done.front().byte_length() != kGrh + kMessageSize) {
          throw std::runtime_error("a datagram of the wrong size arrived");
        }
        recv_done = true;
      }
      n += done.size();
    }
    if (n == 0 && ++spins > kMaxSpins) throw std::runtime_error("a datagram did not complete");
  }
}

enum class Variant : std::uint8_t { verbs, endpoint, endpoint_try };

template <Variant variant>
void once(const Loop& loop) {
  if constexpr (variant == Variant::verbs) {
    ibv::ReceiveRequest receive(2, loop.into);
    loop.qp.post_receive(receive);
    loop.qp.post_send(loop.send);
    poll_both(loop.qp);
  } else {
    loop.endpoint.send(loop.self, loop.payload);
    std::optional<ibv::DatagramMessage> message;
    std::uint64_t spins = 0;
    if constexpr (variant == Variant::endpoint) {
      while (!(message = loop.endpoint.receive(kTimeout))) {
        if (++spins > 1) throw std::runtime_error("no datagram arrived within the timeout");
      }
    } else {
      while (!(message = loop.endpoint.try_receive())) {
        if (++spins > kMaxSpins) throw std::runtime_error("a datagram did not arrive");
      }
    }
    if (message->data().size() != kMessageSize) {
      throw std::runtime_error("a datagram of the wrong size arrived");
    }
    message->release();
  }
}

template <Variant variant>
void repeat(const Loop& loop, long count) {
  for (long i = 0; i < count; ++i) once<variant>(loop);
}

// The measured loops, one function per variant so that callgrind's dump-before finds each
// (bench/hot_path/lib.sh: a fresh count on entering measured_*, written out on entering
// end_of_measurement).
template <Variant variant>
[[gnu::noinline]] void measured_(const Loop& loop, long count) {
  repeat<variant>(loop, count);
}

volatile int measurement_ended = 0;
[[gnu::noinline]] void end_of_measurement() { measurement_ended = 1; }

template <Variant variant>
[[gnu::noinline]] void warm_up(const Loop& loop, long count) {
  repeat<variant>(loop, count);
}

using LoopFunction = void (*)(const Loop&, long);

struct Choice {
  std::string_view name;
  LoopFunction measured;
  LoopFunction warm_up;
};

constexpr std::array kVariants{
    Choice{"verbs", measured_<Variant::verbs>, warm_up<Variant::verbs>},
    Choice{"endpoint", measured_<Variant::endpoint>, warm_up<Variant::endpoint>},
    Choice{"endpoint_try", measured_<Variant::endpoint_try>, warm_up<Variant::endpoint_try>},
};

const Choice* find_variant(std::string_view name) {
  for (const Choice& choice : kVariants) {
    if (choice.name == name) return &choice;
  }
  return nullptr;
}

const char* environment(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): one thread
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int usage() {
  std::fprintf(stderr,
               "usage: datagram_path_loop DATAGRAMS VARIANT [VARIANT...]\n"
               "  VARIANT: verbs, endpoint, endpoint_try\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.size() < 2) return usage();
  const long datagrams = std::strtol(argv[1], nullptr, 10);
  std::vector<const Choice*> chosen;
  for (std::size_t i = 1; i < args.size(); ++i) {
    chosen.push_back(find_variant(args[i]));
    if (chosen.back() == nullptr) {
      std::fprintf(stderr, "datagram_path_loop: no variant %s\n", argv[i + 1]);
      return usage();
    }
  }
  if (datagrams <= 0) return usage();

  const char* device = environment("IBV_TEST_DEVICE");
  const ibv::Context context =
      device != nullptr ? ibv::open_device(device) : ibv::open_first_active_device();
  const ibv::ProtectionDomain pd(context);
  std::optional<std::uint32_t> gid_index;
  if (const char* gid = environment("IBV_TEST_GID_INDEX")) {
    gid_index = static_cast<std::uint32_t>(std::strtoul(gid, nullptr, 10));
  }

  // The verbs variant: a UD queue pair with the default settings, its own two CQs.
  ibv::UdQueuePairSettings settings;
  settings.gid_index = gid_index;
  const ibv::CompletionQueue send_cq(context, static_cast<int>(settings.max_send_wr.value()));
  const ibv::CompletionQueue recv_cq(context, static_cast<int>(settings.max_recv_wr.value()));
  const ibv::UdQueuePair qp =
      ibv::UdQueuePairBuilder(pd, send_cq, recv_cq).settings(settings).build();
  const ibv::UdAddress qp_self = qp.address();
  ibv::AddressHandleSettings route;
  route.gid_index = qp.gid_index();
  const ibv::AddressHandle ah = ibv::AddressHandle::to(pd, qp_self, route);

  std::vector<std::byte> buffer(kBufferSize);
  const ibv::MemoryRegion mr = pd.register_local(buffer);
  const std::span<std::byte> bytes(buffer);
  std::fill_n(buffer.begin(), kMessageSize, std::byte{0x5a});
  const std::array from{mr.gather(std::span<const std::byte>(bytes.first(kMessageSize)))};
  const std::array into{mr.scatter(bytes.subspan(kInto, kGrh + kMessageSize))};
  ibv::UdSendRequest send = ibv::UdSendRequest::to(1, from, ah, qp_self);
  const bool verbs_inline = qp.max_inline_data() >= kMessageSize;
  if (verbs_inline) send.inline_data();

  // The endpoint variants: the default settings (spin), sending to itself.
  ibv::DatagramSettings endpoint_settings;
  endpoint_settings.gid_index = gid_index;
  ibv::DatagramEndpoint endpoint(pd, endpoint_settings);
  const ibv::UdAddress endpoint_self = endpoint.address();
  const bool endpoint_inline =
      endpoint.queue_pair().max_inline_data() >= ibv::DatagramHeader::kSize + kMessageSize;

  const Loop loop{.qp = qp,
                  .send = send,
                  .into = into,
                  .endpoint = endpoint,
                  .self = endpoint_self,
                  .payload = bytes.first(kMessageSize)};

  for (const Choice* choice : chosen) {
    choice->warm_up(loop, kWarmUp);
    choice->measured(loop, datagrams);
    end_of_measurement();
    const bool inline_posts = choice->name == "verbs" ? verbs_inline : endpoint_inline;
    std::printf("library %.*s datagrams %ld inline %s\n", static_cast<int>(choice->name.size()),
                choice->name.data(), datagrams, inline_posts ? "yes" : "no");
  }

  const bool verbs_ran = std::ranges::find(chosen, find_variant("verbs")) != chosen.end();
  if (verbs_ran && std::memcmp(buffer.data(), buffer.data() + kInto + kGrh, kMessageSize) != 0) {
    std::fprintf(stderr, "datagram_path_loop: the data did not arrive\n");
    return 1;
  }
  const auto counts = endpoint.counts(endpoint_self);
  if (counts.lost != 0) {
    std::fprintf(stderr, "datagram_path_loop: the endpoint counted %llu datagrams lost\n",
                 static_cast<unsigned long long>(counts.lost));
    return 1;
  }
  // Leave without destructors (nothing after the measurement matters).
  static_cast<void>(std::fflush(stdout));
  std::_Exit(0);
} catch (const std::exception& error) {
  std::fprintf(stderr, "datagram_path_loop: %s\n", error.what());
  return 1;
}
