// The client subcommands as one table (kCommands): each row names a
// subcommand, adds its arguments, checks or reads what it can before
// anything is sent (prepare), and runs: one call of the Queue that the
// network client (StoreKind::kRemote) opens on the --server list, so a list
// fails over as the library does, and the printing of its result. Execute()
// does the rest the same way for every row: the environment, the
// durations, opening the client, and failures into messages and exit codes
// (cli/failure.h). PING and the server's STATS are not Queue calls: they go
// to the same servers, by the same failover rule, through the client's
// ServerSet.
//
// All subcommands bind their arguments to one Invocation: only one
// subcommand runs per process, so sharing the fields is harmless and keeps
// the table flat. The options every client command shares (--server,
// --auth-token, --json) belong to the top-level app, and each subcommand
// falls through to it, so they work before or after the subcommand.
#include "cli/client_commands.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "cli/failure.h"
#include "cli/option_checks.h"
#include "cli/reply_fields.h"
#include "cli/schedule_command.h"
#include "cli/work_command.h"
#include "client/server_set.h"
#include "client/wire_codec.h"
#include "codec/json_writer.h"
#include "codec/utf8.h"
#include "common/duration.h"
#include "delayq/job.h"
#include "delayq/options.h"
#include "delayq/queue.h"
#include "delayq/subscription.h"
#include "redis/reply.h"
#include "serving/push_ledger.h"
#include "wire/encode.h"
#include "wire/fields.h"

namespace delayq::cli {
namespace {

using codec::EscapeForTerminal;
using codec::JsonWriter;
using redis::Reply;

// Exit codes: cli/failure.h; src/cli/README.md and kExitCodesHelp say the same.
constexpr char kExitCodesHelp[] =
    "Options of every client command, before or after its name:\n"
    "  --server host:port[,host:port...]  the servers, tried in turn when one is down\n"
    "                      (else $DELAYQ_SERVER, else 127.0.0.1:7701)\n"
    "  --auth-token T      send this token first (else $DELAYQ_AUTH_TOKEN)\n"
    "  --json              print one line of JSON instead of text\n"
    "Durations: 1500ms, 5s, 30m, 2h, 1d, 1h30m.\n"
    "Exit codes of the client commands:\n"
    "  0  success\n"
    "  1  the server answered an error, printed as 'delayq: CODE: message'\n"
    "     (CODE: NOTFOUND, EXISTS, STALE, NOTRESERVED, INVALID, TOOLARGE, NOAUTH, ...)\n"
    "  2  usage error: bad arguments or --server address\n"
    "  3  nothing there: reserve got no job; get or peek found none; subscriptions\n"
    "     NAME found no instance; unsubscribe removed nothing; schedule get or\n"
    "     delete found no such schedule\n"
    "  4  no server could serve it: cannot connect, no reply in time, connection lost,\n"
    "     the server answered UNAVAILABLE, or ended a reserve's wait as it shut down";

constexpr int kConnectTimeoutMs = 5000;
// How long a reply may take beyond what the command itself waits (reserve).
constexpr int kReplyTimeoutMs = 30000;
// `delayq work`'s bound on each reply: a hung server is left sooner, since
// its long-polls are cancelled and asked again anyway.
constexpr int kWorkRequestTimeoutMs = 10000;
constexpr int64_t kMaxWaitMs = 86'400'000;  // the server's own RESERVE limit
// Numbers are checked here against the server's own limits (resp_server.cc),
// so a negative or absurd one is a usage error naming the option rather than
// a round trip; a size wrapped into range can never reach the server.
constexpr int64_t kMaxU32 = 4'294'967'295;
const CLI::Range kDelayRange(int64_t{0}, kMaxDelayMs);

// What the command line said. Which subcommand uses which field is in its
// Add*Options function.
struct Invocation {
  // Every subcommand: options of the top-level app. Their environment
  // variables are read by Run(), not CLI11, so that count() says whether
  // they were on the command line (which `delayq serve` refuses).
  std::string server = "127.0.0.1:7701";
  std::string auth_token;  // empty: no AUTH
  bool json = false;
  // TLS to the servers (their --tls-cert-file): the CA to check them with
  // (empty: the system's), and this client's certificate for mutual TLS.
  bool tls = false;
  std::string cacert, cert, key;
  CLI::Option* server_opt = nullptr;
  CLI::Option* auth_token_opt = nullptr;
  CLI::Option* json_opt = nullptr;
  CLI::Option* tls_opt = nullptr;
  CLI::Option* cacert_opt = nullptr;
  CLI::Option* cert_opt = nullptr;
  CLI::Option* key_opt = nullptr;

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
  bool force = false;   // finish, release, touch, bury: by id alone
  std::string error;    // release, when error_opt->count()
  std::string state = "ready";
  int64_t pause_ms = 0;
  bool all = false;  // stats: every figure

  // subscribe, unsubscribe, subscriptions: the subscription's name and url
  // (its topics in `topics`).
  std::string name;
  std::string url;
  int64_t concurrency = 0;  // when concurrency_opt->count()
  std::vector<std::string> secrets;
  double rate = 0;  // when rate_opt->count()
  int64_t push_timeout_ms = 0, ttl_ms = 0, min_backoff_ms = 0, max_backoff_ms = 0;
  int64_t max_doublings = 0;

  // Human durations ("30m"), read into the *_ms fields above by
  // ReadDurations; empty when not given.
  std::string delay;                                        // add, release
  std::string ttr;                                          // add
  std::string wait;                                         // reserve
  std::string push_timeout, ttl, min_backoff, max_backoff;  // subscribe

  // Options whose presence matters, not just their value.
  CLI::Option* run_at_opt = nullptr;
  CLI::Option* priority_opt = nullptr;
  CLI::Option* max_attempts_opt = nullptr;
  CLI::Option* error_opt = nullptr;
  CLI::Option* concurrency_opt = nullptr;
  CLI::Option* rate_opt = nullptr;
  CLI::Option* max_doublings_opt = nullptr;
};

struct Session;

struct CommandDef {
  const char* name;
  const char* help;
  void (*add_options)(CLI::App* sub, Invocation* inv);
  // Checks and reads what it can before anything is sent (a usage error,
  // exit 2); may be null.
  Status (*prepare)(Invocation* inv);
  // Runs the command and prints its outcome; returns the exit code.
  int (*run)(const Session& session, const Invocation& inv);
};

// --- output ------------------------------------------------------------------

// "delayq <command>: s", for what a command finds wrong itself.
void ErrOf(std::string_view command, std::string_view s) {
  std::string line = "delayq ";
  line += command;
  line += ": ";
  line += s;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void OutJson(const JsonWriter& w) {
  Out(w.str());
  Out("\n");
}

// --- jobs and field lists --------------------------------------------------------

// A value of a wire table's row as text: numbers as their digits, a flag as
// 1 or 0 (as RESP sends them, which is what the command line printed).
std::string TextOf(const wire::Value& v) {
  switch (v.kind) {
    case wire::Kind::kText:
    case wire::Kind::kBytes:
      return std::string(v.text);
    case wire::Kind::kUint:
      return std::to_string(v.u);
    case wire::Kind::kInt:
    case wire::Kind::kBool:
      return std::to_string(v.i);
    case wire::Kind::kDouble:
      return wire::FormatDouble(v.d);
    case wire::Kind::kTextList:
      return wire::JoinList(*v.list);
  }
  return {};
}

// A struct as the field/value pairs RESP's GET and STATS send: the rows of
// its wire table, under their RESP names.
template <typename T, size_t N>
Pairs PairsOf(const T& v, const wire::Field<T> (&fields)[N]) {
  Pairs out;
  for (const wire::Field<T>& f : fields) out.emplace_back(f.resp_name(), TextOf(f.get(v)));
  return out;
}

// A delivery (reserve; peek shows its job as one) for people: every row of
// wire::kDeliveryFields, the body, which may be long, last.
void PrintJobHuman(const Delivery& d) {
  Pairs fields;
  for (bool body : {false, true}) {
    for (const auto& f : wire::kDeliveryFields) {
      const wire::Value v = f.get(d);
      if ((v.kind == wire::Kind::kBytes) != body) continue;
      fields.emplace_back(f.name, TextOf(v));
    }
  }
  PrintFields(fields);
}

// As HTTP sends it: every row, numbers as numbers, a body that is not UTF-8
// as body_base64.
void WriteJobJson(JsonWriter* w, const Delivery& d) {
  wire::WriteJson(*w, d, wire::kDeliveryFields);
}

void PrintFieldsJson(const Pairs& fields) {
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

// The options every client command shares, on the top-level app.
void AddGlobalOptions(CLI::App* app, Invocation* inv) {
  inv->server_opt =
      app->add_option("--server", inv->server,
                      "client commands: the servers, host:port[,host:port...], tried in turn "
                      "when one is down (else $DELAYQ_SERVER)")
          ->capture_default_str();
  inv->auth_token_opt =
      app->add_option("--auth-token", inv->auth_token,
                      "client commands: send this token first (else $DELAYQ_AUTH_TOKEN; an "
                      "empty one counts as unset)")
          ->check(NotEmpty("leave --auth-token out to send no AUTH"));
  inv->json_opt =
      app->add_flag("--json", inv->json, "client commands: print one line of JSON instead of text");
  inv->tls_opt = app->add_flag("--tls", inv->tls,
                               "client commands: speak TLS to the servers (else $DELAYQ_TLS=1)");
  inv->cacert_opt = app->add_option("--cacert", inv->cacert,
                                    "client commands, with --tls: the CA (PEM) to check the "
                                    "servers' certificates with (else $DELAYQ_CACERT, else the "
                                    "system's trust store)");
  inv->cert_opt = app->add_option("--cert", inv->cert,
                                  "client commands, with --tls: this client's certificate (PEM), "
                                  "for a server that asks for one (else $DELAYQ_CERT)");
  inv->key_opt = app->add_option("--key", inv->key,
                                 "client commands, with --tls: the key of --cert (else "
                                 "$DELAYQ_KEY)");
}

// What the environment says where the command line said nothing. As with
// CLI11's own envname, an empty variable counts as unset.
void ReadEnvironment(Invocation* inv) {
  const char* server = std::getenv("DELAYQ_SERVER");
  if (inv->server_opt->count() == 0 && server != nullptr && *server != '\0') inv->server = server;
  const char* token = std::getenv("DELAYQ_AUTH_TOKEN");
  if (inv->auth_token_opt->count() == 0 && token != nullptr && *token != '\0') {
    inv->auth_token = token;
  }
  const char* tls = std::getenv("DELAYQ_TLS");
  if (inv->tls_opt->count() == 0 && tls != nullptr && *tls != '\0') {
    const std::string_view v(tls);
    inv->tls = v != "0" && v != "no" && v != "false";
  }
  for (auto [opt, field, name] : {std::tuple{inv->cacert_opt, &inv->cacert, "DELAYQ_CACERT"},
                                  std::tuple{inv->cert_opt, &inv->cert, "DELAYQ_CERT"},
                                  std::tuple{inv->key_opt, &inv->key, "DELAYQ_KEY"}}) {
    const char* value = std::getenv(name);
    if (opt->count() == 0 && value != nullptr && *value != '\0') *field = value;
  }
}

void AddIdArg(CLI::App* sub, Invocation* inv) {
  sub->add_option("id", inv->id, "job id")->required();
}

// --receipt R or --force: which reservation the command acts on.
void AddReceiptOption(CLI::App* sub, Invocation* inv) {
  CLI::Option* receipt = sub->add_option(
      "--receipt", inv->receipt,
      "the receipt 'delayq reserve' printed (required; STALE if the job was reserved again "
      "since)");
  sub->add_flag("--force", inv->force,
                "act by id alone, on whichever reservation is current, without a receipt")
      ->excludes(receipt);
}

// A duration option ("--delay 30m") beside its milliseconds form, which it
// excludes.
CLI::Option* AddDurationOption(CLI::App* sub, const char* name, std::string* value,
                               const char* help, CLI::Option* ms_form) {
  return sub->add_option(name, *value, help)->excludes(ms_form);
}

void AddTopicArg(CLI::App* sub, Invocation* inv) {
  sub->add_option("topic", inv->topic, "topic")->required();
}

void AddOptionsAdd(CLI::App* sub, Invocation* inv) {
  AddTopicArg(sub, inv);
  sub->add_option("body", inv->body, "job body; '-' reads it from stdin; default empty");
  sub->add_option("--id", inv->id, "job id (default: generated, time-ordered)");
  CLI::Option* delay_ms = sub->add_option("--delay-ms", inv->delay_ms, "due in this many ms")
                              ->capture_default_str()
                              ->check(kDelayRange);
  CLI::Option* delay = AddDurationOption(sub, "--delay", &inv->delay,
                                         "due after this long: 30s, 5m, 1h30m", delay_ms);
  inv->run_at_opt = sub->add_option("--run-at-ms", inv->run_at_ms, "due at this Unix time, ms")
                        ->excludes(delay_ms)
                        ->excludes(delay)
                        ->check(CLI::Range(int64_t{0}, kMaxRunAtMs));
  CLI::Option* ttr_ms = sub->add_option("--ttr-ms", inv->ttr_ms, "time to run once reserved, ms")
                            ->capture_default_str()
                            ->check(CLI::Range(int64_t{1}, kMaxU32));
  AddDurationOption(sub, "--ttr", &inv->ttr,
                    "time to run once reserved, before the job is handed out again: 60s, 10m",
                    ttr_ms);
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
  CLI::Option* wait_ms =
      sub->add_option("--wait-ms", inv->wait_ms, "wait this many ms for a job to fall due")
          ->capture_default_str()
          ->check(CLI::Range(int64_t{0}, kMaxWaitMs));
  AddDurationOption(sub, "--wait", &inv->wait, "wait this long for a job to fall due: 5s, 1m",
                    wait_ms);
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
  CLI::Option* delay_ms = sub->add_option("--delay-ms", inv->delay_ms, "due again in this many ms")
                              ->capture_default_str()
                              ->check(kDelayRange);
  AddDurationOption(sub, "--delay", &inv->delay, "due again after this long: 30s, 5m", delay_ms);
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
  sub->add_flag("--all", inv->all,
                "every figure the server sends, one per line (--json: all of them too)");
}

void AddOptionsPause(CLI::App* sub, Invocation* inv) {
  AddTopicArg(sub, inv);
  sub->add_option("ms", inv->pause_ms, "hand out nothing for this long (0: until resume)")
      ->required()
      ->check(kDelayRange);
}

void AddOptionsNone(CLI::App*, Invocation*) {}

void AddOptionsSubscribe(CLI::App* sub, Invocation* inv) {
  sub->add_option("name", inv->name, "the application: its instances share the deliveries")
      ->required();
  sub->add_option("url", inv->url, "this instance's endpoint: http://host:port/path or https://")
      ->required();
  sub->add_option("--topic", inv->topics, "a topic whose due jobs are POSTed there (repeatable)")
      ->required();
  inv->concurrency_opt =
      sub->add_option("--concurrency", inv->concurrency,
                      "requests in flight to this url at most, across every server (default 10)")
          ->check(CLI::Range(int64_t{1}, int64_t{kMaxSubscriptionConcurrency}));
  sub->add_option("--timeout", inv->push_timeout,
                  "each request's timeout, after which the job is tried again: 30s (default)");
  sub->add_option("--ttl", inv->ttl,
                  "lapse unless subscribed again within this long: 30s (default: stay until "
                  "unsubscribed)");
  sub->add_option("--secret", inv->secrets,
                  "sign every request with this Standard Webhooks key, whsec_<base64>; twice "
                  "during a rotation");
  inv->rate_opt = sub->add_option("--rate", inv->rate,
                                  "requests started per second at most, across every server "
                                  "(default 0: no limit)");
  sub->add_option("--min-backoff", inv->min_backoff,
                  "the first retry's wait after a failed request: 1s (default)");
  sub->add_option("--max-backoff", inv->max_backoff,
                  "the longest wait between retries: 5m (default)");
  inv->max_doublings_opt =
      sub->add_option("--max-doublings", inv->max_doublings,
                      "retries whose wait doubles before it grows linearly (default 16)")
          ->check(CLI::Range(int64_t{0}, int64_t{62}));
}

void AddOptionsUnsubscribe(CLI::App* sub, Invocation* inv) {
  sub->add_option("name", inv->name, "the subscription")->required();
  sub->add_option("url", inv->url, "only the instance at this url (default: every instance)");
}

void AddOptionsSubscriptions(CLI::App* sub, Invocation* inv) {
  sub->add_option("name", inv->name, "only this subscription's instances");
}

void AddOptionsPing(CLI::App* sub, Invocation* inv) {
  sub->add_option("--wait", inv->wait,
                  "until a server answers, ask again every 50 ms for up to this long: 10s");
}

// --- requests ----------------------------------------------------------------------

// The duration options: each read into its milliseconds field when given,
// within the server's limits, as the *-ms forms are.
struct DurationOption {
  const char* name;
  std::string Invocation::*text;
  int64_t Invocation::*ms;
  int64_t least;
  int64_t most;
};
constexpr DurationOption kDurationOptions[] = {
    {"--delay", &Invocation::delay, &Invocation::delay_ms, 0, kMaxDelayMs},  // add, release
    {"--ttr", &Invocation::ttr, &Invocation::ttr_ms, 1, kMaxU32},            // add
    {"--wait", &Invocation::wait, &Invocation::wait_ms, 0, kMaxWaitMs},      // reserve, ping
    // subscribe
    {"--timeout", &Invocation::push_timeout, &Invocation::push_timeout_ms, 1, kMaxPushTimeoutMs},
    {"--ttl", &Invocation::ttl, &Invocation::ttl_ms, 1000, kMaxSubscriptionTtlMs},
    {"--min-backoff", &Invocation::min_backoff, &Invocation::min_backoff_ms, 0, kMaxPushBackoffMs},
    {"--max-backoff", &Invocation::max_backoff, &Invocation::max_backoff_ms, 0, kMaxPushBackoffMs},
};

// The human durations of the subcommand `sub` into milliseconds, before
// anything is sent: the wire always carries integers. A bad one is the one
// parser's message ("--delay: unknown unit 'x' in '5x' (...)").
Status ReadDurations(const CLI::App& sub, Invocation* inv) {
  for (const DurationOption& d : kDurationOptions) {
    const CLI::Option* opt = sub.get_option_no_throw(d.name);
    if (opt == nullptr || opt->count() == 0) continue;
    Result<int64_t> ms = ParseDurationMsWithin(inv->*d.text, d.name, d.least, d.most);
    if (!ms.ok()) return ms.status();
    inv->*d.ms = *ms;
  }
  return Status::Ok();
}

Result<std::string> ReadStdin() {
  std::string body;
  char buf[64 * 1024];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, stdin)) > 0) body.append(buf, n);
  if (std::ferror(stdin)) return InvalidArgument("cannot read the body from stdin");
  return body;
}

// --- preparing -----------------------------------------------------------------------
// What is checked or read before any server is asked: a usage error here
// means nothing was sent.

Status PrepareAdd(Invocation* inv) {
  if (inv->body != "-") return Status::Ok();
  Result<std::string> in = ReadStdin();
  if (!in.ok()) return in.status();
  inv->body = std::move(*in);
  return Status::Ok();
}

// A rate's range in words (CLI11's Range would print 1000000.000000).
Status PrepareSubscribe(Invocation* inv) {
  if (inv->rate_opt->count() == 0 || (inv->rate >= 0 && inv->rate <= 1e6)) return Status::Ok();
  return InvalidArgument("--rate takes 0 to 1000000 requests per second (0: no limit), not " +
                         wire::FormatDouble(inv->rate));
}

// FINISH, RELEASE, TOUCH, BURY act on one reservation: its receipt, or
// --force to act by id alone (an empty receipt to the Queue).
Status PrepareReceipt(Invocation* inv) {
  if (inv->force || !inv->receipt.empty()) return Status::Ok();
  return InvalidArgument(
      "--receipt is required (the receipt from 'delayq reserve'); --force acts by id alone");
}

// --- running ----------------------------------------------------------------------------

// What a command runs against: the queue of the --server list (job commands,
// with failover), its servers for what the Queue interface does not carry
// (PING; STATS with the server's own figures), and the list as given, for
// messages.
struct Session {
  Queue& queue;
  client::ServerSet& servers;
  std::string_view server_list;
  std::string_view command;  // "finish": every message names it
  const CLI::App* sub;       // the subcommand, to ask which options were given

  int Fail(const Status& s) const { return ReportFailure(s, server_list, command); }
  // One command sent by the failover rule (a read: tried on the next server
  // if its reply is lost); an error reply is its Status.
  Result<Reply> Raw(const redis::Argv& cmd) const {
    std::optional<Reply> reply;
    Status st =
        servers.Run({&cmd, 1}, client::Retry::kAlways, [&](std::vector<Reply>& replies, bool) {
          reply = std::move(replies[0]);
          return client::StatusOf(*reply);
        });
    if (!st.ok()) return st;
    return std::move(*reply);
  }
};

int Acted(const Invocation& inv, std::string_view done) {
  if (inv.json) {
    Out(inv.force ? "{\"ok\":true,\"forced\":true}\n" : "{\"ok\":true}\n");
  } else if (inv.force) {
    // Silent as other changes, unless forced, which says that no receipt
    // was checked ("finished order-44 (forced: no receipt checked)").
    Out(std::string(done) + " " + EscapeForTerminal(inv.id) + " (forced: no receipt checked)\n");
  }
  return kExitOk;
}

int Done(const Session& s, const Invocation& inv, const Status& st) {
  if (!st.ok()) return s.Fail(st);
  if (inv.json) Out("{\"ok\":true}\n");
  return kExitOk;
}

// `null` on stdout in JSON mode, so that stdout always holds one document
// when the exit code is 0 or 3.
int NothingThere(const Session& s, const Invocation& inv, const std::string& message) {
  if (inv.json) {
    Out("null\n");
  } else {
    ErrOf(s.command, EscapeForTerminal(message));
  }
  return kExitEmpty;
}

void PrintPairs(const Invocation& inv, const Pairs& fields) {
  if (inv.json) {
    PrintFieldsJson(fields);
  } else {
    PrintFields(fields);
  }
}

int RunAdd(const Session& s, const Invocation& inv) {
  JobSpec spec;
  spec.topic = inv.topic;
  spec.id = inv.id;
  if (inv.run_at_opt->count()) {
    spec.run_at_ms = inv.run_at_ms;
  } else {
    spec.delay_ms = inv.delay_ms;
  }
  spec.ttr_ms = static_cast<uint32_t>(inv.ttr_ms);
  spec.priority = static_cast<uint32_t>(inv.priority);
  spec.max_attempts = static_cast<uint32_t>(inv.max_attempts);
  spec.body = inv.body;
  spec.replace = inv.replace;
  Result<AddResult> added = s.queue.Add(spec);
  if (!added.ok()) return s.Fail(added.status());
  if (inv.json) {
    JsonWriter w;
    w.BeginObject();
    w.TextField("id", added->id);
    w.EndObject();
    OutJson(w);
  } else {
    Out(EscapeForTerminal(added->id) + "\n");
  }
  return kExitOk;
}

int RunReserve(const Session& s, const Invocation& inv) {
  ReserveRequest req;
  req.topics = inv.topics;
  req.count = static_cast<uint32_t>(inv.count);
  req.wait_ms = inv.wait_ms;
  Result<Deliveries> got = s.queue.Reserve(req);
  if (!got.ok()) {
    // A wait the server's shutdown ended is not "no job" (exit 3): exit 4,
    // saying so, so that a script asks again or another server.
    const std::string line = ReserveFailureLine(got.status(), s.server_list) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    return ExitCodeOf(got.status());  // 4 when the server ended the wait
  }
  if (inv.json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("jobs");
    w.BeginArray();
    for (const Delivery& d : *got) WriteJobJson(&w, d);
    w.EndArray();
    w.EndObject();
    OutJson(w);
  } else if (got->empty()) {
    ErrOf(s.command, "no job reserved");
  }
  for (size_t i = 0; !inv.json && i < got->size(); ++i) {
    if (i > 0) Out("\n");
    PrintJobHuman((*got)[i]);
  }
  return got->empty() ? kExitEmpty : kExitOk;
}

int RunFinish(const Session& s, const Invocation& inv) {
  Status st = s.queue.Finish(inv.id, inv.receipt);
  return st.ok() ? Acted(inv, "finished") : s.Fail(st);
}

int RunRelease(const Session& s, const Invocation& inv) {
  Status st = s.queue.Release(inv.id, inv.receipt, inv.delay_ms, inv.error);
  return st.ok() ? Acted(inv, "released") : s.Fail(st);
}

int RunTouch(const Session& s, const Invocation& inv) {
  Status st = s.queue.Touch(inv.id, inv.receipt);
  return st.ok() ? Acted(inv, "touched") : s.Fail(st);
}

int RunBury(const Session& s, const Invocation& inv) {
  Status st = s.queue.Bury(inv.id, inv.receipt, {});
  return st.ok() ? Acted(inv, "buried") : s.Fail(st);
}

int RunDelete(const Session& s, const Invocation& inv) {
  return Done(s, inv, s.queue.Delete(inv.id));
}

int RunKick(const Session& s, const Invocation& inv) { return Done(s, inv, s.queue.Kick(inv.id)); }

int RunKickTopic(const Session& s, const Invocation& inv) {
  Result<uint64_t> n = s.queue.KickTopic(inv.topic, static_cast<uint64_t>(inv.count));
  if (!n.ok()) return s.Fail(n.status());
  Out(inv.json ? "{\"kicked\":" + std::to_string(*n) + "}\n" : std::to_string(*n) + "\n");
  return kExitOk;
}

int RunGet(const Session& s, const Invocation& inv) {
  Result<JobInfo> job = s.queue.Get(inv.id);
  if (!job.ok() && job.status().code() == Code::kNotFound) {
    return NothingThere(s, inv, "no job '" + inv.id + "'");
  }
  if (!job.ok()) return s.Fail(job.status());
  PrintPairs(inv, PairsOf(*job, wire::kJobFields));
  return kExitOk;
}

int RunPeek(const Session& s, const Invocation& inv) {
  std::string state = inv.state;
  for (char& c : state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  Result<JobInfo> job = s.queue.Peek(inv.topic, *ParseState(state));
  if (!job.ok() && job.status().code() == Code::kNotFound) {
    return NothingThere(s, inv, "no " + state + " job in topic '" + inv.topic + "'");
  }
  if (!job.ok()) return s.Fail(job.status());
  // Shown as a delivery, as reserve shows one (its receipt empty unless
  // the job is reserved).
  Delivery d = wire::AsDelivery(*job);
  if (inv.json) {
    JsonWriter w;
    WriteJobJson(&w, d);
    OutJson(w);
  } else {
    PrintJobHuman(d);
  }
  return kExitOk;
}

int RunTopics(const Session& s, const Invocation& inv) {
  Result<std::vector<TopicInfo>> topics = s.queue.Topics();
  if (!topics.ok()) return s.Fail(topics.status());
  if (inv.json) {
    JsonWriter w;
    w.BeginObject();
    w.Key("topics");
    w.BeginArray();
    for (const TopicInfo& t : *topics) w.String(t.name);
    w.EndArray();
    w.EndObject();
    OutJson(w);
  } else {
    for (const TopicInfo& t : *topics) Out(EscapeForTerminal(t.name) + "\n");
  }
  return kExitOk;
}

// "320us", "1.2ms", "3.4s": a lateness in microseconds for people.
std::string Micros(uint64_t us) {
  auto tenths = [](uint64_t n, uint64_t unit, const char* name) {
    const uint64_t t = (n * 10 + unit / 2) / unit;
    return std::to_string(t / 10) + (t % 10 != 0 ? "." + std::to_string(t % 10) : "") + name;
  };
  if (us < 1000) return std::to_string(us) + "us";
  if (us < 1'000'000) return tenths(us, 1000, "ms");
  return tenths(us, 1'000'000, "s");
}

// A figure of a STATS reply as a count (0 when absent or negative).
uint64_t Count(const Pairs& all, std::string_view k) {
  for (const auto& [key, v] : all) {
    if (key != k) continue;
    std::optional<int64_t> n = AsInteger(v);
    return n && *n > 0 ? static_cast<uint64_t>(*n) : 0;
  }
  return 0;
}

// "1200", "3.5", "0": a rate per second for people.
std::string PerSecond(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, r >= 10 || r == 0 ? "%.0f" : "%.1f", r);
  return buf;
}

// What an operator reads first of the server's STATS: the jobs by state,
// how fast jobs come and go (`before`: the same server's STATS `elapsed_ms`
// earlier), what happened since start, how punctual the server is, and
// whether its store takes changes. Figures the server did not send are left
// out (an older server, another store); `--all` prints every one.
Pairs StatsForPeople(const Pairs& before, const Pairs& all, int64_t elapsed_ms) {
  auto has = [&](std::string_view k) {
    return std::any_of(all.begin(), all.end(), [&](const auto& p) { return p.first == k; });
  };
  auto get = [&](std::string_view k) { return Count(all, k); };
  Pairs out;
  for (const char* k : {"jobs", "ready", "delayed", "reserved", "buried", "waiting"}) {
    if (has(k)) out.emplace_back(k, std::to_string(get(k)));
  }
  // Rates over the interval between the two replies: the counters' growth.
  std::string rates;
  constexpr std::pair<const char*, const char*> kRates[] = {
      {"added", "added/s"}, {"reserves", "handed out/s"}, {"finished", "finished/s"}};
  for (const auto& [k, words] : kRates) {
    if (!has(k) || elapsed_ms <= 0) continue;
    const uint64_t was = Count(before, k), now = get(k);
    const double rate = now > was ? static_cast<double>(now - was) * 1000.0 / elapsed_ms : 0;
    rates += (rates.empty() ? "" : ", ") + PerSecond(rate) + " " + words;
  }
  if (!rates.empty()) out.emplace_back("rates", rates + " (over the last second)");
  // The counters since the server started, as one line.
  std::string since;
  constexpr std::pair<const char*, const char*> kCounters[] = {
      {"added", "added"},       {"reserves", "handed out"}, {"finished", "finished"},
      {"released", "released"}, {"timed_out", "timed out"}, {"buried_total", "buried"},
      {"kicked", "kicked"},     {"deleted", "deleted"}};
  for (const auto& [k, words] : kCounters) {
    if (!has(k)) continue;
    since += (since.empty() ? "" : ", ") + std::to_string(get(k)) + " " + words;
  }
  if (!since.empty()) out.emplace_back("since start", since);
  if (has("due_lateness_count")) {
    const uint64_t n = get("due_lateness_count");
    out.emplace_back("lateness", n == 0 ? std::string("none measured yet")
                                        : "p50 " + Micros(get("due_lateness_p50_us")) + ", p99 " +
                                              Micros(get("due_lateness_p99_us")) + ", max " +
                                              Micros(get("due_lateness_max_us")) + ", over " +
                                              std::to_string(n) + (n == 1 ? " job" : " jobs"));
  }
  // The embedded store's health, as /healthz tells it (docs/api.md §2):
  // other stores answer STATS only while they work.
  std::string health = "ok";
  if (get("store_failing") != 0) {
    health = "failing: the log cannot write, changes are refused (the server's log says why)";
  } else if (get("store_disk_full") != 0) {
    health = "degraded: the disk is full, adds are refused until space is freed";
  }
  if (get("refused_changes") != 0) {
    health += " (" + std::to_string(get("refused_changes")) + " changes refused since start)";
  }
  out.emplace_back("health", health);
  return out;
}

// One topic's counts come from the Queue; the server's come whole from
// STATS, whose reply holds the server's own figures (connections, lateness,
// its store's counters) beside the Queue's: for people, the ones read first
// (StatsForPeople); with --all or --json, all of them.
int RunStats(const Session& s, const Invocation& inv) {
  if (!inv.topic.empty()) {
    Result<TopicInfo> t = s.queue.Topic(inv.topic);
    if (!t.ok()) return s.Fail(t.status());
    PrintPairs(inv, PairsOf(*t, wire::kTopicFields));
    return kExitOk;
  }
  auto stats = [&]() -> Result<Pairs> {
    Result<Reply> r = s.Raw({"STATS"});
    if (!r.ok()) return r.status();
    std::optional<Pairs> fields = ParseFields(*r);
    if (!fields) return client::Malformed("STATS", "field/value pairs", *r);
    return *std::move(fields);
  };
  Result<Pairs> first = stats();
  if (!first.ok()) return s.Fail(first.status());
  if (inv.all || inv.json) {
    PrintPairs(inv, *first);
    return kExitOk;
  }
  // For people, rates too: a second reply a second later (as vmstat and
  // `redis-cli --stat` measure), from the same server when it still answers.
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  Result<Pairs> second = stats();
  if (!second.ok()) return s.Fail(second.status());
  const int64_t elapsed_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  PrintPairs(inv, StatsForPeople(*first, *second, elapsed_ms));
  return kExitOk;
}

int RunPause(const Session& s, const Invocation& inv) {
  return Done(s, inv, s.queue.Pause(inv.topic, inv.pause_ms));
}

int RunResume(const Session& s, const Invocation& inv) {
  return Done(s, inv, s.queue.Resume(inv.topic));
}

// How often `ping --wait` asks again while no server answers.
constexpr int64_t kPingEveryMs = 50;

// One PING, and whether the server that answered wants a token we lack:
// PING is open on a server with a token, so CLIENT ID (cheap, and behind
// the token like every command but PING, AUTH, HELLO and QUIT) goes with it
// in one round trip. A token we have was proven already: the client sends
// AUTH first on every connection, and a refused one fails the connect
// (kUnauthorized).
Status PingOnce(client::ServerSet& servers, bool* wants_token) {
  const redis::Argv cmds[] = {{"PING"}, {"CLIENT", "ID"}};
  return servers.Run(cmds, client::Retry::kAlways, [&](std::vector<Reply>& replies, bool) {
    if (Status st = client::StatusOf(replies[0]); !st.ok()) return st;
    *wants_token = client::StatusOf(replies[1]).code() == Code::kUnauthorized;
    return Status::Ok();
  });
}

QueueOptions RemoteOptions(const Invocation& inv);

// PING is the server's, not the queue's: it asks whether a server answers
// (the first of the list that does), and whether it takes our token or
// wants one. With --wait, a server that cannot be reached is asked again
// every 50 ms until one answers or the wait is over; a fresh ServerSet each
// time, so no backoff of the last failure delays the first answer.
int RunPing(const Session& s, const Invocation& inv) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(inv.wait_ms);
  Status st;
  bool wants_token = false;
  for (bool first = true;; first = false) {
    if (first) {
      st = PingOnce(s.servers, &wants_token);
    } else {
      Result<std::unique_ptr<client::ServerSet>> fresh =
          client::ServerSet::Create(RemoteOptions(inv));
      if (!fresh.ok()) return s.Fail(fresh.status());
      st = PingOnce(**fresh, &wants_token);
    }
    if (st.code() != Code::kUnavailable || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(kPingEveryMs));
  }
  if (!st.ok()) return s.Fail(st);
  if (wants_token && inv.auth_token.empty()) {
    auto one = client::ParseServers(s.server_list);
    const std::string who = one.ok() && one->size() == 1 ? one->front().ToString() : "the server";
    ErrOf("ping", who + " answers, but wants a token: give it with --auth-token T or " +
                      "DELAYQ_AUTH_TOKEN=T");
    return kExitServerError;
  }
  Out(inv.json ? "{\"ok\":true}\n" : "PONG\n");
  return kExitOk;
}

// --- subscriptions (push delivery) -----------------------------------------------------

// The kind of a subscription reply's field, from the wire tables the server
// wrote it with (text when it is not in them: a newer server's field).
wire::Kind SubscriptionKind(std::string_view key) {
  if (auto k = wire::KindOf(key, wire::kSubscriptionFields)) return *k;
  return wire::KindOf(key, wire::kPushFigureFields<PushFigures>).value_or(wire::Kind::kText);
}

// SUBSCRIPTION SET name url topics [options]: only the options given; the
// server gives the rest their defaults.
redis::Argv SubscribeCommand(const CLI::App& sub, const Invocation& inv) {
  redis::Argv cmd = {"SUBSCRIPTION", "SET", inv.name, inv.url, wire::JoinList(inv.topics)};
  auto given = [&](const char* name) { return sub.get_option(name)->count() > 0; };
  if (inv.concurrency_opt->count() > 0) {
    cmd.insert(cmd.end(), {"CONCURRENCY", std::to_string(inv.concurrency)});
  }
  if (given("--timeout")) cmd.insert(cmd.end(), {"TIMEOUT", std::to_string(inv.push_timeout_ms)});
  if (given("--ttl")) cmd.insert(cmd.end(), {"TTL", std::to_string(inv.ttl_ms)});
  for (const std::string& secret : inv.secrets) cmd.insert(cmd.end(), {"SECRET", secret});
  if (given("--min-backoff") || given("--max-backoff") || inv.max_doublings_opt->count() > 0) {
    // RETRY takes all three: what was not given keeps its default.
    const RetryPolicy defaults;
    cmd.insert(
        cmd.end(),
        {"RETRY",
         std::to_string(given("--min-backoff") ? inv.min_backoff_ms : defaults.min_backoff_ms),
         std::to_string(given("--max-backoff") ? inv.max_backoff_ms : defaults.max_backoff_ms),
         std::to_string(inv.max_doublings_opt->count() > 0 ? inv.max_doublings
                                                           : defaults.max_doublings)});
  }
  if (inv.rate_opt->count() > 0) cmd.insert(cmd.end(), {"RATE", wire::FormatDouble(inv.rate)});
  return cmd;
}

// The instance as the server stored it, defaults filled in: key: value
// lines, or the JSON object HTTP's PUT answers.
int RunSubscribe(const Session& s, const Invocation& inv) {
  Result<Reply> r = s.Raw(SubscribeCommand(*s.sub, inv));
  if (!r.ok()) return s.Fail(r.status());
  std::optional<Pairs> fields = ParseFields(*r);
  if (!fields) return s.Fail(client::Malformed("SUBSCRIPTION SET", "field/value pairs", *r));
  if (!inv.json) {
    PrintFields(*fields);
    return kExitOk;
  }
  JsonWriter w;
  WritePairsJson(w, *r, SubscriptionKind);
  OutJson(w);
  return kExitOk;
}

int RunUnsubscribe(const Session& s, const Invocation& inv) {
  redis::Argv cmd = {"SUBSCRIPTION", "DEL", inv.name};
  if (!inv.url.empty()) cmd.push_back(inv.url);
  Result<Reply> r = s.Raw(cmd);
  if (!r.ok()) return s.Fail(r.status());
  if (r->type() != Reply::Type::kInteger) {
    return s.Fail(client::Malformed("SUBSCRIPTION DEL", "an integer", *r));
  }
  const int64_t n = r->integer();
  if (n == 0) {
    return NothingThere(
        s, inv,
        "no subscription '" + inv.name + "'" + (inv.url.empty() ? "" : " at '" + inv.url + "'"));
  }
  if (inv.json) {
    Out("{\"deleted\":" + std::to_string(n) + "}\n");
  } else {
    Out("removed " + std::to_string(n) + (n == 1 ? " instance of " : " instances of ") +
        EscapeForTerminal(inv.name) + "\n");
  }
  return kExitOk;
}

// The live instances (of NAME, or of every name) with their figures: for
// people, a block of key: value lines per instance; --json, HTTP's GET
// answer ({"name","instances"} for one name, {"subscriptions":[...]} for all).
int RunSubscriptions(const Session& s, const Invocation& inv) {
  redis::Argv cmd = {"SUBSCRIPTION", "LIST"};
  if (!inv.name.empty()) cmd = {"SUBSCRIPTION", "GET", inv.name};
  Result<Reply> r = s.Raw(cmd);
  if (!r.ok() && r.status().code() == Code::kNotFound) {
    return NothingThere(s, inv, "no subscription '" + inv.name + "' (no live instance)");
  }
  if (!r.ok()) return s.Fail(r.status());
  std::vector<Pairs> instances;
  if (r->type() == Reply::Type::kArray) {
    for (const Reply& e : r->elements()) {
      std::optional<Pairs> fields = ParseFields(e);
      if (!fields) break;
      instances.push_back(std::move(*fields));
    }
  }
  if (r->type() != Reply::Type::kArray || instances.size() != r->elements().size()) {
    return s.Fail(client::Malformed("SUBSCRIPTION", "an array of field/value pairs", *r));
  }
  if (!inv.json) {
    for (size_t i = 0; i < instances.size(); ++i) {
      if (i > 0) Out("\n");
      PrintFields(instances[i]);
    }
    return kExitOk;
  }
  // Each name's instances together (the server lists them by name).
  auto name_of = [](const Pairs& p) {
    for (const auto& [k, v] : p) {
      if (k == "name") return v;
    }
    return std::string();
  };
  JsonWriter w;
  w.BeginObject();
  if (inv.name.empty()) {
    w.Key("subscriptions");
    w.BeginArray();
  }
  for (size_t i = 0; i < instances.size();) {
    const std::string name = name_of(instances[i]);
    if (inv.name.empty()) w.BeginObject();
    w.TextField("name", name);
    w.Key("instances");
    w.BeginArray();
    for (; i < instances.size() && name_of(instances[i]) == name; ++i) {
      WritePairsJson(w, r->elements()[i], SubscriptionKind);
    }
    w.EndArray();
    if (inv.name.empty()) w.EndObject();
  }
  if (inv.name.empty()) w.EndArray();
  w.EndObject();
  OutJson(w);
  return kExitOk;
}

// clang-format off
constexpr CommandDef kCommands[] = {
    {"add", "add a job to a topic, due now or after --delay; prints its id",
     AddOptionsAdd, PrepareAdd, RunAdd},
    {"reserve", "take due jobs to work on; prints each with its receipt (exit 3: none)",
     AddOptionsReserve, nullptr, RunReserve},
    {"finish", "the work is done: remove a reserved job (needs its --receipt)",
     AddOptionsIdReceipt, PrepareReceipt, RunFinish},
    {"release", "give a reserved job back, due again after --delay (needs its --receipt)",
     AddOptionsRelease, PrepareReceipt, RunRelease},
    {"touch", "keep a reserved job longer: its time to run starts again (needs --receipt)",
     AddOptionsIdReceipt, PrepareReceipt, RunTouch},
    {"bury", "set a reserved job aside until kicked (needs its --receipt)",
     AddOptionsIdReceipt, PrepareReceipt, RunBury},
    {"delete", "delete a job in any state", [](CLI::App* s, Invocation* i) { AddIdArg(s, i); },
     nullptr, RunDelete},
    {"kick", "make a buried job ready again", [](CLI::App* s, Invocation* i) { AddIdArg(s, i); },
     nullptr, RunKick},
    {"kicktopic", "make up to n buried jobs of a topic ready; prints how many",
     AddOptionsKickTopic, nullptr, RunKickTopic},
    {"get", "show a job and its state (exit 3: no such job)",
     [](CLI::App* s, Invocation* i) { AddIdArg(s, i); }, nullptr, RunGet},
    {"peek", "show the next ready, delayed or buried job of a topic (exit 3: none)",
     AddOptionsPeek, nullptr, RunPeek},
    {"topics", "list the topics", AddOptionsNone, nullptr, RunTopics},
    {"stats", "counts of the server, or of one topic", AddOptionsStats, nullptr, RunStats},
    {"pause", "hand out no jobs of a topic for ms (0: until resume)", AddOptionsPause,
     nullptr, RunPause},
    {"resume", "hand out jobs of a paused topic again",
     [](CLI::App* s, Invocation* i) { AddTopicArg(s, i); }, nullptr, RunResume},
    {"ping", "check that a server answers and takes the token; --wait: until one is up",
     AddOptionsPing, nullptr, RunPing},
    {"subscribe", "push delivery: POST due jobs of --topic to URL; prints the instance",
     AddOptionsSubscribe, PrepareSubscribe, RunSubscribe},
    {"unsubscribe", "push delivery: remove the instance at URL, or every instance of NAME",
     AddOptionsUnsubscribe, nullptr, RunUnsubscribe},
    {"subscriptions", "push delivery: the live instances and their figures (exit 3: none of NAME)",
     AddOptionsSubscriptions, nullptr, RunSubscriptions},
};
// clang-format on

// The options of the network client for what the command line said.
QueueOptions RemoteOptions(const Invocation& inv) {
  QueueOptions o;
  o.store = StoreKind::kRemote;
  o.servers = inv.server;
  o.auth_token = inv.auth_token;
  o.tls = inv.tls;
  o.tls_ca_file = inv.cacert;
  o.tls_cert_file = inv.cert;
  o.tls_key_file = inv.key;
  o.connect_timeout_ms = kConnectTimeoutMs;
  o.request_timeout_ms = kReplyTimeoutMs;  // a waiting reserve gets its wait on top
  // The server's --max-body is the limit that counts: it says TOOLARGE.
  o.limits.max_body_bytes = std::numeric_limits<size_t>::max();
  return o;
}

// A bad --server list is a usage error: "delayq ping: --server: bad address ...".
// And the TLS options that do not fit: a file without --tls, a --cert
// without its --key.
Status CheckServers(const Invocation& inv) {
  auto parsed = client::ParseServers(inv.server);
  if (!parsed.ok()) {
    std::string m = parsed.status().message();
    if (m.starts_with("servers: ")) m.erase(0, 9);
    return InvalidArgument("--server: " + m);
  }
  if (!inv.tls) {
    for (auto [value, name] : {std::pair{&inv.cacert, "--cacert"}, std::pair{&inv.cert, "--cert"},
                               std::pair{&inv.key, "--key"}}) {
      if (!value->empty()) {
        return InvalidArgument(std::string(name) +
                               " given without --tls (or DELAYQ_TLS=1): it is for TLS only");
      }
    }
  }
  if (inv.cert.empty() != inv.key.empty()) {
    return InvalidArgument(inv.cert.empty() ? "--key given without --cert"
                                            : "--cert given without --key");
  }
  return Status::Ok();
}

int Execute(const CommandDef& cmd, const CLI::App& sub, Invocation* invocation) {
  signal(SIGPIPE, SIG_IGN);  // a server gone mid-write is an error, not a kill
  ReadEnvironment(invocation);
  if (Status s = CheckServers(*invocation); !s.ok()) {
    ErrOf(cmd.name, s.message());
    return kExitUsage;
  }
  // "delayq finish: --receipt is required ...": usage errors found here
  // name the subcommand, and nothing has been sent.
  auto usage = [&](const Status& s) {
    ErrOf(cmd.name, s.message());
    return kExitUsage;
  };
  if (Status s = ReadDurations(sub, invocation); !s.ok()) return usage(s);
  if (cmd.prepare != nullptr) {
    if (Status s = cmd.prepare(invocation); !s.ok()) return usage(s);
  }
  const QueueOptions options = RemoteOptions(*invocation);
  Result<std::unique_ptr<Queue>> queue = OpenQueue(options);
  if (!queue.ok()) return ReportFailure(queue.status(), options.servers, cmd.name);
  Result<std::unique_ptr<client::ServerSet>> servers = client::ServerSet::Create(options);
  if (!servers.ok()) return ReportFailure(servers.status(), options.servers, cmd.name);
  const Session session{**queue, **servers, options.servers, cmd.name, &sub};
  return cmd.run(session, *invocation);
}

class ClientCommandsImpl final : public ClientCommands {
 public:
  explicit ClientCommandsImpl(CLI::App* app) {
    AddGlobalOptions(app, &inv_);
    for (const CommandDef& cmd : kCommands) {
      CLI::App* sub = app->add_subcommand(cmd.name, cmd.help);
      sub->footer(kExitCodesHelp);
      // Options it does not know (--server, --json, ...) go on to the app's.
      sub->fallthrough();
      cmd.add_options(sub, &inv_);
      subs_.emplace_back(&cmd, sub);
    }
    work_ = AddWorkCommand(app, kExitCodesHelp);
    schedule_ = AddScheduleCommand(app, kExitCodesHelp);
    // Composes with a footer main() may have set, rather than replacing it.
    app->footer([] { return std::string(kExitCodesHelp); });
  }

  int Run() override {
    for (const auto& [cmd, sub] : subs_) {
      if (sub->parsed()) return Execute(*cmd, *sub, &inv_);
    }
    if (work_->Parsed()) {
      ReadEnvironment(&inv_);
      if (Status s = CheckServers(inv_); !s.ok()) {
        ErrOf("work", s.message());
        return kExitUsage;
      }
      QueueOptions options = RemoteOptions(inv_);
      options.request_timeout_ms = kWorkRequestTimeoutMs;
      return work_->Run(options);
    }
    if (schedule_->Parsed()) {
      ReadEnvironment(&inv_);
      if (Status s = CheckServers(inv_); !s.ok()) {
        ErrOf("schedule", s.message());
        return kExitUsage;
      }
      return schedule_->Run(RemoteOptions(inv_), inv_.json);
    }
    return kExitUsage;
  }

  bool Parsed() const override {
    return work_->Parsed() || schedule_->Parsed() ||
           std::any_of(subs_.begin(), subs_.end(),
                       [](const auto& s) { return s.second->parsed(); });
  }

  std::string OptionGiven() const override {
    for (const CLI::Option* opt : {inv_.server_opt, inv_.auth_token_opt, inv_.json_opt,
                                   inv_.tls_opt, inv_.cacert_opt, inv_.cert_opt, inv_.key_opt}) {
      if (opt->count() > 0) return opt->get_name();
    }
    return {};
  }

 private:
  Invocation inv_;  // bound to the options of every subcommand
  std::vector<std::pair<const CommandDef*, CLI::App*>> subs_;
  std::unique_ptr<WorkCommand> work_;
  std::unique_ptr<ScheduleCommand> schedule_;
};

}  // namespace

std::unique_ptr<ClientCommands> AddClientCommands(CLI::App* app) {
  return std::make_unique<ClientCommandsImpl>(app);
}

}  // namespace delayq::cli
