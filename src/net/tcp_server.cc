#include "net/tcp_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/log.h"

namespace delayq::net {
namespace {

constexpr size_t kReadBytes = size_t{64} * 1024;
constexpr int kMaxReadsPerEvent = 4;
constexpr size_t kMaxInputWhileWaiting = 1 << 20;
constexpr size_t kTlsRecordBytes = 16 * 1024;  // the most plaintext one TLS record holds

// How often idle and slow connections are looked for: a quarter of the
// shortest timeout, so one is enforced within 25% of its length.
int64_t SweepInterval(const TcpServerOptions& o) {
  int64_t shortest = 0;
  const int64_t handshake = o.tls != nullptr ? o.tls_handshake_timeout_ms : 0;
  for (int64_t t : {o.idle_timeout_ms, o.request_timeout_ms, handshake}) {
    if (t > 0 && (shortest == 0 || t < shortest)) shortest = t;
  }
  if (shortest == 0) return 0;
  return std::clamp<int64_t>(shortest / 4, 5, 1000);
}

}  // namespace

Result<std::unique_ptr<TcpServer>> TcpServer::Create(EventLoop* loop, TcpHandler* handler,
                                                     TcpServerOptions options) {
  if (!options.listen) {
    auto server =
        std::unique_ptr<TcpServer>(new TcpServer(loop, handler, std::move(options), -1, 0));
    TcpServer* s = server.get();
    if (int64_t every = SweepInterval(s->options_); every > 0) {
      s->sweep_timer_ = loop->RunAfter(every, [s] { s->Sweep(); });
    }
    return server;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument(options.name + " port: " + std::to_string(options.port) +
                           " is not 0..65535");
  }
  if (inet_pton(AF_INET, options.host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument(options.name + " listen address: '" + options.host +
                           "' is not an IPv4 address");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(options.name + ": socket() failed: " + strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 4096) != 0) {
    std::string why = strerror(errno);
    close(fd);
    return Unavailable(options.name + ": cannot listen on " + options.host + ":" +
                       std::to_string(options.port) + ": " + why);
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  auto server =
      std::unique_ptr<TcpServer>(new TcpServer(loop, handler, std::move(options), fd, port));
  TcpServer* s = server.get();
  if (Status st = loop->Add(fd, EPOLLIN, [s](uint32_t) { s->OnAccept(); }); !st.ok()) return st;
  if (int64_t every = SweepInterval(s->options_); every > 0) {
    s->sweep_timer_ = loop->RunAfter(every, [s] { s->Sweep(); });
  }
  return server;
}

TcpServer::TcpServer(EventLoop* loop, TcpHandler* handler, TcpServerOptions options, int listen_fd,
                     int port)
    : loop_(loop),
      handler_(handler),
      options_(std::move(options)),
      listen_fd_(listen_fd),
      port_(port) {}

TcpServer::~TcpServer() {
  loop_->CancelTimer(sweep_timer_);
  loop_->CancelTimer(accept_timer_);
  StopListening();
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : conns_) ids.push_back(id);
  for (uint64_t id : ids) Close(id);
}

void TcpServer::StopListening() {
  if (listen_fd_ < 0) return;
  loop_->Remove(listen_fd_);
  close(listen_fd_);
  listen_fd_ = -1;
}

Connection* TcpServer::Find(uint64_t id) {
  auto it = conns_.find(id);
  return it == conns_.end() ? nullptr : it->second.get();
}

TcpServer::SpareFd::SpareFd() : fd_(open("/dev/null", O_RDONLY | O_CLOEXEC)) {}

TcpServer::SpareFd::~SpareFd() {
  if (fd_ >= 0) close(fd_);
}

bool TcpServer::SpareFd::Release() {
  if (fd_ < 0) return false;
  close(fd_);
  fd_ = -1;
  return true;
}

void TcpServer::SpareFd::Reopen() {
  if (fd_ < 0) fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

// What the client sent already is read before a last reply and the close:
// closing a socket with unread input sends RST instead of FIN, which some
// clients take as an error before they read the reply.
void TcpServer::ReadWhatWasSent(int fd) {
  char buf[16 * 1024];
  for (int i = 0; i < 4 && recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0; ++i) {
  }
}

void TcpServer::Refuse(int fd) {
  ReadWhatWasSent(fd);
  // A TLS client would read the plaintext reply as a broken handshake: it
  // is closed without one.
  if (options_.tls == nullptr) {
    std::string_view busy = handler_->BusyReply();
    [[maybe_unused]] ssize_t n = write(fd, busy.data(), busy.size());
  }
  close(fd);
}

TcpServer::SpareAccept TcpServer::RefuseWithSpare() {
  if (!spare_.Release()) {
    spare_.Reopen();  // for next time, if a descriptor has come free since
    return SpareAccept::kNoSpare;
  }
  int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  int err = errno;
  if (fd >= 0) Refuse(fd);
  spare_.Reopen();
  if (fd >= 0) return SpareAccept::kRefused;
  // Another thread (the store opening a file) took the freed slot.
  if (err == EMFILE || err == ENFILE) return SpareAccept::kNoSpare;
  return SpareAccept::kNoneWaiting;  // EAGAIN, or an error the next readiness retries
}

void TcpServer::OnAccept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EMFILE && errno != ENFILE) return;  // EAGAIN, or retried on next readiness
      if (!accept_paused_logged_) {
        Log(LogLevel::kWarn,
            "%s: cannot accept: %s: new connections get the busy reply until descriptors "
            "free up (raise the open files limit or lower --max-connections)",
            options_.name.c_str(), strerror(errno));
        accept_paused_logged_ = true;
      }
      // Out of descriptors: the waiting client is told "busy" now rather
      // than left in the backlog for a descriptor that may never come.
      SpareAccept r = RefuseWithSpare();
      if (r == SpareAccept::kRefused) continue;
      if (r == SpareAccept::kNoneWaiting) return;
      // Not even the spare: the listener stays readable, so stop watching
      // it for a moment rather than spin; connections wait in the backlog.
      loop_->Modify(listen_fd_, 0);
      accept_timer_ = loop_->RunAfter(100, [this] {
        accept_timer_ = 0;
        if (listen_fd_ >= 0) loop_->Modify(listen_fd_, EPOLLIN);
      });
      return;
    }
    accept_paused_logged_ = false;
    if (conns_.size() >= options_.max_connections) {
      if (!busy_logged_) {
        Log(LogLevel::kWarn, "%s: %zu connections open (max connections): refusing new ones",
            options_.name.c_str(), conns_.size());
        busy_logged_ = true;
      }
      Refuse(fd);
      continue;
    }
    busy_logged_ = false;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (options_.tls == nullptr) {
      Adopt(fd);
      continue;
    }
    auto session = TlsSession::Accept(*options_.tls, fd);
    if (!session.ok()) {
      LogTls(options_.name + ": cannot start a TLS session: " + session.status().message());
      close(fd);
      continue;
    }
    // The handshake begins with the client's first bytes (EPOLLIN).
    uint64_t id = Adopt(fd);
    if (Connection* c = Find(id)) c->tls = std::move(session).value();
  }
}

void TcpServer::SetTls(std::shared_ptr<const TlsContext> tls) {
  if (options_.tls != nullptr && tls != nullptr) options_.tls = std::move(tls);
}

std::string Connection::PeerName() const {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  char host[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      addr.sin_family != AF_INET ||
      inet_ntop(AF_INET, &addr.sin_addr, host, sizeof host) == nullptr) {
    return "a client";
  }
  return std::string(host) + ":" + std::to_string(ntohs(addr.sin_port));
}

void TcpServer::LogTls(const std::string& line) {
  const int64_t second = MonotonicNowMs() / 1000;
  if (second != tls_log_second_) {
    if (tls_suppressed_ > 0) {
      Log(LogLevel::kWarn, "%s: %d more TLS refusals left out of the log (at most %d a second)",
          options_.name.c_str(), tls_suppressed_, kTlsLogsPerSecond);
    }
    tls_log_second_ = second;
    tls_logged_ = 0;
    tls_suppressed_ = 0;
  }
  if (tls_logged_ >= kTlsLogsPerSecond) {
    ++tls_suppressed_;
    return;
  }
  ++tls_logged_;
  Log(LogLevel::kWarn, "%s", line.c_str());
}

void TcpServer::ContinueHandshake(Connection& c) {
  switch (c.tls->Handshake()) {
    case TlsIo::kDone:
      c.tls_read_wants_write = false;
      c.last_input_ms = MonotonicNowMs();  // idle from here, not from the accept
      if (LogEnabled(LogLevel::kDebug)) {
        const std::string peer = c.tls->peer_subject();
        Log(LogLevel::kDebug, "%s: TLS with %s: %s%s%s", options_.name.c_str(),
            c.PeerName().c_str(), c.tls->protocol().c_str(),
            peer.empty() ? "" : ", client certificate ", peer.c_str());
      }
      // A request may have come with the handshake's last flight.
      ReadFrom(c, /*peer_closed=*/false);
      return;
    case TlsIo::kWantRead:
      c.tls_read_wants_write = false;
      break;
    case TlsIo::kWantWrite:
      c.tls_read_wants_write = true;
      break;
    case TlsIo::kClosed:
    case TlsIo::kError:
      RefuseHandshake(c);
      return;
  }
  UpdateEvents(c);
}

void TcpServer::RefuseHandshake(Connection& c) {
  using Peer = TlsSession::Peer;
  const Peer peer = c.tls->failed_peer();
  // A client that connects and leaves without a word (a port probe, a load
  // balancer's health check) is not worth a line.
  if (peer != Peer::kGoneEarly) {
    LogTls(options_.name + ": TLS handshake with " + c.PeerName() + " refused: " + c.tls->error());
  }
  std::string_view reply = handler_->PlaintextReply();
  if (peer == Peer::kPlaintext && !reply.empty()) {
    ReadWhatWasSent(c.fd);
    [[maybe_unused]] ssize_t n = write(c.fd, reply.data(), reply.size());
  }
  Close(c.id);
}

uint64_t TcpServer::Adopt(int fd) {
  auto c = std::make_unique<Connection>();
  c->id = next_id_++;
  c->fd = fd;
  c->last_input_ms = MonotonicNowMs();
  c->accepted_ms = c->last_input_ms;
  c->output_high_water = std::min<size_t>(options_.max_output_bytes / 4 + 1, 1 << 20);
  uint64_t id = c->id;
  Connection& ref = *c;
  conns_[id] = std::move(c);
  handler_->OnOpen(ref);
  if (!loop_->Add(fd, EPOLLIN | EPOLLRDHUP, [this, id](uint32_t ev) { OnEvents(id, ev); }).ok()) {
    Close(id);
    return 0;
  }
  return id;
}

void TcpServer::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Connection& c = *it->second;
  handler_->OnClose(c);
  loop_->CancelTimer(c.tls_read_timer);
  loop_->Remove(c.fd);
  if (c.tls != nullptr) c.tls->Shutdown();  // close_notify, best effort
  close(c.fd);
  conns_.erase(it);
}

void TcpServer::OnEvents(uint64_t id, uint32_t events) {
  Connection* c = Find(id);
  if (c == nullptr) return;
  if (events & (EPOLLERR | EPOLLHUP)) {
    Close(id);
    return;
  }
  if (c->tls != nullptr) {
    if (!c->tls->handshake_done()) {
      ContinueHandshake(*c);
      return;
    }
    // A read that waited for writability, or a write for readability
    // (a TLS key update): each is taken up again on the other's event.
    if ((events & EPOLLOUT) && c->tls_read_wants_write) {
      c->tls_read_wants_write = false;
      ReadFrom(*c, false);
      if ((c = Find(id)) == nullptr) return;
    }
    if ((events & EPOLLIN) && c->tls_write_wants_read) {
      c->tls_write_wants_read = false;
      Flush(*c);
      if ((c = Find(id)) == nullptr) return;
    }
  }
  if (events & EPOLLOUT) {
    c->last_input_ms = MonotonicNowMs();  // draining a backlog to a reading client is not idle
    Flush(*c);
    if ((c = Find(id)) == nullptr) return;
  }
  if ((events & (EPOLLIN | EPOLLRDHUP)) && c->reading) ReadFrom(*c, events & EPOLLRDHUP);
}

// Inlined into ReadFrom: the read path makes no call more than before
// Deliver shared it.
[[gnu::always_inline]] inline void TcpServer::Received(Connection& c, bool eof) {
  uint64_t id = c.id;
  c.last_input_ms = MonotonicNowMs();
  // After the client's FIN, what it sent before is still answered, and the
  // connection closes once nothing is owed.
  if (eof) c.peer_closed = true;
  if (c.closing) {
    c.in.clear();  // closing: what arrives now is not answered
  } else {
    Process(c);
  }
  if (Connection* live = Find(id)) Flush(*live);
  // But a reserve still unanswered at the FIN is not: the client has gone
  // (a worker exits with a FIN when nothing is left unread), as Redis and
  // beanstalkd take EOF. Closing withdraws the reserve, and gives back any
  // job it took, rather than writing that job to a socket no one reads.
  if (eof) {
    if (Connection* live = Find(id); live != nullptr && handler_->AwaitsWork(*live)) Close(id);
  }
}

void TcpServer::ReadFrom(Connection& c, bool peer_closed) {
  uint64_t id = c.id;
  char buf[kReadBytes];
  bool eof = false;
  const size_t received = c.in.size();
  // Up to kMaxReadsPerEvent full reads, then the requests are served:
  // a client sending without pause cannot grow c.in without bound (the loop
  // is level-triggered, so what is left is read on the next turn).
  if (c.tls != nullptr) {
    // A TLS record is at most 16 KiB: as many reads as bring in what the
    // plaintext path would.
    for (int reads = 0; reads < 4 * kMaxReadsPerEvent; ++reads) {
      size_t n = 0;
      TlsIo r = c.tls->Read(buf, sizeof buf, &n);
      if (r == TlsIo::kDone) {
        c.in.append(buf, n);
        // Less than a full record, and nothing held in the session: all
        // there is, as a short read on plaintext. Another read would only
        // say EAGAIN (a syscall per request); more that arrives makes the
        // socket readable again (the loop is level-triggered).
        if (n < kTlsRecordBytes && !peer_closed && !c.tls->has_pending()) break;
        continue;
      }
      if (r == TlsIo::kWantRead) break;
      if (r == TlsIo::kWantWrite) {
        c.tls_read_wants_write = true;
        break;
      }
      if (r == TlsIo::kClosed) {
        eof = true;
        break;
      }
      Log(LogLevel::kDebug, "%s: TLS read from %s failed: %s", options_.name.c_str(),
          c.PeerName().c_str(), c.tls->error().c_str());
      Close(id);
      return;
    }
    if (draining_) c.in.resize(received);
    Received(c, eof);
    if (Connection* live = Find(id)) ReadHeldLater(*live);
    return;
  }
  for (int reads = 0; reads < kMaxReadsPerEvent; ++reads) {
    ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) {
      c.in.append(buf, static_cast<size_t>(n));
      // A short read has taken all there is; but when the FIN is in too,
      // one more read sees it, so the requests that came with it are served
      // knowing the client has gone (a reserve then takes no job).
      if (static_cast<size_t>(n) < sizeof buf && !peer_closed) break;
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
  // Draining: what was received before the drain is served; what comes
  // after is read (closing with unread input would reset the connection,
  // and the client could lose replies it has not read yet) but not served.
  if (draining_) c.in.resize(received);
  Received(c, eof);
}

// What a TLS session read ahead is not on the socket, so epoll will not
// report it: read on the next turn, if the connection still reads.
void TcpServer::ReadHeldLater(Connection& c) {
  if (c.tls == nullptr || c.tls_read_timer != 0 || !c.reading || c.peer_closed ||
      !c.tls->has_pending()) {
    return;
  }
  c.tls_read_timer = loop_->RunAfter(0, [this, id = c.id] {
    Connection* live = Find(id);
    if (live == nullptr) return;
    live->tls_read_timer = 0;
    if (live->reading && !live->peer_closed) ReadFrom(*live, false);
  });
}

void TcpServer::Deliver(uint64_t id, std::string_view bytes, bool eof) {
  Connection* c = Find(id);
  if (c == nullptr) return;
  if (!draining_) c->in.append(bytes);  // as ReadFrom
  Received(*c, eof);
}

void TcpServer::Process(Connection& c) {
  if (c.waiting) return;
  size_t out_before = c.out.size();
  uint64_t holes_before = c.next_hole();
  handler_->OnInput(c);
  // A request answered (or parked, or awaiting its answer) means the client
  // is making progress: the request timeout measures the one still
  // arriving, from the latest input.
  bool answered = c.out.size() != out_before || c.waiting || c.next_hole() != holes_before;
  bool partial = !c.waiting && !c.closing && (!c.in.empty() || handler_->InRequest(c));
  if (!partial) {
    c.request_since_ms = -1;
  } else if (c.request_since_ms < 0 || answered) {
    c.request_since_ms = c.last_input_ms;
  }
}

void TcpServer::Resume(Connection& c) {
  c.last_input_ms = MonotonicNowMs();  // a wait that just ended was not idleness
  Flush(c);                            // writes the answer, then serves what waited behind it
}

uint64_t Connection::OpenHole() {
  holes_.push_back(Hole{next_hole_, out.size()});
  return next_hole_++;
}

bool Connection::FillHole(uint64_t serial, std::string_view reply) {
  auto it = holes_.begin();
  while (it != holes_.end() && it->serial != serial) ++it;
  if (it == holes_.end()) return false;
  size_t at = it->at;
  out.insert(at, reply);
  // A reply that lands among bytes the output gate has stamped already
  // (replies that came after the hole but were answered first) is stamped
  // with them, and they all wait for the latest change: the reply may report
  // one (a reserve that waited took jobs) newer than their hold_until, and
  // the gate keeps one mark for the stamped bytes.
  if (at < stamped) {
    stamped += reply.size();
    hold_until = std::max(hold_until, change_mark);
  }
  it = holes_.erase(it);
  for (; it != holes_.end(); ++it) it->at += reply.size();
  return true;
}

int64_t Connection::HoleAt(uint64_t serial) const {
  for (const Hole& h : holes_) {
    if (h.serial == serial) return static_cast<int64_t>(h.at);
  }
  return -1;
}

void Connection::Consume(size_t n) {
  out.erase(0, n);
  written_ += n;
  stamped = stamped > n ? stamped - n : 0;
  for (Hole& h : holes_) h.at -= n;  // n <= Writable() <= every h.at
}

void TcpServer::Flush(Connection& c) {
  for (;;) {
    if (gate_ != nullptr && !c.out.empty()) {
      if (c.out.size() > c.stamped) {
        c.hold_until = c.change_mark;
        c.stamped = c.out.size();
      }
      if (c.hold_until > gate_->Released()) {
        if (!c.held) {
          c.held = true;
          held_.push_back(c.id);
        }
        break;
      }
    }
    while (c.Writable() > 0 && c.tls != nullptr) {
      // Retried with the same bytes (and maybe more after them) after a
      // want: what SSL_write requires.
      size_t n = 0;
      TlsIo r = c.tls->Write(std::string_view(c.out.data(), c.Writable()), &n);
      if (r == TlsIo::kDone) {
        c.Consume(n);
        continue;
      }
      if (r == TlsIo::kWantWrite) break;
      if (r == TlsIo::kWantRead) {
        c.tls_write_wants_read = true;
        break;
      }
      Log(LogLevel::kDebug, "%s: TLS write to %s failed: %s", options_.name.c_str(),
          c.PeerName().c_str(), c.tls->error().c_str());
      Close(c.id);
      return;
    }
    while (c.Writable() > 0 && c.tls == nullptr) {
      ssize_t n = write(c.fd, c.out.data(), c.Writable());
      if (n > 0) {
        c.Consume(static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) break;
      Close(c.id);
      return;
    }
    // All written that can be, input left over (the handler stopped at the
    // high water): serve more of it now.
    if (c.Writable() == 0 && !c.in.empty() && !c.waiting && !c.closing) {
      size_t before = c.in.size();
      Process(c);
      if (c.in.size() != before) continue;
    }
    break;
  }
  if (c.out.size() > options_.max_output_bytes) {
    Log(LogLevel::kWarn, "%s: closing a connection with %zu bytes of unread replies",
        options_.name.c_str(), c.out.size());
    Close(c.id);
    return;
  }
  // Draining: once nothing is owed, nothing waits, and no request received
  // before the drain is left to serve (the loop above served what it could;
  // a request still partial then will not be completed).
  if (!c.Owed() && !c.waiting && (c.closing || c.peer_closed || draining_)) {
    Close(c.id);
    return;
  }
  UpdateEvents(c);
}

// Output pending: ask for EPOLLOUT. Input bound reached: stop reading
// (EPOLLIN and EPOLLRDHUP are level-triggered, so they would fire on every
// turn).
void TcpServer::UpdateEvents(Connection& c) {
  bool want_write =
      (c.Writable() > 0 && !c.held && !c.tls_write_wants_read) || c.tls_read_wants_write;
  // Not after the client's FIN (EPOLLRDHUP would fire on every turn), nor
  // once max_input_bytes of requests wait unserved (the replies pile up),
  // nor while a parked connection buffers more than a pipeline's worth of
  // requests behind its wait. While the replies pile up input is still
  // read: a client may be writing its whole pipeline before it reads.
  bool reading = (!c.peer_closed && c.in.size() < options_.max_input_bytes &&
                  !(c.waiting && c.in.size() >= kMaxInputWhileWaiting)) ||
                 c.tls_write_wants_read ||
                 (c.tls != nullptr && !c.tls->handshake_done() && !c.tls_read_wants_write);
  if (want_write == c.want_write && reading == c.reading) return;
  const bool resumed = reading && !c.reading;
  c.want_write = want_write;
  c.reading = reading;
  if (resumed) ReadHeldLater(c);
  loop_->Modify(c.fd, (reading ? uint32_t{EPOLLIN | EPOLLRDHUP} : 0u) |
                          (want_write ? uint32_t{EPOLLOUT} : 0u));
}

void TcpServer::Sweep() {
  sweep_timer_ = 0;
  int64_t now = MonotonicNowMs();
  std::vector<uint64_t> idle, slow, stalled;
  for (const auto& [id, c] : conns_) {
    if (c->tls != nullptr && !c->tls->handshake_done()) {
      if (now - c->accepted_ms >= options_.tls_handshake_timeout_ms) stalled.push_back(id);
      continue;
    }
    if (c->waiting || c->holes() > 0) continue;  // waiting for the handler, not the client
    // Not while replies wait to be written: input may be held back by our
    // own backpressure, and a slow reader is the idle timeout's business.
    if (options_.request_timeout_ms > 0 && c->request_since_ms >= 0 && c->out.empty() &&
        now - c->request_since_ms >= options_.request_timeout_ms) {
      slow.push_back(id);
    } else if (options_.idle_timeout_ms > 0 && c->request_since_ms < 0 &&
               now - c->last_input_ms >= options_.idle_timeout_ms) {
      idle.push_back(id);
    }
  }
  for (uint64_t id : slow) {
    Connection* c = Find(id);
    std::string_view reply = handler_->TimeoutReply();
    c->out.append(reply);
    c->in.clear();
    c->closing = true;
    Flush(*c);
  }
  for (uint64_t id : idle) Close(id);
  for (uint64_t id : stalled) {
    Connection* c = Find(id);
    if (c == nullptr) continue;
    LogTls(options_.name + ": TLS handshake with " + c->PeerName() + " not complete within " +
           std::to_string(options_.tls_handshake_timeout_ms) + " ms: closed");
    Close(id);
  }
  if (!slow.empty()) {
    Log(LogLevel::kDebug, "%s: closed %zu connections whose request took over %lld ms",
        options_.name.c_str(), slow.size(), static_cast<long long>(options_.request_timeout_ms));
  }
  sweep_timer_ = loop_->RunAfter(SweepInterval(options_), [this] { Sweep(); });
}

void TcpServer::ReleaseHeld() {
  if (held_.empty()) return;
  uint64_t released = gate_->Released();
  bool failed = gate_->Failed();
  std::vector<uint64_t> ids;
  ids.swap(held_);
  for (uint64_t id : ids) {
    Connection* c = Find(id);
    if (c == nullptr) continue;
    c->held = false;
    if (c->hold_until <= released) {
      Flush(*c);  // holds it again if more replies came meanwhile
    } else if (failed) {
      Log(LogLevel::kWarn, "%s: closing a connection whose replies wait for a failed store",
          options_.name.c_str());
      Close(id);
    } else {
      c->held = true;
      held_.push_back(id);
    }
  }
}

void TcpServer::BeginDrain() {
  if (draining_) return;
  draining_ = true;
  StopListening();
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : conns_) ids.push_back(id);
  for (uint64_t id : ids) {
    Connection* c = Find(id);
    if (c == nullptr) continue;
    // Answers what waits (the handler says what: the front ends answer
    // "shutting down"); the requests received behind it are then
    // served, as the handler resumes the connection. Not `closing`: that
    // would drop them. Flush closes each connection once it owes nothing
    // and has nothing received left to serve.
    if (c->waiting || c->holes() > 0) handler_->OnDrain(*c);
    if ((c = Find(id)) == nullptr) continue;
    Flush(*c);
  }
}

}  // namespace delayq::net
