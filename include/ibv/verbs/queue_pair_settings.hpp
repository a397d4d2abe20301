// SPDX-License-Identifier: MIT
// The knobs of a reliable-connected queue pair, each a small value type that checks its range
// at construction, so a QueuePairBuilder can only hold values the device can be given.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "ibv/duration.hpp"

namespace ibv {

/// A 24-bit packet sequence number: the first PSN a QP sends with (and the peer expects).
class Psn {
 public:
  /// Throws ibv::Error (invalid_argument) for values above 0xFFFFFF.
  explicit Psn(std::uint32_t value);
  /// A random PSN (what verbs programs conventionally start with).
  [[nodiscard]] static Psn random();
  /// The PSN, 0..0xFFFFFF.
  [[nodiscard]] constexpr std::uint32_t value() const noexcept { return value_; }
  friend bool operator==(Psn, Psn) noexcept = default;

 private:
  std::uint32_t value_;
};

/// Local ACK timeout: how long the sender waits for an ACK before retransmitting, encoded as
/// 4.096 us * 2^exponent. The verbs value 0 means "wait forever" and is only available as the
/// explicitly named AckTimeout::infinite().
class AckTimeout {
 public:
  /// Exponent 1..31. Throws ibv::Error (invalid_argument) otherwise.
  explicit AckTimeout(std::uint8_t exponent);
  /// The smallest timeout not shorter than `duration` (clamped to the largest, about 2.4 h;
  /// durations up to 8.192 us, zero and negative ones included, give the shortest, exponent 1:
  /// "at least" never yields infinite()).
  [[nodiscard]] static AckTimeout at_least(Duration duration);
  /// Never time out waiting for an ACK: a peer that vanished then hangs the QP.
  [[nodiscard]] static constexpr AckTimeout infinite() noexcept { return AckTimeout(Raw{0}); }
  /// 14: 4.096 us * 2^14, about 67 ms.
  [[nodiscard]] static constexpr AckTimeout default_value() noexcept { return AckTimeout(Raw{14}); }

  /// The verbs value: 1..31, or 0 for infinite().
  [[nodiscard]] constexpr std::uint8_t exponent() const noexcept { return exponent_; }
  /// Whether this is infinite() (exponent 0).
  [[nodiscard]] constexpr bool is_infinite() const noexcept { return exponent_ == 0; }
  /// The duration it stands for (zero for infinite()).
  [[nodiscard]] Duration duration() const noexcept;
  friend constexpr bool operator==(AckTimeout, AckTimeout) noexcept = default;

 private:
  struct Raw {
    std::uint8_t value;
  };
  constexpr explicit AckTimeout(Raw raw) noexcept : exponent_(raw.value) {}
  std::uint8_t exponent_;
};

/// How often a request is retransmitted after an ACK timeout before it fails with
/// retry_exceeded: 0..7 (7 is seven retries, not infinite, by the InfiniBand specification).
/// The default is 6, not 7: Soft-RoCE (rxe) takes 7 as "retry forever", so there a request to
/// a peer that has gone (its process killed, its queue pair destroyed) would never complete; it
/// would only end by the caller's timeout, and a handle dropped on it would wait the channel's
/// drop timeout. With 6 a vanished peer fails as retry_exceeded on every device.
class RetryCount {
 public:
  /// Throws ibv::Error (invalid_argument) above 7.
  explicit RetryCount(std::uint8_t count);
  /// 6 (see the class comment for why not 7).
  [[nodiscard]] static constexpr RetryCount default_value() noexcept { return RetryCount(Raw{6}); }
  /// The verbs value, 0..7.
  [[nodiscard]] constexpr std::uint8_t value() const noexcept { return count_; }
  friend constexpr bool operator==(RetryCount, RetryCount) noexcept = default;

 private:
  struct Raw {
    std::uint8_t value;
  };
  constexpr explicit RetryCount(Raw raw) noexcept : count_(raw.value) {}
  std::uint8_t count_;
};

/// How long a reliable queue pair keeps retrying a request its peer does not acknowledge before
/// the request fails with retry_exceeded: the ACK timeout times (retries + 1). Zero for
/// AckTimeout::infinite(). Devices round the timeout their own way (some wait up to twice as
/// long), so read it as "about". A peer that is alive but too busy to answer within it (more
/// busy-polling processes than cores) is reported gone all the same: docs/safety.md, "A live
/// peer reported gone".
[[nodiscard]] Duration retry_budget(AckTimeout timeout, RetryCount retries) noexcept;

/// How often a send is retried when the peer has no receive posted (RNR NAK) before it fails
/// with rnr_retry_exceeded: 0..6. The verbs value 7 means "retry forever" and is only available
/// as the explicitly named RnrRetryCount::infinite().
class RnrRetryCount {
 public:
  /// Throws ibv::Error (invalid_argument) above 6; use infinite() to mean 7.
  explicit RnrRetryCount(std::uint8_t count);
  /// Retry forever (verbs value 7): a peer that never posts a receive then hangs the sender.
  [[nodiscard]] static constexpr RnrRetryCount infinite() noexcept { return RnrRetryCount(Raw{7}); }
  /// 6 retries.
  [[nodiscard]] static constexpr RnrRetryCount default_value() noexcept {
    return RnrRetryCount(Raw{6});
  }
  /// The verbs value: 0..6, or 7 for infinite().
  [[nodiscard]] constexpr std::uint8_t value() const noexcept { return count_; }
  /// Whether this is infinite() (verbs value 7).
  [[nodiscard]] constexpr bool is_infinite() const noexcept { return count_ == 7; }
  friend constexpr bool operator==(RnrRetryCount, RnrRetryCount) noexcept = default;

 private:
  struct Raw {
    std::uint8_t value;
  };
  constexpr explicit RnrRetryCount(Raw raw) noexcept : count_(raw.value) {}
  std::uint8_t count_;
};

/// The RNR NAK timer this QP advertises as a receiver: how long a sender waits before retrying
/// a send that found no receive posted. One of the 32 values of the InfiniBand spec's table
/// (code 1 = 0.01 ms ... 31 = 491.52 ms; code 0 = 655.36 ms, the longest).
class RnrTimer {
 public:
  /// Code 0..31. Throws ibv::Error (invalid_argument) otherwise.
  explicit RnrTimer(std::uint8_t code);
  /// The shortest timer not shorter than `duration` (clamped to 655.36 ms; zero and negative
  /// durations give the shortest, code 1 = 0.01 ms).
  [[nodiscard]] static RnrTimer at_least(Duration duration);
  /// 16: 2.56 ms; with the default 6 RNR retries a missing receive fails in about 15 ms.
  [[nodiscard]] static constexpr RnrTimer default_value() noexcept { return RnrTimer(Raw{16}); }
  /// The verbs code, 0..31 (an index into the specification's table, not a duration).
  [[nodiscard]] constexpr std::uint8_t code() const noexcept { return code_; }
  /// The time the code stands for (0.01 ms .. 655.36 ms).
  [[nodiscard]] Duration duration() const noexcept;
  friend constexpr bool operator==(RnrTimer, RnrTimer) noexcept = default;

 private:
  struct Raw {
    std::uint8_t value;
  };
  constexpr explicit RnrTimer(Raw raw) noexcept : code_(raw.value) {}
  std::uint8_t code_;
};

/// Number of outstanding work requests a send or receive queue holds (at least 1; the device's
/// max_qp_wr is checked when the QP is built).
class QueueDepth {
 public:
  /// Throws ibv::Error (invalid_argument) for 0 or above 2^31 - 1.
  explicit QueueDepth(std::uint32_t entries);
  /// The number of entries, at least 1.
  [[nodiscard]] constexpr std::uint32_t value() const noexcept { return entries_; }
  friend bool operator==(QueueDepth, QueueDepth) noexcept = default;

 private:
  std::uint32_t entries_;
};

/// Most scatter/gather elements per work request (at least 1; the device's max_sge is checked
/// when the QP is built).
class SgeCount {
 public:
  /// Throws ibv::Error (invalid_argument) for 0 or above 2^31 - 1.
  explicit SgeCount(std::uint32_t count);
  /// The number of elements, at least 1.
  [[nodiscard]] constexpr std::uint32_t value() const noexcept { return count_; }
  friend bool operator==(SgeCount, SgeCount) noexcept = default;

 private:
  std::uint32_t count_;
};

/// Most bytes a send may carry inline (copied into the work request instead of read by DMA).
/// The device may grant more than asked; building fails if it cannot grant this much. Unset in
/// QueuePairSettings: the library asks for InlineSize::kDefault, and less if the device refuses
/// (see QueuePairSettings::max_inline_data).
class InlineSize {
 public:
  /// What an unset max_inline_data asks for first: perftest's default for RC write latency
  /// tests (220 bytes).
  static constexpr std::uint32_t kDefault = 220;

  /// Throws ibv::Error (invalid_argument) above 64 KiB, more than any device inlines.
  explicit InlineSize(std::uint32_t bytes);
  /// The number of bytes, 0..65536.
  [[nodiscard]] constexpr std::uint32_t value() const noexcept { return bytes_; }
  friend bool operator==(InlineSize, InlineSize) noexcept = default;

 private:
  std::uint32_t bytes_;
};

/// Outstanding RDMA reads and atomics per QP, as initiator (max_rd_atomic) or as responder
/// (max_dest_rd_atomic): 1..255, checked against the device when the QP is built.
class ReadAtomicDepth {
 public:
  /// Throws ibv::Error (invalid_argument) for 0.
  explicit ReadAtomicDepth(std::uint8_t depth);
  /// The depth, 1..255.
  [[nodiscard]] constexpr std::uint8_t value() const noexcept { return depth_; }
  friend bool operator==(ReadAtomicDepth, ReadAtomicDepth) noexcept = default;

 private:
  std::uint8_t depth_;
};

}  // namespace ibv
