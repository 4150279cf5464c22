// How a request is served: net::TcpServer reads into c.in and calls OnInput,
// which parses complete requests (http::RequestParser), routes each to an
// endpoint of Api, and appends the response to c.out; the server writes c.out
// once. A reserve that has to wait parks the connection and is answered in
// AnswerReserve.
//
// Request bodies are JSON objects, parsed with simdjson. Unknown fields are
// errors that name the field (a typo such as "delay" for "delay_ms" must not
// silently add a job due now), except at /command, which keeps the seed's
// lenient protocol.
#include "server/http_server.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "codec/base64.h"
#include "codec/json_writer.h"
#include "common/secure_compare.h"
#include "http/url.h"
#include "server/errors.h"

namespace delayq::server {

namespace dom = simdjson::dom;
using codec::JsonWriter;
using net::Connection;

namespace {

// What a parked reserve answers with once its jobs (or its timeout) come.
enum class PendingReply { kNone, kReserve, kPop };

}  // namespace

struct HttpServer::HttpState : FrontEnd::State {
  http::RequestParser parser;
  PendingReply pending = PendingReply::kNone;
  // The request a parked connection will answer (Api::Park).
  bool pending_keep_alive = true;
  int pending_version = 11;
  bool pending_head = false;
  std::string pending_id;  // the seed's finish and delete reply with it
};

namespace {

HttpServer::HttpState& StateOf(Connection& c) {
  return static_cast<HttpServer::HttpState&>(*c.state);
}

std::string_view Reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
  }
  return "Unknown";
}

// One whole response. `extra_headers` are complete "Name: value\r\n" lines.
void AppendResponse(std::string* out, int status, std::string_view content_type,
                    std::string_view body, bool keep_alive, int version,
                    std::string_view extra_headers = {}) {
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

void WriteDelivery(JsonWriter& w, const Delivery& d) {
  w.BeginObject();
  w.Key("id");
  w.String(d.id);
  w.Key("topic");
  w.String(d.topic);
  w.TextField("body", d.body);
  w.Key("receipt");
  w.String(d.receipt);
  w.Key("attempts");
  w.Uint(d.attempts);
  w.Key("ttr_ms");
  w.Uint(d.ttr_ms);
  w.Key("priority");
  w.Uint(d.priority);
  w.Key("run_at_ms");
  w.Int(d.run_at_ms);
  w.Key("reserved_until_ms");
  w.Int(d.reserved_until_ms);
  w.EndObject();
}

void WriteJob(JsonWriter& w, const JobInfo& j) {
  w.BeginObject();
  w.Key("id");
  w.String(j.id);
  w.Key("topic");
  w.String(j.topic);
  w.Key("state");
  w.String(StateName(j.state));
  w.TextField("body", j.body);
  w.Key("priority");
  w.Uint(j.priority);
  w.Key("ttr_ms");
  w.Uint(j.ttr_ms);
  w.Key("max_attempts");
  w.Uint(j.max_attempts);
  w.Key("attempts");
  w.Uint(j.attempts);
  w.Key("created_at_ms");
  w.Int(j.created_at_ms);
  w.Key("run_at_ms");
  w.Int(j.run_at_ms);
  w.Key("reserved_until_ms");
  w.Int(j.reserved_until_ms);
  w.Key("receipt");
  w.String(j.receipt);
  w.Key("last_error");
  w.String(j.last_error);
  w.EndObject();
}

void WriteTopic(JsonWriter& w, const TopicInfo& t) {
  w.BeginObject();
  w.Key("name");
  w.String(t.name);
  w.Key("delayed");
  w.Uint(t.delayed);
  w.Key("ready");
  w.Uint(t.ready);
  w.Key("reserved");
  w.Uint(t.reserved);
  w.Key("buried");
  w.Uint(t.buried);
  w.Key("waiting");
  w.Uint(t.waiting);
  w.Key("paused");
  w.Bool(t.paused);
  w.Key("paused_for_ms");
  w.Int(t.paused_for_ms);
  w.EndObject();
}

std::string_view TypeName(dom::element_type t) {
  switch (t) {
    case dom::element_type::ARRAY: return "an array";
    case dom::element_type::OBJECT: return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64: return "an integer";
    case dom::element_type::DOUBLE: return "a number";
    case dom::element_type::STRING: return "a string";
    case dom::element_type::BOOL: return "a boolean";
    case dom::element_type::NULL_VALUE: return "null";
  }
  return "a value";
}

// A request body: one JSON object, read field by field with errors that
// name the field. An empty body reads as {}.
class JsonFields {
 public:
  // `allowed` empty: any field is accepted.
  Status Parse(dom::parser& parser, std::string_view text,
               std::initializer_list<std::string_view> allowed) {
    size_t start = text.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) return Status::Ok();
    dom::element root;
    if (auto err = parser.parse(text.data(), text.size()).get(root); err) {
      return InvalidArgument(std::string("body: not valid JSON: ") + simdjson::error_message(err));
    }
    if (root.type() != dom::element_type::OBJECT) {
      return InvalidArgument("body: expected a JSON object, got " +
                             std::string(TypeName(root.type())));
    }
    object_ = root.get_object().value_unsafe();
    has_object_ = true;
    if (allowed.size() == 0) return Status::Ok();
    for (dom::key_value_pair kv : object_) {
      bool known = false;
      for (std::string_view a : allowed) known = known || kv.key == a;
      if (!known) {
        return InvalidArgument("unknown field '" + std::string(kv.key.substr(0, 64)) + "'");
      }
    }
    return Status::Ok();
  }

  std::optional<dom::element> Find(std::string_view key) const {
    if (!has_object_) return std::nullopt;
    dom::element e;
    if (object_.at_key(key).get(e)) return std::nullopt;
    if (e.is_null()) return std::nullopt;  // "field": null reads as absent
    return e;
  }

  Status String(std::string_view key, std::optional<std::string>* out) const {
    auto e = Find(key);
    if (!e) return Status::Ok();
    std::string_view s;
    if (e->get_string().get(s)) return WrongType(key, "a string", *e);
    *out = std::string(s);
    return Status::Ok();
  }

  Status Int(std::string_view key, int64_t min, int64_t max, std::optional<int64_t>* out) const {
    auto e = Find(key);
    if (!e) return Status::Ok();
    int64_t v = 0;
    if (e->get_int64().get(v) || v < min || v > max) {
      std::string range;
      if (min != INT64_MIN || max != INT64_MAX) {
        range = " " + std::to_string(min) + ".." + std::to_string(max);
      }
      return InvalidArgument(std::string(key) + ": expected an integer" + range + ", got " +
                             (e->is_int64() ? "one out of range" : std::string(TypeName(e->type()))));
    }
    *out = v;
    return Status::Ok();
  }

  Status Bool(std::string_view key, bool* out) const {
    auto e = Find(key);
    if (!e) return Status::Ok();
    if (e->get_bool().get(*out)) return WrongType(key, "true or false", *e);
    return Status::Ok();
  }

  // Seconds as a JSON number (the seed's protocol), converted to ms.
  Status Seconds(std::string_view key, std::optional<int64_t>* out_ms) const {
    auto e = Find(key);
    if (!e) return Status::Ok();
    double s = 0;
    if (e->get_double().get(s) || !std::isfinite(s) || s < 0 ||
        s * 1000 > static_cast<double>(kMaxDelayMs)) {
      return InvalidArgument(std::string(key) + ": expected seconds, a number >= 0");
    }
    *out_ms = static_cast<int64_t>(std::llround(s * 1000));
    return Status::Ok();
  }

  // "body" (a string is its content; any other JSON value its compact text)
  // or "body_base64" (bytes).
  Status Body(std::string* out) const {
    auto text = Find("body");
    auto b64 = Find("body_base64");
    if (text && b64) return InvalidArgument("body and body_base64: give one, not both");
    if (text) {
      std::string_view s;
      if (!text->get_string().get(s)) {
        *out = std::string(s);
      } else {
        *out = simdjson::minify(*text);
      }
      return Status::Ok();
    }
    if (b64) {
      std::string_view s;
      if (b64->get_string().get(s)) return WrongType("body_base64", "a base64 string", *b64);
      auto bytes = codec::Base64Decode(s);
      if (!bytes) return InvalidArgument("body_base64: not valid base64");
      *out = std::move(*bytes);
    }
    return Status::Ok();
  }

  static Status WrongType(std::string_view key, std::string_view want, const dom::element& e) {
    return InvalidArgument(std::string(key) + ": expected " + std::string(want) + ", got " +
                           std::string(TypeName(e.type())));
  }

 private:
  dom::object object_;
  bool has_object_ = false;
};

constexpr std::string_view kJson = "application/json";

}  // namespace

// The endpoints. One request in, one Queue call, one response out (or a
// parked reserve).
class HttpServer::Api {
 public:
  explicit Api(HttpServer* server) : s_(server) {}

  void Handle(Connection& c, const http::Request& req);
  void AnswerReserve(Connection& c, const Result<Deliveries>& r);

 private:
  // Answers of the calls made through FrontEnd::Await.
  struct AnswerOk {
    void operator()(FrontEnd& f, Connection& c, const Status& st) const {
      Api& api = *static_cast<HttpServer&>(f).api_;
      api.Unpark(c);
      api.Ok(c, st);
    }
  };
  struct AnswerAdd {
    void operator()(FrontEnd& f, Connection& c, const Result<AddResult>& r) const {
      Api& api = *static_cast<HttpServer&>(f).api_;
      api.Unpark(c);
      api.Added(c, r);
    }
  };
  // A call answered by a member that writes the response from its result.
  template <typename T, void (Api::*Write)(Connection&, const T&)>
  struct AnswerWith {
    void operator()(FrontEnd& f, Connection& c, const T& r) const {
      Api& api = *static_cast<HttpServer&>(f).api_;
      api.Unpark(c);
      (api.*Write)(c, r);
    }
  };
  template <typename T, void (Api::*Write)(Connection&, const T&), typename Call>
  void AwaitWith(Connection& c, Call&& call) {
    Park(c);
    s_->Await<T, AnswerWith<T, Write>>(c, std::forward<Call>(call));
  }
  void JobReply(Connection& c, const Result<JobInfo>& r);
  void TopicReply(Connection& c, const Result<TopicInfo>& r);
  void TopicsReply(Connection& c, const Result<std::vector<TopicInfo>>& r);
  void KickedReply(Connection& c, const Result<uint64_t>& r);
  void StatsReply(Connection& c, const Result<QueueStats>& r);
  struct MetricsData {
    QueueStats stats;
    std::vector<TopicInfo> topics;
  };
  void MetricsReply(Connection& c, const Result<MetricsData>& r);
  // The seed's protocol: an add's reply, and a finish's or delete's (whose
  // id the connection keeps meanwhile: HttpState::pending_id).
  void SeedAdded(Connection& c, const Result<AddResult>& r);
  void SeedDone(Connection& c, const Status& st);
  // Keeps what the answer to the request being handled needs, for when the
  // connection is parked; Unpark makes it the request being answered again.
  void Park(Connection& c);
  void Unpark(Connection& c);
  // A change made through FrontEnd::Await, answered {"ok":true} or an error.
  template <typename Call>
  void AwaitOk(Connection& c, Call&& call) {
    Park(c);
    s_->Await<Status, AnswerOk>(c, std::forward<Call>(call));
  }
  void Added(Connection& c, const Result<AddResult>& r);

  // Response helpers: they answer the request being handled.
  void Respond(Connection& c, int status, std::string_view content_type, std::string_view body,
               std::string_view headers = {});
  void Json(Connection& c, int status, std::string_view json, std::string_view headers = {});
  void Error(Connection& c, const Status& st, std::string_view headers = {});
  void Ok(Connection& c, const Status& st);
  void NotAllowed(Connection& c, std::string_view allow);

  void AddJob(Connection& c, std::string_view body);
  void Reserve(Connection& c, std::string_view body);
  void JobAction(Connection& c, const std::string& id, std::string_view action,
                 std::string_view body);
  void GetJob(Connection& c, const std::string& id);
  void Topics(Connection& c);
  void TopicAction(Connection& c, const http::Request& req, const std::string& topic,
                   std::string_view action, std::string_view query);
  void Stats(Connection& c);
  void Metrics(Connection& c);
  void Command(Connection& c, std::string_view body);
  void SeedReply(Connection& c, const Status& st, std::string_view id = {},
                 std::optional<std::string_view> value = std::nullopt);

  HttpServer* s_;
  dom::parser parser_;
  std::string json_;  // scratch for response bodies
  // The request being answered.
  bool keep_alive_ = true;
  int version_ = 11;
  bool head_ = false;  // HEAD: answered as GET, without the body
};

// --- connections -------------------------------------------------------------------

Result<std::unique_ptr<HttpServer>> HttpServer::Create(net::EventLoop* loop, Queue* queue,
                                                       HttpServerOptions options) {
  net::TcpServerOptions tcp = options.tcp;
  auto server = std::unique_ptr<HttpServer>(new HttpServer(loop, queue, std::move(options)));
  if (Status st = server->Listen(std::move(tcp)); !st.ok()) return st;
  return server;
}

HttpServer::HttpServer(net::EventLoop* loop, Queue* queue, HttpServerOptions options)
    : FrontEnd(loop, queue), options_(std::move(options)), api_(std::make_unique<Api>(this)) {
  AppendResponse(&busy_reply_, 503, kJson,
                 ErrorJson("unavailable", "max number of connections reached"),
                 /*keep_alive=*/false, 11);
  AppendResponse(&timeout_reply_, 408, kJson,
                 ErrorJson("invalid_argument", "request not received within the request timeout"),
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
      std::string json = ErrorJson(s.parser.error_status() == 413 ? "too_large" : "invalid_argument",
                                   s.parser.error());
      AppendResponse(&c.out, s.parser.error_status(), kJson, json, /*keep_alive=*/false, 11);
      c.closing = true;
      break;
    }
    if (st == http::RequestParser::Status::kRequest) {
      api_->Handle(c, s.parser.request());
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
  if (head_) c.out.resize(c.out.size() - body.size());  // the headers still tell its length
  if (!keep_alive_) c.closing = true;
}

void HttpServer::Api::Error(Connection& c, const Status& st, std::string_view headers) {
  Json(c, MappingFor(st.code()).http_status, ErrorJson(CodeName(st.code()), st.message()),
       headers);
}

void HttpServer::Api::Ok(Connection& c, const Status& st) {
  if (!st.ok()) return Error(c, st);
  Json(c, 200, "{\"ok\":true}");
}

void HttpServer::Api::NotAllowed(Connection& c, std::string_view allow) {
  std::string headers = "Allow: " + std::string(allow) + "\r\n";
  Json(c, 405,
       ErrorJson("invalid_argument", "method not allowed here; allowed: " + std::string(allow)),
       headers);
}

// --- routing -----------------------------------------------------------------------

void HttpServer::Api::Handle(Connection& c, const http::Request& req) {
  keep_alive_ = req.keep_alive && !s_->tcp_->draining();
  version_ = req.version;
  head_ = req.method == http::Method::kHead;
  if (req.target.empty() || req.target[0] != '/') {
    return Error(c, InvalidArgument("request target: expected a path starting with '/'"));
  }
  http::Target target = http::SplitTarget(req.target);
  std::optional<std::vector<std::string>> segs = http::PathSegments(target.path);
  if (!segs) return Error(c, InvalidArgument("path: bad percent-encoding"));
  if (!http::ValidQuery(target.query)) {
    return Error(c, InvalidArgument("query: bad percent-encoding"));
  }
  const std::vector<std::string>& p = *segs;
  const http::Method m = req.method;
  const bool get = m == http::Method::kGet || m == http::Method::kHead;
  const bool post = m == http::Method::kPost;

  if (p.size() == 1 && p[0] == "healthz") {
    if (!get) return NotAllowed(c, "GET");
    // Degraded still answers 200: reads, reserves and finishes go on, and a
    // probe that restarted the server would not give the disk room.
    FrontEnd::StoreHealth h = s_->Health();
    if (h.status.ok()) return Json(c, 200, "{\"status\":\"ok\"}");
    std::string json;
    JsonWriter w(&json);
    w.BeginObject();
    w.Key("status");
    w.String(h.failed ? "failed" : "degraded");
    w.Key("store");
    w.String(h.status.message());
    w.EndObject();
    return Json(c, h.failed ? 503 : 200, json);
  }
  if (!s_->options_.auth_token.empty()) {
    constexpr std::string_view kBearer = "Bearer ";
    std::string_view auth = req.authorization;
    if (auth.substr(0, kBearer.size()) != kBearer ||
        !ConstantTimeEquals(s_->options_.auth_token, auth.substr(kBearer.size()))) {
      return Error(c,
                   Status(Code::kUnauthorized, auth.empty() ? "missing 'Authorization: Bearer <token>'"
                                                            : "invalid token"),
                   "WWW-Authenticate: Bearer\r\n");
    }
  }

  if (p.size() == 1 && p[0] == "command") {
    if (!post) return NotAllowed(c, "POST");
    return Command(c, req.body);
  }
  if (p.size() == 1 && p[0] == "metrics") {
    if (!get) return NotAllowed(c, "GET");
    return Metrics(c);
  }
  if (p.size() >= 2 && p[0] == "v1") {
    const std::string& what = p[1];
    if (what == "jobs" && p.size() == 2) {
      if (!post) return NotAllowed(c, "POST");
      return AddJob(c, req.body);
    }
    if (what == "jobs" && p.size() == 3) {
      if (get) return GetJob(c, p[2]);
      if (m == http::Method::kDelete) {
        return AwaitOk(c, [&](Queue::StatusCallback done) {
          s_->queue_->DeleteAsync(p[2], std::move(done));
        });
      }
      return NotAllowed(c, "GET, DELETE");
    }
    if (what == "jobs" && p.size() == 4) {
      if (!post) return NotAllowed(c, "POST");
      return JobAction(c, p[2], p[3], req.body);
    }
    if (what == "reserve" && p.size() == 2) {
      if (!post) return NotAllowed(c, "POST");
      return Reserve(c, req.body);
    }
    if (what == "topics" && p.size() == 2) {
      if (!get) return NotAllowed(c, "GET");
      return Topics(c);
    }
    if (what == "topics" && (p.size() == 3 || p.size() == 4)) {
      return TopicAction(c, req, p[2], p.size() == 4 ? std::string_view(p[3]) : "",
                         target.query);
    }
    if (what == "stats" && p.size() == 2) {
      if (!get) return NotAllowed(c, "GET");
      return Stats(c);
    }
  }
  Error(c, Status(Code::kNotFound, "no such endpoint: " + req.method_name + " " +
                                       target.path.substr(0, 200)));
}

// --- endpoints ---------------------------------------------------------------------

// POST /v1/jobs {"topic","id"?,"delay_ms"?,"run_at_ms"?,"ttr_ms"?,"priority"?,
//                "max_attempts"?,"body"?|"body_base64"?,"replace"?}
void HttpServer::Api::AddJob(Connection& c, std::string_view body) {
  JsonFields f;
  Status st = f.Parse(parser_, body,
                      {"topic", "id", "delay_ms", "run_at_ms", "ttr_ms", "priority", "max_attempts",
                       "body", "body_base64", "replace"});
  JobSpec spec;
  std::optional<std::string> topic, id;
  std::optional<int64_t> ttr, priority, max_attempts;
  if (st.ok()) st = f.String("topic", &topic);
  if (st.ok()) st = f.String("id", &id);
  if (st.ok()) st = f.Int("delay_ms", INT64_MIN, INT64_MAX, &spec.delay_ms);
  if (st.ok()) st = f.Int("run_at_ms", INT64_MIN, INT64_MAX, &spec.run_at_ms);
  if (st.ok()) st = f.Int("ttr_ms", 1, UINT32_MAX, &ttr);
  if (st.ok()) st = f.Int("priority", 0, UINT32_MAX, &priority);
  if (st.ok()) st = f.Int("max_attempts", 0, UINT32_MAX, &max_attempts);
  if (st.ok()) st = f.Body(&spec.body);
  if (st.ok()) st = f.Bool("replace", &spec.replace);
  if (st.ok() && !topic) st = InvalidArgument("topic: required");
  if (!st.ok()) return Error(c, st);
  spec.topic = std::move(*topic);
  if (id) spec.id = std::move(*id);
  if (ttr) spec.ttr_ms = static_cast<uint32_t>(*ttr);
  if (priority) spec.priority = static_cast<uint32_t>(*priority);
  if (max_attempts) spec.max_attempts = static_cast<uint32_t>(*max_attempts);
  Park(c);
  s_->Await<Result<AddResult>, AnswerAdd>(
      c, [&](Queue::AddCallback done) { s_->queue_->AddAsync(spec, std::move(done)); });
}

void HttpServer::Api::Added(Connection& c, const Result<AddResult>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("id");
  w.String(r->id);
  w.Key("state");
  w.String(StateName(r->state));
  w.Key("run_at_ms");
  w.Int(r->run_at_ms);
  w.EndObject();
  Json(c, 201, json_);
}

// POST /v1/reserve {"topics":[...],"wait_ms"?,"count"?}
void HttpServer::Api::Reserve(Connection& c, std::string_view body) {
  JsonFields f;
  Status st = f.Parse(parser_, body, {"topics", "wait_ms", "count"});
  ReserveRequest req;
  std::optional<int64_t> wait, count;
  if (st.ok()) st = f.Int("wait_ms", 0, 86'400'000, &wait);
  if (st.ok()) st = f.Int("count", 1, kMaxReserveCount, &count);
  if (st.ok()) {
    auto topics = f.Find("topics");
    dom::array arr;
    if (!topics) {
      st = InvalidArgument("topics: required, an array of topic names");
    } else if (topics->get_array().get(arr)) {
      st = JsonFields::WrongType("topics", "an array of topic names", *topics);
    } else {
      for (dom::element t : arr) {
        std::string_view name;
        if (t.get_string().get(name)) {
          st = JsonFields::WrongType("topics[]", "a topic name", t);
          break;
        }
        req.topics.emplace_back(name);
      }
    }
  }
  if (!st.ok()) return Error(c, st);
  if (wait) req.wait_ms = *wait;
  if (count) req.count = static_cast<uint32_t>(*count);
  StateOf(c).pending = PendingReply::kReserve;
  Park(c);
  s_->StartReserve(c, std::move(req));
}

void HttpServer::Api::Park(Connection& c) {
  HttpState& s = StateOf(c);
  s.pending_keep_alive = keep_alive_;
  s.pending_version = version_;
  s.pending_head = head_;
}

void HttpServer::Api::Unpark(Connection& c) {
  HttpState& s = StateOf(c);
  keep_alive_ = s.pending_keep_alive && !s_->tcp_->draining();
  version_ = s.pending_version;
  head_ = s.pending_head;  // a HEAD handled meanwhile must not strip this body
}

void HttpServer::Api::AnswerReserve(Connection& c, const Result<Deliveries>& r) {
  PendingReply kind = std::exchange(StateOf(c).pending, PendingReply::kNone);
  Unpark(c);
  if (kind == PendingReply::kPop) {
    if (!r.ok()) return SeedReply(c, r.status());
    if (r->empty()) return SeedReply(c, Status::Ok());
    return SeedReply(c, Status::Ok(), r->front().id, r->front().body);
  }
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("jobs");
  w.BeginArray();
  for (const Delivery& d : *r) WriteDelivery(w, d);
  w.EndArray();
  w.EndObject();
  Json(c, 200, json_);
}

// POST /v1/jobs/{id}/finish|release|touch|bury|kick
void HttpServer::Api::JobAction(Connection& c, const std::string& id, std::string_view action,
                                std::string_view body) {
  Queue& q = *s_->queue_;
  JsonFields f;
  std::optional<std::string> receipt, error;
  Status st;
  if (action == "finish" || action == "touch") {
    st = f.Parse(parser_, body, {"receipt"});
    if (st.ok()) st = f.String("receipt", &receipt);
    if (!st.ok()) return Error(c, st);
    std::string_view r = receipt ? std::string_view(*receipt) : std::string_view();
    return AwaitOk(c, [&](Queue::StatusCallback done) {
      if (action == "finish") {
        q.FinishAsync(id, r, std::move(done));
      } else {
        q.TouchAsync(id, r, std::move(done));
      }
    });
  }
  if (action == "release") {
    std::optional<int64_t> delay;
    st = f.Parse(parser_, body, {"receipt", "delay_ms", "error"});
    if (st.ok()) st = f.String("receipt", &receipt);
    if (st.ok()) st = f.Int("delay_ms", 0, kMaxDelayMs, &delay);
    if (st.ok()) st = f.String("error", &error);
    if (!st.ok()) return Error(c, st);
    return AwaitOk(c, [&](Queue::StatusCallback done) {
      q.ReleaseAsync(id, receipt.value_or(""), delay.value_or(0), error.value_or(""),
                     std::move(done));
    });
  }
  if (action == "bury") {
    st = f.Parse(parser_, body, {"receipt", "reason", "error"});
    if (st.ok()) st = f.String("receipt", &receipt);
    if (st.ok()) st = f.String("reason", &error);
    if (st.ok() && !error) st = f.String("error", &error);
    if (!st.ok()) return Error(c, st);
    return AwaitOk(c, [&](Queue::StatusCallback done) {
      q.BuryAsync(id, receipt.value_or(""), error.value_or(""), std::move(done));
    });
  }
  if (action == "kick") {
    st = f.Parse(parser_, body, {});
    if (!st.ok()) return Error(c, st);
    return AwaitOk(c, [&](Queue::StatusCallback done) { q.KickAsync(id, std::move(done)); });
  }
  Error(c, Status(Code::kNotFound,
                  "no such endpoint: POST /v1/jobs/{id}/" + std::string(action.substr(0, 64)) +
                      " (finish, release, touch, bury, kick)"));
}

void HttpServer::Api::GetJob(Connection& c, const std::string& id) {
  AwaitWith<Result<JobInfo>, &Api::JobReply>(
      c, [&](Queue::JobCallback done) { s_->queue_->GetAsync(id, std::move(done)); });
}

void HttpServer::Api::JobReply(Connection& c, const Result<JobInfo>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  WriteJob(w, *r);
  Json(c, 200, json_);
}

void HttpServer::Api::Topics(Connection& c) {
  AwaitWith<Result<std::vector<TopicInfo>>, &Api::TopicsReply>(
      c, [&](Queue::TopicsCallback done) { s_->queue_->TopicsAsync(std::move(done)); });
}

void HttpServer::Api::TopicsReply(Connection& c, const Result<std::vector<TopicInfo>>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("topics");
  w.BeginArray();
  for (const TopicInfo& t : *r) WriteTopic(w, t);
  w.EndArray();
  w.EndObject();
  Json(c, 200, json_);
}

// GET /v1/topics/{t} · POST /v1/topics/{t}/kick?n= · /pause?ms= · /resume ·
// GET /v1/topics/{t}/peek?state=
void HttpServer::Api::TopicAction(Connection& c, const http::Request& req,
                                  const std::string& topic, std::string_view action,
                                  std::string_view query) {
  Queue& q = *s_->queue_;
  const bool get = req.method == http::Method::kGet || req.method == http::Method::kHead;
  const bool post = req.method == http::Method::kPost;
  auto int_param = [&](std::string_view key, int64_t def,
                       std::optional<int64_t>* out) -> Status {
    std::optional<std::string> v = http::QueryParam(query, key);
    if (!v) {
      *out = def;
      return Status::Ok();
    }
    int64_t n = 0;
    auto r = std::from_chars(v->data(), v->data() + v->size(), n);
    if (r.ec != std::errc() || r.ptr != v->data() + v->size() || n < 0) {
      return InvalidArgument(std::string(key) + ": expected an integer >= 0");
    }
    *out = n;
    return Status::Ok();
  };
  if (action.empty()) {
    if (!get) return NotAllowed(c, "GET");
    return AwaitWith<Result<TopicInfo>, &Api::TopicReply>(
        c, [&](Queue::TopicCallback done) { q.TopicAsync(topic, std::move(done)); });
  }
  if (action == "kick") {
    if (!post) return NotAllowed(c, "POST");
    std::optional<int64_t> n;
    if (Status st = int_param("n", 1, &n); !st.ok()) return Error(c, st);
    return AwaitWith<Result<uint64_t>, &Api::KickedReply>(c, [&](Queue::CountCallback done) {
      q.KickTopicAsync(topic, static_cast<uint64_t>(*n), std::move(done));
    });
  }
  if (action == "pause") {
    if (!post) return NotAllowed(c, "POST");
    std::optional<int64_t> ms;
    if (Status st = int_param("ms", 0, &ms); !st.ok()) return Error(c, st);
    JsonFields f;
    Status st = f.Parse(parser_, req.body, {"ms"});
    if (st.ok()) st = f.Int("ms", 0, kMaxDelayMs, &ms);
    if (!st.ok()) return Error(c, st);
    return AwaitOk(
        c, [&](Queue::StatusCallback done) { q.PauseAsync(topic, *ms, std::move(done)); });
  }
  if (action == "resume") {
    if (!post) return NotAllowed(c, "POST");
    return AwaitOk(c, [&](Queue::StatusCallback done) { q.ResumeAsync(topic, std::move(done)); });
  }
  if (action == "peek") {
    if (!get) return NotAllowed(c, "GET");
    std::optional<std::string> state_name = http::QueryParam(query, "state");
    std::optional<JobState> state = ParseState(state_name.value_or("ready"));
    if (!state || *state == JobState::kReserved) {
      return Error(c, InvalidArgument("state: expected ready, delayed or buried"));
    }
    return AwaitWith<Result<JobInfo>, &Api::JobReply>(
        c, [&](Queue::JobCallback done) { q.PeekAsync(topic, *state, std::move(done)); });
  }
  Error(c, Status(Code::kNotFound, "no such endpoint: /v1/topics/{topic}/" +
                                       std::string(action.substr(0, 64)) +
                                       " (kick, pause, resume, peek)"));
}

void HttpServer::Api::TopicReply(Connection& c, const Result<TopicInfo>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  WriteTopic(w, *r);
  Json(c, 200, json_);
}

void HttpServer::Api::KickedReply(Connection& c, const Result<uint64_t>& r) {
  if (!r.ok()) return Error(c, r.status());
  Json(c, 200, "{\"kicked\":" + std::to_string(*r) + "}");
}

void HttpServer::Api::Stats(Connection& c) {
  AwaitWith<Result<QueueStats>, &Api::StatsReply>(
      c, [&](Queue::StatsCallback done) { s_->queue_->StatsAsync(std::move(done)); });
}

void HttpServer::Api::StatsReply(Connection& c, const Result<QueueStats>& r) {
  if (!r.ok()) return Error(c, r.status());
  const QueueStats& st = *r;
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  const std::pair<std::string_view, uint64_t> fields[] = {
      {"jobs", st.jobs},         {"delayed", st.delayed},
      {"ready", st.ready},       {"reserved", st.reserved},
      {"buried", st.buried},     {"topics", st.topics},
      {"waiting", st.waiting},   {"added", st.added},
      {"replaced", st.replaced}, {"reserves", st.reserves},
      {"finished", st.finished}, {"deleted", st.deleted},
      {"released", st.released}, {"timed_out", st.timed_out},
      {"buried_total", st.buried_total}, {"kicked", st.kicked},
      {"http_connections", s_->connections()},
  };
  for (const auto& [k, v] : fields) {
    w.Key(k);
    w.Uint(v);
  }
  for (const auto& [k, v] : s_->SharedStatsFields()) {
    w.Key(k);
    w.Uint(v);
  }
  w.EndObject();
  Json(c, 200, json_);
}

// Prometheus text format 0.0.4.
void HttpServer::Api::Metrics(Connection& c) {
  // Two calls, one after the other, answered as one.
  Queue* q = s_->queue_;
  AwaitWith<Result<MetricsData>, &Api::MetricsReply>(
      c, [q](std::function<void(Result<MetricsData>)> done) {
        q->StatsAsync([q, done = std::move(done)](Result<QueueStats> st) mutable {
          if (!st.ok()) return done(st.status());
          q->TopicsAsync([st = *st, done = std::move(done)](
                             Result<std::vector<TopicInfo>> topics) {
            if (!topics.ok()) return done(topics.status());
            done(MetricsData{st, std::move(topics).value()});
          });
        });
      });
}

void HttpServer::Api::MetricsReply(Connection& c, const Result<MetricsData>& r) {
  if (!r.ok()) return Error(c, r.status());
  const QueueStats& st = r->stats;
  const std::vector<TopicInfo>* topics = &r->topics;
  std::string& t = json_;
  t.clear();
  auto metric = [&t](std::string_view name, std::string_view type, std::string_view help) {
    t.append("# HELP ").append(name).append(" ").append(help).append("\n");
    t.append("# TYPE ").append(name).append(" ").append(type).append("\n");
  };
  auto sample = [&t](std::string_view name, std::string_view labels, uint64_t v) {
    t.append(name);
    if (!labels.empty()) t.append("{").append(labels).append("}");
    t.append(" ").append(std::to_string(v)).append("\n");
  };
  metric("delayq_jobs", "gauge", "Live jobs by state.");
  sample("delayq_jobs", "state=\"delayed\"", st.delayed);
  sample("delayq_jobs", "state=\"ready\"", st.ready);
  sample("delayq_jobs", "state=\"reserved\"", st.reserved);
  sample("delayq_jobs", "state=\"buried\"", st.buried);
  metric("delayq_waiting_reserves", "gauge", "Reserves waiting for a job.");
  sample("delayq_waiting_reserves", "", st.waiting);
  metric("delayq_topics", "gauge", "Topics with jobs, waiting reserves or a pause.");
  sample("delayq_topics", "", st.topics);
  const std::pair<std::string_view, uint64_t> counters[] = {
      {"delayq_added_total", st.added},         {"delayq_replaced_total", st.replaced},
      {"delayq_reserved_total", st.reserves},   {"delayq_finished_total", st.finished},
      {"delayq_deleted_total", st.deleted},     {"delayq_released_total", st.released},
      {"delayq_timed_out_total", st.timed_out}, {"delayq_buried_total", st.buried_total},
      {"delayq_kicked_total", st.kicked},
  };
  for (const auto& [name, v] : counters) {
    metric(name, "counter", "Jobs since start.");
    sample(name, "", v);
  }
  if (const LatenessHistogram* late = s_->lateness_) {
    metric("delayq_due_lateness_seconds", "histogram",
           "From a job's run_at to its delivery to a reserve that was waiting for it.");
    for (const char* le : {"0.0005", "0.001", "0.002", "0.005", "0.01", "0.1", "1"}) {
      uint64_t us = static_cast<uint64_t>(std::stod(le) * 1e6 + 0.5);
      sample("delayq_due_lateness_seconds_bucket", std::string("le=\"") + le + "\"",
             late->CountAtMost(us));
    }
    sample("delayq_due_lateness_seconds_bucket", "le=\"+Inf\"", late->count());
    t.append("delayq_due_lateness_seconds_sum ")
        .append(std::to_string(static_cast<double>(late->sum_us()) / 1e6))
        .append("\n");
    sample("delayq_due_lateness_seconds_count", "", late->count());
  }
  for (const auto& [k, v] : s_->StoreFields()) {
    std::string name = "delayq_store_" + std::string(k);
    metric(name, "gauge", "The embedded store (see /v1/stats in docs/api.md).");
    sample(name, "", v);
  }
  metric("delayq_http_connections", "gauge", "Open HTTP connections.");
  sample("delayq_http_connections", "", s_->connections());
  metric("delayq_topic_jobs", "gauge", "Live jobs of a topic by state.");
  for (const TopicInfo& ti : *topics) {
    // Topic names are [A-Za-z0-9._:-]: nothing to escape in a label value.
    std::string base = "topic=\"" + ti.name + "\",state=";
    sample("delayq_topic_jobs", base + "\"delayed\"", ti.delayed);
    sample("delayq_topic_jobs", base + "\"ready\"", ti.ready);
    sample("delayq_topic_jobs", base + "\"reserved\"", ti.reserved);
    sample("delayq_topic_jobs", base + "\"buried\"", ti.buried);
  }
  Respond(c, 200, "text/plain; version=0.0.4", t);
}

// --- the seed's protocol -----------------------------------------------------------

// POST /command: {"command":"add","topic","id","delay":s,"TTR":s,"body"},
// {"command":"pop","topic","timeout"?:s}, {"command":"finish","id"},
// {"command":"delete","id"} -> 200 {"success","error","id","value"}.
// Errors are reported in the body ("success":false), with status 200, as
// the seed's clients expect; only a malformed HTTP request gets a 4xx.
void HttpServer::Api::Command(Connection& c, std::string_view body) {
  JsonFields f;
  Status st = f.Parse(parser_, body, {});
  std::optional<std::string> command, topic, id;
  if (st.ok()) st = f.String("command", &command);
  if (st.ok()) st = f.String("topic", &topic);
  if (st.ok()) st = f.String("id", &id);
  if (st.ok() && !command) st = InvalidArgument("command: required (add, pop, finish, delete)");
  if (!st.ok()) return SeedReply(c, st);
  Queue& q = *s_->queue_;
  if (*command == "add") {
    JobSpec spec;
    std::optional<int64_t> ttr;
    st = f.Seconds("delay", &spec.delay_ms);
    if (st.ok()) st = f.Seconds(f.Find("TTR") ? "TTR" : "ttr", &ttr);
    if (st.ok()) st = f.Body(&spec.body);
    if (st.ok() && !topic) st = InvalidArgument("topic: required");
    if (st.ok() && !id) st = InvalidArgument("id: required (the seed's ids are the client's)");
    if (st.ok() && ttr && (*ttr < 1 || *ttr > UINT32_MAX)) {
      st = InvalidArgument("TTR: expected seconds, 0.001..4294967.295");
    }
    if (!st.ok()) return SeedReply(c, st);
    spec.topic = std::move(*topic);
    spec.id = std::move(*id);
    if (ttr) spec.ttr_ms = static_cast<uint32_t>(*ttr);
    return AwaitWith<Result<AddResult>, &Api::SeedAdded>(
        c, [&](Queue::AddCallback done) { q.AddAsync(spec, std::move(done)); });
  }
  if (*command == "pop") {
    std::optional<int64_t> timeout;
    st = f.Seconds("timeout", &timeout);
    if (st.ok() && !topic) st = InvalidArgument("topic: required");
    if (st.ok() && timeout && *timeout > 86'400'000) {
      st = InvalidArgument("timeout: at most 86400 seconds");
    }
    if (!st.ok()) return SeedReply(c, st);
    ReserveRequest req;
    req.topics.push_back(std::move(*topic));
    req.wait_ms = timeout.value_or(0);
    StateOf(c).pending = PendingReply::kPop;
    Park(c);
    return s_->StartReserve(c, std::move(req));
  }
  if (*command == "finish" || *command == "delete") {
    if (!id) return SeedReply(c, InvalidArgument("id: required"));
    StateOf(c).pending_id = *id;
    const bool finish = *command == "finish";
    return AwaitWith<Status, &Api::SeedDone>(c, [&](Queue::StatusCallback done) {
      if (finish) {
        q.FinishAsync(*id, "", std::move(done));
      } else {
        q.DeleteAsync(*id, std::move(done));
      }
    });
  }
  SeedReply(c, InvalidArgument("command: '" + command->substr(0, 64) +
                               "' is not one of add, pop, finish, delete"));
}

void HttpServer::Api::SeedAdded(Connection& c, const Result<AddResult>& r) {
  if (!r.ok()) return SeedReply(c, r.status());
  SeedReply(c, Status::Ok(), r->id);
}

void HttpServer::Api::SeedDone(Connection& c, const Status& st) {
  std::string id = std::exchange(StateOf(c).pending_id, std::string());
  SeedReply(c, st, st.ok() ? std::string_view(id) : std::string_view());
}

void HttpServer::Api::SeedReply(Connection& c, const Status& st, std::string_view id,
                                std::optional<std::string_view> value) {
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("success");
  w.Bool(st.ok());
  w.Key("error");
  if (st.ok()) {
    w.Null();
  } else {
    w.String(std::string(CodeName(st.code())) + ": " + st.message());
  }
  w.Key("id");
  if (id.empty()) {
    w.Null();
  } else {
    w.String(id);
  }
  w.Key("value");
  if (value) {
    w.String(*value);  // the seed's bodies are JSON text; bytes that are not UTF-8 are replaced
  } else {
    w.Null();
  }
  w.EndObject();
  Json(c, 200, json_);
}

}  // namespace delayq::server
