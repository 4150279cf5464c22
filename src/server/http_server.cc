// How a request is served: net::TcpServer reads into c.in and calls OnInput,
// which parses complete requests (http::RequestParser), hands each to the
// router (Api::Handle, http_routes.cc), and the endpoint appends the
// response to c.out; the server writes c.out once. A reserve that has to wait
// parks the connection and is answered in AnswerReserve.
//
// This file is the connection and the framing: requests off the input,
// responses (status line, headers, HEAD without a body, keep-alive) onto
// the output. What each endpoint does is in http_routes.cc, http_metrics.cc
// and seed_command.cc (http_api.h says which).
#include "server/http_server.h"

#include <algorithm>
#include <charconv>
#include <utility>

#include "codec/json_writer.h"
#include "server/errors.h"
#include "server/http_api.h"

namespace delayq::server {

using codec::JsonWriter;
using net::Connection;

namespace {

std::string_view Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
  }
  return "Unknown";
}

}  // namespace

// One whole response. `extra_headers` are complete "Name: value\r\n" lines.
void AppendResponse(std::string* out, int status, std::string_view content_type,
                    std::string_view body, bool keep_alive, int version,
                    std::string_view extra_headers) {
  char line[64];
  auto st = std::to_chars(line, line + sizeof line, status);
  out->append(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ");
  out->append(line, st.ptr);
  out->push_back(' ');
  out->append(Reason(status));
  out->append("\r\nContent-Type: ");
  out->append(content_type);
  out->append("\r\nContent-Length: ");
  auto len = std::to_chars(line, line + sizeof line, body.size());
  out->append(line, len.ptr);
  out->append("\r\n");
  if (!keep_alive) {
    out->append("Connection: close\r\n");
  } else if (version == 10) {
    out->append("Connection: keep-alive\r\n");
  }
  out->append(extra_headers);
  out->append("\r\n");
  out->append(body);
}

std::string ErrorJson(std::string_view code, std::string_view message) {
  std::string json;
  JsonWriter w(&json);
  w.BeginObject();
  w.Key("error");
  w.BeginObject();
  w.Key("code");
  w.String(code);
  w.Key("message");
  w.String(message);
  w.EndObject();
  w.EndObject();
  return json;
}

// --- connections -------------------------------------------------------------------

Result<std::unique_ptr<HttpServer>> HttpServer::Create(net::EventLoop* loop, ServingQueue* queue,
                                                       HttpServerOptions options) {
  net::TcpServerOptions tcp = options.tcp;
  auto server = std::unique_ptr<HttpServer>(new HttpServer(loop, queue, std::move(options)));
  if (Status st = server->Listen(std::move(tcp)); !st.ok()) return st;
  return server;
}

HttpServer::HttpServer(net::EventLoop* loop, ServingQueue* queue, HttpServerOptions options)
    : FrontEnd(loop, queue), options_(std::move(options)), api_(std::make_unique<Api>(this)) {
  AppendResponse(&busy_reply_, 503, kJson,
                 ErrorJson("unavailable", "max number of connections reached"),
                 /*keep_alive=*/false, 11);
  AppendResponse(&timeout_reply_, 408, kJson,
                 ErrorJson("invalid_argument", "request not received within the request timeout"),
                 /*keep_alive=*/false, 11);
  AppendResponse(&plaintext_reply_, 400, kJson,
                 ErrorJson("invalid_argument",
                           "this port speaks TLS: use https:// (curl --cacert ca.pem https://...)"),
                 /*keep_alive=*/false, 11);
}

HttpServer::~HttpServer() = default;

void HttpServer::OnOpen(Connection& c) {
  auto s = std::make_unique<HttpState>();
  s->parser = http::RequestParser(options_.parser);
  c.state = std::move(s);
}

std::string_view HttpServer::BusyReply() const { return busy_reply_; }

std::string_view HttpServer::TimeoutReply() const { return timeout_reply_; }

std::string_view HttpServer::PlaintextReply() const { return plaintext_reply_; }

bool HttpServer::InRequest(const Connection& c) const {
  return static_cast<const HttpState&>(*c.state).parser.InProgress();
}

void HttpServer::OnInput(Connection& c) {
  HttpState& s = StateOf(c);
  size_t offset = 0;
  while (!c.closing && !c.waiting && !c.OutputFull() && offset < c.in.size()) {
    size_t consumed = 0;
    std::string_view rest(c.in.data() + offset, c.in.size() - offset);
    http::RequestParser::Status st = s.parser.Parse(rest, &consumed);
    offset += consumed;
    if (st == http::RequestParser::Status::kError) {
      std::string json = ErrorJson(
          s.parser.error_status() == 413 ? "too_large" : "invalid_argument", s.parser.error());
      AppendResponse(&c.out, s.parser.error_status(), kJson, json, /*keep_alive=*/false, 11);
      c.closing = true;
      break;
    }
    if (st == http::RequestParser::Status::kRequest) {
      api_->Handle(c, s.parser.request(), /*more_input=*/offset < c.in.size());
      continue;
    }
    if (s.parser.TakeContinue()) c.out.append("HTTP/1.1 100 Continue\r\n\r\n");
    if (consumed == 0) break;  // need more input
  }
  c.in.erase(0, offset);
}

void HttpServer::AnswerReserve(Connection& c, const Result<Deliveries>& result) {
  api_->AnswerReserve(c, result);
}

uint64_t HttpServer::ReserveByteBudget() const {
  return std::max<uint64_t>(tcp_->options().max_output_bytes / 8, 1);
}

// --- responses ---------------------------------------------------------------------

void HttpServer::Api::Json(Connection& c, int status, std::string_view json,
                           std::string_view headers) {
  Respond(c, status, kJson, json, headers);
}

void HttpServer::Api::Respond(Connection& c, int status, std::string_view content_type,
                              std::string_view body, std::string_view headers) {
  AppendResponse(&c.out, status, content_type, body, keep_alive_, version_, headers);
  // g++ 12 warns at -O3 that resize's growing branch (never taken here) may
  // memcpy 2^63 bytes onto itself: a false alarm (GCC PRs 105329, 105651).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
  if (head_) c.out.resize(c.out.size() - body.size());  // the headers still tell its length
#pragma GCC diagnostic pop
  if (!keep_alive_) c.closing = true;
}

void HttpServer::Api::Error(Connection& c, const Status& st, std::string_view headers) {
  if (IsShuttingDown(st)) {
    // A reserve the shutdown cut short: this server is going away, so the
    // client is told to leave it (Connection: close; what was pipelined
    // behind is not served, as the header promises) and when to try again.
    // One second: time for a restart to be listening again, or for a
    // client of several servers to try the next one; a client that would
    // rather not wait reconnects at once, elsewhere.
    keep_alive_ = false;
    return Json(c, MappingFor(st.code()).http_status, ErrorJson(CodeName(st.code()), st.message()),
                std::string(headers) + "Retry-After: 1\r\n");
  }
  Json(c, MappingFor(st.code()).http_status, ErrorJson(CodeName(st.code()), st.message()), headers);
}

void HttpServer::Api::Ok(Connection& c, const Status& st, bool forced) {
  if (!st.ok()) return Error(c, st);
  Json(c, 200, forced ? "{\"ok\":true,\"forced\":true}" : "{\"ok\":true}");
}

void HttpServer::Api::NotAllowed(Connection& c, std::string_view allow) {
  std::string headers = "Allow: " + std::string(allow) + "\r\n";
  Json(c, 405,
       ErrorJson("invalid_argument", "method not allowed here; allowed: " + std::string(allow)),
       headers);
}

void HttpServer::Api::Park(Connection& c) {
  HttpState& s = StateOf(c);
  s.pending_keep_alive = keep_alive_;
  s.pending_version = version_;
  s.pending_head = head_;
}

void HttpServer::Api::Unpark(Connection& c) {
  HttpState& s = StateOf(c);
  // Draining: the connection closes after this response unless requests
  // were pipelined behind it (then the last one's says so); see Handle.
  keep_alive_ = s.pending_keep_alive && (!s_->tcp_->draining() || !c.in.empty());
  version_ = s.pending_version;
  head_ = s.pending_head;  // a HEAD handled meanwhile must not strip this body
}

}  // namespace delayq::server
