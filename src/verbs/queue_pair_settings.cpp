// SPDX-License-Identifier: MIT
// Range checks and duration conversions of the queue pair setting value types, and Mtu.
#include "ibv/verbs/queue_pair_settings.hpp"

#include <array>
#include <random>
#include <string>

#include "ibv/error.hpp"
#include "ibv/verbs/mtu.hpp"

namespace ibv {
namespace {

// The RNR NAK timer table of the InfiniBand spec (vol. 1, table 45), in microseconds.
constexpr std::array<std::uint32_t, 32> kRnrTimerMicros = {
    655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
    480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
    20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520};

constexpr std::uint32_t kMaxPsn = 0xFFFFFF;
constexpr std::uint32_t kMaxQueueValue = 0x7FFFFFFF;
constexpr std::uint32_t kMaxInline = 64 * 1024;

}  // namespace

Mtu Mtu::from_bytes(std::uint32_t bytes) {
  for (int code = 1; code <= 5; ++code) {
    if ((128U << code) == bytes) return Mtu(code);
  }
  throw_invalid_argument("Mtu::from_bytes", "mtu " + std::to_string(bytes),
                         "is not a path MTU: use 256, 512, 1024, 2048 or 4096");
}

Mtu Mtu::from_native(int value) {
  if (value < 1 || value > 5) {
    throw_invalid_argument("Mtu::from_native", "ibv_mtu " + std::to_string(value),
                           "is out of range 1..5");
  }
  return Mtu(value);
}

Psn::Psn(std::uint32_t value) : value_(value) {
  if (value > kMaxPsn) {
    throw_invalid_argument("Psn", "psn " + std::to_string(value),
                           "does not fit 24 bits (max 16777215)");
  }
}

Psn Psn::random() {
  std::random_device device;
  return Psn(device() & kMaxPsn);
}

AckTimeout::AckTimeout(std::uint8_t exponent) : exponent_(exponent) {
  if (exponent == 0) {
    throw_invalid_argument("AckTimeout", "exponent 0",
                           "means wait forever; say AckTimeout::infinite() if that is meant");
  }
  if (exponent > 31) {
    throw_invalid_argument("AckTimeout", "exponent " + std::to_string(exponent),
                           "is out of range 1..31");
  }
}

AckTimeout AckTimeout::at_least(Duration duration) {
  for (std::uint8_t exponent = 1; exponent < 31; ++exponent) {
    if (AckTimeout(Raw{exponent}).duration() >= duration) return AckTimeout(Raw{exponent});
  }
  return AckTimeout(Raw{31});
}

Duration AckTimeout::duration() const noexcept {
  if (exponent_ == 0) return Duration{};
  // 4.096 us * 2^exponent = 4096 ns << exponent.
  return std::chrono::nanoseconds(std::int64_t{4096} << exponent_);
}

Duration retry_budget(AckTimeout timeout, RetryCount retries) noexcept {
  return timeout.duration() * (retries.value() + 1);
}

RetryCount::RetryCount(std::uint8_t count) : count_(count) {
  if (count > 7) {
    throw_invalid_argument("RetryCount", "retry_count " + std::to_string(count),
                           "is out of range 0..7");
  }
}

RnrRetryCount::RnrRetryCount(std::uint8_t count) : count_(count) {
  if (count == 7) {
    throw_invalid_argument("RnrRetryCount", "rnr_retry 7",
                           "means retry forever; say RnrRetryCount::infinite() if that is meant");
  }
  if (count > 7) {
    throw_invalid_argument("RnrRetryCount", "rnr_retry " + std::to_string(count),
                           "is out of range 0..6");
  }
}

RnrTimer::RnrTimer(std::uint8_t code) : code_(code) {
  if (code > 31) {
    throw_invalid_argument("RnrTimer", "min_rnr_timer " + std::to_string(code),
                           "is out of range 0..31");
  }
}

RnrTimer RnrTimer::at_least(Duration duration) {
  std::size_t best = 0;  // 655.36 ms, the longest
  for (std::size_t code = 1; code < kRnrTimerMicros.size(); ++code) {
    const auto micros = kRnrTimerMicros[code];
    if (std::chrono::microseconds(micros) >= duration &&
        (best == 0 || micros < kRnrTimerMicros[best])) {
      best = code;
    }
  }
  return RnrTimer(Raw{static_cast<std::uint8_t>(best)});
}

Duration RnrTimer::duration() const noexcept {
  return std::chrono::microseconds(kRnrTimerMicros[code_]);
}

QueueDepth::QueueDepth(std::uint32_t entries) : entries_(entries) {
  if (entries == 0 || entries > kMaxQueueValue) {
    throw_invalid_argument("QueueDepth", "queue depth " + std::to_string(entries),
                           "is out of range 1..2147483647");
  }
}

SgeCount::SgeCount(std::uint32_t count) : count_(count) {
  if (count == 0 || count > kMaxQueueValue) {
    throw_invalid_argument("SgeCount", "SGE count " + std::to_string(count),
                           "is out of range 1..2147483647");
  }
}

InlineSize::InlineSize(std::uint32_t bytes) : bytes_(bytes) {
  if (bytes > kMaxInline) {
    throw_invalid_argument("InlineSize", "max_inline_data " + std::to_string(bytes),
                           "is above 65536 bytes, more than any device inlines");
  }
}

ReadAtomicDepth::ReadAtomicDepth(std::uint8_t depth) : depth_(depth) {
  if (depth == 0) {
    throw_invalid_argument("ReadAtomicDepth", "read/atomic depth 0", "must be at least 1");
  }
}

}  // namespace ibv
