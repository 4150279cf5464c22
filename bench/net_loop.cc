// NetLoop: level-triggered epoll over the benchmark's connections. A turn
// reads each readable connection once into its buffer (again only if the
// read filled the buffer), hands complete replies to the handler, and writes
// whatever the handler queued on that connection in one write(2). EPOLLOUT
// is armed only while a write is incomplete.
//
// Over TLS the same, through the connection's session: a read is repeated
// until the session wants more bytes from the socket (OpenSSL reads ahead
// and may hold whole records that epoll knows nothing of), and a write the
// session cannot finish before it has read waits for EPOLLIN, which is always
// armed; a read that waits to write arms EPOLLOUT.
#include "net_loop.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace delayq::bench {
namespace {

constexpr size_t kReadBuffer = 256 << 10;
constexpr int kMaxEvents = 256;

const char* OpName(Op op) {
  switch (op) {
    case Op::kBind:
      return "bind";
    case Op::kAdd:
      return "add";
    case Op::kAddAux:
      return "add (HSET)";
    case Op::kReserve:
      return "reserve";
    case Op::kFinish:
      return "finish";
    case Op::kCommand:
      return "command";
  }
  return "?";
}

// Up to 80 bytes of a reply, printable, for an error message.
std::string Excerpt(const char* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < 80; ++i) {
    char c = p[i];
    if (c == '\r') {
      s += "\\r";
    } else if (c == '\n') {
      s += "\\n";
    } else {
      s += (c >= 32 && c < 127) ? c : '?';
    }
  }
  return s;
}

// Completes the TLS handshake on `fd`, waiting with poll(): setup is not
// timed. Bounded by 5 s per step.
Status HandshakeBlocking(net::TlsSession& session, int fd, const std::string& where) {
  for (;;) {
    net::TlsIo r = session.Handshake();
    if (r == net::TlsIo::kDone) return Status::Ok();
    if (r != net::TlsIo::kWantRead && r != net::TlsIo::kWantWrite) {
      return Unavailable(
          "TLS handshake with " + where + ": " +
          (r == net::TlsIo::kClosed ? "the server closed the connection" : session.error()));
    }
    pollfd p{fd, static_cast<short>(r == net::TlsIo::kWantRead ? POLLIN : POLLOUT), 0};
    int n = poll(&p, 1, 5000);
    if (n == 0) return Unavailable("TLS handshake with " + where + ": no answer for 5 s");
    if (n < 0 && errno != EINTR) return Unavailable(std::string("poll: ") + strerror(errno));
  }
}

std::string TlsFailure(const Conn& c, const char* what, net::TlsIo r,
                       const net::TlsSession& session) {
  return "connection " + std::to_string(c.index()) + ": TLS " + what + ": " +
         (r == net::TlsIo::kClosed ? std::string("the server closed it") : session.error());
}

}  // namespace

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t WallUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

// --- Histogram ----------------------------------------------------------------

Histogram::Histogram() : buckets_(128 + 57 * 64, 0) {}

int Histogram::Index(uint64_t v) {
  if (v < 128) return static_cast<int>(v);
  int shift = std::bit_width(v) - 7;  // v >> shift is in [64, 128)
  return 128 + (shift - 1) * 64 + static_cast<int>((v >> shift) - 64);
}

int64_t Histogram::Value(int index) {
  if (index < 128) return index;
  int shift = (index - 128) / 64 + 1;
  uint64_t mantissa = static_cast<uint64_t>((index - 128) % 64 + 64);
  return static_cast<int64_t>((mantissa << shift) + ((uint64_t{1} << shift) >> 1));
}

void Histogram::Record(int64_t v) {
  if (v < 0) v = 0;
  ++buckets_[static_cast<size_t>(Index(static_cast<uint64_t>(v)))];
  ++count_;
  max_ = std::max(max_, v);
}

void Histogram::Reset() {
  std::fill(buckets_.begin(), buckets_.end(), 0);
  count_ = 0;
  max_ = 0;
}

int64_t Histogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  auto rank = static_cast<uint64_t>(q / 100.0 * static_cast<double>(count_));
  if (rank >= count_) rank = count_ - 1;
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen > rank) return std::min(Value(static_cast<int>(i)), max_);
  }
  return max_;
}

// --- Conn ---------------------------------------------------------------------

void Conn::Push(Op op, uint32_t tag) {
  if (pending_size_ == ring_.size()) {
    std::vector<Pending> bigger(ring_.empty() ? 64 : ring_.size() * 2);
    for (size_t i = 0; i < pending_size_; ++i) {
      bigger[i] = ring_[(ring_head_ + i) & (ring_.size() - 1)];
    }
    ring_.swap(bigger);
    ring_head_ = 0;
  }
  if (pending_size_ == 0) last_progress_ns_ = loop_->now_ns_;
  ring_[(ring_head_ + pending_size_) & (ring_.size() - 1)] = Pending{op, tag, loop_->now_ns_};
  ++pending_size_;
}

void Conn::PopFront() {
  ring_head_ = (ring_head_ + 1) & (ring_.size() - 1);
  --pending_size_;
}

void Conn::MakeRoom() {
  if (in_end_ < in_.size()) return;
  if (in_begin_ > 0) {
    std::memmove(in_.data(), in_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
  } else {
    in_.resize(in_.size() * 2);
  }
}

void Conn::Bind(std::string_view topic) {
  int n = loop_->codec_->Bind(&out_, topic);
  for (int i = 0; i < n; ++i) Push(Op::kBind, 0);
}

void Conn::Add(const AddArgs& a, uint32_t tag) {
  int n = loop_->codec_->Add(&out_, a);
  if (n == 2) Push(Op::kAddAux, tag);
  Push(Op::kAdd, tag);
}

void Conn::Reserve(std::string_view topic, int64_t wait_ms, uint32_t tag) {
  loop_->codec_->Reserve(&out_, topic, wait_ms);
  loop_->max_wait_ns_ = std::max(loop_->max_wait_ns_, wait_ms * 1'000'000);
  Push(Op::kReserve, tag);
}

void Conn::Finish(std::string_view id, std::string_view receipt, uint32_t tag) {
  loop_->codec_->Finish(&out_, id, receipt);
  Push(Op::kFinish, tag);
}

void Conn::Command(std::string_view encoded, int64_t wait_ms, uint32_t tag) {
  out_.append(encoded);
  loop_->max_wait_ns_ = std::max(loop_->max_wait_ns_, wait_ms * 1'000'000);
  Push(Op::kCommand, tag);
}

void Conn::StageFinish(std::string_view id, std::string_view receipt) {
  loop_->codec_->Finish(&staged_, id, receipt);
  ++staged_count_;
}

void Conn::SendStaged() {
  out_.append(staged_);
  for (int i = 0; i < staged_count_; ++i) Push(Op::kFinish, 0);
  staged_.clear();
  staged_count_ = 0;
}

// --- NetLoop ------------------------------------------------------------------

Result<std::shared_ptr<const net::TlsContext>> NetLoop::ClientTls(const std::string& ca_file) {
  net::TlsOptions o;
  o.ca_file = ca_file;
  auto ctx = net::TlsContext::Create(net::TlsContext::Role::kClient, o);
  if (!ctx.ok()) return ctx.status();
  // One read(2) for many records rather than two per record (header, then
  // body), and buffers kept rather than freed and allocated again per read.
  SSL_CTX* raw = (*ctx)->native();
  SSL_CTX_set_read_ahead(raw, 1);
  SSL_CTX_set_default_read_buffer_len(raw, 64 << 10);
  SSL_CTX_clear_mode(raw, SSL_MODE_RELEASE_BUFFERS);
  return std::shared_ptr<const net::TlsContext>(std::move(ctx).value());
}

Result<std::unique_ptr<NetLoop>> NetLoop::Connect(const Codec* codec, const std::string& host,
                                                  int port, int connections,
                                                  std::shared_ptr<const net::TlsContext> tls) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument("--host: '" + host + "' is not an IPv4 address");
  }
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return Internal(std::string("epoll_create1: ") + strerror(errno));
  std::unique_ptr<NetLoop> loop(new NetLoop(codec, ep));
  loop->tls_ = std::move(tls);
  loop->UpdateClock();
  std::string where = host + ":" + std::to_string(port);
  for (int i = 0; i < connections; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Unavailable(std::string("socket: ") + strerror(errno));
    timeval tv{5, 0};  // bounds a connect to a server that does not accept
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      std::string why = strerror(errno);
      close(fd);
      return Unavailable("cannot connect to " + where + ": " + why);
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // A send buffer that holds a whole pipelined batch (500 FINISHes are
    // ~40 KB; a fresh socket's is 16 KB, net.ipv4.tcp_wmem): otherwise the
    // write stops short, and the rest, the batch's RESERVE with it, waits
    // for EPOLLOUT behind this thread's other connections' replies. The
    // harness would time its own backlog, not the server.
    int sndbuf = 1 << 20;
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    auto c = std::unique_ptr<Conn>(new Conn(loop.get(), i, fd));
    if (loop->tls_ != nullptr) {
      auto session = net::TlsSession::Connect(*loop->tls_, fd, host);
      Status s = session.ok() ? HandshakeBlocking(**session, fd, where) : session.status();
      if (!s.ok()) {
        close(fd);
        return s;
      }
      c->tls_ = std::move(session).value();
    }
    c->in_.resize(kReadBuffer);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = c.get();
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      return Internal(std::string("epoll_ctl: ") + strerror(errno));
    }
    loop->conns_.push_back(std::move(c));
  }
  return loop;
}

NetLoop::~NetLoop() {
  for (auto& c : conns_) {
    c->tls_.reset();
    close(c->fd_);
  }
  close(epoll_fd_);
}

void NetLoop::UpdateClock() {
  now_ns_ = MonoNs();
  now_wall_us_ = WallUs();
}

void NetLoop::ArmWrite(Conn& c, bool on) {
  if (on == c.want_write_) return;
  c.want_write_ = on;
  epoll_event ev{};
  ev.events = EPOLLIN | (on ? uint32_t{EPOLLOUT} : 0u);
  ev.data.ptr = &c;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd_, &ev);
}

Status NetLoop::Flush(Conn& c) {
  if (c.tls_ != nullptr) return FlushTls(c);
  while (c.out_sent_ < c.out_.size()) {
    ssize_t n = write(c.fd_, c.out_.data() + c.out_sent_, c.out_.size() - c.out_sent_);
    if (n > 0) {
      c.out_sent_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    return Unavailable(std::string("write: ") + (n < 0 ? strerror(errno) : "wrote nothing"));
  }
  bool done = c.out_sent_ == c.out_.size();
  if (done) {
    c.out_.clear();
    c.out_sent_ = 0;
  }
  ArmWrite(c, !done);  // EPOLLOUT while bytes wait, not after
  return Status::Ok();
}

Status NetLoop::FlushTls(Conn& c) {
  c.tls_write_wants_read_ = false;
  while (c.out_sent_ < c.out_.size()) {
    size_t n = 0;
    net::TlsIo r = c.tls_->Write(std::string_view(c.out_).substr(c.out_sent_), &n);
    if (r == net::TlsIo::kDone) {
      c.out_sent_ += n;
      continue;
    }
    if (r == net::TlsIo::kWantWrite) break;
    if (r == net::TlsIo::kWantRead) {  // retried by the Read that EPOLLIN brings
      c.tls_write_wants_read_ = true;
      break;
    }
    return Unavailable(TlsFailure(c, "write", r, *c.tls_));
  }
  bool done = c.out_sent_ == c.out_.size();
  if (done) {
    c.out_.clear();
    c.out_sent_ = 0;
  }
  ArmWrite(c, (!done && !c.tls_write_wants_read_) || c.tls_read_wants_write_);
  return Status::Ok();
}

Status NetLoop::ParseReplies(Handler& h, Conn& c) {
  while (c.in_begin_ < c.in_end_) {
    const char* p = c.in_.data() + c.in_begin_;
    size_t n = c.in_end_ - c.in_begin_;
    if (c.pending_size_ == 0) {
      return Unavailable("connection " + std::to_string(c.index_) +
                         ": bytes nobody asked for: " + Excerpt(p, n));
    }
    Pending front = c.Front();
    Reply reply;
    long used = codec_->Parse(p, n, front.op, &reply);
    if (used == 0) break;
    if (used < 0) {
      return Unavailable("connection " + std::to_string(c.index_) + ": not a reply to " +
                         OpName(front.op) + ": " + Excerpt(p, n));
    }
    c.in_begin_ += static_cast<size_t>(used);
    c.PopFront();
    c.last_progress_ns_ = now_ns_;
    h.OnReply(c, front, reply);
  }
  if (c.in_begin_ == c.in_end_) c.in_begin_ = c.in_end_ = 0;
  return Status::Ok();
}

Status NetLoop::Read(Handler& h, Conn& c) {
  if (c.tls_ != nullptr) return ReadTls(h, c);
  for (;;) {
    c.MakeRoom();
    size_t room = c.in_.size() - c.in_end_;
    ssize_t n = read(c.fd_, c.in_.data() + c.in_end_, room);
    if (n > 0) {
      UpdateClock();
      c.in_end_ += static_cast<size_t>(n);
      if (Status s = ParseReplies(h, c); !s.ok()) return s;
      if (static_cast<size_t>(n) < room) break;
      continue;
    }
    if (n == 0) {
      return Unavailable("connection " + std::to_string(c.index_) + ": the server closed it");
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) break;
    return Unavailable(std::string("read: ") + strerror(errno));
  }
  h.OnReplies(c);
  return Flush(c);
}

Status NetLoop::ReadTls(Handler& h, Conn& c) {
  c.tls_read_wants_write_ = false;
  for (;;) {  // until the session needs the socket: it may hold records already read
    c.MakeRoom();
    size_t n = 0;
    net::TlsIo r = c.tls_->Read(c.in_.data() + c.in_end_, c.in_.size() - c.in_end_, &n);
    if (r == net::TlsIo::kDone) {
      UpdateClock();
      c.in_end_ += n;
      if (Status s = ParseReplies(h, c); !s.ok()) return s;
      continue;
    }
    if (r == net::TlsIo::kWantRead) break;
    if (r == net::TlsIo::kWantWrite) {  // FlushTls arms EPOLLOUT; Run reads again then
      c.tls_read_wants_write_ = true;
      break;
    }
    return Unavailable(TlsFailure(c, "read", r, *c.tls_));
  }
  h.OnReplies(c);
  return Flush(c);
}

Status NetLoop::CheckStalls() {
  for (auto& c : conns_) {
    if (c->pending_size_ == 0) continue;
    int64_t silent = now_ns_ - c->last_progress_ns_;
    if (silent > stall_ns_ + max_wait_ns_) {
      return Unavailable("connection " + std::to_string(c->index_) + ": no reply for " +
                         std::to_string(silent / 1'000'000) + " ms with " +
                         std::to_string(c->pending_size_) + " requests outstanding (oldest: " +
                         OpName(c->Front().op) + "): the server stopped answering");
    }
  }
  return Status::Ok();
}

Status NetLoop::Run(Handler& h, int64_t tick_ns) {
  epoll_event events[kMaxEvents];
  UpdateClock();
  int64_t next_tick = now_ns_;
  int64_t next_stall_check = now_ns_;
  while (!stop_) {
    if (now_ns_ >= next_tick) {
      next_tick = now_ns_ + tick_ns;
      if (!h.OnTick()) break;
      for (auto& c : conns_) {
        if (c->out_sent_ < c->out_.size() && !c->want_write_) {
          if (Status s = Flush(*c); !s.ok()) return s;
        }
      }
      if (stop_) break;
    }
    if (now_ns_ >= next_stall_check) {
      next_stall_check = now_ns_ + 100'000'000;
      if (Status s = CheckStalls(); !s.ok()) return s;
    }
    int64_t wait_ns = std::max<int64_t>(0, next_tick - now_ns_);
    int timeout_ms = static_cast<int>((wait_ns + 999'999) / 1'000'000);
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, timeout_ms);
    if (n < 0 && errno != EINTR) return Internal(std::string("epoll_wait: ") + strerror(errno));
    UpdateClock();
    for (int i = 0; i < n; ++i) {
      Conn& c = *static_cast<Conn*>(events[i].data.ptr);
      if (events[i].events & EPOLLOUT) {
        if (Status s = Flush(c); !s.ok()) return s;
      }
      if ((events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) || c.tls_read_wants_write_) {
        if (Status s = Read(h, c); !s.ok()) return s;
      }
      if (stop_) break;
    }
  }
  return Status::Ok();
}

}  // namespace delayq::bench
