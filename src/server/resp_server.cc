// How a connection is served: OnEvents reads what the socket has into `in`,
// Process parses and executes complete commands into `out` until the input
// runs dry or a RESERVE parks the connection, and Flush writes `out` once.
// A parked RESERVE is answered through FinishReserve, on the loop thread,
// which writes the reply and resumes Process for anything pipelined behind.
#include "server/resp_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "resp/writer.h"
#include "server/errors.h"

namespace delayq::server {

struct RespServer::Connection {
  uint64_t id = 0;
  int fd = -1;
  std::string in;
  std::string out;
  resp::RequestParser parser;
  bool authed = false;
  bool closing = false;         // QUIT or protocol error: close once `out` is written
  uint64_t reserve_ticket = 0;  // non-zero while a RESERVE waits
  bool want_write = false;      // EPOLLOUT armed
};

namespace {

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

void AppendDelivery(std::string* out, const Delivery& d) {
  resp::AppendArrayHeader(out, 5);
  resp::AppendBulk(out, d.id);
  resp::AppendBulk(out, d.topic);
  resp::AppendBulk(out, d.body);
  resp::AppendBulk(out, d.receipt);
  resp::AppendInteger(out, d.attempts);
}

void AppendPair(std::string* out, std::string_view key, std::string_view value) {
  resp::AppendBulk(out, key);
  resp::AppendBulk(out, value);
}

void AppendPair(std::string* out, std::string_view key, int64_t value) {
  resp::AppendBulk(out, key);
  resp::AppendBulk(out, std::to_string(value));
}

}  // namespace

// The command table: name, arity (with the name), whether AUTH must come
// first, and the handler. Handlers parse, make one Queue call, and reply.
const RespServer::CommandSpec RespServer::kCommands[] = {
    {"PING", 1, 2, false, &RespServer::CmdPing},
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

// --- lifecycle -------------------------------------------------------------------

Result<std::unique_ptr<RespServer>> RespServer::Create(net::EventLoop* loop, Queue* queue,
                                                       RespServerOptions options) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable("resp: socket() failed: " + std::string(strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (inet_pton(AF_INET, options.host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return InvalidArgument("resp listen address: '" + options.host + "' is not an IPv4 address");
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 1024) != 0) {
    std::string why = strerror(errno);
    close(fd);
    return Unavailable("resp: cannot listen on " + options.host + ":" +
                       std::to_string(options.port) + ": " + why);
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  auto server =
      std::unique_ptr<RespServer>(new RespServer(loop, queue, std::move(options), fd, port));
  RespServer* s = server.get();
  if (Status st = loop->Add(fd, EPOLLIN, [s](uint32_t) { s->OnAccept(); }); !st.ok()) return st;
  return server;
}

RespServer::RespServer(net::EventLoop* loop, Queue* queue, RespServerOptions options, int listen_fd,
                       int port)
    : loop_(loop),
      queue_(queue),
      options_(std::move(options)),
      listen_fd_(listen_fd),
      port_(port),
      alive_(std::make_shared<bool>(true)) {}

RespServer::~RespServer() {
  *alive_ = false;
  loop_->Remove(listen_fd_);
  close(listen_fd_);
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : conns_) ids.push_back(id);
  for (uint64_t id : ids) Close(id);
}

void RespServer::OnAccept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error the next readiness will retry
    if (conns_.size() >= options_.max_connections) {
      static constexpr char kFull[] = "-ERR max number of clients reached\r\n";
      [[maybe_unused]] ssize_t n = write(fd, kFull, sizeof kFull - 1);
      close(fd);
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_unique<Connection>();
    c->id = next_id_++;
    c->fd = fd;
    c->parser = resp::RequestParser(options_.parser);
    c->authed = options_.auth_token.empty();
    uint64_t id = c->id;
    conns_[id] = std::move(c);
    if (!loop_->Add(fd, EPOLLIN | EPOLLRDHUP, [this, id](uint32_t ev) { OnEvents(id, ev); }).ok()) {
      Close(id);
    }
  }
}

void RespServer::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  if (c.reserve_ticket != 0) queue_->CancelReserve(c.reserve_ticket);
  loop_->Remove(c.fd);
  close(c.fd);
  conns_.erase(it);
}

// --- I/O ---------------------------------------------------------------------------

void RespServer::OnEvents(uint64_t id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  if (events & (EPOLLERR | EPOLLHUP)) {
    Close(id);
    return;
  }
  if (events & EPOLLOUT) Flush(c);
  if (conns_.count(id) == 0) return;
  if (events & (EPOLLIN | EPOLLRDHUP)) ReadFrom(c);
}

void RespServer::ReadFrom(Connection& c) {
  uint64_t id = c.id;
  char buf[64 * 1024];
  bool eof = false;
  for (;;) {
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      if (static_cast<size_t>(n) < sizeof buf) break;
      continue;
    }
    if (n == 0) {
      eof = true;  // answer what was sent before the client's FIN, then close
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) break;
    Close(id);
    return;
  }
  Process(c);
  if (conns_.count(id) == 0) return;
  Flush(c);
  if (eof) Close(id);
}

void RespServer::Process(Connection& c) {
  size_t offset = 0;
  while (!c.closing && c.reserve_ticket == 0 && offset < c.in.size()) {
    size_t consumed = 0;
    std::string_view rest(c.in.data() + offset, c.in.size() - offset);
    resp::RequestParser::Status st = c.parser.Parse(rest, &consumed);
    if (st == resp::RequestParser::Status::kError) {
      resp::AppendError(&c.out, "ERR Protocol error: " + c.parser.error());
      c.closing = true;
      break;
    }
    if (st == resp::RequestParser::Status::kCommand) {
      offset += consumed;
      Execute(c, c.parser.args());  // views into c.in, which is untouched until below
      continue;
    }
    offset += consumed;
    if (consumed == 0) break;  // need more input
  }
  c.in.erase(0, offset);
}

void RespServer::Flush(Connection& c) {
  while (!c.out.empty()) {
    ssize_t n = write(c.fd, c.out.data(), c.out.size());
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    Close(c.id);
    return;
  }
  if (c.out.size() > options_.max_output_bytes) {
    Close(c.id);  // a client that does not read its replies
    return;
  }
  if (c.out.empty() && c.closing) {
    Close(c.id);
    return;
  }
  bool want = !c.out.empty();
  if (want != c.want_write) {
    c.want_write = want;
    loop_->Modify(c.fd, EPOLLIN | EPOLLRDHUP | (want ? uint32_t{EPOLLOUT} : 0u));
  }
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
  if (cmd->needs_auth && !c.authed) {
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

void RespServer::CmdAuth(Connection& c, const Args& a) {
  if (options_.auth_token.empty()) {
    resp::AppendError(&c.out, "ERR AUTH called without a token configured");
    return;
  }
  c.authed = a[1] == options_.auth_token;
  if (c.authed) {
    resp::AppendSimple(&c.out, "OK");
  } else {
    ReplyStatus(&c.out, Status(Code::kUnauthorized, "invalid token"));
  }
}

void RespServer::CmdQuit(Connection& c, const Args&) {
  resp::AppendSimple(&c.out, "OK");
  c.closing = true;
}

// ADD topic id|* delay_ms ttr_ms body [PRIORITY p] [MAXATTEMPTS n] [AT unix_ms] [REPLACE]
void RespServer::CmdAdd(Connection& c, const Args& a) {
  JobSpec spec;
  spec.topic = std::string(a[1]);
  if (a[2] != "*") spec.id = std::string(a[2]);
  auto delay = ParseInt(a[3], 0, kMaxDelayMs);
  if (!delay) return ReplyInvalid(&c.out, "delay_ms: expected an integer >= 0");
  spec.delay_ms = *delay;
  auto ttr = ParseInt(a[4], 1, UINT32_MAX);
  if (!ttr) return ReplyInvalid(&c.out, "ttr_ms: expected an integer 1..4294967295");
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
      auto at = ParseInt(a[++i], 0, kMaxRunAtMs);
      if (!at) return ReplyInvalid(&c.out, "AT: expected a Unix time in ms");
      spec.delay_ms.reset();
      spec.run_at_ms = *at;
    } else {
      return ReplyInvalid(
          &c.out, "ADD: unknown or incomplete option '" + std::string(a[i].substr(0, 32)) + "'");
    }
  }
  auto r = queue_->Add(spec);
  if (!r.ok()) return ReplyStatus(&c.out, r.status());
  resp::AppendBulk(&c.out, r->id);
}

// RESERVE [TIMEOUT ms] [COUNT n] FROM topic [topic ...]
void RespServer::CmdReserve(Connection& c, const Args& a) {
  ReserveRequest req;
  size_t i = 1;
  for (; i < a.size() && !EqualsUpper(a[i], "FROM"); ++i) {
    if (EqualsUpper(a[i], "TIMEOUT") && i + 1 < a.size()) {
      auto t = ParseInt(a[++i], 0, 86'400'000);
      if (!t) return ReplyInvalid(&c.out, "TIMEOUT: expected milliseconds 0..86400000");
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

  // The answer may come inside this call (jobs ready, or an error), from
  // the queue's thread, or inside another connection's command: only the
  // first is written here; the others are posted to the loop.
  uint64_t conn_id = c.id;
  std::shared_ptr<bool> alive = alive_;
  std::optional<Result<Deliveries>> now;
  reserving_conn_ = conn_id;
  uint64_t ticket = queue_->ReserveAsync(req, [this, conn_id, alive, &now](Result<Deliveries> r) {
    if (reserving_conn_ == conn_id) {
      now.emplace(std::move(r));
      return;
    }
    auto shared = std::make_shared<Result<Deliveries>>(std::move(r));
    loop_->Post([this, conn_id, alive, shared] {
      if (*alive) FinishReserve(conn_id, std::move(*shared));
    });
  });
  reserving_conn_ = 0;
  if (now) {
    c.reserve_ticket = 0;
    FinishReserve(conn_id, std::move(*now));
    return;
  }
  c.reserve_ticket = ticket;
}

void RespServer::FinishReserve(uint64_t conn_id, Result<Deliveries> r) {
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) {
    // The client left while its jobs were on the way: give them back now
    // rather than after their TTR.
    if (r.ok()) {
      for (const Delivery& d : *r) (void)queue_->Release(d.id, d.receipt, 0, "");
    }
    return;
  }
  Connection& c = *it->second;
  bool was_parked = c.reserve_ticket != 0;
  c.reserve_ticket = 0;
  if (!r.ok()) {
    ReplyStatus(&c.out, r.status());
  } else if (r->empty()) {
    resp::AppendNullArray(&c.out);
  } else {
    resp::AppendArrayHeader(&c.out, r->size());
    for (const Delivery& d : *r) AppendDelivery(&c.out, d);
  }
  if (was_parked) {  // resume what was pipelined behind the RESERVE
    Process(c);
    if (conns_.count(conn_id) != 0) Flush(c);
  }
}

void RespServer::CmdFinish(Connection& c, const Args& a) {
  ReplyStatus(&c.out, queue_->Finish(a[1], a.size() > 2 ? a[2] : std::string_view()));
}

void RespServer::CmdDelete(Connection& c, const Args& a) {
  ReplyStatus(&c.out, queue_->Delete(a[1]));
}

// RELEASE id delay_ms [receipt] [ERROR text]
void RespServer::CmdRelease(Connection& c, const Args& a) {
  auto delay = ParseInt(a[2], 0, kMaxDelayMs);
  if (!delay) return ReplyInvalid(&c.out, "delay_ms: expected an integer >= 0");
  std::string_view receipt, error;
  size_t i = 3;
  if (i < a.size() && !EqualsUpper(a[i], "ERROR")) receipt = a[i++];
  if (i < a.size()) {
    if (!EqualsUpper(a[i], "ERROR") || i + 2 != a.size()) {
      return ReplyInvalid(&c.out, "RELEASE: expected id delay_ms [receipt] [ERROR text]");
    }
    error = a[i + 1];
  }
  ReplyStatus(&c.out, queue_->Release(a[1], receipt, *delay, error));
}

void RespServer::CmdTouch(Connection& c, const Args& a) {
  ReplyStatus(&c.out, queue_->Touch(a[1], a.size() > 2 ? a[2] : std::string_view()));
}

void RespServer::CmdBury(Connection& c, const Args& a) {
  ReplyStatus(&c.out, queue_->Bury(a[1], a.size() > 2 ? a[2] : std::string_view(), ""));
}

void RespServer::CmdKick(Connection& c, const Args& a) { ReplyStatus(&c.out, queue_->Kick(a[1])); }

void RespServer::CmdKickTopic(Connection& c, const Args& a) {
  auto n = ParseInt(a[2], 0, INT64_MAX);
  if (!n) return ReplyInvalid(&c.out, "n: expected an integer >= 0");
  auto r = queue_->KickTopic(a[1], static_cast<uint64_t>(*n));
  if (!r.ok()) return ReplyStatus(&c.out, r.status());
  resp::AppendInteger(&c.out, static_cast<int64_t>(*r));
}

void RespServer::CmdGet(Connection& c, const Args& a) {
  auto r = queue_->Get(a[1]);
  if (!r.ok()) {
    if (r.status().code() == Code::kNotFound) return resp::AppendNullArray(&c.out);
    return ReplyStatus(&c.out, r.status());
  }
  const JobInfo& j = *r;
  resp::AppendArrayHeader(&c.out, 26);
  AppendPair(&c.out, "id", j.id);
  AppendPair(&c.out, "topic", j.topic);
  AppendPair(&c.out, "state", StateName(j.state));
  AppendPair(&c.out, "body", j.body);
  AppendPair(&c.out, "priority", j.priority);
  AppendPair(&c.out, "ttr_ms", j.ttr_ms);
  AppendPair(&c.out, "max_attempts", j.max_attempts);
  AppendPair(&c.out, "attempts", j.attempts);
  AppendPair(&c.out, "created_at_ms", j.created_at_ms);
  AppendPair(&c.out, "run_at_ms", j.run_at_ms);
  AppendPair(&c.out, "reserved_until_ms", j.reserved_until_ms);
  AppendPair(&c.out, "receipt", j.receipt);
  AppendPair(&c.out, "last_error", j.last_error);
}

void RespServer::CmdPeek(Connection& c, const Args& a) {
  std::optional<JobState> state;
  if (EqualsUpper(a[2], "READY")) state = JobState::kReady;
  if (EqualsUpper(a[2], "DELAYED")) state = JobState::kDelayed;
  if (EqualsUpper(a[2], "BURIED")) state = JobState::kBuried;
  if (!state) return ReplyInvalid(&c.out, "PEEK: state must be READY, DELAYED or BURIED");
  auto r = queue_->Peek(a[1], *state);
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
  AppendDelivery(&c.out, d);
}

void RespServer::CmdPause(Connection& c, const Args& a) {
  auto ms = ParseInt(a[2], 0, kMaxDelayMs);
  if (!ms) return ReplyInvalid(&c.out, "ms: expected an integer >= 0 (0 = until RESUME)");
  ReplyStatus(&c.out, queue_->Pause(a[1], *ms));
}

void RespServer::CmdResume(Connection& c, const Args& a) {
  ReplyStatus(&c.out, queue_->Resume(a[1]));
}

void RespServer::CmdTopics(Connection& c, const Args&) {
  auto r = queue_->Topics();
  if (!r.ok()) return ReplyStatus(&c.out, r.status());
  resp::AppendArrayHeader(&c.out, r->size());
  for (const TopicInfo& t : *r) resp::AppendBulk(&c.out, t.name);
}

void RespServer::CmdStats(Connection& c, const Args& a) {
  if (a.size() == 2) {
    auto r = queue_->Topic(a[1]);
    if (!r.ok()) return ReplyStatus(&c.out, r.status());
    resp::AppendArrayHeader(&c.out, 16);
    AppendPair(&c.out, "topic", r->name);
    AppendPair(&c.out, "delayed", static_cast<int64_t>(r->delayed));
    AppendPair(&c.out, "ready", static_cast<int64_t>(r->ready));
    AppendPair(&c.out, "reserved", static_cast<int64_t>(r->reserved));
    AppendPair(&c.out, "buried", static_cast<int64_t>(r->buried));
    AppendPair(&c.out, "waiting", static_cast<int64_t>(r->waiting));
    AppendPair(&c.out, "paused", r->paused ? 1 : 0);
    AppendPair(&c.out, "paused_for_ms", r->paused_for_ms);
    return;
  }
  auto r = queue_->Stats();
  if (!r.ok()) return ReplyStatus(&c.out, r.status());
  const QueueStats& s = *r;
  const std::pair<std::string_view, uint64_t> fields[] = {
      {"jobs", s.jobs},
      {"delayed", s.delayed},
      {"ready", s.ready},
      {"reserved", s.reserved},
      {"buried", s.buried},
      {"topics", s.topics},
      {"waiting", s.waiting},
      {"added", s.added},
      {"replaced", s.replaced},
      {"reserves", s.reserves},
      {"finished", s.finished},
      {"deleted", s.deleted},
      {"released", s.released},
      {"timed_out", s.timed_out},
      {"buried_total", s.buried_total},
      {"kicked", s.kicked},
      {"connections", conns_.size()},
  };
  resp::AppendArrayHeader(&c.out, 2 * std::size(fields));
  for (const auto& [k, v] : fields) AppendPair(&c.out, k, static_cast<int64_t>(v));
}

}  // namespace delayq::server
