// The few bytes of HTTP/1.1 an Endpoint speaks, over blocking sockets: the
// requests the delayq servers POST to it (read one at a time off a
// keep-alive connection), its answers, and the registration calls it makes
// to the servers (one short-lived connection each: they come every
// ttl_ms / 3, so pooling would buy nothing). Deliberately small: no chunked
// request bodies (the servers send Content-Length), no pipelining beyond
// reading what has arrived, plain HTTP only.
//
// Thread-safety: a RequestReader is one connection's, used by its thread;
// the functions may be called from any thread.
#ifndef DELAYQ_ENDPOINT_HTTP_EXCHANGE_H_
#define DELAYQ_ENDPOINT_HTTP_EXCHANGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/status.h"

namespace delayq::endpoint {

// A request head and body larger than these is refused (431, 413).
inline constexpr size_t kMaxHeadBytes = 16 * 1024;
inline constexpr size_t kMaxBodyBytes = 16 * 1024 * 1024;

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;
  Headers headers;  // names lower-cased, values trimmed, in order
  std::string body;
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close"

  // The first header named `name` (lower case), or empty.
  std::string_view Header(std::string_view name) const;
};

class RequestReader {
 public:
  enum class Result {
    kRequest,  // *req holds the next request
    kClosed,   // the peer closed, the socket was shut down, or it stayed idle too long
    kBad,      // not HTTP this reader takes: answer *status (*error) and close
  };

  explicit RequestReader(int fd) : fd_(fd) {}

  // Reads the next request, waiting at most idle_ms for its first byte and
  // as long again for each further read.
  Result Read(HttpRequest* req, int idle_ms, int* status, std::string* error);

 private:
  bool Fill(int timeout_ms);  // false: closed, error or timeout

  int fd_;
  std::string in_;  // bytes read and not yet consumed
};

// Sends a whole answer (Content-Length, the given headers, "Connection:
// close" when !keep_alive). False if the connection failed.
bool WriteResponse(int fd, int status, const Headers& headers, std::string_view body,
                   bool keep_alive);

// "127.0.0.1:7700", "[::1]:7700", "localhost:7700". The port may be 0 only
// where `allow_zero_port`. Errors name `what`.
struct HostPort {
  std::string host;  // without the brackets of an IPv6 literal
  uint16_t port = 0;
  std::string ToString() const;  // brackets put back for IPv6
};
Result<HostPort> ParseHostPort(std::string_view text, std::string_view what, bool allow_zero_port);

struct HttpReply {
  int status = 0;
  std::string body;
};

// One request to `server` on a new connection (closed after the answer),
// at most timeout_ms for connecting and as long for each read and write.
// Errors: kUnavailable naming the server for an address that does not
// resolve, a refused connection, a timeout, or an answer that is not HTTP.
Result<HttpReply> HttpCall(const HostPort& server, std::string_view method, std::string_view target,
                           const Headers& headers, std::string_view body, int timeout_ms);

// `text` for a URL's query or path segment: all but RFC 3986's unreserved
// characters percent-encoded.
std::string PercentEncode(std::string_view text);

}  // namespace delayq::endpoint

#endif  // DELAYQ_ENDPOINT_HTTP_EXCHANGE_H_
