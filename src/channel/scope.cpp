// SPDX-License-Identifier: MIT
// Scopes: posting inside a Channel scope, and ScopeWork, which waits for a scope's requests at
// its end and turns what it found into BatchError or a manual scope's complaint.
#include "ibv/channel/scope.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <new>
#include <string>

#include "channel/channel_core.hpp"

namespace ibv {
namespace {

std::string on_peer(const std::optional<std::uint32_t>& peer) {
  return peer ? "peer " + std::to_string(*peer) + ": " : std::string();
}

/// "2 request(s) failed: [peer 1: ...] [...]; 1 request(s) did not complete in time ...".
std::string describe(std::string_view body_message, const detail::DrainResult& result) {
  std::string text;
  if (!body_message.empty()) text += "the body threw: " + std::string(body_message);
  if (!result.failed.empty()) {
    if (!text.empty()) text += "; ";
    text += std::to_string(result.failed.size()) + " request(s) failed:";
    for (std::size_t i = 0; i < result.failed.size(); ++i) {
      text += " [" + on_peer(result.failed_peers[i]) + result.failed[i].to_string() + "]";
    }
  }
  if (!result.timed_out.empty()) {
    if (!text.empty()) text += "; ";
    text += std::to_string(result.timed_out.size()) +
            " request(s) did not complete in time (cancelled: the channel's queue pair is now "
            "in the error state and the channel refuses further work):";
    for (std::size_t i = 0; i < result.timed_out.size(); ++i) {
      text += " [" + on_peer(result.timed_out_peers[i]) + "wr_id " +
              std::to_string(result.timed_out[i]) + "]";
    }
  }
  return text;
}

std::string message_of(const std::exception_ptr& error) {
  if (!error) return {};
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    return exception.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

/// close()'s verdict on a manual scope: empty when the caller polled everything.
std::string manual_scope_problem(const detail::DrainResult& result) {
  if (result.unpolled.empty()) return {};
  std::string text =
      std::to_string(result.unpolled.size()) + " request(s) left unpolled in a manual scope (";
  for (std::size_t i = 0; i < result.unpolled.size(); ++i) {
    if (i > 0) text += ", ";
    text += on_peer(result.unpolled_peers[i]) + "wr_id " + std::to_string(result.unpolled[i]);
  }
  text += "); they have been waited for now";
  if (!result.failed.empty() || !result.timed_out.empty()) {
    text += ": " + describe({}, result);
  }
  return text;
}

[[noreturn]] void throw_batch_error(std::string_view operation, const std::exception_ptr& body,
                                    detail::DrainResult& result) {
  const std::string description = describe(message_of(body), result);
  throw BatchError(operation, body, std::move(result.failed), std::move(result.timed_out),
                   description);
}

}  // namespace

namespace detail {

PendingWork& ScopeWork::keep(PendingWork work, std::optional<std::uint32_t> peer) {
  if (inline_count_ < kInline) {
    return std::construct_at(&inline_[inline_count_++].kept, Kept{std::move(work), peer})->work;
  }
  if (!spilled_) spilled_ = std::make_unique<std::deque<Kept>>();
  return spilled_->emplace_back(Kept{std::move(work), peer}).work;
}

PendingWork& ScopeWork::keep_spilled(ChannelCore& core, std::uint64_t wr_id,
                                     std::optional<std::uint32_t> peer) {
  return keep(PendingWork(core, wr_id), peer);
}

[[gnu::always_inline]] inline void ScopeWork::destroy_kept() noexcept {
  for (std::size_t i = 0; i < inline_count_; ++i) std::destroy_at(&inline_[i].kept);
  inline_count_ = 0;
  folded_ = 0;
  if (spilled_) [[unlikely]]
    spilled_.reset();
}

void ScopeWork::forget_all() noexcept { destroy_kept(); }

void ScopeWork::settle(Kept& kept, std::chrono::nanoseconds timeout, DrainResult& result,
                       std::string_view operation) {
  try {
    if (kept.work.wait_for(timeout)) return;
    result.timed_out.push_back(kept.work.wr_id());
    result.timed_out_peers.push_back(kept.peer);
    kept.work.cancel(operation, timed_out("a scope's request", kept.work.wr_id(), timeout));
  } catch (const WorkError& error) {
    result.failed.push_back(error.completion());
    result.failed_peers.push_back(kept.peer);
  }
}

[[gnu::always_inline]] inline bool ScopeWork::settled_quickly(PendingWork& work) {
  ChannelCore* core = work.core_.get();
  if (core == nullptr) return true;  // moved out of the scope: its new owner's business
  if (!core->settle_if_succeeded(work.wr_id_)) return false;
  work.forget_core();
  return true;
}

void ScopeWork::drain(DrainResult& result, std::string_view operation, bool note_unpolled) {
  for_each([&](Kept& kept) {
    // a request the caller saw complete, or moved out of the scope: the caller's business
    if (kept.work.is_complete() || !kept.work.core_) return;
    if (note_unpolled) {
      result.unpolled.push_back(kept.work.wr_id());
      result.unpolled_peers.push_back(kept.peer);
    } else if (settled_quickly(kept.work)) {
      return;
    }
    settle(kept, kept.work.operation_timeout(), result, operation);
  });
  clear();  // every handle is settled or cancelled: their destructors do not wait
}

[[gnu::always_inline]] inline bool ScopeWork::drain_quickly() {
  bool all = true;
  for_each([&](Kept & kept) __attribute__((always_inline)) {
    if (all && !kept.work.is_complete()) all = settled_quickly(kept.work);
  });
  return all;
}

void ScopeWork::finish(std::string_view operation, const std::exception_ptr& body_error) {
  // The common case: every request succeeded by now, or does at the first poll. No DrainResult,
  // no wait, no copy of a completion.
  if (drain_quickly()) {
    destroy_kept();
    if (body_error) std::rethrow_exception(body_error);
    return;
  }
  finish_slowly(operation, body_error);
}

void ScopeWork::finish_slowly(std::string_view operation, const std::exception_ptr& body_error) {
  DrainResult result;  // unpolled requests are normal here: the scope waits for them
  drain(result, operation, false);
  if (result.failed.empty() && result.timed_out.empty()) {
    if (body_error) std::rethrow_exception(body_error);
    return;
  }
  throw_batch_error(operation, body_error, result);
}

void ScopeWork::finish_unfinished(std::string_view operation) noexcept {
  try {
    finish(operation, nullptr);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ibverbs-cpp: %.*s: %s\n", static_cast<int>(operation.size()),
                 operation.data(), error.what());
  }
}

void ScopeWork::close(std::string_view operation) {
  DrainResult result;
  drain(result, operation);
  if (const auto problem = manual_scope_problem(result); !problem.empty()) {
    throw Error(ErrorKind::state, operation, EINVAL, problem,
                "a manual scope expects every request to be polled or waited on; use a scope "
                "with a body (scope([&](auto& s) { ... })) to have the scope wait for you");
  }
}

void ScopeWork::abandon(std::string_view operation) noexcept {
  DrainResult result;
  try {
    drain(result, operation);
    if (const auto problem = manual_scope_problem(result); !problem.empty()) {
      std::fprintf(stderr, "ibverbs-cpp: BUG: %s (%.*s destroyed without close())\n",
                   problem.c_str(), static_cast<int>(operation.size()), operation.data());
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ibverbs-cpp: %.*s: %s\n", static_cast<int>(operation.size()),
                 operation.data(), error.what());
  }
}

PendingWork& ScopeBase::post_request(SendRequest& request, PostOptions options) {
  return work_.keep(*core_, core_->post_send(request, options));
}

PendingWork& ScopeBase::post(const op::Receive& operation, ReceiveOptions /*options*/) {
  return work_.keep(*core_, core_->post_receive(operation.into.span()));
}

std::span<SendRequest> ListPoster::send_list_storage() noexcept {
  return core_.send_list_storage();
}

std::span<ReceiveRequest> ListPoster::receive_list_storage() noexcept {
  return core_.receive_list_storage();
}

void ListPoster::check_request(SendRequest& request, PostOptions options) const {
  apply_inline(request, options.inline_data, core_.queue_pair().max_inline_data());
  core_.queue_pair().check(request);
}

void ListPoster::check_request(const ReceiveRequest& request) const {
  core_.queue_pair().check(request);
}

void ListPoster::post_list(std::span<SendRequest> requests, PostOptions options) {
  core_.post_send_list(requests, options, [this](std::uint64_t id, std::uint32_t folded) {
    work_.keep(core_, id, peer_, folded);
  });
}

void ListPoster::post_list(std::span<ReceiveRequest> requests) {
  core_.post_receive_list(requests, [this](std::uint64_t id, std::uint32_t folded) {
    work_.keep(core_, id, peer_, folded);
  });
}

}  // namespace detail

ManualScope::ManualScope(detail::CoreOwner core) noexcept : ScopeBase(std::move(core)) {}

void ManualScope::close() {
  if (closed_) return;
  closed_ = true;
  work_.close("ManualScope::close");
}

ManualScope::~ManualScope() {
  if (closed_) return;
  closed_ = true;
  work_.abandon("ManualScope");
}

}  // namespace ibv
