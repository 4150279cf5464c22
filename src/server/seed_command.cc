// POST /command: the seed's own protocol, kept as its clients expect it.
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "codec/json_writer.h"
#include "server/errors.h"
#include "server/http_api.h"
#include "server/json_fields.h"

namespace delayq::server {

using codec::JsonWriter;

// POST /command: {"command":"add","topic","id","delay":s,"TTR":s,"body"},
// {"command":"pop","topic","timeout"?:s}, {"command":"finish","id"},
// {"command":"delete","id"} -> 200 {"success","error","id","value"}.
// Errors are reported in the body ("success":false), with status 200, as
// the seed's clients expect; only a malformed HTTP request gets a 4xx.
void HttpServer::Api::Command(Connection& c, const RouteCall& call) {
  JsonFields f;
  Status st = f.Parse(parser_, call.req.body, {});
  std::optional<std::string> command, topic, id;
  if (st.ok()) st = f.String("command", &command);
  if (st.ok()) st = f.String("topic", &topic);
  if (st.ok()) st = f.String("id", &id);
  if (st.ok() && !command) st = InvalidArgument("command: required (add, pop, finish, delete)");
  if (!st.ok()) return SeedReply(c, st);
  ServingQueue& q = *s_->queue_;
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
        c, [&](ServingQueue::AddCallback done) { q.AddAsync(spec, std::move(done)); });
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
    return AwaitWith<Status, &Api::SeedDone>(c, [&](ServingQueue::StatusCallback done) {
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
