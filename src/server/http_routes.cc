// The HTTP/JSON API of SPEC §6 as one table of routes: (method, path
// pattern, handler). The router matches the path once, checks the method
// once, and calls the handler; each handler is thin: read the request, one
// Queue call, write the answer.
//
// Patterns are matched segment by segment on the decoded path: a literal
// segment must be equal, "{name}" takes any segment (an empty one too) and
// hands it to the handler. The first route whose pattern matches decides:
// the routes with that same pattern (consecutive in the table) are the
// methods the path has; none of them fitting answers 405 with their Allow
// list. So a literal route ("/v1/topics/{topic}/kick") goes before a
// catch-all of the same shape ("/v1/topics/{topic}/{action}").
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/json_writer.h"
#include "common/secure_compare.h"
#include "http/url.h"
#include "server/errors.h"
#include "server/http_api.h"
#include "server/json_fields.h"
#include "wire/encode.h"

namespace delayq::server {

using codec::JsonWriter;

// The method a route answers; kGet answers HEAD too.
enum class RouteMethod { kGet, kPost, kPut, kDelete, kAny };

struct HttpServer::Api::Route {
  RouteMethod method;
  std::string_view pattern;  // "/v1/jobs/{id}"
  Handler handler;
  bool open = false;  // answered without the auth token (/healthz)
};

namespace {

bool Accepts(RouteMethod m, http::Method got) {
  switch (m) {
    case RouteMethod::kGet:
      return got == http::Method::kGet || got == http::Method::kHead;
    case RouteMethod::kPost:
      return got == http::Method::kPost;
    case RouteMethod::kPut:
      return got == http::Method::kPut;
    case RouteMethod::kDelete:
      return got == http::Method::kDelete;
    case RouteMethod::kAny:
      return true;
  }
  return false;
}

std::string_view MethodName(RouteMethod m) {
  switch (m) {
    case RouteMethod::kGet:
      return "GET";
    case RouteMethod::kPost:
      return "POST";
    case RouteMethod::kPut:
      return "PUT";
    case RouteMethod::kDelete:
      return "DELETE";
    case RouteMethod::kAny:
      break;
  }
  return "";
}

// True when the path's segments fit `pattern`; its {name} segments are then
// in call->params.
bool Match(std::string_view pattern, const std::vector<std::string>& path, RouteCall* call) {
  call->param_count = 0;
  size_t i = 0;
  pattern.remove_prefix(1);  // the leading '/'
  for (;;) {
    size_t slash = pattern.find('/');
    std::string_view seg = pattern.substr(0, slash);
    if (i == path.size()) return false;
    if (!seg.empty() && seg.front() == '{') {
      if (call->param_count == call->params.size()) return false;
      call->params[call->param_count++] = &path[i];
    } else if (seg != path[i]) {
      return false;
    }
    ++i;
    if (slash == std::string_view::npos) break;
    pattern.remove_prefix(slash + 1);
  }
  return i == path.size();
}

// A query parameter that is an integer >= 0; `def` when absent.
Status QueryInt(std::string_view query, std::string_view key, int64_t def,
                std::optional<int64_t>* out) {
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
}

}  // namespace

// --- the table ---------------------------------------------------------------------

std::span<const HttpServer::Api::Route> HttpServer::Api::Routes() {
  using M = RouteMethod;
  static constexpr Route kRoutes[] = {
      {M::kGet, "/healthz", &Api::Healthz, /*open=*/true},
      {M::kPost, "/command", &Api::Command},
      {M::kGet, "/metrics", &Api::Metrics},
      {M::kPost, "/v1/jobs", &Api::AddJob},
      {M::kGet, "/v1/jobs/{id}", &Api::GetJob},
      {M::kDelete, "/v1/jobs/{id}", &Api::DeleteJob},
      {M::kPost, "/v1/jobs/{id}/finish", &Api::Finish},
      {M::kPost, "/v1/jobs/{id}/release", &Api::Release},
      {M::kPost, "/v1/jobs/{id}/touch", &Api::Touch},
      {M::kPost, "/v1/jobs/{id}/bury", &Api::Bury},
      {M::kPost, "/v1/jobs/{id}/kick", &Api::Kick},
      // Any other action: 404 naming the actions (405 first for another method).
      {M::kPost, "/v1/jobs/{id}/{action}", &Api::NoJobAction},
      {M::kPost, "/v1/reserve", &Api::Reserve},
      {M::kGet, "/v1/topics", &Api::Topics},
      {M::kGet, "/v1/topics/{topic}", &Api::Topic},
      {M::kGet, "/v1/topics/{topic}/", &Api::Topic},  // a trailing '/' reads as the topic
      {M::kPost, "/v1/topics/{topic}/kick", &Api::KickTopic},
      {M::kPost, "/v1/topics/{topic}/pause", &Api::Pause},
      {M::kPost, "/v1/topics/{topic}/resume", &Api::Resume},
      {M::kGet, "/v1/topics/{topic}/peek", &Api::Peek},
      // Any other action: 404 naming the actions, whatever the method.
      {M::kAny, "/v1/topics/{topic}/{action}", &Api::NoTopicAction},
      {M::kGet, "/v1/stats", &Api::Stats},
      // Push delivery (http_subscriptions.cc).
      {M::kGet, "/v1/subscriptions", &Api::ListSubscriptions},
      {M::kPut, "/v1/subscriptions/{name}", &Api::PutSubscription},
      {M::kGet, "/v1/subscriptions/{name}", &Api::GetSubscription},
      {M::kDelete, "/v1/subscriptions/{name}", &Api::DeleteSubscription},
      // Periodic jobs (http_schedules.cc).
      {M::kGet, "/v1/schedules", &Api::ListSchedules},
      {M::kPut, "/v1/schedules/{name}", &Api::PutSchedule},
      {M::kGet, "/v1/schedules/{name}", &Api::GetSchedule},
      {M::kDelete, "/v1/schedules/{name}", &Api::DeleteSchedule},
      {M::kPost, "/v1/schedules/{name}/pause", &Api::PauseSchedule},
      {M::kPost, "/v1/schedules/{name}/resume", &Api::ResumeSchedule},
      {M::kPost, "/v1/schedules/{name}/backfill", &Api::BackfillSchedule},
      // Any other action: 404 naming the actions, whatever the method.
      {M::kAny, "/v1/schedules/{name}/{action}", &Api::NoScheduleAction},
  };
  return kRoutes;
}

// --- the router --------------------------------------------------------------------

void HttpServer::Api::Handle(Connection& c, const http::Request& req, bool more_input) {
  // Draining, the connection closes once it has served what it received:
  // the response says "Connection: close" unless more requests follow.
  keep_alive_ = req.keep_alive && (!s_->tcp_->draining() || more_input);
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
  RouteCall call{.req = req, .query = target.query};
  std::span<const Route> routes = Routes();
  auto route = routes.begin();
  while (route != routes.end() && !Match(route->pattern, *segs, &call)) ++route;
  if ((route == routes.end() || !route->open) && !Authorized(c, req)) return;
  if (route == routes.end()) {
    return Error(c, Status(Code::kNotFound, "no such endpoint: " + req.method_name + " " +
                                                target.path.substr(0, 200)));
  }
  // The routes of this pattern: the methods the path has.
  std::string allow;
  for (auto r = route; r != routes.end() && r->pattern == route->pattern; ++r) {
    if (Accepts(r->method, req.method)) return (this->*r->handler)(c, call);
    if (!allow.empty()) allow += ", ";
    allow += MethodName(r->method);
  }
  NotAllowed(c, allow);
}

bool HttpServer::Api::Authorized(Connection& c, const http::Request& req) {
  if (s_->options_.auth_token.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  std::string_view auth = req.authorization;
  if (auth.substr(0, kBearer.size()) != kBearer ||
      !ConstantTimeEquals(s_->options_.auth_token, auth.substr(kBearer.size()))) {
    Error(c,
          Status(Code::kUnauthorized,
                 auth.empty() ? "missing 'Authorization: Bearer <token>'" : "invalid token"),
          "WWW-Authenticate: Bearer\r\n");
    return false;
  }
  return true;
}

// --- endpoints ---------------------------------------------------------------------

void HttpServer::Api::Healthz(Connection& c, const RouteCall&) {
  // The store's state (ServingQueue::Figures): ok; degraded (why: a full
  // disk refuses adds, a failing write refuses changes; reads go on), still
  // 200, since a probe that restarted the server would not give the disk
  // room; or failed for good (a failed fdatasync: only a restart recovers).
  StoreFigures f = s_->queue_->Figures();
  wire::Health health{"ok", "", f.topology};
  if (!f.health.ok()) {
    health.status = f.failed ? "failed" : "degraded";
    health.store = f.health.message();
  }
  std::string json;
  JsonWriter w(&json);
  wire::WriteJson(w, health, wire::kHealthFields);
  return Json(c, f.failed ? 503 : 200, json);
}

// POST /v1/jobs {"topic","id"?,"delay_ms"?|"delay"?,"run_at_ms"?,"ttr_ms"?|"ttr"?,
//                "priority"?,"max_attempts"?,"body"?|"body_base64"?,"replace"?,
//                "idempotency_key"?}
// ("delay", "ttr": a duration with a unit, "5s")
void HttpServer::Api::AddJob(Connection& c, const RouteCall& call) {
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body,
                      {"topic", "id", "delay_ms", "delay", "run_at_ms", "ttr_ms", "ttr", "priority",
                       "max_attempts", "body", "body_base64", "replace", "idempotency_key"});
  JobSpec spec;
  std::optional<std::string> topic, id, idempotency_key;
  std::optional<int64_t> ttr, priority, max_attempts;
  if (st.ok()) st = f.String("topic", &topic);
  if (st.ok()) st = f.String("id", &id);
  if (st.ok()) st = f.Duration("delay", "delay_ms", INT64_MIN, INT64_MAX, &spec.delay_ms);
  if (st.ok()) st = f.Int("run_at_ms", INT64_MIN, INT64_MAX, &spec.run_at_ms);
  if (st.ok()) st = f.Duration("ttr", "ttr_ms", 1, UINT32_MAX, &ttr);
  if (st.ok()) st = f.Int("priority", 0, UINT32_MAX, &priority);
  if (st.ok()) st = f.Int("max_attempts", 0, UINT32_MAX, &max_attempts);
  if (st.ok()) st = f.Body(&spec.body);
  if (st.ok()) st = f.Bool("replace", &spec.replace);
  if (st.ok()) st = f.String("idempotency_key", &idempotency_key);
  if (st.ok() && !topic) st = InvalidArgument("topic: required");
  if (!st.ok()) return Error(c, st);
  spec.topic = std::move(*topic);
  if (id) spec.id = std::move(*id);
  if (idempotency_key) spec.idempotency_key = std::move(*idempotency_key);
  if (ttr) spec.ttr_ms = static_cast<uint32_t>(*ttr);
  if (priority) spec.priority = static_cast<uint32_t>(*priority);
  if (max_attempts) spec.max_attempts = static_cast<uint32_t>(*max_attempts);
  Park(c);
  s_->Await<Result<AddResult>, AnswerAdd>(
      c, [&](ServingQueue::AddCallback done) { s_->queue_->AddAsync(spec, std::move(done)); });
}

void HttpServer::Api::Added(Connection& c, const Result<AddResult>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  wire::WriteJson(w, *r, wire::kAddedFields);
  Json(c, 201, json_);
}

// POST /v1/reserve {"topics":[...],"wait_ms"?|"wait"?,"count"?}
void HttpServer::Api::Reserve(Connection& c, const RouteCall& call) {
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {"topics", "wait_ms", "wait", "count"});
  ReserveRequest req;
  std::optional<int64_t> wait, count;
  if (st.ok()) st = f.Duration("wait", "wait_ms", 0, 86'400'000, &wait);
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

void HttpServer::Api::AnswerReserve(Connection& c, const Result<Deliveries>& r) {
  PendingReply kind = std::exchange(StateOf(c).pending, PendingReply::kNone);
  Unpark(c);
  if (kind == PendingReply::kPop) {
    // The seed's protocol answers errors 200 {"success":false}; a pop the
    // shutdown cut short says so there, and the connection closes.
    if (IsShuttingDown(r.status())) keep_alive_ = false;
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
  for (const Delivery& d : *r) wire::WriteJson(w, d, wire::kDeliveryFields);
  w.EndArray();
  w.EndObject();
  Json(c, 200, json_);
}

void HttpServer::Api::DeleteJob(Connection& c, const RouteCall& call) {
  AwaitOk(c, [&](ServingQueue::StatusCallback done) {
    s_->queue_->DeleteAsync(call.param(0), std::move(done));
  });
}

// POST /v1/jobs/{id}/finish · /touch {"receipt"} or {"force":true}
void HttpServer::Api::Finish(Connection& c, const RouteCall& call) {
  ReceiptAction(c, call, &ServingQueue::FinishAsync);
}

void HttpServer::Api::Touch(Connection& c, const RouteCall& call) {
  ReceiptAction(c, call, &ServingQueue::TouchAsync);
}

void HttpServer::Api::ReceiptAction(Connection& c, const RouteCall& call, ReceiptCall op) {
  std::string receipt;
  bool forced = false;
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {"receipt", "force"});
  if (st.ok()) st = f.Receipt(&receipt, &forced);
  if (!st.ok()) return Error(c, st);
  AwaitOk(
      c,
      [&](ServingQueue::StatusCallback done) {
        (s_->queue_->*op)(call.param(0), receipt, std::move(done));
      },
      forced);
}

// POST /v1/jobs/{id}/release {"receipt"|"force":true,"delay_ms"?|"delay"?,"error"?}
void HttpServer::Api::Release(Connection& c, const RouteCall& call) {
  std::string receipt;
  bool forced = false;
  std::optional<std::string> error;
  std::optional<int64_t> delay;
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {"receipt", "force", "delay_ms", "delay", "error"});
  if (st.ok()) st = f.Receipt(&receipt, &forced);
  if (st.ok()) st = f.Duration("delay", "delay_ms", 0, kMaxDelayMs, &delay);
  if (st.ok()) st = f.String("error", &error);
  if (!st.ok()) return Error(c, st);
  AwaitOk(
      c,
      [&](ServingQueue::StatusCallback done) {
        s_->queue_->ReleaseAsync(call.param(0), receipt, delay.value_or(0), error.value_or(""),
                                 std::move(done));
      },
      forced);
}

// POST /v1/jobs/{id}/bury {"receipt"|"force":true,"reason"?|"error"?}
void HttpServer::Api::Bury(Connection& c, const RouteCall& call) {
  std::string receipt;
  bool forced = false;
  std::optional<std::string> error;
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {"receipt", "force", "reason", "error"});
  if (st.ok()) st = f.Receipt(&receipt, &forced);
  if (st.ok()) st = f.String("reason", &error);
  if (st.ok() && !error) st = f.String("error", &error);
  if (!st.ok()) return Error(c, st);
  AwaitOk(
      c,
      [&](ServingQueue::StatusCallback done) {
        s_->queue_->BuryAsync(call.param(0), receipt, error.value_or(""), std::move(done));
      },
      forced);
}

// POST /v1/jobs/{id}/kick {}
void HttpServer::Api::Kick(Connection& c, const RouteCall& call) {
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {});
  if (!st.ok()) return Error(c, st);
  AwaitOk(c, [&](ServingQueue::StatusCallback done) {
    s_->queue_->KickAsync(call.param(0), std::move(done));
  });
}

void HttpServer::Api::NoJobAction(Connection& c, const RouteCall& call) {
  Error(c, Status(Code::kNotFound, "no such endpoint: POST /v1/jobs/{id}/" +
                                       call.param(1).substr(0, 64) +
                                       " (finish, release, touch, bury, kick)"));
}

void HttpServer::Api::GetJob(Connection& c, const RouteCall& call) {
  AwaitWith<Result<JobInfo>, &Api::JobReply>(c, [&](ServingQueue::JobCallback done) {
    s_->queue_->GetAsync(call.param(0), std::move(done));
  });
}

void HttpServer::Api::JobReply(Connection& c, const Result<JobInfo>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  wire::WriteJson(w, *r, wire::kJobFields);
  Json(c, 200, json_);
}

void HttpServer::Api::Topics(Connection& c, const RouteCall&) {
  AwaitWith<Result<std::vector<TopicInfo>>, &Api::TopicsReply>(
      c, [&](ServingQueue::TopicsCallback done) { s_->queue_->TopicsAsync(std::move(done)); });
}

void HttpServer::Api::TopicsReply(Connection& c, const Result<std::vector<TopicInfo>>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("topics");
  w.BeginArray();
  for (const TopicInfo& t : *r) wire::WriteJson(w, t, wire::kTopicFields);
  w.EndArray();
  w.EndObject();
  Json(c, 200, json_);
}

// GET /v1/topics/{t}
void HttpServer::Api::Topic(Connection& c, const RouteCall& call) {
  AwaitWith<Result<TopicInfo>, &Api::TopicReply>(c, [&](ServingQueue::TopicCallback done) {
    s_->queue_->TopicAsync(call.param(0), std::move(done));
  });
}

// POST /v1/topics/{t}/kick?n=
void HttpServer::Api::KickTopic(Connection& c, const RouteCall& call) {
  std::optional<int64_t> n;
  if (Status st = QueryInt(call.query, "n", 1, &n); !st.ok()) return Error(c, st);
  AwaitWith<Result<uint64_t>, &Api::KickedReply>(c, [&](ServingQueue::CountCallback done) {
    s_->queue_->KickTopicAsync(call.param(0), static_cast<uint64_t>(*n), std::move(done));
  });
}

// POST /v1/topics/{t}/pause?ms= or {"ms"}
void HttpServer::Api::Pause(Connection& c, const RouteCall& call) {
  std::optional<int64_t> ms;
  if (Status st = QueryInt(call.query, "ms", 0, &ms); !st.ok()) return Error(c, st);
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {"ms"});
  if (st.ok()) st = f.Int("ms", 0, kMaxDelayMs, &ms);
  if (!st.ok()) return Error(c, st);
  AwaitOk(c, [&](ServingQueue::StatusCallback done) {
    s_->queue_->PauseAsync(call.param(0), *ms, std::move(done));
  });
}

// POST /v1/topics/{t}/resume
void HttpServer::Api::Resume(Connection& c, const RouteCall& call) {
  AwaitOk(c, [&](ServingQueue::StatusCallback done) {
    s_->queue_->ResumeAsync(call.param(0), std::move(done));
  });
}

// GET /v1/topics/{t}/peek?state=
void HttpServer::Api::Peek(Connection& c, const RouteCall& call) {
  std::optional<std::string> state_name = http::QueryParam(call.query, "state");
  std::optional<JobState> state = ParseState(state_name.value_or("ready"));
  if (!state || *state == JobState::kReserved) {
    return Error(c, InvalidArgument("state: expected ready, delayed or buried"));
  }
  AwaitWith<Result<JobInfo>, &Api::JobReply>(c, [&](ServingQueue::JobCallback done) {
    s_->queue_->PeekAsync(call.param(0), *state, std::move(done));
  });
}

void HttpServer::Api::NoTopicAction(Connection& c, const RouteCall& call) {
  Error(c,
        Status(Code::kNotFound, "no such endpoint: /v1/topics/{topic}/" +
                                    call.param(1).substr(0, 64) + " (kick, pause, resume, peek)"));
}

void HttpServer::Api::TopicReply(Connection& c, const Result<TopicInfo>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  wire::WriteJson(w, *r, wire::kTopicFields);
  Json(c, 200, json_);
}

void HttpServer::Api::KickedReply(Connection& c, const Result<uint64_t>& r) {
  if (!r.ok()) return Error(c, r.status());
  Json(c, 200, "{\"kicked\":" + std::to_string(*r) + "}");
}

void HttpServer::Api::Stats(Connection& c, const RouteCall&) {
  AwaitWith<Result<QueueStats>, &Api::StatsReply>(
      c, [&](ServingQueue::StatsCallback done) { s_->queue_->StatsAsync(std::move(done)); });
}

void HttpServer::Api::StatsReply(Connection& c, const Result<QueueStats>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  wire::WriteJsonFields(w, *r, wire::kStatsFields);
  w.Key("http_connections");
  w.Uint(s_->connections());
  for (const auto& [k, v] : s_->SharedStatsFields()) {
    w.Key(k);
    w.Uint(v);
  }
  w.EndObject();
  Json(c, 200, json_);
}

}  // namespace delayq::server
