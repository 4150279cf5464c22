// Errors are values: every fallible operation of delayq returns a Status or a
// Result<T>. The codes are a small, stable set (SPEC §5); the network layers
// map each one to an HTTP status and a RESP error prefix from one table.
//
// Thread-safety: Status and Result are values; distinct objects may be used
// from distinct threads without synchronisation.
#ifndef DELAYQ_STATUS_H_
#define DELAYQ_STATUS_H_

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace delayq {

// Stable error codes. Never renumber: the numeric values appear in logs and
// the names appear on the wire.
enum class Code : unsigned char {
  kOk = 0,
  kInvalidArgument = 1,  // bad input; the message names the field
  kNotFound = 2,         // no live job (or topic) with that name
  kExists = 3,           // add of a live id without replace
  kStaleReceipt = 4,     // receipt does not match the job's current reservation
  kNotReserved = 5,      // operation needs a reserved job
  kTooLarge = 6,         // body or request over a configured limit
  kUnauthorized = 7,     // missing or wrong token
  kUnavailable = 8,      // storage unreachable or shutting down
  kInternal = 9,         // a bug or an unexpected system failure
};

// "ok", "invalid_argument", "not_found", ... as used in JSON error bodies.
std::string_view CodeName(Code code);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;
  // REQUIRES: code != Code::kOk (use Status() for success).
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {
    assert(code != Code::kOk);
  }

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "not_found: job 'x' does not exist", or "ok".
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string msg) { return {Code::kInvalidArgument, std::move(msg)}; }
inline Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
inline Status Exists(std::string msg) { return {Code::kExists, std::move(msg)}; }
inline Status StaleReceipt(std::string msg) { return {Code::kStaleReceipt, std::move(msg)}; }
inline Status NotReserved(std::string msg) { return {Code::kNotReserved, std::move(msg)}; }
inline Status TooLarge(std::string msg) { return {Code::kTooLarge, std::move(msg)}; }
inline Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
inline Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

// How the answer to a waiting reserve that a server's shutdown cut short
// begins: kUnavailable with this prefix, never "no job", so that a client
// goes to another server (or waits for this one to come back) at once instead
// of polling one that is going away. The servers answer so over HTTP (503),
// RESP (-UNAVAILABLE) and /command; the network client (StoreKind::kRemote)
// fails over on it, and with one server returns it (naming the server).
inline constexpr std::string_view kShuttingDownPrefix = "shutting down: ";
inline bool IsShuttingDown(const Status& s) {
  return s.code() == Code::kUnavailable && s.message().starts_with(kShuttingDownPrefix);
}

// Either a T or a non-OK Status, like std::expected<T, Status>.
template <typename T>
class [[nodiscard]] Result {
 public:
  // Implicit on purpose: `return value;` and `return NotFound(...)` both work.
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // REQUIRES: !status.ok().
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok());
  }

  bool ok() const { return value_.has_value(); }
  // Code::kOk when a value is held.
  const Status& status() const { return status_; }

  // REQUIRES: ok().
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
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace delayq

#endif  // DELAYQ_STATUS_H_
