// SPDX-License-Identifier: MIT
// Every error the library throws, in one header: ibv::Error (the failing operation, errno, an
// ErrorKind and a hint a person can act on), WorkError (one failed work completion) and
// BatchError (what went wrong in a batch of requests: a scope, or a MultiChannel call to several
// peers).
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "ibv/verbs/work_completion.hpp"

namespace ibv {

/// What kind of failure an Error is, so callers can react without parsing messages. The kind of
/// each failed completion status is listed on ibv::WorkStatus.
enum class ErrorKind {
  invalid_argument,    ///< A value given to the library is out of range or inconsistent.
  not_found,           ///< A named thing (device, port, GID entry) does not exist.
  resource,            ///< Out of memory, locked memory, queue entries or other resources.
  permission,          ///< The operating system refused access (EPERM / EACCES).
  unsupported,         ///< The device or driver does not implement the operation.
  driver,              ///< The driver or device reported an error while doing the operation.
  timeout,             ///< A bounded wait ended before the awaited event.
  state,               ///< The object is not in a state where the operation is allowed.
  protocol,            ///< A peer sent something that breaks the protocol: garbage, an unknown or
                       ///< duplicate rank, an oversized or truncated message.
  connection,          ///< A connection could not be made in the first place: an rdma_cm
                       ///< connect refused, unreachable or rejected, a bootstrap service (PMIx)
                       ///< not there, a stranger's connection that broke before it said who it
                       ///< is. A peer that was there and then vanished is peer_gone.
  receiver_not_ready,  ///< The peer had no receive posted for a send or write with immediate,
                       ///< through all RNR retries: a fault of the application's protocol (too
                       ///< few receives, or posted too late), not a slow or lost peer.
  peer_gone,           ///< A peer that was connected vanished: a request it never acknowledged
                       ///< (retry_exceeded, response_timeout: its process, queue pair, device
                       ///< or link is gone), a barrier's signal to it that failed so, a
                       ///< bootstrap connection it closed or broke. The same kind on channels,
                       ///< MultiChannel, barriers and the bootstrap.
  revoked,             ///< A rank revoked the Node (net::Node::revoke()): its operations end
                       ///< at once on every rank; the message names the rank that revoked it.
};

/// Name of an ErrorKind, e.g. "invalid_argument".
[[nodiscard]] std::string_view to_string(ErrorKind kind) noexcept;

/// The kind of a failed completion's `status` (as listed on ibv::WorkStatus), e.g. peer_gone for
/// retry_exceeded; the kind WorkError has for it.
[[nodiscard]] ErrorKind kind_of(WorkStatus status) noexcept;

/// Every failure the library reports by exception is an ibv::Error (a std::system_error whose
/// code is the errno, in std::generic_category). `what()` reads as one sentence: the operation
/// that failed, why, and what to try (the hint), e.g.
/// "ibv_reg_mr failed: Cannot allocate memory (errno 12). Hint: the locked-memory limit ...".
class Error : public std::system_error {
 public:
  /// `operation` names the verb or library function that failed ("ibv_reg_mr",
  /// "QueuePairBuilder::max_send_sge"); `detail` says what was asked; `hint` what to try.
  Error(ErrorKind kind, std::string_view operation, int errno_value, std::string_view detail,
        std::string_view hint = {});

  /// What kind of failure it is, to decide on in code (retry, give up, fix the input).
  [[nodiscard]] ErrorKind kind() const noexcept { return kind_; }
  /// The verb or library function that failed.
  [[nodiscard]] const std::string& operation() const noexcept { return operation_; }
  /// The errno value behind the failure (EINVAL for invalid arguments found by the library).
  [[nodiscard]] int errno_value() const noexcept { return code().value(); }
  /// What the caller can do about it; empty where there is nothing specific to say.
  [[nodiscard]] const std::string& hint() const noexcept { return hint_; }
  /// The whole sentence: operation, detail, strerror, hint.
  [[nodiscard]] const char* what() const noexcept override { return message_->c_str(); }
  /// Whether this failure cancelled a channel: a timeout of a blocking call (Channel::execute
  /// and the named calls), of a scope's drain or of a co_await gave up on a request, so the
  /// channel moved its queue pair to the error state and refuses further work (its state()
  /// says cancelled). False for every other error, and for a timeout that left the channel
  /// usable (PendingWork::wait, wait_for: the request is still pending). Kind timeout both ways.
  [[nodiscard]] bool channel_cancelled() const noexcept { return channel_cancelled_; }

  /// The timeout Error of a call that gave up on a request and cancelled its channel: kind
  /// timeout, ETIMEDOUT, channel_cancelled() true.
  [[nodiscard]] static Error cancelled_channel(std::string_view operation, std::string_view detail,
                                               std::string_view hint = {});

 protected:
  /// Marks this Error as one that cancelled a channel (see channel_cancelled()).
  void set_channel_cancelled() noexcept { channel_cancelled_ = true; }

 private:
  ErrorKind kind_;
  bool channel_cancelled_ = false;
  std::shared_ptr<const std::string> message_;  // shared: copying an exception must not throw
  std::string operation_;
  std::string hint_;
};

/// Throws an invalid_argument Error naming `argument` (e.g. "max_send_sge") and what is wrong
/// with it. Used for every check done before anything reaches the device.
[[noreturn]] void throw_invalid_argument(std::string_view operation, std::string_view argument,
                                         std::string_view problem);

/// Throws the Error for a verb that failed with `errno_value`, classified by errno, with the
/// hint chosen for that verb and errno where one is known.
[[noreturn]] void throw_verb_error(std::string_view verb, int errno_value,
                                   std::string_view detail = {});

/// A work request that completed with an error, thrown by the blocking calls of the higher
/// layers (on the polling path, a failed completion is a value). Carries the completion; its
/// kind and errno are the ones listed on WorkStatus.
class WorkError : public Error {
 public:
  /// The error for failed `completion`, its kind and errno by the status; `context` is the
  /// operation() that what() names (default "work request").
  explicit WorkError(const WorkCompletion& completion, std::string_view context = {});

  /// The failed completion.
  [[nodiscard]] const WorkCompletion& completion() const noexcept { return completion_; }
  /// The completion's status.
  [[nodiscard]] WorkStatus status() const noexcept { return completion_.status(); }
  /// The device's own error code for it (vendor-specific; 0 when it gave none).
  [[nodiscard]] std::uint32_t vendor_error() const noexcept { return completion_.vendor_error(); }
  /// The wr_id of the failed request.
  [[nodiscard]] std::uint64_t wr_id() const noexcept { return completion_.wr_id(); }

 private:
  WorkCompletion completion_;
};

/// A batch's failure: the completions that failed or did not arrive when a scope drained its
/// work at the exit, and the scope body's own exception if it threw too. what() names them all
/// (in a MultiChannel scope, with the peer of each). kind() is timeout if a request did not
/// complete in time, else the kind of the failed completions when they agree, else driver;
/// errno_value() likewise. A request that did not complete in time was cancelled, and its channel
/// with it: then channel_cancelled() is true.
class BatchError : public Error {
 public:
  /// `description` is what() after the operation's name (made by the scope).
  BatchError(std::string_view operation, std::exception_ptr body_error,
             std::vector<WorkCompletion> failed, std::vector<std::uint64_t> timed_out,
             std::string_view description);

  /// Whether the body threw (its exception is body_exception()).
  [[nodiscard]] bool body_failed() const noexcept { return body_error_ != nullptr; }
  /// The body's exception, or null when it did not throw.
  [[nodiscard]] std::exception_ptr body_exception() const noexcept { return body_error_; }
  /// Completions drained at the exit that failed, in the order they were posted (of a list
  /// posted by post_all, its first failure: the requests after it were flushed).
  [[nodiscard]] const std::vector<WorkCompletion>& failed_completions() const noexcept {
    return failed_;
  }
  /// wr_ids of requests that had not completed within the channel's timeout at the exit (the
  /// scope cancelled them before it threw: see docs/safety.md, "No orphans").
  /// In a MultiChannel scope wr_ids are per peer: what() names the peer of each.
  [[nodiscard]] const std::vector<std::uint64_t>& timed_out() const noexcept { return timed_out_; }

 private:
  std::exception_ptr body_error_;
  std::vector<WorkCompletion> failed_;
  std::vector<std::uint64_t> timed_out_;
};

}  // namespace ibv
