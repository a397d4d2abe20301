// ChannelScope and ScopeError: posting inside a scope, and draining everything at its exit.
#include "ibv/channel/scope.hpp"

#include <cerrno>
#include <cstdio>
#include <string>

#include "channel/channel_core.hpp"

namespace ibv {
namespace {

std::string describe(std::string_view body_message, const std::vector<WorkCompletion>& failed,
                     const std::vector<std::uint64_t>& timed_out) {
  std::string text;
  if (!body_message.empty()) text += "the body threw: " + std::string(body_message);
  if (!failed.empty()) {
    if (!text.empty()) text += "; ";
    text += std::to_string(failed.size()) + " request(s) failed at the scope's exit:";
    for (const auto& completion : failed) text += " [" + completion.to_string() + "]";
  }
  if (!timed_out.empty()) {
    if (!text.empty()) text += "; ";
    text += std::to_string(timed_out.size()) + " request(s) did not complete in time (orphaned):";
    for (const auto id : timed_out) text += " wr_id " + std::to_string(id);
  }
  return text;
}

}  // namespace

ScopeError::ScopeError(std::exception_ptr body_error, std::vector<WorkCompletion> failed,
                       std::vector<std::uint64_t> timed_out, std::string_view body_message)
    : Error(timed_out.empty() ? ErrorKind::driver : ErrorKind::timeout, "Channel::scope", EIO,
            describe(body_message, failed, timed_out)),
      body_error_(std::move(body_error)),
      failed_(std::move(failed)),
      timed_out_(std::move(timed_out)) {}

namespace detail {

ScopeBase::ScopeBase(std::shared_ptr<ChannelCore> core) noexcept : core_(std::move(core)) {}

PendingWork& ScopeBase::keep(PendingWork work) { return work_.emplace_back(std::move(work)); }

PendingWork& ScopeBase::post_send(std::span<const GatherElement> data, PostOptions options) {
  return keep(post(
      core_, [&](std::uint64_t id) { return SendRequest::send(id, data); }, options));
}

PendingWork& ScopeBase::post_send_with_immediate(std::span<const GatherElement> data,
                                                 std::uint32_t immediate, PostOptions options) {
  return keep(post(
      core_,
      [&](std::uint64_t id) { return SendRequest::send_with_immediate(id, data, immediate); },
      options));
}

PendingWork& ScopeBase::post_receive(std::span<const ScatterElement> into) {
  return keep({core_, core_->post_receive(into)});
}

PendingWork& ScopeBase::post_write(std::span<const GatherElement> data,
                                   const RemoteMemoryRegion& destination, PostOptions options) {
  return keep(post(
      core_, [&](std::uint64_t id) { return SendRequest::write(id, data, destination); }, options));
}

PendingWork& ScopeBase::post_write_with_immediate(std::span<const GatherElement> data,
                                                  const RemoteMemoryRegion& destination,
                                                  std::uint32_t immediate, PostOptions options) {
  return keep(post(
      core_,
      [&](std::uint64_t id) {
        return SendRequest::write_with_immediate(id, data, destination, immediate);
      },
      options));
}

PendingWork& ScopeBase::post_read(std::span<const ScatterElement> into,
                                  const RemoteMemoryRegion& source, PostOptions options) {
  return keep(post(
      core_, [&](std::uint64_t id) { return SendRequest::read(id, into, source); }, options));
}

void ScopeBase::drain(DrainResult& result) {
  for (auto& work : work_) {
    if (work.is_complete()) continue;  // the caller saw it: its outcome is the caller's business
    result.unpolled.push_back(work.wr_id());
    try {
      if (!work.wait_for(core_->timeouts().operation)) {
        result.timed_out.push_back(work.wr_id());
        work.orphan();
      }
    } catch (const WorkError& error) {
      result.failed.push_back(error.completion());
    }
  }
  work_.clear();  // every handle is settled or orphaned: their destructors do not wait
}

}  // namespace detail

ChannelScope::ChannelScope(std::shared_ptr<detail::ChannelCore> core) noexcept
    : ScopeBase(std::move(core)) {}

ChannelScope::~ChannelScope() {
  // Channel::scope() always finishes; a scope left otherwise still must not leave work behind.
  if (!finished_) {
    try {
      finish(nullptr);
    } catch (const std::exception& error) {
      std::fprintf(stderr, "ibverbs-cpp: ChannelScope: %s\n", error.what());
    }
  }
}

void ChannelScope::finish(const std::exception_ptr& body_error) {
  finished_ = true;
  detail::DrainResult result;  // unpolled requests are normal here: the scope waits for them
  drain(result);
  if (result.failed.empty() && result.timed_out.empty()) {
    if (body_error) std::rethrow_exception(body_error);
    return;
  }
  std::string body_message;
  if (body_error) {
    try {
      std::rethrow_exception(body_error);
    } catch (const std::exception& error) {
      body_message = error.what();
    } catch (...) {
      body_message = "an exception that is not a std::exception";
    }
  }
  throw ScopeError(body_error, std::move(result.failed), std::move(result.timed_out), body_message);
}

namespace {
/// close()'s verdict: empty when the caller polled everything.
std::string manual_scope_problem(const detail::DrainResult& result) {
  if (result.unpolled.empty()) return {};
  std::string text =
      std::to_string(result.unpolled.size()) + " request(s) left unpolled in a manual scope (wr_id";
  for (const auto id : result.unpolled) text += " " + std::to_string(id);
  text += "); they have been waited for now";
  if (!result.failed.empty() || !result.timed_out.empty()) {
    text += ": " + describe({}, result.failed, result.timed_out);
  }
  return text;
}
}  // namespace

ManualScope::ManualScope(std::shared_ptr<detail::ChannelCore> core) noexcept
    : ScopeBase(std::move(core)) {}

void ManualScope::close() {
  if (closed_) return;
  closed_ = true;
  detail::DrainResult result;
  drain(result);
  if (const auto problem = manual_scope_problem(result); !problem.empty()) {
    throw Error(ErrorKind::state, "ManualScope::close", EINVAL, problem,
                "a manual scope expects every request to be polled or waited on; use "
                "Channel::scope() to have the scope wait for you");
  }
}

ManualScope::~ManualScope() {
  if (closed_) return;
  closed_ = true;
  detail::DrainResult result;
  try {
    drain(result);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "ibverbs-cpp: ManualScope: %s\n", error.what());
  }
  if (const auto problem = manual_scope_problem(result); !problem.empty()) {
    std::fprintf(stderr, "ibverbs-cpp: BUG: %s (ManualScope destroyed without close())\n",
                 problem.c_str());
  }
}

}  // namespace ibv
