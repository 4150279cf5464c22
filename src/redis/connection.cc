// Blocking hiredis: redisConnectWithTimeout, then SO_RCVTIMEO/SO_SNDTIMEO
// (redisSetTimeout) bound every read and write. hiredis 0.14 reports a
// failure in context->err/errstr and leaves the context unusable, so any
// failure frees it (Broken) and the next use connects afresh, paced by the
// Backoff. A read that times out surfaces as EAGAIN on a blocking socket,
// which is reported as "no reply within N ms".
//
// TLS: the same hiredis context makes the TCP connection and keeps the reply
// reader, but the socket is then non-blocking and belongs to a TlsSession:
// commands are formatted into tls_out_ and written through the session,
// decrypted bytes are fed to the reader (redisReaderFeed), and each wait is
// a poll(2) bounded by the command timeout, as SO_RCVTIMEO bounds a
// plaintext read. hiredis's own I/O calls are never made on such a context.
#include "redis/connection.h"

#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <memory>

namespace delayq::redis {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

timeval Timeval(int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = static_cast<suseconds_t>(ms % 1000) * 1000;
  return tv;
}

// hiredis's reader builds our Reply tree directly through these (instead of
// its own redisReply tree, copied afterwards): an array is created with its
// elements in place, and each element is parsed into its slot. Only the
// top-level reply is a heap object.
void* Place(const redisReadTask* task, Reply&& r) {
  if (task->parent != nullptr) {
    Reply& slot = static_cast<Reply*>(task->parent->obj)->elements()[task->idx];
    slot = std::move(r);
    return &slot;
  }
  return new Reply(std::move(r));
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  std::string text(str, len);
  switch (task->type) {
    case REDIS_REPLY_ERROR:
      return Place(task, Reply::Error(std::move(text)));
    case REDIS_REPLY_STATUS:
      return Place(task, Reply::Status(std::move(text)));
    default:
      return Place(task, Reply::String(std::move(text)));
  }
}

void* CreateArray(const redisReadTask* task, int elements) {
  return Place(task, Reply::Array(std::vector<Reply>(static_cast<size_t>(std::max(elements, 0)))));
}

void* CreateInteger(const redisReadTask* task, long long value) {
  return Place(task, Reply::Integer(value));
}

void* CreateNil(const redisReadTask* task) { return Place(task, Reply::Nil()); }

// Called on a top-level reply only (a protocol error mid-reply).
void FreeReply(void* reply) { delete static_cast<Reply*>(reply); }

redisReplyObjectFunctions reply_functions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                             FreeReply};

// RESP for one command, appended to `out`: what redisFormatCommandArgv
// makes, without its per-argument formatting.
template <typename Range>
void FormatCommand(const Range& argv, std::string* out) {
  char digits[24];
  auto line = [&](char kind, size_t n) {
    out->push_back(kind);
    auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    out->append(digits, end);
    out->append("\r\n", 2);
  };
  line('*', std::size(argv));
  for (const auto& arg : argv) {
    line('$', arg.size());
    out->append(arg.data(), arg.size());
    out->append("\r\n", 2);
  }
}

// hiredis writes with write(2): a server gone mid-write raises SIGPIPE, whose
// default action kills the process. Unless the process ignores SIGPIPE (as
// `delayq serve` does), this blocks it in the calling thread for the guard's
// life and swallows one our write raised, so the write fails with EPIPE
// instead (libpq does the same). Applications embedding delayq need not care.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_IGN) return;
    active_ = true;
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeGuard() {
    if (!active_) return;
    sigset_t pending;
    if (!was_pending_ && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      timespec zero{};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  bool active_ = false;
  bool was_pending_ = false;  // someone else's SIGPIPE: leave it pending
  sigset_t pipe_;
  sigset_t old_;
};

// One TLS record's worth: SSL_read hands out at most one record at a time.
constexpr size_t kTlsReadBytes = 16 * 1024;

// What a close or reset before the first reply may mean: a plaintext client
// talking to a TLS-only Redis (which drops the connection at the first byte
// that is not TLS).
constexpr const char* kTlsServerHint = " (a TLS-only Redis? its URL would be rediss://)";

// What a TLS server closing the connection before its first reply may mean:
// with TLS 1.3 the client's handshake ends before the server has checked the
// client's certificate, so a refused (or missing) one shows only now.
constexpr const char* kClientCertHint =
    " before any reply (does Redis require a client certificate, tls-auth-clients yes?)";

// Takes ownership of a reply the reader handed out (see reply_functions).
Reply TakeReply(void* raw) {
  std::unique_ptr<Reply> r(static_cast<Reply*>(raw));
  return std::move(*r);
}

}  // namespace

Status SetUpTls(bool url_tls, const net::TlsOptions& tls, ConnectionOptions* options) {
  if (!url_tls) {
    if (options->tls) {
      return InvalidArgument(
          "redis: a TLS context was given, but the Redis URL is redis://, not rediss://");
    }
    return Status::Ok();
  }
  if (options->tls) return Status::Ok();
  Result<std::shared_ptr<net::TlsContext>> ctx =
      net::TlsContext::Create(net::TlsContext::Role::kClient, tls);
  if (!ctx.ok()) return ctx.status();
  options->tls = std::move(ctx).value();
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Backoff

Backoff::Backoff(int initial_ms, int max_ms)
    : initial_ms_(std::max(1, initial_ms)),
      max_ms_(std::max(initial_ms_, max_ms)),
      delay_ms_(initial_ms_) {}

int64_t Backoff::TryStart() {
  std::lock_guard lock(mu_);
  if (!failing_) return 0;
  int64_t now = SteadyMs();
  if (now < retry_at_ms_) return retry_at_ms_ - now;
  retry_at_ms_ = now + delay_ms_;  // others wait while this attempt runs
  return 0;
}

void Backoff::Failed(std::string error) {
  std::lock_guard lock(mu_);
  failing_ = true;
  retry_at_ms_ = SteadyMs() + delay_ms_;
  delay_ms_ = std::min(delay_ms_ * 2, max_ms_);
  last_error_ = std::move(error);
}

void Backoff::Succeeded() {
  std::lock_guard lock(mu_);
  failing_ = false;
  delay_ms_ = initial_ms_;
}

std::string Backoff::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

// ---------------------------------------------------------------------------
// Connection

Connection::Connection(Endpoint endpoint, ConnectionOptions options,
                       std::shared_ptr<Backoff> backoff)
    : endpoint_(std::move(endpoint)),
      options_(std::move(options)),
      backoff_(backoff ? std::move(backoff)
                       : std::make_shared<Backoff>(options_.backoff_initial_ms,
                                                   options_.backoff_max_ms)),
      name_("redis " + endpoint_.ToString()),
      command_timeout_ms_(options_.command_timeout_ms) {}

Connection::~Connection() { Drop(); }

std::unique_ptr<Connection> Connection::Create(Endpoint endpoint, ConnectionOptions options,
                                               std::shared_ptr<Backoff> backoff) {
  return std::unique_ptr<Connection>(
      new Connection(std::move(endpoint), std::move(options), std::move(backoff)));
}

Result<std::unique_ptr<Connection>> Connection::Open(Endpoint endpoint, ConnectionOptions options,
                                                     std::shared_ptr<Backoff> backoff) {
  std::unique_ptr<Connection> c =
      Create(std::move(endpoint), std::move(options), std::move(backoff));
  if (Status s = c->EnsureConnected(); !s.ok()) return s;
  return c;
}

void Connection::Drop() {
  // No close_notify: Redis does not need one, and a write here could meet a
  // reset connection (SIGPIPE) or block.
  tls_.reset();
  if (tls_out_.capacity() > kKeptFormatBytes) std::string().swap(tls_out_);
  tls_out_.clear();
  tls_end_ = Failure::kNone;
  tls_end_error_.clear();
  if (context_ != nullptr) redisFree(context_);
  context_ = nullptr;
  pending_ = 0;
}

Status Connection::Broken(int saved_errno) {
  std::string why;
  failure_ =
      context_ != nullptr && context_->err == REDIS_ERR_EOF ? Failure::kClosed : Failure::kLost;
  if (context_ == nullptr) {
    why = "not connected";
  } else if (context_->err == REDIS_ERR_IO &&
             (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    failure_ = Failure::kTimeout;
    why = "no reply within " + std::to_string(command_timeout_ms_) + " ms (command timeout)";
  } else if (context_->errstr[0] != '\0') {
    why = context_->errstr;
  } else {
    why = "connection failed";
  }
  if (!answered_ && context_ != nullptr && options_.tls == nullptr &&
      (failure_ == Failure::kClosed || saved_errno == ECONNRESET)) {
    why += kTlsServerHint;
  }
  Drop();
  reason_ = why;
  return Unavailable(name_ + ": " + why);
}

Status Connection::TlsBroken(Failure failure, std::string why) {
  Drop();
  failure_ = failure;
  reason_ = std::move(why);
  return Unavailable(name_ + ": " + reason_);
}

std::string Connection::TlsClosedReason() const {
  return std::string("Server closed the connection") + (answered_ ? "" : kClientCertHint);
}

bool Connection::ClosedWhileIdle() const {
  pollfd p{context_->fd, POLLIN, 0};
  // Nothing is owed to us, so anything readable (EOF, RST, stray bytes)
  // means the connection cannot be trusted.
  if (!tls_) return poll(&p, 1, 0) != 0;
  if (tls_end_ != Failure::kNone) return true;  // the server closed it after its last reply
  if (poll(&p, 1, 0) == 0) return false;
  // A TLS 1.3 server sends its session tickets after the handshake, on its
  // own: a read that consumes only those (and wants more) leaves the
  // connection as good as it was.
  char ignored[kTlsReadBytes];
  size_t n = 0;
  return tls_->Read(ignored, sizeof ignored, &n) != net::TlsIo::kWantRead;
}

bool Connection::WaitFor(short events, int ms) const {
  pollfd p{context_->fd, events, 0};
  const int64_t deadline = SteadyMs() + ms;
  for (;;) {
    int left = static_cast<int>(std::max<int64_t>(0, deadline - SteadyMs()));
    int ready = poll(&p, 1, left);
    if (ready > 0) return true;  // ready, or an error the next call reports
    if (ready == 0 || errno != EINTR) return false;
  }
}

Status Connection::EnsureConnected() {
  if (context_ != nullptr) {
    if (pending_ > 0 || push_mode_ || !options_.check_idle_before_write || !ClosedWhileIdle()) {
      return Status::Ok();
    }
    Drop();  // closed by the server while idle (a restart, a timeout): reconnect now
  }
  if (int64_t wait = backoff_->TryStart(); wait > 0) {
    std::string last = backoff_->last_error();
    return Unavailable(name_ + ": unreachable, next connect attempt in " + std::to_string(wait) +
                       " ms" + (last.empty() ? "" : " (last error: " + last + ")"));
  }
  Status s = Connect();
  if (!s.ok()) {
    backoff_->Failed(s.message().substr(std::min(s.message().size(), name_.size() + 2)));
    return s;
  }
  backoff_->Succeeded();
  return Status::Ok();
}

Status Connection::Connect() {
  redisContext* c = redisConnectWithTimeout(endpoint_.host.c_str(), endpoint_.port,
                                            Timeval(options_.connect_timeout_ms));
  failure_ = Failure::kConnect;
  if (c == nullptr) {
    reason_ = "cannot allocate a hiredis context";
    return Unavailable(name_ + ": " + reason_);
  }
  if (c->err != 0) {
    reason_ = c->errstr;
    redisFree(c);
    return Unavailable(name_ + ": " + reason_);
  }
  failure_ = Failure::kNone;
  context_ = c;
  c->reader->fn = &reply_functions;
  // hiredis 0.14 opens its socket without SOCK_CLOEXEC: without this, every
  // program the process runs (`delayq work`'s commands) would inherit an
  // open, authenticated connection. A spawn by another thread between the
  // socket() and this line can still catch it: spawners close what they do
  // not pass on (src/cli/command_runner.cc).
  fcntl(c->fd, F_SETFD, fcntl(c->fd, F_GETFD) | FD_CLOEXEC);
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // hiredis sets it too
  answered_ = false;
  if (options_.tls) return StartTls();
  if (redisSetTimeout(c, Timeval(command_timeout_ms_)) != REDIS_OK) return Broken(errno);
  return Handshake();
}

Status Connection::StartTls() {
  const int fd = context_->fd;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  const std::string& server_name =
      options_.tls_server_name.empty() ? endpoint_.host : options_.tls_server_name;
  Result<std::unique_ptr<net::TlsSession>> session =
      net::TlsSession::Connect(*options_.tls, fd, server_name);
  if (!session.ok()) return TlsBroken(Failure::kConnect, session.status().message());
  tls_ = std::move(session).value();
  // One bound for the whole handshake: a server that trickles bytes cannot
  // stretch it.
  const int budget_ms = options_.connect_timeout_ms + command_timeout_ms_;
  const int64_t deadline = SteadyMs() + budget_ms;
  SigpipeGuard no_sigpipe;
  for (;;) {
    const net::TlsIo io = tls_->Handshake();
    if (io == net::TlsIo::kDone) break;
    if (io == net::TlsIo::kError || io == net::TlsIo::kClosed) {
      std::string why =
          io == net::TlsIo::kError ? tls_->error() : "the server closed the connection";
      return TlsBroken(Failure::kConnect, "TLS handshake failed: " + why);
    }
    const int64_t left = deadline - SteadyMs();
    if (left <= 0 ||
        !WaitFor(io == net::TlsIo::kWantRead ? POLLIN : POLLOUT, static_cast<int>(left))) {
      return TlsBroken(Failure::kConnect,
                       "no answer to the TLS handshake within " + std::to_string(budget_ms) +
                           " ms (connect + command timeout; a plaintext Redis on a rediss:// "
                           "URL does not answer one)");
    }
  }
  return Handshake();
}

// AUTH and SELECT in one round trip.
Status Connection::Handshake() {
  std::vector<Argv> cmds;
  if (options_.password) {
    if (options_.user.empty()) {
      cmds.push_back({"AUTH", *options_.password});
    } else {
      cmds.push_back({"AUTH", options_.user, *options_.password});
    }
  }
  if (options_.db != 0) cmds.push_back({"SELECT", std::to_string(options_.db)});
  if (cmds.empty()) return Status::Ok();
  for (const Argv& argv : cmds) {
    if (Status s = Append(argv); !s.ok()) return s;
  }
  std::vector<Reply> replies;
  if (Status s = Receive(cmds.size(), &replies); !s.ok()) return s;
  for (size_t i = 0; i < replies.size(); ++i) {
    if (replies[i].is_error()) {
      Drop();
      return Unavailable(name_ + ": " + cmds[i][0] + " refused: " + replies[i].str());
    }
  }
  return Status::Ok();
}

Status Connection::Append(std::span<const std::string_view> argv) { return AppendArgs(argv); }
Status Connection::Append(const Argv& argv) { return AppendArgs(argv); }
Status Connection::Append(std::initializer_list<std::string_view> argv) { return AppendArgs(argv); }

// Formats the command into a reused buffer, which hiredis copies once into
// its output buffer.
template <typename Range>
Status Connection::AppendArgs(const Range& argv) {
  // "*0\r\n" gets no reply at all: the caller would wait for the timeout.
  if (std::size(argv) == 0) return InvalidArgument(name_ + ": empty command");
  if (Status s = EnsureConnected(); !s.ok()) return s;
  if (tls_) {
    FormatCommand(argv, &tls_out_);
    ++pending_;
    return Status::Ok();
  }
  format_.clear();
  FormatCommand(argv, &format_);
  if (redisAppendFormattedCommand(context_, format_.data(), format_.size()) != REDIS_OK) {
    return Broken(errno);
  }
  if (format_.capacity() > kKeptFormatBytes) std::string().swap(format_);
  ++pending_;
  return Status::Ok();
}

Status Connection::Flush() {
  if (context_ == nullptr) return Broken(0);
  SigpipeGuard no_sigpipe;
  if (tls_) return TlsFlush();
  int done = 0;
  while (!done) {
    if (redisBufferWrite(context_, &done) != REDIS_OK) return Broken(errno);
  }
  return Status::Ok();
}

Status Connection::TlsFlush() {
  size_t written = 0;
  while (written < tls_out_.size()) {
    size_t n = 0;
    const net::TlsIo io = tls_->Write(std::string_view(tls_out_).substr(written), &n);
    switch (io) {
      case net::TlsIo::kDone:
        written += n;
        break;
      case net::TlsIo::kWantRead:
      case net::TlsIo::kWantWrite:
        if (!WaitFor(io == net::TlsIo::kWantRead ? POLLIN : POLLOUT, command_timeout_ms_)) {
          return TlsBroken(Failure::kTimeout, "could not write within " +
                                                  std::to_string(command_timeout_ms_) +
                                                  " ms (command timeout)");
        }
        break;
      case net::TlsIo::kClosed:
        return TlsBroken(Failure::kClosed, TlsClosedReason());
      case net::TlsIo::kError:
        return TlsBroken(Failure::kLost, tls_->error());
    }
  }
  if (tls_out_.capacity() > kKeptFormatBytes) std::string().swap(tls_out_);
  tls_out_.clear();
  return Status::Ok();
}

// Feeds the reader everything the session has now. With `wait`, until at
// least something came: the socket is polled (up to the command timeout)
// while the session wants it. Without, it returns when the session wants the
// socket, maybe having fed nothing (what arrived was TLS's own, a ticket).
// A server that answers and closes at once (it saw the client's FIN, or
// shuts down) gets its last reply and its close_notify or alert read here
// in one go: the end is kept in tls_end_ and reported by the next call, once
// the caller has taken the replies fed before it. As on a plaintext
// connection, whose close shows only on the read after the last reply.
Status Connection::TlsRead(bool wait) {
  if (tls_end_ != Failure::kNone) return TlsEnded();
  bool got_any = false;
  char buf[kTlsReadBytes];
  for (;;) {
    size_t n = 0;
    const net::TlsIo io = tls_->Read(buf, sizeof buf, &n);
    switch (io) {
      case net::TlsIo::kDone:
        if (redisReaderFeed(context_->reader, buf, n) != REDIS_OK) {
          return TlsBroken(Failure::kLost, context_->reader->errstr);
        }
        got_any = true;
        break;
      case net::TlsIo::kWantRead:
      case net::TlsIo::kWantWrite:
        if (got_any || !wait) return Status::Ok();
        if (!WaitFor(io == net::TlsIo::kWantRead ? POLLIN : POLLOUT, command_timeout_ms_)) {
          return TlsBroken(
              Failure::kTimeout,
              "no reply within " + std::to_string(command_timeout_ms_) + " ms (command timeout)");
        }
        break;
      case net::TlsIo::kClosed:
      case net::TlsIo::kError:
        tls_end_ = io == net::TlsIo::kClosed ? Failure::kClosed : Failure::kLost;
        if (io == net::TlsIo::kError) tls_end_error_ = tls_->error();
        if (got_any) return Status::Ok();
        return TlsEnded();
    }
  }
}

Status Connection::TlsEnded() {
  const Failure failure = tls_end_;
  std::string why = failure == Failure::kClosed ? TlsClosedReason() : tls_end_error_;
  return TlsBroken(failure, std::move(why));
}

Status Connection::Receive(size_t n, std::vector<Reply>* out) {
  assert(n <= pending_);
  SigpipeGuard no_sigpipe;  // redisGetReply writes what is buffered first
  if (tls_) {
    if (Status s = TlsFlush(); !s.ok()) return s;
    for (size_t i = 0; i < n; ++i) {
      void* raw = nullptr;
      for (;;) {
        if (redisReaderGetReply(context_->reader, &raw) != REDIS_OK) {
          return TlsBroken(Failure::kLost, context_->reader->errstr);
        }
        if (raw != nullptr) break;
        if (Status s = TlsRead(/*wait=*/true); !s.ok()) return s;
      }
      --pending_;
      answered_ = true;
      out->push_back(TakeReply(raw));
    }
    return Status::Ok();
  }
  for (size_t i = 0; i < n; ++i) {
    if (context_ == nullptr) return Broken(0);
    void* raw = nullptr;
    if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
      Status broken = Broken(errno);
      // What a server said before it hung up is often why it did (a TLS
      // port's "-ERR this port speaks TLS").
      if (i > 0 && out->back().is_error()) {
        return Unavailable(broken.message() + ", after answering \"" + out->back().str() + "\"");
      }
      return broken;
    }
    --pending_;
    answered_ = true;
    out->push_back(TakeReply(raw));
  }
  return Status::Ok();
}

Status Connection::set_command_timeout_ms(int ms) {
  command_timeout_ms_ = ms;
  if (context_ != nullptr && redisSetTimeout(context_, Timeval(ms)) != REDIS_OK) {
    return Broken(errno);
  }
  return Status::Ok();
}

Result<Reply> Connection::Exec(const Argv& argv) {
  if (Status s = Append(argv); !s.ok()) return s;
  std::vector<Reply> replies;
  if (Status s = Receive(pending_, &replies); !s.ok()) return s;
  return std::move(replies.back());
}

Result<Reply> Connection::Exec(std::initializer_list<std::string_view> argv) {
  if (Status s = Append(argv); !s.ok()) return s;
  std::vector<Reply> replies;
  if (Status s = Receive(pending_, &replies); !s.ok()) return s;
  return std::move(replies.back());
}

Result<std::vector<Reply>> Connection::ExecMany(std::span<const Argv> cmds) {
  // Replies owed from an earlier, abandoned pipeline would be mistaken for
  // ours: read them off first.
  std::vector<Reply> replies;
  if (pending_ > 0) {
    if (Status s = Receive(pending_, &replies); !s.ok()) return s;
    replies.clear();
  }
  for (const Argv& argv : cmds) {
    if (Status s = Append(argv); !s.ok()) {
      Drop();  // half a pipeline buffered: start clean next time
      return s;
    }
  }
  replies.reserve(cmds.size());
  if (Status s = Receive(cmds.size(), &replies); !s.ok()) return s;
  return replies;
}

Status Connection::TakeBuffered(std::vector<Reply>* out) {
  if (context_ == nullptr) return Broken(0);
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) return Broken(errno);
    if (raw == nullptr) return Status::Ok();
    if (pending_ > 0) --pending_;
    out->push_back(TakeReply(raw));
  }
}

Status Connection::ReadSome(std::vector<Reply>* out) {
  if (context_ == nullptr) return Broken(0);
  if (tls_) {
    // Everything the session has, so that no decrypted byte waits inside it
    // while the caller polls the socket.
    if (Status s = TlsRead(/*wait=*/false); !s.ok()) return s;
    const size_t before = out->size();
    if (Status s = TakeBuffered(out); !s.ok()) return s;
    // Ended after bytes that made no whole reply: nothing more will come,
    // and the socket need not stay readable to say so.
    if (out->size() == before && tls_end_ != Failure::kNone) return TlsEnded();
    return Status::Ok();
  }
  if (redisBufferRead(context_) != REDIS_OK) return Broken(errno);
  return TakeBuffered(out);
}

int Connection::fd() const { return context_ != nullptr ? context_->fd : -1; }

}  // namespace delayq::redis
