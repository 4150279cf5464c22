// How it works: HttpClient::Impl (at the end) hands plain http:// to a
// numeric host to Http1Transport (push/http1_transport.h) and everything
// else to CurlTransport, numbering requests itself so ids are unique across
// both. CurlTransport: one libcurl multi handle per client, driven by the loop
// through the multi_socket API. libcurl says which sockets it wants watched
// (OnSocket: Add / Modify / Remove on the loop) and when it next needs a
// call (OnTimer: one loop timer); the loop's events and that timer call
// curl_multi_socket_action, and after each call the finished transfers are
// taken from curl_multi_info_read and their Done run. Nothing here ever
// waits: connects, TLS, reads and writes happen as the loop reports
// readiness, and names resolve on libcurl's resolver thread.
//
// Connections live in the multi handle's cache, so a request to a host
// reuses an idle keep-alive connection. Easy handles are kept on a free
// list with their fixed options set once: a request sets only its URL,
// body, headers and timeout.
//
// Re-entrancy: Done may Post and Cancel. Finished transfers are first
// collected by id (curl_multi_info_read's messages do not survive a
// curl_multi_remove_handle, and a recycled handle may carry another request
// by then), then looked up one by one, so a Done that cancels a request
// whose message is already collected simply finds it gone.
#include "push/http_client.h"

#include <curl/curl.h>
#include <strings.h>
#include <sys/epoll.h>

#include <cerrno>
#include <chrono>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "delayq/version.h"
#include "push/http1_transport.h"

namespace delayq::push {
namespace {

// The most header bytes of one response; past it the receiver is not
// speaking HTTP as we know it.
constexpr size_t kMaxHeaderBytes = 64 << 10;
// Idle easy handles kept for reuse; past it they are freed.
constexpr size_t kMaxFreeHandles = 1024;
// Calls libcurl asks for "at once" served within one Drive before the rest
// waits for the loop's next turn (so a busy client cannot starve the loop).
constexpr int kMaxRunsNow = 16;
// A request body's buffer kept for the next request up to this capacity.
constexpr size_t kKeptBodyCapacity = 64 << 10;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool GlobalInit() {
  static std::once_flag once;
  static CURLcode code = CURLE_OK;
  std::call_once(once, [] { code = curl_global_init(CURL_GLOBAL_DEFAULT); });
  return code == CURLE_OK;
}

bool HasLineBreak(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

}  // namespace

class CurlTransport {
 public:
  using Done = HttpClient::Done;

  CurlTransport(net::EventLoop* loop, HttpClientOptions options, CURLM* multi)
      : loop_(loop), options_(std::move(options)), multi_(multi) {}
  ~CurlTransport();
  CurlTransport(const CurlTransport&) = delete;
  CurlTransport& operator=(const CurlTransport&) = delete;

  void Setup();
  void Post(uint64_t id, HttpRequest request, Done done);
  void Cancel(uint64_t id);
  size_t in_flight() const { return transfers_.size(); }

 private:
  // One request, and the easy handle it runs on (paired for life: the
  // handle's callbacks point here, so they are set once).
  struct Transfer {
    CURL* easy = nullptr;
    CurlTransport* impl = nullptr;
    char errbuf[CURL_ERROR_SIZE] = {};
    uint64_t id = 0;
    std::string body;  // CURLOPT_POSTFIELDS points here until the end
    curl_slist* headers = nullptr;
    int64_t timeout_ms = 0;
    int64_t start_us = 0;
    size_t header_bytes = 0;
    bool body_over = false;     // the body passed max_response_bytes
    bool headers_over = false;  // the headers passed kMaxHeaderBytes
    bool in_multi = false;
    uint64_t fail_timer = 0;  // a request failed before it started
    std::string fail_error;
    HttpResponse response;
    Done done;
  };

  static int OnSocket(CURL* easy, curl_socket_t fd, int what, void* userp, void* socketp);
  static int OnTimer(CURLM* multi, long timeout_ms, void* userp);
  static size_t OnBody(char* data, size_t size, size_t n, void* userp);
  static size_t OnHeader(char* data, size_t size, size_t n, void* userp);

  // A transfer for request `id`, in transfers_.
  Transfer* Acquire(uint64_t id);
  std::unique_ptr<Transfer> NewTransfer();
  void Recycle(std::unique_ptr<Transfer> t);
  void FailLater(Transfer* t, std::string error);
  void ArmTimer(long timeout_ms);
  void OnReady(int fd, uint32_t events);
  void OnTimeout();
  // One curl_multi_socket_action and the Done of what it finished, then as
  // long as libcurl asks to be run at once, again. False when a Done
  // destroyed the client.
  bool Drive(curl_socket_t fd, int flags);
  // Runs Done for every transfer libcurl has finished.
  bool ProcessDone(const std::shared_ptr<bool>& alive);
  void Complete(uint64_t id, CURLcode code);
  std::string Describe(Transfer* t, CURLcode code);

  net::EventLoop* const loop_;
  const HttpClientOptions options_;
  CURLM* const multi_;
  // Loop thread only, all of it.
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> transfers_;
  std::vector<std::unique_ptr<Transfer>> free_;
  std::unordered_set<int> sockets_;  // registered with the loop
  uint64_t timer_ = 0;               // libcurl's timeout as a loop timer
  int64_t timer_deadline_ms_ = -1;   // when timer_ fires
  int depth_ = 0;                    // Drive calls under way
  bool run_now_ = false;             // libcurl asked for a call at once, within Drive
  bool closing_ = false;
  // Cleared by the destructor, so a Done that (against the contract)
  // destroys the client stops the batch instead of touching freed state.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

void CurlTransport::Setup() {
  curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &CurlTransport::OnSocket);
  curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &CurlTransport::OnTimer);
  curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  curl_multi_setopt(multi_, CURLMOPT_MAX_HOST_CONNECTIONS, options_.max_idle_per_host);
  curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, options_.max_total_connections);
}

CurlTransport::~CurlTransport() {
  // The loop lets go of libcurl's sockets before libcurl closes them, so no
  // registration outlives its descriptor; libcurl's calls from here on are
  // ignored.
  for (int fd : sockets_) loop_->Remove(fd);
  sockets_.clear();
  closing_ = true;
  *alive_ = false;
  if (timer_ != 0) loop_->CancelTimer(timer_);
  for (auto& [id, t] : transfers_) {
    if (t->fail_timer != 0) loop_->CancelTimer(t->fail_timer);
    if (t->in_multi) curl_multi_remove_handle(multi_, t->easy);
    curl_slist_free_all(t->headers);
    curl_easy_cleanup(t->easy);
  }
  for (auto& t : free_) curl_easy_cleanup(t->easy);
  curl_multi_cleanup(multi_);
}

CurlTransport::Transfer* CurlTransport::Acquire(uint64_t id) {
  std::unique_ptr<Transfer> t;
  if (!free_.empty()) {
    t = std::move(free_.back());
    free_.pop_back();
  } else {
    t = NewTransfer();
  }
  Transfer* raw = t.get();
  raw->id = id;
  transfers_.emplace(raw->id, std::move(t));
  return raw;
}

std::unique_ptr<CurlTransport::Transfer> CurlTransport::NewTransfer() {
  auto t = std::make_unique<Transfer>();
  t->impl = this;
  t->easy = curl_easy_init();
  CURL* e = t->easy;
  if (e == nullptr) return t;  // the request fails, later
  curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &CurlTransport::OnBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, &CurlTransport::OnHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
  // Signals would be the whole process's business, not a library's.
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  // One request per connection at a time, connections pooled per host:
  // what the per-instance concurrency is counted against.
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  if (!options_.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, options_.ca_file.c_str());
  curl_easy_setopt(e, CURLOPT_USERAGENT, "delayq/" DELAYQ_VERSION);
  // No proxy from the environment: a server's pushes go where its
  // subscriptions say (and libcurl then skips reading http_proxy & co. on
  // every request).
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  return t;
}

void CurlTransport::Recycle(std::unique_ptr<Transfer> t) {
  curl_slist_free_all(t->headers);
  t->headers = nullptr;
  t->done = nullptr;
  t->fail_timer = 0;
  t->fail_error.clear();
  t->in_multi = false;
  if (t->easy == nullptr || free_.size() >= kMaxFreeHandles) {
    if (t->easy != nullptr) curl_easy_cleanup(t->easy);
    return;
  }
  t->body.clear();
  if (t->body.capacity() > kKeptBodyCapacity) t->body.shrink_to_fit();
  t->response = HttpResponse{};
  free_.push_back(std::move(t));
}

void CurlTransport::Post(uint64_t id, HttpRequest request, Done done) {
  Transfer* t = Acquire(id);
  t->done = std::move(done);
  t->start_us = NowUs();
  t->timeout_ms = request.timeout_ms > 0 ? request.timeout_ms : 1;
  t->header_bytes = 0;
  t->body_over = t->headers_over = false;
  t->errbuf[0] = '\0';
  if (t->easy == nullptr) {
    FailLater(t, "cannot set up a request (libcurl: out of memory)");
    return;
  }
  t->body = std::move(request.body);
  t->headers = curl_slist_append(nullptr, "Content-Type: application/json");
  // No 100-continue round trip before the body: receivers answer at once.
  t->headers = curl_slist_append(t->headers, "Expect:");
  for (const auto& [name, value] : request.headers) {
    if (HasLineBreak(name) || HasLineBreak(value)) {
      FailLater(t, "bad request header: " + name + " holds a line break");
      return;
    }
    std::string line = name;
    line += ": ";
    line += value;
    t->headers = curl_slist_append(t->headers, line.c_str());
  }
  CURL* e = t->easy;
  curl_easy_setopt(e, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, t->body.data());
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(t->timeout_ms));
  // Adding only schedules the start (OnTimer): Done cannot run in here.
  CURLMcode mc = curl_multi_add_handle(multi_, e);
  if (mc != CURLM_OK) {
    FailLater(t, std::string("cannot start a request: ") + curl_multi_strerror(mc));
    return;
  }
  t->in_multi = true;
}

void CurlTransport::FailLater(Transfer* t, std::string error) {
  t->fail_error = std::move(error);
  const uint64_t id = t->id;
  t->fail_timer = loop_->RunAfter(0, [this, id] {
    auto it = transfers_.find(id);
    if (it == transfers_.end()) return;
    it->second->fail_timer = 0;
    Complete(id, CURLE_OK);
  });
}

void CurlTransport::Cancel(uint64_t id) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return;
  std::unique_ptr<Transfer> t = std::move(it->second);
  transfers_.erase(it);
  if (t->fail_timer != 0) loop_->CancelTimer(t->fail_timer);
  // A transfer removed mid-way closes its connection; libcurl says so
  // through OnSocket, which is fine here (not inside a libcurl call).
  if (t->in_multi) curl_multi_remove_handle(multi_, t->easy);
  Recycle(std::move(t));
}

int CurlTransport::OnSocket(CURL*, curl_socket_t fd, int what, void* userp, void*) {
  auto* self = static_cast<CurlTransport*>(userp);
  if (self->closing_) return 0;
  if (what == CURL_POLL_REMOVE) {
    if (self->sockets_.erase(fd) != 0) self->loop_->Remove(fd);
    return 0;
  }
  uint32_t events = 0;
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= EPOLLIN;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= EPOLLOUT;
  if (!self->sockets_.insert(fd).second) {
    self->loop_->Modify(fd, events);
    return 0;
  }
  Status added = self->loop_->Add(fd, events, [self, fd](uint32_t ev) { self->OnReady(fd, ev); });
  if (!added.ok()) {
    self->sockets_.erase(fd);
    return -1;  // libcurl fails the transfer
  }
  return 0;
}

int CurlTransport::OnTimer(CURLM*, long timeout_ms, void* userp) {
  auto* self = static_cast<CurlTransport*>(userp);
  if (self->closing_) return 0;
  // "Now", asked while we are driving libcurl anyway (a Done that posts
  // the next request): served before control goes back to the loop,
  // without a timer's system calls.
  self->run_now_ = timeout_ms == 0 && self->depth_ > 0;
  if (self->run_now_) return 0;
  if (timeout_ms < 0) {
    if (self->timer_ != 0) self->loop_->CancelTimer(self->timer_);
    self->timer_ = 0;
    return 0;
  }
  self->ArmTimer(timeout_ms);
  return 0;
}

void CurlTransport::ArmTimer(long timeout_ms) {
  // The loop's timers have whole milliseconds: one more, so the timer is
  // not early for libcurl's finer deadline.
  const int64_t after = timeout_ms > 0 ? timeout_ms + 1 : 0;
  const int64_t deadline = net::MonotonicNowMs() + after;
  // An armed timer that is due no later stays: if it is early, OnTimeout
  // asks libcurl again. Deadlines that move later with every finished
  // request (the next request's timeout) so cost no timer update.
  if (timer_ != 0 && timer_deadline_ms_ <= deadline) return;
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_deadline_ms_ = deadline;
  timer_ = loop_->RunAfter(after, [this] {
    timer_ = 0;
    OnTimeout();
  });
}

void CurlTransport::OnReady(int fd, uint32_t events) {
  int flags = 0;
  if (events & (EPOLLIN | EPOLLHUP)) flags |= CURL_CSELECT_IN;
  if (events & EPOLLOUT) flags |= CURL_CSELECT_OUT;
  if (events & EPOLLERR) flags |= CURL_CSELECT_ERR;
  Drive(fd, flags);
}

void CurlTransport::OnTimeout() {
  if (!Drive(CURL_SOCKET_TIMEOUT, 0)) return;
  // libcurl tells the timer only when its deadline changes; if ours was
  // early (kept from before, or rounded), it has not, and the timer is
  // armed again from what it says now.
  if (timer_ == 0) {
    long ms = -1;
    curl_multi_timeout(multi_, &ms);
    if (ms >= 0) ArmTimer(ms);
  }
}

bool CurlTransport::Drive(curl_socket_t fd, int flags) {
  std::shared_ptr<bool> alive = alive_;
  ++depth_;
  int running = 0;
  curl_multi_socket_action(multi_, fd, flags, &running);
  if (!ProcessDone(alive)) return false;
  for (int i = 0; run_now_ && i < kMaxRunsNow; ++i) {
    run_now_ = false;
    curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    if (!ProcessDone(alive)) return false;
  }
  --depth_;
  if (run_now_) {  // still asking: the loop's next turn
    run_now_ = false;
    ArmTimer(0);
  }
  return true;
}

bool CurlTransport::ProcessDone(const std::shared_ptr<bool>& alive) {
  struct Finished {
    uint64_t id;
    CURLcode code;
  };
  std::vector<Finished> finished;
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Transfer* t = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
    if (t != nullptr) finished.push_back({t->id, msg->data.result});
  }
  for (const Finished& f : finished) {
    Complete(f.id, f.code);
    if (!*alive) return false;
  }
  return true;
}

void CurlTransport::Complete(uint64_t id, CURLcode code) {
  auto it = transfers_.find(id);
  if (it == transfers_.end()) return;  // cancelled by an earlier Done
  std::unique_ptr<Transfer> t = std::move(it->second);
  transfers_.erase(it);
  HttpResponse response = std::move(t->response);
  response.elapsed_us = NowUs() - t->start_us;
  if (!t->fail_error.empty()) {
    response.error = std::move(t->fail_error);
  } else {
    response.error = Describe(t.get(), code);
    if (code == CURLE_OPERATION_TIMEDOUT) response.timed_out = true;
    if (response.error.empty())
      curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &response.status);
  }
  if (!response.error.empty()) response.status = 0;
  if (t->in_multi) curl_multi_remove_handle(multi_, t->easy);  // its connection back to the pool
  Done done = std::move(t->done);
  Recycle(std::move(t));
  done(std::move(response));
}

std::string CurlTransport::Describe(Transfer* t, CURLcode code) {
  if (code == CURLE_OK) return {};
  long os_errno = 0;
  curl_easy_getinfo(t->easy, CURLINFO_OS_ERRNO, &os_errno);
  const std::string detail = t->errbuf[0] != '\0' ? t->errbuf : curl_easy_strerror(code);
  switch (code) {
    case CURLE_OPERATION_TIMEDOUT:
      return "timed out after " + std::to_string(t->timeout_ms) + " ms";
    case CURLE_COULDNT_CONNECT:
      if (os_errno == ECONNREFUSED) return "connection refused";
      return "cannot connect: " + detail;
    case CURLE_COULDNT_RESOLVE_HOST:
      return "cannot resolve host: " + detail;
    case CURLE_WRITE_ERROR:
      if (t->body_over) {
        return "response over " + std::to_string(options_.max_response_bytes) + " bytes";
      }
      if (t->headers_over) {
        return "bad response: headers over " + std::to_string(kMaxHeaderBytes) + " bytes";
      }
      return "bad response: " + detail;
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
      if (os_errno == ECONNRESET || os_errno == EPIPE) return "connection reset";
      return "connection error: " + detail;
    case CURLE_GOT_NOTHING:
      return "connection closed without a response";
    case CURLE_URL_MALFORMAT:
      return "bad url: " + detail;
    case CURLE_UNSUPPORTED_PROTOCOL: {
      // Both a scheme other than http(s) and a reply that is not HTTP
      // (HTTP/0.9) end here; only the second sent a request.
      long sent = 0;
      curl_easy_getinfo(t->easy, CURLINFO_REQUEST_SIZE, &sent);
      return (sent > 0 ? "bad response: " : "bad url: ") + detail;
    }
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_SSL_ENGINE_INITFAILED:
      return "tls: " + detail;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_PARTIAL_FILE:
    case CURLE_BAD_CONTENT_ENCODING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return "bad response: " + detail;
    default:
      return "request failed: " + detail;
  }
}

size_t CurlTransport::OnBody(char* data, size_t size, size_t n, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  const size_t len = size * n;
  const size_t max = t->impl->options_.max_response_bytes;
  std::string& body = t->response.body;
  if (body.size() + len > max) {
    body.append(data, max - body.size());
    t->body_over = true;
    return 0;  // aborts the transfer (CURLE_WRITE_ERROR): an endless body ends here
  }
  body.append(data, len);
  return len;
}

size_t CurlTransport::OnHeader(char* data, size_t size, size_t n, void* userp) {
  auto* t = static_cast<Transfer*>(userp);
  const size_t len = size * n;
  t->header_bytes += len;
  if (t->header_bytes > kMaxHeaderBytes) {
    t->headers_over = true;
    return 0;
  }
  // A status line starts a response's headers (after a 1xx, another).
  if (len >= 5 && strncasecmp(data, "HTTP/", 5) == 0) {
    t->response.retry_after.clear();
    t->response.outcome.clear();
  }
  // The value of header `name` (lower case, with its colon) if this line is it.
  auto value_of = [&](std::string_view name, std::string* out) {
    if (len <= name.size() || strncasecmp(data, name.data(), name.size()) != 0) return;
    size_t begin = name.size(), end = len;
    while (begin < end && (data[begin] == ' ' || data[begin] == '\t')) ++begin;
    while (end > begin && (data[end - 1] == '\r' || data[end - 1] == '\n' || data[end - 1] == ' ' ||
                           data[end - 1] == '\t')) {
      --end;
    }
    out->assign(data + begin, end - begin);
  };
  value_of("retry-after:", &t->response.retry_after);
  value_of("delayq-outcome:", &t->response.outcome);
  return len;
}

// The client: plain http:// to a numeric host goes to the lean transport,
// the rest to libcurl. Ids are the client's, unique across both.
class HttpClient::Impl {
 public:
  Impl(net::EventLoop* loop, const HttpClientOptions& options, CURLM* multi)
      : curl_(loop, options, multi) {
    curl_.Setup();
    if (options.lean_http) lean_ = std::make_unique<Http1Transport>(loop, options);
  }

  uint64_t Post(HttpRequest request, Done done) {
    const uint64_t id = next_id_++;
    if (lean_ != nullptr && lean_->Post(id, request, done)) return id;
    curl_.Post(id, std::move(request), std::move(done));
    return id;
  }
  void Cancel(uint64_t id) {
    if (lean_ != nullptr && lean_->Cancel(id)) return;
    curl_.Cancel(id);
  }
  size_t in_flight() const {
    return curl_.in_flight() + (lean_ != nullptr ? lean_->in_flight() : 0);
  }

 private:
  CurlTransport curl_;
  std::unique_ptr<Http1Transport> lean_;  // destroyed first
  uint64_t next_id_ = 1;
};

Result<std::unique_ptr<HttpClient>> HttpClient::Create(net::EventLoop* loop,
                                                       const HttpClientOptions& options) {
  if (!GlobalInit()) return Internal("http client: curl_global_init failed");
  CURLM* multi = curl_multi_init();
  if (multi == nullptr) return Internal("http client: curl_multi_init failed");
  auto impl = std::make_unique<Impl>(loop, options, multi);
  return std::unique_ptr<HttpClient>(new HttpClient(std::move(impl)));
}

HttpClient::HttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpClient::~HttpClient() = default;

uint64_t HttpClient::Post(HttpRequest request, Done done) {
  return impl_->Post(std::move(request), std::move(done));
}
void HttpClient::Cancel(uint64_t id) { impl_->Cancel(id); }
size_t HttpClient::in_flight() const { return impl_->in_flight(); }

}  // namespace delayq::push
