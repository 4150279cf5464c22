// `delayq schedule ...`: each subcommand is a row of kSubcommands — its
// arguments, the SCHEDULE command it sends (built before anything is sent,
// so a bad duration or time is a usage error, exit 2, with nothing sent),
// and how its reply is printed. One command per run, through the client's
// ServerSet by the failover rule: every SCHEDULE change can be repeated
// (SET replaces the definition, BACKFILL's firings have fixed ids, PAUSE and
// RESUME set a flag), so a lost reply is asked again of the next server.
#include "cli/schedule_command.h"

#include <absl/time/clock.h>
#include <absl/time/time.h>
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/failure.h"
#include "cli/reply_fields.h"
#include "client/server_set.h"
#include "client/wire_codec.h"
#include "codec/json_writer.h"
#include "codec/utf8.h"
#include "common/duration.h"
#include "delayq/job.h"
#include "delayq/schedule.h"
#include "redis/reply.h"
#include "wire/encode.h"
#include "wire/fields.h"

namespace delayq::cli {
namespace {

using codec::JsonWriter;
using redis::Reply;

constexpr int64_t kMaxU32 = 4'294'967'295;

// What the command line said; each subcommand uses its own part.
struct Args {
  std::string name;
  std::string cron, topic, body, timezone, ttr, catchup, catchup_window, overlap;
  int64_t priority = 0, max_attempts = 0;
  bool paused = false, pause_on_failure = false;
  std::string from, to;  // backfill
};

// What a backfill answers, for its wire table's kinds (the scheduler's own
// BackfillResult lives above this layer).
struct Backfilled {
  uint64_t added = 0, already = 0, in_range = 0;
};

wire::Kind ScheduleKind(std::string_view key) {
  return wire::KindOf(key, wire::kScheduleFields).value_or(wire::Kind::kText);
}
wire::Kind BackfillKind(std::string_view key) {
  return wire::KindOf(key, wire::kBackfillFields<Backfilled>).value_or(wire::Kind::kText);
}

bool Given(const CLI::App& sub, const char* option) {
  const CLI::Option* o = sub.get_option_no_throw(option);
  return o != nullptr && o->count() > 0;
}

// A time of --from / --to: Unix ms ("1795766400000"), RFC 3339
// ("2026-11-27T10:00:00Z", "2026-11-27T11:00:00+01:00"), or "-" and a
// duration before now ("-2h").
Result<int64_t> ParseTimeMs(std::string_view text, std::string_view what, int64_t now_ms) {
  if (std::optional<int64_t> ms = AsInteger(std::string(text)); ms && *ms >= 0) return *ms;
  if (!text.empty() && text[0] == '-') {
    Result<int64_t> ago = ParseDurationMs(text.substr(1), what);
    if (!ago.ok()) return ago.status();
    return now_ms - *ago;
  }
  absl::Time t;
  std::string err;
  if (absl::ParseTime(absl::RFC3339_full, std::string(text), &t, &err)) {
    return absl::ToUnixMillis(t);
  }
  return InvalidArgument(std::string(what) + ": expected Unix ms, an RFC 3339 time (" +
                         "2026-11-27T10:00:00Z) or -DURATION before now (-2h), not '" +
                         std::string(text.substr(0, 40)) + "'");
}

// --- the commands sent --------------------------------------------------------------

Result<redis::Argv> SetCommand(const CLI::App& sub, const Args& a) {
  redis::Argv cmd = {"SCHEDULE", "SET", a.name, "cron", a.cron, "topic", a.topic};
  if (Given(sub, "--body")) {
    std::string body = a.body;
    if (body == "-") {  // as `delayq add`: the body from stdin
      body.clear();
      char buf[64 * 1024];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) body.append(buf, n);
      if (std::ferror(stdin)) return InvalidArgument("cannot read the body from stdin");
    }
    cmd.insert(cmd.end(), {"body", body});
  }
  if (Given(sub, "--timezone")) cmd.insert(cmd.end(), {"timezone", a.timezone});
  if (Given(sub, "--ttr")) {
    Result<int64_t> ms = ParseDurationMsWithin(a.ttr, "--ttr", 1, kMaxU32);
    if (!ms.ok()) return ms.status();
    cmd.insert(cmd.end(), {"ttr_ms", std::to_string(*ms)});
  }
  if (Given(sub, "--priority")) cmd.insert(cmd.end(), {"priority", std::to_string(a.priority)});
  if (Given(sub, "--max-attempts")) {
    cmd.insert(cmd.end(), {"max_attempts", std::to_string(a.max_attempts)});
  }
  if (Given(sub, "--catchup")) cmd.insert(cmd.end(), {"catchup", a.catchup});
  if (Given(sub, "--catchup-window")) {
    Result<int64_t> ms =
        ParseDurationMsWithin(a.catchup_window, "--catchup-window", 1, kMaxCatchupWindowMs);
    if (!ms.ok()) return ms.status();
    cmd.insert(cmd.end(), {"catchup_window_ms", std::to_string(*ms)});
  }
  if (Given(sub, "--overlap")) cmd.insert(cmd.end(), {"overlap", a.overlap});
  if (a.paused) cmd.insert(cmd.end(), {"paused", "1"});
  if (a.pause_on_failure) cmd.insert(cmd.end(), {"pause_on_failure", "1"});
  return cmd;
}

Result<redis::Argv> BackfillCommand(const CLI::App& sub, const Args& a) {
  const int64_t now = absl::ToUnixMillis(absl::Now());
  Result<int64_t> from = ParseTimeMs(a.from, "--from", now);
  if (!from.ok()) return from.status();
  Result<int64_t> to = ParseTimeMs(a.to, "--to", now);
  if (!to.ok()) return to.status();
  if (*to < *from) return InvalidArgument("--to: must not be before --from");
  redis::Argv cmd = {"SCHEDULE", "BACKFILL", a.name, std::to_string(*from), std::to_string(*to)};
  if (Given(sub, "--overlap")) cmd.push_back(a.overlap);
  return cmd;
}

Result<redis::Argv> NamedCommand(const char* verb, const Args& a) {
  return redis::Argv{"SCHEDULE", verb, a.name};
}

// --- the subcommands ------------------------------------------------------------------

void AddName(CLI::App* sub, Args* a) {
  sub->add_option("name", a->name, "the schedule: 1-100 of [A-Za-z0-9._:-]")->required();
}

void AddSetOptions(CLI::App* sub, Args* a) {
  AddName(sub, a);
  sub->add_option("--cron", a->cron,
                  "when it fires: \"*/5 * * * *\" (an optional leading seconds field), "
                  "\"@hourly\", \"@every 30s\"")
      ->required();
  sub->add_option("--topic", a->topic, "the topic of the job each firing adds")->required();
  sub->add_option("--body", a->body, "the job's body; '-' reads it from stdin; default empty");
  sub->add_option("--timezone", a->timezone, "an IANA time zone: Europe/Paris (default UTC)");
  sub->add_option("--ttr", a->ttr, "the job's time to run once reserved: 60s (default)");
  sub->add_option("--priority", a->priority, "the job's priority, lower first (default 1024)")
      ->check(CLI::Range(int64_t{0}, kMaxU32));
  sub->add_option("--max-attempts", a->max_attempts,
                  "the job's deliveries before it is buried (default 0: no limit)")
      ->check(CLI::Range(int64_t{0}, kMaxU32));
  sub->add_option("--catchup", a->catchup,
                  "fire times missed while down or paused: none, last (default) or all")
      ->check(CLI::IsMember({"none", "last", "all"}));
  sub->add_option("--catchup-window", a->catchup_window,
                  "--catchup all: how far back missed fire times are added (default 24h)");
  sub->add_option("--overlap", a->overlap,
                  "while the previous firing's job is live: allow (default), skip or buffer_one")
      ->check(CLI::IsMember({"allow", "skip", "buffer_one"}));
  sub->add_flag("--paused", a->paused, "create it paused: no firing until resumed");
  sub->add_flag("--pause-on-failure", a->pause_on_failure,
                "pause it when a firing's job is buried");
}

void AddBackfillOptions(CLI::App* sub, Args* a) {
  AddName(sub, a);
  sub->add_option("--from", a->from,
                  "the range's first time: Unix ms, 2026-11-27T10:00:00Z or -2h (before now)")
      ->required();
  sub->add_option("--to", a->to, "the range's last time, at most now (same forms)")->required();
  sub->add_option("--overlap", a->overlap,
                  "allow (default): every fire time; skip: only the latest, none while a "
                  "firing's job is live")
      ->check(CLI::IsMember({"allow", "skip"}));
}

// How a subcommand's reply is printed.
enum class Shows {
  kSchedule,   // one schedule's pairs
  kSchedules,  // an array of them
  kBackfill,   // added, already, in_range
};

struct Subcommand {
  const char* name;
  const char* help;
  void (*add)(CLI::App* sub, Args* a);
  Result<redis::Argv> (*command)(const CLI::App& sub, const Args& a);
  Shows shows;
  bool missing_is_empty;  // NOTFOUND is "nothing there" (exit 3), not a refusal
};

// clang-format off
constexpr Subcommand kSubcommands[] = {
    {"set", "create or replace a schedule; prints it as stored", AddSetOptions, SetCommand,
     Shows::kSchedule, false},
    {"get", "a schedule, with its next and last firings (exit 3: none)", AddName,
     [](const CLI::App&, const Args& a) { return NamedCommand("GET", a); }, Shows::kSchedule, true},
    {"list", "every schedule", [](CLI::App*, Args*) {},
     [](const CLI::App&, const Args&) { return Result<redis::Argv>(redis::Argv{"SCHEDULE", "LIST"}); },
     Shows::kSchedules, false},
    {"delete", "remove a schedule and its firing added ahead; prints it (exit 3: none)", AddName,
     [](const CLI::App&, const Args& a) { return NamedCommand("DEL", a); }, Shows::kSchedule, true},
    {"pause", "no firing until resumed; prints the schedule", AddName,
     [](const CLI::App&, const Args& a) { return NamedCommand("PAUSE", a); }, Shows::kSchedule,
     false},
    {"resume", "fire again (catchup applies to the times passed); prints the schedule", AddName,
     [](const CLI::App&, const Args& a) { return NamedCommand("RESUME", a); }, Shows::kSchedule,
     false},
    {"backfill", "add the firings of a past range that did not happen; prints how many",
     AddBackfillOptions, BackfillCommand, Shows::kBackfill, false},
};
// clang-format on

// Prints the reply as the subcommand shows it; false when it is not that.
bool Print(Shows shows, const Reply& r, bool json) {
  if (shows == Shows::kSchedules) {
    if (r.type() != Reply::Type::kArray) return false;
    std::vector<Pairs> all;
    for (const Reply& e : r.elements()) {
      std::optional<Pairs> p = ParseFields(e);
      if (!p) return false;
      all.push_back(std::move(*p));
    }
    if (json) {
      JsonWriter w;
      w.BeginObject();
      w.Key("schedules");
      w.BeginArray();
      for (const Reply& e : r.elements()) WritePairsJson(w, e, ScheduleKind);
      w.EndArray();
      w.EndObject();
      Out(w.str() + "\n");
      return true;
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (i > 0) Out("\n");
      PrintFields(all[i]);
    }
    return true;
  }
  std::optional<Pairs> p = ParseFields(r);
  if (!p) return false;
  if (json) {
    JsonWriter w;
    WritePairsJson(w, r, shows == Shows::kBackfill ? BackfillKind : ScheduleKind);
    Out(w.str() + "\n");
  } else {
    PrintFields(*p);
  }
  return true;
}

class ScheduleCommandImpl final : public ScheduleCommand {
 public:
  ScheduleCommandImpl(CLI::App* app, const char* footer) {
    top_ = app->add_subcommand("schedule",
                               "periodic jobs: schedules that add a job at each "
                               "fire time of a cron expression");
    top_->footer(footer);
    top_->fallthrough();
    top_->require_subcommand(1);
    for (const Subcommand& def : kSubcommands) {
      CLI::App* sub = top_->add_subcommand(def.name, def.help);
      sub->footer(footer);
      sub->fallthrough();
      def.add(sub, &args_);
      subs_.emplace_back(&def, sub);
    }
  }

  bool Parsed() const override { return top_->parsed(); }

  int Run(const QueueOptions& options, bool json) override {
    for (const auto& [def, sub] : subs_) {
      if (sub->parsed()) return RunOne(*def, *sub, options, json);
    }
    return kExitUsage;  // CLI11 requires a subcommand: not reached
  }

 private:
  int RunOne(const Subcommand& def, const CLI::App& sub, const QueueOptions& options, bool json) {
    signal(SIGPIPE, SIG_IGN);  // a server gone mid-write is an error, not a kill
    const std::string command = std::string("schedule ") + def.name;
    Result<redis::Argv> cmd = def.command(sub, args_);
    if (!cmd.ok()) {
      PrintError(cmd.status().message(), command);
      return kExitUsage;
    }
    Result<std::unique_ptr<client::ServerSet>> servers = client::ServerSet::Create(options);
    if (!servers.ok()) return ReportFailure(servers.status(), options.servers, command);
    std::optional<Reply> reply;
    Status st =
        (*servers)->Run({&*cmd, 1}, client::Retry::kAlways, [&](std::vector<Reply>& replies, bool) {
          reply = std::move(replies[0]);
          return client::StatusOf(*reply);
        });
    if (st.code() == Code::kNotFound && def.missing_is_empty) {
      if (json) {
        Out("null\n");
      } else {
        PrintError(codec::EscapeForTerminal("no schedule '" + args_.name + "'"), command);
      }
      return kExitEmpty;
    }
    if (!st.ok()) return ReportFailure(st, options.servers, command);
    if (!Print(def.shows, *reply, json)) {
      return ReportFailure(client::Malformed("SCHEDULE", "field/value pairs", *reply),
                           options.servers, command);
    }
    return kExitOk;
  }

  CLI::App* top_ = nullptr;
  Args args_;  // bound to every subcommand's options
  std::vector<std::pair<const Subcommand*, CLI::App*>> subs_;
};

}  // namespace

std::unique_ptr<ScheduleCommand> AddScheduleCommand(CLI::App* app, const char* footer) {
  return std::make_unique<ScheduleCommandImpl>(app, footer);
}

}  // namespace delayq::cli
