// The thread's life is a loop of sessions. A session owns one fresh
// Connection (its own Backoff is not used: the loop paces reconnects), sends
// SUBSCRIBE for every channel, waits for every confirmation, calls
// on_connect, then polls the socket and the wake-up eventfd together. Quiet
// for health_check_interval_ms → a PING; no PONG within another interval →
// the session fails. Any failure ends the session; the loop waits out the
// backoff on the eventfd (so the destructor interrupts it) and starts another.
#include "redis/subscriber.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace delayq::redis {
namespace {

bool IsKind(const Reply& r, std::string_view kind) {
  return r.is_array() && !r.elements().empty() && r.elements()[0].is_string() &&
         r.elements()[0].str() == kind;
}

}  // namespace

Result<std::unique_ptr<Subscriber>> Subscriber::Start(std::string_view url,
                                                      std::vector<std::string> channels,
                                                      MessageFn on_message, ConnectFn on_connect,
                                                      SubscriberOptions options) {
  Result<RedisUrl> parsed = ParseRedisUrl(url);
  if (!parsed.ok()) return parsed.status();
  return Start(*parsed, std::move(channels), std::move(on_message), std::move(on_connect),
               std::move(options));
}

Result<std::unique_ptr<Subscriber>> Subscriber::Start(const RedisUrl& url,
                                                      std::vector<std::string> channels,
                                                      MessageFn on_message, ConnectFn on_connect,
                                                      SubscriberOptions options) {
  if (url.seeds.empty()) return InvalidArgument("redis subscriber: the url has no host");
  if (channels.empty()) return InvalidArgument("redis subscriber: no channels to subscribe to");
  if (Status st = SetUpTls(url.tls, options.tls, &options.connection); !st.ok()) return st;
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return Internal("redis subscriber: eventfd failed");
  options.connection.user = url.user;
  options.connection.password = url.password;
  options.connection.db = 0;
  std::unique_ptr<Subscriber> s(new Subscriber(url, std::move(channels), std::move(on_message),
                                               std::move(on_connect), std::move(options), wake));
  s->thread_ = std::thread([raw = s.get()] { raw->Run(); });
  return s;
}

Subscriber::Subscriber(RedisUrl url, std::vector<std::string> channels, MessageFn on_message,
                       ConnectFn on_connect, SubscriberOptions options, int wake_fd)
    : url_(std::move(url)),
      channels_(std::move(channels)),
      on_message_(std::move(on_message)),
      on_connect_(std::move(on_connect)),
      options_(std::move(options)),
      wake_fd_(wake_fd) {}

Subscriber::~Subscriber() {
  stop_ = true;
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  close(wake_fd_);
}

bool Subscriber::WaitForStop(int64_t ms) const {
  pollfd p{wake_fd_, POLLIN, 0};
  poll(&p, 1, static_cast<int>(std::max<int64_t>(ms, 0)));
  return stop_.load();
}

void Subscriber::Run() {
  const ConnectionOptions& co = options_.connection;
  Backoff backoff(co.backoff_initial_ms, co.backoff_max_ms);
  size_t next = 0;
  bool quiet = false;      // log the first failure after a success, not every retry
  bool preferred = false;  // this attempt went where options_.prefer said
  while (!stop_) {
    std::optional<Endpoint> at;
    if (options_.prefer && !preferred) at = options_.prefer();
    preferred = at.has_value();
    std::unique_ptr<Connection> conn = Connection::Create(at ? *at : url_.seeds[next], co);
    bool subscribed = false;
    Status s = Session(*conn, &subscribed);
    connected_ = false;
    conn.reset();
    if (stop_) break;
    if (subscribed) {
      backoff.Succeeded();
      quiet = false;
      preferred = false;  // after a session, ask again first
    } else {
      backoff.Failed(s.message());
      if (!at) {
        next = (next + 1) % url_.seeds.size();
        preferred = false;
      }
    }
    if (!quiet) {
      Log(LogLevel::kWarn, "redis subscriber: %s; reconnecting", s.message().c_str());
      quiet = true;
    }
    if (int64_t wait = backoff.TryStart(); wait > 0 && WaitForStop(wait)) break;
  }
}

Status Subscriber::Session(Connection& conn, bool* subscribed) {
  Argv subscribe{"SUBSCRIBE"};
  subscribe.insert(subscribe.end(), channels_.begin(), channels_.end());
  if (Status s = conn.Append(subscribe); !s.ok()) return s;
  conn.set_push_mode();
  if (Status s = conn.Flush(); !s.ok()) return s;

  const int interval = std::max(1, options_.health_check_interval_ms);
  const int64_t confirm_by = SteadyMs() + options_.connection.command_timeout_ms;
  size_t confirmed = 0;
  std::vector<Reply> replies;
  std::vector<Reply> early;  // messages that beat the last confirmation
  int64_t last_traffic = SteadyMs();
  int64_t ping_sent = -1;  // -1: no PING outstanding
  for (;;) {
    int64_t now = SteadyMs();
    int64_t timeout;
    if (!*subscribed) {
      timeout = confirm_by - now;
    } else if (ping_sent >= 0) {
      timeout = ping_sent + interval - now;
    } else {
      timeout = last_traffic + interval - now;
    }
    pollfd fds[2] = {{conn.fd(), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    int ready = poll(fds, 2, static_cast<int>(std::max<int64_t>(timeout, 0)));
    if (stop_) return Status::Ok();
    if (ready < 0) continue;  // EINTR
    if (ready == 0) {
      if (!*subscribed) {
        return Unavailable(conn.name() + ": SUBSCRIBE not confirmed within " +
                           std::to_string(options_.connection.command_timeout_ms) + " ms");
      }
      if (ping_sent >= 0) {
        return Unavailable(conn.name() + ": no answer to PING within " + std::to_string(interval) +
                           " ms");
      }
      if (Status s = conn.Append({"PING"}); !s.ok()) return s;
      if (Status s = conn.Flush(); !s.ok()) return s;
      ping_sent = SteadyMs();
      continue;
    }
    if (fds[0].revents == 0) continue;
    replies.clear();
    if (Status s = conn.ReadSome(&replies); !s.ok()) return s;
    last_traffic = SteadyMs();
    if (!*subscribed) {
      for (Reply& r : replies) {
        if (IsKind(r, "subscribe")) {
          ++confirmed;
        } else if (r.is_error()) {
          return Unavailable(conn.name() + ": SUBSCRIBE refused: " + r.str());
        } else {
          early.push_back(std::move(r));
        }
      }
      if (confirmed < channels_.size()) continue;
      *subscribed = true;
      connected_ = true;
      if (on_connect_) on_connect_();
      replies.swap(early);
    }
    bool pong = false;
    Dispatch(replies, &pong);
    if (pong) ping_sent = -1;
  }
}

void Subscriber::Dispatch(std::vector<Reply>& replies, bool* pong) {
  for (const Reply& r : replies) {
    if (IsKind(r, "message") && r.elements().size() == 3 && r.elements()[1].is_string() &&
        r.elements()[2].is_string()) {
      if (on_message_) on_message_(r.elements()[1].str(), r.elements()[2].str());
    } else if (IsKind(r, "pong")) {
      *pong = true;
    }
  }
}

}  // namespace delayq::redis
