// ServerSet: the delayq servers a RemoteQueue speaks to, a pool of blocking
// RESP connections to each, and the failover rule every request follows.
//
// A request goes to the server that answered last (the first one at start)
// and moves on through the list, in order, when that one cannot take it:
//  - a connect that fails (refused, timed out, AUTH refused) marks the
//    server down: later requests skip it until its backoff (50 ms doubling
//    to 2 s, reset by a success; redis::Backoff) lets one attempt through.
//    Nothing was sent, so every request moves on.
//  - a connection that breaks after the request was written (reset, closed,
//    no reply within request_timeout_ms, a malformed reply) marks the server
//    down too; the request may or may not have run there. It moves on only
//    when the caller said it may (Retry::kAlways); otherwise the call fails
//    with kUnavailable saying so (Retry::kUntilSent).
//  - an -UNAVAILABLE reply (that server's store is unreachable, or it is
//    shutting down) moves a Retry::kAlways request on as well. A waiting
//    reserve cut short by a server's shutdown ("shutting down: ...") marks
//    it down and moves on (GoingAway; client/waiting_reserves.h).
// When no server takes it: kUnavailable "no delayq server answered:
// 127.0.0.1:7701 (Connection refused), 127.0.0.1:7702 (...)", or
// kUnauthorized when a server refused the AUTH token.
//
// Thread-safety: every method may be called from any number of threads at
// once. A connection is used by one thread at a time: it is taken out of its
// server's pool for one request and put back after it (up to
// kMaxIdlePerServer stay open).
#ifndef DELAYQ_CLIENT_SERVER_SET_H_
#define DELAYQ_CLIENT_SERVER_SET_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/options.h"
#include "delayq/status.h"
#include "redis/connection.h"
#include "redis/reply.h"
#include "redis/url.h"

namespace delayq::client {

// Whether a request may go to the next server after it was written to one
// whose reply was lost.
enum class Retry {
  kAlways,     // safe to repeat (see remote_queue.h for why, per operation)
  kUntilSent,  // not: moves on only while nothing was sent
};

// How the messages of a request that no server took begin (Run, Send); the
// rest lists each server tried, "host:port (why)", in the order tried. The
// command line words them for people (src/cli/failure.cc).
inline constexpr std::string_view kNoServerAnswered = "no delayq server answered: ";
inline constexpr std::string_view kNoServerAccepted = "no delayq server accepted: ";

// The default RESP port of `delayq serve`.
inline constexpr int kDefaultPort = 7701;

// "host:port[,host:port...]" into endpoints; a missing port is 7701.
// InvalidArgument naming "servers" and the bad part.
Result<std::vector<redis::Endpoint>> ParseServers(std::string_view servers);

class ServerSet {
 public:
  // Connects to nothing yet. Errors: kInvalidArgument for a bad
  // options.servers or timeout.
  static Result<std::unique_ptr<ServerSet>> Create(const QueueOptions& options);
  ~ServerSet();
  ServerSet(const ServerSet&) = delete;
  ServerSet& operator=(const ServerSet&) = delete;

  // Called with the replies of a request (error replies included) and
  // whether an earlier attempt at it, on another server, may have run (its
  // reply was lost). Returns the call's outcome; kUnavailable from it means
  // the replies were malformed: the connection is closed and the outcome
  // returned as is.
  using Take = std::function<Status(std::vector<redis::Reply>& replies, bool repeated)>;

  // Sends `cmds` as one pipeline to one server, by the rule above, and
  // hands their replies to `take`.
  Status Run(std::span<const redis::Argv> cmds, Retry retry, const Take& take);

  // A connection, taken out of the pool, with `cmd` written to it and its
  // reply owed: for a reserve that waits, whose reply an I/O thread reads.
  struct Sent {
    size_t server = 0;
    std::unique_ptr<redis::Connection> conn;
  };
  // Moves on while nothing was sent; a write that fails is kUnavailable
  // (the command may have reached the server).
  Result<Sent> Send(const redis::Argv& cmd);
  // Gives a connection back after its owed reply was read; a broken one,
  // or one with replies still owed, is closed instead.
  void Release(size_t server, std::unique_ptr<redis::Connection> conn);
  // The connection broke: closed, and its server marked down.
  void Broken(size_t server, std::unique_ptr<redis::Connection> conn, const std::string& reason);
  // The server answered that it is shutting down (IsShuttingDown, include/delayq/status.h): `conn`
  // and its idle connections (which it is closing) are closed, and it is
  // marked down, so the next request goes to the next server at once.
  void GoingAway(size_t server, std::unique_ptr<redis::Connection> conn);
  size_t size() const { return servers_.size(); }

  // "127.0.0.1:7701", for messages.
  std::string Name(size_t server) const;
  int request_timeout_ms() const { return request_timeout_ms_; }

  // Connections kept open per server between requests. Each thread with a
  // request in flight holds one, so a Worker with N threads uses up to N at
  // once; with a cap below that, most of its finishes closed a connection
  // and the next one opened another (at 16 and 50 threads: a connect per
  // ~4.5 jobs; bench/worker.sh). An idle connection costs the server a
  // descriptor.
  static constexpr size_t kMaxIdlePerServer = 64;

 private:
  struct Server {
    redis::Endpoint endpoint;
    std::string name;                         // endpoint.ToString()
    std::shared_ptr<redis::Backoff> backoff;  // shared by its connections: down or not
    std::mutex mu;
    std::vector<std::unique_ptr<redis::Connection>> idle;  // GUARDED_BY(mu)
  };

  ServerSet(std::vector<redis::Endpoint> endpoints, redis::ConnectionOptions options,
            int request_timeout_ms);
  std::unique_ptr<redis::Connection> Acquire(size_t server);

  const redis::ConnectionOptions options_;
  const int request_timeout_ms_;
  std::vector<std::unique_ptr<Server>> servers_;  // fixed after construction
  std::atomic<size_t> preferred_{0};              // the server that answered last
};

}  // namespace delayq::client

#endif  // DELAYQ_CLIENT_SERVER_SET_H_
