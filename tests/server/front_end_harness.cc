#include "server/front_end_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <ostream>

#include "gtest/gtest.h"
#include "queue/open.h"

namespace delayq::server::testing {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The line at `buf[pos]`, without its CRLF, and where the next begins; false if
// no CRLF yet.
bool Line(std::string_view buf, size_t pos, std::string_view* line, size_t* next) {
  size_t end = buf.find("\r\n", pos);
  if (end == std::string_view::npos) return false;
  *line = buf.substr(pos, end - pos);
  *next = end + 2;
  return true;
}

int64_t ToInt(std::string_view s) {
  int64_t v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

// ParseRespReply from `pos`: the end of the reply, or 0 if incomplete.
size_t ParseRespAt(std::string_view buf, size_t pos, RespReply* out) {
  if (pos >= buf.size()) return 0;
  std::string_view line;
  size_t next;
  if (!Line(buf, pos + 1, &line, &next)) return 0;
  using T = RespReply::Type;
  switch (buf[pos]) {
    case '+':
      *out = Simple(std::string(line));
      return next;
    case '-':
      *out = Error(std::string(line));
      return next;
    case ':':
      *out = Integer(ToInt(line));
      return next;
    case '$': {
      int64_t n = ToInt(line);
      if (n < 0) {
        *out = Nil();
        return next;
      }
      if (buf.size() < next + n + 2) return 0;
      *out = Bulk(std::string(buf.substr(next, n)));
      return next + n + 2;
    }
    case '*': {
      int64_t n = ToInt(line);
      if (n < 0) {
        *out = NilArray();
        return next;
      }
      RespReply r;
      r.type = T::kArray;
      for (int64_t i = 0; i < n; ++i) {
        RespReply e;
        next = ParseRespAt(buf, next, &e);
        if (next == 0) return 0;
        r.elements.push_back(std::move(e));
      }
      *out = std::move(r);
      return next;
    }
  }
  ADD_FAILURE() << "not a RESP reply: " << buf.substr(pos, 64);
  return 0;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

// --- replies ---------------------------------------------------------------------

RespReply Simple(std::string s) { return {RespReply::Type::kSimple, std::move(s), 0, {}}; }
RespReply Error(std::string s) { return {RespReply::Type::kError, std::move(s), 0, {}}; }
RespReply Integer(int64_t v) { return {RespReply::Type::kInteger, "", v, {}}; }
RespReply Bulk(std::string s) { return {RespReply::Type::kBulk, std::move(s), 0, {}}; }
RespReply Nil() { return {RespReply::Type::kNil, "", 0, {}}; }
RespReply NilArray() { return {RespReply::Type::kNilArray, "", 0, {}}; }
RespReply Array(std::vector<RespReply> elements) {
  return {RespReply::Type::kArray, "", 0, std::move(elements)};
}

std::string RespReply::ToString() const {
  using T = Type;
  switch (type) {
    case T::kSimple:
      return "+" + str + "\r\n";
    case T::kError:
      return "-" + str + "\r\n";
    case T::kInteger:
      return ":" + std::to_string(integer) + "\r\n";
    case T::kBulk:
      return "$" + std::to_string(str.size()) + "\r\n" + str + "\r\n";
    case T::kNil:
      return "$-1\r\n";
    case T::kNilArray:
      return "*-1\r\n";
    case T::kArray: {
      std::string s = "*" + std::to_string(elements.size()) + "\r\n";
      for (const RespReply& e : elements) s += e.ToString();
      return s;
    }
  }
  return "?";
}

void PrintTo(const RespReply& r, std::ostream* os) {
  *os << ::testing::PrintToString(r.ToString());
}

std::string RespCommand(std::initializer_list<std::string_view> args) {
  std::string s = "*" + std::to_string(args.size()) + "\r\n";
  for (std::string_view a : args) {
    s += "$" + std::to_string(a.size()) + "\r\n";
    s += a;
    s += "\r\n";
  }
  return s;
}

size_t ParseRespReply(std::string_view buf, RespReply* out) { return ParseRespAt(buf, 0, out); }

std::string HttpReply::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return v;
  }
  return "";
}

std::string HttpRequest(std::string_view method, std::string_view target, std::string_view body,
                        std::string_view extra_headers) {
  std::string s;
  s.append(method).append(" ").append(target).append(" HTTP/1.1\r\nHost: test\r\n");
  if (!body.empty()) {
    s.append("Content-Type: application/json\r\nContent-Length: ")
        .append(std::to_string(body.size()))
        .append("\r\n");
  }
  s.append(extra_headers).append("\r\n").append(body);
  return s;
}

size_t ParseHttpReply(std::string_view buf, HttpReply* out, bool head) {
  size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  HttpReply r;
  std::string_view line;
  size_t next;
  Line(buf, 0, &line, &next);  // "HTTP/1.1 200 OK"
  if (line.size() >= 12) r.status = static_cast<int>(ToInt(line.substr(9, 3)));
  while (next < end + 2 && Line(buf, next, &line, &next) && !line.empty()) {
    size_t colon = line.find(':');
    std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    r.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  size_t body_at = end + 4;
  if (r.status == 100) {  // interim: the caller reads the final response next
    *out = std::move(r);
    return body_at;
  }
  size_t length = head ? 0 : static_cast<size_t>(ToInt(r.Header("Content-Length")));
  if (buf.size() < body_at + length) return 0;
  r.body = std::string(buf.substr(body_at, length));
  *out = std::move(r);
  return body_at + length;
}

// --- the harness -----------------------------------------------------------------

FrontEndHarness::FrontEndHarness(FrontEndHarnessOptions options) : options_(std::move(options)) {
  // A client that left makes the server's write fail with EPIPE, not a signal
  // (`delayq serve` ignores SIGPIPE too).
  std::signal(SIGPIPE, SIG_IGN);
  QueueOptions qo;
  qo.store = options_.store;
  qo.fsync = options_.fsync;
  qo.clock = clock_;
  qo.redis_url = options_.redis_url;
  qo.redis_prefix = options_.redis_prefix;
  qo.redis_buckets = options_.redis_buckets;
  if (options_.store == StoreKind::kEmbedded) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "delayq-frontend-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    data_dir_ = tmpl;
    qo.data_dir = data_dir_;
  }
  OpenOptions open;
  open.caller_loop = true;
  open.file_system = options_.file_system;
  auto queue = OpenServingQueue(qo, open);
  if (!queue.ok()) {
    ADD_FAILURE() << "OpenServingQueue: " << queue.status().ToString();
    std::abort();
  }
  queue_ = std::move(queue).value();
  auto loop = net::EventLoop::Create();
  if (!loop.ok()) std::abort();
  loop_ = std::move(loop).value();

  // Wired as `delayq serve` wires them (src/server/main.cc).
  auto on_loop = QueueOnLoop::Attach(loop_.get(), queue_.get());
  if (!on_loop.ok()) {
    ADD_FAILURE() << "QueueOnLoop: " << on_loop.status().ToString();
    std::abort();
  }
  on_loop_ = std::move(on_loop).value();

  HttpServerOptions ho;
  ho.tcp.listen = false;
  ho.tcp.max_output_bytes = options_.max_output_bytes;
  ho.auth_token = options_.auth_token;
  auto http = HttpServer::Create(loop_.get(), queue_.get(), ho);
  RespServerOptions ro;
  ro.tcp.listen = false;
  ro.tcp.max_output_bytes = options_.max_output_bytes;
  ro.auth_token = options_.auth_token;
  ro.store = std::string(StoreKindName(options_.store));
  auto resp = RespServer::Create(loop_.get(), queue_.get(), ro);
  if (!http.ok() || !resp.ok()) {
    ADD_FAILURE() << "front ends: " << http.status().ToString() << " " << resp.status().ToString();
    std::abort();
  }
  http_ = std::move(http).value();
  resp_ = std::move(resp).value();
  if (options_.store == StoreKind::kEmbedded) {
    on_loop_->HoldReplies({http_.get(), resp_.get()},
                          /*sync_when_idle=*/options_.fsync == FsyncPolicy::kAlways);
  }
  if (options_.push) {
    push::PusherOptions po;
    po.clock = clock_;
    auto pusher = push::Pusher::Create(loop_.get(), queue_.get(), std::move(po));
    if (!pusher.ok()) {
      ADD_FAILURE() << "Pusher: " << pusher.status().ToString();
      std::abort();
    }
    pusher_ = std::move(pusher).value();
    http_->set_pusher(pusher_.get());
    resp_->set_pusher(pusher_.get());
  }
  if (options_.schedule) {
    schedule::SchedulerOptions so;
    so.clock = clock_;
    auto scheduler = schedule::Scheduler::Create(loop_.get(), queue_.get(), std::move(so));
    if (!scheduler.ok()) {
      ADD_FAILURE() << "Scheduler: " << scheduler.status().ToString();
      std::abort();
    }
    scheduler_ = std::move(scheduler).value();
    http_->set_scheduler(scheduler_.get());
    resp_->set_scheduler(scheduler_.get());
  }
  thread_ = std::thread([l = loop_.get()] { l->Run(); });
  if (pusher_ != nullptr) RunOnLoop([this] { pusher_->Start(); });
  if (scheduler_ != nullptr) RunOnLoop([this] { scheduler_->Start(); });
}

FrontEndHarness::~FrontEndHarness() {
  http_client_.reset();
  resp_client_.reset();
  if (pusher_ != nullptr) {
    // As `delayq serve` stops: the pusher's requests end (none are left
    // waiting: the deadline is 0) before the loop stops.
    std::promise<void> stopped;
    RunOnLoop([&] { pusher_->Stop(0, [&] { stopped.set_value(); }); });
    stopped.get_future().wait();
  }
  if (scheduler_ != nullptr) RunOnLoop([this] { scheduler_->Stop(); });
  loop_->Stop();
  thread_.join();
  // As `delayq serve` stops: connections first, then the pusher, the queue,
  // then the front ends.
  http_->CloseConnections();
  resp_->CloseConnections();
  pusher_.reset();
  scheduler_.reset();
  on_loop_->Detach();
  queue_.reset();
  http_.reset();
  resp_.reset();
  if (!data_dir_.empty()) std::filesystem::remove_all(data_dir_);
}

void FrontEndHarness::RunOnLoop(const std::function<void()>& fn) {
  std::promise<void> done;
  std::future<void> ran = done.get_future();
  loop_->Post([&fn, &done] {
    fn();
    done.set_value();
  });
  if (ran.wait_for(std::chrono::milliseconds(options_.reply_deadline_ms)) !=
      std::future_status::ready) {
    ADD_FAILURE() << "the loop did not run a task within the deadline";
    std::abort();  // `fn` and `done` would dangle
  }
}

void FrontEndHarness::AdvanceMs(int64_t ms) {
  clock_->Advance(ms);
  // The queue's fd is readable now; run what fell due here rather than
  // racing the loop's own turn, then let the answers it posted run.
  RunOnLoop([this] {
    if (QueueDriver* d = queue_->driver()) d->RunDue();
  });
  RunOnLoop([] {});
}

std::unique_ptr<FrontEndHarness::Client> FrontEndHarness::Connect(Protocol p) {
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2 failed";
    return nullptr;
  }
  FrontEnd* server = p == Protocol::kHttp ? static_cast<FrontEnd*>(http_.get()) : resp_.get();
  uint64_t id = 0;
  RunOnLoop([&] { id = server->tcp()->Adopt(fds[1]); });  // the server owns fds[1] now
  EXPECT_NE(id, 0u);
  return std::unique_ptr<Client>(new Client(this, p, fds[0], id));
}

RespReply FrontEndHarness::Resp(std::initializer_list<std::string_view> args) {
  if (!resp_client_) resp_client_ = Connect(Protocol::kResp);
  resp_client_->Send(RespCommand(args));
  return resp_client_->ReadResp();
}

HttpReply FrontEndHarness::Http(std::string_view method, std::string_view target,
                                std::string_view body, std::string_view extra_headers) {
  if (!http_client_) http_client_ = Connect(Protocol::kHttp);
  http_client_->Send(HttpRequest(method, target, body, extra_headers));
  return http_client_->ReadHttp(method == "HEAD");
}

// --- clients ---------------------------------------------------------------------

FrontEndHarness::Client::Client(FrontEndHarness* h, Protocol p, int read_fd, uint64_t id)
    : h_(h), protocol_(p), read_fd_(read_fd), id_(id) {}

FrontEndHarness::Client::~Client() {
  // The server notices on its next write, or closes it with the others.
  close(read_fd_);
}

FrontEnd* FrontEndHarness::Client::server() const {
  return protocol_ == Protocol::kHttp ? static_cast<FrontEnd*>(h_->http_.get()) : h_->resp_.get();
}

void FrontEndHarness::Client::Send(std::string_view bytes) {
  h_->RunOnLoop([&] { server()->tcp()->Deliver(id_, bytes); });
}

void FrontEndHarness::Client::SendAndShutdown(std::string_view bytes) {
  h_->RunOnLoop([&] { server()->tcp()->Deliver(id_, bytes, /*eof=*/true); });
}

void FrontEndHarness::Client::Disconnect() {
  close(read_fd_);
  read_fd_ = -1;
  closed_ = true;
  // A socket whose peer left reports an error at once; so does the pipe's
  // write end (EPOLLERR), on the loop's next turn. This task runs after it
  // only if the loop saw it first: flush explicitly so the server finds out
  // now, as its next write would.
  h_->RunOnLoop([this] {
    if (net::Connection* c = server()->tcp()->Find(id_)) server()->tcp()->Flush(*c);
  });
}

bool FrontEndHarness::Client::Pull(bool wait) {
  if (closed_) return false;
  int64_t deadline = NowMs() + (wait ? h_->options_.reply_deadline_ms : 0);
  for (;;) {
    char chunk[64 * 1024];
    ssize_t n = read(read_fd_, chunk, sizeof chunk);
    if (n > 0) {
      buf_.append(chunk, static_cast<size_t>(n));
      // More may be there: take it all before returning.
      while ((n = read(read_fd_, chunk, sizeof chunk)) > 0) buf_.append(chunk, n);
      if (n == 0) closed_ = true;
      return true;
    }
    if (n == 0) {
      closed_ = true;
      return false;
    }
    int64_t left = deadline - NowMs();
    if (left <= 0) return false;
    pollfd p{read_fd_, POLLIN, 0};
    poll(&p, 1, static_cast<int>(left));
  }
}

RespReply FrontEndHarness::Client::ReadResp() {
  for (;;) {
    RespReply r;
    if (size_t n = ParseRespReply(buf_, &r); n > 0) {
      buf_.erase(0, n);
      return r;
    }
    if (!Pull(/*wait=*/true)) {
      ADD_FAILURE() << "no whole RESP reply " << (closed_ ? "before the close" : "in time")
                    << "; have: " << ::testing::PrintToString(buf_);
      return Error("(no reply)");
    }
  }
}

HttpReply FrontEndHarness::Client::ReadHttp(bool head) {
  for (;;) {
    HttpReply r;
    if (size_t n = ParseHttpReply(buf_, &r, head); n > 0) {
      buf_.erase(0, n);
      if (r.status == 100) continue;
      return r;
    }
    if (!Pull(/*wait=*/true)) {
      ADD_FAILURE() << "no whole HTTP response " << (closed_ ? "before the close" : "in time")
                    << "; have: " << ::testing::PrintToString(buf_);
      return {};
    }
  }
}

std::string FrontEndHarness::Client::ReadToClose() {
  while (!closed_) {
    if (!Pull(/*wait=*/true) && !closed_) {
      ADD_FAILURE() << "the server did not close the connection in time";
      break;
    }
  }
  return std::exchange(buf_, {});
}

std::string FrontEndHarness::Client::Unread() {
  h_->RunOnLoop([] {});
  Pull(/*wait=*/false);
  return buf_;
}

}  // namespace delayq::server::testing
