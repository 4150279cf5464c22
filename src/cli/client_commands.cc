// The client subcommands as one table (kCommands): each row names a
// subcommand, adds its arguments, builds the RESP request from them, and
// renders a non-error reply. Run() does the rest the same way for every row:
// parse --server, connect, AUTH when a token is given, send, and turn
// transport failures and error replies into messages and exit codes.
//
// All subcommands bind their arguments to one Invocation: only one
// subcommand runs per process, so sharing the fields is harmless and keeps
// the table flat.
#include "cli/client_commands.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/option_checks.h"
#include "cli/server_address.h"
#include "codec/json_writer.h"
#include "codec/utf8.h"
#include "delayq/job.h"
#include "delayq/queue.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "wire/encode.h"
#include "wire/fields.h"

namespace delayq::cli {
namespace {

using codec::EscapeForTerminal;
using codec::JsonWriter;
using redis::Reply;

// Exit codes; src/cli/README.md and kExitCodesHelp say the same.
constexpr int kExitOk = 0;
constexpr int kExitServerError = 1;  // the server answered an error reply
constexpr int kExitUsage = 2;        // bad arguments found by delayq itself
constexpr int kExitEmpty = 3;        // nothing reserved / no such job to get or peek
constexpr int kExitUnavailable = 4;  // could not talk to the server

constexpr char kExitCodesHelp[] =
    "Exit codes of the client commands:\n"
    "  0  success\n"
    "  1  the server answered an error, printed as 'delayq: CODE: message'\n"
    "     (CODE: NOTFOUND, EXISTS, STALE, NOTRESERVED, INVALID, TOOLARGE, NOAUTH, ...)\n"
    "  2  usage error: bad arguments or --server address\n"
    "  3  nothing there: reserve got no job; get or peek found none\n"
    "  4  could not talk to the server: cannot connect, no reply in time, connection lost\n"
    "Server: --server host:port, else $DELAYQ_SERVER, else 127.0.0.1:7701;\n"
    "token: --auth-token, else $DELAYQ_AUTH_TOKEN.";

constexpr int kConnectTimeoutMs = 5000;
// How long a reply may take beyond what the command itself waits (reserve).
constexpr int kReplyTimeoutMs = 30000;
constexpr int64_t kMaxWaitMs = 86'400'000;  // the server's own RESERVE limit
// Numbers are checked here against the server's own limits (resp_server.cc),
// so a negative or absurd one is a usage error naming the option rather than
// a round trip; a size wrapped into range can never reach the server.
constexpr int64_t kMaxU32 = 4'294'967'295;
const CLI::Range kDelayRange(int64_t{0}, kMaxDelayMs);

// What the command line said. Which subcommand uses which field is in its
// Add*Options function.
struct Invocation {
  // Every subcommand.
  std::string server = "127.0.0.1:7701";
  std::string auth_token;  // empty: no AUTH
  bool json = false;

  std::string topic;
  std::vector<std::string> topics;  // reserve
  std::string id;                   // the job; for add, --id ("" = generated)
  std::string body;                 // add; "-" = read stdin
  int64_t delay_ms = 0;             // add, release
  int64_t run_at_ms = 0;            // add, when run_at_opt->count()
  int64_t ttr_ms = kDefaultTtrMs;
  int64_t priority = kDefaultPriority;
  int64_t max_attempts = 0;
  bool replace = false;
  int64_t wait_ms = 0;  // reserve
  int64_t count = 1;    // reserve; kicktopic's n
  std::string receipt;  // "" = none
  std::string error;    // release, when error_opt->count()
  std::string state = "ready";
  int64_t pause_ms = 0;

  // Options whose presence matters, not just their value.
  CLI::Option* run_at_opt = nullptr;
  CLI::Option* priority_opt = nullptr;
  CLI::Option* max_attempts_opt = nullptr;
  CLI::Option* error_opt = nullptr;
};

using Request = std::vector<std::string>;

struct CommandDef {
  const char* name;
  const char* help;
  void (*add_options)(CLI::App* sub, Invocation* inv);
  // The RESP command; InvalidArgument for a usage error.
  Result<Request> (*request)(const Invocation& inv);
  // Prints a reply that is not an error reply; returns the exit code.
  int (*render)(const Invocation& inv, const Reply& reply);
};

// --- output ------------------------------------------------------------------

void Out(std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); }

void Err(std::string_view s) {
  std::string line = "delayq: ";
  line += s;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void OutJson(const JsonWriter& w) {
  Out(w.str());
  Out("\n");
}

int Unexpected(std::string_view what) {
  Err("unexpected reply from the server to " + std::string(what));
  return kExitUnavailable;
}

// "-NOTFOUND no job 'x'" -> "delayq: NOTFOUND: no job 'x'".
int ServerError(const std::string& line) {
  size_t space = line.find(' ');
  std::string code = line.substr(0, space);
  bool is_code = !code.empty() && std::all_of(code.begin(), code.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || c == '_';
  });
  if (!is_code) code = "ERR";
  std::string message = !is_code ? line : space == std::string::npos ? "" : line.substr(space + 1);
  Err(code + ": " + EscapeForTerminal(message));
  return kExitServerError;
}

// key: value lines, the values aligned.
void PrintFields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [k, v] : fields) width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : fields) {
    out += k;
    out += ':';
    if (!v.empty()) out.append(width - k.size() + 1, ' ');
    out += EscapeForTerminal(v);
    out += '\n';
  }
  Out(out);
}

// --- jobs and field lists in replies --------------------------------------------

// One job as RESERVE and PEEK send it: an array of the values of every row
// of wire::kDeliveryFields, in order (id, topic, body, receipt, attempts,
// ttr_ms, priority, run_at_ms, reserved_until_ms).
struct JobField {
  std::string_view name;
  wire::Kind kind;
  std::string text;  // kText, kBytes
  int64_t number = 0;
};
using Job = std::vector<JobField>;

std::optional<Job> ParseJob(const Reply& r) {
  // A newer server may append fields: those past the table are left out.
  constexpr size_t kFields = std::size(wire::kDeliveryFields);
  if (r.type() != Reply::Type::kArray || r.elements().size() < kFields) return std::nullopt;
  Job job;
  size_t i = 0;
  for (const auto& f : wire::kDeliveryFields) {
    const Reply& e = r.elements()[i++];
    wire::Kind kind = f.get(Delivery{}).kind;
    bool text = kind == wire::Kind::kText || kind == wire::Kind::kBytes;
    if (e.type() != (text ? Reply::Type::kString : Reply::Type::kInteger)) return std::nullopt;
    job.push_back(text ? JobField{f.name, kind, e.str()} : JobField{f.name, kind, {}, e.integer()});
  }
  return job;
}

// For people: the body, which may be long, last.
void PrintJobHuman(const Job& j) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (bool body : {false, true}) {
    for (const JobField& f : j) {
      if ((f.kind == wire::Kind::kBytes) != body) continue;
      bool text = f.kind == wire::Kind::kText || f.kind == wire::Kind::kBytes;
      fields.emplace_back(f.name, text ? f.text : std::to_string(f.number));
    }
  }
  PrintFields(fields);
}

void WriteJobJson(JsonWriter* w, const Job& j) {
  w->BeginObject();
  for (const JobField& f : j) {
    if (f.kind == wire::Kind::kText || f.kind == wire::Kind::kBytes) {
      w->TextField(f.name, f.text);
    } else {
      w->Key(f.name);
      w->Int(f.number);
    }
  }
  w->EndObject();
}

// GET and STATS answer a flat array of field/value pairs.
std::optional<std::vector<std::pair<std::string, std::string>>> ParseFields(const Reply& r) {
  if (r.type() != Reply::Type::kArray || r.elements().size() % 2 != 0) return std::nullopt;
  std::vector<std::pair<std::string, std::string>> fields;
  for (size_t i = 0; i < r.elements().size(); i += 2) {
    const Reply& k = r.elements()[i];
    const Reply& v = r.elements()[i + 1];
    if (k.type() != Reply::Type::kString) return std::nullopt;
    if (v.type() == Reply::Type::kString) {
      fields.emplace_back(k.str(), v.str());
    } else if (v.type() == Reply::Type::kInteger) {
      fields.emplace_back(k.str(), std::to_string(v.integer()));
    } else {
      return std::nullopt;
    }
  }
  return fields;
}

std::optional<int64_t> AsInteger(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  size_t start = s[0] == '-' ? 1 : 0;
  if (start == s.size()) return std::nullopt;
  if (s.size() - start > 1 && s[start] == '0') return std::nullopt;  // keep "007" a string
  for (size_t i = start; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
  }
  return std::stoll(s);
}

void PrintFieldsJson(const std::vector<std::pair<std::string, std::string>>& fields) {
  JsonWriter w;
  w.BeginObject();
  for (const auto& [k, v] : fields) {
    std::optional<int64_t> n = wire::IsTextKey(k) ? std::nullopt : AsInteger(v);
    if (n) {
      w.Key(k);
      w.Int(*n);
    } else {
      w.TextField(k, v);
    }
  }
  w.EndObject();
  OutJson(w);
}

// --- arguments -----------------------------------------------------------------------

void AddCommonOptions(CLI::App* sub, Invocation* inv) {
  sub->add_option("--server", inv->server, "server address, host:port")
      ->envname("DELAYQ_SERVER")
      ->capture_default_str();
  sub->add_option("--auth-token", inv->auth_token,
                  "send AUTH with this token first (an empty DELAYQ_AUTH_TOKEN counts as unset)")
      ->envname("DELAYQ_AUTH_TOKEN")
      ->check(NotEmpty("leave --auth-token out to send no AUTH"));
  sub->add_flag("--json", inv->json, "print one line of JSON instead of text");
}

void AddIdArg(CLI::App* sub, Invocation* inv) {
  sub->add_option("id", inv->id, "job id")->required();
}

void AddReceiptOption(CLI::App* sub, Invocation* inv) {
  sub->add_option("--receipt", inv->receipt,
                  "the receipt of the reservation (fails with STALE if it is not current)");
}

void AddTopicArg(CLI::App* sub, Invocation* inv) {
  sub->add_option("topic", inv->topic, "topic")->required();
}

void AddOptionsAdd(CLI::App* sub, Invocation* inv) {
  AddTopicArg(sub, inv);
  sub->add_option("body", inv->body, "job body; '-' reads it from stdin; default empty");
  sub->add_option("--id", inv->id, "job id (default: generated, time-ordered)");
  CLI::Option* delay = sub->add_option("--delay-ms", inv->delay_ms, "due in this many ms")
                           ->capture_default_str()
                           ->check(kDelayRange);
  inv->run_at_opt = sub->add_option("--run-at-ms", inv->run_at_ms, "due at this Unix time, ms")
                        ->excludes(delay)
                        ->check(CLI::Range(int64_t{0}, kMaxRunAtMs));
  sub->add_option("--ttr-ms", inv->ttr_ms, "time to run once reserved, ms")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, kMaxU32));
  inv->priority_opt =
      sub->add_option("--priority", inv->priority, "0..4294967295, lower first (default 1024)")
          ->check(CLI::Range(int64_t{0}, kMaxU32));
  inv->max_attempts_opt =
      sub->add_option("--max-attempts", inv->max_attempts,
                      "deliveries before the job is buried (default 0: no limit)")
          ->check(CLI::Range(int64_t{0}, kMaxU32));
  sub->add_flag("--replace", inv->replace, "update and reschedule the job if the id is live");
}

void AddOptionsReserve(CLI::App* sub, Invocation* inv) {
  sub->add_option("topics", inv->topics, "topics to reserve from")->required();
  sub->add_option("--wait-ms", inv->wait_ms, "wait this long for a job to fall due")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, kMaxWaitMs));
  sub->add_option("--count", inv->count, "reserve up to this many jobs")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{kMaxReserveCount}));
}

void AddOptionsIdReceipt(CLI::App* sub, Invocation* inv) {
  AddIdArg(sub, inv);
  AddReceiptOption(sub, inv);
}

void AddOptionsRelease(CLI::App* sub, Invocation* inv) {
  AddIdArg(sub, inv);
  sub->add_option("--delay-ms", inv->delay_ms, "due again in this many ms")
      ->capture_default_str()
      ->check(kDelayRange);
  AddReceiptOption(sub, inv);
  inv->error_opt =
      sub->add_option("--error", inv->error, "why the work failed (kept as last_error)");
}

void AddOptionsKickTopic(CLI::App* sub, Invocation* inv) {
  AddTopicArg(sub, inv);
  sub->add_option("n", inv->count, "kick up to this many buried jobs")
      ->required()
      ->check(CLI::Range(int64_t{0}, std::numeric_limits<int64_t>::max()));
}

void AddOptionsPeek(CLI::App* sub, Invocation* inv) {
  AddTopicArg(sub, inv);
  sub->add_option("--state", inv->state, "which job: the next ready, delayed or buried one")
      ->check(CLI::IsMember({"ready", "delayed", "buried"}, CLI::ignore_case))
      ->capture_default_str();
}

void AddOptionsStats(CLI::App* sub, Invocation* inv) {
  sub->add_option("topic", inv->topic, "one topic's counts instead of the server's");
}

void AddOptionsPause(CLI::App* sub, Invocation* inv) {
  AddTopicArg(sub, inv);
  sub->add_option("ms", inv->pause_ms, "hand out nothing for this long (0: until resume)")
      ->required()
      ->check(kDelayRange);
}

void AddOptionsNone(CLI::App*, Invocation*) {}

// --- requests ----------------------------------------------------------------------

Result<std::string> ReadStdin() {
  std::string body;
  char buf[64 * 1024];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) body.append(buf, n);
  if (std::ferror(stdin)) return InvalidArgument("cannot read the body from stdin");
  return body;
}

Result<Request> RequestAdd(const Invocation& inv) {
  std::string body = inv.body;
  if (body == "-") {
    Result<std::string> in = ReadStdin();
    if (!in.ok()) return in.status();
    body = std::move(*in);
  }
  Request r = {"ADD",
               inv.topic,
               inv.id.empty() ? "*" : inv.id,
               std::to_string(inv.run_at_opt->count() ? 0 : inv.delay_ms),
               std::to_string(inv.ttr_ms),
               std::move(body)};
  if (inv.priority_opt->count()) r.insert(r.end(), {"PRIORITY", std::to_string(inv.priority)});
  if (inv.max_attempts_opt->count()) {
    r.insert(r.end(), {"MAXATTEMPTS", std::to_string(inv.max_attempts)});
  }
  if (inv.run_at_opt->count()) r.insert(r.end(), {"AT", std::to_string(inv.run_at_ms)});
  if (inv.replace) r.push_back("REPLACE");
  return r;
}

Result<Request> RequestReserve(const Invocation& inv) {
  Request r = {
      "RESERVE", "TIMEOUT", std::to_string(inv.wait_ms), "COUNT", std::to_string(inv.count),
      "FROM"};
  r.insert(r.end(), inv.topics.begin(), inv.topics.end());
  return r;
}

// FINISH / TOUCH / BURY id [receipt]
Request WithReceipt(const char* command, const Invocation& inv) {
  Request r = {command, inv.id};
  if (!inv.receipt.empty()) r.push_back(inv.receipt);
  return r;
}

Result<Request> RequestFinish(const Invocation& inv) { return WithReceipt("FINISH", inv); }
Result<Request> RequestTouch(const Invocation& inv) { return WithReceipt("TOUCH", inv); }
Result<Request> RequestBury(const Invocation& inv) { return WithReceipt("BURY", inv); }
Result<Request> RequestDelete(const Invocation& inv) { return Request{"DELETE", inv.id}; }
Result<Request> RequestKick(const Invocation& inv) { return Request{"KICK", inv.id}; }
Result<Request> RequestGet(const Invocation& inv) { return Request{"GET", inv.id}; }
Result<Request> RequestTopics(const Invocation&) { return Request{"TOPICS"}; }
Result<Request> RequestResume(const Invocation& inv) { return Request{"RESUME", inv.topic}; }
Result<Request> RequestPing(const Invocation&) { return Request{"PING"}; }

// RELEASE id delay_ms [receipt] [ERROR text]
Result<Request> RequestRelease(const Invocation& inv) {
  Request r = {"RELEASE", inv.id, std::to_string(inv.delay_ms)};
  if (!inv.receipt.empty()) r.push_back(inv.receipt);
  if (inv.error_opt->count()) r.insert(r.end(), {"ERROR", inv.error});
  return r;
}

Result<Request> RequestKickTopic(const Invocation& inv) {
  return Request{"KICKTOPIC", inv.topic, std::to_string(inv.count)};
}

Result<Request> RequestPeek(const Invocation& inv) {
  std::string state = inv.state;
  for (char& c : state) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return Request{"PEEK", inv.topic, state};
}

Result<Request> RequestStats(const Invocation& inv) {
  if (inv.topic.empty()) return Request{"STATS"};
  return Request{"STATS", inv.topic};
}

Result<Request> RequestPause(const Invocation& inv) {
  return Request{"PAUSE", inv.topic, std::to_string(inv.pause_ms)};
}

// --- replies -------------------------------------------------------------------------

int RenderId(const Invocation& inv, const Reply& r) {
  if (r.type() != Reply::Type::kString) return Unexpected("ADD");
  if (inv.json) {
    JsonWriter w;
    w.BeginObject();
    w.TextField("id", r.str());
    w.EndObject();
    OutJson(w);
  } else {
    Out(EscapeForTerminal(r.str()) + "\n");
  }
  return kExitOk;
}

int RenderJobs(const Invocation& inv, const Reply& r) {
  std::vector<Job> jobs;
  if (r.type() == Reply::Type::kArray) {
    for (const Reply& e : r.elements()) {
      std::optional<Job> j = ParseJob(e);
      if (!j) return Unexpected("RESERVE");
      jobs.push_back(std::move(*j));
    }
  } else if (r.type() != Reply::Type::kNil) {
    return Unexpected("RESERVE");
  }
  if (inv.json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("jobs");
    w.BeginArray();
    for (const Job& j : jobs) WriteJobJson(&w, j);
    w.EndArray();
    w.EndObject();
    OutJson(w);
  } else if (jobs.empty()) {
    Err("no job reserved");
  }
  for (size_t i = 0; !inv.json && i < jobs.size(); ++i) {
    if (i > 0) Out("\n");
    PrintJobHuman(jobs[i]);
  }
  return jobs.empty() ? kExitEmpty : kExitOk;
}

int RenderOk(const Invocation& inv, const Reply& r) {
  if (r.type() != Reply::Type::kStatus) return Unexpected("the command");
  if (inv.json) Out("{\"ok\":true}\n");
  return kExitOk;
}

int RenderPong(const Invocation& inv, const Reply& r) {
  if (r.type() != Reply::Type::kStatus && r.type() != Reply::Type::kString) {
    return Unexpected("PING");
  }
  Out(inv.json ? "{\"ok\":true}\n" : "PONG\n");
  return kExitOk;
}

int RenderKicked(const Invocation& inv, const Reply& r) {
  if (r.type() != Reply::Type::kInteger) return Unexpected("KICKTOPIC");
  if (inv.json) {
    Out("{\"kicked\":" + std::to_string(r.integer()) + "}\n");
  } else {
    Out(std::to_string(r.integer()) + "\n");
  }
  return kExitOk;
}

// `null` on stdout in JSON mode, so that stdout always holds one document
// when the exit code is 0 or 3.
int NothingThere(const Invocation& inv, const std::string& message) {
  if (inv.json) {
    Out("null\n");
  } else {
    Err(EscapeForTerminal(message));
  }
  return kExitEmpty;
}

int RenderFields(const Invocation& inv, const Reply& r) {
  if (r.type() == Reply::Type::kNil) return NothingThere(inv, "no job '" + inv.id + "'");
  auto fields = ParseFields(r);
  if (!fields) return Unexpected("the command");
  if (inv.json) {
    PrintFieldsJson(*fields);
  } else {
    PrintFields(*fields);
  }
  return kExitOk;
}

int RenderPeek(const Invocation& inv, const Reply& r) {
  if (r.type() == Reply::Type::kNil) {
    std::string state = inv.state;
    for (char& c : state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return NothingThere(inv, "no " + state + " job in topic '" + inv.topic + "'");
  }
  std::optional<Job> j = ParseJob(r);
  if (!j) return Unexpected("PEEK");
  if (inv.json) {
    JsonWriter w;
    WriteJobJson(&w, *j);
    OutJson(w);
  } else {
    PrintJobHuman(*j);
  }
  return kExitOk;
}

int RenderTopics(const Invocation& inv, const Reply& r) {
  if (r.type() != Reply::Type::kArray) return Unexpected("TOPICS");
  for (const Reply& e : r.elements()) {
    if (e.type() != Reply::Type::kString) return Unexpected("TOPICS");
  }
  if (inv.json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("topics");
    w.BeginArray();
    for (const Reply& e : r.elements()) w.String(e.str());
    w.EndArray();
    w.EndObject();
    OutJson(w);
  } else {
    for (const Reply& e : r.elements()) Out(EscapeForTerminal(e.str()) + "\n");
  }
  return kExitOk;
}

// clang-format off
constexpr CommandDef kCommands[] = {
    {"add", "add a job; prints its id", AddOptionsAdd, RequestAdd, RenderId},
    {"reserve", "reserve due jobs (exit 3 if none within --wait-ms)",
     AddOptionsReserve, RequestReserve, RenderJobs},
    {"finish", "acknowledge a reserved job: it is gone", AddOptionsIdReceipt, RequestFinish,
     RenderOk},
    {"delete", "delete a job in any state", [](CLI::App* s, Invocation* i) { AddIdArg(s, i); },
     RequestDelete, RenderOk},
    {"release", "give a reserved job back, due again after --delay-ms", AddOptionsRelease,
     RequestRelease, RenderOk},
    {"touch", "extend a reservation by the job's TTR", AddOptionsIdReceipt, RequestTouch,
     RenderOk},
    {"bury", "set a reserved job aside until kicked", AddOptionsIdReceipt, RequestBury, RenderOk},
    {"kick", "make a buried job ready again", [](CLI::App* s, Invocation* i) { AddIdArg(s, i); },
     RequestKick, RenderOk},
    {"kicktopic", "make up to n buried jobs of a topic ready; prints how many",
     AddOptionsKickTopic, RequestKickTopic, RenderKicked},
    {"get", "show a job (exit 3 if there is none)",
     [](CLI::App* s, Invocation* i) { AddIdArg(s, i); }, RequestGet, RenderFields},
    {"peek", "show the next job of a topic in a state (exit 3 if there is none)", AddOptionsPeek,
     RequestPeek, RenderPeek},
    {"topics", "list the topics", AddOptionsNone, RequestTopics, RenderTopics},
    {"stats", "counts of the server, or of one topic", AddOptionsStats, RequestStats,
     RenderFields},
    {"pause", "hand out no jobs of a topic for ms (0: until resume)", AddOptionsPause,
     RequestPause, RenderOk},
    {"resume", "hand out jobs of a paused topic again",
     [](CLI::App* s, Invocation* i) { AddTopicArg(s, i); }, RequestResume, RenderOk},
    {"ping", "check that the server answers", AddOptionsNone, RequestPing, RenderPong},
};
// clang-format on

// --- running -------------------------------------------------------------------------

int ReplyTimeoutMs(const Invocation& inv) {
  return static_cast<int>(std::clamp<int64_t>(inv.wait_ms, 0, kMaxWaitMs)) + kReplyTimeoutMs;
}

// Why a command got no reply, from how the connection failed.
std::string NoReply(const redis::Connection& conn, int timeout_ms) {
  std::string where = conn.endpoint().ToString();
  switch (conn.last_failure()) {
    case redis::Connection::Failure::kTimeout:
      return "no reply from " + where + " within " + std::to_string(timeout_ms) + " ms";
    case redis::Connection::Failure::kClosed:
      return where + " closed the connection";
    default:
      return "lost the connection to " + where + ": " + conn.last_reason();
  }
}

int Execute(const CommandDef& cmd, const Invocation& inv) {
  signal(SIGPIPE, SIG_IGN);  // a server gone mid-write is an error, not a kill
  Result<redis::Endpoint> address = ParseServerAddress(inv.server);
  if (!address.ok()) {
    Err("--server: " + address.status().message());
    return kExitUsage;
  }
  Result<Request> request = cmd.request(inv);
  if (!request.ok()) {
    Err(request.status().message());
    return kExitUsage;
  }
  redis::ConnectionOptions options;
  options.connect_timeout_ms = kConnectTimeoutMs;
  options.command_timeout_ms = kReplyTimeoutMs;
  options.check_idle_before_write = false;  // one command: a close is reported, not mended
  auto conn = redis::Connection::Create(*address, options);
  if (!conn->EnsureConnected().ok()) {
    Err("cannot connect to " + address->ToString() + ": " + conn->last_reason() +
        " \u2014 is `delayq serve` running?");
    return kExitUnavailable;
  }
  if (!inv.auth_token.empty()) {
    Result<Reply> auth = conn->Exec({"AUTH", inv.auth_token});
    if (!auth.ok()) {
      Err(NoReply(*conn, kReplyTimeoutMs));
      return kExitUnavailable;
    }
    if (auth->type() == Reply::Type::kError) return ServerError(auth->str());
  }
  if (!conn->set_command_timeout_ms(ReplyTimeoutMs(inv)).ok()) {
    Err("cannot set a timeout on the connection to " + address->ToString());
    return kExitUnavailable;
  }
  Result<Reply> reply = conn->Exec(*request);
  if (!reply.ok()) {
    Err(NoReply(*conn, ReplyTimeoutMs(inv)));
    return kExitUnavailable;
  }
  if (reply->type() == Reply::Type::kError) return ServerError(reply->str());
  return cmd.render(inv, *reply);
}

class ClientCommandsImpl final : public ClientCommands {
 public:
  explicit ClientCommandsImpl(CLI::App* app) {
    for (const CommandDef& cmd : kCommands) {
      CLI::App* sub = app->add_subcommand(cmd.name, cmd.help);
      sub->footer(kExitCodesHelp);
      cmd.add_options(sub, &inv_);
      AddCommonOptions(sub, &inv_);
      subs_.emplace_back(&cmd, sub);
    }
    // Composes with a footer main() may have set, rather than replacing it.
    app->footer([] { return std::string(kExitCodesHelp); });
  }

  int Run() override {
    for (const auto& [cmd, sub] : subs_) {
      if (sub->parsed()) return Execute(*cmd, inv_);
    }
    return kExitUsage;
  }

  bool Parsed() const override {
    return std::any_of(subs_.begin(), subs_.end(),
                       [](const auto& s) { return s.second->parsed(); });
  }

 private:
  Invocation inv_;  // bound to the options of every subcommand
  std::vector<std::pair<const CommandDef*, CLI::App*>> subs_;
};

}  // namespace

std::unique_ptr<ClientCommands> AddClientCommands(CLI::App* app) {
  return std::make_unique<ClientCommandsImpl>(app);
}

}  // namespace delayq::cli
