// How it works. A Call is one request; a Conn one TCP connection, in its
// host's Pool. A Call gets an idle Conn of its pool (the most recently used:
// the warmest), else a new one if the pool is below max_idle_per_host, else
// waits in the pool's FIFO. A Conn is registered with the loop once, when it
// is created, for EPOLLIN | EPOLLOUT | EPOLLRDHUP edge-triggered, and removed
// only when it is closed: the events say what to do from its state
// (connecting, busy with a Call, idle).
//
// Edge-triggered reads: a read that fills less than the buffer has emptied
// the socket, and any later byte raises a new edge, so one read per event is
// enough unless the buffer came back full or the peer has closed (then the
// EOF is read at once). Beast's parser takes the bytes straight from the
// read buffer; only what it leaves unconsumed (a header cut in two) is kept
// on the Conn.
//
// Done runs exactly once: from an event on the Call's connection, from the
// timeout sweep, or from a 0 ms timer for a failure found while a Call was
// being started (so never inside Post). It is always the last thing a
// handler does, so a Done may Post, Cancel, or destroy the client; the sweep,
// which ends several Calls, checks between them that the transport is alive.
#include "push/http1_transport.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/optional.hpp>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>  // before Beast: its headers use std::exchange unincluded on g++ 12
#include <vector>

#include "delayq/version.h"

namespace delayq::push {
namespace {

namespace bhttp = boost::beast::http;
using boost::system::error_code;

// The most header bytes of one response (as on the libcurl path).
constexpr size_t kMaxHeaderBytes = 64 << 10;
// One read's buffer, shared by all connections.
constexpr size_t kReadBytes = 64 << 10;
// Finished Calls kept for reuse (their strings keep their capacity).
constexpr size_t kMaxFreeCalls = 1024;
constexpr size_t kKeptBodyCapacity = 64 << 10;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool HasLineBreak(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + ('a' - 'A')) : c; }

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view TrimOws(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string ConnectError(int err) {
  if (err == ECONNREFUSED) return "connection refused";
  return std::string("cannot connect: ") + std::strerror(err);
}

std::string IoError(int err) {
  if (err == ECONNRESET || err == EPIPE) return "connection reset";
  return std::string("connection error: ") + std::strerror(err);
}

// A URL this transport takes, in pieces: "http://" (any case), a numeric
// host, an optional port, a path of printable ASCII. False for anything
// else (libcurl's).
struct UrlParts {
  std::string_view authority;  // host[:port], as written: the Host header
  std::string_view host;       // without brackets
  std::string_view port;       // empty: 80
  std::string_view path;       // from the first '/' or '?', without a fragment
  bool ipv6 = false;
};

bool SplitUrl(std::string_view url, UrlParts* out) {
  if (url.size() < 7 || !IEquals(url.substr(0, 7), "http://")) return false;
  url.remove_prefix(7);
  size_t end = url.find_first_of("/?#");
  out->authority = url.substr(0, end);
  out->path = end == std::string_view::npos ? std::string_view() : url.substr(end);
  out->path = out->path.substr(0, out->path.find('#'));
  if (out->authority.empty() || out->authority.find('@') != std::string_view::npos) return false;
  for (char c : out->path) {
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      return false;
  }
  std::string_view rest;
  if (out->authority[0] == '[') {
    size_t close = out->authority.find(']');
    if (close == std::string_view::npos) return false;
    out->host = out->authority.substr(1, close - 1);
    rest = out->authority.substr(close + 1);
    out->ipv6 = true;
  } else {
    size_t colon = out->authority.find(':');
    out->host = out->authority.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : out->authority.substr(colon);
  }
  out->port = {};
  if (!rest.empty()) {
    if (rest[0] != ':') return false;
    out->port = rest.substr(1);
  }
  return !out->host.empty();
}

// The status, Retry-After and Delayq-Outcome of a response, and its body up
// to a limit, taken as Beast parses (no field container).
class ResponseParser final : public bhttp::basic_parser<false> {
 public:
  ResponseParser(HttpResponse* response, size_t max_body)
      : response_(response), max_body_(max_body) {
    eager(true);
    header_limit(static_cast<uint32_t>(kMaxHeaderBytes));
    // Counted in Keep instead, so the first max_body bytes are kept. Not
    // boost::none: Beast 1.74 compares a Content-Length with the limit as
    // an optional, and every length is above none.
    body_limit(std::numeric_limits<std::uint64_t>::max());
  }
  int status() const { return status_; }
  bool body_over() const { return body_over_; }

 private:
  void on_request_impl(bhttp::verb, boost::beast::string_view, boost::beast::string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, boost::beast::string_view, int, error_code&) override {
    status_ = code;
    // A status line starts a response's headers (after a 1xx, another).
    response_->retry_after.clear();
    response_->outcome.clear();
  }
  void on_field_impl(bhttp::field name, boost::beast::string_view name_string,
                     boost::beast::string_view value, error_code&) override {
    if (header_done_) return;  // a trailer
    std::string_view v = TrimOws(std::string_view(value.data(), value.size()));
    if (name == bhttp::field::retry_after) {
      response_->retry_after.assign(v);
    } else if (name == bhttp::field::unknown &&
               IEquals(std::string_view(name_string.data(), name_string.size()),
                       "delayq-outcome")) {
      response_->outcome.assign(v);
    }
  }
  void on_header_impl(error_code&) override { header_done_ = true; }
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(boost::beast::string_view body, error_code& ec) override {
    return Keep(body, ec);
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body,
                            error_code& ec) override {
    return Keep(body, ec);
  }
  void on_finish_impl(error_code&) override {}

  size_t Keep(boost::beast::string_view data, error_code& ec) {
    std::string& body = response_->body;
    if (body.size() + data.size() > max_body_) {
      body.append(data.data(), max_body_ - body.size());
      body_over_ = true;
      ec = bhttp::error::body_limit;
      return data.size();
    }
    body.append(data.data(), data.size());
    return data.size();
  }

  HttpResponse* const response_;
  const size_t max_body_;
  int status_ = 0;
  bool header_done_ = false;
  bool body_over_ = false;
};

}  // namespace

class Http1Transport::Impl {
 public:
  Impl(net::EventLoop* loop, const HttpClientOptions& options)
      : loop_(loop),
        max_body_(options.max_response_bytes),
        max_per_host_(static_cast<size_t>(std::max(1L, options.max_idle_per_host))),
        max_idle_(static_cast<size_t>(std::max(0L, options.max_total_connections))),
        scratch_(new char[kReadBytes]) {}
  ~Impl();

  bool Post(uint64_t id, HttpRequest& request, HttpClient::Done& done);
  bool Cancel(uint64_t id);
  size_t in_flight() const { return calls_.size(); }

 private:
  struct Conn;
  struct Pool;
  // Calls with the same timeout, in the order of their deadlines.
  struct Call;
  struct Deadlines {
    Call* head = nullptr;
    Call* tail = nullptr;
  };
  struct Call {
    uint64_t id = 0;
    Pool* pool = nullptr;
    Conn* conn = nullptr;  // the connection it is on, if any
    bool waiting = false;  // in pool->waiting
    bool retried = false;  // sent again once already
    std::string head;      // request line and headers
    std::string body;
    size_t written = 0;  // of head + body
    int64_t timeout_ms = 0;
    int64_t start_us = 0;
    int64_t deadline_ms = 0;
    Deadlines* deadlines = nullptr;  // null: not tracked
    Call* prev = nullptr;
    Call* next = nullptr;
    uint64_t fail_timer = 0;
    std::string fail_error;
    HttpResponse response;
    HttpClient::Done done;
  };
  struct Conn {
    int fd = -1;
    Pool* pool = nullptr;
    enum State { kConnecting, kBusy, kIdle } state = kConnecting;
    Call* call = nullptr;
    bool reused = false;       // carried a request before the current one
    bool got_bytes = false;    // a byte of the current response arrived
    bool peer_closed = false;  // EPOLLRDHUP: the receiver closed its side
    bool want_write = false;   // part of the request waits for EPOLLOUT
    std::string in;            // bytes read, not yet parsed
    std::optional<ResponseParser> parser;
  };
  struct Pool {
    std::string authority;
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
    std::vector<Conn*> idle;  // most recently used last
    size_t open = 0;          // connections, any state
    std::deque<Call*> waiting;
  };

  // The pool for `url`'s host if this transport takes it; *path its path.
  Pool* PoolFor(std::string_view url, std::string_view* path);
  Call* Acquire(uint64_t id);
  void Recycle(std::unique_ptr<Call> c);
  void Start(Call* c);
  void Connect(Call* c);
  void Assign(Conn* conn, Call* c);
  // Writes what is left of the request; false on an error (in *err).
  bool Write(Conn* conn, int* err);
  // A write failed: the Call is retried, or fails now (`now`) or later.
  void WriteFailed(Conn* conn, int err, bool now);
  void OnReady(Conn* conn, uint32_t events);
  void ReadResponse(Conn* conn, uint32_t events);
  // Parses what was read; true when the handler is done with the event
  // (the response completed or failed, and Done ran).
  bool Parse(Conn* conn, const char* data, size_t n);
  void Respond(Conn* conn);
  void Release(Conn* conn);
  void CloseConn(Conn* conn, bool serve_waiters = true);
  void ServeWaiters(Pool* pool);
  Call* Detach(Conn* conn);
  void Retry(Call* c);
  void FailLater(Call* c, std::string error);
  void Finish(Call* c, std::string error, bool timed_out);
  void Track(Call* c);
  void Untrack(Call* c);
  void ArmSweep(int64_t deadline_ms);
  void OnSweep();

  net::EventLoop* const loop_;
  const size_t max_body_;
  const size_t max_per_host_;
  const size_t max_idle_;
  std::unique_ptr<char[]> scratch_;  // kReadBytes
  // Loop thread only, all of it.
  std::unordered_map<uint64_t, std::unique_ptr<Call>> calls_;
  std::vector<std::unique_ptr<Call>> free_;
  std::unordered_map<std::string, std::unique_ptr<Pool>> pools_;
  std::unordered_set<Conn*> conns_;
  size_t idle_total_ = 0;
  std::map<int64_t, Deadlines> deadlines_;  // by timeout_ms
  uint64_t sweep_timer_ = 0;
  int64_t sweep_deadline_ms_ = -1;
  // Cleared by the destructor, so a sweep whose Done destroys the client
  // stops instead of touching freed state.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

Http1Transport::Impl::~Impl() {
  *alive_ = false;
  if (sweep_timer_ != 0) loop_->CancelTimer(sweep_timer_);
  for (auto& [id, c] : calls_) {
    if (c->fail_timer != 0) loop_->CancelTimer(c->fail_timer);
  }
  for (Conn* conn : conns_) {
    loop_->Remove(conn->fd);
    close(conn->fd);
    delete conn;
  }
}

Http1Transport::Impl::Pool* Http1Transport::Impl::PoolFor(std::string_view url,
                                                          std::string_view* path) {
  UrlParts u;
  if (!SplitUrl(url, &u)) return nullptr;
  *path = u.path;
  std::string key(u.authority);
  auto it = pools_.find(key);
  if (it != pools_.end()) return it->second.get();
  unsigned port = 80;
  if (!u.port.empty()) {
    auto [end, ec] = std::from_chars(u.port.data(), u.port.data() + u.port.size(), port);
    if (ec != std::errc() || end != u.port.data() + u.port.size() || port == 0 || port > 65535) {
      return nullptr;  // libcurl says what is wrong with it
    }
  }
  auto pool = std::make_unique<Pool>();
  const std::string host(u.host);
  if (u.ipv6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&pool->addr);
    if (inet_pton(AF_INET6, host.c_str(), &a->sin6_addr) != 1) return nullptr;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    pool->addr_len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&pool->addr);
    if (inet_pton(AF_INET, host.c_str(), &a->sin_addr) != 1) return nullptr;  // a name
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    pool->addr_len = sizeof *a;
  }
  pool->authority = key;
  Pool* raw = pool.get();
  pools_.emplace(std::move(key), std::move(pool));
  return raw;
}

bool Http1Transport::Impl::Post(uint64_t id, HttpRequest& request, HttpClient::Done& done) {
  std::string_view path;
  Pool* pool = PoolFor(request.url, &path);
  if (pool == nullptr) return false;
  Call* c = Acquire(id);
  c->pool = pool;
  c->done = std::move(done);
  c->start_us = NowUs();
  c->timeout_ms = request.timeout_ms > 0 ? request.timeout_ms : 1;
  std::string& h = c->head;
  h.assign("POST ");
  if (path.empty() || path[0] == '?') h += '/';
  h.append(path);
  h.append(" HTTP/1.1\r\nHost: ");
  h.append(pool->authority);
  h.append("\r\nUser-Agent: delayq/" DELAYQ_VERSION
           "\r\nContent-Type: application/json\r\nContent-Length: ");
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, request.body.size());
  h.append(digits, end);
  h.append("\r\n");
  for (const auto& [name, value] : request.headers) {
    if (HasLineBreak(name) || HasLineBreak(value)) {
      FailLater(c, "bad request header: " + name + " holds a line break");
      return true;
    }
    h.append(name).append(": ").append(value).append("\r\n");
  }
  h.append("\r\n");
  c->body = std::move(request.body);
  Track(c);
  Start(c);
  return true;
}

Http1Transport::Impl::Call* Http1Transport::Impl::Acquire(uint64_t id) {
  std::unique_ptr<Call> c;
  if (!free_.empty()) {
    c = std::move(free_.back());
    free_.pop_back();
  } else {
    c = std::make_unique<Call>();
  }
  Call* raw = c.get();
  raw->id = id;
  calls_.emplace(id, std::move(c));
  return raw;
}

void Http1Transport::Impl::Recycle(std::unique_ptr<Call> c) {
  if (free_.size() >= kMaxFreeCalls) return;
  c->pool = nullptr;
  c->conn = nullptr;
  c->waiting = c->retried = false;
  c->written = 0;
  c->fail_timer = 0;
  c->fail_error.clear();
  c->done = nullptr;
  c->body.clear();
  if (c->body.capacity() > kKeptBodyCapacity) c->body.shrink_to_fit();
  c->response = HttpResponse{};
  free_.push_back(std::move(c));
}

void Http1Transport::Impl::Start(Call* c) {
  Pool* pool = c->pool;
  if (!pool->idle.empty()) {
    Conn* conn = pool->idle.back();
    pool->idle.pop_back();
    --idle_total_;
    Assign(conn, c);
  } else if (pool->open < max_per_host_) {
    Connect(c);
  } else {
    c->waiting = true;
    pool->waiting.push_back(c);
  }
}

void Http1Transport::Impl::Connect(Call* c) {
  Pool* pool = c->pool;
  int fd = socket(pool->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return FailLater(c, std::string("cannot connect: ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto* conn = new Conn;
  conn->fd = fd;
  conn->pool = pool;
  conns_.insert(conn);
  ++pool->open;
  conn->call = c;
  c->conn = conn;
  c->written = 0;
  conn->parser.emplace(&c->response, max_body_);
  Status added = loop_->Add(fd, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET,
                            [this, conn](uint32_t events) { OnReady(conn, events); });
  if (!added.ok()) {
    Detach(conn);
    CloseConn(conn, false);
    return FailLater(c, "cannot connect: " + added.message());
  }
  if (connect(fd, reinterpret_cast<const sockaddr*>(&pool->addr), pool->addr_len) == 0) {
    conn->state = Conn::kBusy;
    int err = 0;
    if (!Write(conn, &err)) WriteFailed(conn, err, /*now=*/false);
    return;
  }
  if (errno == EINPROGRESS || errno == EINTR) {
    conn->state = Conn::kConnecting;  // EPOLLOUT says when
    return;
  }
  const int err = errno;
  Detach(conn);
  CloseConn(conn, false);  // the waiters are served when this failure is told
  FailLater(c, ConnectError(err));
}

void Http1Transport::Impl::Assign(Conn* conn, Call* c) {
  conn->state = Conn::kBusy;
  conn->call = c;
  conn->got_bytes = false;
  conn->in.clear();
  conn->parser.emplace(&c->response, max_body_);
  c->conn = conn;
  c->written = 0;
  int err = 0;
  if (!Write(conn, &err)) WriteFailed(conn, err, /*now=*/false);
}

bool Http1Transport::Impl::Write(Conn* conn, int* err) {
  Call* c = conn->call;
  const size_t head = c->head.size();
  const size_t total = head + c->body.size();
  while (c->written < total) {
    iovec iov[2];
    int n = 0;
    if (c->written < head) {
      iov[n++] = {c->head.data() + c->written, head - c->written};
      if (!c->body.empty()) iov[n++] = {c->body.data(), c->body.size()};
    } else {
      iov[n++] = {c->body.data() + (c->written - head), total - c->written};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t w = sendmsg(conn->fd, &msg, MSG_NOSIGNAL);
    if (w > 0) {
      c->written += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      conn->want_write = true;  // the next EPOLLOUT edge
      return true;
    }
    *err = w < 0 ? errno : EPIPE;
    return false;
  }
  conn->want_write = false;
  return true;
}

void Http1Transport::Impl::WriteFailed(Conn* conn, int err, bool now) {
  Call* c = Detach(conn);
  const bool retry = conn->reused && !conn->got_bytes && !c->retried;
  CloseConn(conn, /*serve_waiters=*/!retry);
  if (retry) return Retry(c);
  if (now) return Finish(c, IoError(err), false);
  FailLater(c, IoError(err));
}

void Http1Transport::Impl::OnReady(Conn* conn, uint32_t events) {
  switch (conn->state) {
    case Conn::kConnecting: {
      if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) == 0) return;
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(conn->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      if (err != 0) {
        Call* c = Detach(conn);
        CloseConn(conn);
        return Finish(c, ConnectError(err), false);
      }
      conn->state = Conn::kBusy;
      int werr = 0;
      if (!Write(conn, &werr)) return WriteFailed(conn, werr, /*now=*/true);
      // Bytes the receiver sent as soon as it accepted raised this edge
      // too; no other will come for them.
      if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) ReadResponse(conn, events);
      return;
    }
    case Conn::kIdle:
      // Only EPOLLOUT (buffer space): nothing to say. Anything else on an
      // idle connection — EOF, a reset, bytes nobody asked for — ends it.
      if ((events & ~static_cast<uint32_t>(EPOLLOUT)) == 0) return;
      if ((events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) == 0) {
        char byte;
        ssize_t n = recv(conn->fd, &byte, 1, MSG_PEEK);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
      }
      return CloseConn(conn);
    case Conn::kBusy:
      if (conn->want_write && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
        int err = 0;
        if (!Write(conn, &err)) return WriteFailed(conn, err, /*now=*/true);
      }
      if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) ReadResponse(conn, events);
      return;
  }
}

void Http1Transport::Impl::ReadResponse(Conn* conn, uint32_t events) {
  if (events & EPOLLRDHUP) conn->peer_closed = true;
  char* buf = scratch_.get();
  for (;;) {
    ssize_t n = recv(conn->fd, buf, kReadBytes, 0);
    if (n > 0) {
      conn->got_bytes = true;
      if (Parse(conn, buf, static_cast<size_t>(n))) return;
      // A short read emptied the socket: the next byte raises a new edge.
      if (static_cast<size_t>(n) < kReadBytes && !conn->peer_closed) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    const int err = n < 0 ? errno : 0;
    Call* c = Detach(conn);
    if (!conn->got_bytes) {
      // Closed under a request on a reused connection: the receiver had
      // dropped it while idle. Once more on a new one.
      const bool retry = conn->reused && !c->retried && (err == 0 || err == ECONNRESET);
      CloseConn(conn, /*serve_waiters=*/!retry);
      if (retry) return Retry(c);
      return Finish(c, err == 0 ? "connection closed without a response" : IoError(err), false);
    }
    if (err != 0) {
      CloseConn(conn);
      return Finish(c, IoError(err), false);
    }
    // EOF: the end of a body without a length (HTTP/1.0 style), or a
    // response cut short.
    error_code ec = bhttp::error::partial_message;
    if (conn->parser->got_some()) conn->parser->put_eof(ec);
    const bool whole = !ec && conn->parser->is_done();
    if (whole) c->response.status = conn->parser->status();
    CloseConn(conn);
    return Finish(c, whole ? std::string() : "bad response: " + ec.message(), false);
  }
}

bool Http1Transport::Impl::Parse(Conn* conn, const char* data, size_t n) {
  std::string_view in(data, n);
  if (!conn->in.empty()) {
    conn->in.append(data, n);
    in = conn->in;
  }
  size_t used = 0;
  bool whole = false;
  error_code ec;
  while (used < in.size()) {
    const size_t k = conn->parser->put(boost::asio::buffer(in.data() + used, in.size() - used), ec);
    used += k;
    if (ec == bhttp::error::need_more) {
      ec = {};
      break;
    }
    if (ec) break;
    if (conn->parser->is_done()) {
      const int status = conn->parser->status();
      if (status >= 100 && status < 200 && status != 101) {
        // An interim response: the real one follows.
        conn->parser.emplace(&conn->call->response, max_body_);
        continue;
      }
      whole = true;
      break;
    }
    if (k == 0) break;
  }
  if (ec) {
    std::string error;
    if (conn->parser->body_over()) {
      error = "response over " + std::to_string(max_body_) + " bytes";
    } else if (ec == bhttp::error::header_limit) {
      error = "bad response: headers over " + std::to_string(kMaxHeaderBytes) + " bytes";
    } else {
      error = "bad response: " + ec.message();
    }
    Call* c = Detach(conn);
    CloseConn(conn);
    Finish(c, std::move(error), false);
    return true;
  }
  // Keep what the parser left (bytes past a whole response too: they make
  // the connection unfit for reuse).
  if (in.data() == conn->in.data()) {
    conn->in.erase(0, used);
  } else {
    conn->in.assign(in.substr(used));
  }
  if (!whole) return false;
  Respond(conn);
  return true;
}

void Http1Transport::Impl::Respond(Conn* conn) {
  Call* c = Detach(conn);
  c->response.status = conn->parser->status();
  const bool keep = conn->parser->keep_alive() && !conn->peer_closed && conn->in.empty() &&
                    c->response.status != 101;
  if (keep) {
    Release(conn);
  } else {
    CloseConn(conn);
  }
  Finish(c, {}, false);
}

void Http1Transport::Impl::Release(Conn* conn) {
  Pool* pool = conn->pool;
  conn->reused = true;
  if (!pool->waiting.empty()) {
    Call* next = pool->waiting.front();
    pool->waiting.pop_front();
    next->waiting = false;
    return Assign(conn, next);
  }
  if (idle_total_ >= max_idle_) return CloseConn(conn, false);
  conn->state = Conn::kIdle;
  pool->idle.push_back(conn);
  ++idle_total_;
}

void Http1Transport::Impl::CloseConn(Conn* conn, bool serve_waiters) {
  Pool* pool = conn->pool;
  if (conn->state == Conn::kIdle) {
    auto it = std::find(pool->idle.begin(), pool->idle.end(), conn);
    if (it != pool->idle.end()) {
      pool->idle.erase(it);
      --idle_total_;
    }
  }
  loop_->Remove(conn->fd);
  close(conn->fd);
  conns_.erase(conn);
  --pool->open;
  delete conn;
  if (serve_waiters) ServeWaiters(pool);
}

void Http1Transport::Impl::ServeWaiters(Pool* pool) {
  // Connect fails at once only by FailLater and without serving waiters
  // itself, so this loop is the only one.
  while (!pool->waiting.empty() && pool->open < max_per_host_) {
    Call* c = pool->waiting.front();
    pool->waiting.pop_front();
    c->waiting = false;
    Connect(c);
  }
}

Http1Transport::Impl::Call* Http1Transport::Impl::Detach(Conn* conn) {
  Call* c = conn->call;
  conn->call = nullptr;
  if (c != nullptr) c->conn = nullptr;
  return c;
}

void Http1Transport::Impl::Retry(Call* c) {
  c->retried = true;
  c->response = HttpResponse{};
  Connect(c);  // the closed connection's place in the pool
}

void Http1Transport::Impl::FailLater(Call* c, std::string error) {
  Untrack(c);
  c->fail_error = std::move(error);
  const uint64_t id = c->id;
  c->fail_timer = loop_->RunAfter(0, [this, id] {
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    Call* c = it->second.get();
    c->fail_timer = 0;
    ServeWaiters(c->pool);
    Finish(c, std::move(c->fail_error), false);
  });
}

void Http1Transport::Impl::Finish(Call* c, std::string error, bool timed_out) {
  Untrack(c);
  auto it = calls_.find(c->id);
  std::unique_ptr<Call> owned = std::move(it->second);
  calls_.erase(it);
  HttpResponse response = std::move(c->response);
  response.elapsed_us = NowUs() - c->start_us;
  response.error = std::move(error);
  response.timed_out = timed_out;
  if (!response.error.empty()) response.status = 0;
  HttpClient::Done done = std::move(c->done);
  Recycle(std::move(owned));
  done(std::move(response));
}

bool Http1Transport::Impl::Cancel(uint64_t id) {
  auto it = calls_.find(id);
  if (it == calls_.end()) return false;
  Call* c = it->second.get();
  Untrack(c);
  if (c->fail_timer != 0) loop_->CancelTimer(c->fail_timer);
  std::unique_ptr<Call> owned = std::move(it->second);
  calls_.erase(it);
  if (c->waiting) {
    auto& w = c->pool->waiting;
    w.erase(std::find(w.begin(), w.end(), c));
  }
  // A request cut off mid-way leaves its connection unusable.
  if (c->conn != nullptr) {
    Conn* conn = c->conn;
    Detach(conn);
    CloseConn(conn);
  }
  Recycle(std::move(owned));
  return true;
}

void Http1Transport::Impl::Track(Call* c) {
  c->deadline_ms = c->start_us / 1000 + c->timeout_ms + 1;
  Deadlines& d = deadlines_[c->timeout_ms];
  c->deadlines = &d;
  c->prev = d.tail;
  c->next = nullptr;
  if (d.tail != nullptr) {
    d.tail->next = c;
  } else {
    d.head = c;
  }
  d.tail = c;
  ArmSweep(c->deadline_ms);
}

void Http1Transport::Impl::Untrack(Call* c) {
  Deadlines* d = c->deadlines;
  if (d == nullptr) return;
  (c->prev != nullptr ? c->prev->next : d->head) = c->next;
  (c->next != nullptr ? c->next->prev : d->tail) = c->prev;
  c->prev = c->next = nullptr;
  c->deadlines = nullptr;
}

void Http1Transport::Impl::ArmSweep(int64_t deadline_ms) {
  // An armed sweep due no later stays (when it is early, it re-arms): a
  // request's deadline, later than those before it, costs no timer update.
  if (sweep_timer_ != 0 && sweep_deadline_ms_ <= deadline_ms) return;
  if (sweep_timer_ != 0) loop_->CancelTimer(sweep_timer_);
  sweep_deadline_ms_ = deadline_ms;
  const int64_t after = std::max<int64_t>(0, deadline_ms - NowUs() / 1000);
  sweep_timer_ = loop_->RunAfter(after, [this] {
    sweep_timer_ = 0;
    OnSweep();
  });
}

void Http1Transport::Impl::OnSweep() {
  const int64_t now_ms = NowUs() / 1000;
  std::vector<uint64_t> expired;
  for (auto& [timeout, d] : deadlines_) {
    for (Call* c = d.head; c != nullptr && c->deadline_ms <= now_ms; c = c->next) {
      expired.push_back(c->id);
    }
  }
  std::shared_ptr<bool> alive = alive_;
  for (uint64_t id : expired) {
    auto it = calls_.find(id);
    if (it == calls_.end()) continue;  // ended by an earlier Done
    Call* c = it->second.get();
    if (c->waiting) {
      auto& w = c->pool->waiting;
      w.erase(std::find(w.begin(), w.end(), c));
      c->waiting = false;
    }
    if (c->conn != nullptr) {
      Conn* conn = c->conn;
      Detach(conn);
      CloseConn(conn);
    }
    Finish(c, "timed out after " + std::to_string(c->timeout_ms) + " ms", true);
    if (!*alive) return;
  }
  int64_t next = -1;
  for (auto& [timeout, d] : deadlines_) {
    if (d.head != nullptr && (next < 0 || d.head->deadline_ms < next)) next = d.head->deadline_ms;
  }
  if (next >= 0) ArmSweep(next);
}

Http1Transport::Http1Transport(net::EventLoop* loop, const HttpClientOptions& options)
    : impl_(std::make_unique<Impl>(loop, options)) {}
Http1Transport::~Http1Transport() = default;

bool Http1Transport::Post(uint64_t id, HttpRequest& request, HttpClient::Done& done) {
  return impl_->Post(id, request, done);
}
bool Http1Transport::Cancel(uint64_t id) { return impl_->Cancel(id); }
size_t Http1Transport::in_flight() const { return impl_->in_flight(); }

}  // namespace delayq::push
