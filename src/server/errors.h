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

// How the answer of a reserve that the server's shutdown cut short begins:
// kUnavailable, never "no job", so that a worker goes to another server (or
// waits for this one to come back) at once instead of polling one that is
// going away. Clients rely on the prefix (the network client fails over on
// it, the command line words it, and src/client keeps the same constant).
// HTTP adds Retry-After and Connection: close to it (HttpServer).
inline constexpr std::string_view kShuttingDown = "shutting down: ";

inline Status ShuttingDown() {
  return Unavailable(std::string(kShuttingDown) +
                     "the server is stopping; reserve again on another server, or on this one "
                     "once it is back");
}

inline bool IsShuttingDown(const Status& s) {
  return s.code() == Code::kUnavailable && s.message().starts_with(kShuttingDown);
}

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_ERRORS_H_
