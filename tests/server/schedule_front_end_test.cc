// Periodic jobs' front ends in-process (FrontEndHarness: the real routes,
// commands and a real schedule::Scheduler on a real memory queue, a
// ManualClock): PUT/GET/DELETE /v1/schedules, pause, resume, backfill,
// SCHEDULE SET|GET|LIST|DEL|PAUSE|RESUME|BACKFILL, the schedule figures of
// STATS and /metrics, and `delayq schedule`'s usage errors through the real
// command line parser.
//
// Two tiers: the *Input, *Off, *Figures and ScheduleCliUsage suites check
// what the front ends decide themselves (the request refused before any
// Scheduler call, the wire tables); ScheduleHttp and ScheduleResp check the
// round trips, which need the Scheduler and the store's schedule records.
// Firing itself (catch-up, overlap) is tests/schedule's.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/client_commands.h"
#include "cli/left_over.h"
#include "cli/option_checks.h"
#include "gtest/gtest.h"
#include "server/front_end_harness.h"
#include "simdjson.h"

namespace delayq::server::testing {
namespace {

namespace dom = simdjson::dom;

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

// RESP pairs by key.
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

// Every field of a schedule, in the wire table's order.
const std::vector<std::string> kFieldOrder = {"name",
                                              "cron",
                                              "timezone",
                                              "topic",
                                              "body",
                                              "ttr_ms",
                                              "priority",
                                              "max_attempts",
                                              "catchup",
                                              "catchup_window_ms",
                                              "overlap",
                                              "paused",
                                              "pause_on_failure",
                                              "pause_reason",
                                              "next_fire_at_ms",
                                              "last_fire_at_ms",
                                              "buffered_fire_at_ms",
                                              "firings",
                                              "skipped",
                                              "version",
                                              "created_ms",
                                              "updated_ms"};

class ScheduleFixture : public ::testing::Test {
 protected:
  HttpReply Put(std::string_view name, std::string_view body) {
    return h.Http("PUT", "/v1/schedules/" + std::string(name), body);
  }
  FrontEndHarness h{{.schedule = true}};
};

// --- what the front ends refuse themselves (passes with any Scheduler) -------------

class ScheduleHttpInput : public ScheduleFixture {};

TEST_F(ScheduleHttpInput, BadInputIsRefusedNamingTheField) {
  auto error = [&](std::string_view body) {
    HttpReply r = Put("nightly", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
    return ErrorOf(r);
  };
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","catchpu":"all"})"),
            "invalid_argument: unknown field 'catchpu' (did you mean 'catchup'?)");
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","next_fire_at_ms":5})")
                .find("invalid_argument: unknown field 'next_fire_at_ms'"),
            0u);
  EXPECT_EQ(error(R"({"cron":"@hourly",)").find("invalid_argument: request: not valid JSON"), 0u);
  EXPECT_EQ(error(R"(["@hourly"])").find("invalid_argument: request: expected a JSON object"), 0u);
  EXPECT_EQ(error(R"({"topic":"t"})").find("invalid_argument: cron: required"), 0u);
  EXPECT_EQ(error(R"({"cron":"@hourly"})").find("invalid_argument: topic: required"), 0u);
  EXPECT_EQ(error(R"({"cron":5,"topic":"t"})").find("invalid_argument: cron: "), 0u);
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":["t"]})").find("invalid_argument: topic: "), 0u);
  EXPECT_EQ(
      error(R"({"cron":"@hourly","topic":"t","paused":"yes"})").find("invalid_argument: paused: "),
      0u);
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","pause_on_failure":1})")
                .find("invalid_argument: pause_on_failure: "),
            0u);
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","priority":-1})")
                .find("invalid_argument: priority: expected an integer 0..4294967295"),
            0u);
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","ttr":"5x"})").find("invalid_argument: ttr: "),
            0u);
  EXPECT_EQ(
      error(R"({"cron":"@hourly","topic":"t","ttr_ms":0})").find("invalid_argument: ttr_ms: "), 0u);
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","catchup":"sometimes"})"),
            R"(invalid_argument: catchup: expected "none", "last" or "all", not "sometimes")");
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","overlap":"queue"})"),
            R"(invalid_argument: overlap: expected "allow", "skip" or "buffer_one", not "queue")");
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","catchup_window_ms":0})")
                .find("invalid_argument: catchup_window_ms: "),
            0u);
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"t","body":"x","body_base64":"eA=="})")
                .find("invalid_argument: "),
            0u);
  EXPECT_EQ(error(R"({"cron":"@hourly","topic":"bad topic"})").find("invalid_argument: topic"), 0u);
  // The name is the path's: '@' separates it from the fire time in job ids.
  HttpReply r = Put("a@b", R"({"cron":"@hourly","topic":"t"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorOf(r).find("invalid_argument: name: '@' is not allowed"), 0u) << r.body;
  r = h.Http("GET", "/v1/schedules/a@b");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(h.Http("DELETE", "/v1/schedules/a@b").status, 400);
  EXPECT_EQ(h.Http("POST", "/v1/schedules/a@b/pause").status, 400);
}

TEST_F(ScheduleHttpInput, BackfillAndPauseBodiesAreChecked) {
  auto error = [&](std::string_view target, std::string_view body) {
    HttpReply r = h.Http("POST", target, body);
    EXPECT_EQ(r.status, 400) << target << " " << body << " -> " << r.body;
    return ErrorOf(r);
  };
  const std::string backfill = "/v1/schedules/nightly/backfill";
  EXPECT_EQ(error(backfill, R"({"to_ms":1000})").find("invalid_argument: from_ms: required"), 0u);
  EXPECT_EQ(error(backfill, R"({"from_ms":1000})").find("invalid_argument: to_ms: required"), 0u);
  EXPECT_EQ(error(backfill, R"({"from_ms":"1000","to_ms":2000})")
                .find("invalid_argument: from_ms: expected an integer"),
            0u);
  EXPECT_EQ(error(backfill, R"({"from_ms":2000,"to_ms":1000})"),
            "invalid_argument: to_ms: must not be before from_ms");
  EXPECT_EQ(error(backfill, R"({"from_ms":1000,"to_ms":2000,"overlap":"all"})"),
            R"(invalid_argument: overlap: expected "allow", "skip" or "buffer_one", not "all")");
  EXPECT_EQ(error(backfill, R"({"from":1000,"to_ms":2000})")
                .find("invalid_argument: unknown field 'from'"),
            0u);
  EXPECT_EQ(
      error("/v1/schedules/nightly/pause", "{").find("invalid_argument: request: not valid JSON"),
      0u);
}

TEST_F(ScheduleHttpInput, AnUnknownActionIs404AndAnotherMethod405) {
  HttpReply r = h.Http("POST", "/v1/schedules/nightly/frob");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(ErrorOf(r),
            "not_found: no such endpoint: /v1/schedules/{name}/frob (pause, resume, backfill)");
  r = h.Http("GET", "/v1/schedules/nightly/pause");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "POST");
  r = h.Http("POST", "/v1/schedules/nightly");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "PUT, GET, DELETE");
  r = h.Http("DELETE", "/v1/schedules");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.Header("Allow"), "GET");
}

class ScheduleRespInput : public ScheduleFixture {};

TEST_F(ScheduleRespInput, BadInputIsRefusedNamingTheArgument) {
  auto error = [&](std::initializer_list<std::string_view> args) {
    RespReply r = h.Resp(args);
    EXPECT_EQ(r.type, RespReply::Type::kError) << r.ToString();
    return r.str;
  };
  EXPECT_EQ(error({"SCHEDULE"}), "ERR wrong number of arguments for 'SCHEDULE' command");
  EXPECT_EQ(error({"SCHEDULE", "FROB"}), "ERR unknown subcommand 'FROB'. Try SCHEDULE HELP.");
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron"}),
            "ERR wrong number of arguments for 'SCHEDULE|SET' command");
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topic"}),
            "ERR wrong number of arguments for 'SCHEDULE|SET' command");
  EXPECT_EQ(error({"SCHEDULE", "GET"}), "ERR wrong number of arguments for 'SCHEDULE|GET' command");
  EXPECT_EQ(error({"SCHEDULE", "GET", "a", "b"}),
            "ERR wrong number of arguments for 'SCHEDULE|GET' command");
  EXPECT_EQ(error({"SCHEDULE", "LIST", "x"}),
            "ERR wrong number of arguments for 'SCHEDULE|LIST' command");
  EXPECT_EQ(error({"SCHEDULE", "BACKFILL", "n1", "1000"}),
            "ERR wrong number of arguments for 'SCHEDULE|BACKFILL' command");
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topik", "t"}),
            "INVALID SCHEDULE SET: unknown field 'topik' (did you mean 'topic'?)");
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "topic", "t"}).find("INVALID cron: required"), 0u);
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly"}).find("INVALID topic: required"),
            0u);
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topic", "t", "catchup", "some"}),
            "INVALID catchup: expected none, last or all, not 'some'");
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topic", "t", "overlap", "x"}),
            "INVALID overlap: expected allow, skip or buffer_one, not 'x'");
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topic", "t", "ttr_ms", "5x"})
                .find("INVALID ttr_ms: "),
            0u);
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topic", "t", "paused", "yes"}),
            "INVALID paused: expected 1 or 0 (true or false)");
  EXPECT_EQ(error({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topic", "t", "priority", "-1"}),
            "INVALID priority: expected an integer 0..4294967295");
  EXPECT_EQ(error({"SCHEDULE", "SET", "a@b", "cron", "@hourly", "topic", "t"})
                .find("INVALID name: '@' is not allowed"),
            0u);
  EXPECT_EQ(error({"SCHEDULE", "GET", "a@b"}).find("INVALID name: "), 0u);
  EXPECT_EQ(error({"SCHEDULE", "BACKFILL", "n1", "x", "2000"}),
            "INVALID from_ms: expected a Unix time in ms");
  EXPECT_EQ(error({"SCHEDULE", "BACKFILL", "n1", "2000", "1000"}),
            "INVALID to_ms: must not be before from_ms");
  EXPECT_EQ(error({"SCHEDULE", "BACKFILL", "n1", "1000", "2000", "always"}),
            "INVALID overlap: expected allow or skip, not 'always'");
}

TEST_F(ScheduleRespInput, HelpListsTheSubcommands) {
  RespReply help = h.Resp({"SCHEDULE", "HELP"});
  ASSERT_EQ(help.type, RespReply::Type::kArray) << help.ToString();
  std::string all;
  for (const RespReply& line : help.elements) all += line.str + "\n";
  for (const char* sub : {"SET name field value", "GET name", "DEL name", "LIST", "PAUSE name",
                          "RESUME name", "BACKFILL name from_ms to_ms", "HELP"}) {
    EXPECT_NE(all.find(sub), std::string::npos) << sub << " in\n" << all;
  }
}

TEST(SchedulesOff, TheRoutesAndCommandsAnswerUnavailable) {
  FrontEndHarness h;  // no Scheduler
  HttpReply r = h.Http("PUT", "/v1/schedules/n1", R"({"cron":"@hourly","topic":"t"})");
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(ErrorOf(r), "unavailable: schedules are off on this server");
  EXPECT_EQ(h.Http("GET", "/v1/schedules").status, 503);
  EXPECT_EQ(h.Http("GET", "/v1/schedules/n1").status, 503);
  EXPECT_EQ(h.Http("DELETE", "/v1/schedules/n1").status, 503);
  EXPECT_EQ(h.Http("POST", "/v1/schedules/n1/pause").status, 503);
  EXPECT_EQ(h.Http("POST", "/v1/schedules/n1/backfill", R"({"from_ms":1,"to_ms":2})").status, 503);
  EXPECT_EQ(h.Resp({"SCHEDULE", "LIST"}), Error("UNAVAILABLE schedules are off on this server"));
  EXPECT_EQ(h.Resp({"SCHEDULE", "SET", "n1", "cron", "@hourly", "topic", "t"}),
            Error("UNAVAILABLE schedules are off on this server"));
  // And STATS has no schedule figures.
  Json stats(h.Http("GET", "/v1/stats").body);
  EXPECT_EQ(stats["schedules"].error(), simdjson::NO_SUCH_FIELD);
}

class ScheduleFigures : public ScheduleFixture {};

TEST_F(ScheduleFigures, StatsAndMetricsCarryTheSchedulersFigures) {
  HttpReply stats = h.Http("GET", "/v1/stats");
  ASSERT_EQ(stats.status, 200) << stats.body;
  Json j(stats.body);
  for (const char* k : {"schedules", "schedule_firings", "schedule_skipped", "schedule_conflicts",
                        "schedule_next_fire_at_ms"}) {
    EXPECT_GE(Int(j[k]), 0) << k << " in " << stats.body;
  }
  // After the lateness figures, before the store's.
  EXPECT_LT(stats.body.find("due_lateness_max_us"), stats.body.find("\"schedules\""));
  RespReply resp = h.Resp({"STATS"});
  for (const char* k : {"schedules", "schedule_firings", "schedule_skipped", "schedule_conflicts",
                        "schedule_next_fire_at_ms"}) {
    EXPECT_NE(Pair(resp, k), nullptr) << k << " in " << resp.ToString();
  }
  HttpReply metrics = h.Http("GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  for (const char* m : {"# TYPE delayq_schedules gauge\ndelayq_schedules ",
                        "# TYPE delayq_schedule_firings_total counter\n",
                        "# TYPE delayq_schedule_skipped_total counter\n",
                        "# TYPE delayq_schedule_conflicts_total counter\n",
                        "# TYPE delayq_schedule_next_fire_at_ms gauge\n"}) {
    EXPECT_NE(metrics.body.find(m), std::string::npos) << m;
  }
}

// --- `delayq schedule`: usage errors, through the real parser ----------------------

// What `delayq ARGS...` says on a usage error before anything is sent (as
// main() words CLI11's errors), and its exit code.
struct Usage {
  int code = 0;
  std::string message;
};
Usage RunCli(std::vector<std::string> args) {
  CLI::App app("delayq");
  app.require_subcommand(1);  // as main() makes it
  auto client = cli::AddClientCommands(&app);
  cli::RefuseOptionLikeValues(&app);
  // An address nothing listens on: a command that got past its usage
  // checks would fail to connect (exit 4), not pass.
  args.insert(args.begin(), {"delayq", "--server", "127.0.0.1:1"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return {2, cli::DescribeParseError(app, e)};
  }
  ::testing::internal::CaptureStderr();
  int code = client->Run();
  std::string err = ::testing::internal::GetCapturedStderr();
  while (!err.empty() && err.back() == '\n') err.pop_back();
  return {code, err};
}

TEST(ScheduleCliUsage, MistakesAreNamedWithWhatToType) {
  auto usage = [](std::vector<std::string> args) {
    Usage u = RunCli(std::move(args));
    EXPECT_EQ(u.code, 2) << u.message;
    return u.message;
  };
  EXPECT_EQ(usage({"schedule", "set", "n1", "--topic", "t"}),
            "delayq schedule set: --cron is required (delayq schedule set NAME [OPTIONS]; see "
            "delayq schedule set --help)");
  EXPECT_EQ(usage({"schedule", "set", "n1", "--cron", "@hourly"})
                .find("delayq schedule set: --topic is required"),
            0u);
  EXPECT_EQ(usage({"schedule", "set", "--cron", "@hourly", "--topic", "t"})
                .find("delayq schedule set: NAME is required"),
            0u);
  EXPECT_EQ(usage({"schedule"}),
            "delayq schedule: a subcommand is required: set, get, list, delete, pause, resume, "
            "backfill (see delayq schedule --help)");
  EXPECT_EQ(usage({"schedule", "sett"}),
            "delayq schedule: unknown command 'sett' — did you mean 'set'?");
  EXPECT_EQ(usage({"schedule", "set", "n1", "--cron", "@hourly", "--topic", "t", "--catchup",
                   "sometimes"}),
            "delayq schedule set: --catchup takes none, last or all, not 'sometimes'");
  EXPECT_EQ(
      usage({"schedule", "set", "n1", "--cron", "@hourly", "--topic", "t", "--overlap", "queue"}),
      "delayq schedule set: --overlap takes allow, skip or buffer_one, not 'queue'");
  EXPECT_EQ(
      usage({"schedule", "set", "n1", "--cron", "@hourly", "--topic", "t", "--priority", "-1"}),
      "delayq schedule set: --priority takes 0 to 4294967295, not -1");
  EXPECT_EQ(usage({"schedule", "get", "n1", "--bogus"}),
            "delayq schedule get: unknown option '--bogus' ('delayq schedule get --help' lists "
            "the options)");
  EXPECT_EQ(usage({"schedule", "backfill", "n1", "--from", "1000"})
                .find("delayq schedule backfill: --to is required"),
            0u);
  EXPECT_EQ(usage({"schedule", "backfill", "n1", "--from", "1000", "--to", "2000", "--overlap",
                   "buffer_one"}),
            "delayq schedule backfill: --overlap takes allow or skip, not 'buffer_one'");
  // Checked after parsing, still before anything is sent.
  EXPECT_EQ(usage({"schedule", "set", "n1", "--cron", "@hourly", "--topic", "t", "--ttr", "5x"})
                .find("delayq schedule set: --ttr: unknown unit 'x' in '5x'"),
            0u);
  EXPECT_EQ(usage({"schedule", "set", "n1", "--cron", "@hourly", "--topic", "t", "--catchup-window",
                   "0s"})
                .find("delayq schedule set: --catchup-window: "),
            0u);
  EXPECT_EQ(usage({"schedule", "backfill", "n1", "--from", "yesterday", "--to", "-1h"}),
            "delayq schedule backfill: --from: expected Unix ms, an RFC 3339 time "
            "(2026-11-27T10:00:00Z) or -DURATION before now (-2h), not 'yesterday'");
  EXPECT_EQ(usage({"schedule", "backfill", "n1", "--from", "2026-11-27T10:00:00Z", "--to",
                   "2026-11-27T09:00:00Z"}),
            "delayq schedule backfill: --to: must not be before --from");
}

TEST(ScheduleCliUsage, AWellFormedCommandGetsAsFarAsTheServer) {
  // Every form of time and duration accepted: the failure is the connection.
  Usage u = RunCli({"schedule", "backfill", "n1", "--from", "2026-11-27T10:00:00+01:00", "--to",
                    "-90m", "--overlap", "skip"});
  EXPECT_EQ(u.code, 4) << u.message;
  EXPECT_NE(u.message.find("cannot connect to 127.0.0.1:1"), std::string::npos) << u.message;
  u = RunCli({"schedule",
              "set",
              "n1",
              "--cron",
              "*/5 * * * *",
              "--topic",
              "t",
              "--ttr",
              "1m30s",
              "--catchup",
              "all",
              "--catchup-window",
              "2h",
              "--overlap",
              "buffer_one",
              "--paused",
              "--pause-on-failure",
              "--timezone",
              "Europe/Paris",
              "--body",
              "{}",
              "--priority",
              "3",
              "--max-attempts",
              "2"});
  EXPECT_EQ(u.code, 4) << u.message;
}

// --- round trips: need the Scheduler and the store's schedule records --------------

class ScheduleHttp : public ScheduleFixture {};

TEST_F(ScheduleHttp, PutThenGetAnswersTheScheduleWithItsNextFiring) {
  const int64_t t0 = h.clock().NowMs();
  HttpReply put = Put("nightly", R"({"cron":"@every 10s","topic":"reports","body":{"k":1},)"
                                 R"("timezone":"Europe/Paris","ttr":"30s","priority":5,)"
                                 R"("max_attempts":3,"catchup":"all","catchup_window":"1h",)"
                                 R"("overlap":"allow","pause_on_failure":true})");
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(put.Header("Content-Type"), "application/json");
  {
    Json j(put.body);
    EXPECT_EQ(Str(j["name"]), "nightly");
    EXPECT_EQ(Str(j["cron"]), "@every 10s");
    EXPECT_EQ(Str(j["timezone"]), "Europe/Paris");
    EXPECT_EQ(Str(j["topic"]), "reports");
    EXPECT_EQ(Str(j["body"]), R"({"k":1})");  // as the add route takes a JSON body
    EXPECT_EQ(Int(j["ttr_ms"]), 30'000);
    EXPECT_EQ(Int(j["priority"]), 5);
    EXPECT_EQ(Int(j["max_attempts"]), 3);
    EXPECT_EQ(Str(j["catchup"]), "all");
    EXPECT_EQ(Int(j["catchup_window_ms"]), 3'600'000);
    EXPECT_EQ(Str(j["overlap"]), "allow");
    EXPECT_EQ(Compact(j["paused"]), "false");
    EXPECT_EQ(Compact(j["pause_on_failure"]), "true");
    EXPECT_EQ(Str(j["pause_reason"]), "");
    EXPECT_EQ(Int(j["version"]), 1);
    EXPECT_EQ(Int(j["created_ms"]), t0);
    EXPECT_EQ(Int(j["updated_ms"]), t0);
  }
  // Every field, in the table's order.
  size_t at = 0;
  for (const std::string& k : kFieldOrder) {
    size_t found = put.body.find("\"" + k + "\":", at);
    EXPECT_NE(found, std::string::npos) << k << " after byte " << at << " of " << put.body;
    if (found != std::string::npos) at = found;
  }

  HttpReply got = h.Http("GET", "/v1/schedules/nightly");
  ASSERT_EQ(got.status, 200) << got.body;
  Json j(got.body);
  const int64_t next = Int(j["next_fire_at_ms"]);
  EXPECT_GT(next, t0);
  EXPECT_LE(next, t0 + 10'000);
  EXPECT_EQ(next % 10'000, 0);  // @every: multiples since the epoch
  EXPECT_EQ(Int(j["last_fire_at_ms"]), 0);
  EXPECT_EQ(Int(j["buffered_fire_at_ms"]), 0);
  EXPECT_EQ(Str(j["body"]), R"({"k":1})");

  // The next firing is a job, added ahead: id name@ms, run_at the fire time.
  HttpReply job = h.Http("GET", "/v1/jobs/nightly@" + std::to_string(next));
  ASSERT_EQ(job.status, 200) << job.body;
  Json jj(job.body);
  EXPECT_EQ(Str(jj["state"]), "delayed");
  EXPECT_EQ(Str(jj["topic"]), "reports");
  EXPECT_EQ(Int(jj["run_at_ms"]), next);
  EXPECT_EQ(Int(jj["priority"]), 5);

  // A second PUT changes the definition: version 2, created_ms kept; what
  // it leaves out takes its default again, and an empty zone is UTC.
  h.AdvanceMs(1000);
  put = Put("nightly", R"({"cron":"@every 10s","topic":"reports"})");
  ASSERT_EQ(put.status, 200) << put.body;
  Json again(put.body);
  EXPECT_EQ(Int(again["version"]), 2);
  EXPECT_EQ(Int(again["created_ms"]), t0);
  EXPECT_EQ(Int(again["updated_ms"]), t0 + 1000);
  EXPECT_EQ(Str(again["timezone"]), "UTC");
  EXPECT_EQ(Str(again["catchup"]), "last");
  EXPECT_EQ(Int(again["priority"]), kDefaultPriority);
  EXPECT_EQ(Str(again["body"]), "");
}

TEST_F(ScheduleHttp, ABodyThatIsNotUtf8IsGivenAndShownAsBase64) {
  HttpReply put = Put("bin", R"({"cron":"@hourly","topic":"t","body_base64":"/wA="})");
  ASSERT_EQ(put.status, 200) << put.body;
  Json j(put.body);
  EXPECT_EQ(Str(j["body_base64"]), "/wA=");
  EXPECT_EQ(j["body"].error(), simdjson::NO_SUCH_FIELD);
}

TEST_F(ScheduleHttp, ListDeleteAndNotFound) {
  ASSERT_EQ(Put("b", R"({"cron":"@hourly","topic":"t"})").status, 200);
  ASSERT_EQ(Put("a", R"({"cron":"@daily","topic":"t"})").status, 200);
  HttpReply list = h.Http("GET", "/v1/schedules");
  ASSERT_EQ(list.status, 200) << list.body;
  Json j(list.body);
  // Both, in whichever order the Scheduler lists them.
  const std::string first = Str(j["schedules"].at(0)["name"]);
  const std::string second = Str(j["schedules"].at(1)["name"]);
  EXPECT_TRUE((first == "a" && second == "b") || (first == "b" && second == "a")) << list.body;
  EXPECT_EQ(j["schedules"].at(2).error(), simdjson::INDEX_OUT_OF_BOUNDS);

  HttpReply del = h.Http("DELETE", "/v1/schedules/b");
  ASSERT_EQ(del.status, 200) << del.body;
  EXPECT_EQ(Str(Json(del.body)["cron"]), "@hourly");  // as it was
  HttpReply got = h.Http("GET", "/v1/schedules/b");
  EXPECT_EQ(got.status, 404) << got.body;
  EXPECT_EQ(ErrorOf(got).find("not_found: "), 0u) << got.body;
  EXPECT_EQ(h.Http("DELETE", "/v1/schedules/b").status, 404);
  EXPECT_EQ(h.Http("POST", "/v1/schedules/b/pause").status, 404);
  EXPECT_EQ(h.Http("DELETE", "/v1/schedules/a").status, 200);
  EXPECT_EQ(h.Http("GET", "/v1/schedules").body, R"({"schedules":[]})");
}

TEST_F(ScheduleHttp, PauseWithdrawsTheFiringAddedAheadAndResumeFiresAgain) {
  HttpReply put = Put("tick", R"({"cron":"@every 60s","topic":"t"})");
  ASSERT_EQ(put.status, 200) << put.body;
  const int64_t next = Int(Json(h.Http("GET", "/v1/schedules/tick").body)["next_fire_at_ms"]);
  ASSERT_GT(next, 0);
  const std::string job = "/v1/jobs/tick@" + std::to_string(next);
  ASSERT_EQ(h.Http("GET", job).status, 200);

  HttpReply paused = h.Http("POST", "/v1/schedules/tick/pause");
  ASSERT_EQ(paused.status, 200) << paused.body;
  EXPECT_EQ(Compact(Json(paused.body)["paused"]), "true");
  EXPECT_EQ(h.Http("GET", job).status, 404);

  HttpReply resumed = h.Http("POST", "/v1/schedules/tick/resume", "{}");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(Compact(Json(resumed.body)["paused"]), "false");
  const int64_t again = Int(Json(h.Http("GET", "/v1/schedules/tick").body)["next_fire_at_ms"]);
  EXPECT_GE(again, next);
  EXPECT_EQ(h.Http("GET", "/v1/jobs/tick@" + std::to_string(again)).status, 200);
}

TEST_F(ScheduleHttp, BackfillAddsThePastRangeOnce) {
  const int64_t base = h.clock().NowMs() / 1000 * 1000;
  ASSERT_EQ(Put("sec", R"({"cron":"@every 1s","topic":"t"})").status, 200);
  const std::string range = R"({"from_ms":)" + std::to_string(base - 10'000) + R"(,"to_ms":)" +
                            std::to_string(base - 1000) + "}";
  HttpReply first = h.Http("POST", "/v1/schedules/sec/backfill", range);
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.body, R"({"added":10,"already":0,"in_range":10})");
  HttpReply second = h.Http("POST", "/v1/schedules/sec/backfill", range);
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.body, R"({"added":0,"already":10,"in_range":10})");
  EXPECT_EQ(h.Http("GET", "/v1/jobs/sec@" + std::to_string(base - 5000)).status, 200);
  // buffer_one has no meaning for a past range.
  HttpReply held = h.Http("POST", "/v1/schedules/sec/backfill",
                          range.substr(0, range.size() - 1) + R"(,"overlap":"buffer_one"})");
  EXPECT_EQ(held.status, 400) << held.body;
}

TEST_F(ScheduleHttp, ACronOrTimeZoneThatDoesNotParseIs400NamingIt) {
  HttpReply r = Put("bad", R"({"cron":"61 * * * *","topic":"t"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorOf(r).find("invalid_argument: cron: "), 0u) << r.body;
  r = Put("bad", R"({"cron":"@hourly","topic":"t","timezone":"Europe/Berln"})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(ErrorOf(r).find("invalid_argument: timezone: "), 0u) << r.body;
  EXPECT_EQ(h.Http("GET", "/v1/schedules/bad").status, 404);
}

TEST_F(ScheduleHttp, StatsCountTheSchedules) {
  ASSERT_EQ(Put("a", R"({"cron":"@hourly","topic":"t"})").status, 200);
  ASSERT_EQ(Put("b", R"({"cron":"@hourly","topic":"t"})").status, 200);
  EXPECT_EQ(Int(Json(h.Http("GET", "/v1/stats").body)["schedules"]), 2);
  EXPECT_NE(h.Http("GET", "/metrics").body.find("\ndelayq_schedules 2\n"), std::string::npos);
  // The earliest next firing of the two: the next whole hour.
  const int64_t now = h.clock().NowMs();
  EXPECT_EQ(Int(Json(h.Http("GET", "/v1/stats").body)["schedule_next_fire_at_ms"]),
            (now / 3'600'000 + 1) * 3'600'000);
}

class ScheduleResp : public ScheduleFixture {};

TEST_F(ScheduleResp, SetGetListPauseResumeBackfillDelRoundTrip) {
  const int64_t t0 = h.clock().NowMs();
  RespReply set = h.Resp({"SCHEDULE", "SET", "tick", "cron", "@every 60s", "TOPIC", "t", "body",
                          "hello", "ttr_ms", "30s", "priority", "7", "catchup", "none", "overlap",
                          "skip", "pause_on_failure", "1"});
  ASSERT_EQ(set.type, RespReply::Type::kArray) << set.ToString();
  ASSERT_EQ(set.elements.size(), 2 * kFieldOrder.size()) << set.ToString();
  for (size_t i = 0; i < kFieldOrder.size(); ++i)
    EXPECT_EQ(set.elements[2 * i].str, kFieldOrder[i]);
  EXPECT_EQ(PairText(set, "name"), "tick");
  EXPECT_EQ(PairText(set, "timezone"), "UTC");
  EXPECT_EQ(PairText(set, "body"), "hello");
  EXPECT_EQ(PairText(set, "ttr_ms"), "30000");
  EXPECT_EQ(PairText(set, "priority"), "7");
  EXPECT_EQ(PairText(set, "catchup"), "none");
  EXPECT_EQ(PairText(set, "overlap"), "skip");
  EXPECT_EQ(PairText(set, "paused"), "0");
  EXPECT_EQ(PairText(set, "pause_on_failure"), "1");
  EXPECT_EQ(PairText(set, "created_ms"), std::to_string(t0));

  RespReply got = h.Resp({"SCHEDULE", "GET", "tick"});
  EXPECT_GT(std::stoll(PairText(got, "next_fire_at_ms")), t0) << got.ToString();
  EXPECT_EQ(h.Resp({"SCHEDULE", "LIST"}).elements.size(), 1u);
  EXPECT_EQ(PairText(h.Resp({"SCHEDULE", "PAUSE", "tick"}), "paused"), "1");
  EXPECT_EQ(PairText(h.Resp({"schedule", "resume", "tick"}), "paused"), "0");

  const int64_t base = t0 / 60'000 * 60'000;
  RespReply filled = h.Resp({"SCHEDULE", "BACKFILL", "tick", std::to_string(base - 120'000),
                             std::to_string(base - 60'000), "allow"});
  EXPECT_EQ(filled, Array({Bulk("added"), Bulk("2"), Bulk("already"), Bulk("0"), Bulk("in_range"),
                           Bulk("2")}));

  RespReply del = h.Resp({"SCHEDULE", "DEL", "tick"});
  EXPECT_EQ(PairText(del, "name"), "tick");
  RespReply missing = h.Resp({"SCHEDULE", "GET", "tick"});
  EXPECT_EQ(missing.type, RespReply::Type::kError);
  EXPECT_EQ(missing.str.find("NOTFOUND "), 0u) << missing.str;
  EXPECT_EQ(h.Resp({"SCHEDULE", "LIST"}), Array({}));
}

}  // namespace
}  // namespace delayq::server::testing
