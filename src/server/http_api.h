// What the files of the HTTP front end share, private to them:
//
//   http_server.cc   connections and framing: requests parsed off the input,
//                    responses written (status line, headers, HEAD, close)
//   http_routes.cc   the route table (method, path pattern, handler), the
//                    router, and the endpoints of SPEC §6
//   http_metrics.cc  GET /metrics, the Prometheus text
//   seed_command.cc  POST /command, the seed's protocol
//   http_subscriptions.cc  /v1/subscriptions: push delivery's registrations
//   http_schedules.cc  /v1/schedules: periodic jobs
//   json_fields.h    request bodies read field by field
#ifndef DELAYQ_SERVER_HTTP_API_H_
#define DELAYQ_SERVER_HTTP_API_H_

#include <simdjson.h>

#include <array>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/queue.h"
#include "delayq/subscription.h"
#include "http/request_parser.h"
#include "net/tcp_server.h"
#include "push/pusher.h"
#include "schedule/scheduler.h"
#include "server/http_server.h"

namespace delayq::server {

// What a parked reserve answers with once its jobs (or its timeout) come.
enum class PendingReply { kNone, kReserve, kPop };

struct HttpServer::HttpState : FrontEnd::State {
  http::RequestParser parser;
  PendingReply pending = PendingReply::kNone;
  // The request a parked connection will answer (Api::Park).
  bool pending_keep_alive = true;
  int pending_version = 11;
  bool pending_head = false;
  // The seed's finish and delete reply with it; a subscription's GET and
  // DELETE name the subscription in their 404 with it.
  std::string pending_id;
};

inline HttpServer::HttpState& StateOf(net::Connection& c) {
  return static_cast<HttpServer::HttpState&>(*c.state);
}

inline constexpr std::string_view kJson = "application/json";

// One whole response. `extra_headers` are complete "Name: value\r\n" lines.
void AppendResponse(std::string* out, int status, std::string_view content_type,
                    std::string_view body, bool keep_alive, int version,
                    std::string_view extra_headers = {});
// {"error":{"code":..,"message":..}}
std::string ErrorJson(std::string_view code, std::string_view message);

// A request as a route's handler gets it: the path's {name} segments in
// the order the pattern names them.
struct RouteCall {
  const http::Request& req;
  std::string_view query;  // still percent-encoded; checked by ValidQuery
  std::array<const std::string*, 2> params = {};
  size_t param_count = 0;

  const std::string& param(size_t i) const { return *params[i]; }
};

// The endpoints. One request in, one Queue call, one response out (or a
// parked reserve).
class HttpServer::Api {
 public:
  explicit Api(HttpServer* server) : s_(server) {}

  // Routes the request (http_routes.cc). more_input: input follows it in
  // c.in (a pipeline goes on), which a drain serves before it closes.
  void Handle(net::Connection& c, const http::Request& req, bool more_input);
  void AnswerReserve(net::Connection& c, const Result<Deliveries>& r);

  using Handler = void (Api::*)(net::Connection& c, const RouteCall& call);
  struct Route;

 private:
  using Connection = net::Connection;

  // Answers of the calls made through FrontEnd::Await.
  template <bool kForced>
  struct AnswerOk {
    void operator()(FrontEnd& f, Connection& c, const Status& st) const {
      Api& api = *static_cast<HttpServer&>(f).api_;
      api.Unpark(c);
      api.Ok(c, st, kForced);
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
  // A change made through FrontEnd::Await, answered {"ok":true} or an error;
  // `forced` (by id alone, "force": true) answers {"ok":true,"forced":true}.
  template <typename Call>
  void AwaitOk(Connection& c, Call&& call, bool forced = false) {
    Park(c);
    if (forced) return s_->Await<Status, AnswerOk<true>>(c, std::forward<Call>(call));
    s_->Await<Status, AnswerOk<false>>(c, std::forward<Call>(call));
  }
  void Added(Connection& c, const Result<AddResult>& r);

  // Response helpers (http_server.cc): they answer the request being handled.
  void Respond(Connection& c, int status, std::string_view content_type, std::string_view body,
               std::string_view headers = {});
  void Json(Connection& c, int status, std::string_view json, std::string_view headers = {});
  void Error(Connection& c, const Status& st, std::string_view headers = {});
  void Ok(Connection& c, const Status& st, bool forced = false);
  void NotAllowed(Connection& c, std::string_view allow);

  // The route table and the router's parts (http_routes.cc).
  static std::span<const Route> Routes();
  // False, having answered 401, when a token is required and not given.
  bool Authorized(Connection& c, const http::Request& req);

  // The handlers the routes name (http_routes.cc, unless said).
  void Healthz(Connection& c, const RouteCall& call);
  void AddJob(Connection& c, const RouteCall& call);
  void GetJob(Connection& c, const RouteCall& call);
  void DeleteJob(Connection& c, const RouteCall& call);
  void Finish(Connection& c, const RouteCall& call);
  void Touch(Connection& c, const RouteCall& call);
  // Finish and Touch: {"receipt"} or {"force":true}, then `op`.
  using ReceiptCall = void (ServingQueue::*)(std::string_view id, std::string_view receipt,
                                             ServingQueue::StatusCallback done);
  void ReceiptAction(Connection& c, const RouteCall& call, ReceiptCall op);
  void Release(Connection& c, const RouteCall& call);
  void Bury(Connection& c, const RouteCall& call);
  void Kick(Connection& c, const RouteCall& call);
  void NoJobAction(Connection& c, const RouteCall& call);
  void Reserve(Connection& c, const RouteCall& call);
  void Topics(Connection& c, const RouteCall& call);
  void Topic(Connection& c, const RouteCall& call);
  void KickTopic(Connection& c, const RouteCall& call);
  void Pause(Connection& c, const RouteCall& call);
  void Resume(Connection& c, const RouteCall& call);
  void Peek(Connection& c, const RouteCall& call);
  void NoTopicAction(Connection& c, const RouteCall& call);
  void Stats(Connection& c, const RouteCall& call);
  void Metrics(Connection& c, const RouteCall& call);  // http_metrics.cc
  void Command(Connection& c, const RouteCall& call);  // seed_command.cc
  void SeedReply(Connection& c, const Status& st, std::string_view id = {},
                 std::optional<std::string_view> value = std::nullopt);
  // Push delivery's subscriptions (http_subscriptions.cc).
  void PutSubscription(Connection& c, const RouteCall& call);
  void ListSubscriptions(Connection& c, const RouteCall& call);
  void GetSubscription(Connection& c, const RouteCall& call);
  void DeleteSubscription(Connection& c, const RouteCall& call);
  // A PUT's body as the instance of subscription `name` it registers.
  Result<Subscription> ReadSubscription(const std::string& name, std::string_view body);
  void SubscriptionReply(Connection& c, const Result<Subscription>& r);
  void SubscriptionsReply(Connection& c, const Result<std::vector<push::InstanceView>>& r);
  // GET of one name: 404 when it has no live instance.
  void NamedSubscriptionReply(Connection& c, const Result<std::vector<push::InstanceView>>& r);
  void UnsubscribedReply(Connection& c, const Result<uint64_t>& r);
  // Periodic jobs' schedules (http_schedules.cc).
  void PutSchedule(Connection& c, const RouteCall& call);
  void ListSchedules(Connection& c, const RouteCall& call);
  void GetSchedule(Connection& c, const RouteCall& call);
  void DeleteSchedule(Connection& c, const RouteCall& call);
  void PauseSchedule(Connection& c, const RouteCall& call);
  void ResumeSchedule(Connection& c, const RouteCall& call);
  void SetSchedulePaused(Connection& c, const RouteCall& call, bool paused);
  void BackfillSchedule(Connection& c, const RouteCall& call);
  void NoScheduleAction(Connection& c, const RouteCall& call);
  // A PUT's body as the definition of schedule `name`.
  Result<Schedule> ReadSchedule(const std::string& name, std::string_view body);
  void ScheduleReply(Connection& c, const Result<Schedule>& r);
  void SchedulesReply(Connection& c, const Result<std::vector<Schedule>>& r);
  void BackfillReply(Connection& c, const Result<schedule::BackfillResult>& r);

  HttpServer* s_;
  simdjson::dom::parser parser_;
  std::string json_;  // scratch for response bodies
  // The request being answered.
  bool keep_alive_ = true;
  int version_ = 11;
  bool head_ = false;  // HEAD: answered as GET, without the body
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_HTTP_API_H_
