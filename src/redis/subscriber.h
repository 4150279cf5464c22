// Subscriber: listens to a fixed set of Redis pub/sub channels on a thread
// and a connection of its own, and calls back once per message.
//
// It connects to the first endpoint of the URL that answers, SUBSCRIBEs to
// every channel, then calls on_connect, then on_message for each message. In
// a Redis Cluster a plain PUBLISH reaches every node, so one node is enough;
// put every known master in the URL's seeds (Client::Masters()) so another
// can take over when that node dies.
//
// When the connection fails (Redis restarted, network gone, no PONG to its
// health-check PING), it reconnects — the next endpoint after a failure,
// waiting 50 ms, doubling to 2 s, between failed attempts — subscribes again
// and calls on_connect again. Messages published while it was away are lost
// (pub/sub keeps nothing), so on_connect is where a user re-reads whatever
// state the messages announce.
//
// Callbacks run on the subscriber's thread, one at a time, and should return
// quickly: messages wait behind them. They must not destroy the Subscriber.
//
// Thread-safety: connected() may be called from any thread; the destructor
// from any thread but the callbacks'. The destructor wakes the thread through
// an eventfd and joins it: prompt, unless a connect is under way (then within
// ConnectionOptions::connect_timeout_ms).
#ifndef DELAYQ_REDIS_SUBSCRIBER_H_
#define DELAYQ_REDIS_SUBSCRIBER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "delayq/status.h"
#include "redis/connection.h"
#include "redis/url.h"

namespace delayq::redis {

struct SubscriberOptions {
  // Timeouts and backoff; its user and password are replaced by the URL's
  // (the db does not matter to pub/sub). For a rediss:// URL, its tls is the
  // context to use (a Client's: Client::tls_context()), or null to make one
  // from `tls` below.
  ConnectionOptions connection;
  // rediss:// with connection.tls null: the CA bundle and client
  // certificate of the context Start makes. Default: the system's trust store.
  net::TlsOptions tls;
  // With no traffic for this long, a PING checks the connection; no answer
  // within another interval counts as a failure. Default: 1000.
  int health_check_interval_ms = 1000;
  // Where to connect first, asked before each connect (say, the master a
  // Client found through Sentinel, which moves on a failover); nullopt, or a
  // connect there that failed, falls back to the URL's next endpoint, and the
  // two alternate while failures go on. Default: none (the URL's alone).
  std::function<std::optional<Endpoint>()> prefer;
};

class Subscriber {
 public:
  using MessageFn = std::function<void(std::string_view channel, std::string_view message)>;
  // Called after each successful SUBSCRIBE: the first, and every reconnect.
  using ConnectFn = std::function<void()>;

  // Starts the thread; it connects on its own (no wait here). InvalidArgument
  // for a bad URL or an empty channel list; kInternal if the thread's eventfd
  // cannot be made. Redis being down is not an error: the thread keeps trying.
  static Result<std::unique_ptr<Subscriber>> Start(std::string_view url,
                                                   std::vector<std::string> channels,
                                                   MessageFn on_message, ConnectFn on_connect,
                                                   SubscriberOptions options = {});
  static Result<std::unique_ptr<Subscriber>> Start(const RedisUrl& url,
                                                   std::vector<std::string> channels,
                                                   MessageFn on_message, ConnectFn on_connect,
                                                   SubscriberOptions options = {});
  // Stops the thread and closes the connection.
  ~Subscriber();
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // True while subscribed (between an on_connect and the next failure).
  bool connected() const { return connected_.load(); }

 private:
  Subscriber(RedisUrl url, std::vector<std::string> channels, MessageFn on_message,
             ConnectFn on_connect, SubscriberOptions options, int wake_fd);
  void Run();
  // One connection's life: connect, subscribe, deliver until it fails or
  // stop is asked. Sets *subscribed once the SUBSCRIBE is confirmed.
  Status Session(Connection& conn, bool* subscribed);
  // Waits up to `ms` on the wake fd; true when asked to stop.
  bool WaitForStop(int64_t ms) const;
  // Delivers messages and PONGs among `replies`; sets *pong on a PONG.
  void Dispatch(std::vector<Reply>& replies, bool* pong);

  const RedisUrl url_;
  const std::vector<std::string> channels_;
  const MessageFn on_message_;
  const ConnectFn on_connect_;
  const SubscriberOptions options_;
  const int wake_fd_;  // eventfd, owned: written by the destructor
  std::atomic<bool> stop_{false};
  std::atomic<bool> connected_{false};
  std::thread thread_;
};

}  // namespace delayq::redis

#endif  // DELAYQ_REDIS_SUBSCRIBER_H_
