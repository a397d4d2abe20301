// SPDX-License-Identifier: MIT
// A tour of the verbs layer on one device: list the devices, show a port and its GID table,
// connect two queue pairs to each other, and move data with a send, an RDMA write and an RDMA
// read, checking every byte.
//
//   verbs_tour [device]      (default: $IBV_TEST_DEVICE, else the first active device)
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

/// Waits for one completion on `cq` (at most 5 s) and throws ibv::WorkError if it failed.
ibv::WorkCompletion wait_for_completion(const ibv::CompletionQueue& cq) {
  std::array<ibv::WorkCompletion, 1> slot{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (cq.poll(slot).empty()) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("no completion within 5 s");
    }
  }
  if (!slot[0].ok()) throw ibv::WorkError(slot[0]);
  return slot[0];
}

void check(bool ok, const char* what) {
  std::printf("  %-46s %s\n", what, ok ? "ok" : "MISMATCH");
  if (!ok) throw std::runtime_error(std::string("data check failed: ") + what);
}

ibv::Context open_chosen_device(int argc, char** argv) {
  if (argc > 1) return ibv::open_device(argv[1]);
  if (const char* name = std::getenv("IBV_TEST_DEVICE"); name != nullptr && *name != '\0') {
    return ibv::open_device(name);
  }
  return ibv::open_first_active_device();
}

}  // namespace

int main(int argc, char** argv) try {
  std::printf("ibverbs-cpp %s\n\nDevices on this host:\n", std::string(ibv::version()).c_str());
  for (const auto& device : ibv::list_devices()) std::printf("  %s\n", device.to_string().c_str());

  const ibv::Context context = open_chosen_device(argc, argv);
  std::printf("\nUsing %s, %s\nGID table:\n", context.name().c_str(),
              context.query_port().to_string().c_str());
  for (const auto& entry : context.gid_table()) std::printf("  %s\n", entry.to_string().c_str());
  std::printf("Default GID index (RoCE v2, IPv4): %u\n\n", context.default_gid_index());

  // One protection domain; one CQ and one QP per side. Both QPs live on this device and are
  // connected to each other, as two processes would be after exchanging endpoints.
  const ibv::ProtectionDomain pd(context);
  const ibv::CompletionQueue cq_a(context, 16);
  const ibv::CompletionQueue cq_b(context, 16);
  auto prepared_a = ibv::QueuePairBuilder(pd, cq_a, cq_a).build();
  auto prepared_b = ibv::QueuePairBuilder(pd, cq_b, cq_b).build();
  const ibv::Endpoint endpoint_a = prepared_a.endpoint();  // what would travel over TCP
  const ibv::Endpoint endpoint_b = prepared_b.endpoint();
  std::printf("QP a: %s\n  as JSON: %s\nQP b: %s\n", endpoint_a.to_string().c_str(),
              endpoint_a.to_json().c_str(), endpoint_b.to_string().c_str());
  const ibv::QueuePair a = std::move(prepared_a).handshake(endpoint_b);
  const ibv::QueuePair b = std::move(prepared_b).handshake(endpoint_a);
  std::printf("Both connected: a is %s, b is %s\n\n", a.query_state().c_str(),
              b.query_state().c_str());

  // Side a's memory is local only; side b lets its peer write and read it.
  std::vector<std::byte> memory_a(4096);
  std::vector<std::byte> memory_b(4096);
  const ibv::MemoryRegion mr_a = pd.register_local(memory_a);
  const ibv::MemoryRegion mr_b = pd.register_remote_accessible(
      memory_b, ibv::RemoteAccess::write() | ibv::RemoteAccess::read());
  const ibv::RemoteMemoryRegion remote_b = mr_b.remote();  // what b would hand to a
  const std::span<std::byte> a_bytes(memory_a);
  const std::span<std::byte> b_bytes(memory_b);

  std::printf("Moving data:\n");
  constexpr std::string_view greeting = "hello from QP a, by send";
  std::memcpy(a_bytes.data(), greeting.data(), greeting.size());
  const std::array receive_into{mr_b.scatter(b_bytes.first(1024))};
  b.post_receive(1, receive_into);
  const std::array send_from{
      mr_a.gather(std::span<const std::byte>(a_bytes.first(greeting.size())))};
  a.post_send(2, send_from);
  wait_for_completion(cq_a);
  const auto received = wait_for_completion(cq_b);
  check(received.byte_length() == greeting.size() &&
            std::memcmp(b_bytes.data(), greeting.data(), greeting.size()) == 0,
        "send -> receive (b's CQ reports the bytes)");

  constexpr std::string_view written = "written by a, no receive needed";
  std::memcpy(a_bytes.data() + 1024, written.data(), written.size());
  const std::array write_from{
      mr_a.gather(std::span<const std::byte>(a_bytes.subspan(1024, written.size())))};
  a.post_write(3, write_from, remote_b.sub_region(2048, written.size()));
  wait_for_completion(cq_a);
  check(std::memcmp(b_bytes.data() + 2048, written.data(), written.size()) == 0,
        "RDMA write into b's region at offset 2048");

  const std::array read_into{mr_a.scatter(a_bytes.subspan(3072, written.size()))};
  a.post_read(4, read_into, remote_b.sub_region(2048, written.size()));
  wait_for_completion(cq_a);
  check(std::memcmp(a_bytes.data() + 3072, written.data(), written.size()) == 0,
        "RDMA read of it back into a's region");

  // Bad input is refused before it reaches the device, with a message that says why.
  try {
    (void)mr_a.gather(std::span<const std::byte>(a_bytes.data() + 4000, 200));
  } catch (const ibv::Error& error) {
    std::printf("\nAn element past the end of its region is refused:\n  %s\n", error.what());
  }
  std::printf("\nverbs_tour: all checks passed\n");
  return EXIT_SUCCESS;
} catch (const std::exception& error) {
  std::fprintf(stderr, "verbs_tour: %s\n", error.what());
  return EXIT_FAILURE;
}
