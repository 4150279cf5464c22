// TcpServer: a listening socket and its connections on one EventLoop — the
// part of a network front end that knows nothing of its protocol.
//
// It accepts (up to max_connections), reads what a socket has into the
// connection's `in`, hands the connection to its Handler to parse and answer
// into `out`, and writes `out` once per read. It enforces the limits every
// protocol needs: output a client does not read (max_output_bytes), idle
// connections (idle_timeout_ms), requests sent too slowly (request_timeout_ms,
// against slowloris), and it drains gracefully on shutdown. Reading and
// serving are separate: a connection whose replies pile up unread is not
// served, but its input is still read, up to max_input_bytes.
//
// Syscalls per request at pipeline depth 1: one read (another only when the
// 64 KiB read buffer came back full), one write, and a share of epoll_wait.
//
// TLS (TcpServerOptions::tls): every accepted connection is a TLS session;
// there is no plaintext fallback. The handshake runs on the loop's events
// like a read (never blocking the others), bounded by
// tls_handshake_timeout_ms (a client that stalls it, slowloris-style, is
// closed); a handshake refused (a plaintext client, a client certificate
// the CA did not sign or that expired, no common protocol) is logged with
// the reason and the peer, at most kTlsLogsPerSecond lines a second. A
// plaintext request is answered in plaintext by the handler's
// PlaintextReply (HTTP's "this port speaks TLS") before the close. The
// handler sees decrypted bytes in `in` and writes plaintext to `out`, as
// without TLS. SetTls swaps the context for new connections (certificates
// reloaded on SIGHUP); connections keep the one they began with.
//
// Thread-safety: the loop thread owns the server and its connections.
#ifndef DELAYQ_NET_TCP_SERVER_H_
#define DELAYQ_NET_TCP_SERVER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "delayq/status.h"
#include "net/event_loop.h"
#include "net/tls.h"

namespace delayq::net {

struct TcpServerOptions {
  std::string name = "tcp";        // for logs: "HTTP", "RESP"
  std::string host = "127.0.0.1";  // IPv4 address to listen on. Default: loopback.
  int port = 0;                    // 0: any free port (see TcpServer::port()).
  size_t max_connections = 10'000;
  // Replies a client may leave unread before it is dropped. Requests are
  // not served while a quarter of this (at most 1 MiB) is waiting to be
  // written, so a client that pipelines without reading meets backpressure
  // first. Default: 64 MiB.
  size_t max_output_bytes = 64 << 20;
  // Requests a client may send ahead, unserved, while its replies wait for
  // it to read them. Input is still read while the output is full, up to
  // this, so a client that writes its whole pipeline before it reads any
  // reply (redis-py's pipeline, redis-cli --pipe) can finish writing and
  // then read, instead of both sides waiting for each other; only a
  // pipeline larger than this stalls (as Redis's client-query-buffer-limit,
  // 1 GiB, bounds the same). A parked connection (a waiting long-poll)
  // buffers at most 1 MiB behind its wait. Default: 64 MiB.
  size_t max_input_bytes = 64 << 20;
  // A connection with nothing in flight is closed after this long without
  // input. 0: never. A connection waiting for its handler (a long-poll) is
  // not idle.
  int64_t idle_timeout_ms = 0;
  // A request that has begun must be complete within this long. 0: no limit.
  int64_t request_timeout_ms = 0;
  // Serve TLS on every connection with this (server) context; null: plaintext.
  std::shared_ptr<const TlsContext> tls = nullptr;
  // A TLS handshake must be complete within this long of the accept.
  int64_t tls_handshake_timeout_ms = 10'000;
  // false: no listener (host and port are ignored); connections come only
  // from Adopt (the in-process front-end tests, tests/server/README.md).
  bool listen = true;
};

// What replies may have to wait for before they are written: a store's log
// (QueueDriver's Mark / Released / Failed). The handler sets a connection's
// change_mark to Mark() after a request whose change its reply must wait
// for — a reply that comes later (a reserve that waited, into its hole)
// included, set before the reply is added; the replies it has from then on
// are held until Released() reaches it (so they leave in order, each after
// its change); if Failed() first,
// the connection is closed instead (the client cannot know whether its
// change was kept). Replies of a connection that changed nothing wait for
// nothing: not for other clients' changes, nor for a write that cannot be
// made (a full disk).
class OutputGate {
 public:
  virtual ~OutputGate() = default;
  virtual uint64_t Mark() const = 0;
  virtual uint64_t Released() const = 0;
  virtual bool Failed() const = 0;
};

// Handlers may keep per-connection state in Connection::state.
struct ConnectionState {
  virtual ~ConnectionState() = default;
};

struct Connection {
  uint64_t id = 0;
  int fd = -1;
  std::string in;   // received, not yet consumed by the handler
  std::string out;  // to be written
  std::unique_ptr<ConnectionState> state;
  // Set by the handler: close once `out` is written (QUIT, protocol errors,
  // "Connection: close").
  bool closing = false;
  // Set by the handler while it waits on something other than input (a
  // parked long-poll): input is buffered, not handed over, and the idle
  // timeout does not apply. The handler clears it and calls Resume.
  bool waiting = false;

  // Handlers stop consuming input once `out` holds this much; the server
  // hands them the rest when it has been written.
  bool OutputFull() const { return out.size() >= output_high_water; }

  // Replies that come later, in their place (a handler that lets requests
  // run while earlier ones await their answers): OpenHole marks where the
  // reply of the request being served goes, and FillHole puts it there
  // once known. Replies appended after a hole wait behind it: `out` is
  // written only up to the first hole, so replies leave in request order.
  uint64_t OpenHole();
  // False if no hole has that serial (it was filled already). A reply that
  // reports a change sets change_mark first: it waits for that change
  // (OutputGate), and so do the replies behind it that were stamped before
  // it came.
  bool FillHole(uint64_t serial, std::string_view reply);
  size_t holes() const { return holes_.size(); }
  // The serial the next OpenHole returns.
  uint64_t next_hole() const { return next_hole_; }
  // What may be written now: `out` up to its first hole.
  size_t Writable() const { return holes_.empty() ? out.size() : holes_.front().at; }
  // A reply is owed: bytes to write, or replies still to come.
  bool Owed() const { return !out.empty() || !holes_.empty(); }
  // `n` bytes from the front of `out` were written.
  void Consume(size_t n);
  // Bytes written to the socket since the connection opened: out[i] is byte
  // written() + i of everything sent, so a handler can tell, when the
  // connection closes, which of its replies never left (handed-out jobs to
  // give back).
  uint64_t written() const { return written_; }
  // Where in `out` hole `serial` is, or -1 if there is no such hole.
  int64_t HoleAt(uint64_t serial) const;

  // The TLS session (TcpServerOptions::tls), null on a plaintext listener.
  std::unique_ptr<TlsSession> tls;
  // The peer's address ("127.0.0.1:50312"), for the log lines about it.
  std::string PeerName() const;

  // TcpServer's own.
  size_t output_high_water = 0;
  int64_t accepted_ms = 0;            // when the connection was accepted (TLS handshake bound)
  bool tls_read_wants_write = false;  // SSL_read asked for writability
  bool tls_write_wants_read = false;  // SSL_write asked for readability
  uint64_t tls_read_timer = 0;        // ReadHeldLater's read on its way (0: none)
  bool want_write = false;
  bool reading = true;            // EPOLLIN armed (see UpdateEvents)
  bool peer_closed = false;       // the client sent FIN: close once answered
  int64_t last_input_ms = 0;      // last input, or the end of a wait: idle since
  int64_t request_since_ms = -1;  // when the pending partial request began
  // The output gate's (see OutputGate).
  // Set by the handler: the gate's Mark() after the latest change the
  // replies must wait for (see OutputGate).
  uint64_t change_mark = 0;
  size_t stamped = 0;       // leading bytes of `out` whose hold_until is known
  uint64_t hold_until = 0;  // Released() these bytes wait for
  bool held = false;        // in TcpServer::held_

 private:
  struct Hole {
    uint64_t serial;
    size_t at;  // offset in `out`; ascending along holes_
  };
  std::deque<Hole> holes_;
  uint64_t next_hole_ = 1;
  uint64_t written_ = 0;
};

class TcpHandler {
 public:
  virtual ~TcpHandler() = default;
  // A new connection: set up `c.state`.
  virtual void OnOpen(Connection& c) = 0;
  // Consume complete requests from the front of c.in, append replies to
  // c.out, and stop early when c.OutputFull(). Called after each read, and
  // when the output has drained, unless c.waiting.
  virtual void OnInput(Connection& c) = 0;
  // c is about to be closed and destroyed (withdraw what waits for it).
  virtual void OnClose(Connection& c) = 0;
  // Whether part of a request has been received and not yet answered
  // (request timeouts). The server adds "c.in is not empty" itself.
  virtual bool InRequest(const Connection& c) const { return false; }
  // The server is shutting down: answer whatever waits (c.waiting, holes)
  // now, and let the requests received behind it run (resume c).
  virtual void OnDrain(Connection& c) {}
  // Whether c has a request whose answer may hand it work it must then act
  // on (a reserve) still unanswered. A client that sends FIN then is taken as
  // gone (a worker that exited while it waited): the connection closes, and
  // OnClose withdraws the request. Requests that arrive with the FIN are
  // handed to OnInput with c.peer_closed already set, so a handler can
  // refuse to start such a request at all.
  virtual bool AwaitsWork(const Connection& c) const { return false; }
  // Written to a connection refused because max_connections are open.
  virtual std::string_view BusyReply() const = 0;
  // Written before closing a connection whose request took too long.
  virtual std::string_view TimeoutReply() const { return {}; }
  // Written, in plaintext, to a plaintext client of a TLS listener before it
  // is closed. Empty: closed without a word.
  virtual std::string_view PlaintextReply() const { return {}; }
};

class TcpServer {
 public:
  // Binds and listens. `loop` and `handler` must outlive the server.
  // Errors: kInvalidArgument for a bad address; kUnavailable if it cannot be
  // bound.
  static Result<std::unique_ptr<TcpServer>> Create(EventLoop* loop, TcpHandler* handler,
                                                   TcpServerOptions options);
  // Loop thread only: closes every connection and the listener.
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  int port() const { return port_; }
  // New connections are served with `tls` from now on (a reloaded
  // certificate); open ones keep theirs. REQUIRES: the server was created
  // with TLS (a listener does not change from plaintext to TLS).
  void SetTls(std::shared_ptr<const TlsContext> tls);
  bool tls() const { return options_.tls != nullptr; }
  size_t connections() const { return conns_.size(); }
  const TcpServerOptions& options() const { return options_; }
  bool draining() const { return draining_; }

  // The live connection with this id, or nullptr once it has closed.
  Connection* Find(uint64_t id);
  // Writes what c.out holds (and closes c if it is closing and done).
  // c may be destroyed: look it up again by id afterwards.
  void Flush(Connection& c);
  // Hands buffered input to the handler again after c.waiting was cleared,
  // then flushes. c may be destroyed.
  void Resume(Connection& c);
  void Close(uint64_t id);

  // For a peer that is not a socket (the in-process tests): serves `fd`,
  // which the server writes replies to and closes, as an accepted
  // connection; its input comes from Deliver, not from reading `fd`.
  // Returns the connection's id, 0 if the loop would not watch `fd`.
  uint64_t Adopt(int fd);
  // What a read of connection `id` would have returned: `bytes`, then the
  // peer's FIN if `eof`. Served and answered as a read is.
  void Deliver(uint64_t id, std::string_view bytes, bool eof = false);

  // Replies wait for `gate` (nullptr: none) before they are written. Call
  // ReleaseHeld at the end of each loop turn, after the gate may have moved.
  void SetOutputGate(OutputGate* gate) { gate_ = gate; }
  void ReleaseHeld();

  // Shutdown: stop accepting, answer what waits (OnDrain), serve the
  // requests each connection has received whole before now (those
  // pipelined behind a waiting reserve, or held back by unread replies,
  // included), finish writing, and close each connection once it owes
  // nothing. Input that arrives from now on is read but not served.
  // Drained() tells when all are gone.
  void BeginDrain();
  bool Drained() const { return draining_ && conns_.empty(); }

 private:
  TcpServer(EventLoop* loop, TcpHandler* handler, TcpServerOptions options, int listen_fd,
            int port);
  void OnAccept();
  void OnEvents(uint64_t id, uint32_t events);
  // TLS: schedules a read of what c's session holds (read ahead), which
  // the socket's readiness does not report.
  void ReadHeldLater(Connection& c);
  // TLS: drives c's handshake; once done, reads what came with it.
  void ContinueHandshake(Connection& c);
  // TLS: c's handshake failed: logged with the reason (rate-limited),
  // answered with PlaintextReply when the client spoke plaintext, and closed.
  void RefuseHandshake(Connection& c);
  // Reads (and drops) what the client sent, so that a close after a last
  // reply is a FIN, not a reset.
  static void ReadWhatWasSent(int fd);
  // A log line about a refused or stalled TLS client, at most
  // kTlsLogsPerSecond a second (a scanner must not flood the log).
  void LogTls(const std::string& line);
  // peer_closed: epoll said the client's FIN is in (EPOLLRDHUP): read to it.
  void ReadFrom(Connection& c, bool peer_closed);
  // After input arrived (a read, or Deliver): serve it, write the replies.
  void Received(Connection& c, bool eof);
  void Process(Connection& c);
  void Sweep();
  void StopListening();
  void UpdateEvents(Connection& c);

  EventLoop* loop_;
  TcpHandler* handler_;
  TcpServerOptions options_;
  int listen_fd_;
  int port_;
  bool draining_ = false;
  uint64_t next_id_ = 1;
  uint64_t sweep_timer_ = 0;
  uint64_t accept_timer_ = 0;  // re-enables accepting after running out of fds
  bool accept_paused_logged_ = false;
  bool busy_logged_ = false;  // "max_connections reached" said once per episode

  // Out of descriptors, a connection is still answered: the spare is closed
  // to accept it, BusyReply is written, it is closed and the spare reopened
  // (libev's and nginx's trick). Without it, the listener stays readable and
  // clients wait in the backlog, unanswered, until a descriptor frees up.
  class SpareFd {
   public:
    SpareFd();  // opens /dev/null; holds nothing if that fails
    ~SpareFd();
    SpareFd(const SpareFd&) = delete;
    SpareFd& operator=(const SpareFd&) = delete;
    // Closes the spare; false if none was held.
    bool Release();
    // Opens it again if it is not held (may fail while out of descriptors).
    void Reopen();

   private:
    int fd_;
  };
  enum class SpareAccept {
    kRefused,      // one connection was accepted with the spare's slot and refused
    kNoneWaiting,  // nothing (more) to accept: wait for the next readiness
    kNoSpare,      // no descriptor could be freed: pause accepting
  };
  SpareAccept RefuseWithSpare();
  // Answers a connection that will not be served BusyReply and closes it.
  void Refuse(int fd);
  SpareFd spare_;
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  OutputGate* gate_ = nullptr;
  static constexpr int kTlsLogsPerSecond = 10;
  int64_t tls_log_second_ = 0;
  int tls_logged_ = 0;          // lines written in tls_log_second_
  int tls_suppressed_ = 0;      // lines left out since the last one written
  std::vector<uint64_t> held_;  // connections whose replies wait for the gate
};

}  // namespace delayq::net

#endif  // DELAYQ_NET_TCP_SERVER_H_
