// SPDX-License-Identifier: MIT
// The Channel in its smallest form, after the example of the Rust crate ibverbs-rs: one
// registered buffer split in two halves, and a send from the first half into the second over a
// loopback channel, inside a scope that returns only when both the send and the receive have
// completed. Then the same with an RDMA write, blocking, and with an unpolled PendingWork.
//
//   channel [device]      (default: $IBV_TEST_DEVICE, else the first active device)
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

ibv::Context open_chosen_device(int argc, char** argv) {
  if (argc > 1) return ibv::open_device(argv[1]);
  if (const char* name = std::getenv("IBV_TEST_DEVICE"); name != nullptr && *name != '\0') {
    return ibv::open_device(name);
  }
  return ibv::open_first_active_device();
}

bool halves_equal(std::span<const std::byte> buffer) {
  const auto half = buffer.size() / 2;
  return std::equal(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(half),
                    buffer.begin() + static_cast<std::ptrdiff_t>(half));
}

}  // namespace

int main(int argc, char** argv) try {
  const ibv::Context context = open_chosen_device(argc, argv);
  const ibv::ProtectionDomain pd(context);

  // A loopback channel: its own endpoint is its peer. Across machines, the endpoints travel
  // over TCP (or the Network layer's exchanger) before the handshake.
  ibv::PreparedChannel prepared = ibv::ChannelBuilder(pd).build();
  const ibv::Endpoint self = prepared.endpoint();
  ibv::Channel channel = std::move(prepared).handshake(self);

  std::vector<std::byte> buffer(4096);
  const ibv::MemoryRegion mr = pd.register_remote_accessible(buffer, ibv::RemoteAccess::write());
  const std::span<std::byte> bytes(buffer);
  const std::span<std::byte> first = bytes.first(2048);
  const std::span<std::byte> second = bytes.last(2048);

  // 1. Scoped: the scope returns only after the receive and the send have both completed,
  //    also if the body throws; nothing posted inside can outlive the buffers.
  std::fill(first.begin(), first.end(), std::byte{0x42});
  channel.scope([&](ibv::ChannelScope& scope) {
    const std::array into{mr.scatter(second)};
    const std::array from{mr.gather(first)};
    scope.post(ibv::op::Receive{into});
    scope.post(ibv::op::Send{from});
  });
  std::printf("scoped send, first half -> second half:   %s\n",
              halves_equal(bytes) ? "equal" : "DIFFERENT");
  if (!halves_equal(bytes)) return EXIT_FAILURE;

  // 2. Blocking: one RDMA write, waited for (at most the channel's timeout).
  std::fill(first.begin(), first.end(), std::byte{0x17});
  const std::array from{mr.gather(first)};
  channel.write(from, mr.remote().sub_region(2048, 2048));
  std::printf("blocking RDMA write, first -> second:     %s\n",
              halves_equal(bytes) ? "equal" : "DIFFERENT");
  if (!halves_equal(bytes)) return EXIT_FAILURE;

  // 3. Unpolled: a PendingWork to poll or wait on; dropping it would wait too.
  std::fill(first.begin(), first.end(), std::byte{0x99});
  ibv::PendingWork work = channel.post_write(from, mr.remote().sub_region(2048, 2048));
  const ibv::WorkCompletion done = work.wait();
  std::printf("unpolled RDMA write (%s):  %s\n", done.to_string().c_str(),
              halves_equal(bytes) ? "equal" : "DIFFERENT");
  return halves_equal(bytes) ? EXIT_SUCCESS : EXIT_FAILURE;
} catch (const std::exception& error) {
  std::fprintf(stderr, "channel: %s\n", error.what());
  return EXIT_FAILURE;
}
