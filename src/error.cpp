// SPDX-License-Identifier: MIT
// The library's errors (ibv/error.hpp): message composition, errno classification, the hints for
// common failures, and the kind and errno of failed work completions and of batches.
#include "ibv/error.hpp"

#include <sys/resource.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ibv {
namespace {

std::string compose(std::string_view operation, int errno_value, std::string_view detail,
                    std::string_view hint) {
  std::string text(operation);
  text += " failed";
  if (!detail.empty()) {
    text += ": ";
    text += detail;
  }
  if (errno_value != 0) {
    text += " (";
    std::array<char, 128> buffer{};
    text += strerror_r(errno_value, buffer.data(), buffer.size());  // GNU: returns the text
    text += ", errno ";
    text += std::to_string(errno_value);
    text += ")";
  }
  if (!hint.empty()) {
    text += ". Hint: ";
    text += hint;
  }
  return text;
}

ErrorKind classify(int errno_value) {
  switch (errno_value) {
    case EINVAL:
    case ERANGE: return ErrorKind::invalid_argument;
    case ENOENT:
    case ENODEV:
    case ENXIO:
    case ENODATA: return ErrorKind::not_found;
    case ENOMEM:
    case ENOSPC:
    case EAGAIN:
    case EMFILE:
    case ENFILE: return ErrorKind::resource;
    case EPERM:
    case EACCES: return ErrorKind::permission;
    case EOPNOTSUPP:
    case ENOSYS:
    case EPROTONOSUPPORT: return ErrorKind::unsupported;
    case ETIMEDOUT: return ErrorKind::timeout;
    default: return ErrorKind::driver;
  }
}

// The hint for a registration (or a CQ/QP allocation) that the locked-memory limit refused:
// the limit in force, how much the request pins (when known), and how to raise the limit.
std::string memlock_hint(std::optional<std::size_t> pinned_bytes = std::nullopt) {
  rlimit limit{};
  std::string current = "unknown";
  bool zero = false;
  if (getrlimit(RLIMIT_MEMLOCK, &limit) == 0) {
    current = limit.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                              : std::to_string(limit.rlim_cur / 1024) + " KiB";
    zero = limit.rlim_cur == 0;
  }
  std::string hint =
      "registered memory is pinned and counts against the locked-memory limit (RLIMIT_MEMLOCK), "
      "now " +
      current;
  if (zero) hint += " (with a limit of 0 the kernel refuses to pin any memory)";
  if (pinned_bytes) {
    hint +=
        "; this registration pins " + std::to_string((*pinned_bytes + 1023) / 1024) + " KiB more";
  }
  return hint +
         "; raise it (`ulimit -l unlimited`, or memlock in /etc/security/limits.conf, or "
         "LimitMEMLOCK= for a systemd service); processes with CAP_IPC_LOCK are not limited";
}

std::string hint_for(std::string_view verb, int errno_value) {
  const bool registration = verb.starts_with("ibv_reg");
  // ENOMEM: the pinned total would exceed RLIMIT_MEMLOCK; EPERM: the limit is 0.
  if (registration && (errno_value == ENOMEM || errno_value == EAGAIN || errno_value == EPERM)) {
    return memlock_hint();
  }
  if (registration && errno_value == EFAULT) {
    return "the buffer is not mapped memory of this process";
  }
  if (registration && errno_value == EOPNOTSUPP) {
    return "this device or driver cannot register this kind of memory";
  }
  if ((verb == "ibv_create_qp" || verb == "ibv_create_qp_ex") &&
      (errno_value == ENOMEM || errno_value == EINVAL)) {
    return "a queue depth, SGE count or inline size beyond what the device offers, or the "
           "locked-memory limit (`ulimit -l`)";
  }
  if (verb == "ibv_create_cq" && errno_value == ENOMEM) return memlock_hint();
  if ((verb == "ibv_post_send" || verb == "ibv_wr_complete") && errno_value == ENOMEM) {
    return "the send queue is full: more requests outstanding than max_send_wr; poll "
           "completions first, or build the QP with a larger max_send_wr";
  }
  if (verb == "ibv_post_recv" && errno_value == ENOMEM) {
    return "the receive queue is full: more receives posted than max_recv_wr";
  }
  if ((verb == "ibv_post_send" || verb == "ibv_wr_complete" || verb == "ibv_post_recv") &&
      errno_value == EINVAL) {
    return "the QP is not in a state that accepts this request (an earlier error moves it to "
           "ERR), or the request is malformed";
  }
  if (verb == "ibv_open_device" && (errno_value == EACCES || errno_value == EPERM)) {
    return "no permission on /dev/infiniband/uverbs*: run as a user in the rdma group or "
           "fix the udev rules";
  }
  if (verb == "ibv_get_device_list" && errno_value == ENOSYS) {
    return "the kernel has no verbs support: load ib_uverbs and a device driver";
  }
  return {};
}

}  // namespace

std::string_view to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::not_found: return "not_found";
    case ErrorKind::resource: return "resource";
    case ErrorKind::permission: return "permission";
    case ErrorKind::unsupported: return "unsupported";
    case ErrorKind::driver: return "driver";
    case ErrorKind::timeout: return "timeout";
    case ErrorKind::state: return "state";
    case ErrorKind::protocol: return "protocol";
    case ErrorKind::connection: return "connection";
    case ErrorKind::receiver_not_ready: return "receiver_not_ready";
    case ErrorKind::peer_gone: return "peer_gone";
    case ErrorKind::revoked: return "revoked";
  }
  return "unknown";
}

Error::Error(ErrorKind kind, std::string_view operation, int errno_value, std::string_view detail,
             std::string_view hint)
    : std::system_error(std::error_code(errno_value, std::generic_category())),
      kind_(kind),
      message_(std::make_shared<const std::string>(compose(operation, errno_value, detail, hint))),
      operation_(operation),
      hint_(hint) {}

Error Error::cancelled_channel(std::string_view operation, std::string_view detail,
                               std::string_view hint) {
  Error error(ErrorKind::timeout, operation, ETIMEDOUT, detail, hint);
  error.set_channel_cancelled();
  return error;
}

void throw_invalid_argument(std::string_view operation, std::string_view argument,
                            std::string_view problem) {
  std::string detail(argument);
  detail += ' ';
  detail += problem;
  throw Error(ErrorKind::invalid_argument, operation, EINVAL, detail);
}

void throw_verb_error(std::string_view verb, int errno_value, std::string_view detail) {
  throw Error(classify(errno_value), verb, errno_value, detail, hint_for(verb, errno_value));
}

namespace detail {
void throw_registration_error(std::string_view verb, int errno_value, std::string_view detail,
                              std::size_t length) {
  if (errno_value == ENOMEM || errno_value == EAGAIN || errno_value == EPERM) {
    // EPERM here is the memlock limit (0), not a permission on a file: a resource problem.
    throw Error(ErrorKind::resource, verb, errno_value, detail, memlock_hint(length));
  }
  throw_verb_error(verb, errno_value, detail);
}
}  // namespace detail

namespace {
// errno_for and kind_for implement the list on WorkStatus (work_completion.hpp).
int errno_for(WorkStatus status) {
  switch (status) {
    case WorkStatus::retry_exceeded:
    case WorkStatus::response_timeout: return ETIMEDOUT;
    case WorkStatus::rnr_retry_exceeded: return ECONNREFUSED;
    case WorkStatus::remote_access_error:
    case WorkStatus::local_protection_error:
    case WorkStatus::local_access_error: return EACCES;
    case WorkStatus::local_length_error: return EMSGSIZE;
    case WorkStatus::work_request_flushed: return ECANCELED;
    default: return EIO;
  }
}

ErrorKind kind_for(WorkStatus status) {
  switch (status) {
    case WorkStatus::retry_exceeded:
    case WorkStatus::response_timeout: return ErrorKind::peer_gone;
    case WorkStatus::rnr_retry_exceeded: return ErrorKind::receiver_not_ready;
    case WorkStatus::remote_access_error:
    case WorkStatus::local_protection_error:
    case WorkStatus::local_access_error: return ErrorKind::permission;
    case WorkStatus::local_length_error:
    case WorkStatus::remote_invalid_request: return ErrorKind::invalid_argument;
    case WorkStatus::work_request_flushed: return ErrorKind::state;
    default: return ErrorKind::driver;
  }
}
}  // namespace

ErrorKind kind_of(WorkStatus status) noexcept { return kind_for(status); }

WorkError::WorkError(const WorkCompletion& completion, std::string_view context)
    : Error(kind_for(completion.status()), context.empty() ? "work request" : context,
            errno_for(completion.status()), completion.to_string(), explain(completion.status())),
      completion_(completion) {}

namespace {
// A batch's kind: timeout if a request did not complete in time; otherwise the kind of its
// failed completions when they agree, driver when they do not (or when only the body threw).
ErrorKind batch_kind(const std::vector<WorkCompletion>& failed, bool timed_out) {
  if (timed_out) return ErrorKind::timeout;
  if (failed.empty()) return ErrorKind::driver;
  const ErrorKind first = kind_for(failed.front().status());
  for (const WorkCompletion& completion : failed) {
    if (kind_for(completion.status()) != first) return ErrorKind::driver;
  }
  return first;
}

int batch_errno(const std::vector<WorkCompletion>& failed, bool timed_out) {
  if (timed_out) return ETIMEDOUT;
  if (failed.empty()) return EIO;
  const int first = errno_for(failed.front().status());
  for (const WorkCompletion& completion : failed) {
    if (errno_for(completion.status()) != first) return EIO;
  }
  return first;
}
}  // namespace

BatchError::BatchError(std::string_view operation, std::exception_ptr body_error,
                       std::vector<WorkCompletion> failed, std::vector<std::uint64_t> timed_out,
                       std::string_view description)
    : Error(batch_kind(failed, !timed_out.empty()), operation,
            batch_errno(failed, !timed_out.empty()), description),
      body_error_(std::move(body_error)),
      failed_(std::move(failed)),
      timed_out_(std::move(timed_out)) {
  if (!timed_out_.empty()) set_channel_cancelled();  // the scope cancelled them (ScopeWork::settle)
}

}  // namespace ibv
