// SPDX-License-Identifier: MIT
// Operations as values: one type per thing a channel can be asked to do (send, receive, write,
// read, fetch-and-add, compare-and-swap), immediate data an optional field. Every style of
// posting (Channel::execute and post, a scope's post, MultiChannel's peer-addressed calls, the
// coroutine calls) takes any of them, so an operation is written once (see docs/operations.md).
// A value is safe to keep: it holds its elements (ElementList). The operations on the peer's
// memory take the region's type as a parameter: RemoteMemoryRegion on a Channel, the
// peer-tagged PeerRemoteMemoryRegion on a MultiChannel (ibv/multi_channel/peer_operation.hpp).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <variant>

#include "ibv/channel/element_list.hpp"
#include "ibv/channel/post_options.hpp"
#include "ibv/verbs/remote_memory_region.hpp"
#include "ibv/verbs/scatter_gather.hpp"
#include "ibv/verbs/work_request.hpp"

namespace ibv::op {

/// A region of a peer's memory as an operation names it: a RemoteMemoryRegion, or a type that
/// tags one (PeerRemoteMemoryRegion), whose region() is what is posted.
template <typename Region>
concept RemoteRegion = std::same_as<Region, RemoteMemoryRegion> || requires(const Region& region) {
  { region.region() } -> std::same_as<const RemoteMemoryRegion&>;
};

namespace detail {
/// The RemoteMemoryRegion that `region` names (itself, or the region a tag holds).
template <RemoteRegion Region>
[[nodiscard]] constexpr const RemoteMemoryRegion& posted_region(const Region& region) noexcept {
  if constexpr (std::same_as<Region, RemoteMemoryRegion>) {
    return region;
  } else {
    return region.region();
  }
}
}  // namespace detail

/// What is sent or written: up to kInlineElements held in the value, more the caller's.
using GatherList = ElementList<GatherElement>;
/// Where data lands: as GatherList.
using ScatterList = ElementList<ScatterElement>;

/// A two-sided send of `data` (gathered in order) into a receive the peer posted; with
/// `immediate`, the peer's receive completion carries it (host byte order on both sides).
struct Send {
  /// What to send; the memory must stay registered and unchanged until the send completes.
  GatherList data;
  /// Immediate data for the peer's receive completion, if any.
  std::optional<std::uint32_t> immediate = std::nullopt;

  /// The signaled send request under `wr_id` (SendOperation).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const& noexcept {
    return immediate ? SendRequest::send_with_immediate(wr_id, data.span(), *immediate)
                     : SendRequest::send(wr_id, data.span());
  }
  /// Not of a temporary: the request names elements the operation holds.
  SendRequest request(std::uint64_t wr_id) const&& = delete;
};

/// One incoming message into `into` (empty for messages that carry only immediate data).
struct Receive {
  /// Where the message goes, scattered in order; must stay registered until it completes.
  ScatterList into;

  /// The receive request under `wr_id`.
  [[nodiscard]] ReceiveRequest request(std::uint64_t wr_id) const& noexcept {
    return {wr_id, into.span()};
  }
  /// Not of a temporary: the request names elements the operation holds.
  ReceiveRequest request(std::uint64_t wr_id) const&& = delete;
};

/// A one-sided write of `data` into the peer's `destination`; with `immediate`, it also
/// consumes a receive of the peer, whose completion carries the immediate. `Region`: see
/// RemoteRegion (Write on a Channel, PeerWrite on a MultiChannel).
template <RemoteRegion Region>
struct BasicWrite {
  /// What to write, gathered in order.
  GatherList data;
  /// Where in the peer's memory: its start address and rkey (at least as long as `data`).
  Region destination;
  /// Immediate data that makes it consume a peer's receive, if any.
  std::optional<std::uint32_t> immediate = std::nullopt;

  /// The signaled write request under `wr_id` (SendOperation).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const& noexcept {
    const RemoteMemoryRegion& region = detail::posted_region(destination);
    return immediate ? SendRequest::write_with_immediate(wr_id, data.span(), region, *immediate)
                     : SendRequest::write(wr_id, data.span(), region);
  }
  /// Not of a temporary: the request names elements the operation holds.
  SendRequest request(std::uint64_t wr_id) const&& = delete;
  /// The peer's memory it names (what a MultiChannel checks against the peer addressed).
  [[nodiscard]] const Region& remote_region() const noexcept { return destination; }
};
/// A write on a Channel.
using Write = BasicWrite<RemoteMemoryRegion>;

/// A one-sided read of the peer's `source` into `into` (scattered in order).
template <RemoteRegion Region>
struct BasicRead {
  /// Where the data goes locally, scattered in order.
  ScatterList into;
  /// What to read from the peer's memory (at least as long as `into`).
  Region source;

  /// The signaled read request under `wr_id` (SendOperation).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const& noexcept {
    return SendRequest::read(wr_id, into.span(), detail::posted_region(source));
  }
  /// Not of a temporary: the request names elements the operation holds.
  SendRequest request(std::uint64_t wr_id) const&& = delete;
  /// The peer's memory it names.
  [[nodiscard]] const Region& remote_region() const noexcept { return source; }
};
/// A read on a Channel.
using Read = BasicRead<RemoteMemoryRegion>;

/// Atomically adds `add` (modulo 2^64) to the 8-byte word at the start of `target` and writes
/// the word's value from before into `result`, one registered element of exactly 8 bytes.
/// Contract, checks and byte order: Channel::fetch_add.
template <RemoteRegion Region>
struct BasicFetchAdd {
  /// Receives the word's old value: one registered element of exactly 8 bytes.
  ScatterElement result;
  /// The peer's 8-byte-aligned word (the region's start), registered with atomic access.
  Region target;
  /// What to add, modulo 2^64, in host byte order.
  std::uint64_t add = 0;

  /// The request refers to `result`: this operation must outlive the post.
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const& noexcept {
    return SendRequest::fetch_add(wr_id, result, detail::posted_region(target), add);
  }
  /// Not of a temporary: the request names elements the operation holds.
  SendRequest request(std::uint64_t wr_id) const&& = delete;
  /// The peer's memory it names.
  [[nodiscard]] const Region& remote_region() const noexcept { return target; }
};
/// A fetch-and-add on a Channel.
using FetchAdd = BasicFetchAdd<RemoteMemoryRegion>;

/// Atomically replaces the 8-byte word at the start of `target` with `desired` if it equals
/// `expected`, and writes the word's value from before into `result` either way (the swap
/// happened iff the result equals `expected`). Otherwise as FetchAdd.
template <RemoteRegion Region>
struct BasicCompareSwap {
  /// Receives the word's old value: one registered element of exactly 8 bytes.
  ScatterElement result;
  /// The peer's 8-byte-aligned word (the region's start), registered with atomic access.
  Region target;
  /// The value the word must hold for the swap.
  std::uint64_t expected = 0;
  /// The value it gets if it does.
  std::uint64_t desired = 0;

  /// The request refers to `result`: this operation must outlive the post.
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const& noexcept {
    return SendRequest::compare_swap(wr_id, result, detail::posted_region(target), expected,
                                     desired);
  }
  /// Not of a temporary: the request names elements the operation holds.
  SendRequest request(std::uint64_t wr_id) const&& = delete;
  /// The peer's memory it names.
  [[nodiscard]] const Region& remote_region() const noexcept { return target; }
};
/// A compare-and-swap on a Channel.
using CompareSwap = BasicCompareSwap<RemoteMemoryRegion>;

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
/// writes before it have landed. A request refers to the elements inside the AnySend, which
/// must outlive the post. `Region` as the operations' (AnySend on a Channel, PeerAnySend on a
/// MultiChannel).
template <RemoteRegion Region>
struct BasicAnySend {
  /// The operation it holds.
  std::variant<Send, BasicWrite<Region>, BasicRead<Region>, BasicFetchAdd<Region>,
               BasicCompareSwap<Region>>
      operation;

  /// Holds `alternative` (implicit, so that a braced list of mixed operations reads as one).
  template <typename Alternative>
  requires std::constructible_from<decltype(operation), Alternative> BasicAnySend(
      Alternative alternative)
  noexcept                                    // NOLINT(google-explicit-constructor): a list of
      : operation(std::move(alternative)) {}  // mixed operations reads as one

  /// Not noexcept: std::visit may throw bad_variant_access (never for these alternatives,
  /// whose copies cannot throw, but the type does not say so).
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const& {
    return std::visit([wr_id](const auto& alternative) { return alternative.request(wr_id); },
                      operation);
  }
  /// Not of a temporary: the request names elements the operation holds.
  SendRequest request(std::uint64_t wr_id) const&& = delete;
};
/// Mixed send-queue operations on a Channel.
using AnySend = BasicAnySend<RemoteMemoryRegion>;

/// Any operation a channel takes: a send-queue operation or a Receive.
template <typename T>
concept Operation = SendOperation<T> || std::same_as<T, Receive>;

namespace detail {
/// options_t's table. A type of your own: its `Options` if it declares one, else PostOptions
/// (every option, checked against the request when it is posted).
template <typename T>
struct options_of {
  using type = PostOptions;
};
template <typename T>
requires requires { typename T::Options; }
struct options_of<T> {
  using type = typename T::Options;
};
template <>
struct options_of<Receive> {
  using type = ReceiveOptions;
};
template <typename Region>
struct options_of<BasicRead<Region>> {
  using type = SignalingOptions;
};
template <typename Region>
struct options_of<BasicFetchAdd<Region>> {
  using type = SignalingOptions;
};
template <typename Region>
struct options_of<BasicCompareSwap<Region>> {
  using type = SignalingOptions;
};
template <typename Region>
struct options_of<BasicAnySend<Region>> {  // what every alternative takes
  using type = SignalingOptions;
};
}  // namespace detail

/// The options an unpolled or scoped post of `T` takes (post_options.hpp): PostOptions for a
/// send or write, SignalingOptions for a read, an atomic or a mixed list, ReceiveOptions
/// (none) for a receive. An option that cannot apply does not compile (test:
/// `OperationOptions.AnOptionThatCannotApplyToThePostDoesNotCompile`).
template <typename T>
using options_t = typename detail::options_of<T>::type;

/// An operation whose data may go inline (a send or write): a blocking or coroutine call of it
/// takes InlineOptions; other operations take no options there.
template <typename T>
concept InlineCapable = SendOperation<T> && std::same_as<options_t<T>, PostOptions>;

}  // namespace ibv::op
