// The load generator's I/O: one thread, one epoll set, N non-blocking
// TCP_NODELAY connections to one server. A benchmark drives it through a
// NetLoop::Handler: it queues requests on a connection (Conn::Add, ...), the
// loop writes them with one write(2) per connection per turn, reads replies
// into a large per-connection buffer, and hands each reply back in request
// order. No threads, no allocation per request, one clock read per read(2):
// the client shares two vCPUs with the server it measures, so every cycle
// it spends is taken from the server.
//
// Bounded by construction: a connection that has requests outstanding and
// gets no reply for longer than the stall limit (plus the longest wait a
// request asked the server for) ends the run with an error, as does a
// closed connection or a reply that cannot be parsed.
//
// TLS (optional, --tls-ca): each connection's handshake is done at setup,
// blocking (untimed); afterwards every read and write of that connection
// goes through its net::TlsSession, and what the session wants (to read
// before it can write, or the reverse) maps onto EPOLLIN / EPOLLOUT. The
// plaintext path pays one branch per read(2) or write(2) for it.
//
// Thread-safety: none; everything belongs to the thread that calls Run.
#ifndef DELAYQ_BENCH_NET_LOOP_H_
#define DELAYQ_BENCH_NET_LOOP_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "clients.h"
#include "delayq/status.h"
#include "net/tls.h"

namespace delayq::bench {

// CLOCK_MONOTONIC in ns; CLOCK_REALTIME in µs.
int64_t MonoNs();
int64_t WallUs();

// A log-linear histogram of non-negative integers (ns here): exact below
// 128, then 64 buckets per power of two (values within 1.6 %). Fixed size,
// so recording never allocates.
class Histogram {
 public:
  Histogram();
  void Record(int64_t v);  // negative values count as 0
  void Reset();
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  // The value at percentile q (0..100); 0 when empty.
  int64_t Percentile(double q) const;

 private:
  static int Index(uint64_t v);
  static int64_t Value(int index);

  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0;
  int64_t max_ = 0;
};

// A request sent and not yet answered.
struct Pending {
  Op op;
  uint32_t tag;     // the benchmark's own number (e.g. a job's sequence)
  int64_t sent_ns;  // MonoNs() when it was queued (it is written in that turn)
};

class NetLoop;

// One connection. Requests queued here are written when the handler
// callback that queued them returns.
class Conn {
 public:
  int index() const { return index_; }
  size_t pending() const { return pending_size_; }

  void Bind(std::string_view topic);
  void Add(const AddArgs& a, uint32_t tag = 0);
  void Reserve(std::string_view topic, int64_t wait_ms, uint32_t tag = 0);
  void Finish(std::string_view id, std::string_view receipt, uint32_t tag = 0);
  // A request encoded by the caller (RESP: AppendRespCommand), answered as
  // Op::kCommand with the reply's bytes in Reply::raw. wait_ms: how long the
  // server may hold it (a blocking reserve), for the stall limit.
  void Command(std::string_view encoded, int64_t wait_ms = 0, uint32_t tag = 0);
  // A finish held back until SendStaged, so a job's finish can travel with
  // the next batch of requests: replies' views die with the next read, the
  // staged bytes do not.
  void StageFinish(std::string_view id, std::string_view receipt);
  int staged() const { return staged_count_; }
  void SendStaged();

 private:
  friend class NetLoop;
  Conn(NetLoop* loop, int index, int fd) : loop_(loop), index_(index), fd_(fd) {}
  void Push(Op op, uint32_t tag);
  // Room to read into: drops what was parsed, else grows the buffer.
  void MakeRoom();
  const Pending& Front() const { return ring_[ring_head_]; }
  void PopFront();

  NetLoop* loop_;
  int index_;
  int fd_;
  std::unique_ptr<net::TlsSession> tls_;  // null: plaintext
  bool tls_read_wants_write_ = false;     // a TLS read waits for EPOLLOUT
  bool tls_write_wants_read_ = false;     // a TLS write waits for EPOLLIN
  std::string out_;                       // requests queued, out_[out_sent_..] not yet written
  size_t out_sent_ = 0;
  bool want_write_ = false;  // EPOLLOUT armed
  std::string staged_;
  int staged_count_ = 0;
  std::vector<char> in_;
  size_t in_begin_ = 0, in_end_ = 0;
  std::vector<Pending> ring_;  // capacity a power of two
  size_t ring_head_ = 0, pending_size_ = 0;
  int64_t last_progress_ns_ = 0;
};

class NetLoop {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // The reply to `p`, the oldest request of `c`. Views in `r` die with
    // the next read of `c`: copy or StageFinish what must outlive this call.
    virtual void OnReply(Conn& c, const Pending& p, const Reply& r) = 0;
    // After the replies of one read of `c` were handled.
    virtual void OnReplies(Conn& c) {}
    // Every tick (and once before the first wait). Return false to end Run.
    virtual bool OnTick() = 0;
  };

  // Opens `connections` connections to host:port. With `tls` (a client
  // context), each one does a TLS handshake before Connect returns, the
  // server's certificate checked for `host`. Errors: kUnavailable naming
  // the address when a connection or a handshake cannot be made.
  // A client context for Connect that verifies servers against the PEM CA
  // file `ca_file`, tuned for this loop (OpenSSL reads ahead, keeps its
  // buffers). Errors: kInvalidArgument naming the file.
  static Result<std::shared_ptr<const net::TlsContext>> ClientTls(const std::string& ca_file);
  static Result<std::unique_ptr<NetLoop>> Connect(
      const Codec* codec, const std::string& host, int port, int connections,
      std::shared_ptr<const net::TlsContext> tls = nullptr);
  ~NetLoop();

  int size() const { return static_cast<int>(conns_.size()); }
  Conn& conn(int i) { return *conns_[static_cast<size_t>(i)]; }
  const Codec& codec() const { return *codec_; }

  // As of the last epoll wake-up or read(2).
  int64_t now_ns() const { return now_ns_; }
  int64_t now_wall_us() const { return now_wall_us_; }

  // How long a connection may owe replies without getting any, on top of
  // the longest wait it asked for. Default 10 s.
  void set_stall_ns(int64_t ns) { stall_ns_ = ns; }

  // Calls OnTick every `tick_ns` until it returns false or Stop is called.
  // Errors: kUnavailable for a stalled or closed connection, a write error
  // or a reply that is not the protocol's.
  Status Run(Handler& h, int64_t tick_ns);
  // Ends Run after the current callback.
  void Stop() { stop_ = true; }

 private:
  friend class Conn;
  NetLoop(const Codec* codec, int epoll_fd) : codec_(codec), epoll_fd_(epoll_fd) {}
  void UpdateClock();
  Status Read(Handler& h, Conn& c);
  Status ReadTls(Handler& h, Conn& c);
  Status ParseReplies(Handler& h, Conn& c);
  Status Flush(Conn& c);
  Status FlushTls(Conn& c);
  void ArmWrite(Conn& c, bool on);
  Status CheckStalls();

  const Codec* codec_;
  int epoll_fd_;
  std::shared_ptr<const net::TlsContext> tls_;  // null: plaintext
  std::vector<std::unique_ptr<Conn>> conns_;
  int64_t now_ns_ = 0;
  int64_t now_wall_us_ = 0;
  int64_t stall_ns_ = 10'000'000'000;
  int64_t max_wait_ns_ = 0;  // the longest reserve wait asked for
  bool stop_ = false;
};

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_NET_LOOP_H_
