// HttpClient: POSTs over HTTP/1.1 and HTTPS from the server's event loop,
// without a thread per request and without blocking the loop. Two
// transports behind one API:
// - plain http:// to a numeric IPv4/IPv6 host (http://10.0.0.7:8080/hook):
//   the client's own HTTP/1.1 (push/http1_transport.h), a keep-alive pool
//   per host:port whose sockets stay registered with the loop, responses
//   parsed by Boost.Beast — about a third of libcurl's CPU per request;
// - everything else (https, host names, which must be resolved without
//   blocking the loop): libcurl's multi interface driven by net::EventLoop
//   (its sockets registered with the loop, its timeout one loop timer),
//   TLS by OpenSSL, connections reused per host from libcurl's cache.
// Both keep connections alive and reuse them per host, so an instance's
// requests share a pool, and both fail with the same words. On the lean
// path a request written to a reused connection the receiver had closed
// meanwhile (EPIPE/reset/EOF before any response byte) is sent once more on
// a new connection, as libcurl does: a receiver may then see a POST twice
// (push delivery is at-least-once anyway).
//
// Every callback runs on the loop thread. Loop thread only.
#ifndef DELAYQ_PUSH_HTTP_CLIENT_H_
#define DELAYQ_PUSH_HTTP_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "delayq/status.h"
#include "net/event_loop.h"

namespace delayq::push {

struct HttpClientOptions {
  // A CA bundle (PEM) to verify https servers with; empty: the system's.
  std::string ca_file;
  // The most bytes of a response body kept (the rest is read and dropped,
  // so a receiver that sends an endless body is cut off at this many and
  // the request fails: "response over N bytes").
  size_t max_response_bytes = 64 << 10;
  // Connections kept open per host when idle, and in all.
  long max_idle_per_host = 64;
  long max_total_connections = 4096;
  // Plain http:// to a numeric host on the client's own HTTP/1.1 transport;
  // false: everything through libcurl (the tests run both).
  bool lean_http = true;
};

struct HttpRequest {
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Type
  std::string body;                                          // POSTed as application/json
  int64_t timeout_ms = 30'000;                               // whole request, connect included
};

struct HttpResponse {
  // 0 when no response came: `error` says why.
  long status = 0;
  // Why the request failed before a whole response arrived, in words for
  // a log line and a subscription's last_error: "connection refused",
  // "timed out after 30000 ms", "response over 65536 bytes",
  // "bad response: ...". Empty when a response arrived (any status).
  std::string error;
  bool timed_out = false;   // the timeout ran out
  std::string retry_after;  // the Retry-After header, if any
  std::string outcome;      // the Delayq-Outcome header, if any ("bury")
  std::string body;         // up to max_response_bytes
  int64_t elapsed_us = 0;   // from Post to completion
};

class HttpClient {
 public:
  using Done = std::function<void(HttpResponse)>;

  // Errors: kInternal when libcurl cannot be set up.
  static Result<std::unique_ptr<HttpClient>> Create(net::EventLoop* loop,
                                                    const HttpClientOptions& options);
  ~HttpClient();  // cancels requests in flight; their Done never runs
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts a POST; `done` runs exactly once, on the loop, later (never
  // inside this call), unless the client is destroyed first. Returns an id
  // for Cancel.
  uint64_t Post(HttpRequest request, Done done);
  // Ends a request in flight at once; its Done never runs. Unknown id: nothing.
  void Cancel(uint64_t id);
  size_t in_flight() const;

 private:
  class Impl;
  explicit HttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::push

#endif  // DELAYQ_PUSH_HTTP_CLIENT_H_
