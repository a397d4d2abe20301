// SPDX-License-Identifier: MIT
// The datagram endpoint (layer 6) in its smallest form: two endpoints on one device, one
// asking and one answering over unreliable datagrams. The server replies to the address the
// request came from; the client's receive waits at most 100 ms, and the server counts what it
// lost from the client's sequence numbers (nothing, here: a receive is always posted).
//
//   datagrams [device]    (default: $IBV_TEST_DEVICE, else the first active device)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>

#include "ibv/ibv.hpp"

namespace {

ibv::Context open_chosen_device(int argc, char** argv) {
  if (argc > 1) return ibv::open_device(argv[1]);
  if (const char* name = std::getenv("IBV_TEST_DEVICE"); name != nullptr && *name != '\0') {
    return ibv::open_device(name);
  }
  return ibv::open_first_active_device();
}

std::span<const std::byte> bytes_of(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string text_of(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace

int main(int argc, char** argv) try {
  using namespace std::chrono_literals;
  const ibv::Context context = open_chosen_device(argc, argv);
  const ibv::ProtectionDomain pd(context);
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
} catch (const std::exception& error) {
  std::fprintf(stderr, "datagrams: %s\n", error.what());
  return EXIT_FAILURE;
}
