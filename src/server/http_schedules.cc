// Periodic jobs' routes (SPEC §9; docs/api.md, "Schedules"): each handler
// reads the request, makes one schedule::Scheduler call, and writes the
// answer from the wire tables (kScheduleFields, kBackfillFields).
//
// What can be checked without the store is checked here, so a bad request
// is refused before any call: the JSON's fields and types (an unknown field
// is refused, as the add route refuses one, since a typo such as "catchpu"
// must not silently take the default), the names of catchup and overlap, and
// ValidateScheduleDefinition. The cron expression and the time zone are
// parsed by the Scheduler's Put (src/cron), which names the position.
//
// A PUT answers 200 whether it created the schedule or changed it, as a
// subscription's PUT does (version 1 and created_ms == updated_ms say it
// was new).
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codec/json_writer.h"
#include "delayq/schedule.h"
#include "server/errors.h"
#include "server/http_api.h"
#include "server/json_fields.h"
#include "wire/encode.h"

namespace delayq::server {

using codec::JsonWriter;

namespace {

// "catchup": "none" | "last" | "all".
Status ReadCatchup(const JsonFields& f, Catchup* out) {
  std::optional<std::string> text;
  if (Status st = f.String("catchup", &text); !st.ok() || !text) return st;
  if (!ParseCatchup(*text, out)) {
    return InvalidArgument("catchup: expected \"none\", \"last\" or \"all\", not \"" +
                           text->substr(0, 32) + "\"");
  }
  return Status::Ok();
}

// "overlap": "allow" | "skip" | "buffer_one".
Status ReadOverlap(const JsonFields& f, Overlap* out) {
  std::optional<std::string> text;
  if (Status st = f.String("overlap", &text); !st.ok() || !text) return st;
  if (!ParseOverlap(*text, out)) {
    return InvalidArgument("overlap: expected \"allow\", \"skip\" or \"buffer_one\", not \"" +
                           text->substr(0, 32) + "\"");
  }
  return Status::Ok();
}

}  // namespace

// PUT /v1/schedules/{name} {"cron","topic","timezone"?,"body"?|"body_base64"?,
//   "ttr_ms"?|"ttr"?,"priority"?,"max_attempts"?,"catchup"?,
//   "catchup_window_ms"?|"catchup_window"?,"overlap"?,"paused"?,"pause_on_failure"?}
// What is left out takes its default: a PUT replaces the definition whole
// (the firing state is the scheduler's, and stays).
Result<Schedule> HttpServer::Api::ReadSchedule(const std::string& name, std::string_view body) {
  Schedule s;
  s.name = name;
  JsonFields f;
  Status st = f.Parse(parser_, body,
                      {"cron", "timezone", "topic", "body", "body_base64", "ttr_ms", "ttr",
                       "priority", "max_attempts", "catchup", "catchup_window_ms", "catchup_window",
                       "overlap", "paused", "pause_on_failure"});
  std::optional<std::string> cron, timezone, topic;
  std::optional<int64_t> ttr, priority, max_attempts, window;
  if (st.ok()) st = f.String("cron", &cron);
  if (st.ok()) st = f.String("timezone", &timezone);
  if (st.ok()) st = f.String("topic", &topic);
  if (st.ok()) st = f.Body(&s.body);
  if (st.ok()) st = f.Duration("ttr", "ttr_ms", 1, UINT32_MAX, &ttr);
  if (st.ok()) st = f.Int("priority", 0, UINT32_MAX, &priority);
  if (st.ok()) st = f.Int("max_attempts", 0, UINT32_MAX, &max_attempts);
  if (st.ok()) st = ReadCatchup(f, &s.catchup);
  if (st.ok()) {
    st = f.Duration("catchup_window", "catchup_window_ms", 1, kMaxCatchupWindowMs, &window);
  }
  if (st.ok()) st = ReadOverlap(f, &s.overlap);
  if (st.ok()) st = f.Bool("paused", &s.paused);
  if (st.ok()) st = f.Bool("pause_on_failure", &s.pause_on_failure);
  if (st.ok() && !cron) {
    st = InvalidArgument("cron: required, e.g. \"*/5 * * * *\", \"@hourly\" or \"@every 30s\"");
  }
  if (st.ok() && !topic)
    st = InvalidArgument("topic: required, the topic each firing's job goes to");
  if (!st.ok()) return st;
  s.cron = std::move(*cron);
  s.topic = std::move(*topic);
  if (timezone) s.timezone = std::move(*timezone);
  if (ttr) s.ttr_ms = static_cast<uint32_t>(*ttr);
  if (priority) s.priority = static_cast<uint32_t>(*priority);
  if (max_attempts) s.max_attempts = static_cast<uint32_t>(*max_attempts);
  if (window) s.catchup_window_ms = *window;
  if (Status valid = ValidateScheduleDefinition(s); !valid.ok()) return valid;
  return s;
}

void HttpServer::Api::PutSchedule(Connection& c, const RouteCall& call) {
  if (s_->scheduler_ == nullptr) return Error(c, SchedulesOff());
  Result<Schedule> s = ReadSchedule(call.param(0), call.req.body);
  if (!s.ok()) return Error(c, s.status());
  AwaitWith<Result<Schedule>, &Api::ScheduleReply>(c,
                                                   [&](std::function<void(Result<Schedule>)> done) {
                                                     s_->scheduler_->Put(*s, std::move(done));
                                                   });
}

void HttpServer::Api::ScheduleReply(Connection& c, const Result<Schedule>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  wire::WriteJson(w, *r, wire::kScheduleFields);
  Json(c, 200, json_);
}

// GET /v1/schedules: {"schedules":[...]}, in the Scheduler's order.
void HttpServer::Api::ListSchedules(Connection& c, const RouteCall&) {
  if (s_->scheduler_ == nullptr) return Error(c, SchedulesOff());
  AwaitWith<Result<std::vector<Schedule>>, &Api::SchedulesReply>(
      c, [&](std::function<void(Result<std::vector<Schedule>>)> done) {
        s_->scheduler_->List(std::move(done));
      });
}

void HttpServer::Api::SchedulesReply(Connection& c, const Result<std::vector<Schedule>>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("schedules");
  w.BeginArray();
  for (const Schedule& s : *r) wire::WriteJson(w, s, wire::kScheduleFields);
  w.EndArray();
  w.EndObject();
  Json(c, 200, json_);
}

// GET /v1/schedules/{name}: 404 when there is none.
void HttpServer::Api::GetSchedule(Connection& c, const RouteCall& call) {
  if (s_->scheduler_ == nullptr) return Error(c, SchedulesOff());
  if (Status st = ValidateScheduleName(call.param(0)); !st.ok()) return Error(c, st);
  AwaitWith<Result<Schedule>, &Api::ScheduleReply>(
      c, [&](std::function<void(Result<Schedule>)> done) {
        s_->scheduler_->Get(call.param(0), std::move(done));
      });
}

// DELETE /v1/schedules/{name}: the schedule as it was; 404 when there is none.
void HttpServer::Api::DeleteSchedule(Connection& c, const RouteCall& call) {
  if (s_->scheduler_ == nullptr) return Error(c, SchedulesOff());
  if (Status st = ValidateScheduleName(call.param(0)); !st.ok()) return Error(c, st);
  AwaitWith<Result<Schedule>, &Api::ScheduleReply>(
      c, [&](std::function<void(Result<Schedule>)> done) {
        s_->scheduler_->Delete(call.param(0), std::move(done));
      });
}

// POST /v1/schedules/{name}/pause · /resume: the schedule as it is then. A
// body, if any, must be JSON (its fields are ignored, as a job's kick's).
void HttpServer::Api::PauseSchedule(Connection& c, const RouteCall& call) {
  SetSchedulePaused(c, call, true);
}

void HttpServer::Api::ResumeSchedule(Connection& c, const RouteCall& call) {
  SetSchedulePaused(c, call, false);
}

void HttpServer::Api::SetSchedulePaused(Connection& c, const RouteCall& call, bool paused) {
  if (s_->scheduler_ == nullptr) return Error(c, SchedulesOff());
  if (Status st = ValidateScheduleName(call.param(0)); !st.ok()) return Error(c, st);
  JsonFields f;
  if (Status st = f.Parse(parser_, call.req.body, {}); !st.ok()) return Error(c, st);
  AwaitWith<Result<Schedule>, &Api::ScheduleReply>(
      c, [&](std::function<void(Result<Schedule>)> done) {
        s_->scheduler_->SetPaused(call.param(0), paused, std::move(done));
      });
}

// POST /v1/schedules/{name}/backfill {"from_ms","to_ms","overlap"?}
// overlap: allow (the default) adds every fire time of the range; skip only
// the latest, and none while a firing's job is live.
void HttpServer::Api::BackfillSchedule(Connection& c, const RouteCall& call) {
  if (s_->scheduler_ == nullptr) return Error(c, SchedulesOff());
  if (Status st = ValidateScheduleName(call.param(0)); !st.ok()) return Error(c, st);
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {"from_ms", "to_ms", "overlap"});
  std::optional<int64_t> from, to;
  Overlap overlap = Overlap::kAllow;
  if (st.ok()) st = f.Int("from_ms", 0, kMaxRunAtMs, &from);
  if (st.ok()) st = f.Int("to_ms", 0, kMaxRunAtMs, &to);
  if (st.ok()) st = ReadOverlap(f, &overlap);
  if (st.ok() && !from) st = InvalidArgument("from_ms: required, the range's first time (Unix ms)");
  if (st.ok() && !to) st = InvalidArgument("to_ms: required, the range's last time (Unix ms)");
  if (st.ok() && *to < *from) st = InvalidArgument("to_ms: must not be before from_ms");
  if (!st.ok()) return Error(c, st);
  AwaitWith<Result<schedule::BackfillResult>, &Api::BackfillReply>(
      c, [&](std::function<void(Result<schedule::BackfillResult>)> done) {
        s_->scheduler_->Backfill(call.param(0), *from, *to, overlap, std::move(done));
      });
}

void HttpServer::Api::BackfillReply(Connection& c, const Result<schedule::BackfillResult>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  wire::WriteJson(w, *r, wire::kBackfillFields<schedule::BackfillResult>);
  Json(c, 200, json_);
}

void HttpServer::Api::NoScheduleAction(Connection& c, const RouteCall& call) {
  Error(c, Status(Code::kNotFound, "no such endpoint: /v1/schedules/{name}/" +
                                       call.param(1).substr(0, 64) + " (pause, resume, backfill)"));
}

}  // namespace delayq::server
