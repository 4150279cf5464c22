// How a connection is served: net::TcpServer reads into c.in and calls
// OnInput, which parses and executes complete commands into c.out until the
// input runs dry or a command is held back; the server writes c.out once.
// A command the store answers later (Redis) keeps its reply's place and the
// commands behind it run meanwhile, within the order rules of FrontEnd
// ("Pipelining"): a RESERVE waits for the changes before it, anything but a
// RESERVE waits for the reserves before it.
#include "server/resp_server.h"

#include <charconv>
#include <cstring>
#include <optional>

#include "common/duration.h"
#include "common/secure_compare.h"
#include "resp/writer.h"
#include "server/errors.h"
#include "wire/encode.h"

namespace delayq::server {

struct RespServer::RespState : FrontEnd::State {
  resp::RequestParser parser;
  bool authed = false;
};

namespace {

RespServer::RespState& StateOf(net::Connection& c) {
  return static_cast<RespServer::RespState&>(*c.state);
}

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

}  // namespace

// The command table: name, arity (with the name), whether AUTH must come
// first, and the handler. Handlers parse, make one Queue call, and reply.
const RespServer::CommandSpec RespServer::kCommands[] = {
    {"PING", 1, 2, false, &RespServer::CmdPing},
    {"ECHO", 2, 2, false, &RespServer::CmdEcho},
    {"AUTH", 2, 2, false, &RespServer::CmdAuth},
    {"QUIT", 1, 1, false, &RespServer::CmdQuit},
    {"ADD", 6, 14, true, &RespServer::CmdAdd},
    {"RESERVE", 3, -1, true, &RespServer::CmdReserve},
    {"FINISH", 2, 3, true, &RespServer::CmdFinish},
    {"DELETE", 2, 2, true, &RespServer::CmdDelete},
    {"RELEASE", 3, 6, true, &RespServer::CmdRelease},
    {"TOUCH", 2, 3, true, &RespServer::CmdTouch},
    {"BURY", 2, 3, true, &RespServer::CmdBury},
    {"KICK", 2, 2, true, &RespServer::CmdKick},
    {"KICKTOPIC", 3, 3, true, &RespServer::CmdKickTopic},
    {"GET", 2, 2, true, &RespServer::CmdGet},
    {"PEEK", 3, 3, true, &RespServer::CmdPeek},
    {"PAUSE", 3, 3, true, &RespServer::CmdPause},
    {"RESUME", 2, 2, true, &RespServer::CmdResume},
    {"TOPICS", 1, 1, true, &RespServer::CmdTopics},
    {"STATS", 1, 2, true, &RespServer::CmdStats},
};

const RespServer::CommandSpec* RespServer::FindCommand(std::string_view name) {
  for (const CommandSpec& c : kCommands) {
    if (EqualsUpper(name, c.name)) return &c;
  }
  return nullptr;
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
    : FrontEnd(loop, queue, /*pipelining=*/true), options_(std::move(options)) {}

void RespServer::OnOpen(Connection& c) {
  auto s = std::make_unique<RespState>();
  s->parser = resp::RequestParser(options_.parser);
  s->authed = options_.auth_token.empty();
  c.state = std::move(s);
}

std::string_view RespServer::BusyReply() const { return "-ERR max number of clients reached\r\n"; }

std::string_view RespServer::TimeoutReply() const {
  return "-ERR request timed out: a command must arrive whole within the request timeout\r\n";
}

// Parses and executes complete commands until the input runs dry, a command
// parks the connection, or the connection is closing.
void RespServer::OnInput(Connection& c) {
  RespState& s = StateOf(c);
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

void RespServer::Execute(Connection& c, const Args& args) {
  const CommandSpec* cmd = FindCommand(args[0]);
  if (cmd == nullptr) {
    std::string name(args[0].substr(0, 64));
    resp::AppendError(&c.out, "ERR unknown command '" + name + "'");
    return;
  }
  int n = static_cast<int>(args.size());
  if (n < cmd->min_args || (cmd->max_args >= 0 && n > cmd->max_args)) {
    resp::AppendError(&c.out,
                      "ERR wrong number of arguments for '" + std::string(cmd->name) + "' command");
    return;
  }
  if (cmd->needs_auth && !StateOf(c).authed) {
    ReplyStatus(&c.out, Status(Code::kUnauthorized, "Authentication required: AUTH <token>"));
    return;
  }
  (this->*(cmd->handler))(c, args);
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

void RespServer::CmdAuth(Connection& c, const Args& a) {
  if (options_.auth_token.empty()) {
    resp::AppendError(&c.out, "ERR AUTH called without a token configured");
    return;
  }
  // As in Redis, a failed AUTH leaves an earlier successful one in force.
  if (ConstantTimeEquals(options_.auth_token, a[1])) {
    StateOf(c).authed = true;
    resp::AppendSimple(&c.out, "OK");
  } else {
    ReplyStatus(&c.out, Status(Code::kUnauthorized, "invalid token"));
  }
}

void RespServer::CmdQuit(Connection& c, const Args&) {
  resp::AppendSimple(&c.out, "OK");
  c.closing = true;
}

// ADD topic id|* delay ttr body [PRIORITY p] [MAXATTEMPTS n] [AT unix_ms] [REPLACE]
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
  for (size_t i = 6; i < a.size(); ++i) {
    bool has_value = i + 1 < a.size();
    if (EqualsUpper(a[i], "REPLACE")) {
      spec.replace = true;
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
    } else {
      return ReplyInvalid(
          &c.out, "ADD: unknown or incomplete option '" + std::string(a[i].substr(0, 32)) + "'");
    }
  }
  Await<Result<AddResult>, AnswerAdd>(
      c, [&](ServingQueue::AddCallback done) { queue_->AddAsync(spec, std::move(done)); });
}

// RESERVE [TIMEOUT ms|duration] [COUNT n] FROM topic [topic ...]
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
    } else {
      return ReplyInvalid(&c.out, "RESERVE: expected TIMEOUT ms, COUNT n or FROM topic...");
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
    resp::AppendNullArray(&c.out);
  } else {
    resp::AppendArrayHeader(&c.out, r->size());
    for (const Delivery& d : *r) AppendDelivery(&c.out, d);
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

void RespServer::CmdBury(Connection& c, const Args& a) {
  ReceiptCommand(
      c, a,
      [](ServingQueue* q, std::string_view id, std::string_view receipt,
         ServingQueue::StatusCallback done) { q->BuryAsync(id, receipt, "", std::move(done)); });
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
      if (r.status().code() == Code::kNotFound) return resp::AppendNullArray(&c.out);
      return ReplyStatus(&c.out, r.status());
    }
    wire::AppendRespPairs(&c.out, *r, wire::kJobFields);
  }
};

// PEEK's reply: the job as a delivery, as RESERVE sends it (a peeked job is
// not reserved: its receipt is "" and its reserved_until_ms 0); nil when the
// state is empty.
struct AnswerPeek {
  void operator()(FrontEnd&, net::Connection& c, const Result<JobInfo>& r) const {
    if (!r.ok()) {
      if (r.status().code() == Code::kNotFound) return resp::AppendNullArray(&c.out);
      return ReplyStatus(&c.out, r.status());
    }
    Delivery d;
    d.id = r->id;
    d.topic = r->topic;
    d.body = r->body;
    d.receipt = r->receipt;
    d.attempts = r->attempts;
    d.ttr_ms = r->ttr_ms;
    d.priority = r->priority;
    d.run_at_ms = r->run_at_ms;
    d.reserved_until_ms = r->reserved_until_ms;
    AppendDelivery(&c.out, d);
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
    wire::AppendRespPairs(&c.out, *r, wire::kTopicFields);
  }
};

struct AnswerStats {
  void operator()(FrontEnd& f, net::Connection& c, const Result<QueueStats>& r) const {
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    auto shared = f.SharedStatsFields();
    wire::AppendRespPairs(&c.out, *r, wire::kStatsFields, 1 + shared.size());
    wire::AppendRespPair(&c.out, "connections", wire::Uint(f.connections()));
    for (const auto& [k, v] : shared) wire::AppendRespPair(&c.out, k, wire::Uint(v));
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

}  // namespace delayq::server
