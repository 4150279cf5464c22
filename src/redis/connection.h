// Connection: one blocking connection to one Redis node, over hiredis.
//
// It connects lazily, on first use, within ConnectionOptions::connect_timeout_ms;
// marks the socket close-on-exec (programs this process runs do not inherit
// it); sets TCP_NODELAY; sends AUTH (password, or user and password) and SELECT db
// in one round trip; then every read and write is bounded by
// command_timeout_ms (SO_RCVTIMEO/SO_SNDTIMEO).
//
// Failures are values. Trouble on the wire (refused, reset, closed, timed
// out, a malformed reply, AUTH or SELECT refused) returns kUnavailable with a
// message naming the node and the reason ("redis 127.0.0.1:6379: Connection
// refused") and marks the connection broken; an error *reply* to a command
// ("-WRONGTYPE ...") is a successful Reply of type kError. A broken
// connection reconnects on its next use, so a restarted Redis is picked up
// without help; failed connects are spaced by a Backoff (50 ms, doubling to
// 2 s, reset by a success) and a call made while it waits fails at once with
// kUnavailable, so a dead Redis is neither hammered nor waited on.
//
// A connection that sat idle is checked before it is used (a zero-timeout
// poll: readable means the server closed it, say because it restarted): it is
// then replaced before the command is written, so a restart costs the next
// caller nothing. When a call fails after its command was written, the
// command may or may not have run; Append fails only while connecting, before
// anything was written. A write to a connection the server reset is an
// error, never a SIGPIPE that kills the process (SIGPIPE is blocked in the
// calling thread around writes unless the process already ignores it).
//
// TLS (ConnectionOptions::tls, a rediss:// URL): after the TCP connect the
// connection verifies the server's certificate and name in a TLS handshake,
// bounded by connect_timeout_ms + command_timeout_ms (a server that accepts
// TCP and never answers cannot hold a thread longer), then speaks RESP
// through its TlsSession: hiredis still parses the replies (its reader, fed
// the decrypted bytes) but no longer touches the socket, which is
// non-blocking; each wait for it is a poll(2) bounded by command_timeout_ms.
// A reply the server sent right before it closed (close_notify, a bare FIN
// or an alert) is handed out before the close is reported, as on plaintext.
// A refused handshake is kUnavailable in words ("redis 127.0.0.1:6390: TLS
// handshake failed: certificate verify failed: unable to get local issuer
// certificate"). Plaintext connections keep hiredis's own blocking I/O.
//
// Thread-safety: none; one thread at a time per Connection (Client keeps a
// pool and hands each connection to one thread at a time). A Backoff may be
// shared by any number of connections and threads.
#ifndef DELAYQ_REDIS_CONNECTION_H_
#define DELAYQ_REDIS_CONNECTION_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "net/tls.h"
#include "redis/reply.h"
#include "redis/url.h"

struct redisContext;  // hiredis, kept out of this header

namespace delayq::redis {

// One command: its name and arguments, binary-safe (any bytes, NULs too).
using Argv = std::vector<std::string>;

struct ConnectionOptions {
  // Bound on TCP connect (and address resolution's connect attempts). Default: 1000.
  int connect_timeout_ms = 1000;
  // Bound on each blocking read or write of a command or its reply: a Redis
  // that stops answering is reported kUnavailable after this. Default: 3000.
  int command_timeout_ms = 3000;
  // Wait after the first failed connect; doubles on each further failure up
  // to backoff_max_ms; a successful connect resets it. Defaults: 50, 2000.
  int backoff_initial_ms = 50;
  int backoff_max_ms = 2000;
  // AUTH on connect: `AUTH password`, or `AUTH user password` when user is
  // non-empty. No AUTH when password is nullopt. Default: none.
  std::string user;
  std::optional<std::string> password;
  // SELECT on connect when non-zero. Default: 0.
  int db = 0;
  // Check an idle connection before writing to it, and replace it when the
  // server closed it (a restart). false: write anyway, so that a close shows
  // as the command's failure (the command line: one connection, one command).
  // Default: true.
  bool check_idle_before_write = true;
  // TLS: the client context every connection's session is made from (one
  // per Client or Subscriber, shared: SetUpTls makes it); nullptr: plaintext.
  // Default: plaintext.
  std::shared_ptr<const net::TlsContext> tls;
  // The name sent as SNI and checked against the server's certificate (a
  // host name, or an IP address checked against its IP SANs). Empty: the
  // endpoint's host, as the URL or the cluster's slot map gives it.
  // Default: empty.
  std::string tls_server_name;
};

// Fills options->tls for a URL: for rediss:// (url_tls) a client context
// made from `tls` unless options->tls is set already; for redis:// nothing,
// and InvalidArgument if options->tls is set (a context but a plaintext
// URL). InvalidArgument naming the file when the context cannot be made
// ("tls: cannot read CA file ...").
Status SetUpTls(bool url_tls, const net::TlsOptions& tls, ConnectionOptions* options);

// Milliseconds of the steady clock (Backoff's and Subscriber's deadlines).
int64_t SteadyMs();

// When the next connect to a node may be tried. Shared by every connection
// to one node, so N pooled connections to a dead node make one attempt per
// period between them, not N.
//
// Thread-safety: every method may be called from any thread.
class Backoff {
 public:
  Backoff(int initial_ms, int max_ms);

  // 0 when a connect may be tried now, else how many ms are left to wait.
  // While the node is failing, a 0 claims the attempt: callers asking during
  // it are told to wait (as long as the current delay).
  int64_t TryStart();
  // A connect failed with `error` (kept for fast-fail messages).
  void Failed(std::string error);
  // A connect succeeded: no wait, delay back to initial.
  void Succeeded();
  // The error of the last failure; empty when none.
  std::string last_error() const;

 private:
  const int initial_ms_;
  const int max_ms_;
  mutable std::mutex mu_;
  bool failing_ = false;     // GUARDED_BY(mu_): the last connect failed
  int64_t retry_at_ms_ = 0;  // GUARDED_BY(mu_): steady-clock ms
  int delay_ms_;             // GUARDED_BY(mu_): the wait after the next failure
  std::string last_error_;   // GUARDED_BY(mu_)
};

class Connection {
 public:
  // A connection to `endpoint` that connects on first use. `backoff` spaces
  // its connects; nullptr: one of its own, from `options`.
  static std::unique_ptr<Connection> Create(Endpoint endpoint, ConnectionOptions options,
                                            std::shared_ptr<Backoff> backoff = nullptr);
  // As Create, then connects now: kUnavailable (naming the node) if it cannot.
  static Result<std::unique_ptr<Connection>> Open(Endpoint endpoint, ConnectionOptions options,
                                                  std::shared_ptr<Backoff> backoff = nullptr);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Connects now unless connected, as every call does first: kUnavailable
  // naming the node when it cannot (or while its backoff waits).
  Status EnsureConnected();
  // The bound on each read and write from now on, in place of
  // ConnectionOptions::command_timeout_ms.
  Status set_command_timeout_ms(int ms);

  // Sends one command, waits for its reply.
  Result<Reply> Exec(const Argv& argv);
  Result<Reply> Exec(std::initializer_list<std::string_view> argv);

  // Sends all of `cmds` at once and reads their replies in order: one round
  // trip. kUnavailable if any reply is lost (some commands may have run).
  Result<std::vector<Reply>> ExecMany(std::span<const Argv> cmds);

  // --- The halves of a pipeline, for callers that write to several nodes
  // before reading from any (Client::ExecBatch).

  // Buffers one command, connecting first if needed. Fails only when the
  // connect fails (or is waiting out its backoff): nothing has been sent then;
  // or with InvalidArgument, changing nothing, when `argv` is empty.
  Status Append(const Argv& argv);
  Status Append(std::initializer_list<std::string_view> argv);
  Status Append(std::span<const std::string_view> argv);
  // Writes everything buffered.
  Status Flush();
  // Reads the next `n` replies (flushing first), appending each to *out as it
  // arrives: on failure, *out holds those that came before it.
  // REQUIRES: n <= pending().
  Status Receive(size_t n, std::vector<Reply>* out);
  // Commands appended whose replies have not been read.
  size_t pending() const { return pending_; }

  // --- For pub/sub, where the server sends on its own (Subscriber).

  // From now on, data arriving on an idle connection is expected: Append no
  // longer takes it for a close.
  void set_push_mode() { push_mode_ = true; }
  // Moves every complete reply already read from the socket into *out,
  // without reading.
  Status TakeBuffered(std::vector<Reply>* out);
  // One read(2) of what the socket holds, then as TakeBuffered. Blocks up to
  // command_timeout_ms when nothing is there: poll fd() first. Over TLS it
  // never blocks: it reads all the session has (maybe nothing, when what
  // arrived was TLS's own, such as a session ticket). A closed connection is
  // kUnavailable.
  Status ReadSome(std::vector<Reply>* out);
  // The socket, for poll(2); -1 when not connected.
  int fd() const;

  // How the last failure on the wire came about, for callers that word their
  // own messages (the command line): a connect that failed, no reply within
  // the command timeout, the server closed the connection, or any other
  // trouble; kNone before any failure.
  enum class Failure { kNone, kConnect, kTimeout, kClosed, kLost };
  Failure last_failure() const { return failure_; }
  // Its reason, without the node's name: hiredis's ("Connection refused",
  // "Broken pipe"), or "no reply within N ms (command timeout)".
  const std::string& last_reason() const { return reason_; }

  bool connected() const { return context_ != nullptr; }
  const Endpoint& endpoint() const { return endpoint_; }
  // "redis 127.0.0.1:6379", the prefix of every message.
  const std::string& name() const { return name_; }

 private:
  Connection(Endpoint endpoint, ConnectionOptions options, std::shared_ptr<Backoff> backoff);

  template <typename Range>
  Status AppendArgs(const Range& argv);
  Status Connect();
  // The TLS handshake on a connected socket, bounded as the class comment says.
  Status StartTls();
  Status Handshake();
  bool ClosedWhileIdle() const;
  // Marks the connection broken after hiredis failed: frees the context and
  // returns kUnavailable naming the node and hiredis's reason.
  Status Broken(int saved_errno);
  // As Broken, for the TLS path: `failure` and `why` say what happened.
  Status TlsBroken(Failure failure, std::string why);
  // "Server closed the connection", with a hint when no reply came before.
  std::string TlsClosedReason() const;
  // TLS path: writes tls_out_; feeds the reader what the session has,
  // waiting (up to the command timeout) for something when `wait` (Receive),
  // or not at all (ReadSome). A session that ends (the server's close, or
  // an alert) after bytes it fed in this call is not reported yet: the
  // replies in those bytes are read first (TlsEnded then says so).
  Status TlsFlush();
  Status TlsRead(bool wait);
  // The end TlsRead kept back, as TlsBroken reports it.
  Status TlsEnded();
  // Waits up to `ms` for `events` on the socket: true when ready.
  bool WaitFor(short events, int ms) const;
  void Drop();

  const Endpoint endpoint_;
  const ConnectionOptions options_;
  const std::shared_ptr<Backoff> backoff_;
  const std::string name_;
  int command_timeout_ms_;
  Failure failure_ = Failure::kNone;
  std::string reason_;
  redisContext* context_ = nullptr;  // owned; nullptr while not connected
  // TLS only: the session on context_'s socket, and the commands formatted
  // but not yet written (hiredis's output buffer is unused then).
  std::unique_ptr<net::TlsSession> tls_;
  std::string tls_out_;
  // TLS only: how the session ended when the end came right behind bytes
  // still in the reader (a server that answers and then closes, as one
  // does after a client's FIN: the answer must not be lost with the
  // close); kNone while it has not. tls_end_error_: the session's error for
  // kLost.
  Failure tls_end_ = Failure::kNone;
  std::string tls_end_error_;
  // A reply came on this connection: a close before any hints at a TLS
  // server on a plaintext URL.
  bool answered_ = false;
  size_t pending_ = 0;
  bool push_mode_ = false;
  // AppendArgs formats each command here; kept while it stays small.
  static constexpr size_t kKeptFormatBytes = 1 << 20;
  std::string format_;
};

}  // namespace delayq::redis

#endif  // DELAYQ_REDIS_CONNECTION_H_
