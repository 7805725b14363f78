#include "base/status.h"

#include <cerrno>
#include <cstring>

#include "base/internal_error.h"

namespace stripesolve {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kIoError:
      return "IoError";
    case StatusCode::kNoSpace:
      return "NoSpace";
    case StatusCode::kCorruption:
      return "Corruption";
    case StatusCode::kNumerical:
      return "Numerical";
    case StatusCode::kCancelled:
      return "Cancelled";
    case StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kUnimplemented:
      return "Unimplemented";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {
  if (code_ == StatusCode::kOk) message_.clear();
}

Status Status::from_errno(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  msg += " (errno ";
  msg += std::to_string(err);
  msg += ")";
  StatusCode code = StatusCode::kIoError;
  if (err == ENOSPC || err == EDQUOT) code = StatusCode::kNoSpace;
  if (err == ENOENT) code = StatusCode::kNotFound;
  if (err == EEXIST) code = StatusCode::kAlreadyExists;
  Status s(code, std::move(msg));
  if (err == EAGAIN || err == EINTR || err == EBUSY) s.set_retryable();
  return s;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  Status s = *this;
  s.message_ = std::string(context) + ": " + message_;
  return s;
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  std::string out(status_code_name(code_));
  out += ": ";
  out += message_;
  if (retryable_) out += " (retryable)";
  if (data_lost_) out += " (data lost)";
  return out;
}

namespace detail {

void result_misuse(const char* what, const Status* status) {
  std::string msg(what);
  if (status != nullptr) msg += ": " + status->to_string();
  internal_error(msg);
}

const Status& ok_status() {
  static const Status kOk;
  return kOk;
}

}  // namespace detail
}  // namespace stripesolve
