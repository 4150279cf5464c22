// Http1Transport: HttpClient's own HTTP/1.1 for plain http:// URLs whose
// host is a numeric IPv4 or IPv6 address (http://10.0.0.7:8080/hook,
// http://[::1]:9000/). Everything else — https, host names (resolving one
// must not block the loop, and libcurl resolves on a thread of its own),
// user info, odd paths — goes to libcurl; see HttpClient.
//
// Why: per request libcurl unregisters and re-registers its idle
// connection with the loop (two epoll_ctl), polls it for liveness, reads
// the clock several times and scans every header line; at tens of thousands
// of pushes a second that was most of the loop thread's time. Here a
// connection is registered once (edge-triggered, with EPOLLRDHUP) and stays
// registered while idle in its pool; a request is one sendmsg and usually one
// read, parsed by Boost.Beast's response parser.
//
// Connections: a keep-alive pool per host:port, at most max_idle_per_host
// open to a host (requests past it wait in order for one), idle ones kept
// up to max_total_connections in all. An idle connection that becomes
// readable (the receiver closed it, or sent bytes nobody asked for) is
// closed, never reused, and so is one whose response ended with
// "Connection: close", EOF or bytes past the response.
//
// Retry: a request written to a reused connection that the receiver had
// closed meanwhile (EPIPE or ECONNRESET on the write, or EOF or a reset
// before any byte of a response) is sent once more on a new connection, as
// libcurl does. The receiver may then see the POST twice; push delivery is
// at-least-once anyway.
//
// Errors use the libcurl path's words ("connection refused", "timed out
// after N ms", "connection reset", "connection closed without a response",
// "bad response: ...", "response over N bytes"). Timeouts: one loop timer
// for all requests, armed at the earliest deadline (requests with the same
// timeout end in the order they started, so each timeout value keeps a FIFO).
//
// Loop thread only.
#ifndef DELAYQ_PUSH_HTTP1_TRANSPORT_H_
#define DELAYQ_PUSH_HTTP1_TRANSPORT_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "net/event_loop.h"
#include "push/http_client.h"

namespace delayq::push {

class Http1Transport {
 public:
  Http1Transport(net::EventLoop* loop, const HttpClientOptions& options);
  ~Http1Transport();  // drops requests in flight without Done
  Http1Transport(const Http1Transport&) = delete;
  Http1Transport& operator=(const Http1Transport&) = delete;

  // Starts request `id` if its URL is one this transport takes (see above)
  // and returns true; false, untouched, otherwise. `done` runs once, later.
  bool Post(uint64_t id, HttpRequest& request, HttpClient::Done& done);
  // True if `id` was this transport's and is now dropped without Done.
  bool Cancel(uint64_t id);
  size_t in_flight() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::push

#endif  // DELAYQ_PUSH_HTTP1_TRANSPORT_H_
