// Endpoint: a listening socket, an acceptor thread, a thread per
// connection, and a renewal thread.
//
// Why blocking sockets and a thread per connection rather than an event
// loop: a handler blocks the thread it runs on whatever the I/O model, so
// `threads` requests in flight need `threads` threads anyway; the servers
// keep no more connections busy than the subscription's concurrency (which
// is `threads`), and their keep-alive pool reuses them; so a thread per
// connection costs what a loop plus a handler pool would, with far less
// code. Connections beyond kMaxConnections are answered 503 at once.
//
// A request takes a slot (running_ < threads) for its handler's run; one
// that finds none is answered 503 + Retry-After: 1 without waiting, as the
// server should never send more at once. The acceptor joins the threads of
// connections that ended; the destructor joins the rest.
//
// The renewal thread waits on the clock (a ManualClock's moves wake it, as
// the Worker's timer does) and makes the registration calls with no lock
// held.
#include "delayq/endpoint.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "codec/webhook_signature.h"
#include "common/log.h"
#include "delayq/version.h"
#include "endpoint/http_exchange.h"
#include "endpoint/json_io.h"

namespace delayq {

using endpoint::Headers;
using endpoint::HostPort;
using endpoint::HttpRequest;

namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
// An idle keep-alive connection is closed after this.
constexpr int kIdleConnectionMs = 60'000;
// Each registration call: connect, and each read and write.
constexpr int kCallTimeoutMs = 5'000;
// A webhook-timestamp further than this from the wall clock is refused
// (Standard Webhooks' recommended tolerance), so a captured request cannot
// be replayed later.
constexpr int64_t kSignatureToleranceS = 5 * 60;
// The first retry of a failed registration; doubles up to ttl_ms / 3.
constexpr int64_t kFirstRetryMs = 100;
constexpr std::string_view kDefaultServers = "127.0.0.1:7700";

struct Answer {
  int status = 200;
  Headers headers;
  std::string body;
  // A handler ran: its slot is held until the answer is written, so that
  // Stop's drain, which waits for the slots, never cuts an answer off.
  bool holds_slot = false;
};

Outcome Run(const Handler& handler, const Delivery& job) {
  try {
    return handler(job);
  } catch (const std::exception& e) {
    return Outcome::Retry(e.what());
  } catch (...) {
    return Outcome::Retry("the handler threw something other than a std::exception");
  }
}

Answer AnswerOf(const Outcome& outcome) {
  switch (outcome.kind()) {
    case Outcome::Kind::kSuccess:
      return {200, {}, {}};
    case Outcome::Kind::kBury:
      return {500, {{"Delayq-Outcome", "bury"}}, outcome.text()};
    case Outcome::Kind::kRetry:
      break;
  }
  if (outcome.delay_ms() < 0) return {500, {}, outcome.text()};
  const int64_t seconds = outcome.delay_ms() / 1000 + (outcome.delay_ms() % 1000 != 0);
  return {503, {{"Retry-After", std::to_string(seconds)}}, outcome.text()};
}

Result<std::vector<HostPort>> ParseServers(std::string_view text) {
  std::vector<HostPort> servers;
  while (!text.empty()) {
    size_t comma = text.find(',');
    std::string_view one = text.substr(0, comma);
    while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
    while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
    Result<HostPort> hp = endpoint::ParseHostPort(one, "servers", false);
    if (!hp.ok()) return hp.status();
    servers.push_back(std::move(*hp));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (servers.empty()) return InvalidArgument("servers: empty; give host:port[,host:port...]");
  return servers;
}

// A listening socket on `at`, and the port it got.
Result<int> Listen(const HostPort& at, uint16_t* port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* list = nullptr;
  const std::string service = std::to_string(at.port);
  if (int rc = ::getaddrinfo(at.host.c_str(), service.c_str(), &hints, &list); rc != 0) {
    return InvalidArgument("listen: " + at.ToString() + ": " + ::gai_strerror(rc));
  }
  int fd = ::socket(list->ai_family, list->ai_socktype | SOCK_CLOEXEC, list->ai_protocol);
  int one = 1;
  bool ok = fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0 &&
            ::bind(fd, list->ai_addr, list->ai_addrlen) == 0 && ::listen(fd, 1024) == 0;
  ::freeaddrinfo(list);
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (ok) ok = ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (!ok) {
    Status st = Unavailable("listen: " + at.ToString() + ": " + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return st;
  }
  *port = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  return fd;
}

// ValidateSubscription's field names, as EndpointOptions calls them.
Status AsOptionError(Status st) {
  if (st.ok()) return st;
  const std::string& m = st.message();
  if (m.rfind("url:", 0) == 0) return InvalidArgument("advertise_url:" + m.substr(4));
  if (m.rfind("concurrency:", 0) == 0) {
    return InvalidArgument("threads: must be 1-10000 (the subscription's concurrency)");
  }
  return st;
}

}  // namespace

class Endpoint::Impl {
 public:
  Impl(EndpointOptions options, std::vector<HostPort> servers, std::vector<std::string> keys,
       int listen_fd, std::string url)
      : options_(std::move(options)),
        clock_(options_.clock),
        servers_(std::move(servers)),
        keys_(std::move(keys)),
        listen_fd_(listen_fd),
        url_(std::move(url)),
        max_connections_(2 * options_.threads + 64) {}
  ~Impl();

  Status Handle(std::string topic, Handler handler);
  Status Start();
  void Stop(int64_t drain_ms);
  EndpointStats Stats() const {
    std::lock_guard<std::mutex> l(mu_);
    EndpointStats s = stats_;
    s.running = running_;
    return s;
  }
  const std::string& url() const { return url_; }

 private:
  struct Conn {
    int fd = -1;  // -1 once its thread closed it
    std::thread thread;
  };

  void AcceptLoop();
  void Serve(uint64_t id, int fd);
  Answer Dispatch(const HttpRequest& req);
  Answer Refuse(int status, std::string body, Headers headers = {});
  Status CheckSignature(const HttpRequest& req) const;
  void RenewLoop();
  // One PUT (Call), counted in the stats; the caller logs a failure.
  Status Register();
  void LogFailure(const Status& st, int64_t retry_ms) const;
  void Deregister();
  Status Call(std::string_view method, const std::string& target, std::string_view body,
              bool not_found_ok);
  // Waits until pred() (under mu_) or the monotonic deadline.
  template <typename Pred>
  bool WaitFor(Pred pred, int64_t deadline);
  void Close();
  void JoinAll();

  // Fixed at Create.
  const EndpointOptions options_;
  const std::shared_ptr<Clock> clock_;
  const std::vector<HostPort> servers_;
  const std::vector<std::string> keys_;  // decoded options_.secrets
  const int listen_fd_;
  const std::string url_;
  const size_t max_connections_;
  // Fixed at Start: read by connection threads without a lock.
  std::map<std::string, Handler, std::less<>> handlers_;
  Subscription subscription_;

  // Owned by the owner's thread (Start, Stop, the destructor).
  std::thread acceptor_;
  std::thread renewer_;
  int clock_token_ = 0;

  // State below is protected by mu_. Lock order: the clock's lock (its
  // Subscribe callback) may take mu_, so no clock call is made under mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;  // a renewal due, a handler done, a clock move, a stop
  bool started_ = false;
  bool stop_called_ = false;
  bool quit_renew_ = false;        // the renewal thread must end
  bool stopping_ = false;          // requests are answered 410
  bool closed_ = false;            // the sockets are shut; no new connection
  int64_t next_renewal_ = kNever;  // on the monotonic clock
  int64_t retry_ms_ = 0;           // the last wait after a failed registration; 0 after a success
  uint32_t running_ = 0;           // handlers running
  uint64_t next_conn_ = 1;
  std::map<uint64_t, Conn> conns_;
  std::vector<std::thread> finished_;  // threads of connections that ended, to join
  std::atomic<uint64_t> clock_moves_{0};
  EndpointStats stats_;
};

Endpoint::Impl::~Impl() {
  JoinAll();
  if (clock_token_ != 0) clock_->Unsubscribe(clock_token_);
  ::close(listen_fd_);
}

Status Endpoint::Impl::Handle(std::string topic, Handler handler) {
  std::lock_guard<std::mutex> l(mu_);
  if (started_) return InvalidArgument("Handle: the endpoint has started; handle topics before");
  if (Status st = ValidateTopic(topic); !st.ok()) return st;
  if (!handler) return InvalidArgument("handler of '" + topic + "': empty");
  if (handlers_.count(topic) != 0) {
    return InvalidArgument("topic '" + topic + "' already has a handler");
  }
  if (handlers_.size() >= kMaxSubscriptionTopics) {
    return InvalidArgument("topics: at most 100 per endpoint (one subscription)");
  }
  handlers_.emplace(std::move(topic), std::move(handler));
  return Status::Ok();
}

Status Endpoint::Impl::Start() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (started_ || stop_called_) return InvalidArgument("an endpoint starts once");
    if (handlers_.empty()) return InvalidArgument("no handlers: call Handle before Start");
    subscription_.name = options_.name;
    subscription_.url = url_;
    for (const auto& [topic, handler] : handlers_) subscription_.topics.push_back(topic);
    subscription_.concurrency = options_.threads;
    subscription_.timeout_ms = options_.timeout_ms;
    subscription_.ttl_ms = options_.ttl_ms;
    subscription_.secrets = options_.secrets;
    subscription_.retry = options_.retry;
    if (Status st = AsOptionError(ValidateSubscription(subscription_)); !st.ok()) return st;
    started_ = true;
  }
  if (!clock_->IsRealTime()) {
    clock_token_ = clock_->Subscribe([this] {
      std::lock_guard<std::mutex> l(mu_);
      clock_moves_.fetch_add(1, std::memory_order_relaxed);
      cv_.notify_all();
    });
  }
  try {
    acceptor_ = std::thread([this] { AcceptLoop(); });
  } catch (const std::system_error& e) {
    std::lock_guard<std::mutex> l(mu_);
    stop_called_ = true;
    return Internal(std::string("cannot start the acceptor thread: ") + e.what());
  }
  const int64_t now = clock_->MonotonicMs();
  Status first = Register();
  const Code code = first.code();
  if (code == Code::kInvalidArgument || code == Code::kUnauthorized || code == Code::kTooLarge) {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_called_ = true;
    }
    Close();
    return first;
  }
  if (!first.ok()) LogFailure(first, kFirstRetryMs);
  {
    std::lock_guard<std::mutex> l(mu_);
    retry_ms_ = first.ok() ? 0 : kFirstRetryMs;
    next_renewal_ = first.ok() ? (options_.ttl_ms > 0 ? now + options_.ttl_ms / 3 : kNever)
                               : now + kFirstRetryMs;
  }
  try {
    renewer_ = std::thread([this] { RenewLoop(); });
  } catch (const std::system_error& e) {
    Stop(0);
    return Internal(std::string("cannot start the renewal thread: ") + e.what());
  }
  return Status::Ok();
}

template <typename Pred>
bool Endpoint::Impl::WaitFor(Pred pred, int64_t deadline) {
  for (;;) {
    const uint64_t seen = clock_moves_.load(std::memory_order_relaxed);
    const int64_t now = clock_->MonotonicMs();
    std::unique_lock<std::mutex> l(mu_);
    if (pred()) return true;
    if (now >= deadline) return false;
    if (clock_->IsRealTime()) {
      const int64_t wait = std::min<int64_t>(deadline - now, 1000);
      cv_.wait_for(l, std::chrono::milliseconds(wait));
    } else {
      cv_.wait(l, [&] { return pred() || clock_moves_.load(std::memory_order_relaxed) != seen; });
    }
  }
}

void Endpoint::Impl::RenewLoop() {
  for (;;) {
    // next_renewal_ is read under mu_ each round: WaitFor's deadline is a
    // snapshot, so wait for quit or the snapshot, then look again.
    int64_t due;
    {
      std::lock_guard<std::mutex> l(mu_);
      due = next_renewal_;
    }
    if (WaitFor([this] { return quit_renew_; }, due)) return;
    // The next one is counted from this one's start, so a slow server does
    // not stretch the interval towards the ttl.
    const int64_t now = clock_->MonotonicMs();
    Status st = Register();
    std::lock_guard<std::mutex> l(mu_);
    if (st.ok()) {
      retry_ms_ = 0;
      next_renewal_ = options_.ttl_ms > 0 ? now + options_.ttl_ms / 3 : kNever;
    } else {
      const int64_t cap = options_.ttl_ms > 0 ? std::max<int64_t>(options_.ttl_ms / 3, 1) : 5000;
      retry_ms_ = retry_ms_ == 0 ? std::min(kFirstRetryMs, cap) : std::min(retry_ms_ * 2, cap);
      next_renewal_ = now + retry_ms_;
      LogFailure(st, retry_ms_);
    }
  }
}

// One registration call to the first server that answers: a server that
// cannot be reached, or answers 5xx, passes it to the next; an answer 4xx
// ends it (every server would say the same).
Status Endpoint::Impl::Call(std::string_view method, const std::string& target,
                            std::string_view body, bool not_found_ok) {
  Headers headers;
  if (!body.empty()) headers.emplace_back("Content-Type", "application/json");
  if (!options_.token.empty()) headers.emplace_back("Authorization", "Bearer " + options_.token);
  headers.emplace_back("User-Agent", "delayq-endpoint/" DELAYQ_VERSION);
  Status last = Unavailable("no server");
  for (const HostPort& server : servers_) {
    Result<endpoint::HttpReply> reply =
        endpoint::HttpCall(server, method, target, headers, body, kCallTimeoutMs);
    if (!reply.ok()) {
      last = reply.status();
      continue;
    }
    if ((reply->status >= 200 && reply->status < 300) || (not_found_ok && reply->status == 404)) {
      return Status::Ok();
    }
    std::string what = std::string(method) + " " + target + " at " + server.ToString() + ": HTTP " +
                       std::to_string(reply->status) + ": " + endpoint::ErrorMessage(reply->body);
    if (reply->status >= 500) {
      last = Unavailable(std::move(what));
      continue;
    }
    if (reply->status == 401) return Status(Code::kUnauthorized, std::move(what));
    if (reply->status == 413) return TooLarge(std::move(what));
    return InvalidArgument(std::move(what));
  }
  return last;
}

Status Endpoint::Impl::Register() {
  Status st = Call("PUT", "/v1/subscriptions/" + endpoint::PercentEncode(options_.name),
                   endpoint::SubscriptionJson(subscription_), false);
  uint64_t failures_before = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (st.ok()) {
      ++stats_.registrations;
      failures_before = retry_ms_ != 0 ? 1 : 0;
    } else {
      ++stats_.registration_failures;
      stats_.last_registration_error = st.message();
    }
  }
  if (st.ok() && failures_before != 0) {
    Log(LogLevel::kInfo, "endpoint %s at %s: registered again", options_.name.c_str(),
        url_.c_str());
  }
  return st;
}

void Endpoint::Impl::LogFailure(const Status& st, int64_t retry_ms) const {
  Log(LogLevel::kWarn, "endpoint %s at %s: registration failed (trying again in %lld ms): %s",
      options_.name.c_str(), url_.c_str(), static_cast<long long>(retry_ms), st.message().c_str());
}

void Endpoint::Impl::Deregister() {
  Status st = Call("DELETE",
                   "/v1/subscriptions/" + endpoint::PercentEncode(options_.name) +
                       "?url=" + endpoint::PercentEncode(url_),
                   {}, true);
  if (!st.ok()) {
    Log(LogLevel::kWarn,
        "endpoint %s at %s: deregistration failed (the instance lapses after "
        "its ttl_ms): %s",
        options_.name.c_str(), url_.c_str(), st.message().c_str());
  }
}

void Endpoint::Impl::AcceptLoop() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    const int accept_errno = errno;
    std::vector<std::thread> done;
    std::unique_lock<std::mutex> l(mu_);
    done.swap(finished_);
    if (closed_) {
      if (fd >= 0) ::close(fd);
      l.unlock();
      for (std::thread& t : done) t.join();
      return;
    }
    if (fd < 0) {
      l.unlock();
      for (std::thread& t : done) t.join();
      // Out of descriptors or memory: the pending connection stays queued;
      // wait a little rather than spin on it.
      if (accept_errno == EMFILE || accept_errno == ENFILE || accept_errno == ENOBUFS ||
          accept_errno == ENOMEM) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (conns_.size() >= max_connections_) {
      ++stats_.requests;
      ++stats_.errors;
      ++stats_.busy;
      l.unlock();
      endpoint::WriteResponse(fd, 503, {{"Retry-After", "1"}}, "too many connections", false);
      ::close(fd);
    } else {
      const uint64_t id = next_conn_++;
      Conn& c = conns_[id];
      c.fd = fd;
      try {
        c.thread = std::thread([this, id, fd] { Serve(id, fd); });
      } catch (const std::system_error&) {
        conns_.erase(id);
        ::close(fd);
      }
      l.unlock();
    }
    for (std::thread& t : done) t.join();
  }
}

void Endpoint::Impl::Serve(uint64_t id, int fd) {
  endpoint::RequestReader reader(fd);
  for (;;) {
    HttpRequest req;
    int status = 0;
    std::string error;
    auto r = reader.Read(&req, kIdleConnectionMs, &status, &error);
    if (r == endpoint::RequestReader::Result::kClosed) break;
    if (r == endpoint::RequestReader::Result::kBad) {
      Answer a = Refuse(status, std::move(error));
      endpoint::WriteResponse(fd, a.status, a.headers, a.body, false);
      break;
    }
    Answer a = Dispatch(req);
    const bool written = endpoint::WriteResponse(fd, a.status, a.headers, a.body, req.keep_alive);
    if (a.holds_slot) {
      std::lock_guard<std::mutex> l(mu_);
      --running_;
      cv_.notify_all();
    }
    if (!written || !req.keep_alive) break;
  }
  std::lock_guard<std::mutex> l(mu_);
  auto it = conns_.find(id);
  // Closed under mu_, with its entry gone: Close() shuts down the fds of
  // conns_, never a number the kernel may have handed out again.
  ::close(fd);
  // JoinAll may have taken the thread already (it joins running ones).
  if (it->second.thread.joinable()) finished_.push_back(std::move(it->second.thread));
  conns_.erase(it);
}

Answer Endpoint::Impl::Refuse(int status, std::string body, Headers headers) {
  std::lock_guard<std::mutex> l(mu_);
  ++stats_.requests;
  ++stats_.errors;
  if (status == 401) ++stats_.unauthorized;
  if (status == 503) ++stats_.busy;
  return {status, std::move(headers), std::move(body)};
}

Status Endpoint::Impl::CheckSignature(const HttpRequest& req) const {
  std::string_view id = req.Header("webhook-id");
  std::string_view timestamp = req.Header("webhook-timestamp");
  std::string_view signature = req.Header("webhook-signature");
  if (id.empty() || timestamp.empty() || signature.empty()) {
    return Status(Code::kUnauthorized,
                  "missing webhook-id, webhook-timestamp or webhook-signature: this endpoint "
                  "takes only requests signed with its secrets");
  }
  int64_t ts = 0;
  auto [end, ec] = std::from_chars(timestamp.data(), timestamp.data() + timestamp.size(), ts);
  if (ec != std::errc() || end != timestamp.data() + timestamp.size()) {
    return Status(Code::kUnauthorized, "webhook-timestamp: not a number of seconds");
  }
  const int64_t now_s = clock_->NowMs() / 1000;
  if (ts < now_s - kSignatureToleranceS || ts > now_s + kSignatureToleranceS) {
    return Status(Code::kUnauthorized, "webhook-timestamp: more than 5 minutes from now");
  }
  if (!codec::WebhookSignatureMatches(keys_, id, ts, req.body, signature)) {
    return Status(Code::kUnauthorized,
                  "webhook-signature: no signature by this endpoint's secrets");
  }
  return Status::Ok();
}

Answer Endpoint::Impl::Dispatch(const HttpRequest& req) {
  if (req.method != "POST") {
    return Refuse(405, "only POST: delayq pushes jobs here", {{"Allow", "POST"}});
  }
  if (!keys_.empty()) {
    if (Status st = CheckSignature(req); !st.ok()) return Refuse(401, st.message());
  }
  Result<Delivery> job = endpoint::ParseJobJson(req.body);
  if (!job.ok()) return Refuse(400, job.status().message());
  auto it = handlers_.find(job->topic);
  if (it == handlers_.end()) return Refuse(500, "no handler for topic " + job->topic);
  {
    std::unique_lock<std::mutex> l(mu_);
    if (stopping_) {
      l.unlock();
      return Refuse(410, "this endpoint is stopping: give the job to another instance");
    }
    if (running_ >= options_.threads) {
      l.unlock();
      return Refuse(503, "all " + std::to_string(options_.threads) + " handler threads are busy",
                    {{"Retry-After", "1"}});
    }
    ++running_;
  }
  Outcome outcome = Run(it->second, *job);
  std::lock_guard<std::mutex> l(mu_);
  ++stats_.requests;
  switch (outcome.kind()) {
    case Outcome::Kind::kSuccess:
      ++stats_.succeeded;
      break;
    case Outcome::Kind::kRetry:
      ++stats_.retried;
      break;
    case Outcome::Kind::kBury:
      ++stats_.buried;
      break;
  }
  Answer answer = AnswerOf(outcome);
  answer.holds_slot = true;
  return answer;
}

void Endpoint::Impl::Stop(int64_t drain_ms) {
  // Counted from the call: the deregistration's time is part of the drain.
  const int64_t deadline = clock_->MonotonicMs() + std::max<int64_t>(drain_ms, 0);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!started_ || stop_called_) {
      stop_called_ = true;
      return;
    }
    stop_called_ = true;
    quit_renew_ = true;
    stopping_ = true;
    cv_.notify_all();
  }
  if (renewer_.joinable()) renewer_.join();
  Deregister();
  WaitFor([this] { return running_ == 0; }, deadline);
  Close();
}

// Shuts every socket: the acceptor and idle connections wake and end; a
// handler still running finds its connection gone when it answers.
void Endpoint::Impl::Close() {
  {
    std::lock_guard<std::mutex> l(mu_);
    closed_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    for (auto& [id, c] : conns_) ::shutdown(c.fd, SHUT_RDWR);
  }
  if (acceptor_.joinable()) acceptor_.join();
}

void Endpoint::Impl::JoinAll() {
  Stop(0);
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_called_ = true;
  }
  Close();
  if (renewer_.joinable()) renewer_.join();
  for (;;) {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> l(mu_);
      threads.swap(finished_);
      for (auto& [id, c] : conns_) {
        if (c.thread.joinable()) threads.push_back(std::move(c.thread));
      }
    }
    if (threads.empty()) return;
    for (std::thread& t : threads) {
      if (t.joinable()) t.join();
    }
  }
}

Result<std::unique_ptr<Endpoint>> Endpoint::Create(EndpointOptions options) {
  if (!options.clock) options.clock = SystemClock();
  if (options.servers.empty()) {
    const char* env = std::getenv("DELAYQ_HTTP");
    options.servers = env != nullptr && *env != '\0' ? env : std::string(kDefaultServers);
  }
  Result<std::vector<HostPort>> servers = ParseServers(options.servers);
  if (!servers.ok()) return servers.status();
  if (Status st = ValidateSubscriptionName(options.name); !st.ok()) return st;
  if (options.threads == 0 || options.threads > kMaxSubscriptionConcurrency) {
    return InvalidArgument("threads: must be 1-10000 (the subscription's concurrency)");
  }
  std::vector<std::string> keys;
  for (size_t i = 0; i < options.secrets.size(); ++i) {
    std::string problem;
    std::optional<std::string> key = codec::DecodeWebhookSecret(options.secrets[i], &problem);
    // Named by position, never by value: the secret must not reach a log.
    if (!key) return InvalidArgument("secrets[" + std::to_string(i) + "]: " + problem);
    keys.push_back(std::move(*key));
  }
  Result<HostPort> at = endpoint::ParseHostPort(options.listen, "listen", true);
  if (!at.ok()) return at.status();
  const bool wildcard = at->host == "0.0.0.0" || at->host == "::" || at->host == "*";
  if (wildcard && options.advertise_url.empty()) {
    return InvalidArgument("advertise_url: required when listening on " + at->ToString() +
                           ", a wildcard address no server can call");
  }
  if (at->host == "*") at->host = "0.0.0.0";
  uint16_t port = 0;
  Result<int> fd = Listen(*at, &port);
  if (!fd.ok()) return fd.status();
  std::string url = options.advertise_url;
  if (url.empty()) url = "http://" + HostPort{at->host, port}.ToString() + "/";
  // The rest of the subscription's checks, with a stand-in topic (the real
  // ones come with Handle and are checked again at Start).
  Subscription probe;
  probe.name = options.name;
  probe.url = url;
  probe.topics = {"topic"};
  probe.concurrency = options.threads;
  probe.timeout_ms = options.timeout_ms;
  probe.ttl_ms = options.ttl_ms;
  probe.secrets = options.secrets;
  probe.retry = options.retry;
  if (Status st = AsOptionError(ValidateSubscription(probe)); !st.ok()) {
    ::close(*fd);
    return st;
  }
  auto impl = std::make_unique<Impl>(std::move(options), std::move(*servers), std::move(keys), *fd,
                                     std::move(url));
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(impl)));
}

Endpoint::Endpoint(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Endpoint::~Endpoint() = default;
Status Endpoint::Handle(std::string topic, Handler handler) {
  return impl_->Handle(std::move(topic), std::move(handler));
}
Status Endpoint::Start() { return impl_->Start(); }
void Endpoint::Stop(int64_t drain_ms) { impl_->Stop(drain_ms); }
EndpointStats Endpoint::Stats() const { return impl_->Stats(); }
const std::string& Endpoint::url() const { return impl_->url(); }

}  // namespace delayq
