// Status and StatusOr<T>: how errors cross module boundaries in tlt.
//
// A small value type in the spirit of LevelDB's Status and absl::Status. tlt keeps its own
// because the GPU core build (TLT_CORE_ONLY) must compile with nothing but LibTorch, and the
// device machine has no Abseil. Header-only, no dependencies.
//
// Thread safety: values; copy freely. A Status is immutable after construction.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace tlt {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong; retrying the same input cannot help
  kNotFound,            // a named thing (file, object, key) does not exist
  kAlreadyExists,       // a create met an existing object
  kCorruption,          // stored data failed a checksum or a format check
  kUnavailable,         // a peer (apiserver, Prometheus, worker) could not be reached; retry
  kFailedPrecondition,  // the system is not in a state where the call can work
  kAborted,             // a conflict (optimistic concurrency); retry after re-reading
  kDeadlineExceeded,    // a timeout
  kUnimplemented,       // the feature is not built into this binary
  kInternal,            // a bug in tlt
};

// Returns the stable upper-case name of a code ("INVALID_ARGUMENT").
inline const char* status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kCorruption:
      return "CORRUPTION";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
  }
  return "UNKNOWN";
}

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status Corruption(std::string m) { return {StatusCode::kCorruption, std::move(m)}; }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status FailedPrecondition(std::string m) {
    return {StatusCode::kFailedPrecondition, std::move(m)};
  }
  static Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "INVALID_ARGUMENT: spec.steps: must be >= 1 (got 0)", or "OK".
  std::string to_string() const {
    if (ok()) return "OK";
    return std::string(status_code_name(code_)) + ": " + message_;
  }

  // Returns a copy whose message is prefixed with `context + ": "`.
  Status with_context(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or a non-OK Status. Accessing value() of an error is a bug (asserts).
template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    assert(!status_.ok() && "StatusOr built from an OK status without a value");
    if (status_.ok()) status_ = Status::Internal("StatusOr built from OK without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tlt

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define TLT_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::tlt::Status tlt_status_ = (expr);        \
    if (!tlt_status_.ok()) return tlt_status_; \
  } while (0)
