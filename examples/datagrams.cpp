// SPDX-License-Identifier: MIT
// The datagram endpoint (layer 6): unreliable datagrams, with what was lost counted by the
// receiver, first between two endpoints of one process, then through an IP multicast group
// from one process to many.
//
//   datagrams [DEVICE]
//     Two endpoints on one device, one asking and one answering. The server replies to the
//     address the request came from; the client's receive waits at most 100 ms, and the server
//     counts what it lost from the client's sequence numbers (nothing, here: a receive is
//     always posted).
//   datagrams --send GROUP LOCAL_IP [DEVICE]
//   datagrams --receive GROUP LOCAL_IP [DEVICE]
//   datagrams --receive-slowly GROUP LOCAL_IP [DEVICE]
//     Multicast. Receivers join the IP multicast group GROUP (e.g. 239.1.2.3) through their
//     endpoint, on the device whose address is LOCAL_IP, and print "joined" once they have.
//     The sender then sends the group a numbered stream: 48 datagrams at once, then 8 more a
//     second later. Each receiver prints what its endpoint counted of the sender: received and
//     lost. A slow receiver has a pool of only 16 receive buffers and holds each datagram until
//     it holds 16, then works 0.2 s before it lets them go: 32 datagrams of the burst find no
//     buffer and are dropped by the device, and the next one to arrive reveals the gap.
//     A receiver exits with 0 once the stream has reached it, whatever it lost (UD may lose),
//     and with 1 when nothing came within 30 s.
//
//   DEVICE: default $IBV_TEST_DEVICE, else the first active device.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kBurst = 48;       // sent at once
constexpr std::uint32_t kStream = 56;      // the burst and 8 more
constexpr std::uint32_t kSlowPool = 16;    // the slow receiver's receive buffers
constexpr auto kSlowWork = 200ms;          // how long it holds a full pool
constexpr auto kPauseAfterBurst = 1000ms;  // longer: the rest finds the slow pool refilled

ibv::Context open_chosen_device(const char* name) {
  if (name != nullptr) return ibv::open_device(name);
  if (const char* env = std::getenv("IBV_TEST_DEVICE"); env != nullptr && *env != '\0') {
    return ibv::open_device(env);
  }
  return ibv::open_first_active_device();
}

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// A sender's IPv4 address on RoCE v2, else its GID, or its LID on InfiniBand.
std::string address_of(const ibv::UdSource& source) {
  if (!source.gid) return "LID " + std::to_string(source.lid);
  return source.gid->ipv4().value_or(source.gid->to_string());
}

int ping_pong(const ibv::ProtectionDomain& pd) {
  ibv::DatagramEndpoint server(pd);
  ibv::DatagramEndpoint client(pd);
  // Across machines, the address travels as JSON or its 28 bytes (UdAddress::to_bytes).
  const ibv::UdAddress server_address = ibv::UdAddress::from_json(server.address().to_json());
  std::printf("server at %s, largest payload %u bytes\n", server_address.to_string().c_str(),
              client.max_payload(server_address));

  for (int i = 0; i < 3; ++i) {
    client.send(server_address, bytes_of("ping " + std::to_string(i)));
    const auto request = server.receive(100ms);
    if (!request) throw std::runtime_error("the request was lost");
    server.send(request->sender(), bytes_of("pong to \"" + text_of(request->data()) + "\""));
    const auto reply = client.receive(100ms);
    if (!reply) throw std::runtime_error("the reply was lost");
    std::printf("%s (sequence %llu)\n", text_of(reply->data()).c_str(),
                static_cast<unsigned long long>(reply->sequence()));
  }
  const auto counts = server.counts(client.address());
  std::printf("server: %llu received, %llu lost from the client\n",
              static_cast<unsigned long long>(counts.received),
              static_cast<unsigned long long>(counts.lost));
  return counts.received == 3 && counts.lost == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

// Multicast uses rdma_cm's Q_Key, which the group's members must have.
ibv::DatagramSettings multicast_settings(std::uint32_t receive_buffers) {
  ibv::DatagramSettings settings;
  settings.qkey = ibv::QKey(ibv::MulticastGroup::kRdmaCmQkey);
  settings.receive_buffers = receive_buffers;
  settings.wait_mode = ibv::WaitMode::block();  // sleep while waiting: leave the CPU to others
  return settings;
}

int send_stream(const ibv::ProtectionDomain& pd, std::string_view group, std::string_view ip) {
  ibv::DatagramEndpoint endpoint(pd, multicast_settings(1));
  // A sender needs the group's address, not a membership (it would receive its own stream).
  const ibv::UdAddress to_group = endpoint.join(group, ip, {.send_only = true});
  const auto datagram = [](std::uint32_t i) {
    return "datagram " + std::to_string(i) + " of " + std::to_string(kStream);
  };
  for (std::uint32_t i = 0; i < kBurst; ++i) endpoint.post(to_group, bytes_of(datagram(i)));
  endpoint.flush(5s);  // every send of the burst has left
  std::this_thread::sleep_for(kPauseAfterBurst);
  for (std::uint32_t i = kBurst; i < kStream; ++i) endpoint.send(to_group, bytes_of(datagram(i)));
  std::printf("sent %u datagrams to %.*s: %u at once, then %u more %lld ms later\n", kStream,
              static_cast<int>(group.size()), group.data(), kBurst, kStream - kBurst,
              static_cast<long long>(kPauseAfterBurst.count()));
  return EXIT_SUCCESS;
}

int receive_stream(const ibv::ProtectionDomain& pd, std::string_view group, std::string_view ip,
                   bool slowly) {
  ibv::DatagramEndpoint endpoint(pd, multicast_settings(slowly ? kSlowPool : 64));
  endpoint.join(group, ip);
  std::printf("joined %.*s on %.*s: %u receive buffers%s\n", static_cast<int>(group.size()),
              group.data(), static_cast<int>(ip.size()), ip.data(),
              endpoint.receive_buffers_posted(), slowly ? ", each datagram held a while" : "");
  std::fflush(stdout);  // whoever starts the sender may wait for this line

  std::vector<ibv::DatagramMessage> held;  // their buffers are not posted while held
  bool reached = false;
  for (std::uint32_t n = 0; n < kStream; ++n) {  // at most a stream's worth, each wait bounded
    auto message = endpoint.receive(reached ? 5s : 30s);
    if (!message) break;  // the rest of the stream did not come (it may have been lost)
    reached = true;
    const std::uint64_t sequence = message->sequence();
    if (message->lost_before() > 0) {
      std::printf("datagram %llu came after a gap: %llu before it were lost\n",
                  static_cast<unsigned long long>(sequence),
                  static_cast<unsigned long long>(message->lost_before()));
    }
    if (slowly) {
      held.push_back(std::move(*message));
      if (held.size() == kSlowPool) {
        std::this_thread::sleep_for(kSlowWork);
        held.clear();  // every buffer back in the pool
      }
    }
    if (sequence + 1 == kStream) break;  // the last of the stream
  }

  for (const ibv::DatagramSenderCounts& sender : endpoint.counts()) {
    std::printf("from %s (queue pair %u): %llu received, %llu lost\n",
                address_of(sender.sender).c_str(), sender.sender.qp_number,
                static_cast<unsigned long long>(sender.counts.received),
                static_cast<unsigned long long>(sender.counts.lost));
  }
  if (!reached) std::printf("nothing arrived within 30 s\n");
  return reached ? EXIT_SUCCESS : EXIT_FAILURE;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  if (args.empty() || !args[0].starts_with("--")) {
    const ibv::Context context = open_chosen_device(args.empty() ? nullptr : argv[1]);
    return ping_pong(ibv::ProtectionDomain(context));
  }
  if (args.size() < 3 || args.size() > 4) {
    std::fprintf(stderr,
                 "usage: datagrams [DEVICE]\n"
                 "       datagrams --send|--receive|--receive-slowly GROUP LOCAL_IP [DEVICE]\n");
    return 2;
  }
  const ibv::Context context = open_chosen_device(args.size() == 4 ? argv[4] : nullptr);
  const ibv::ProtectionDomain pd(context);
  if (args[0] == "--send") return send_stream(pd, args[1], args[2]);
  if (args[0] == "--receive") return receive_stream(pd, args[1], args[2], false);
  if (args[0] == "--receive-slowly") return receive_stream(pd, args[1], args[2], true);
  std::fprintf(stderr, "datagrams: unknown mode %.40s\n", argv[1]);  // quoted briefly
  return 2;
} catch (const std::exception& error) {
  std::fprintf(stderr, "datagrams: %s\n", error.what());
  return EXIT_FAILURE;
}
