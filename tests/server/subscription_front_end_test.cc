// Push delivery's registrations through both front ends in-process
// (FrontEndHarness: the real routes, commands and a real push::Pusher on a
// real queue, a ManualClock): PUT/GET/DELETE /v1/subscriptions and
// SUBSCRIPTION SET|GET|LIST|DEL, renewal and lapse, and bad input refused
// naming the field. Deliveries themselves are tests/push/ and the
// black-box tier's.
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/front_end_harness.h"
#include "simdjson.h"

namespace delayq::server::testing {
namespace {

namespace dom = simdjson::dom;

// Two Standard Webhooks keys: 24 and 32 bytes.
constexpr std::string_view kSecretA = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr std::string_view kSecretB = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
constexpr std::string_view kUrl = "http://127.0.0.1:9/close";
constexpr std::string_view kUrl2 = "http://127.0.0.1:9/close-2";

// A JSON body, parsed (its elements live as long as it does).
class Json {
 public:
  explicit Json(const std::string& text) : root_(parser_.parse(text)) {}
  bool ok() const { return root_.error() == simdjson::SUCCESS; }
  simdjson::simdjson_result<dom::element> operator[](std::string_view key) const {
    return root_[key];
  }

 private:
  dom::parser parser_;
  simdjson::simdjson_result<dom::element> root_;
};

std::string Str(simdjson::simdjson_result<dom::element> e) {
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) return "(not a string)";
  return std::string(s);
}

int64_t Int(simdjson::simdjson_result<dom::element> e) {
  int64_t v = -1;
  if (e.get(v) != simdjson::SUCCESS) return -1;
  return v;
}

double Double(simdjson::simdjson_result<dom::element> e) {
  double v = -1;
  if (e.get(v) != simdjson::SUCCESS) return -1;
  return v;
}

std::string Compact(simdjson::simdjson_result<dom::element> e) {
  if (e.error() != simdjson::SUCCESS) return "(absent)";
  return simdjson::minify(e.value_unsafe());
}

// "code: message" of an error body.
std::string ErrorOf(const HttpReply& r) {
  Json j(r.body);
  if (!j.ok()) return "(not JSON) " + r.body;
  return Str(j["error"]["code"]) + ": " + Str(j["error"]["message"]);
}

// RESP pairs (SUBSCRIPTION SET's reply, an instance of GET's) by key.
const RespReply* Pair(const RespReply& pairs, std::string_view key) {
  for (size_t i = 0; i + 1 < pairs.elements.size(); i += 2) {
    if (pairs.elements[i].str == key) return &pairs.elements[i + 1];
  }
  return nullptr;
}
std::string PairText(const RespReply& pairs, std::string_view key) {
  const RespReply* v = Pair(pairs, key);
  return v == nullptr ? "(absent)" : v->str;
}

class SubscriptionHttp : public OnEachStore {
 protected:
  HttpReply Put(std::string_view name, const std::string& body) {
    return h.Http("PUT", "/v1/subscriptions/" + std::string(name), body);
  }
};

TEST_P(SubscriptionHttp, PutGetListDeleteRoundTrip) {
  const int64_t t0 = h.clock().NowMs();
  const std::string body = R"({"topics":["order.close","order.open"],"url":")" + std::string(kUrl) +
                           R"(","concurrency":3,"timeout":"10s",)" +
                           R"("ttl_ms":60000,"secrets":[")" + std::string(kSecretA) + R"(",")" +
                           std::string(kSecretB) +
                           R"("],"retry":{"min_backoff":"2s","max_backoff_ms":60000,)" +
                           R"("max_doublings":4},"rate_per_s":2.5})";
  HttpReply put = Put("orders", body);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.Header("Content-Type"), "application/json");
  {
    Json j(put.body);
    EXPECT_EQ(Str(j["name"]), "orders");
    EXPECT_EQ(Str(j["url"]), kUrl);
    EXPECT_EQ(Compact(j["topics"]), R"(["order.close","order.open"])");
    EXPECT_EQ(Int(j["concurrency"]), 3);
    EXPECT_EQ(Int(j["timeout_ms"]), 10'000);
    EXPECT_EQ(Int(j["ttl_ms"]), 60'000);
    EXPECT_EQ(Compact(j["signed"]), "true");
    EXPECT_EQ(Int(j["secret_count"]), 2);
    EXPECT_EQ(Int(j["retry_min_backoff_ms"]), 2000);
    EXPECT_EQ(Int(j["retry_max_backoff_ms"]), 60'000);
    EXPECT_EQ(Int(j["retry_max_doublings"]), 4);
    EXPECT_EQ(Double(j["rate_per_s"]), 2.5);
    EXPECT_EQ(Int(j["created_ms"]), t0);
    EXPECT_EQ(Int(j["renewed_ms"]), t0);
    EXPECT_EQ(Int(j["expires_ms"]), t0 + 60'000);
  }
  // The keys themselves never leave the server.
  EXPECT_EQ(put.body.find("whsec_"), std::string::npos) << put.body;

  HttpReply got = h.Http("GET", "/v1/subscriptions/orders");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(got.body.find("whsec_"), std::string::npos) << got.body;
  {
    Json j(got.body);
    EXPECT_EQ(Str(j["name"]), "orders");
    auto inst = j["instances"].at(0);
    EXPECT_EQ(Str(inst["url"]), kUrl);
    EXPECT_EQ(Int(inst["concurrency"]), 3);
    // Slots the pusher holds for it (waiting for a job of its topics).
    EXPECT_GE(Int(inst["in_flight"]), 0);
    EXPECT_EQ(Int(inst["delivered"]), 0);
    EXPECT_EQ(Int(inst["failed"]), 0);
    EXPECT_EQ(Int(inst["last_success_ms"]), 0);
    EXPECT_EQ(Int(inst["last_error_ms"]), 0);
    EXPECT_EQ(Str(inst["last_error"]), "");
    EXPECT_EQ(j["instances"].at(1).error(), simdjson::INDEX_OUT_OF_BOUNDS);
  }

  // A second instance of the name, and another name: the list groups them.
  ASSERT_EQ(
      Put("orders", R"({"topics":["order.close"],"url":")" + std::string(kUrl2) + R"("})").status,
      200);
  ASSERT_EQ(Put("billing", R"({"topics":["invoice"],"url":")" + std::string(kUrl) + R"("})").status,
            200);
  HttpReply list = h.Http("GET", "/v1/subscriptions");
  ASSERT_EQ(list.status, 200) << list.body;
  {
    Json j(list.body);
    EXPECT_EQ(Str(j["subscriptions"].at(0)["name"]), "billing");
    EXPECT_EQ(Str(j["subscriptions"].at(0)["instances"].at(0)["url"]), kUrl);
    EXPECT_EQ(Str(j["subscriptions"].at(1)["name"]), "orders");
    EXPECT_EQ(Str(j["subscriptions"].at(1)["instances"].at(1)["url"]), kUrl2);
    // What a PUT left out has its default, and no secret means unsigned.
    auto plain = j["subscriptions"].at(1)["instances"].at(1);
    EXPECT_EQ(Int(plain["concurrency"]), kDefaultPushConcurrency);
    EXPECT_EQ(Int(plain["timeout_ms"]), kDefaultPushTimeoutMs);
    EXPECT_EQ(Int(plain["ttl_ms"]), 0);
    EXPECT_EQ(Int(plain["expires_ms"]), 0);
    EXPECT_EQ(Compact(plain["signed"]), "false");
    EXPECT_EQ(Int(plain["secret_count"]), 0);
    EXPECT_EQ(Int(plain["retry_min_backoff_ms"]), RetryPolicy{}.min_backoff_ms);
    EXPECT_EQ(Double(plain["rate_per_s"]), 0);
  }

  // One instance by its url, then the rest of the name; then nothing left.
  HttpReply del = h.Http("DELETE", "/v1/subscriptions/orders?url=" + std::string(kUrl2));
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.body, R"({"deleted":1})");
  del = h.Http("DELETE", "/v1/subscriptions/orders?url=" + std::string(kUrl2));
  EXPECT_EQ(del.status, 404) << del.body;
  EXPECT_EQ(ErrorOf(del), "not_found: no subscription 'orders' at '" + std::string(kUrl2) + "'");
  del = h.Http("DELETE", "/v1/subscriptions/orders");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(del.body, R"({"deleted":1})");
  got = h.Http("GET", "/v1/subscriptions/orders");
  EXPECT_EQ(got.status, 404) << got.body;
  EXPECT_EQ(ErrorOf(got), "not_found: no subscription 'orders' (no live instance under that name)");
  EXPECT_EQ(h.Http("DELETE", "/v1/subscriptions/orders").status, 404);
  EXPECT_EQ(h.Http("DELETE", "/v1/subscriptions/billing").status, 200);
  list = h.Http("GET", "/v1/subscriptions");
  EXPECT_EQ(list.body, R"({"subscriptions":[]})");
}

// A PUT of the same name and url renews the instance: its ttl starts again
// from then, its created_ms stays; not renewed in time, it lapses.
TEST_P(SubscriptionHttp, ARenewalMovesTheExpiryAndALapsedInstanceIsGone) {
  const int64_t t0 = h.clock().NowMs();
  const std::string body =
      R"({"topics":["t"],"url":")" + std::string(kUrl) + R"(","ttl":"5s","concurrency":2})";
  ASSERT_EQ(Put("app", body).status, 200);
  h.AdvanceMs(4000);
  HttpReply renewed = Put("app", body);
  ASSERT_EQ(renewed.status, 200) << renewed.body;
  {
    Json j(renewed.body);
    EXPECT_EQ(Int(j["created_ms"]), t0);
    EXPECT_EQ(Int(j["renewed_ms"]), t0 + 4000);
    EXPECT_EQ(Int(j["expires_ms"]), t0 + 9000);
  }
  h.AdvanceMs(4000);  // past the first expiry, within the renewed one
  HttpReply got = h.Http("GET", "/v1/subscriptions/app");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_EQ(Int(Json(got.body)["instances"].at(0)["concurrency"]), 2);
  h.AdvanceMs(1000);  // the renewed expiry
  EXPECT_EQ(h.Http("GET", "/v1/subscriptions/app").status, 404);
  EXPECT_EQ(h.Http("GET", "/v1/subscriptions").body, R"({"subscriptions":[]})");
  // Put again after it lapsed, it starts anew.
  HttpReply again = Put("app", body);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(Int(Json(again.body)["created_ms"]), t0 + 9000);
}

TEST_P(SubscriptionHttp, BadInputIsRefusedNamingTheField) {
  const std::string url = std::string(kUrl);
  const std::string ok = R"("topics":["t"],"url":")" + url + R"(")";
  const std::pair<std::string, std::string> cases[] = {
      {R"({"topics":["t"],"url":"ftp://127.0.0.1/x"})",
       "url: scheme must be http or https, not \"ftp\""},
      {R"({"topics":["t"],"url":"not a url"})", "url: "},
      {R"({"topics":["t"],"url":"http://user:pw@127.0.0.1/"})", "url: credentials"},
      {R"({"topics":["t"]})", "url: required"},
      {R"({"url":")" + url + R"("})", "topics: required"},
      {R"({"topics":[],"url":")" + url + R"("})", "topics: expected at least one"},
      {R"({"topics":[7],"url":")" + url + R"("})", "topics[0]: expected a string, got an integer"},
      {R"({"topics":"t","url":")" + url + R"("})", "topics: expected an array of strings"},
      {R"({"topics":["bad topic"],"url":")" + url + R"("})", "topics: "},
      {"{" + ok + R"(,"concurrency":-1})", "concurrency: expected an integer 1..10000"},
      {"{" + ok + R"(,"concurrency":100000})", "concurrency: expected an integer 1..10000"},
      {"{" + ok + R"(,"timeout_ms":1000000000000})", "timeout_ms: expected an integer 1..1800000"},
      {"{" + ok + R"(,"timeout":"forever"})", "timeout: "},
      {"{" + ok + R"(,"timeout":"5s","timeout_ms":5000})", "timeout and timeout_ms: give one"},
      {"{" + ok + R"(,"ttl_ms":500})", "ttl_ms: must be 1000-604800000"},
      {"{" + ok + R"(,"ttl_ms":-5})", "ttl_ms: expected an integer"},
      {"{" + ok + R"(,"secret":"hunter2"})", "secret: must be \"whsec_\""},
      {"{" + ok + R"(,"secret":"whsec_!!!!"})", "secret: the key after \"whsec_\" is not base64"},
      {"{" + ok + R"(,"secrets":[")" + std::string(kSecretA) + R"(","nope"]})", "secrets[1]: "},
      {"{" + ok + R"(,"secret":")" + std::string(kSecretA) + R"(","secrets":[")" +
           std::string(kSecretB) + R"("]})",
       "secret and secrets: "},
      {"{" + ok + R"(,"retry":{"min_backof_ms":10}})",
       "unknown field 'retry.min_backof_ms' (did you mean 'retry.min_backoff_ms'?)"},
      {"{" + ok + R"(,"retry":5})", "retry: expected an object, got an integer"},
      {"{" + ok + R"(,"retry":{"min_backoff_ms":5000,"max_backoff_ms":1000}})",
       "retry.max_backoff_ms: must be at least retry.min_backoff_ms"},
      {"{" + ok + R"(,"retry":{"max_doublings":99}})",
       "retry.max_doublings: expected an integer 0..62"},
      {"{" + ok + R"(,"retry":{"min_backoff":"1x"}})", "retry.min_backoff: "},
      {"{" + ok + R"(,"rate_per_s":-1})", "rate_per_s: expected a number 0..1000000"},
      {"{" + ok + R"(,"rate_per_s":"fast"})",
       "rate_per_s: expected a number 0..1000000, got a "
       "string"},
      {"{" + ok + R"(,"concurency":5})",
       "unknown field 'concurency' (did you mean 'concurrency'?)"},
      {"{" + ok + R"(,"topic":"t"})", "unknown field 'topic' (did you mean 'topics'?)"},
      {R"(["t"])", "request: expected a JSON object, got an array"},
  };
  for (const auto& [body, message] : cases) {
    SCOPED_TRACE(body);
    HttpReply r = Put("x", body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(ErrorOf(r).rfind("invalid_argument: " + message, 0), 0u) << ErrorOf(r);
  }
  // A bad name in the path.
  HttpReply r = h.Http("PUT", "/v1/subscriptions/a%20b", "{" + ok + "}");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorOf(r).rfind("invalid_argument: name: ", 0), 0u) << ErrorOf(r);
  EXPECT_EQ(h.Http("GET", "/v1/subscriptions/a%20b").status, 400);
  EXPECT_EQ(h.Http("DELETE", "/v1/subscriptions/a%20b").status, 400);
  // None of them registered anything.
  EXPECT_EQ(h.Http("GET", "/v1/subscriptions/x").status, 404);
  EXPECT_EQ(h.Http("GET", "/v1/subscriptions").body, R"({"subscriptions":[]})");
}

TEST_P(SubscriptionHttp, AnotherMethodIs405WithTheOnesThePathHas) {
  HttpReply r = h.Http("POST", "/v1/subscriptions/x", "{}");
  EXPECT_EQ(r.status, 405) << r.body;
  EXPECT_EQ(r.Header("Allow"), "PUT, GET, DELETE");
  r = h.Http("PUT", "/v1/subscriptions", "{}");
  EXPECT_EQ(r.status, 405) << r.body;
  EXPECT_EQ(r.Header("Allow"), "GET");
}

INSTANTIATE_TEST_SUITE_P(Stores, SubscriptionHttp, ::testing::ValuesIn(kInProcessStores));

class SubscriptionResp : public OnEachStore {};

TEST_P(SubscriptionResp, SetGetListDelRoundTrip) {
  const int64_t t0 = h.clock().NowMs();
  RespReply set = h.Resp({"SUBSCRIPTION", "SET",    "orders",  kUrl,     "order.close,order.open",
                          "CONCURRENCY",  "3",      "TIMEOUT", "10s",    "TTL",
                          "60000",        "SECRET", kSecretA,  "secret", kSecretB,
                          "RETRY",        "2s",     "1m",      "4",      "RATE",
                          "2.5"});
  ASSERT_EQ(set.type, RespReply::Type::kArray) << set.ToString();
  EXPECT_EQ(PairText(set, "name"), "orders");
  EXPECT_EQ(PairText(set, "url"), kUrl);
  ASSERT_NE(Pair(set, "topics"), nullptr);
  EXPECT_EQ(*Pair(set, "topics"), Array({Bulk("order.close"), Bulk("order.open")}));
  EXPECT_EQ(PairText(set, "concurrency"), "3");
  EXPECT_EQ(PairText(set, "timeout_ms"), "10000");
  EXPECT_EQ(PairText(set, "ttl_ms"), "60000");
  EXPECT_EQ(PairText(set, "signed"), "1");
  EXPECT_EQ(PairText(set, "secret_count"), "2");
  EXPECT_EQ(PairText(set, "retry_min_backoff_ms"), "2000");
  EXPECT_EQ(PairText(set, "retry_max_backoff_ms"), "60000");
  EXPECT_EQ(PairText(set, "retry_max_doublings"), "4");
  EXPECT_EQ(PairText(set, "rate_per_s"), "2.5");
  EXPECT_EQ(PairText(set, "expires_ms"), std::to_string(t0 + 60'000));
  EXPECT_EQ(Pair(set, "in_flight"), nullptr);  // a SET answers the instance, not its figures
  EXPECT_EQ(set.ToString().find("whsec_"), std::string::npos);

  h.Resp({"SUBSCRIPTION", "SET", "orders", kUrl2, "order.close"});
  RespReply got = h.Resp({"SUBSCRIPTION", "GET", "orders"});
  ASSERT_EQ(got.elements.size(), 2u) << got.ToString();
  EXPECT_EQ(PairText(got.elements[0], "url"), kUrl);
  EXPECT_NE(PairText(got.elements[0], "in_flight"), "(absent)");
  EXPECT_EQ(PairText(got.elements[0], "delivered"), "0");
  EXPECT_EQ(PairText(got.elements[0], "last_error"), "");
  EXPECT_EQ(PairText(got.elements[1], "url"), kUrl2);
  EXPECT_EQ(PairText(got.elements[1], "signed"), "0");
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "LIST"}), got);

  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "DEL", "orders", kUrl2}), Integer(1));
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "DEL", "orders", kUrl2}), Integer(0));
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "GET", "orders"}).elements.size(), 1u);
  EXPECT_EQ(h.Resp({"subscription", "del", "orders"}), Integer(1));
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "GET", "orders"}),
            Error("NOTFOUND no subscription of that name has a live instance"));
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "LIST"}), Array({}));
}

TEST_P(SubscriptionResp, BadInputIsRefusedNamingTheArgument) {
  const std::string url(kUrl);
  auto error = [&](std::initializer_list<std::string_view> args) { return h.Resp(args).str; };
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", "ftp://h/", "t"}).rfind("INVALID url: scheme", 0),
            0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url, "t,"}).rfind("INVALID topics: ", 0), 0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url, "t", "CONCURRENCY", "0"}),
            "INVALID CONCURRENCY: expected an integer 1..10000");
  EXPECT_EQ(
      error({"SUBSCRIPTION", "SET", "x", url, "t", "TIMEOUT", "-1"}).rfind("INVALID TIMEOUT", 0),
      0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url, "t", "TTL", "10"}).rfind("INVALID ttl_ms: ", 0),
            0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url, "t", "SECRET", "hunter2"})
                .rfind("INVALID secret: ", 0),
            0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url, "t", "RETRY", "1s", "5m"})
                .rfind("INVALID SUBSCRIPTION SET: unknown or incomplete option 'RETRY'", 0),
            0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url, "t", "RETRY", "5s", "1s", "3"})
                .rfind("INVALID retry.max_backoff_ms: ", 0),
            0u);
  EXPECT_EQ(
      error({"SUBSCRIPTION", "SET", "x", url, "t", "RATE", "lots"}).rfind("INVALID RATE: ", 0), 0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url, "t", "CONCURENCY", "5"})
                .rfind("INVALID SUBSCRIPTION SET: unknown or incomplete option 'CONCURENCY'", 0),
            0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "bad name", url, "t"}).rfind("INVALID name: ", 0), 0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "GET", ""}).rfind("INVALID name: ", 0), 0u);
  EXPECT_EQ(error({"SUBSCRIPTION", "SET", "x", url}),
            "ERR wrong number of arguments for 'SUBSCRIPTION|SET' command");
  EXPECT_EQ(error({"SUBSCRIPTION", "NOPE"}),
            "ERR unknown subcommand 'NOPE'. Try SUBSCRIPTION HELP.");
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "LIST"}), Array({}));  // nothing was registered
}

TEST_P(SubscriptionResp, HelpListsTheSubcommands) {
  RespReply help = h.Resp({"SUBSCRIPTION", "HELP"});
  ASSERT_EQ(help.type, RespReply::Type::kArray) << help.ToString();
  std::string text;
  for (const RespReply& line : help.elements) text += line.str + "\n";
  for (std::string_view sub :
       {"SET name url topic[,topic...]", "DEL name [url]", "GET name", "LIST", "HELP"}) {
    EXPECT_NE(text.find(sub), std::string::npos) << sub << " in\n" << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Stores, SubscriptionResp, ::testing::ValuesIn(kInProcessStores));

// With push delivery off (no Pusher), the subscription requests say so.
TEST(SubscriptionPushOff, TheRoutesAndCommandsAnswerUnavailable) {
  FrontEndHarness h({.push = false});
  HttpReply r =
      h.Http("PUT", "/v1/subscriptions/x", R"({"topics":["t"],"url":"http://127.0.0.1:9/"})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(ErrorOf(r), "unavailable: push delivery is off on this server");
  EXPECT_EQ(h.Http("GET", "/v1/subscriptions").status, 503);
  EXPECT_EQ(h.Http("GET", "/v1/subscriptions/x").status, 503);
  EXPECT_EQ(h.Http("DELETE", "/v1/subscriptions/x").status, 503);
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "LIST"}),
            Error("UNAVAILABLE push delivery is off on this server"));
  EXPECT_EQ(h.Resp({"SUBSCRIPTION", "SET", "x", "http://127.0.0.1:9/", "t"}),
            Error("UNAVAILABLE push delivery is off on this server"));
}

}  // namespace
}  // namespace delayq::server::testing
