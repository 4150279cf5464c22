// The HTTP front end in-process (FrontEndHarness): the real framing, route
// table and handlers on a real queue, no sockets, a ManualClock. Ports of
// behaviours tests/integration/http_server_test.py checks black-box.
#include <string>

#include "gtest/gtest.h"
#include "server/front_end_harness.h"
#include "simdjson.h"

namespace delayq::server::testing {
namespace {

using Protocol = FrontEndHarness::Protocol;

// A JSON body, parsed (the element lives as long as the Json).
class Json {
 public:
  explicit Json(const std::string& text) : doc_(parser_.parse(text)) {}
  simdjson::dom::element operator*() const { return doc_.value_unsafe(); }
  bool ok() const { return doc_.error() == simdjson::SUCCESS; }

 private:
  simdjson::dom::parser parser_;
  simdjson::simdjson_result<simdjson::dom::element> doc_;
};

std::string Str(simdjson::simdjson_result<simdjson::dom::element> e) {
  std::string_view s;
  if (e.get(s) != simdjson::SUCCESS) return "(not a string)";
  return std::string(s);
}

int64_t Int(simdjson::simdjson_result<simdjson::dom::element> e) {
  int64_t v = -1;
  if (e.get(v) != simdjson::SUCCESS) return -1;
  return v;
}

bool Bool(simdjson::simdjson_result<simdjson::dom::element> e) {
  bool v = false;
  return e.get(v) == simdjson::SUCCESS && v;
}

// A field of /healthz's, /command's answers: its text, "null", or its JSON.
std::string Text(simdjson::simdjson_result<simdjson::dom::element> e) {
  if (e.error() != simdjson::SUCCESS) return "(absent)";
  if (e.is_null()) return "null";
  if (e.is_string()) return Str(e);
  return simdjson::to_string(e.value_unsafe());
}

// /command's answer as "success id value" (its fields, whatever their order).
std::string Seed(const HttpReply& r) {
  Json j(r.body);
  if (!j.ok()) return "(not JSON) " + r.body;
  return Text((*j)["success"]) + " " + Text((*j)["id"]) + " " + Text((*j)["value"]);
}

// "code: message" of an error body.
std::string ErrorOf(const HttpReply& r) {
  Json j(r.body);
  if (!j.ok()) return "(not JSON) " + r.body;
  return Str((*j)["error"]["code"]) + ": " + Str((*j)["error"]["message"]);
}

class HttpFrontEnd : public OnEachStore {};

TEST_P(HttpFrontEnd, AddReserveFinish) {
  HttpReply added = h.Http("POST", "/v1/jobs",
                           R"({"topic":"rt","id":"order-1","body":"close it","ttr_ms":5000})");
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(added.Header("Content-Type"), "application/json");
  EXPECT_EQ(Str((*Json(added.body))["state"]), "ready");
  HttpReply got = h.Http("POST", "/v1/reserve", R"({"topics":["rt"]})");
  ASSERT_EQ(got.status, 200) << got.body;
  Json j(got.body);
  auto job = (*j)["jobs"].at(0);
  EXPECT_EQ(Str(job["id"]), "order-1");
  EXPECT_EQ(Str(job["body"]), "close it");
  EXPECT_EQ(Int(job["attempts"]), 1);
  EXPECT_EQ(Int(job["ttr_ms"]), 5000);
  std::string receipt = Str(job["receipt"]);
  HttpReply info = h.Http("GET", "/v1/jobs/order-1");
  EXPECT_EQ(Str((*Json(info.body))["state"]), "reserved");
  HttpReply finished =
      h.Http("POST", "/v1/jobs/order-1/finish", R"({"receipt":")" + receipt + R"("})");
  EXPECT_EQ(finished.status, 200);
  EXPECT_TRUE(Bool((*Json(finished.body))["ok"])) << finished.body;
  HttpReply gone = h.Http("GET", "/v1/jobs/order-1");
  EXPECT_EQ(gone.status, 404);
  EXPECT_EQ(ErrorOf(gone).rfind("not_found", 0), 0u) << ErrorOf(gone);
}

// POST /v1/jobs takes "idempotency_key": a repeat after the job finished
// is answered 201 as the first add was, and adds nothing.
TEST_P(HttpFrontEnd, ARepeatedAddWithItsIdempotencyKeyAddsNothing) {
  const std::string add = R"({"topic":"idem","id":"pay-1","idempotency_key":"k-1"})";
  HttpReply first = h.Http("POST", "/v1/jobs", add);
  ASSERT_EQ(first.status, 201) << first.body;
  ASSERT_EQ(h.Http("DELETE", "/v1/jobs/pay-1").status, 200);
  HttpReply again = h.Http("POST", "/v1/jobs", add);
  EXPECT_EQ(again.status, 201) << again.body;
  EXPECT_EQ(again.body, first.body);
  EXPECT_EQ(h.Http("GET", "/v1/jobs/pay-1").status, 404);
  HttpReply bad =
      h.Http("POST", "/v1/jobs", R"({"topic":"idem","id":"pay-2","idempotency_key":"a b"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(ErrorOf(bad).find("idempotency_key"), std::string::npos) << ErrorOf(bad);
}

TEST_P(HttpFrontEnd, UnknownPathsAndWrongMethods) {
  HttpReply r = h.Http("GET", "/v2/nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(ErrorOf(r).find("/v2/nothing"), std::string::npos) << ErrorOf(r);
  r = h.Http("GET", "/v1/jobs");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "POST");
  EXPECT_EQ(ErrorOf(r).rfind("invalid_argument", 0), 0u);
  r = h.Http("PUT", "/v1/stats");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "GET");
}

TEST_P(HttpFrontEnd, BadRequestsNameTheFieldAndChangeNothing) {
  h.Http("POST", "/v1/jobs", R"({"topic":"err","id":"e1","body":"orig"})");
  struct Case {
    std::string_view body;
    int status;
    const char* part;
  } cases[] = {
      {R"({"topic":"err","id":"e1"})", 409, "exists"},
      {R"({"id":"x"})", 400, "topic"},
      {R"({"topic":"err","delay_ms":-1})", 400, "delay_ms"},
      {R"({"topic":"err","delay_ms":"10"})", 400, "delay_ms"},
      {R"({"topic":"err","ttr_ms":0})", 400, "ttr_ms"},
      {R"({"topic":"err","delay":5})", 400,
       "delay: expected a duration with a unit as a string, such as \"5s\" or \"30m\"; for a "
       "number of milliseconds use delay_ms"},
      {R"({"topic":"err","delay":"5s","delay_ms":5000})", 400, "delay and delay_ms: give one"},
      {R"({"topic":"err","delay":"5 s"})", 400, "delay: "},
      {R"({"topic":"err","ttr":"0s"})", 400, "ttr: at least 1ms"},
      {R"({"topic":"err","ttr":60})", 400, "use ttr_ms"},
      {R"({"topic":"err","run_at_ms":1795659700})", 400,
       "run_at_ms: 1795659700 is before 2001-09-09 — it looks like seconds; give milliseconds "
       "(1795659700000)"},
      {R"({"topic":"err","dealy_ms":5})", 400,
       "invalid_argument: unknown field 'dealy_ms' (did you mean 'delay_ms'?)"},
      {R"({"topic":)", 400,
       "invalid_argument: request: not valid JSON at byte 9: expected a value, but the request "
       "ended there"},
      {R"([1,2])", 400, "invalid_argument: request: expected a JSON object, got an array"},
      {std::string_view("\x00\xff", 2), 400,
       "invalid_argument: request: not valid JSON at byte 0: expected a value (an object, array, "
       "string, number, true, false or null), found byte 0x00"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.body));
    HttpReply r = h.Http("POST", "/v1/jobs", c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    EXPECT_NE(ErrorOf(r).find(c.part), std::string::npos) << ErrorOf(r);
  }
  Json info(h.Http("GET", "/v1/jobs/e1").body);
  EXPECT_EQ(Str((*info)["state"]), "ready");
  EXPECT_EQ(Str((*info)["body"]), "orig");
}

// A body that is not JSON says where and why, as "request" (a job's "body"
// is one of the fields, so "body: not valid JSON" read as that field).
TEST_P(HttpFrontEnd, ARequestThatIsNotJsonSaysAtWhichByteAndWhy) {
  struct Case {
    std::string_view path;
    std::string_view body;
    const char* message;
  } cases[] = {
      {"/v1/jobs", R"({"topic":"t" "id":"x"})",
       "request: not valid JSON at byte 13: expected ',' or '}' after a field, found '\"'"},
      {"/v1/jobs", R"({topic:"t"})",
       "request: not valid JSON at byte 1: expected a field name in double quotes, found 't'"},
      {"/v1/jobs", R"({"topic" "t"})",
       "request: not valid JSON at byte 9: expected ':' after the field name, found '\"'"},
      {"/v1/jobs", R"({"topic":"t",})",
       "request: not valid JSON at byte 13: expected a field name in double quotes, found '}'"},
      {"/v1/jobs", R"({"topic":"t","delay_ms":5)",
       "request: not valid JSON at byte 25: expected ',' or '}' after a field, but the request "
       "ended there"},
      {"/v1/jobs", R"({"topic":"t","body":"a\qb"})",
       "request: not valid JSON at byte 22: unknown escape in a string"},
      {"/v1/jobs", R"({"topic":"t","body":"open)",
       "request: not valid JSON at byte 20: a string that is never closed"},
      {"/v1/jobs", R"({"topic":"t"} x)",
       "request: not valid JSON at byte 14: text after the JSON value, found 'x'"},
      {"/v1/jobs", R"({"topic":"t","delay_ms":01})",
       "request: not valid JSON at byte 25: expected ',' or '}' after a field, found '1'"},
      {"/v1/jobs", R"({"topic":"t","replace":tru})",
       "request: not valid JSON at byte 23: expected a value"},
      {"/v1/jobs", "{\"topic\":\"t\",\"body\":\"\xff\"}",
       "request: not valid JSON at byte 21: bytes that are not UTF-8 in a string"},
      {"/v1/jobs", R"({"topic":"t","priority":99999999999999999999999})",
       "request: not valid JSON at byte 24: an integer beyond 64 bits"},
      {"/v1/reserve", R"({"topics":["a",]})",
       "request: not valid JSON at byte 15: expected a value"},
      {"/v1/reserve", R"({"topics":["a" "b"]})",
       "request: not valid JSON at byte 15: expected ',' or ']' after an element, found '\"'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.body));
    HttpReply r = h.Http("POST", c.path, c.body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(ErrorOf(r).find(std::string("invalid_argument: ") + c.message), 0) << ErrorOf(r);
  }
  // /command answers in its own shape, with the same words.
  Json seed(h.Http("POST", "/command", R"({"command":"pop",})").body);
  EXPECT_EQ(Str((*seed)["error"]),
            "invalid_argument: request: not valid JSON at byte 17: expected a field name in "
            "double quotes, found '}'");
}

// An unknown field names the nearest one the endpoint reads (as the command
// line suggests flags), or lists them when none is near.
TEST_P(HttpFrontEnd, AnUnknownFieldNamesTheNearestKnownOne) {
  struct Case {
    std::string_view path;
    std::string_view body;
    const char* message;
  } cases[] = {
      {"/v1/reserve", R"({"topic":["t"]})", "unknown field 'topic' (did you mean 'topics'?)"},
      {"/v1/reserve", R"({"topics":["t"],"wiat":"1s"})",
       "unknown field 'wiat' (did you mean 'wait'?)"},
      {"/v1/jobs", R"({"topics":"t"})", "unknown field 'topics' (did you mean 'topic'?)"},
      {"/v1/jobs", R"({"topic":"t","ttr_sm":5})",
       "unknown field 'ttr_sm' (did you mean 'ttr_ms'?)"},
      {"/v1/jobs/x/finish", R"({"reciept":"r"})",
       "unknown field 'reciept' (did you mean 'receipt'?)"},
      {"/v1/jobs/x/release", R"({"force":true,"delya":"1s"})",
       "unknown field 'delya' (did you mean 'delay'?)"},
      {"/v1/jobs/x/bury", R"({"force":true,"resaon":"x"})",
       "unknown field 'resaon' (did you mean 'reason'?)"},
      {"/v1/topics/t/pause", R"({"ms":5,"m":5})", "unknown field 'm' (did you mean 'ms'?)"},
      {"/v1/reserve", R"({"topics":["t"],"colour":1})",
       "unknown field 'colour' (this request's fields: topics, wait_ms, wait, count)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.path) + " " + std::string(c.body));
    HttpReply r = h.Http("POST", c.path, c.body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(ErrorOf(r), std::string("invalid_argument: ") + c.message);
  }
}

// finish, release, touch and bury need the receipt of the reserve that
// handed the job out, or "force": true to act by id alone.
TEST_P(HttpFrontEnd, AReceiptOrForceIsRequiredAndForceSaysSo) {
  h.Http("POST", "/v1/jobs", R"({"topic":"rc","id":"rc-1"})");
  Json got(h.Http("POST", "/v1/reserve", R"({"topics":["rc"]})").body);
  const std::string receipt = Str((*got)["jobs"].at(0)["receipt"]);
  const std::string required =
      "invalid_argument: receipt: required — the receipt from the reserve that handed the job "
      "out (\"force\": true acts by id alone)";
  for (std::string_view action : {"finish", "release", "touch", "bury"}) {
    std::string path = "/v1/jobs/rc-1/" + std::string(action);
    SCOPED_TRACE(path);
    for (std::string_view body : {"", "{}", R"({"force":false})", R"({"error":"x"})"}) {
      if (body == R"({"error":"x"})" && action != "release") continue;
      HttpReply r = h.Http("POST", path, body);
      EXPECT_EQ(r.status, 400) << body;
      EXPECT_EQ(ErrorOf(r), required) << body;
    }
    HttpReply both = h.Http("POST", path, R"({"receipt":")" + receipt + R"(","force":true})");
    EXPECT_EQ(both.status, 400);
    EXPECT_EQ(ErrorOf(both),
              "invalid_argument: receipt and force: give receipt or force, not both");
    for (std::string bad : {std::string(""), std::string("abc"), receipt + "0"}) {
      HttpReply r = h.Http("POST", path, R"({"receipt":")" + bad + R"("})");
      EXPECT_EQ(r.status, 400) << bad;
      EXPECT_EQ(ErrorOf(r).rfind("invalid_argument: receipt: expected the 24 hex digits", 0), 0u)
          << ErrorOf(r);
    }
    HttpReply stale = h.Http("POST", path, R"({"receipt":")" + std::string(24, 'f') + R"("})");
    EXPECT_EQ(stale.status, 409);
    EXPECT_EQ(ErrorOf(stale).rfind("stale_receipt", 0), 0u) << ErrorOf(stale);
  }
  // None of that changed the job.
  Json info(h.Http("GET", "/v1/jobs/rc-1").body);
  EXPECT_EQ(Str((*info)["state"]), "reserved");
  EXPECT_EQ(Str((*info)["receipt"]), receipt);
  // Force acts by id alone, and the answer says so.
  HttpReply touched = h.Http("POST", "/v1/jobs/rc-1/touch", R"({"force":true})");
  EXPECT_EQ(touched.status, 200);
  EXPECT_EQ(touched.body, R"({"ok":true,"forced":true})");
  HttpReply released =
      h.Http("POST", "/v1/jobs/rc-1/release", R"({"force":true,"delay":"1m","error":"smtp"})");
  EXPECT_EQ(released.body, R"({"ok":true,"forced":true})");
  Json later(h.Http("GET", "/v1/jobs/rc-1").body);
  EXPECT_EQ(Str((*later)["state"]), "delayed");
  EXPECT_EQ(Str((*later)["last_error"]), "smtp");
  HttpReply not_reserved = h.Http("POST", "/v1/jobs/rc-1/finish", R"({"force":true})");
  EXPECT_EQ(not_reserved.status, 409);
  EXPECT_EQ(ErrorOf(not_reserved).rfind("not_reserved", 0), 0u) << ErrorOf(not_reserved);
  h.AdvanceMs(60'000);
  Json again(h.Http("POST", "/v1/reserve", R"({"topics":["rc"]})").body);
  EXPECT_EQ(Str((*again)["jobs"].at(0)["id"]), "rc-1");
  EXPECT_EQ(h.Http("POST", "/v1/jobs/rc-1/bury", R"({"force":true})").body,
            R"({"ok":true,"forced":true})");
  EXPECT_EQ(h.Http("POST", "/v1/jobs/rc-1/kick").status, 200);
  h.Http("POST", "/v1/reserve", R"({"topics":["rc"]})");
  EXPECT_EQ(h.Http("POST", "/v1/jobs/rc-1/finish", R"({"force":true})").body,
            R"({"ok":true,"forced":true})");
  EXPECT_EQ(h.Http("GET", "/v1/jobs/rc-1").status, 404);
}

// "delay", "ttr", "wait": durations with a unit beside delay_ms, ttr_ms and
// wait_ms.
TEST_P(HttpFrontEnd, DurationsWithAUnitBesideTheMillisecondFields) {
  HttpReply a =
      h.Http("POST", "/v1/jobs", R"({"topic":"du","id":"du-1","delay":"5s","ttr":"90s"})");
  ASSERT_EQ(a.status, 201) << a.body;
  HttpReply b = h.Http("POST", "/v1/jobs", R"({"topic":"du","id":"du-2","delay_ms":5000})");
  ASSERT_EQ(b.status, 201) << b.body;
  EXPECT_EQ(Int((*Json(a.body))["run_at_ms"]), Int((*Json(b.body))["run_at_ms"]));
  EXPECT_EQ(Int((*Json(h.Http("GET", "/v1/jobs/du-1").body))["ttr_ms"]), 90'000);
  auto waiter = h.Connect(Protocol::kHttp);
  waiter->Send(HttpRequest("POST", "/v1/reserve", R"({"topics":["du"],"wait":"2s"})"));
  h.AdvanceMs(1999);
  EXPECT_EQ(waiter->Unread(), "");
  h.AdvanceMs(1);
  EXPECT_EQ(waiter->ReadHttp().body, R"({"jobs":[]})");
  HttpReply bad = h.Http("POST", "/v1/reserve", R"({"topics":["du"],"wait":"2d"})");
  EXPECT_EQ(ErrorOf(bad), "invalid_argument: wait: at most 1d");
  bad = h.Http("POST", "/v1/reserve", R"({"topics":["du"],"wait":"1s","wait_ms":1000})");
  EXPECT_EQ(ErrorOf(bad), "invalid_argument: wait and wait_ms: give one, not both");
  h.AdvanceMs(3000);
  Json got(h.Http("POST", "/v1/reserve", R"({"topics":["du"]})").body);
  std::string receipt = Str((*got)["jobs"].at(0)["receipt"]);
  HttpReply r =
      h.Http("POST", "/v1/jobs/du-1/release", R"({"receipt":")" + receipt + R"(","delay":"1h"})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Int((*Json(h.Http("GET", "/v1/jobs/du-1").body))["run_at_ms"]),
            Int((*Json(b.body))["run_at_ms"]) + 3'600'000);
}

TEST_P(HttpFrontEnd, HealthzMetricsAndHead) {
  HttpReply healthz = h.Http("GET", "/healthz");
  EXPECT_EQ(healthz.status, 200);
  EXPECT_EQ(Text((*Json(healthz.body))["status"]), "ok");
  h.Http("POST", "/v1/jobs", R"({"topic":"m","delay_ms":1000})");
  HttpReply r = h.Http("GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("Content-Type").rfind("text/plain", 0), 0u) << r.Header("Content-Type");
  EXPECT_NE(r.body.find("delayq_jobs{state=\"delayed\"} 1\n"), std::string::npos) << r.body;
  HttpReply head = h.Http("HEAD", "/healthz");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(head.Header("Content-Length"), std::to_string(healthz.body.size()));  // the GET's
  EXPECT_EQ(Text((*Json(h.Http("GET", "/healthz").body))["status"]), "ok");       // framing intact
}

TEST_P(HttpFrontEnd, BodiesThatAreNotUtf8TravelAsBase64) {
  // "\x00\x01\xfe\xff" in base64.
  HttpReply r = h.Http("POST", "/v1/jobs", R"({"topic":"b","id":"b3","body_base64":"AAH+/w=="})");
  ASSERT_EQ(r.status, 201) << r.body;
  Json info(h.Http("GET", "/v1/jobs/b3").body);
  EXPECT_EQ(Str((*info)["body_base64"]), "AAH+/w==");
  EXPECT_EQ((*info)["body"].error(), simdjson::NO_SUCH_FIELD);
  // The same bytes added over RESP come back as base64 too, and the other way.
  EXPECT_EQ(h.Resp({"ADD", "b", "b4", "0", "60000", std::string_view("\x00\x01\xfe\xff", 4)}),
            Bulk("b4"));
  Json reserved(h.Http("POST", "/v1/reserve", R"({"topics":["b"],"count":2})").body);
  EXPECT_EQ(Str((*reserved)["jobs"].at(0)["body_base64"]), "AAH+/w==");
  EXPECT_EQ(Str((*reserved)["jobs"].at(1)["body_base64"]), "AAH+/w==");
  RespReply got = h.Resp({"GET", "b3"});
  bool found = false;
  for (size_t i = 0; i + 1 < got.elements.size(); i += 2) {
    if (got.elements[i].str == "body") {
      EXPECT_EQ(got.elements[i + 1], Bulk(std::string("\x00\x01\xfe\xff", 4)));
      found = true;
    }
  }
  EXPECT_TRUE(found) << got.ToString();
  HttpReply bad = h.Http("POST", "/v1/jobs", R"({"topic":"b","body_base64":"!!"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(ErrorOf(bad).find("body_base64"), std::string::npos) << ErrorOf(bad);
}

TEST_P(HttpFrontEnd, SeedCommandProtocol) {
  auto cmd = [&](const std::string& body) { return Seed(h.Http("POST", "/command", body)); };
  EXPECT_EQ(cmd(R"({"command":"add","topic":"orderclose","id":"No1","delay":0,"TTR":60,)"
                R"("body":{"order":"No1"}})"),
            "true No1 null");
  EXPECT_EQ(cmd(R"({"command":"pop","topic":"orderclose"})"), R"(true No1 {"order":"No1"})");
  EXPECT_EQ(cmd(R"({"command":"finish","id":"No1"})"), "true No1 null");
  EXPECT_EQ(cmd(R"({"command":"pop","topic":"orderclose"})"), "true null null");
  EXPECT_EQ(cmd(R"({"command":"fly"})"), "false null null");
}

TEST_P(HttpFrontEnd, PipelinedRequestsAreAnsweredInOrder) {
  auto c = h.Connect(Protocol::kHttp);
  std::string pipeline;
  for (int i = 0; i < 20; ++i) {
    pipeline += HttpRequest("POST", "/v1/jobs",
                            R"({"topic":"pipe","id":"pp-)" + std::to_string(i) + R"("})");
  }
  pipeline += HttpRequest("GET", "/healthz", {}, "Connection: close\r\n");
  c->Send(pipeline);
  for (int i = 0; i < 20; ++i) {
    HttpReply r = c->ReadHttp();
    EXPECT_EQ(r.status, 201);
    EXPECT_EQ(Str((*Json(r.body))["id"]), "pp-" + std::to_string(i));
  }
  EXPECT_EQ(Text((*Json(c->ReadHttp().body))["status"]), "ok");
  EXPECT_EQ(c->ReadToClose(), "");  // Connection: close
}

TEST_P(HttpFrontEnd, ALongPollIsAnsweredWhenAJobFallsDueNeverEarly) {
  auto waiter = h.Connect(Protocol::kHttp);
  waiter->Send(HttpRequest("POST", "/v1/reserve", R"({"topics":["lp"],"wait_ms":60000})") +
               HttpRequest("GET", "/healthz"));  // pipelined behind it: waits for it
  EXPECT_EQ(Int((*Json(h.Http("GET", "/v1/topics/lp").body))["waiting"]), 1);
  HttpReply added = h.Http("POST", "/v1/jobs", R"({"topic":"lp","id":"soon","delay_ms":200})");
  EXPECT_EQ(added.status, 201);
  h.AdvanceMs(199);
  EXPECT_EQ(waiter->Unread(), "");  // never early
  h.AdvanceMs(1);
  HttpReply r = waiter->ReadHttp();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Str((*Json(r.body))["jobs"].at(0)["id"]), "soon");
  EXPECT_EQ(Text((*Json(waiter->ReadHttp().body))["status"]), "ok");
}

TEST_P(HttpFrontEnd, ALongPollThatRunsOutAnswersNoJobs) {
  auto waiter = h.Connect(Protocol::kHttp);
  waiter->Send(HttpRequest("POST", "/v1/reserve", R"({"topics":["none"],"wait_ms":30})"));
  EXPECT_EQ(waiter->Unread(), "");
  h.AdvanceMs(30);
  HttpReply r = waiter->ReadHttp();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(Text((*Json(r.body))["jobs"]), "[]");
}

TEST_P(HttpFrontEnd, AJobWhoseReplyNeverLeftGoesBackWhenTheClientLeaves) {
  std::string big(200 * 1024, 'b');  // more than a pipe holds: the reply cannot leave whole
  ASSERT_EQ(
      h.Http("POST", "/v1/jobs", R"({"topic":"gb","id":"big","body":")" + big + R"("})").status,
      201);
  auto c = h.Connect(Protocol::kHttp);
  c->Send(HttpRequest("POST", "/v1/reserve", R"({"topics":["gb"]})"));  // not read
  EXPECT_EQ(Str((*Json(h.Http("GET", "/v1/jobs/big").body))["state"]), "reserved");
  c->Disconnect();
  Json info(h.Http("GET", "/v1/jobs/big").body);
  EXPECT_EQ(Str((*info)["state"]), "ready");
  EXPECT_EQ(Int((*info)["attempts"]), 0);
}

// A reserve that arrives with the client's FIN: the client is gone, and the
// reserve takes no job (RespFrontEnd's test of the same).
TEST_P(HttpFrontEnd, AReserveThatArrivesWithTheClientsFinTakesNoJob) {
  ASSERT_EQ(h.Http("POST", "/v1/jobs", R"({"topic":"fin.r","id":"fr"})").status, 201);
  auto gone = h.Connect(Protocol::kHttp);
  gone->SendAndShutdown(HttpRequest("POST", "/v1/reserve", R"({"topics":["fin.r"]})"));
  EXPECT_EQ(gone->ReadToClose(), "");
  Json info(h.Http("GET", "/v1/jobs/fr").body);
  EXPECT_EQ(Str((*info)["state"]), "ready");
  EXPECT_EQ(Int((*info)["attempts"]), 0);
}

constexpr std::string_view kShuttingDown =
    "unavailable: shutting down: the server is stopping; reserve again on another server, or on "
    "this one once it is back";

// Shutdown: the parked long-poll is answered 503 "shutting down", never 200
// {"jobs":[]} (which reads as "no job", and a worker would poll a server
// going away), with Retry-After and Connection: close; what was pipelined
// behind it is not served, as that header says.
TEST_P(HttpFrontEnd, ADrainAnswersALongPoll503ShuttingDownAndCloses) {
  auto c = h.Connect(Protocol::kHttp);
  c->Send(HttpRequest("POST", "/v1/reserve", R"({"topics":["dr"],"wait_ms":60000})") +
          HttpRequest("POST", "/v1/jobs", R"({"topic":"dr","id":"dr-1"})"));
  EXPECT_EQ(c->Unread(), "");
  h.RunOnLoop([&] { h.http().BeginDrain(); });
  HttpReply polled = c->ReadHttp();
  EXPECT_EQ(polled.status, 503);
  EXPECT_EQ(ErrorOf(polled), kShuttingDown);
  EXPECT_EQ(polled.Header("Retry-After"), "1");
  EXPECT_EQ(polled.Header("Connection"), "close");
  EXPECT_EQ(c->ReadToClose(), "");
  EXPECT_EQ(h.Resp({"GET", "dr-1"}), NilArray());  // not added (no such job)
}

// /command's pop answers in the seed's shape: success false and the error.
TEST_P(HttpFrontEnd, ADrainAnswersAWaitingSeedPopShuttingDown) {
  auto c = h.Connect(Protocol::kHttp);
  c->Send(HttpRequest("POST", "/command", R"({"command":"pop","topic":"dp","timeout":60})"));
  EXPECT_EQ(c->Unread(), "");
  h.RunOnLoop([&] { h.http().BeginDrain(); });
  HttpReply popped = c->ReadHttp();
  EXPECT_EQ(popped.status, 200);
  EXPECT_EQ(Seed(popped), "false null null");
  EXPECT_EQ(Str((*Json(popped.body))["error"]), kShuttingDown);
  EXPECT_EQ(popped.Header("Connection"), "close");
  EXPECT_EQ(c->ReadToClose(), "");
}

INSTANTIATE_TEST_SUITE_P(Stores, HttpFrontEnd, ::testing::ValuesIn(kInProcessStores),
                         [](const auto& info) { return std::string(StoreKindName(info.param)); });

TEST(HttpFrontEndAuth, BearerTokenIsRequiredExceptForHealthz) {
  FrontEndHarness h({.auth_token = "s3cret"});
  EXPECT_EQ(h.Http("GET", "/healthz").status, 200);
  HttpReply r = h.Http("GET", "/v1/stats");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(h.Http("GET", "/v2/nothing").status, 401);  // before routing
  EXPECT_EQ(h.Http("GET", "/v1/stats", {}, "Authorization: Bearer wrong\r\n").status, 401);
  EXPECT_EQ(h.Http("GET", "/v1/stats", {}, "Authorization: Bearer s3cret\r\n").status, 200);
}

}  // namespace
}  // namespace delayq::server::testing
