// One table maps each status code to what every protocol says for it.
#ifndef DELAYQ_SERVER_ERRORS_H_
#define DELAYQ_SERVER_ERRORS_H_

#include <iterator>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq::server {

struct ErrorMapping {
  Code code;
  int http_status;        // for the HTTP front end
  std::string_view resp;  // RESP error prefix
};

inline constexpr ErrorMapping kErrorMappings[] = {
    {Code::kOk, 200, "OK"},
    {Code::kInvalidArgument, 400, "INVALID"},
    {Code::kNotFound, 404, "NOTFOUND"},
    {Code::kExists, 409, "EXISTS"},
    {Code::kStaleReceipt, 409, "STALE"},
    {Code::kNotReserved, 409, "NOTRESERVED"},
    {Code::kTooLarge, 413, "TOOLARGE"},
    {Code::kUnauthorized, 401, "NOAUTH"},
    {Code::kUnavailable, 503, "UNAVAILABLE"},
    {Code::kInternal, 500, "ERR"},
};

inline const ErrorMapping& MappingFor(Code code) {
  for (const ErrorMapping& m : kErrorMappings) {
    if (m.code == code) return m;
  }
  return kErrorMappings[std::size(kErrorMappings) - 1];  // kInternal
}

// The answer of a reserve that the server's shutdown cut short
// (kShuttingDownPrefix, include/delayq/status.h: clients rely on it). HTTP adds
// Retry-After and Connection: close to it (HttpServer).
inline Status ShuttingDown() {
  return Unavailable(std::string(kShuttingDownPrefix) +
                     "the server is stopping; reserve again on another server, or on this one "
                     "once it is back");
}

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_ERRORS_H_
