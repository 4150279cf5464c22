// Push delivery's routes (SPEC §8; docs/api.md, "Subscriptions (push
// delivery)"): an application registers its endpoints here and the
// server's push::Pusher POSTs due jobs to them. Each handler reads the
// request, makes one Pusher call, and writes the answer from the wire
// tables (kSubscriptionFields, then kPushFigureFields for reads).
//
// A PUT answers 200 whether it created the instance or renewed it: an
// application renews every ttl_ms / 3, and a status that changed with
// whether the store had already forgotten a lapsed instance would tell it
// nothing it can act on (created_ms == renewed_ms says it was new).
#include <algorithm>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codec/json_writer.h"
#include "http/url.h"
#include "server/errors.h"
#include "server/http_api.h"
#include "server/json_fields.h"
#include "serving/push_ledger.h"
#include "wire/encode.h"

namespace delayq::server {

using codec::JsonWriter;

// PUT /v1/subscriptions/{name} {"topics":[...],"url",
//   "concurrency"?,"timeout_ms"?|"timeout"?,"ttl_ms"?|"ttl"?,"secret"?|"secrets"?:[...],
//   "retry"?:{"min_backoff_ms"?|"min_backoff"?,"max_backoff_ms"?|"max_backoff"?,
//             "max_doublings"?},"rate_per_s"?}
// What is left out takes its default (a PUT replaces the instance whole).
// The ranges are checked here only as far as the JSON's types need;
// ValidateSubscription (in Pusher::Put) is the one check of the values.
Result<Subscription> HttpServer::Api::ReadSubscription(const std::string& name,
                                                       std::string_view body) {
  Subscription s;
  s.name = name;
  JsonFields f;
  Status st = f.Parse(parser_, body,
                      {"topics", "url", "concurrency", "timeout_ms", "timeout", "ttl_ms", "ttl",
                       "secret", "secrets", "retry", "rate_per_s"});
  std::optional<std::vector<std::string>> topics, secrets;
  std::optional<std::string> url, secret;
  std::optional<int64_t> concurrency, timeout, ttl, min_backoff, max_backoff, doublings;
  std::optional<double> rate;
  JsonFields retry;
  if (st.ok()) st = f.Strings("topics", kMaxSubscriptionTopics, &topics);
  if (st.ok()) st = f.String("url", &url);
  if (st.ok()) st = f.Int("concurrency", 1, kMaxSubscriptionConcurrency, &concurrency);
  if (st.ok()) st = f.Duration("timeout", "timeout_ms", 1, kMaxPushTimeoutMs, &timeout);
  if (st.ok()) st = f.Duration("ttl", "ttl_ms", 0, kMaxSubscriptionTtlMs, &ttl);
  if (st.ok()) st = f.String("secret", &secret);
  if (st.ok()) st = f.Strings("secrets", kMaxSubscriptionSecrets, &secrets);
  if (st.ok() && secret && secrets) {
    st = InvalidArgument("secret and secrets: give one key as secret, or several as secrets");
  }
  if (st.ok()) {
    st = f.Object(
        "retry",
        {"min_backoff_ms", "min_backoff", "max_backoff_ms", "max_backoff", "max_doublings"},
        &retry);
  }
  if (st.ok()) {
    st = retry.Duration("min_backoff", "min_backoff_ms", 0, kMaxPushBackoffMs, &min_backoff);
  }
  if (st.ok()) {
    st = retry.Duration("max_backoff", "max_backoff_ms", 0, kMaxPushBackoffMs, &max_backoff);
  }
  if (st.ok()) st = retry.Int("max_doublings", 0, 62, &doublings);
  if (st.ok()) st = f.Double("rate_per_s", 0, 1e6, &rate);
  if (st.ok() && !topics) st = InvalidArgument("topics: required, an array of topic names");
  if (st.ok() && !url) st = InvalidArgument("url: required, an http:// or https:// url");
  if (!st.ok()) return st;
  s.topics = std::move(*topics);
  s.url = std::move(*url);
  if (concurrency) s.concurrency = static_cast<uint32_t>(*concurrency);
  if (timeout) s.timeout_ms = static_cast<uint32_t>(*timeout);
  if (ttl) s.ttl_ms = *ttl;
  if (secret) s.secrets.push_back(std::move(*secret));
  if (secrets) s.secrets = std::move(*secrets);
  if (min_backoff) s.retry.min_backoff_ms = *min_backoff;
  if (max_backoff) s.retry.max_backoff_ms = *max_backoff;
  if (doublings) s.retry.max_doublings = static_cast<uint32_t>(*doublings);
  if (rate) s.rate_per_s = *rate;
  return s;
}

void HttpServer::Api::PutSubscription(Connection& c, const RouteCall& call) {
  if (s_->pusher_ == nullptr) return Error(c, PushOff());
  Result<Subscription> s = ReadSubscription(call.param(0), call.req.body);
  if (!s.ok()) return Error(c, s.status());
  AwaitWith<Result<Subscription>, &Api::SubscriptionReply>(
      c, [&](std::function<void(Result<Subscription>)> done) {
        s_->pusher_->Put(*s, std::move(done));
      });
}

void HttpServer::Api::SubscriptionReply(Connection& c, const Result<Subscription>& r) {
  if (!r.ok()) return Error(c, r.status());
  json_.clear();
  JsonWriter w(&json_);
  wire::WriteJson(w, *r, wire::kSubscriptionFields);
  Json(c, 200, json_);
}

// GET /v1/subscriptions: every live instance of every name.
void HttpServer::Api::ListSubscriptions(Connection& c, const RouteCall&) {
  if (s_->pusher_ == nullptr) return Error(c, PushOff());
  AwaitWith<Result<std::vector<push::InstanceView>>, &Api::SubscriptionsReply>(
      c, [&](std::function<void(Result<std::vector<push::InstanceView>>)> done) {
        s_->pusher_->Describe("", std::move(done));
      });
}

// GET /v1/subscriptions/{name}: its live instances.
void HttpServer::Api::GetSubscription(Connection& c, const RouteCall& call) {
  if (s_->pusher_ == nullptr) return Error(c, PushOff());
  // Describe("") would list every name: an empty segment is no name.
  if (Status st = ValidateSubscriptionName(call.param(0)); !st.ok()) return Error(c, st);
  StateOf(c).pending_id = call.param(0);
  AwaitWith<Result<std::vector<push::InstanceView>>, &Api::NamedSubscriptionReply>(
      c, [&](std::function<void(Result<std::vector<push::InstanceView>>)> done) {
        s_->pusher_->Describe(call.param(0), std::move(done));
      });
}

namespace {

// "instances":[{its kSubscriptionFields, its kPushFigureFields}, ...]: one
// name's views.
void WriteInstances(JsonWriter& w, std::span<const push::InstanceView> views) {
  w.Key("instances");
  w.BeginArray();
  for (const push::InstanceView& v : views) {
    w.BeginObject();
    wire::WriteJsonFields(w, v.subscription, wire::kSubscriptionFields);
    wire::WriteJsonFields(w, v.figures, wire::kPushFigureFields<PushFigures>);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace

// {"subscriptions":[{"name","instances":[...]}, ...]}: one entry per name,
// in the order Describe gave the names first.
void HttpServer::Api::SubscriptionsReply(Connection& c,
                                         const Result<std::vector<push::InstanceView>>& r) {
  if (!r.ok()) return Error(c, r.status());
  std::vector<push::InstanceView> views = *r;
  // Each name's instances together, the names in their first order.
  std::vector<std::string> order;
  for (const push::InstanceView& v : views) {
    if (std::find(order.begin(), order.end(), v.subscription.name) == order.end()) {
      order.push_back(v.subscription.name);
    }
  }
  std::stable_sort(views.begin(), views.end(), [&](const auto& a, const auto& b) {
    return std::find(order.begin(), order.end(), a.subscription.name) <
           std::find(order.begin(), order.end(), b.subscription.name);
  });
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("subscriptions");
  w.BeginArray();
  for (size_t i = 0; i < views.size();) {
    size_t end = i;
    while (end < views.size() && views[end].subscription.name == views[i].subscription.name) ++end;
    w.BeginObject();
    w.Key("name");
    w.String(views[i].subscription.name);
    WriteInstances(w, std::span(views).subspan(i, end - i));
    w.EndObject();
    i = end;
  }
  w.EndArray();
  w.EndObject();
  Json(c, 200, json_);
}

// {"name","instances":[...]}; 404 when the name has no live instance.
void HttpServer::Api::NamedSubscriptionReply(Connection& c,
                                             const Result<std::vector<push::InstanceView>>& r) {
  std::string name = std::exchange(StateOf(c).pending_id, std::string());
  if (!r.ok()) return Error(c, r.status());
  if (r->empty()) {
    return Error(c, Status(Code::kNotFound,
                           "no subscription '" + name + "' (no live instance under that name)"));
  }
  json_.clear();
  JsonWriter w(&json_);
  w.BeginObject();
  w.Key("name");
  w.String(name);
  WriteInstances(w, *r);
  w.EndObject();
  Json(c, 200, json_);
}

// DELETE /v1/subscriptions/{name}[?url=...]: that instance, or every
// instance of the name; 404 when nothing was removed.
void HttpServer::Api::DeleteSubscription(Connection& c, const RouteCall& call) {
  if (s_->pusher_ == nullptr) return Error(c, PushOff());
  if (Status st = ValidateSubscriptionName(call.param(0)); !st.ok()) return Error(c, st);
  std::string url = http::QueryParam(call.query, "url").value_or("");
  StateOf(c).pending_id = call.param(0);
  if (!url.empty()) StateOf(c).pending_id += "' at '" + url;
  AwaitWith<Result<uint64_t>, &Api::UnsubscribedReply>(
      c, [&](std::function<void(Result<uint64_t>)> done) {
        s_->pusher_->Delete(call.param(0), url, std::move(done));
      });
}

void HttpServer::Api::UnsubscribedReply(Connection& c, const Result<uint64_t>& r) {
  std::string what = std::exchange(StateOf(c).pending_id, std::string());
  if (!r.ok()) return Error(c, r.status());
  if (*r == 0) return Error(c, Status(Code::kNotFound, "no subscription '" + what + "'"));
  Json(c, 200, "{\"deleted\":" + std::to_string(*r) + "}");
}

}  // namespace delayq::server
