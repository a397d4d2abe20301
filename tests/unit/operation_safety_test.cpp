// SPDX-License-Identifier: MIT
// Tests that an operation value is safe to keep and to address to a peer, and takes only the
// options that can apply to it: it holds up to op::kInlineElements elements itself,
// refuses a temporary container it would have to point into; a MultiChannel takes only the peer
// forms of the operations on a peer's memory; a receive has no options, a read or atomic no
// inline data, a blocking call no `signaled`. What must not compile is checked with
// static_assert(!concept) (a concept's requires-expression may be invalid, a bare one may
// not), inside tests named for what they check: a static_assert in a function body is checked
// when this file compiles, so a promise broken there fails the build, and the pages name these
// tests beside the promises they back (scripts/check-promises). What is kept is checked under
// the sanitizer lanes as well (asan-unit), which would report a dangling element.
#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "ibv/channel/element_list.hpp"
#include "ibv/channel/operation.hpp"
#include "ibv/coro/async_multi_channel.hpp"
#include "ibv/error.hpp"
#include "ibv/multi_channel/multi_channel.hpp"
#include "ibv/multi_channel/peer_operation.hpp"

namespace {

using namespace ibv;

GatherElement gather(std::uint64_t address, std::uint32_t length = 8) {
  return GatherElement::from_raw(address, length, 7);
}
ScatterElement scatter(std::uint64_t address, std::uint32_t length = 8) {
  return ScatterElement::from_raw(address, length, 9);
}

const RemoteMemoryRegion kSafetyRemote(0x7f0000000000, 1 << 20, 0xabcdef);

// What must not compile is asked through these concepts: a requires-expression outside a
// template may not contain an invalid expression at all, one inside a concept is false.
template <typename Operation, typename... Parts>
concept makes = requires(Parts&&... parts) {
  Operation{std::forward<Parts>(parts)...};
};
template <typename Operation>
concept multi_executes = requires(MultiChannel& channels, const Operation& operation) {
  channels.execute(1U, operation);
};
template <typename Operation>
concept multi_posts = requires(MultiChannel& channels, const Operation& operation) {
  channels.post(1U, operation);
};
template <typename Operation>
concept multi_awaits = requires(MultiChannel& channels, const Operation& operation) {
  ibv::async(channels, 1U, operation);
};
template <typename Operations>
concept multi_scope_posts_all = requires(MultiChannelScope& scope, const Operations& operations) {
  scope.post_all(1U, operations);
};

// --- what an element list takes --------------------------------------------------------------

// Checked when this file compiles (the test only names the check).
TEST(ElementList, TakesWhatItCanHoldAndATemporaryItWouldPointIntoDoesNotCompile) {
  // Held in the value (copied): one element, a std::array of up to kInlineElements, temporary
  // or not.
  static_assert(std::is_constructible_v<op::GatherList, GatherElement>);
  static_assert(std::is_constructible_v<op::GatherList, std::array<GatherElement, 4>>);
  static_assert(std::is_constructible_v<op::GatherList, std::array<GatherElement, 4>&&>);
  static_assert(std::is_constructible_v<op::GatherList, const std::array<GatherElement, 1>&>);
  // Held by reference: a span, or a container that is not a temporary.
  static_assert(std::is_constructible_v<op::GatherList, std::span<const GatherElement>>);
  static_assert(std::is_constructible_v<op::GatherList, std::vector<GatherElement>&>);
  static_assert(std::is_constructible_v<op::GatherList, const std::vector<GatherElement>&>);
  static_assert(std::is_constructible_v<op::GatherList, std::array<GatherElement, 5>&>);
  // Refused: a temporary container it would have to point into.
  static_assert(!std::is_constructible_v<op::GatherList, std::vector<GatherElement>>);
  static_assert(!std::is_constructible_v<op::GatherList, std::vector<GatherElement>&&>);
  static_assert(!std::is_constructible_v<op::GatherList, const std::vector<GatherElement>&&>);
  static_assert(!std::is_constructible_v<op::GatherList, std::array<GatherElement, 5>>);
  // Copies that cannot throw (a vector of operations grows by copying them).
  static_assert(std::is_nothrow_copy_constructible_v<op::GatherList> &&
                std::is_nothrow_copy_constructible_v<op::Write>);
  // And the wrong kind of element, as before.
  static_assert(!std::is_constructible_v<op::GatherList, ScatterElement>);
  static_assert(!std::is_constructible_v<op::ScatterList, std::array<GatherElement, 2>>);
  static_assert(!std::is_constructible_v<op::ScatterList, std::vector<GatherElement>&>);
  // The operations take their lists the same way.
  static_assert(!makes<op::Write, std::vector<GatherElement>, RemoteMemoryRegion>);
  static_assert(!makes<op::Send, std::array<GatherElement, 5>>);
  static_assert(!makes<op::Receive, std::vector<ScatterElement>>);
  static_assert(makes<op::Write, std::array<GatherElement, 2>, RemoteMemoryRegion>);
  static_assert(makes<op::Write, std::vector<GatherElement>&, RemoteMemoryRegion>);
}

TEST(ElementList, HoldsUpToFourElementsItself) {
  const op::GatherList list(std::array{gather(0x10), gather(0x20), gather(0x30), gather(0x40)});
  EXPECT_TRUE(list.holds_inline());
  ASSERT_EQ(list.size(), 4U);
  EXPECT_EQ(list.span()[3].address(), 0x40U);
  const op::GatherList one(gather(0x50));
  EXPECT_TRUE(one.holds_inline());
  EXPECT_EQ(one.span().front().address(), 0x50U);
  EXPECT_TRUE(op::GatherList{}.empty());
}

TEST(ElementList, HoldsALongerListByReference) {
  const std::vector<GatherElement> many{gather(1), gather(2), gather(3), gather(4), gather(5)};
  const op::GatherList list(many);
  EXPECT_FALSE(list.holds_inline());
  EXPECT_EQ(list.span().data(), many.data());
  EXPECT_EQ(list.size(), 5U);
  // a span is the caller's too, whatever its length
  const op::GatherList two{std::span(many).first(2)};
  EXPECT_FALSE(two.holds_inline());
  EXPECT_EQ(two.span().data(), many.data());
}

TEST(ElementList, ACopyHoldsItsOwnElements) {
  std::optional<op::GatherList> original(std::array{gather(0x100), gather(0x200)});
  const op::GatherList copy = *original;
  op::GatherList assigned;
  assigned = *original;
  const auto* const original_data = original->span().data();
  original.reset();  // the copies must not point into it
  for (const op::GatherList* list : std::array<const op::GatherList*, 2>{&copy, &assigned}) {
    EXPECT_TRUE(list->holds_inline());
    EXPECT_NE(list->span().data(), original_data);
    ASSERT_EQ(list->size(), 2U);
    EXPECT_EQ(list->span()[1].address(), 0x200U);
  }
  // a list held by reference stays one in the copy
  const std::vector<GatherElement> many{gather(1), gather(2), gather(3), gather(4), gather(5)};
  const op::GatherList by_reference(many);
  op::GatherList reference_copy = by_reference;
  EXPECT_EQ(reference_copy.span().data(), many.data());
  reference_copy = op::GatherList(gather(7));  // and assigning an inline list makes it inline
  EXPECT_TRUE(reference_copy.holds_inline());
  EXPECT_EQ(reference_copy.span().front().address(), 7U);
}

// Operations made from temporary arrays, kept in a vector, posted
// later. Their requests name the elements held in the vector's values (under ASan a dangling
// element would be a stack-use-after-scope report here).
std::vector<op::AnySend> operations_from_temporaries() {
  std::vector<op::AnySend> operations;
  for (std::uint64_t i = 0; i < 3; ++i) {
    operations.emplace_back(op::Write{std::array{gather(0x1000 * (i + 1), 16)}, kSafetyRemote});
    operations.emplace_back(op::Send{std::array{gather(0x10 + i), gather(0x20 + i)}});
    operations.emplace_back(op::Read{std::array{scatter(0x9000 + i)}, kSafetyRemote});
  }
  return operations;
}

TEST(OperationValue, IsSafeToKeepInAVector) {
  const std::vector<op::AnySend> operations = operations_from_temporaries();
  ASSERT_EQ(operations.size(), 9U);
  for (std::uint64_t i = 0; i < 3; ++i) {
    const SendRequest write = operations[3 * i].request(1);
    ASSERT_EQ(write.element_count(), 1U);
    EXPECT_EQ(write.native().sg_list[0].addr, 0x1000 * (i + 1));
    EXPECT_EQ(write.native().sg_list[0].length, 16U);
    const SendRequest send = operations[3 * i + 1].request(2);
    ASSERT_EQ(send.element_count(), 2U);
    EXPECT_EQ(send.native().sg_list[1].addr, 0x20 + i);
    const SendRequest read = operations[3 * i + 2].request(3);
    EXPECT_EQ(read.native().sg_list[0].addr, 0x9000 + i);
    EXPECT_EQ(read.native().sg_list[0].lkey, 9U);
  }
}

// A request is made of an operation that outlives it: not of a temporary, whose elements would
// be gone before the request is posted.
template <typename Operation>
concept requests_of_temporary = requires(Operation&& operation, std::uint64_t wr_id) {
  std::move(operation).request(wr_id);
};
// Checked when this file compiles (the test only names the check).
TEST(OperationValue, ARequestOfATemporaryDoesNotCompile) {
  static_assert(!requests_of_temporary<op::Send> && !requests_of_temporary<op::Receive> &&
                !requests_of_temporary<op::Write> && !requests_of_temporary<op::AnySend>);
  static_assert(op::SendOperation<op::Send> && op::SendOperation<op::AnySend>);
}

// --- peer-addressed operations -----------------------------------------------------------------

const PeerRemoteMemoryRegion kPeer3(3, kSafetyRemote);

// Checked when this file compiles (the test only names the check).
TEST(PeerOperation, APlainRegionDoesNotCompileOnAMultiChannel) {
  // A MultiChannel takes the operations that name no peer memory, and the peer forms of the rest;
  // a plain RemoteMemoryRegion, which says no peer, is not one.
  static_assert(op::PeerOperation<op::Send> && op::PeerOperation<op::Receive>);
  static_assert(op::PeerOperation<op::PeerWrite> && op::PeerOperation<op::PeerRead> &&
                op::PeerOperation<op::PeerFetchAdd> && op::PeerOperation<op::PeerCompareSwap> &&
                op::PeerOperation<op::PeerAnySend>);
  static_assert(!op::PeerOperation<op::Write> && !op::PeerOperation<op::Read> &&
                !op::PeerOperation<op::FetchAdd> && !op::PeerOperation<op::CompareSwap> &&
                !op::PeerOperation<op::AnySend>);
  static_assert(!multi_executes<op::Write> && !multi_posts<op::Read> && !multi_awaits<op::Write> &&
                !multi_scope_posts_all<std::vector<op::AnySend>>);
  static_assert(multi_executes<op::PeerWrite> && multi_posts<op::PeerRead> &&
                multi_awaits<op::PeerWrite> && multi_scope_posts_all<std::vector<op::PeerAnySend>>);
  static_assert(multi_executes<op::Send> && multi_posts<op::Receive>);
  // A peer form does not take a plain region, nor a plain form a tagged one.
  static_assert(!makes<op::PeerWrite, GatherElement, RemoteMemoryRegion>);
  static_assert(!makes<op::Write, GatherElement, PeerRemoteMemoryRegion>);
}

TEST(PeerOperation, NamesTheOwnerOfItsRegion) {
  EXPECT_EQ(op::region_owner(op::PeerWrite{gather(1), kPeer3}), 3U);
  EXPECT_EQ(op::region_owner(op::PeerRead{scatter(1), kPeer3}), 3U);
  EXPECT_EQ(op::region_owner(op::PeerFetchAdd{scatter(1), kPeer3, 1}), 3U);
  EXPECT_EQ(op::region_owner(op::PeerCompareSwap{scatter(1), kPeer3, 1, 2}), 3U);
  EXPECT_EQ(op::region_owner(op::PeerAnySend{op::PeerWrite{gather(1), kPeer3}}), 3U);
  EXPECT_EQ(op::region_owner(op::Send{gather(1)}), std::nullopt);
  EXPECT_EQ(op::region_owner(op::PeerAnySend{op::Send{gather(1)}}), std::nullopt);
  EXPECT_EQ(op::region_owner(op::Receive{scatter(1)}), std::nullopt);
}

TEST(PeerOperation, PostsThePlainRegionOfItsTag) {
  const op::PeerWrite peer_write{gather(0x40, 8), kPeer3, 7U};
  const SendRequest write = peer_write.request(5);
  EXPECT_EQ(write.native().opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
  EXPECT_EQ(write.native().wr.rdma.remote_addr, kSafetyRemote.address());
  EXPECT_EQ(write.native().wr.rdma.rkey, kSafetyRemote.rkey());
  const op::PeerCompareSwap peer_swap{scatter(0x80), kPeer3, 1, 2};
  const SendRequest swap = peer_swap.request(6);
  EXPECT_EQ(swap.native().wr.atomic.remote_addr, kSafetyRemote.address());
  EXPECT_EQ(swap.native().wr.atomic.compare_add, 1U);
  EXPECT_EQ(swap.native().wr.atomic.swap, 2U);
}

// --- work to several peers: op::ToPeer, one vocabulary ----------------------------------------

template <typename Operations>
concept multi_posts_all = requires(MultiChannel& channels, const Operations& operations) {
  channels.post_all(operations);
};
template <typename Operations>
concept multi_scope_posts_all_addressed = requires(MultiChannelScope& scope,
                                                   const Operations& operations) {
  scope.post_all(operations);
};
template <typename Operation>
concept addressable = requires {
  typename op::ToPeer<Operation>;
};
// Checked when this file compiles (the test only names the check).
TEST(ToPeer, PostAllTakesOnlyRangesOfAddressedPeerOperations) {
  // post_all takes ranges of op::ToPeer, and a ToPeer only a peer operation.
  static_assert(op::Addressed<op::ToPeer<op::Send>> && !op::Addressed<op::Send>);
  static_assert(std::same_as<op::addressed_t<op::ToPeer<op::PeerRead>>, op::PeerRead>);
  static_assert(multi_posts_all<std::vector<op::ToPeer<op::PeerWrite>>> &&
                multi_posts_all<std::array<op::ToPeer<op::Receive>, 2>> &&
                multi_scope_posts_all_addressed<std::vector<op::ToPeer<op::Send>>>);
  static_assert(!multi_posts_all<std::vector<op::PeerWrite>> &&
                !multi_posts_all<std::vector<op::Send>>);
  static_assert(addressable<op::PeerWrite> && !addressable<op::Write>);
}

// The named calls are the Channel's alone (docs/operations.md): none on a MultiChannel, and no
// batch calls.
template <typename Multi>
concept named_multi_calls = requires(Multi& multi, std::span<const GatherElement> data) {
  multi.send(1U, data);
}
|| requires(Multi& multi, std::span<const GatherElement> data) { multi.post_send(1U, data); }
|| requires(Multi& multi, std::span<const std::uint32_t> peers,
            std::span<const GatherElement> data) {
  multi.multicast_send(peers, data);
}
|| requires(Multi& multi, std::span<const std::uint32_t> peers,
            std::span<const GatherElement> data) {
  multi.post_multicast_send(peers, data);
};
template <typename Scope>
concept named_scope_calls = requires(Scope& scope, std::span<const GatherElement> data) {
  scope.post_send(data);
};
template <typename Channel>
concept named_channel_calls = requires(Channel& channel, std::span<const GatherElement> data) {
  channel.send(data);
  channel.post_send(data);
};
// Checked when this file compiles (the test only names the check).
TEST(OperationVocabulary, TheNamedCallsAreTheChannelsAlone) {
  static_assert(!named_multi_calls<MultiChannel> && !named_multi_calls<MultiChannelScope>);
  static_assert(!named_scope_calls<ChannelScope>);
  static_assert(named_channel_calls<Channel>);  // the seed's vocabulary stays on the Channel
}

TEST(ToPeer, ToEachAddressesEveryRankOnceInOrder) {
  const std::array peers{2U, 0U, 5U};
  const auto addressed = op::to_each(peers, op::Send{gather(0x10, 4), 9U});
  ASSERT_EQ(addressed.size(), 3U);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    EXPECT_EQ(addressed[i].peer, peers[i]);
    EXPECT_EQ(addressed[i].operation.immediate, std::optional<std::uint32_t>(9U));
    EXPECT_EQ(addressed[i].operation.request(1).native().sg_list->addr, 0x10U);
  }
  // each element holds its own copy of the inline element
  EXPECT_NE(addressed[0].operation.data.span().data(), addressed[1].operation.data.span().data());
  EXPECT_TRUE(op::to_each(std::span<const std::uint32_t>{}, op::Send{gather(1)}).empty());
}

TEST(ToPeer, ToEachRefusesARankListedTwice) {
  try {
    (void)op::to_each(std::array{4U, 1U, 4U}, op::Receive{scatter(1)});
    FAIL() << "a rank listed twice was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(error.what()).find("peer 4"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("twice"), std::string::npos) << error.what();
  }
}

TEST(ToPeer, CarriesItsOperationsRegionOwner) {
  const op::ToPeer write{1U, op::PeerWrite{gather(1), kPeer3}};
  EXPECT_EQ(op::region_owner(write.operation), 3U);
  EXPECT_THROW(op::check_region_owner(write.operation, write.peer, "test"), Error);
  EXPECT_NO_THROW(op::check_region_owner(write.operation, 3U, "test"));
}

// --- options typed by what they can apply to ---------------------------------------------------

template <typename Operation>
concept posts_unsignaled = requires(Channel& channel, const Operation& operation) {
  channel.post(operation, {.signaled = false});
};
template <typename Operation>
concept posts_inline = requires(Channel& channel, const Operation& operation) {
  channel.post(operation, {.inline_data = InlinePolicy::always});
};
template <typename Operation>
concept executes_with_inline = requires(Channel& channel, const Operation& operation) {
  channel.execute(operation, {.inline_data = InlinePolicy::never});
};
template <typename Operation>
concept executes_unsignaled = requires(Channel& channel, const Operation& operation) {
  channel.execute(operation, {.signaled = false});
};
template <typename Operation>
concept awaits_unsignaled = requires(Channel& channel, const Operation& operation) {
  ibv::async(channel, operation, {.signaled = false});
};
template <typename Operation>
concept scope_posts_unsignaled = requires(ChannelScope& scope, const Operation& operation) {
  scope.post(operation, {.signaled = false});
};
template <typename Operations>
concept scope_posts_all_inline = requires(ChannelScope& scope, const Operations& operations) {
  scope.post_all(operations, {.inline_data = InlinePolicy::never});
};
template <typename Operations>
concept scope_posts_all_unsignaled = requires(ChannelScope& scope, const Operations& operations) {
  scope.post_all(operations, {.signaled = false});
};

template <typename Operation>
concept multi_executes_unsignaled = requires(MultiChannel& channels, const Operation& operation) {
  channels.execute(1U, operation, {.signaled = false});
};
template <typename Operation>
concept multi_executes_with_inline = requires(MultiChannel& channels, const Operation& operation) {
  channels.execute(1U, operation, {.inline_data = InlinePolicy::never});
};
template <typename Operation>
concept multi_awaits_unsignaled = requires(MultiChannel& channels, const Operation& operation) {
  ibv::async(channels, 1U, operation, {.signaled = false});
};
template <typename Operation>
concept multi_awaits_with_inline = requires(MultiChannel& channels, const Operation& operation) {
  ibv::async(channels, 1U, operation, {.inline_data = InlinePolicy::never});
};

// Checked when this file compiles (the test only names the check).
TEST(OperationOptions, ABlockingOrCoroutineCallWithSignaledDoesNotCompile) {
  // Unsignaled work cannot go to a blocking or coroutine call (it waits for its own
  // completion); sends and writes there take the inline choice, other operations no options.
  static_assert(!executes_unsignaled<op::Write> && !executes_unsignaled<op::Send> &&
                !awaits_unsignaled<op::Write> && !awaits_unsignaled<op::Send>);
  static_assert(executes_with_inline<op::Write> && executes_with_inline<op::Send>);
  static_assert(!executes_with_inline<op::Read> && !executes_with_inline<op::FetchAdd> &&
                !executes_with_inline<op::Receive>);
  // The same on a MultiChannel, blocking and as a coroutine.
  static_assert(!multi_executes_unsignaled<op::PeerWrite> && !multi_executes_unsignaled<op::Send> &&
                !multi_awaits_unsignaled<op::PeerWrite> && !multi_awaits_unsignaled<op::Send>);
  static_assert(multi_executes_with_inline<op::PeerWrite> && multi_executes_with_inline<op::Send> &&
                multi_awaits_with_inline<op::PeerWrite>);
}

// A type of the caller's takes every option (checked when posted), or what it declares.
struct OwnWrite {
  RemoteMemoryRegion destination;
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return SendRequest::write(wr_id, {}, destination);
  }
};
struct OwnRead {
  using Options = SignalingOptions;
  RemoteMemoryRegion source;
  [[nodiscard]] SendRequest request(std::uint64_t wr_id) const noexcept {
    return SendRequest::read(wr_id, {}, source);
  }
};

// Checked when this file compiles (the test only names the check).
TEST(OperationOptions, AnOptionThatCannotApplyToThePostDoesNotCompile) {
  // A receive has no options: neither signaled nor inline.
  static_assert(std::is_empty_v<ReceiveOptions>);
  static_assert(!posts_unsignaled<op::Receive> && !posts_inline<op::Receive>);
  static_assert(!scope_posts_unsignaled<op::Receive> && scope_posts_unsignaled<op::Write>);
  // A read or an atomic cannot ask for inline data; it may be unsignaled when not waited for.
  static_assert(!posts_inline<op::Read> && !posts_inline<op::FetchAdd> &&
                !posts_inline<op::CompareSwap> && !posts_inline<op::PeerRead>);
  static_assert(posts_unsignaled<op::Read> && posts_unsignaled<op::FetchAdd> &&
                posts_unsignaled<op::CompareSwap>);
  // Sends and writes take both when posted.
  static_assert(posts_unsignaled<op::Write> && posts_inline<op::Write> && posts_inline<op::Send>);
  // A mixed list takes only what every alternative takes: signaled or not, no inline choice.
  static_assert(std::same_as<op::options_t<op::AnySend>, SignalingOptions>);
  static_assert(!scope_posts_all_inline<std::vector<op::AnySend>> &&
                scope_posts_all_unsignaled<std::vector<op::AnySend>>);
  static_assert(scope_posts_all_inline<std::vector<op::Write>>);
  // A type of the caller's: every option, or what it declares.
  static_assert(posts_inline<OwnWrite> && !posts_inline<OwnRead> && posts_unsignaled<OwnRead>);
}

}  // namespace
