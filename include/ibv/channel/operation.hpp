// SPDX-License-Identifier: MIT
// Operations as values: one type per thing a channel can be asked to do (send, receive, write,
// read, fetch-and-add, compare-and-swap), immediate data an optional field. Every style of
// posting (Channel::execute and post, a scope's post, MultiChannel's peer-addressed calls, the
// coroutine calls) takes any of them, so an operation is written once (see docs/operations.md).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <variant>

#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_request.hpp"

namespace ibv::op {

/// A two-sided send of `data` (gathered in order) into a receive the peer posted; with
/// `immediate`, the peer's receive completion carries it (host byte order on both sides).
struct Send {
  /// What to send; the memory must stay registered and unchanged until the send completes.
  std::span<const GatherElement> data;
  /// Immediate data for the peer's receive completion, if any.
  std::optional<std::uint32_t> immediate = std::nullopt;

  /// The signaled send request under `wr_id` (SendOperation).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return immediate ? SendRequest::send_with_immediate(wr_id, data, *immediate)
                     : SendRequest::send(wr_id, data);
  }
};

/// One incoming message into `into` (empty for messages that carry only immediate data).
struct Receive {
  /// Where the message goes, scattered in order; must stay registered until it completes.
  std::span<const ScatterElement> into;

  /// The receive request under `wr_id`.
  [[nodiscard]] ReceiveRequest request(std::uint64_t wr_id) const noexcept { return {wr_id, into}; }
};

/// A one-sided write of `data` into the peer's `destination`; with `immediate`, it also
/// consumes a receive of the peer, whose completion carries the immediate.
struct Write {
  /// What to write, gathered in order.
  std::span<const GatherElement> data;
  /// Where in the peer's memory: its start address and rkey (at least as long as `data`).
  RemoteMemoryRegion destination;
  /// Immediate data that makes it consume a peer's receive, if any.
  std::optional<std::uint32_t> immediate = std::nullopt;

  /// The signaled write request under `wr_id` (SendOperation).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return immediate ? SendRequest::write_with_immediate(wr_id, data, destination, *immediate)
                     : SendRequest::write(wr_id, data, destination);
  }
};

/// A one-sided read of the peer's `source` into `into` (scattered in order).
struct Read {
  /// Where the data goes locally, scattered in order.
  std::span<const ScatterElement> into;
  /// What to read from the peer's memory (at least as long as `into`).
  RemoteMemoryRegion source;

  /// The signaled read request under `wr_id` (SendOperation).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return SendRequest::read(wr_id, into, source);
  }
};

/// Atomically adds `add` (modulo 2^64) to the 8-byte word at the start of `target` and writes
/// the word's value from before into `result`, one registered element of exactly 8 bytes.
/// Contract, checks and byte order: Channel::fetch_add.
struct FetchAdd {
  /// Receives the word's old value: one registered element of exactly 8 bytes.
  ScatterElement result;
  /// The peer's 8-byte-aligned word (the region's start), registered with atomic access.
  RemoteMemoryRegion target;
  /// What to add, modulo 2^64, in host byte order.
  std::uint64_t add = 0;

  /// The request refers to `result`: this operation must outlive the post.
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return SendRequest::fetch_add(wr_id, result, target, add);
  }
};

/// Atomically replaces the 8-byte word at the start of `target` with `desired` if it equals
/// `expected`, and writes the word's value from before into `result` either way (the swap
/// happened iff the result equals `expected`). Otherwise as FetchAdd.
struct CompareSwap {
  /// Receives the word's old value: one registered element of exactly 8 bytes.
  ScatterElement result;
  /// The peer's 8-byte-aligned word (the region's start), registered with atomic access.
  RemoteMemoryRegion target;
  /// The value the word must hold for the swap.
  std::uint64_t expected = 0;
  /// The value it gets if it does.
  std::uint64_t desired = 0;

  /// The request refers to `result`: this operation must outlive the post.
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return SendRequest::compare_swap(wr_id, result, target, expected, desired);
  }
};

/// An operation of the send queue: anything that makes a SendRequest under a wr_id the channel
/// chooses. The six above, or a type of your own (e.g. with fence() or solicited() set).
template <typename T>
concept SendOperation = requires(const T& operation, std::uint64_t wr_id) {
  { operation.request(wr_id) } -> std::same_as<SendRequest>;
};

/// Any one of the five send-queue operations, for a list that mixes them in one doorbell, e.g.
/// the writes of a block and then the send that tells the peer it is there:
///
///     std::vector<op::AnySend> list{op::Write{a, ra}, op::Write{b, rb}, op::Send{note}};
///     scope.post_all(list);
///
/// The queue pair runs them in list order: when the peer's receive completes for the send, the
/// writes before it have landed. A FetchAdd's or CompareSwap's request refers to its `result`
/// inside the AnySend, which must outlive the post.
struct AnySend {
  /// The operation it holds.
  std::variant<Send, Write, Read, FetchAdd, CompareSwap> operation;

  /// Holds `alternative` (implicit, so that a braced list of mixed operations reads as one).
  template <typename Alternative>
  requires std::constructible_from<decltype(operation), Alternative> AnySend(
      Alternative alternative)
  noexcept                                    // NOLINT(google-explicit-constructor): a list of
      : operation(std::move(alternative)) {}  // mixed operations reads as one

  /// Not noexcept: std::visit may throw bad_variant_access (never for these alternatives,
  /// whose copies cannot throw, but the type does not say so).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const {
    return std::visit([wr_id](const auto& alternative) { return alternative.request(wr_id); },
                      operation);
  }
};

/// Any operation a channel takes: a send-queue operation or a Receive.
template <typename T>
concept Operation = SendOperation<T> || std::same_as<T, Receive>;

}  // namespace ibv::op
