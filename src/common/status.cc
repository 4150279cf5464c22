#include "delayq/status.h"

namespace delayq {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kInvalidArgument:
      return "invalid_argument";
    case Code::kNotFound:
      return "not_found";
    case Code::kExists:
      return "exists";
    case Code::kStaleReceipt:
      return "stale_receipt";
    case Code::kNotReserved:
      return "not_reserved";
    case Code::kTooLarge:
      return "too_large";
    case Code::kUnauthorized:
      return "unauthorized";
    case Code::kUnavailable:
      return "unavailable";
    case Code::kInternal:
      return "internal";
  }
  return "internal";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out(CodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace delayq
