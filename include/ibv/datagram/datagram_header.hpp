// SPDX-License-Identifier: MIT
// The small header a DatagramEndpoint puts before every payload (magic, version, per-sender
// sequence number), and the receiver's per-sender accounting of the sequence: gaps are loss.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace ibv {

/// The header before every DatagramEndpoint payload: 12 bytes, big-endian: magic 0x6944 (2),
/// version (1), reserved zero (1), sequence number (8). The sequence counts the datagrams one
/// sender's endpoint sent to one destination endpoint, from 0: the receiver sees a gap where
/// datagrams were lost (UD drops silently: no receive posted, a wrong Q_Key, a full queue).
struct DatagramHeader {
  /// Bytes on the wire.
  static constexpr std::size_t kSize = 12;
  /// The first two bytes of every datagram of ours.
  static constexpr std::uint16_t kMagic = 0x6944;
  /// The header's version.
  static constexpr std::uint8_t kVersion = 1;

  /// The datagram's number in its sender's stream to this receiver (0, 1, 2, ...).
  std::uint64_t sequence = 0;

  /// Writes the header into the first kSize bytes of `out`.
  void write(std::span<std::byte, kSize> out) const noexcept;
  /// The header at the start of `bytes`, or nullopt when they do not start with one of ours
  /// (shorter than kSize, another magic, another version, a non-zero reserved byte).
  [[nodiscard]] static std::optional<DatagramHeader> read(
      std::span<const std::byte> bytes) noexcept;
};

/// What a receiver counted of one sender's stream: datagrams received, lost (sequence numbers
/// skipped and not seen since) and late (a number below the one expected: arrived after a
/// later one, and taken back from lost).
struct SequenceCounts {
  std::uint64_t received = 0;       ///< Datagrams taken in order or after a gap.
  std::uint64_t lost = 0;           ///< Sequence numbers skipped, minus the late arrivals.
  std::uint64_t late = 0;           ///< Arrived with a number below the next expected.
  std::uint64_t next_expected = 0;  ///< The sequence number the next datagram should carry.
  friend bool operator==(const SequenceCounts&, const SequenceCounts&) noexcept = default;
};

/// The receiver's accounting of one sender's sequence numbers. Pure logic, no allocation.
class SequenceTracker {
 public:
  /// Records a datagram numbered `sequence` and returns how many datagrams were found lost just
  /// before it (the gap it closes: 0 when it came in order or late).
  std::uint64_t record(std::uint64_t sequence) noexcept;
  /// The counts so far.
  [[nodiscard]] const SequenceCounts& counts() const noexcept { return counts_; }

 private:
  SequenceCounts counts_;
};

}  // namespace ibv
