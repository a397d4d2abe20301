// SPDX-License-Identifier: MIT
// bench/wait_modes/pingpong.cpp: what each Channel WaitMode costs in latency and CPU time. Two
// threads of one process, each with its own end of a loopback pair of Channels built with the
// mode under test, play ping-pong with small messages: the pinger sends and waits for the
// answer, the ponger waits for a message and answers. Both wait through the Channel's blocking
// calls, so every wait runs by the mode.
//
// Usage: wait_modes_pingpong MODE ITERATIONS [SIZE] [SPIN_US] [GAP_US]
//   MODE: spin | block | spin_then_block (SPIN_US: its spin time, default 50 us)
//   GAP_US: the pinger sleeps this long between round trips (default 0): the ponger then
//   waits that long for each ping, which is where spinning and sleeping differ most.
//   device: $IBV_TEST_DEVICE, else the first active device; GID index: $IBV_TEST_GID_INDEX,
//   else the library's default.
// Prints one JSON object: the mode, iterations, message size, round-trip latency (median, p99,
// mean, in microseconds, measured per iteration by the pinger), and CPU time per round trip in
// microseconds: the whole process (getrusage: user + system, both threads and the kernel work
// done in their context) and each thread (CLOCK_THREAD_CPUTIME_ID), plus the wall time.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "ibv/ibv.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmUp = 50;

double seconds(const timeval& time) {
  return static_cast<double>(time.tv_sec) + static_cast<double>(time.tv_usec) * 1e-6;
}

/// User and system CPU seconds of the whole process so far.
std::pair<double, double> process_cpu_seconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return {seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

/// CPU seconds of the calling thread so far.
double thread_cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

ibv::WaitMode parse_mode(std::string_view name, std::chrono::microseconds spin_for) {
  if (name == "spin") return ibv::WaitMode::spin();
  if (name == "block") return ibv::WaitMode::block();
  if (name == "spin_then_block") return ibv::WaitMode::spin_then_block(spin_for);
  throw std::invalid_argument("unknown mode " + std::string(name) +
                              " (spin, block or spin_then_block)");
}

ibv::Context open_device() {
  if (const char* name = std::getenv("IBV_TEST_DEVICE"); name != nullptr && *name != '\0') {
    return ibv::open_device(name);
  }
  return ibv::open_first_active_device();
}

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(fraction * static_cast<double>(values.size() - 1));
  return values[index];
}

int run(std::string_view mode_name, int iterations, std::size_t size,
        std::chrono::microseconds spin_for, std::chrono::microseconds gap) {
  const ibv::WaitMode mode = parse_mode(mode_name, spin_for);
  const ibv::Context context = open_device();
  const ibv::ProtectionDomain pd(context);
  ibv::QueuePairSettings settings;
  if (const char* index = std::getenv("IBV_TEST_GID_INDEX"); index != nullptr && *index != '\0') {
    settings.gid_index = static_cast<std::uint32_t>(std::stoul(index));
  }
  settings.rnr_retry = ibv::RnrRetryCount::infinite();
  const ibv::ChannelTimeouts timeouts{.operation = std::chrono::seconds(30),
                                      .drop = std::chrono::seconds(30)};
  auto prepared_a =
      ibv::ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).wait_mode(mode).build();
  auto prepared_b =
      ibv::ChannelBuilder(pd).queue_pair(settings).timeouts(timeouts).wait_mode(mode).build();
  const ibv::Endpoint endpoint_a = prepared_a.endpoint();
  const ibv::Endpoint endpoint_b = prepared_b.endpoint();
  ibv::Channel ping = std::move(prepared_a).handshake(endpoint_b);
  ibv::Channel pong = std::move(prepared_b).handshake(endpoint_a);

  std::vector<std::byte> buffer(size * 4);
  const ibv::MemoryRegion mr = pd.register_local(std::span(buffer));
  const auto part = [&](std::size_t index) {
    return std::span(buffer).subspan(index * size, size);
  };
  const std::array ping_out{mr.gather(std::span<const std::byte>(part(0)))};
  const std::array ping_in{mr.scatter(part(1))};
  const std::array pong_out{mr.gather(std::span<const std::byte>(part(2)))};
  const std::array pong_in{mr.scatter(part(3))};

  const int total = kWarmUp + iterations;
  std::vector<double> round_trips;  // microseconds, measured iterations only
  round_trips.reserve(static_cast<std::size_t>(iterations));
  double ping_cpu = 0;
  double pong_cpu = 0;
  std::pair<double, double> process_cpu{};
  double wall = 0;
  std::exception_ptr pong_error;

  // The ponger's receive for the next ping is posted before it answers, so a ping never
  // meets an empty receive queue (no RNR wait in the figures).
  std::thread ponger([&] {
    try {
      ibv::PendingWork next = pong.post_receive(pong_in);
      double start_cpu = 0;
      for (int i = 0; i < total; ++i) {
        if (i == kWarmUp) start_cpu = thread_cpu_seconds();
        (void)next.wait();
        next = pong.post_receive(pong_in);
        (void)pong.send(pong_out);
      }
      pong_cpu = thread_cpu_seconds() - start_cpu;
      (void)next.wait();  // the pinger's last message: its receive does not outlive the loop
    } catch (...) {
      pong_error = std::current_exception();
    }
  });
  ibv::PendingWork answer = ping.post_receive(ping_in);
  double start_cpu = 0;
  std::pair<double, double> start_process{};
  Clock::time_point start_wall;
  for (int i = 0; i < total; ++i) {
    if (i == kWarmUp) {
      start_cpu = thread_cpu_seconds();
      start_process = process_cpu_seconds();
      start_wall = Clock::now();
    }
    if (gap.count() > 0) std::this_thread::sleep_for(gap);
    const auto sent = Clock::now();
    (void)ping.send(ping_out);
    (void)answer.wait();
    const auto back = Clock::now();
    if (i + 1 < total) answer = ping.post_receive(ping_in);
    if (i >= kWarmUp) {
      round_trips.push_back(std::chrono::duration<double, std::micro>(back - sent).count());
    }
  }
  ping_cpu = thread_cpu_seconds() - start_cpu;
  const auto end_process = process_cpu_seconds();
  process_cpu = {end_process.first - start_process.first,
                 end_process.second - start_process.second};
  wall = std::chrono::duration<double>(Clock::now() - start_wall).count();
  (void)ping.send(ping_out);  // completes the ponger's last receive
  ponger.join();
  if (pong_error) std::rethrow_exception(pong_error);

  double sum = 0;
  for (const double value : round_trips) sum += value;
  const double n = iterations;
  const double total_cpu = process_cpu.first + process_cpu.second;
  std::printf(
      "{\"mode\": \"%s\", \"spin_us\": %lld, \"gap_us\": %lld, \"iterations\": %d, "
      "\"size\": %zu, \"rtt_median_us\": %.2f, \"rtt_p99_us\": %.2f, \"rtt_mean_us\": %.2f, "
      "\"cpu_process_us_per_rt\": %.2f, \"cpu_user_us_per_rt\": %.2f, "
      "\"cpu_system_us_per_rt\": %.2f, \"cpu_ping_thread_us_per_rt\": %.2f, "
      "\"cpu_pong_thread_us_per_rt\": %.2f, \"wall_s\": %.3f, \"cpu_process_s\": %.3f}\n",
      std::string(mode_name).c_str(),
      static_cast<long long>(mode.strategy == ibv::WaitStrategy::spin_then_block ? spin_for.count()
                                                                                 : 0),
      static_cast<long long>(gap.count()), iterations, size, percentile(round_trips, 0.5),
      percentile(round_trips, 0.99), sum / n, total_cpu / n * 1e6, process_cpu.first / n * 1e6,
      process_cpu.second / n * 1e6, ping_cpu / n * 1e6, pong_cpu / n * 1e6, wall, total_cpu);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::span args(argv, static_cast<std::size_t>(argc));
  if (args.size() < 3) {
    std::fprintf(stderr,
                 "usage: wait_modes_pingpong {spin|block|spin_then_block} ITERATIONS [SIZE] "
                 "[SPIN_US] [GAP_US]\n");
    return 2;
  }
  try {
    const int iterations = std::stoi(args[2]);
    const std::size_t size = args.size() > 3 ? std::stoul(args[3]) : 8;
    const auto spin_for = std::chrono::microseconds(args.size() > 4 ? std::stoll(args[4]) : 50);
    const auto gap = std::chrono::microseconds(args.size() > 5 ? std::stoll(args[5]) : 0);
    if (iterations < 1 || size < 1)
      throw std::invalid_argument("ITERATIONS and SIZE must be positive");
    return run(args[1], iterations, size, spin_for, gap);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "wait_modes_pingpong: %s\n", error.what());
    return 1;
  }
}
