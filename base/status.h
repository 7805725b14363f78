// Status and Result<T>: the error values used in storage/, cache/, scheduler/ and below.
//
// A Status is either OK or carries a code, a human message with context (what failed, on which
// path/offset/row), and two facts a caller acts on: whether retrying the same operation can help,
// and whether data may have been lost. Functions return a value or an error, never both
// (Result<T>). Exceptions are used only for configuration and start-up (see config.h).
//
// Thread-safety: Status and Result are plain values; copies are independent.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace stripesolve {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (shape, dtype, NaN, unknown name)
  kNotFound,            // a named object or file does not exist
  kAlreadyExists,       // creating something whose name is taken
  kFailedPrecondition,  // the system is not in a state that allows the operation
  kIoError,             // the OS reported an I/O failure (errno in the message)
  kNoSpace,             // a device or the configured budget is full
  kCorruption,          // stored data fails its checksum or manifest checks
  kNumerical,           // zero or non-finite pivot, singular matrix, breakdown
  kCancelled,           // stopped on request
  kResourceExhausted,   // a limit (memory, connections, queue) was reached
  kUnavailable,         // a service is not reachable right now
  kUnimplemented,       // not supported in this build or on this hardware
  kInternal,            // a broken invariant that was reported rather than aborted
};

std::string_view status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string msg) {
    return {StatusCode::kInvalidArgument, std::move(msg)};
  }
  static Status not_found(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status already_exists(std::string msg) {
    return {StatusCode::kAlreadyExists, std::move(msg)};
  }
  static Status failed_precondition(std::string msg) {
    return {StatusCode::kFailedPrecondition, std::move(msg)};
  }
  static Status io_error(std::string msg) { return {StatusCode::kIoError, std::move(msg)}; }
  static Status no_space(std::string msg) { return {StatusCode::kNoSpace, std::move(msg)}; }
  static Status corruption(std::string msg) { return {StatusCode::kCorruption, std::move(msg)}; }
  static Status numerical(std::string msg) { return {StatusCode::kNumerical, std::move(msg)}; }
  static Status cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  static Status resource_exhausted(std::string msg) {
    return {StatusCode::kResourceExhausted, std::move(msg)};
  }
  static Status unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status unimplemented(std::string msg) {
    return {StatusCode::kUnimplemented, std::move(msg)};
  }
  static Status internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

  // Builds an I/O error from an errno value: "<what>: <strerror> (errno N)". Retryable for
  // EAGAIN/EINTR/EBUSY; kNoSpace for ENOSPC/EDQUOT.
  static Status from_errno(int err, std::string_view what);

  Status(StatusCode code, std::string message);

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Whether repeating the same operation later may succeed (transient condition).
  bool retryable() const { return retryable_; }
  // Whether data that had been accepted may be gone (e.g. a failed write-back of a dirty stripe).
  bool data_lost() const { return data_lost_; }

  Status& set_retryable(bool v = true) & {
    retryable_ = v;
    return *this;
  }
  Status&& set_retryable(bool v = true) && {
    retryable_ = v;
    return std::move(*this);
  }
  Status& set_data_lost(bool v = true) & {
    data_lost_ = v;
    return *this;
  }
  Status&& set_data_lost(bool v = true) && {
    data_lost_ = v;
    return std::move(*this);
  }

  // Prefixes context: Status::io_error("short read").with_context("stripe 3") ->
  // "stripe 3: short read". No-op on OK.
  Status with_context(std::string_view context) const;

  // "OK" or "<CodeName>: <message>[ (retryable)][ (data lost)]".
  std::string to_string() const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  bool retryable_ = false;
  bool data_lost_ = false;
};

// A value or an error. Constructing from an OK Status is a bug (internal error).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status);                     // NOLINT(google-explicit-constructor)

  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }

  const Status& status() const;
  T& value() & {
    check_value();
    return std::get<0>(v_);
  }
  const T& value() const& {
    check_value();
    return std::get<0>(v_);
  }
  T&& value() && {
    check_value();
    return std::get<0>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check_value() const;
  std::variant<T, Status> v_;
};

namespace detail {
[[noreturn]] void result_misuse(const char* what, const Status* status);
const Status& ok_status();
}  // namespace detail

template <typename T>
Result<T>::Result(Status status) : v_(std::move(status)) {
  if (std::get<1>(v_).is_ok())
    detail::result_misuse("Result constructed from an OK Status", nullptr);
}

template <typename T>
const Status& Result<T>::status() const {
  return is_ok() ? detail::ok_status() : std::get<1>(v_);
}

template <typename T>
void Result<T>::check_value() const {
  if (!is_ok()) detail::result_misuse("value() called on an error Result", &std::get<1>(v_));
}

}  // namespace stripesolve

#define STRIPESOLVE_CONCAT_INNER(a, b) a##b
#define STRIPESOLVE_CONCAT(a, b) STRIPESOLVE_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function if it is not OK.
#define STRIPESOLVE_RETURN_IF_ERROR(expr)                 \
  do {                                                    \
    ::stripesolve::Status stripesolve_st_ = (expr);       \
    if (!stripesolve_st_.is_ok()) return stripesolve_st_; \
  } while (0)

// `STRIPESOLVE_ASSIGN_OR_RETURN(auto x, f())`: declares x from a Result or returns its error.
#define STRIPESOLVE_ASSIGN_OR_RETURN(lhs, expr) \
  STRIPESOLVE_ASSIGN_OR_RETURN_IMPL(STRIPESOLVE_CONCAT(stripesolve_res_, __LINE__), lhs, expr)
#define STRIPESOLVE_ASSIGN_OR_RETURN_IMPL(res, lhs, expr) \
  auto res = (expr);                                      \
  if (!res.is_ok()) return res.status();                  \
  lhs = std::move(res).value()
