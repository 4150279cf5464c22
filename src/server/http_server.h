// HttpServer: the HTTP/JSON front end (SPEC §6) over any Queue, including
// the seed's own protocol at `POST /command`.
//
// HTTP/1.1 with keep-alive and pipelining: requests on one connection are
// answered in order, and every complete request in a read is answered in
// one write. A reserve that has to wait parks its connection (long-poll);
// requests pipelined behind it wait for its answer. Connections, limits and
// waiting reserves are FrontEnd's and net::TcpServer's; the route table
// (http_routes.cc, with the files http_api.h names) maps requests to Queue
// calls and answers to JSON.
//
// Thread-safety: the loop thread owns the server and its connections.
#ifndef DELAYQ_SERVER_HTTP_SERVER_H_
#define DELAYQ_SERVER_HTTP_SERVER_H_

#include <memory>
#include <string>
#include <string_view>

#include "delayq/queue.h"
#include "http/request_parser.h"
#include "net/event_loop.h"
#include "net/tcp_server.h"
#include "server/front_end.h"

namespace delayq::server {

struct HttpServerOptions {
  // Listener and limits. Defaults: 127.0.0.1:7700 (loopback only).
  net::TcpServerOptions tcp = {.name = "HTTP", .host = "127.0.0.1", .port = 7700};
  // Non-empty: every endpoint but /healthz needs "Authorization: Bearer <token>".
  std::string auth_token;
  http::ParserLimits parser;
};

class HttpServer : public FrontEnd {
 public:
  // Binds and listens. `loop` and `queue` must outlive the server.
  // Errors: kInvalidArgument for a bad address, kUnavailable if it cannot be
  // bound.
  static Result<std::unique_ptr<HttpServer>> Create(net::EventLoop* loop, ServingQueue* queue,
                                                    HttpServerOptions options);
  ~HttpServer() override;

  struct HttpState;
  class Api;  // the endpoints (http_api.h)

 private:
  HttpServer(net::EventLoop* loop, ServingQueue* queue, HttpServerOptions options);

  // net::TcpHandler
  void OnOpen(net::Connection& c) override;
  void OnInput(net::Connection& c) override;
  bool InRequest(const net::Connection& c) const override;
  std::string_view BusyReply() const override;
  std::string_view TimeoutReply() const override;
  std::string_view PlaintextReply() const override;
  // FrontEnd
  void AnswerReserve(net::Connection& c, const Result<Deliveries>& result) override;
  // An eighth of the output limit: JSON may write a body byte as six
  // (\u0001), and the reply must still fit.
  uint64_t ReserveByteBudget() const override;

  HttpServerOptions options_;
  std::unique_ptr<Api> api_;
  std::string busy_reply_;       // a whole response, written before refusing a connection
  std::string timeout_reply_;    // a whole response, written before closing a slow request
  std::string plaintext_reply_;  // to a plaintext client of a TLS listener
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_SERVER_H_
