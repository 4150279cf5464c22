// How a connection is served: net::TcpServer reads into c.in and calls
// OnInput, which parses and executes complete commands into c.out until the
// input runs dry or a command is held back; the server writes c.out once.
// A command the store answers later (Redis) keeps its reply's place and the
// commands behind it run meanwhile, within the order rules of FrontEnd
// ("Pipelining"): a RESERVE waits for the changes before it, anything but a
// RESERVE waits for the reserves before it.
//
// A connection speaks RESP2 until HELLO 3; then the replies that are maps
// (HELLO, GET, STATS, COMMAND DOCS) are RESP3 maps and nothing is RESP3's
// null. The commands Redis's tools send on connect (HELLO, INFO, COMMAND,
// CLIENT, SELECT) are at the end of this file.
#include "server/resp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "common/duration.h"
#include "common/secure_compare.h"
#include "common/suggest.h"
#include "delayq/schedule.h"
#include "delayq/subscription.h"
#include "delayq/version.h"
#include "push/pusher.h"
#include "resp/writer.h"
#include "schedule/scheduler.h"
#include "server/errors.h"
#include "wire/encode.h"
#include "wire/fields.h"

namespace delayq::server {

struct RespServer::RespState : FrontEnd::State {
  resp::RequestParser parser;
  bool authed = false;
  resp::Protocol proto = resp::Protocol::kResp2;  // HELLO 3 switches to RESP3
  std::string name;                               // CLIENT SETNAME, HELLO SETNAME
  std::string lib_name, lib_ver;                  // CLIENT SETINFO
  int64_t opened_ms = 0;                          // monotonic: CLIENT LIST's age
  int64_t last_command_ms = 0;                    // monotonic: its idle
  // The last command run, and its subcommand: CLIENT LIST's cmd.
  const CommandSpec* last = nullptr;
  const CommandSpec* last_sub = nullptr;
};

namespace {

RespServer::RespState& RespStateOf(net::Connection& c) {
  return static_cast<RespServer::RespState&>(*c.state);
}

// Whether c asked for RESP3 (HELLO 3): its maps are maps.
bool Resp3(net::Connection& c) { return RespStateOf(c).proto == resp::Protocol::kResp3; }

bool EqualsUpper(std::string_view a, std::string_view upper) {
  if (a.size() != upper.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c != upper[i]) return false;
  }
  return true;
}

std::optional<int64_t> ParseInt(std::string_view s, int64_t min, int64_t max) {
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size() || v < min || v > max) {
    return std::nullopt;
  }
  return v;
}

void ReplyStatus(std::string* out, const Status& s) {
  if (s.ok()) {
    resp::AppendSimple(out, "OK");
    return;
  }
  std::string line(MappingFor(s.code()).resp);
  line += ' ';
  line += s.message();
  resp::AppendError(out, line);
}

void ReplyInvalid(std::string* out, std::string_view message) {
  ReplyStatus(out, InvalidArgument(std::string(message)));
}

// A duration argument: plain digits are milliseconds (as they always were),
// anything else a duration with a unit ("5s", "30m"; ParseDurationMs). Must
// be min..max ms.
Result<int64_t> ParseMsOrDuration(std::string_view s, std::string_view what, int64_t min,
                                  int64_t max) {
  std::optional<int64_t> ms;
  if (!s.empty() && s[0] != '-') ms = ParseInt(s, 0, INT64_MAX);
  if (!ms) {
    Result<int64_t> d = ParseDurationMs(s, what);
    if (!d.ok()) return d.status();
    ms = *d;
  }
  if (*ms < min) return InvalidArgument(std::string(what) + ": at least " + FormatDurationMs(min));
  if (*ms > max) return InvalidArgument(std::string(what) + ": at most " + FormatDurationMs(max));
  return *ms;
}

// The receipt argument of FINISH, TOUCH, BURY and RELEASE: the one RESERVE
// handed out, or FORCE to act by id alone. `arg` is null when it is missing.
// Sets *receipt ("" for FORCE) and *forced.
Status ReadReceipt(const std::string_view* arg, std::string_view* receipt, bool* forced) {
  if (arg == nullptr || arg->empty()) {
    return InvalidArgument(
        "receipt: required — the receipt from the RESERVE that handed the job out (FORCE in its "
        "place acts by id alone)");
  }
  *forced = EqualsUpper(*arg, "FORCE");
  *receipt = *forced ? std::string_view() : *arg;
  return Status::Ok();
}

// A delivery as RESERVE and PEEK send it: the values of every row of
// wire::kDeliveryFields, in order: [id, topic, body, receipt, attempts,
// ttr_ms, priority, run_at_ms, reserved_until_ms].
void AppendDelivery(std::string* out, const Delivery& d) {
  wire::AppendRespValues(out, d, wire::kDeliveryFields);
}

// Replies of the calls made through FrontEnd::Await.
struct AnswerStatus {
  void operator()(FrontEnd&, net::Connection& c, const Status& s) const { ReplyStatus(&c.out, s); }
};
// A change made with FORCE (by id alone): +FORCED says so.
struct AnswerForced {
  void operator()(FrontEnd&, net::Connection& c, const Status& s) const {
    if (!s.ok()) return ReplyStatus(&c.out, s);
    resp::AppendSimple(&c.out, "FORCED");
  }
};
struct AnswerAdd {
  void operator()(FrontEnd&, net::Connection& c, const Result<AddResult>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    resp::AppendBulk(&c.out, r->id);
  }
};
// ADD ... WITHSTATE: [id, state, run_at_ms], what the network client needs
// to answer an add as the in-process queue does.
struct AnswerAddWithState {
  void operator()(FrontEnd&, net::Connection& c, const Result<AddResult>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    wire::AppendRespValues(&c.out, *r, wire::kAddedFields);
  }
};

}  // namespace

// The command table: name, arity (with the name), whether AUTH must come
// first, the handler, and what COMMAND DOCS and HELP say of it: its group,
// its arguments and a summary. Handlers parse, make one Queue call, and reply.
// CLIENT's and COMMAND's subcommands are tables of their own, with the
// arity counting both names.
const RespServer::CommandSpec RespServer::kClientCommands[] = {
    {"SETNAME", 3, 3, true, &RespServer::CmdClientSetName, "connection", "name",
     "Names the connection (empty: no name); CLIENT LIST shows it."},
    {"GETNAME", 2, 2, true, &RespServer::CmdClientGetName, "connection", "",
     "The connection's name, or nil."},
    {"ID", 2, 2, true, &RespServer::CmdClientId, "connection", "", "The connection's id."},
    {"LIST", 2, -1, true, &RespServer::CmdClientList, "connection",
     "[TYPE normal] [ID id [id ...]]", "One line per open RESP connection."},
    {"INFO", 2, 2, true, &RespServer::CmdClientInfo, "connection", "",
     "This connection's line of CLIENT LIST."},
    {"SETINFO", 4, 4, true, &RespServer::CmdClientSetInfo, "connection", "LIB-NAME|LIB-VER value",
     "Records the client library's name or version; CLIENT LIST shows it."},
    {"HELP", 2, 2, true, &RespServer::CmdHelp, "connection", "", "Lists CLIENT's subcommands."},
};

const RespServer::CommandSpec RespServer::kCommandCommands[] = {
    {"COUNT", 2, 2, true, &RespServer::CmdCommandCount, "server", "",
     "How many commands there are."},
    {"DOCS", 2, -1, true, &RespServer::CmdCommandDocs, "server",
     "[command-name [command-name ...]]",
     "Summary, group and arguments of commands (all when none is named)."},
    {"INFO", 2, -1, true, &RespServer::CmdCommandInfo, "server",
     "[command-name [command-name ...]]", "Arity and flags of commands (all when none is named)."},
    {"LIST", 2, 2, true, &RespServer::CmdCommandList, "server", "",
     "The names of every command and subcommand."},
    {"HELP", 2, 2, true, &RespServer::CmdHelp, "server", "", "Lists COMMAND's subcommands."},
};

const RespServer::CommandSpec RespServer::kSubscriptionCommands[] = {
    {"SET", 5, -1, true, &RespServer::CmdSubscriptionSet, "queue",
     "name url topic[,topic...] [CONCURRENCY n] [TIMEOUT timeout] [TTL ttl] [SECRET whsec_...] "
     "[SECRET ...] [RETRY min_backoff max_backoff max_doublings] [RATE per_second]",
     "Registers (or renews and updates) the instance of name at url: due jobs of the topics are "
     "POSTed to it. Answers the instance."},
    {"DEL", 3, 4, true, &RespServer::CmdSubscriptionDel, "queue", "name [url]",
     "Removes the instance at url, or every instance of name; answers how many."},
    {"GET", 3, 3, true, &RespServer::CmdSubscriptionGet, "queue", "name",
     "The live instances of name, with their figures (NOTFOUND: none)."},
    {"LIST", 2, 2, true, &RespServer::CmdSubscriptionList, "queue", "",
     "Every live instance of every name, with their figures."},
    {"HELP", 2, 2, true, &RespServer::CmdHelp, "queue", "", "Lists SUBSCRIPTION's subcommands."},
};

const RespServer::CommandSpec RespServer::kScheduleCommands[] = {
    {"SET", 5, -1, true, &RespServer::CmdScheduleSet, "queue", "name field value [field value ...]",
     "Creates or replaces schedule name's definition (fields: cron, topic, timezone, body, "
     "ttr_ms, priority, max_attempts, catchup, catchup_window_ms, overlap, paused, "
     "pause_on_failure; cron and topic required). Answers the schedule."},
    {"GET", 3, 3, true, &RespServer::CmdScheduleGet, "queue", "name",
     "The schedule, with its next and last firings (NOTFOUND: none)."},
    {"DEL", 3, 3, true, &RespServer::CmdScheduleDel, "queue", "name",
     "Removes the schedule and its firing added ahead; answers it as it was."},
    {"LIST", 2, 2, true, &RespServer::CmdScheduleList, "queue", "", "Every schedule."},
    {"PAUSE", 3, 3, true, &RespServer::CmdSchedulePause, "queue", "name",
     "No firing until RESUME; the one added ahead is withdrawn. Answers the schedule."},
    {"RESUME", 3, 3, true, &RespServer::CmdScheduleResume, "queue", "name",
     "Fires again, applying catchup to the times passed meanwhile. Answers the schedule."},
    {"BACKFILL", 5, 6, true, &RespServer::CmdScheduleBackfill, "queue",
     "name from_ms to_ms [allow|skip]",
     "Adds the firings of a past range that have not happened; answers added, already, "
     "in_range."},
    {"HELP", 2, 2, true, &RespServer::CmdHelp, "queue", "", "Lists SCHEDULE's subcommands."},
};

const RespServer::CommandSpec RespServer::kCommands[] = {
    {"PING", 1, 2, false, &RespServer::CmdPing, "connection", "[message]",
     "Answers PONG, or the message."},
    {"ECHO", 2, 2, false, &RespServer::CmdEcho, "connection", "message", "Answers the message."},
    {"AUTH", 2, 3, false, &RespServer::CmdAuth, "connection", "[username] token",
     "Authenticates the connection with the server's token (the one user is \"default\")."},
    {"QUIT", 1, 1, false, &RespServer::CmdQuit, "connection", "",
     "Closes the connection once the reply is written."},
    {"HELLO", 1, -1, false, &RespServer::CmdHello, "connection",
     "[protover [AUTH username token] [SETNAME name]]",
     "Switches the connection to RESP2 or RESP3 and answers the server's details."},
    {"SELECT", 2, 2, true, &RespServer::CmdSelect, "connection", "index",
     "Selects database 0, the only one."},
    {"CLIENT", 2, -1, true, nullptr, "connection", "subcommand [argument ...]",
     "Names and lists connections.", kClientCommands},
    {"INFO", 1, -1, true, &RespServer::CmdInfo, "server", "[section [section ...]]",
     "The server's figures as Redis's INFO text: server, clients, stats, delayq, keyspace."},
    {"COMMAND", 1, -1, true, &RespServer::CmdCommand, "server", "",
     "Describes every command, as Redis's COMMAND does.", kCommandCommands},
    {"ADD", 6, 17, true, &RespServer::CmdAdd, "queue",
     "topic id|* delay ttr body [PRIORITY p] [MAXATTEMPTS n] [AT unix_ms] [REPLACE] "
     "[IDEMPOTENCY key] [WITHSTATE]",
     "Adds a job that becomes ready after delay (ms, or 5s, 30m); answers its id (WITHSTATE: "
     "[id, state, run_at_ms]). IDEMPOTENCY: a repeat with that key within the dedup window "
     "changes nothing and answers as the first did."},
    {"RESERVE", 3, -1, true, &RespServer::CmdReserve, "queue",
     "[TIMEOUT timeout] [COUNT n] [MAXBYTES bytes] FROM topic [topic ...]",
     "Takes ready jobs, waiting up to TIMEOUT (ms, or 5s) for one."},
    {"FINISH", 2, 3, true, &RespServer::CmdFinish, "queue", "id receipt|FORCE",
     "Finishes a reserved job: it is done and deleted (FORCE: by id alone)."},
    {"DELETE", 2, 2, true, &RespServer::CmdDelete, "queue", "id", "Deletes a job in any state."},
    {"RELEASE", 3, 6, true, &RespServer::CmdRelease, "queue", "id delay receipt|FORCE [ERROR text]",
     "Gives a reserved job back, ready again after delay (ms, or 5s)."},
    {"TOUCH", 2, 3, true, &RespServer::CmdTouch, "queue", "id receipt|FORCE",
     "Extends a job's reservation by its TTR."},
    {"BURY", 2, 5, true, &RespServer::CmdBury, "queue", "id receipt|FORCE [ERROR text]",
     "Sets a reserved job aside until it is kicked, with text as its last error."},
    {"UNRESERVE", 3, 3, true, &RespServer::CmdUnreserve, "queue", "id receipt",
     "Gives back a reserved job its worker never began: ready at once, the attempt not counted."},
    {"KICK", 2, 2, true, &RespServer::CmdKick, "queue", "id",
     "Makes a buried or delayed job ready."},
    {"KICKTOPIC", 3, 3, true, &RespServer::CmdKickTopic, "queue", "topic n",
     "Makes up to n buried jobs of a topic ready; answers how many."},
    {"GET", 2, 2, true, &RespServer::CmdGet, "queue", "id", "A job's fields and state, or nil."},
    {"PEEK", 3, 3, true, &RespServer::CmdPeek, "queue", "topic READY|DELAYED|BURIED",
     "The next job of a topic in a state, without reserving it."},
    {"PAUSE", 3, 3, true, &RespServer::CmdPause, "queue", "topic ms",
     "Stops handing out a topic's jobs for ms (0: until RESUME)."},
    {"RESUME", 2, 2, true, &RespServer::CmdResume, "queue", "topic",
     "Hands out a paused topic's jobs again."},
    {"TOPICS", 1, 1, true, &RespServer::CmdTopics, "queue", "",
     "The topics with jobs, waiting reserves or a pause."},
    {"STATS", 1, 2, true, &RespServer::CmdStats, "queue", "[topic]",
     "The queue's figures, or one topic's counts."},
    {"SUBSCRIPTION", 2, -1, true, nullptr, "queue", "subcommand [argument ...]",
     "Push delivery: registers, lists and removes the HTTP endpoints due jobs are POSTed to.",
     kSubscriptionCommands},
    {"SCHEDULE", 2, -1, true, nullptr, "queue", "subcommand [argument ...]",
     "Periodic jobs: schedules that add a job at each fire time of a cron expression.",
     kScheduleCommands},
};

namespace {

const RespServer::CommandSpec* FindIn(std::span<const RespServer::CommandSpec> table,
                                      std::string_view name) {
  for (const RespServer::CommandSpec& c : table) {
    if (EqualsUpper(name, c.name)) return &c;
  }
  return nullptr;
}

}  // namespace

const RespServer::CommandSpec* RespServer::FindCommand(std::string_view name) {
  return FindIn(kCommands, name);
}

// --- connections -------------------------------------------------------------------

Result<std::unique_ptr<RespServer>> RespServer::Create(net::EventLoop* loop, ServingQueue* queue,
                                                       RespServerOptions options) {
  net::TcpServerOptions tcp = options.tcp;
  auto server = std::unique_ptr<RespServer>(new RespServer(loop, queue, std::move(options)));
  if (Status st = server->Listen(std::move(tcp)); !st.ok()) return st;
  return server;
}

RespServer::RespServer(net::EventLoop* loop, ServingQueue* queue, RespServerOptions options)
    : FrontEnd(loop, queue, /*pipelining=*/true),
      options_(std::move(options)),
      started_ms_(net::MonotonicNowMs()) {}

void RespServer::OnOpen(Connection& c) {
  auto s = std::make_unique<RespState>();
  s->parser = resp::RequestParser(options_.parser);
  s->authed = options_.auth_token.empty();
  s->opened_ms = s->last_command_ms = net::MonotonicNowMs();
  c.state = std::move(s);
  clients_[c.id] = &c;
  ++connections_received_;
}

void RespServer::OnClose(Connection& c) {
  clients_.erase(c.id);
  FrontEnd::OnClose(c);
}

std::string_view RespServer::BusyReply() const { return "-ERR max number of clients reached\r\n"; }

std::string_view RespServer::PlaintextReply() const {
  return "-ERR this port speaks TLS: connect with TLS (delayq --tls, redis-cli --tls)\r\n";
}

std::string_view RespServer::TimeoutReply() const {
  return "-ERR request timed out: a command must arrive whole within the request timeout\r\n";
}

// Parses and executes complete commands until the input runs dry, a command
// parks the connection, or the connection is closing.
void RespServer::OnInput(Connection& c) {
  RespState& s = RespStateOf(c);
  size_t offset = 0;
  while (!c.closing && !c.waiting && !c.OutputFull() && offset < c.in.size()) {
    size_t consumed = 0;
    std::string_view rest(c.in.data() + offset, c.in.size() - offset);
    resp::RequestParser::Status st = s.parser.Parse(rest, &consumed);
    if (st == resp::RequestParser::Status::kError) {
      resp::AppendError(&c.out, "ERR Protocol error: " + s.parser.error());
      c.closing = true;
      break;
    }
    if (st == resp::RequestParser::Status::kCommand) {
      // Held back behind requests in flight: parsed again once resumed.
      if (HoldBack(c, EqualsUpper(s.parser.args()[0], "RESERVE"))) break;
      offset += consumed;
      Execute(c, s.parser.args());  // views into c.in, which is untouched until below
      continue;
    }
    offset += consumed;
    if (consumed == 0) break;  // need more input
  }
  c.in.erase(0, offset);
}

// Checks the command, its subcommand and their arity, then AUTH, in that
// order, as Redis does; the errors are worded as Redis words them, which
// clients match.
void RespServer::Execute(Connection& c, const Args& args) {
  const CommandSpec* cmd = FindCommand(args[0]);
  if (cmd == nullptr) {
    // Redis's words: "unknown command 'x', with args beginning with: 'a' 'b' ".
    std::string line = "ERR unknown command '" + std::string(args[0].substr(0, 128)) +
                       "', with args beginning with: ";
    size_t start = line.size();
    for (size_t i = 1; i < args.size() && line.size() - start < 128; ++i) {
      const size_t room = 128 - (line.size() - start);
      line.append("'").append(args[i].substr(0, room)).append("' ");
    }
    resp::AppendError(&c.out, line);
    return;
  }
  int n = static_cast<int>(args.size());
  const CommandSpec* sub = nullptr;
  if (!cmd->subcommands.empty() && n >= 2) {
    sub = FindIn(cmd->subcommands, args[1]);
    if (sub == nullptr) {
      resp::AppendError(&c.out, "ERR unknown subcommand '" + std::string(args[1].substr(0, 128)) +
                                    "'. Try " + std::string(cmd->name) + " HELP.");
      return;
    }
  }
  const CommandSpec& run = sub != nullptr ? *sub : *cmd;
  if (n < run.min_args || (run.max_args >= 0 && n > run.max_args)) {
    std::string name(cmd->name);
    if (sub != nullptr) name.append("|").append(sub->name);
    resp::AppendError(&c.out, "ERR wrong number of arguments for '" + name + "' command");
    return;
  }
  RespState& s = RespStateOf(c);
  if (cmd->needs_auth && !s.authed) {
    ReplyStatus(&c.out, Status(Code::kUnauthorized, "Authentication required: AUTH <token>"));
    return;
  }
  ++commands_processed_;
  s.last = cmd;
  s.last_sub = sub;
  s.last_command_ms = net::MonotonicNowMs();
  (this->*(run.handler))(c, args);
}

// --- commands ----------------------------------------------------------------------

void RespServer::CmdPing(Connection& c, const Args& a) {
  if (a.size() == 2) {
    resp::AppendBulk(&c.out, a[1]);
  } else {
    resp::AppendSimple(&c.out, "PONG");
  }
}

// redis-cli --pipe ends its input with an ECHO and waits for the echo.
void RespServer::CmdEcho(Connection& c, const Args& a) { resp::AppendBulk(&c.out, a[1]); }

// AUTH token, or AUTH username token as clients that know Redis 6's users
// send it (redis-cli --user, redis-py's username=): the one user is
// "default", as in a Redis without ACLs.
void RespServer::CmdAuth(Connection& c, const Args& a) {
  if (options_.auth_token.empty()) {
    resp::AppendError(&c.out, "ERR AUTH called without a token configured");
    return;
  }
  // As in Redis, a failed AUTH leaves an earlier successful one in force.
  Status st = CheckCredentials(a.size() == 3 ? a[1] : "default", a.back());
  if (st.ok()) RespStateOf(c).authed = true;
  ReplyStatus(&c.out, st);
}

void RespServer::CmdQuit(Connection& c, const Args&) {
  resp::AppendSimple(&c.out, "OK");
  c.closing = true;
}

// ADD topic id|* delay ttr body [PRIORITY p] [MAXATTEMPTS n] [AT unix_ms] [REPLACE]
//     [IDEMPOTENCY key] [WITHSTATE]
// (delay and ttr: milliseconds, or a duration with a unit: 5s, 30m)
void RespServer::CmdAdd(Connection& c, const Args& a) {
  JobSpec spec;
  spec.topic = std::string(a[1]);
  if (a[2] != "*") spec.id = std::string(a[2]);
  Result<int64_t> delay = ParseMsOrDuration(a[3], "delay", 0, kMaxDelayMs);
  if (!delay.ok()) return ReplyStatus(&c.out, delay.status());
  spec.delay_ms = *delay;
  Result<int64_t> ttr = ParseMsOrDuration(a[4], "ttr", 1, UINT32_MAX);
  if (!ttr.ok()) return ReplyStatus(&c.out, ttr.status());
  spec.ttr_ms = static_cast<uint32_t>(*ttr);
  spec.body = std::string(a[5]);
  bool with_state = false;
  for (size_t i = 6; i < a.size(); ++i) {
    bool has_value = i + 1 < a.size();
    if (EqualsUpper(a[i], "REPLACE")) {
      spec.replace = true;
    } else if (EqualsUpper(a[i], "WITHSTATE")) {
      with_state = true;
    } else if (EqualsUpper(a[i], "PRIORITY") && has_value) {
      auto p = ParseInt(a[++i], 0, UINT32_MAX);
      if (!p) return ReplyInvalid(&c.out, "PRIORITY: expected an integer 0..4294967295");
      spec.priority = static_cast<uint32_t>(*p);
    } else if (EqualsUpper(a[i], "MAXATTEMPTS") && has_value) {
      auto m = ParseInt(a[++i], 0, UINT32_MAX);
      if (!m) return ReplyInvalid(&c.out, "MAXATTEMPTS: expected an integer 0..4294967295");
      spec.max_attempts = static_cast<uint32_t>(*m);
    } else if (EqualsUpper(a[i], "AT") && has_value) {
      // ValidateJobSpec refuses a time before 2001 (seconds, most likely).
      auto at = ParseInt(a[++i], 0, kMaxRunAtMs);
      if (!at) return ReplyInvalid(&c.out, "AT: expected a Unix time in ms");
      spec.delay_ms.reset();
      spec.run_at_ms = *at;
    } else if (EqualsUpper(a[i], "IDEMPOTENCY") && has_value) {
      spec.idempotency_key = std::string(a[++i]);  // checked with the spec
    } else {
      return ReplyInvalid(
          &c.out, "ADD: unknown or incomplete option '" + std::string(a[i].substr(0, 32)) + "'");
    }
  }
  auto call = [&](ServingQueue::AddCallback done) { queue_->AddAsync(spec, std::move(done)); };
  if (with_state) return Await<Result<AddResult>, AnswerAddWithState>(c, call);
  Await<Result<AddResult>, AnswerAdd>(c, call);
}

// RESERVE [TIMEOUT ms|duration] [COUNT n] [MAXBYTES bytes] FROM topic [topic ...]
void RespServer::CmdReserve(Connection& c, const Args& a) {
  ReserveRequest req;
  size_t i = 1;
  for (; i < a.size() && !EqualsUpper(a[i], "FROM"); ++i) {
    if (EqualsUpper(a[i], "TIMEOUT") && i + 1 < a.size()) {
      Result<int64_t> t = ParseMsOrDuration(a[++i], "TIMEOUT", 0, 86'400'000);
      if (!t.ok()) return ReplyStatus(&c.out, t.status());
      req.wait_ms = *t;
    } else if (EqualsUpper(a[i], "COUNT") && i + 1 < a.size()) {
      auto n = ParseInt(a[++i], 1, kMaxReserveCount);
      if (!n) return ReplyInvalid(&c.out, "COUNT: expected an integer 1..1000");
      req.count = static_cast<uint32_t>(*n);
    } else if (EqualsUpper(a[i], "MAXBYTES") && i + 1 < a.size()) {
      auto b = ParseInt(a[++i], 0, INT64_MAX);
      if (!b) return ReplyInvalid(&c.out, "MAXBYTES: expected an integer >= 0 (0: no limit)");
      req.max_bytes = static_cast<uint64_t>(*b);
    } else {
      return ReplyInvalid(&c.out,
                          "RESERVE: expected TIMEOUT ms, COUNT n, MAXBYTES bytes or FROM topic...");
    }
  }
  if (i + 1 >= a.size()) return ReplyInvalid(&c.out, "RESERVE: FROM needs at least one topic");
  for (++i; i < a.size(); ++i) req.topics.emplace_back(a[i]);

  StartReserve(c, std::move(req));
}

void RespServer::AnswerReserve(Connection& c, const Result<Deliveries>& r) {
  if (!r.ok()) {
    ReplyStatus(&c.out, r.status());
  } else if (r->empty()) {
    resp::AppendNullArray(&c.out, RespStateOf(c).proto);
  } else {
    wire::AppendRespDeliveries(&c.out, *r);
  }
}

// FINISH, TOUCH, BURY: id receipt|FORCE. The table lets the receipt be
// missing so that the reply can say what is missing.
void RespServer::ReceiptCommand(Connection& c, const Args& a, ReceiptCall op) {
  std::string_view receipt;
  bool forced = false;
  Status st = ReadReceipt(a.size() > 2 ? &a[2] : nullptr, &receipt, &forced);
  if (!st.ok()) return ReplyStatus(&c.out, st);
  auto call = [&](ServingQueue::StatusCallback done) {
    op(queue_, a[1], receipt, std::move(done));
  };
  if (forced) return Await<Status, AnswerForced>(c, call);
  Await<Status, AnswerStatus>(c, call);
}

void RespServer::CmdFinish(Connection& c, const Args& a) {
  ReceiptCommand(
      c, a,
      [](ServingQueue* q, std::string_view id, std::string_view receipt,
         ServingQueue::StatusCallback done) { q->FinishAsync(id, receipt, std::move(done)); });
}

void RespServer::CmdDelete(Connection& c, const Args& a) {
  Await<Status, AnswerStatus>(
      c, [&](ServingQueue::StatusCallback done) { queue_->DeleteAsync(a[1], std::move(done)); });
}

// RELEASE id delay receipt|FORCE [ERROR text]
void RespServer::CmdRelease(Connection& c, const Args& a) {
  Result<int64_t> delay = ParseMsOrDuration(a[2], "delay", 0, kMaxDelayMs);
  if (!delay.ok()) return ReplyStatus(&c.out, delay.status());
  std::string_view receipt, error;
  bool forced = false;
  // The old form without a receipt ("RELEASE id 0 ERROR text") is told that
  // the receipt is missing, not that "ERROR" is a bad one.
  bool has_receipt = a.size() > 3 && !EqualsUpper(a[3], "ERROR");
  Status st = ReadReceipt(has_receipt ? &a[3] : nullptr, &receipt, &forced);
  if (!st.ok()) return ReplyStatus(&c.out, st);
  if (a.size() > 4) {
    if (!EqualsUpper(a[4], "ERROR") || a.size() != 6) {
      return ReplyInvalid(&c.out, "RELEASE: expected id delay receipt|FORCE [ERROR text]");
    }
    error = a[5];
  }
  auto call = [&](ServingQueue::StatusCallback done) {
    queue_->ReleaseAsync(a[1], receipt, *delay, error, std::move(done));
  };
  if (forced) return Await<Status, AnswerForced>(c, call);
  Await<Status, AnswerStatus>(c, call);
}

void RespServer::CmdTouch(Connection& c, const Args& a) {
  ReceiptCommand(
      c, a,
      [](ServingQueue* q, std::string_view id, std::string_view receipt,
         ServingQueue::StatusCallback done) { q->TouchAsync(id, receipt, std::move(done)); });
}

// BURY id receipt|FORCE [ERROR text]
void RespServer::CmdBury(Connection& c, const Args& a) {
  std::string_view receipt, reason;
  bool forced = false;
  Status st = ReadReceipt(a.size() > 2 ? &a[2] : nullptr, &receipt, &forced);
  if (!st.ok()) return ReplyStatus(&c.out, st);
  if (a.size() > 3) {
    if (!EqualsUpper(a[3], "ERROR") || a.size() != 5) {
      return ReplyInvalid(&c.out, "BURY: expected id receipt|FORCE [ERROR text]");
    }
    reason = a[4];
  }
  auto call = [&](ServingQueue::StatusCallback done) {
    queue_->BuryAsync(a[1], receipt, reason, std::move(done));
  };
  if (forced) return Await<Status, AnswerForced>(c, call);
  Await<Status, AnswerStatus>(c, call);
}

// UNRESERVE id receipt: no FORCE, as Queue::Unreserve takes none (it undoes
// one delivery, which only its receipt names).
void RespServer::CmdUnreserve(Connection& c, const Args& a) {
  if (EqualsUpper(a[2], "FORCE")) {
    return ReplyInvalid(&c.out, "receipt: UNRESERVE needs the delivery's receipt, not FORCE");
  }
  Await<Status, AnswerStatus>(c, [&](ServingQueue::StatusCallback done) {
    queue_->UnreserveAsync(a[1], a[2], std::move(done));
  });
}

void RespServer::CmdKick(Connection& c, const Args& a) {
  Await<Status, AnswerStatus>(
      c, [&](ServingQueue::StatusCallback done) { queue_->KickAsync(a[1], std::move(done)); });
}

namespace {

struct AnswerCount {
  void operator()(FrontEnd&, net::Connection& c, const Result<uint64_t>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    resp::AppendInteger(&c.out, static_cast<int64_t>(*r));
  }
};

// GET's reply: the job's fields as pairs; nil when there is no such job.
struct AnswerJob {
  void operator()(FrontEnd&, net::Connection& c, const Result<JobInfo>& r) const {
    if (!r.ok()) {
      if (r.status().code() == Code::kNotFound) {
        return resp::AppendNullArray(&c.out, RespStateOf(c).proto);
      }
      return ReplyStatus(&c.out, r.status());
    }
    wire::AppendRespPairs(&c.out, *r, wire::kJobFields, 0, Resp3(c));
  }
};

// PEEK's reply: the job as a delivery, as RESERVE sends it (a peeked job is
// not reserved: its receipt is "" and its reserved_until_ms 0); nil when the
// state is empty.
struct AnswerPeek {
  void operator()(FrontEnd&, net::Connection& c, const Result<JobInfo>& r) const {
    if (!r.ok()) {
      if (r.status().code() == Code::kNotFound) {
        return resp::AppendNullArray(&c.out, RespStateOf(c).proto);
      }
      return ReplyStatus(&c.out, r.status());
    }
    AppendDelivery(&c.out, wire::AsDelivery(*r));
  }
};

struct AnswerTopics {
  void operator()(FrontEnd&, net::Connection& c, const Result<std::vector<TopicInfo>>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    resp::AppendArrayHeader(&c.out, r->size());
    for (const TopicInfo& t : *r) resp::AppendBulk(&c.out, t.name);
  }
};

struct AnswerTopic {
  void operator()(FrontEnd&, net::Connection& c, const Result<TopicInfo>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    wire::AppendRespPairs(&c.out, *r, wire::kTopicFields, 0, Resp3(c));
  }
};

struct AnswerStats {
  void operator()(FrontEnd& f, net::Connection& c, const Result<QueueStats>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    const bool resp3 = Resp3(c);
    auto shared = f.SharedStatsFields();
    wire::AppendRespPairs(&c.out, *r, wire::kStatsFields, 1 + shared.size(), resp3);
    wire::AppendRespPair(&c.out, "connections", wire::Uint(f.connections()), resp3);
    for (const auto& [k, v] : shared) wire::AppendRespPair(&c.out, k, wire::Uint(v), resp3);
  }
};

}  // namespace

void RespServer::CmdKickTopic(Connection& c, const Args& a) {
  auto n = ParseInt(a[2], 0, INT64_MAX);
  if (!n) return ReplyInvalid(&c.out, "n: expected an integer >= 0");
  Await<Result<uint64_t>, AnswerCount>(c, [&](ServingQueue::CountCallback done) {
    queue_->KickTopicAsync(a[1], static_cast<uint64_t>(*n), std::move(done));
  });
}

void RespServer::CmdGet(Connection& c, const Args& a) {
  Await<Result<JobInfo>, AnswerJob>(
      c, [&](ServingQueue::JobCallback done) { queue_->GetAsync(a[1], std::move(done)); });
}

void RespServer::CmdPeek(Connection& c, const Args& a) {
  std::optional<JobState> state;
  if (EqualsUpper(a[2], "READY")) state = JobState::kReady;
  if (EqualsUpper(a[2], "DELAYED")) state = JobState::kDelayed;
  if (EqualsUpper(a[2], "BURIED")) state = JobState::kBuried;
  if (!state) return ReplyInvalid(&c.out, "PEEK: state must be READY, DELAYED or BURIED");
  Await<Result<JobInfo>, AnswerPeek>(
      c, [&](ServingQueue::JobCallback done) { queue_->PeekAsync(a[1], *state, std::move(done)); });
}

void RespServer::CmdPause(Connection& c, const Args& a) {
  auto ms = ParseInt(a[2], 0, kMaxDelayMs);
  if (!ms) return ReplyInvalid(&c.out, "ms: expected an integer >= 0 (0 = until RESUME)");
  Await<Status, AnswerStatus>(c, [&](ServingQueue::StatusCallback done) {
    queue_->PauseAsync(a[1], *ms, std::move(done));
  });
}

void RespServer::CmdResume(Connection& c, const Args& a) {
  Await<Status, AnswerStatus>(
      c, [&](ServingQueue::StatusCallback done) { queue_->ResumeAsync(a[1], std::move(done)); });
}

void RespServer::CmdTopics(Connection& c, const Args&) {
  Await<Result<std::vector<TopicInfo>>, AnswerTopics>(
      c, [&](ServingQueue::TopicsCallback done) { queue_->TopicsAsync(std::move(done)); });
}

void RespServer::CmdStats(Connection& c, const Args& a) {
  if (a.size() == 2) {
    return Await<Result<TopicInfo>, AnswerTopic>(
        c, [&](ServingQueue::TopicCallback done) { queue_->TopicAsync(a[1], std::move(done)); });
  }
  Await<Result<QueueStats>, AnswerStats>(
      c, [&](ServingQueue::StatsCallback done) { queue_->StatsAsync(std::move(done)); });
}

// --- push delivery's subscriptions -----------------------------------------------

namespace {

// An instance's pairs (kSubscriptionFields, then kPushFigureFields): one
// element of SUBSCRIPTION GET's and LIST's arrays.
void AppendInstance(std::string* out, const push::InstanceView& v, bool resp3) {
  constexpr size_t kFigures = std::size(wire::kPushFigureFields<PushFigures>);
  wire::AppendRespPairs(out, v.subscription, wire::kSubscriptionFields, kFigures, resp3);
  wire::AppendRespFields(out, v.figures, wire::kPushFigureFields<PushFigures>, resp3);
}

struct AnswerSubscription {
  void operator()(FrontEnd&, net::Connection& c, const Result<Subscription>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    wire::AppendRespPairs(&c.out, *r, wire::kSubscriptionFields, 0, Resp3(c));
  }
};

struct AnswerInstances {
  void operator()(FrontEnd&, net::Connection& c,
                  const Result<std::vector<push::InstanceView>>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    resp::AppendArrayHeader(&c.out, r->size());
    for (const push::InstanceView& v : *r) AppendInstance(&c.out, v, Resp3(c));
  }
};

// GET of one name: NOTFOUND when it has none, as HTTP's 404.
struct AnswerNamedInstances {
  void operator()(FrontEnd& f, net::Connection& c,
                  const Result<std::vector<push::InstanceView>>& r) const {
    if (r.ok() && r->empty()) {
      return ReplyStatus(&c.out, Status(Code::kNotFound,
                                        "no subscription of that name has a "
                                        "live instance"));
    }
    AnswerInstances{}(f, c, r);
  }
};

// "a,b,c" into its topics (an empty one is left for ValidateSubscription
// to name).
std::vector<std::string> SplitTopics(std::string_view list) {
  std::vector<std::string> out;
  for (;;) {
    size_t comma = list.find(',');
    out.emplace_back(list.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    list.remove_prefix(comma + 1);
  }
}

std::optional<double> ParseDouble(std::string_view s) {
  double v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// SUBSCRIPTION SET's options, after name url topics, into *s. Each error
// names the option; ValidateSubscription (in Pusher::Put) checks the values.
Status ReadSubscriptionOptions(const RespServer::Args& a, Subscription* s) {
  for (size_t i = 5; i < a.size(); ++i) {  // after SUBSCRIPTION SET name url topics
    const size_t left = a.size() - i - 1;  // arguments after this one
    if (EqualsUpper(a[i], "CONCURRENCY") && left >= 1) {
      auto n = ParseInt(a[++i], 1, kMaxSubscriptionConcurrency);
      if (!n) return InvalidArgument("CONCURRENCY: expected an integer 1..10000");
      s->concurrency = static_cast<uint32_t>(*n);
    } else if (EqualsUpper(a[i], "TIMEOUT") && left >= 1) {
      Result<int64_t> t = ParseMsOrDuration(a[++i], "TIMEOUT", 1, kMaxPushTimeoutMs);
      if (!t.ok()) return t.status();
      s->timeout_ms = static_cast<uint32_t>(*t);
    } else if (EqualsUpper(a[i], "TTL") && left >= 1) {
      Result<int64_t> t = ParseMsOrDuration(a[++i], "TTL", 0, kMaxSubscriptionTtlMs);
      if (!t.ok()) return t.status();
      s->ttl_ms = *t;
    } else if (EqualsUpper(a[i], "SECRET") && left >= 1) {
      s->secrets.emplace_back(a[++i]);
    } else if (EqualsUpper(a[i], "RETRY") && left >= 3) {
      Result<int64_t> lo = ParseMsOrDuration(a[++i], "RETRY min_backoff", 0, kMaxPushBackoffMs);
      if (!lo.ok()) return lo.status();
      Result<int64_t> hi = ParseMsOrDuration(a[++i], "RETRY max_backoff", 0, kMaxPushBackoffMs);
      if (!hi.ok()) return hi.status();
      auto d = ParseInt(a[++i], 0, 62);
      if (!d) return InvalidArgument("RETRY max_doublings: expected an integer 0..62");
      s->retry = {*lo, *hi, static_cast<uint32_t>(*d)};
    } else if (EqualsUpper(a[i], "RATE") && left >= 1) {
      std::optional<double> r = ParseDouble(a[++i]);
      if (!r || !std::isfinite(*r) || *r < 0 || *r > 1e6) {
        return InvalidArgument("RATE: expected requests per second, 0..1000000 (0: no limit)");
      }
      s->rate_per_s = *r;
    } else {
      return InvalidArgument("SUBSCRIPTION SET: unknown or incomplete option '" +
                             std::string(a[i].substr(0, 32)) +
                             "' (CONCURRENCY n, TIMEOUT t, TTL t, SECRET s, RETRY min max "
                             "doublings, RATE r)");
    }
  }
  return Status::Ok();
}

}  // namespace

// SUBSCRIPTION SET name url topic[,topic...] [options]: what is left out
// takes its default (the instance is replaced whole, as HTTP's PUT does).
void RespServer::CmdSubscriptionSet(Connection& c, const Args& a) {
  if (pusher_ == nullptr) return ReplyStatus(&c.out, PushOff());
  Subscription s;
  s.name = std::string(a[2]);
  s.url = std::string(a[3]);
  s.topics = SplitTopics(a[4]);
  if (Status st = ReadSubscriptionOptions(a, &s); !st.ok()) return ReplyStatus(&c.out, st);
  Await<Result<Subscription>, AnswerSubscription>(
      c, [&](std::function<void(Result<Subscription>)> done) { pusher_->Put(s, std::move(done)); });
}

void RespServer::CmdSubscriptionDel(Connection& c, const Args& a) {
  if (pusher_ == nullptr) return ReplyStatus(&c.out, PushOff());
  if (Status st = ValidateSubscriptionName(a[2]); !st.ok()) return ReplyStatus(&c.out, st);
  std::string_view url = a.size() > 3 ? a[3] : std::string_view();
  Await<Result<uint64_t>, AnswerCount>(c, [&](std::function<void(Result<uint64_t>)> done) {
    pusher_->Delete(a[2], url, std::move(done));
  });
}

void RespServer::CmdSubscriptionGet(Connection& c, const Args& a) {
  if (pusher_ == nullptr) return ReplyStatus(&c.out, PushOff());
  // Describe("") would list every name: an empty one is no name.
  if (Status st = ValidateSubscriptionName(a[2]); !st.ok()) return ReplyStatus(&c.out, st);
  Await<Result<std::vector<push::InstanceView>>, AnswerNamedInstances>(
      c, [&](std::function<void(Result<std::vector<push::InstanceView>>)> done) {
        pusher_->Describe(a[2], std::move(done));
      });
}

void RespServer::CmdSubscriptionList(Connection& c, const Args&) {
  if (pusher_ == nullptr) return ReplyStatus(&c.out, PushOff());
  Await<Result<std::vector<push::InstanceView>>, AnswerInstances>(
      c, [&](std::function<void(Result<std::vector<push::InstanceView>>)> done) {
        pusher_->Describe("", std::move(done));
      });
}

// --- periodic jobs' schedules ------------------------------------------------------

namespace {

struct AnswerSchedule {
  void operator()(FrontEnd&, net::Connection& c, const Result<Schedule>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    wire::AppendRespPairs(&c.out, *r, wire::kScheduleFields, 0, Resp3(c));
  }
};

struct AnswerSchedules {
  void operator()(FrontEnd&, net::Connection& c, const Result<std::vector<Schedule>>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    resp::AppendArrayHeader(&c.out, r->size());
    for (const Schedule& s : *r) {
      wire::AppendRespPairs(&c.out, s, wire::kScheduleFields, 0, Resp3(c));
    }
  }
};

struct AnswerBackfill {
  void operator()(FrontEnd&, net::Connection& c, const Result<schedule::BackfillResult>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    wire::AppendRespPairs(&c.out, *r, wire::kBackfillFields<schedule::BackfillResult>, 0, Resp3(c));
  }
};

// The fields SCHEDULE SET takes: the definition's, as HTTP's PUT names them.
const std::vector<std::string>& ScheduleSetFields() {
  static const std::vector<std::string> kFields = {
      "cron",         "topic",   "timezone",          "body",    "ttr_ms", "priority",
      "max_attempts", "catchup", "catchup_window_ms", "overlap", "paused", "pause_on_failure"};
  return kFields;
}

std::string LowerAscii(std::string_view s) {
  std::string out(s);
  for (char& ch : out) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return out;
}

// 1/0, true/false (any case): a flag's value.
std::optional<bool> ParseFlag(std::string_view s) {
  const std::string v = LowerAscii(s);
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  return std::nullopt;
}

// One `field value` of SCHEDULE SET into *s; each error names the field.
Status ReadScheduleField(std::string_view field, std::string_view value, Schedule* s) {
  const std::string f = LowerAscii(field);
  if (f == "cron") {
    s->cron = std::string(value);
  } else if (f == "topic") {
    s->topic = std::string(value);
  } else if (f == "timezone") {
    s->timezone = std::string(value);
  } else if (f == "body") {
    s->body = std::string(value);
  } else if (f == "ttr_ms") {
    Result<int64_t> t = ParseMsOrDuration(value, "ttr_ms", 1, UINT32_MAX);
    if (!t.ok()) return t.status();
    s->ttr_ms = static_cast<uint32_t>(*t);
  } else if (f == "priority" || f == "max_attempts") {
    auto n = ParseInt(value, 0, UINT32_MAX);
    if (!n) return InvalidArgument(f + ": expected an integer 0..4294967295");
    (f == "priority" ? s->priority : s->max_attempts) = static_cast<uint32_t>(*n);
  } else if (f == "catchup") {
    if (!ParseCatchup(LowerAscii(value), &s->catchup)) {
      return InvalidArgument("catchup: expected none, last or all, not '" +
                             std::string(value.substr(0, 32)) + "'");
    }
  } else if (f == "catchup_window_ms") {
    Result<int64_t> w = ParseMsOrDuration(value, "catchup_window_ms", 1, kMaxCatchupWindowMs);
    if (!w.ok()) return w.status();
    s->catchup_window_ms = *w;
  } else if (f == "overlap") {
    if (!ParseOverlap(LowerAscii(value), &s->overlap)) {
      return InvalidArgument("overlap: expected allow, skip or buffer_one, not '" +
                             std::string(value.substr(0, 32)) + "'");
    }
  } else if (f == "paused" || f == "pause_on_failure") {
    std::optional<bool> b = ParseFlag(value);
    if (!b) return InvalidArgument(f + ": expected 1 or 0 (true or false)");
    (f == "paused" ? s->paused : s->pause_on_failure) = *b;
  } else {
    std::string m = "SCHEDULE SET: unknown field '" + std::string(field.substr(0, 32)) + "'";
    if (auto near = Nearest(f, ScheduleSetFields()))
      return InvalidArgument(m + " (did you mean '" + *near + "'?)");
    m += " (";
    for (const std::string& known : ScheduleSetFields()) {
      if (&known != &ScheduleSetFields().front()) m += ", ";
      m += known;
    }
    return InvalidArgument(m + ")");
  }
  return Status::Ok();
}

}  // namespace

// SCHEDULE SET name field value [field value ...]: what is left out takes its
// default (the definition is replaced whole, as HTTP's PUT does).
void RespServer::CmdScheduleSet(Connection& c, const Args& a) {
  if ((a.size() - 3) % 2 != 0) {
    return resp::AppendError(&c.out, "ERR wrong number of arguments for 'SCHEDULE|SET' command");
  }
  if (scheduler_ == nullptr) return ReplyStatus(&c.out, SchedulesOff());
  Schedule s;
  s.name = std::string(a[2]);
  for (size_t i = 3; i + 1 < a.size(); i += 2) {
    if (Status st = ReadScheduleField(a[i], a[i + 1], &s); !st.ok()) {
      return ReplyStatus(&c.out, st);
    }
  }
  if (Status st = ValidateScheduleDefinition(s); !st.ok()) return ReplyStatus(&c.out, st);
  Await<Result<Schedule>, AnswerSchedule>(
      c, [&](std::function<void(Result<Schedule>)> done) { scheduler_->Put(s, std::move(done)); });
}

void RespServer::CmdScheduleGet(Connection& c, const Args& a) {
  if (scheduler_ == nullptr) return ReplyStatus(&c.out, SchedulesOff());
  if (Status st = ValidateScheduleName(a[2]); !st.ok()) return ReplyStatus(&c.out, st);
  Await<Result<Schedule>, AnswerSchedule>(c, [&](std::function<void(Result<Schedule>)> done) {
    scheduler_->Get(a[2], std::move(done));
  });
}

void RespServer::CmdScheduleDel(Connection& c, const Args& a) {
  if (scheduler_ == nullptr) return ReplyStatus(&c.out, SchedulesOff());
  if (Status st = ValidateScheduleName(a[2]); !st.ok()) return ReplyStatus(&c.out, st);
  Await<Result<Schedule>, AnswerSchedule>(c, [&](std::function<void(Result<Schedule>)> done) {
    scheduler_->Delete(a[2], std::move(done));
  });
}

void RespServer::CmdScheduleList(Connection& c, const Args&) {
  if (scheduler_ == nullptr) return ReplyStatus(&c.out, SchedulesOff());
  Await<Result<std::vector<Schedule>>, AnswerSchedules>(
      c, [&](std::function<void(Result<std::vector<Schedule>>)> done) {
        scheduler_->List(std::move(done));
      });
}

void RespServer::CmdSchedulePause(Connection& c, const Args& a) {
  if (scheduler_ == nullptr) return ReplyStatus(&c.out, SchedulesOff());
  if (Status st = ValidateScheduleName(a[2]); !st.ok()) return ReplyStatus(&c.out, st);
  Await<Result<Schedule>, AnswerSchedule>(c, [&](std::function<void(Result<Schedule>)> done) {
    scheduler_->SetPaused(a[2], true, std::move(done));
  });
}

void RespServer::CmdScheduleResume(Connection& c, const Args& a) {
  if (scheduler_ == nullptr) return ReplyStatus(&c.out, SchedulesOff());
  if (Status st = ValidateScheduleName(a[2]); !st.ok()) return ReplyStatus(&c.out, st);
  Await<Result<Schedule>, AnswerSchedule>(c, [&](std::function<void(Result<Schedule>)> done) {
    scheduler_->SetPaused(a[2], false, std::move(done));
  });
}

// SCHEDULE BACKFILL name from_ms to_ms [overlap]: overlap allow (the
// default) adds every fire time of the range not fired yet; skip only the
// latest, none while a firing's job is live.
void RespServer::CmdScheduleBackfill(Connection& c, const Args& a) {
  if (scheduler_ == nullptr) return ReplyStatus(&c.out, SchedulesOff());
  if (Status st = ValidateScheduleName(a[2]); !st.ok()) return ReplyStatus(&c.out, st);
  auto from = ParseInt(a[3], 0, kMaxRunAtMs);
  if (!from) return ReplyInvalid(&c.out, "from_ms: expected a Unix time in ms");
  auto to = ParseInt(a[4], 0, kMaxRunAtMs);
  if (!to) return ReplyInvalid(&c.out, "to_ms: expected a Unix time in ms");
  if (*to < *from) return ReplyInvalid(&c.out, "to_ms: must not be before from_ms");
  Overlap overlap = Overlap::kAllow;
  if (a.size() > 5 && !ParseOverlap(LowerAscii(a[5]), &overlap)) {
    return ReplyInvalid(
        &c.out, "overlap: expected allow or skip, not '" + std::string(a[5].substr(0, 32)) + "'");
  }
  Await<Result<schedule::BackfillResult>, AnswerBackfill>(
      c, [&](std::function<void(Result<schedule::BackfillResult>)> done) {
        scheduler_->Backfill(a[2], *from, *to, overlap, std::move(done));
      });
}

}  // namespace delayq::server

// --- what Redis's tools send ---------------------------------------------------------
//
// Clients, proxies and monitoring tools send these on connect or to probe a
// server: redis-cli asks COMMAND DOCS for its help and hints, redis-py sends
// CLIENT SETNAME / SETINFO and SELECT, RESP3 clients begin with HELLO 3,
// exporters read INFO. They are answered in Redis 7's own forms, from
// delayq's figures and the command table.

namespace delayq::server {
namespace {

// What INFO's server section gives as redis_version: tools that read it to
// decide what a server can do (HELLO and RESP3, COMMAND DOCS, CLIENT
// SETINFO: Redis 7's connection commands) then use what delayq answers. It
// says nothing of Redis's data commands, which delayq does not have.
constexpr std::string_view kRedisVersion = "7.0.0";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) {
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  }
  return out;
}

// What CLIENT LIST may show of a name: Redis refuses spaces, newlines and
// other bytes outside '!'..'~' so that a line still splits on spaces.
bool PrintableWord(std::string_view s) {
  for (char ch : s) {
    if (ch < '!' || ch > '~') return false;
  }
  return true;
}

// "ip:port" of a socket's own or its peer's address; "" for what is not an
// IPv4 socket (the in-process tests' pipes).
std::string SocketAddress(int fd, bool peer) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                : getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  if (rc != 0 || sa.sin_family != AF_INET) return "";
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(sa.sin_port));
}

// Redis's arity: the argument count with the name, negative for "at least".
int64_t Arity(int min_args, int max_args) { return min_args == max_args ? min_args : -min_args; }

bool IsUpperWord(std::string_view w) {
  if (w.empty()) return false;
  for (char ch : w) {
    if (!((ch >= 'A' && ch <= 'Z') || ch == '-')) return false;
  }
  return true;
}

// One argument as COMMAND DOCS describes it, made from a row's syntax.
struct DocArgument {
  std::string name;
  std::string_view type;   // "string" or "pure-token"
  std::string_view token;  // a keyword before it ("PRIORITY"), if any
  bool optional = false;
};

// A syntax such as "topic [PRIORITY p] [REPLACE] [topic ...]" as arguments:
// each word, or each [bracketed] part (optional), is one. "[KEYWORD value]"
// and "[KEYWORD]" become tokens, so that redis-cli's hints print the syntax
// as written.
std::vector<DocArgument> ParseSyntax(std::string_view syntax) {
  std::vector<DocArgument> args;
  size_t i = 0;
  while (i < syntax.size()) {
    if (syntax[i] == ' ') {
      ++i;
      continue;
    }
    DocArgument arg;
    std::string_view part;
    if (syntax[i] == '[') {
      size_t depth = 0, j = i;
      for (; j < syntax.size(); ++j) {
        if (syntax[j] == '[') ++depth;
        if (syntax[j] == ']' && --depth == 0) break;
      }
      part = syntax.substr(i + 1, j - i - 1);
      arg.optional = true;
      i = j + 1;
    } else {
      size_t j = syntax.find(' ', i);
      if (j == std::string_view::npos) j = syntax.size();
      part = syntax.substr(i, j - i);
      i = j;
    }
    size_t space = part.find(' ');
    std::string_view first = part.substr(0, space);
    if (space == std::string_view::npos && IsUpperWord(part)) {
      arg = {Lower(part), "pure-token", part, arg.optional};
    } else if (IsUpperWord(first) && part.find(' ', space + 1) == std::string_view::npos) {
      arg = {std::string(part.substr(space + 1)), "string", first, arg.optional};
    } else {
      arg = {std::string(part), "string", {}, arg.optional};
    }
    args.push_back(std::move(arg));
  }
  return args;
}

// INFO's answer: the sections asked for travel with the queue's figures.
struct InfoResult {
  unsigned sections;
  Result<QueueStats> stats;
};
struct AnswerInfo {
  void operator()(FrontEnd& f, net::Connection& c, const InfoResult& r) const {
    if (!r.stats.ok()) return ReplyStatus(&c.out, r.stats.status());
    const std::string text = static_cast<RespServer&>(f).InfoText(r.sections, *r.stats);
    resp::AppendVerbatim(&c.out, text, RespStateOf(c).proto);
  }
};

}  // namespace

Status RespServer::CheckCredentials(std::string_view user, std::string_view token) const {
  if (user != "default") {
    return Status(Code::kUnauthorized, "invalid username '" + std::string(user.substr(0, 64)) +
                                           "': delayq has one user, \"default\"");
  }
  if (!options_.auth_token.empty() && !ConstantTimeEquals(options_.auth_token, token)) {
    return Status(Code::kUnauthorized, "invalid token");
  }
  return Status();
}

// HELLO [protover [AUTH username token] [SETNAME name]]: Redis's checks and
// words, except that a failing option changes nothing (Redis keeps an AUTH
// that came before it).
void RespServer::CmdHello(Connection& c, const Args& a) {
  RespState& s = RespStateOf(c);
  resp::Protocol proto = s.proto;
  if (a.size() >= 2) {
    auto v = ParseInt(a[1], INT64_MIN, INT64_MAX);
    if (!v) {
      return resp::AppendError(&c.out, "ERR Protocol version is not an integer or out of range");
    }
    if (*v != 2 && *v != 3)
      return resp::AppendError(&c.out, "NOPROTO unsupported protocol version");
    proto = *v == 3 ? resp::Protocol::kResp3 : resp::Protocol::kResp2;
  }
  bool authed = s.authed;
  std::optional<std::string_view> name;
  for (size_t i = 2; i < a.size(); ++i) {
    size_t more = a.size() - 1 - i;
    if (EqualsUpper(a[i], "AUTH") && more >= 2) {
      if (Status st = CheckCredentials(a[i + 1], a[i + 2]); !st.ok()) {
        return ReplyStatus(&c.out, st);
      }
      authed = true;
      i += 2;
    } else if (EqualsUpper(a[i], "SETNAME") && more >= 1) {
      if (!PrintableWord(a[i + 1])) {
        return resp::AppendError(
            &c.out, "ERR Client names cannot contain spaces, newlines or special characters.");
      }
      name = a[++i];
    } else {
      return resp::AppendError(
          &c.out, "ERR Syntax error in HELLO option '" + std::string(a[i].substr(0, 64)) + "'");
    }
  }
  if (!authed) {
    return ReplyStatus(&c.out, Status(Code::kUnauthorized,
                                      "HELLO must be called with the client already "
                                      "authenticated, otherwise the HELLO <proto> AUTH "
                                      "<user> <token> option can be used to authenticate "
                                      "the client and select the RESP protocol version at "
                                      "the same time"));
  }
  s.authed = true;
  s.proto = proto;
  if (name) s.name = std::string(*name);
  resp::AppendMapHeader(&c.out, 7, proto);
  resp::AppendBulk(&c.out, "server");
  resp::AppendBulk(&c.out, "delayq");
  resp::AppendBulk(&c.out, "version");
  resp::AppendBulk(&c.out, DELAYQ_VERSION);
  resp::AppendBulk(&c.out, "proto");
  resp::AppendInteger(&c.out, static_cast<int64_t>(proto));
  resp::AppendBulk(&c.out, "id");
  resp::AppendInteger(&c.out, static_cast<int64_t>(c.id));
  resp::AppendBulk(&c.out, "mode");
  resp::AppendBulk(&c.out, "standalone");
  resp::AppendBulk(&c.out, "role");
  resp::AppendBulk(&c.out, "master");
  resp::AppendBulk(&c.out, "modules");
  resp::AppendArrayHeader(&c.out, 0);
}

// SELECT 0 for clients that select their database on connect.
void RespServer::CmdSelect(Connection& c, const Args& a) {
  auto db = ParseInt(a[1], INT64_MIN, INT64_MAX);
  if (!db) return resp::AppendError(&c.out, "ERR value is not an integer or out of range");
  if (*db != 0) {
    return resp::AppendError(&c.out, "ERR DB index is out of range: delayq has database 0 only");
  }
  resp::AppendSimple(&c.out, "OK");
}

// INFO [section ...]: with no section, or default, all or everything, every
// section; a section delayq does not have adds nothing, as in Redis.
void RespServer::CmdInfo(Connection& c, const Args& a) {
  static constexpr std::pair<std::string_view, unsigned> kNames[] = {
      {"SERVER", kServer},     {"CLIENTS", kClients}, {"STATS", kStats}, {"DELAYQ", kDelayq},
      {"KEYSPACE", kKeyspace}, {"DEFAULT", ~0u},      {"ALL", ~0u},      {"EVERYTHING", ~0u},
  };
  unsigned sections = a.size() == 1 ? ~0u : 0;
  for (size_t i = 1; i < a.size(); ++i) {
    for (const auto& [name, bits] : kNames) {
      if (EqualsUpper(a[i], name)) sections |= bits;
    }
  }
  if ((sections & (kClients | kDelayq)) == 0) {
    return resp::AppendVerbatim(&c.out, InfoText(sections, QueueStats{}), RespStateOf(c).proto);
  }
  Await<InfoResult, AnswerInfo>(c, [&](std::function<void(InfoResult)> done) {
    queue_->StatsAsync([sections, done = std::move(done)](Result<QueueStats> r) {
      done(InfoResult{sections, std::move(r)});
    });
  });
}

std::string RespServer::InfoText(unsigned sections, const QueueStats& stats) const {
  std::string out;
  auto section = [&](unsigned bit, std::string_view title) {
    if ((sections & bit) == 0) return false;
    if (!out.empty()) out.append("\r\n");
    out.append("# ").append(title).append("\r\n");
    return true;
  };
  auto line = [&](std::string_view key, const wire::Value& v) {
    wire::AppendInfoLine(&out, key, v);
  };
  if (section(kServer, "Server")) {
    const int64_t uptime_s = (net::MonotonicNowMs() - started_ms_) / 1000;
    line("delayq_version", wire::Text(DELAYQ_VERSION));
    line("redis_version", wire::Text(kRedisVersion));
    line("redis_mode", wire::Text("standalone"));
    line("process_id", wire::Int(getpid()));
    line("tcp_port", wire::Int(port()));
    line("uptime_in_seconds", wire::Int(uptime_s));
    line("uptime_in_days", wire::Int(uptime_s / 86400));
    line("store", wire::Text(options_.store));
  }
  if (section(kClients, "Clients")) {
    line("connected_clients", wire::Uint(connections()));
    line("blocked_clients", wire::Uint(stats.waiting));
    line("maxclients", wire::Uint(options_.tcp.max_connections));
  }
  if (section(kStats, "Stats")) {
    line("total_connections_received", wire::Uint(connections_received_));
    line("total_commands_processed", wire::Uint(commands_processed_));
  }
  if (section(kDelayq, "Delayq")) {  // STATS's figures, in its order
    wire::AppendInfoLines(&out, stats, wire::kStatsFields);
    line("connections", wire::Uint(connections()));
    for (const auto& [k, v] : SharedStatsFields()) line(k, wire::Uint(v));
  }
  section(kKeyspace, "Keyspace");  // no Redis keys to count
  return out;
}

// COMMAND: every command, as Redis 7 describes one (COMMAND INFO).
void RespServer::CmdCommand(Connection& c, const Args& a) { CmdCommandInfo(c, {a[0], "INFO"}); }

void RespServer::CmdCommandCount(Connection& c, const Args&) {
  resp::AppendInteger(&c.out, static_cast<int64_t>(std::size(kCommands)));
}

void RespServer::CmdCommandList(Connection& c, const Args&) {
  size_t n = std::size(kCommands);
  for (const CommandSpec& cmd : kCommands) n += cmd.subcommands.size();
  resp::AppendArrayHeader(&c.out, n);
  for (const CommandSpec& cmd : kCommands) {
    resp::AppendBulk(&c.out, Lower(cmd.name));
    for (const CommandSpec& sub : cmd.subcommands) {
      resp::AppendBulk(&c.out, Lower(cmd.name) + "|" + Lower(sub.name));
    }
  }
}

const RespServer::CommandSpec* RespServer::FindFullName(std::string_view name) {
  size_t bar = name.find('|');
  const CommandSpec* cmd = FindCommand(name.substr(0, bar));
  if (cmd == nullptr || bar == std::string_view::npos) return cmd;
  return FindIn(cmd->subcommands, name.substr(bar + 1));
}

// The ten elements of Redis 7's COMMAND INFO: name, arity, flags, first
// key, last key, key step, ACL categories, tips, key specs, subcommands.
// A topic is not a Redis key, so no command has keys.
void RespServer::AppendCommandInfo(std::string* out, const CommandSpec& cmd,
                                   const CommandSpec* parent, resp::Protocol p) {
  resp::AppendArrayHeader(out, 10);
  std::string name = parent != nullptr ? Lower(parent->name) + "|" : "";
  resp::AppendBulk(out, name + Lower(cmd.name));
  resp::AppendInteger(out, Arity(cmd.min_args, cmd.max_args));
  const bool no_auth = !(parent != nullptr ? parent->needs_auth : cmd.needs_auth);
  resp::AppendSetHeader(out, no_auth ? 1 : 0, p);
  if (no_auth) resp::AppendSimple(out, "no_auth");
  resp::AppendInteger(out, 0);
  resp::AppendInteger(out, 0);
  resp::AppendInteger(out, 0);
  resp::AppendSetHeader(out, 1, p);
  std::string category(1, '@');
  resp::AppendSimple(out, category.append(parent != nullptr ? parent->group : cmd.group));
  resp::AppendArrayHeader(out, 0);
  resp::AppendArrayHeader(out, 0);
  if (cmd.subcommands.empty()) return resp::AppendSetHeader(out, 0, p);
  resp::AppendArrayHeader(out, cmd.subcommands.size());
  for (const CommandSpec& sub : cmd.subcommands) AppendCommandInfo(out, sub, &cmd, p);
}

// Redis 7's COMMAND DOCS entry: summary, since, group, arguments (from the
// row's syntax), subcommands. redis-cli builds its help and hints from it.
void RespServer::AppendCommandDocs(std::string* out, const CommandSpec& cmd,
                                   const CommandSpec* parent, resp::Protocol p) {
  const std::vector<DocArgument> args = ParseSyntax(cmd.syntax);
  resp::AppendMapHeader(out, 3 + !args.empty() + !cmd.subcommands.empty(), p);
  resp::AppendBulk(out, "summary");
  resp::AppendBulk(out, cmd.summary);
  resp::AppendBulk(out, "since");
  resp::AppendBulk(out, cmd.since);
  resp::AppendBulk(out, "group");
  resp::AppendBulk(out, parent != nullptr ? parent->group : cmd.group);
  if (!args.empty()) {
    resp::AppendBulk(out, "arguments");
    resp::AppendArrayHeader(out, args.size());
    for (const DocArgument& arg : args) {
      resp::AppendMapHeader(out, 2 + !arg.token.empty() + arg.optional, p);
      resp::AppendBulk(out, "name");
      resp::AppendBulk(out, arg.name);
      resp::AppendBulk(out, "type");
      resp::AppendBulk(out, arg.type);
      if (!arg.token.empty()) {
        resp::AppendBulk(out, "token");
        resp::AppendBulk(out, arg.token);
      }
      if (arg.optional) {
        resp::AppendBulk(out, "flags");
        resp::AppendSetHeader(out, 1, p);
        resp::AppendSimple(out, "optional");
      }
    }
  }
  if (!cmd.subcommands.empty()) {
    resp::AppendBulk(out, "subcommands");
    resp::AppendMapHeader(out, cmd.subcommands.size(), p);
    for (const CommandSpec& sub : cmd.subcommands) {
      resp::AppendBulk(out, Lower(cmd.name) + "|" + Lower(sub.name));
      AppendCommandDocs(out, sub, &cmd, p);
    }
  }
}

// COMMAND DOCS [name ...]: a map from name to its docs; names that are no
// command are left out, as Redis does.
void RespServer::CmdCommandDocs(Connection& c, const Args& a) {
  const resp::Protocol p = RespStateOf(c).proto;
  std::vector<std::pair<const CommandSpec*, const CommandSpec*>> found;  // (command, parent)
  if (a.size() == 2) {
    for (const CommandSpec& cmd : kCommands) found.emplace_back(&cmd, nullptr);
  }
  for (size_t i = 2; i < a.size(); ++i) {
    const CommandSpec* cmd = FindFullName(a[i]);
    if (cmd == nullptr) continue;
    size_t bar = a[i].find('|');
    found.emplace_back(cmd,
                       bar == std::string_view::npos ? nullptr : FindCommand(a[i].substr(0, bar)));
  }
  resp::AppendMapHeader(&c.out, found.size(), p);
  for (const auto& [cmd, parent] : found) {
    resp::AppendBulk(&c.out,
                     (parent != nullptr ? Lower(parent->name) + "|" : "") + Lower(cmd->name));
    AppendCommandDocs(&c.out, *cmd, parent, p);
  }
}

// COMMAND INFO [name ...]: one description per name, nil for no command.
void RespServer::CmdCommandInfo(Connection& c, const Args& a) {
  const resp::Protocol p = RespStateOf(c).proto;
  if (a.size() == 2) {
    resp::AppendArrayHeader(&c.out, std::size(kCommands));
    for (const CommandSpec& cmd : kCommands) AppendCommandInfo(&c.out, cmd, nullptr, p);
    return;
  }
  resp::AppendArrayHeader(&c.out, a.size() - 2);
  for (size_t i = 2; i < a.size(); ++i) {
    const CommandSpec* cmd = FindFullName(a[i]);
    if (cmd == nullptr) {
      resp::AppendNull(&c.out, p);
      continue;
    }
    size_t bar = a[i].find('|');
    AppendCommandInfo(&c.out, *cmd,
                      bar == std::string_view::npos ? nullptr : FindCommand(a[i].substr(0, bar)),
                      p);
  }
}

// CLIENT HELP, COMMAND HELP: the subcommands' syntax and summaries, as
// Redis's status lines.
void RespServer::CmdHelp(Connection& c, const Args& a) {
  const CommandSpec& cmd = *FindCommand(a[0]);
  const std::string name(cmd.name);
  resp::AppendArrayHeader(&c.out, 1 + 2 * cmd.subcommands.size());
  resp::AppendSimple(&c.out, name + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
  for (const CommandSpec& sub : cmd.subcommands) {
    std::string usage(sub.name);
    if (!sub.syntax.empty()) usage.append(" ").append(sub.syntax);
    resp::AppendSimple(&c.out, usage);
    resp::AppendSimple(&c.out, std::string(4, ' ').append(sub.summary));
  }
}

void RespServer::CmdClientSetName(Connection& c, const Args& a) {
  if (!PrintableWord(a[2])) {
    return resp::AppendError(
        &c.out, "ERR Client names cannot contain spaces, newlines or special characters.");
  }
  RespStateOf(c).name = std::string(a[2]);
  resp::AppendSimple(&c.out, "OK");
}

void RespServer::CmdClientGetName(Connection& c, const Args&) {
  const RespState& s = RespStateOf(c);
  if (s.name.empty()) return resp::AppendNull(&c.out, s.proto);
  resp::AppendBulk(&c.out, s.name);
}

void RespServer::CmdClientId(Connection& c, const Args&) {
  resp::AppendInteger(&c.out, static_cast<int64_t>(c.id));
}

// CLIENT SETINFO LIB-NAME|LIB-VER value (redis-py 5 sends both on connect).
void RespServer::CmdClientSetInfo(Connection& c, const Args& a) {
  RespState& s = RespStateOf(c);
  std::string* field = EqualsUpper(a[2], "LIB-NAME")  ? &s.lib_name
                       : EqualsUpper(a[2], "LIB-VER") ? &s.lib_ver
                                                      : nullptr;
  const std::string attr(a[2].substr(0, 64));
  if (field == nullptr) {
    return resp::AppendError(
        &c.out, "ERR Unrecognized option '" + attr + "': CLIENT SETINFO takes LIB-NAME or LIB-VER");
  }
  if (!PrintableWord(a[3])) {
    return resp::AppendError(
        &c.out, "ERR " + attr + " cannot contain spaces, newlines or special characters.");
  }
  *field = std::string(a[3]);
  resp::AppendSimple(&c.out, "OK");
}

std::string RespServer::ClientLine(const Connection& c) const {
  const auto& s = static_cast<const RespState&>(*c.state);
  const int64_t now = net::MonotonicNowMs();
  std::string cmd = "NULL";
  if (s.last != nullptr) {
    cmd = Lower(s.last->name);
    if (s.last_sub != nullptr) cmd.append("|").append(Lower(s.last_sub->name));
  }
  // A connection whose reserve waits is blocked, as in BLPOP: flags=b.
  const bool blocked = s.reserve_ticket != 0 || !s.reserves.empty();
  std::string line;
  line.append("id=").append(std::to_string(c.id));
  line.append(" addr=").append(SocketAddress(c.fd, true));
  line.append(" laddr=").append(SocketAddress(c.fd, false));
  line.append(" fd=").append(std::to_string(c.fd));
  line.append(" name=").append(s.name);
  line.append(" age=").append(std::to_string((now - s.opened_ms) / 1000));
  line.append(" idle=").append(std::to_string((now - s.last_command_ms) / 1000));
  line.append(" flags=").append(blocked ? "b" : "N");
  line.append(" db=0 sub=0 psub=0 ssub=0 multi=-1");
  // Input and output are one buffer each: arguments are views into the
  // input (argv-mem 0), replies one string (obl and oll 0, all in omem).
  line.append(" qbuf=").append(std::to_string(c.in.size()));
  line.append(" qbuf-free=").append(std::to_string(c.in.capacity() - c.in.size()));
  line.append(" argv-mem=0 multi-mem=0 obl=0 oll=0");
  line.append(" omem=").append(std::to_string(c.out.size()));
  line.append(" tot-mem=").append(std::to_string(c.in.capacity() + c.out.capacity()));
  line.append(" events=").append(c.reading ? "r" : "").append(c.want_write ? "w" : "");
  line.append(" cmd=").append(cmd);
  line.append(" user=default");
  line.append(" resp=").append(std::to_string(static_cast<int>(s.proto)));
  line.append(" lib-name=").append(s.lib_name);
  line.append(" lib-ver=").append(s.lib_ver);
  line.append("\n");
  return line;
}

// CLIENT LIST [TYPE normal] [ID id [id ...]]: every RESP connection is a
// normal client; the other types Redis has (master, replica, pubsub) list
// none.
void RespServer::CmdClientList(Connection& c, const Args& a) {
  bool none = false;
  std::vector<uint64_t> ids;
  for (size_t i = 2; i < a.size(); ++i) {
    if (EqualsUpper(a[i], "TYPE") && i + 1 < a.size()) {
      const std::string_view type = a[++i];
      if (EqualsUpper(type, "MASTER") || EqualsUpper(type, "REPLICA") ||
          EqualsUpper(type, "SLAVE") || EqualsUpper(type, "PUBSUB")) {
        none = true;
      } else if (!EqualsUpper(type, "NORMAL")) {
        return resp::AppendError(
            &c.out, "ERR Unknown client type '" + std::string(type.substr(0, 64)) + "'");
      }
    } else if (EqualsUpper(a[i], "ID") && i + 1 < a.size()) {
      for (++i; i < a.size(); ++i) {
        auto id = ParseInt(a[i], 1, INT64_MAX);
        if (!id) return resp::AppendError(&c.out, "ERR Invalid client ID");
        ids.push_back(static_cast<uint64_t>(*id));
      }
    } else {
      return resp::AppendError(&c.out,
                               "ERR syntax error: CLIENT LIST takes [TYPE normal] "
                               "[ID id [id ...]]");
    }
  }
  std::string text;
  for (const auto& [id, conn] : clients_) {
    if (none) break;
    if (!ids.empty() && std::find(ids.begin(), ids.end(), id) == ids.end()) continue;
    text += ClientLine(*conn);
  }
  resp::AppendVerbatim(&c.out, text, RespStateOf(c).proto);
}

void RespServer::CmdClientInfo(Connection& c, const Args&) {
  resp::AppendVerbatim(&c.out, ClientLine(c), RespStateOf(c).proto);
}

}  // namespace delayq::server
