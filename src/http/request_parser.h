// RequestParser: reads HTTP/1.1 requests from a connection's input buffer,
// incrementally, with the same contract as resp::RequestParser: the caller
// passes its unconsumed input, drops *consumed bytes afterwards, and calls
// again for the next (pipelined) request.
//
// The parsing itself is Boost.Beast's basic_parser (a well-kept parser for a
// solved problem); Beast stays inside request_parser.cc, out of every other
// translation unit. Only the parts of a request delayq uses are kept.
//
// Limits are checked before memory is committed: the request line and
// headers together (431 when exceeded), the body (413), chunked bodies
// included.
//
// Thread-safety: none; one parser per connection.
#ifndef DELAYQ_HTTP_REQUEST_PARSER_H_
#define DELAYQ_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace delayq::http {

struct ParserLimits {
  // Request line + headers, final blank line included (exceeded: 431). Also
  // bounds one chunk-size line, and the last chunk with its trailers (400).
  size_t max_header_bytes = 16 * 1024;  // Default: 16 KiB.
  size_t max_body_bytes = 1 << 20;      // decoded body. Default: 1 MiB.
};

enum class Method { kGet, kHead, kPost, kPut, kDelete, kOther };

struct Request {
  Method method = Method::kOther;
  std::string method_name;    // as sent, e.g. "PATCH" when method is kOther
  std::string target;         // raw request target: path and query, not decoded
  int version = 11;           // 10 or 11
  bool keep_alive = true;     // HTTP/1.1 unless "Connection: close"; 1.0 only with keep-alive
  std::string authorization;  // the Authorization header's value, "" if absent
  std::string content_type;   // "" if absent
  std::string body;           // decoded (chunked bodies are joined)
};

class RequestParser {
 public:
  enum class Status {
    kNeedMore,  // no complete request yet: read more and call again
    kRequest,   // request() holds one complete request
    kError,     // malformed or over a limit: answer error_status(), then close
  };

  explicit RequestParser(ParserLimits limits = {});
  ~RequestParser();
  RequestParser(RequestParser&&) noexcept;
  RequestParser& operator=(RequestParser&&) noexcept;

  // Parses from the front of `in` (the connection's unconsumed input).
  // *consumed bytes must be dropped by the caller before the next call; it
  // may be > 0 with kNeedMore (the parser keeps what it needs).
  //
  // What *consumed holds: with kRequest, exactly that request's bytes (what
  // follows is the next, pipelined request: call again). With kNeedMore: 0
  // while the header is incomplete (the header is parsed whole, so the
  // caller keeps it; empty lines before a request are consumed), then the
  // header and the body bytes so far once the header is done (the body is
  // copied into request().body as it arrives). With kError: 0.
  // The verdict depends on the bytes only, never on how reads split them.
  // After kError every call returns kError.
  Status Parse(std::string_view in, size_t* consumed);

  // The request of the last kRequest; valid until the next Parse. The
  // mutable one is for taking its strings after kRequest (std::move of the
  // body); strings left in place keep their capacity for the next request.
  const Request& request() const;
  Request& mutable_request();

  // True once per request, when its header asked "Expect: 100-continue" and
  // its body has not arrived yet: the server answers "100 Continue".
  bool TakeContinue();
  // True while part of a request has been consumed (slow-request timeouts).
  // Also true when the last Parse left bytes of an unfinished request
  // unconsumed (a partial header), and after kRequest when bytes of the
  // next request follow. False when only empty lines were seen.
  bool InProgress() const;

  // After kError: the HTTP status to answer (400, 413, 431, 501, 505) and
  // a message naming what was wrong.
  int error_status() const;
  const std::string& error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::http

#endif  // DELAYQ_HTTP_REQUEST_PARSER_H_
