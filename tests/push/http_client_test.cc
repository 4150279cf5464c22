// push::HttpClient against a real receiver on 127.0.0.1: a small epoll
// HTTP/1.1 server on a thread of its own, told per request what to do
// (answer, hang, reset, send garbage or an endless body, answer and close).
// Every test runs twice: plain http on the client's own transport (Lean)
// and on libcurl (Curl), which must behave alike. The client runs
// on a real net::EventLoop on another thread; the test thread talks to it
// through OnLoop and waits for answers with a deadline.
#include "push/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "testing/poll.h"

namespace delayq::push {
namespace {

using namespace std::chrono_literals;

// What the receiver saw of one request.
struct Seen {
  std::string head;  // request line and headers
  std::string body;
};

// What the receiver does with a request.
struct Answer {
  enum Kind { kReply, kHang, kReset, kEndless, kReplyAndClose } kind = kReply;
  std::string bytes;  // written first (kReply, kEndless: the head)
};

Answer Reply(int status, std::string body, std::string extra_headers = "") {
  return {Answer::kReply, "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body};
}

class Receiver {
 public:
  using Handler = std::function<Answer(const Seen&)>;

  // `greeting`: written to every connection as soon as it is accepted.
  explicit Receiver(Handler handler, std::string greeting = "")
      : handler_(std::move(handler)), greeting_(std::move(greeting)) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listen_fd_, 1024), 0);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    Watch(listen_fd_, EPOLLIN, EPOLL_CTL_ADD);
    Watch(stop_fd_, EPOLLIN, EPOLL_CTL_ADD);
    thread_ = std::thread([this] { Run(); });
  }
  ~Receiver() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(stop_fd_, &one, sizeof one);
    thread_.join();
    for (auto& [fd, c] : conns_) close(fd);
    close(listen_fd_);
    close(epoll_fd_);
    close(stop_fd_);
  }

  std::string url(const std::string& path = "/hook") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int accepts() const { return accepts_.load(); }
  int requests() const { return requests_.load(); }
  Seen last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  struct Conn {
    std::string out;
    std::string in;
    bool endless = false;
    bool close_when_written = false;
    bool waits_to_write = false;  // watched for EPOLLOUT
  };

  void Watch(int fd, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, op, fd, &ev);
  }

  void Run() {
    epoll_event events[64];
    for (;;) {
      int n = epoll_wait(epoll_fd_, events, 64, -1);
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == stop_fd_) return;
        if (fd == listen_fd_) {
          Accept();
        } else if (conns_.count(fd) != 0) {
          if (events[i].events & EPOLLIN) Read(fd);
          if (conns_.count(fd) != 0 && (events[i].events & EPOLLOUT)) Flush(fd);
        }
      }
    }
  }

  void Accept() {
    for (;;) {
      int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      ++accepts_;
      conns_[fd] = Conn{greeting_, {}, false, false, false};
      Watch(fd, EPOLLIN, EPOLL_CTL_ADD);
      if (!greeting_.empty()) Flush(fd);
    }
  }

  void Close(int fd, bool reset) {
    if (reset) {
      linger l{1, 0};  // close sends RST
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    conns_.erase(fd);
  }

  void Read(int fd) {
    Conn& c = conns_[fd];
    char buf[65536];
    for (;;) {
      ssize_t r = read(fd, buf, sizeof buf);
      if (r > 0) {
        c.in.append(buf, r);
        continue;
      }
      if (r == 0 || errno != EAGAIN) return Close(fd, false);
      break;
    }
    // Every whole request in the buffer (Content-Length bodies only).
    for (;;) {
      size_t head_end = c.in.find("\r\n\r\n");
      if (head_end == std::string::npos) return;
      Seen seen{c.in.substr(0, head_end + 2), {}};
      size_t length = 0;
      for (const char* name : {"Content-Length:", "content-length:"}) {
        size_t at = seen.head.find(name);
        if (at != std::string::npos) length = std::stoul(seen.head.substr(at + 15));
      }
      if (c.in.size() < head_end + 4 + length) return;
      seen.body = c.in.substr(head_end + 4, length);
      c.in.erase(0, head_end + 4 + length);
      ++requests_;
      {
        std::lock_guard<std::mutex> lock(mu_);
        last_ = seen;
      }
      Answer a = handler_(seen);
      switch (a.kind) {
        case Answer::kHang:
          break;
        case Answer::kReset:
          return Close(fd, true);
        case Answer::kReplyAndClose:
          c.close_when_written = true;
          c.out += a.bytes;
          Flush(fd);
          return;
        case Answer::kEndless:
          c.endless = true;
          [[fallthrough]];
        case Answer::kReply:
          c.out += a.bytes;
          Flush(fd);
          if (conns_.count(fd) == 0) return;
          break;
      }
    }
  }

  void Flush(int fd) {
    Conn& c = conns_[fd];
    static const std::string kFill(65536, 'x');
    for (;;) {
      if (c.out.empty()) {
        if (!c.endless) break;
        c.out = kFill;
      }
      ssize_t w = send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (w < 0 && errno == EAGAIN) break;
      if (w <= 0) return Close(fd, false);
      c.out.erase(0, w);
    }
    if (c.out.empty() && c.close_when_written) return Close(fd, false);
    if (c.waits_to_write != !c.out.empty()) {
      c.waits_to_write = !c.out.empty();
      Watch(fd, c.waits_to_write ? EPOLLIN | EPOLLOUT : EPOLLIN, EPOLL_CTL_MOD);
    }
  }

  Handler handler_;
  const std::string greeting_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int stop_fd_ = -1;
  int port_ = 0;
  std::map<int, Conn> conns_;  // receiver thread only
  std::atomic<int> accepts_{0};
  std::atomic<int> requests_{0};
  std::mutex mu_;
  Seen last_;  // GUARDED_BY(mu_)
  std::thread thread_;
};

// The responses a test waits for, from the loop thread.
class Collector {
 public:
  HttpClient::Done Callback() {
    return [this](HttpResponse r) {
      std::lock_guard<std::mutex> lock(mu_);
      responses_.push_back(std::move(r));
      cv_.notify_all();
    };
  }
  // True when `n` have arrived within `timeout`.
  bool WaitFor(size_t n, std::chrono::milliseconds timeout = 10s) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return responses_.size() >= n; });
  }
  std::vector<HttpResponse> responses() {
    std::lock_guard<std::mutex> lock(mu_);
    return responses_;
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu_);
    return responses_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<HttpResponse> responses_;  // GUARDED_BY(mu_)
};

class HttpClientTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    auto loop = net::EventLoop::Create();
    ASSERT_TRUE(loop.ok()) << loop.status().ToString();
    loop_ = std::move(*loop);
    thread_ = std::thread([this] { loop_->Run(); });
    MakeClient({});
  }
  void TearDown() override {
    OnLoop([this] { client_.reset(); });
    loop_->Stop();
    thread_.join();
  }

  // Runs `fn` on the loop thread and waits for it.
  template <typename Fn>
  auto OnLoop(Fn fn) -> decltype(fn()) {
    std::packaged_task<decltype(fn())()> task(std::move(fn));
    auto result = task.get_future();
    loop_->Post([&task] { task(); });
    return result.get();
  }

  // The transport under test (the parameter) is set here.
  void MakeClient(HttpClientOptions options) {
    options.lean_http = GetParam();
    OnLoop([&] {
      client_.reset();
      auto c = HttpClient::Create(loop_.get(), options);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      client_ = std::move(*c);
    });
  }

  uint64_t Post(const std::string& url, Collector* into, int64_t timeout_ms = 10'000,
                std::string body = R"({"id":"j1"})") {
    return OnLoop([&] {
      HttpRequest req;
      req.url = url;
      req.body = std::move(body);
      req.timeout_ms = timeout_ms;
      return client_->Post(std::move(req), into->Callback());
    });
  }

  // One request; its response.
  HttpResponse PostOne(const std::string& url, int64_t timeout_ms = 10'000) {
    Collector c;
    uint64_t id = Post(url, &c, timeout_ms);
    if (!c.WaitFor(1)) {
      ADD_FAILURE() << "no answer from " << url;
      OnLoop([&] { client_->Cancel(id); });
    }
    auto r = c.responses();
    return r.empty() ? HttpResponse{} : r[0];
  }

  size_t InFlight() {
    return OnLoop([this] { return client_->in_flight(); });
  }

  std::unique_ptr<net::EventLoop> loop_;
  std::thread thread_;
  std::unique_ptr<HttpClient> client_;  // loop thread only
};

// A port nothing listens on: bound, then closed.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

TEST_P(HttpClientTest, PostGets200WithBody) {
  Receiver rx([](const Seen&) { return Reply(200, "thanks"); });
  Collector c;
  std::string big(4000, 'b');  // past the size where curl once sent Expect: 100-continue
  OnLoop([&] {
    HttpRequest req;
    req.url = rx.url();
    req.body = "{\"body\":\"" + big + "\"}";
    req.headers = {{"webhook-id", "msg_1"}};
    client_->Post(std::move(req), c.Callback());
  });
  ASSERT_TRUE(c.WaitFor(1));
  HttpResponse r = c.responses()[0];
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "thanks");
  EXPECT_FALSE(r.timed_out);
  EXPECT_GT(r.elapsed_us, 0);
  Seen seen = rx.last();
  EXPECT_EQ(seen.head.rfind("POST /hook HTTP/1.1\r\n", 0), 0u) << seen.head;
  EXPECT_NE(seen.head.find("Content-Type: application/json\r\n"), std::string::npos);
  EXPECT_NE(seen.head.find("webhook-id: msg_1\r\n"), std::string::npos);
  EXPECT_EQ(seen.head.find("Expect"), std::string::npos) << seen.head;
  EXPECT_EQ(seen.body, "{\"body\":\"" + big + "\"}");
  EXPECT_EQ(InFlight(), 0u);
}

TEST_P(HttpClientTest, ManyRequestsReuseFewConnections) {
  Receiver rx([](const Seen&) { return Reply(204, ""); });
  // One after another: one connection.
  for (int i = 0; i < 100; ++i) EXPECT_EQ(PostOne(rx.url()).status, 204);
  EXPECT_EQ(rx.accepts(), 1);
  // Ten at a time, in waves: at most ten connections, the first among them.
  for (int wave = 0; wave < 20; ++wave) {
    Collector c;
    for (int i = 0; i < 10; ++i) Post(rx.url(), &c);
    ASSERT_TRUE(c.WaitFor(10));
    for (const auto& r : c.responses()) EXPECT_EQ(r.status, 204) << r.error;
  }
  EXPECT_LE(rx.accepts(), 10);
  EXPECT_EQ(rx.requests(), 300);
}

TEST_P(HttpClientTest, Status500IsAResponseNotAnError) {
  Receiver rx([](const Seen&) { return Reply(500, "oops"); });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.body, "oops");
}

TEST_P(HttpClientTest, RetryAfterIsCaptured) {
  Receiver rx([](const Seen&) { return Reply(429, "", "rEtRy-AfTeR:  7 \r\n"); });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.retry_after, "7");
}

TEST_P(HttpClientTest, HungReceiverTimesOut) {
  Receiver rx([](const Seen&) { return Answer{Answer::kHang, ""}; });
  auto start = std::chrono::steady_clock::now();
  HttpResponse r = PostOne(rx.url(), /*timeout_ms=*/200);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.error, "timed out after 200 ms");
  EXPECT_EQ(r.status, 0);
  EXPECT_GE(r.elapsed_us, 200'000);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
}

TEST_P(HttpClientTest, ClosedPortIsConnectionRefused) {
  HttpResponse r = PostOne("http://127.0.0.1:" + std::to_string(ClosedPort()) + "/");
  EXPECT_EQ(r.error, "connection refused");
  EXPECT_EQ(r.status, 0);
  EXPECT_FALSE(r.timed_out);
}

TEST_P(HttpClientTest, ReceiverThatResetsIsConnectionReset) {
  Receiver rx([](const Seen&) { return Answer{Answer::kReset, ""}; });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.error, "connection reset");
  EXPECT_EQ(r.status, 0);
}

TEST_P(HttpClientTest, GarbageIsABadResponse) {
  Receiver rx([](const Seen&) {
    return Answer{Answer::kReply, "\x01\x02 not http at all\r\n\r\n"};
  });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.error.rfind("bad response: ", 0), 0u) << r.error;
  EXPECT_EQ(r.status, 0);
  // A garbled status line too.
  Receiver rx2([](const Seen&) { return Answer{Answer::kReply, "HTTP/1.1 abc\r\n\r\n"}; });
  r = PostOne(rx2.url());
  EXPECT_EQ(r.error.rfind("bad response: ", 0), 0u) << r.error;
}

TEST_P(HttpClientTest, EndlessBodyIsCutAtTheLimit) {
  HttpClientOptions options;
  options.max_response_bytes = 4096;
  MakeClient(options);
  Receiver rx([](const Seen&) {
    return Answer{Answer::kEndless, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n"};
  });
  HttpResponse r = PostOne(rx.url(), /*timeout_ms=*/30'000);
  EXPECT_EQ(r.error, "response over 4096 bytes");
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.body.size(), 4096u);
  // The client goes on: the next request gets its answer.
  Receiver ok([](const Seen&) { return Reply(200, "fine"); });
  EXPECT_EQ(PostOne(ok.url()).status, 200);
}

TEST_P(HttpClientTest, TwoHundredConcurrentRequestsAllComplete) {
  Receiver rx([](const Seen& s) { return Reply(200, s.body); });
  Collector c;
  for (int i = 0; i < 200; ++i) Post(rx.url(), &c, 10'000, "{\"n\":" + std::to_string(i) + "}");
  ASSERT_TRUE(c.WaitFor(200)) << c.count();
  std::vector<bool> seen(200);
  for (const auto& r : c.responses()) {
    ASSERT_EQ(r.status, 200) << r.error;
    int n = std::stoi(r.body.substr(5));
    EXPECT_FALSE(seen[n]);
    seen[n] = true;
  }
  EXPECT_EQ(InFlight(), 0u);
  EXPECT_EQ(rx.requests(), 200);
  EXPECT_LE(rx.accepts(), 64);  // max_idle_per_host: the rest waited for a connection
}

TEST_P(HttpClientTest, DoneNeverRunsInsidePost) {
  // A refused connect fails as fast as anything can.
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/";
  Collector c;
  bool ran_inside = true;
  OnLoop([&] {
    HttpRequest req;
    req.url = url;
    client_->Post(std::move(req), c.Callback());
    ran_inside = c.count() != 0;
  });
  EXPECT_FALSE(ran_inside);
  ASSERT_TRUE(c.WaitFor(1));
  // A bad header fails before any I/O, still not inside Post.
  OnLoop([&] {
    HttpRequest req;
    req.url = url;
    req.headers = {{"x-evil", "a\r\nInjected: yes"}};
    client_->Post(std::move(req), c.Callback());
    ran_inside = c.count() != 1;
  });
  EXPECT_FALSE(ran_inside);
  ASSERT_TRUE(c.WaitFor(2));
  EXPECT_EQ(c.responses()[1].error, "bad request header: x-evil holds a line break");
}

TEST_P(HttpClientTest, CancelDropsTheRequestWithoutDone) {
  Receiver hung([](const Seen&) { return Answer{Answer::kHang, ""}; });
  Collector cancelled;
  uint64_t id = Post(hung.url(), &cancelled);
  // Once the receiver holds the request, cancel it.
  ASSERT_TRUE(PollUntil([&] { return hung.requests() == 1; }, 10s));
  OnLoop([&] {
    client_->Cancel(id);
    client_->Cancel(id);      // twice: nothing
    client_->Cancel(999999);  // unknown: nothing
  });
  EXPECT_EQ(InFlight(), 0u);
  // Later requests go through, and the cancelled one never answers.
  Receiver ok([](const Seen&) { return Reply(200, ""); });
  for (int i = 0; i < 5; ++i) EXPECT_EQ(PostOne(ok.url()).status, 200);
  EXPECT_EQ(cancelled.count(), 0u);
}

TEST_P(HttpClientTest, DoneMayCancelAndPost) {
  const std::string refused = "http://127.0.0.1:" + std::to_string(ClosedPort()) + "/";
  Receiver ok([](const Seen&) { return Reply(200, "again"); });
  Collector c;
  std::vector<uint64_t> ids;
  int dones = 0;
  OnLoop([&] {
    // Whichever of these finishes first cancels the other (which may
    // already be finished in the same batch) and posts a new request.
    for (int i = 0; i < 2; ++i) {
      HttpRequest req;
      req.url = refused;
      ids.push_back(client_->Post(std::move(req), [&, i](HttpResponse r) {
        ++dones;
        EXPECT_EQ(r.error, "connection refused");
        client_->Cancel(ids[1 - i]);
        HttpRequest again;
        again.url = ok.url();
        client_->Post(std::move(again), c.Callback());
      }));
    }
  });
  ASSERT_TRUE(c.WaitFor(1));
  EXPECT_EQ(c.responses()[0].body, "again");
  EXPECT_EQ(OnLoop([&] { return dones; }), 1);
  EXPECT_EQ(InFlight(), 0u);
}

TEST_P(HttpClientTest, DestroyingTheClientDropsRequestsInFlight) {
  Receiver hung([](const Seen&) { return Answer{Answer::kHang, ""}; });
  Collector c;
  for (int i = 0; i < 10; ++i) Post(hung.url(), &c);
  ASSERT_TRUE(PollUntil([&] { return hung.requests() == 10; }, 10s));
  // Some not yet started, too.
  for (int i = 0; i < 10; ++i) Post(hung.url(), &c);
  OnLoop([&] { client_.reset(); });
  // The loop lives on, with no stale registration: a new client works.
  MakeClient({});
  Receiver ok([](const Seen&) { return Reply(200, ""); });
  EXPECT_EQ(PostOne(ok.url()).status, 200);
  EXPECT_EQ(c.count(), 0u);
}

TEST_P(HttpClientTest, OnlyHttpAndHttpsAreAllowed) {
  HttpResponse r = PostOne("ftp://127.0.0.1:21/x");
  EXPECT_EQ(r.error.rfind("bad url: ", 0), 0u) << r.error;
  r = PostOne("not a url");
  EXPECT_EQ(r.error.rfind("bad url: ", 0), 0u) << r.error;
}

TEST_P(HttpClientTest, HttpsToAPlainReceiverFailsTheHandshake) {
  // It speaks first, plain HTTP, where a TLS server would answer the hello.
  Receiver rx([](const Seen&) { return Reply(200, ""); },
              "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  HttpResponse r = PostOne("https://127.0.0.1:" + rx.url().substr(17), /*timeout_ms=*/5'000);
  EXPECT_EQ(r.error.rfind("tls: ", 0), 0u) << r.error;
  EXPECT_EQ(r.status, 0);
}

TEST_P(HttpClientTest, NoRedirectIsFollowed) {
  Receiver rx([](const Seen&) { return Reply(302, "", "Location: http://127.0.0.1:1/\r\n"); });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.status, 302);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(rx.requests(), 1);
}

TEST_P(HttpClientTest, DelayqOutcomeIsCaptured) {
  Receiver rx([](const Seen&) { return Reply(200, "", "Delayq-Outcome: bury\r\n"); });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.outcome, "bury");
  EXPECT_EQ(r.retry_after, "");
}

TEST_P(HttpClientTest, ChunkedBodyIsRead) {
  Receiver rx([](const Seen&) {
    return Answer{Answer::kReply,
                  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabc\r\n4;ext=1\r\ndefg\r\n0\r\n\r\n"};
  });
  for (int i = 0; i < 3; ++i) {  // and the connection is reused after it
    HttpResponse r = PostOne(rx.url());
    EXPECT_EQ(r.error, "");
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, "abcdefg");
  }
  EXPECT_EQ(rx.accepts(), 1);
}

TEST_P(HttpClientTest, Http10BodyIsReadToEof) {
  Receiver rx([](const Seen&) {
    return Answer{Answer::kReplyAndClose, "HTTP/1.0 200 OK\r\n\r\nuntil the end"};
  });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "until the end");
  EXPECT_EQ(PostOne(rx.url()).body, "until the end");  // on a new connection
  EXPECT_EQ(rx.accepts(), 2);
}

TEST_P(HttpClientTest, ConnectionCloseIsNotReused) {
  // The receiver keeps its side open: the client must close on the header.
  Receiver rx([](const Seen&) { return Reply(200, "bye", "Connection: close\r\n"); });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(PostOne(rx.url()).status, 200);
  EXPECT_EQ(rx.accepts(), 3);
}

TEST_P(HttpClientTest, ClosedWithoutAResponse) {
  Receiver rx([](const Seen&) { return Answer{Answer::kReplyAndClose, ""}; });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.error, "connection closed without a response");
  EXPECT_EQ(r.status, 0);
}

TEST_P(HttpClientTest, TruncatedBodyIsABadResponse) {
  Receiver rx([](const Seen&) {
    return Answer{Answer::kReplyAndClose, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"};
  });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.error.rfind("bad response: ", 0), 0u) << r.error;
  EXPECT_EQ(r.status, 0);
}

TEST_P(HttpClientTest, ReusedConnectionClosedByTheReceiverIsRetried) {
  // Each connection answers one request, then the receiver closes it
  // without saying so: the next request finds it closed (as idle, or
  // right after writing to it) and still gets its answer, on a new one.
  Receiver rx([](const Seen&) {
    return Answer{Answer::kReplyAndClose,
                  std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")};
  });
  for (int i = 0; i < 20; ++i) {
    HttpResponse r = PostOne(rx.url());
    EXPECT_EQ(r.error, "") << i;
    EXPECT_EQ(r.status, 200) << i;
  }
  EXPECT_GE(rx.accepts(), 20);
  EXPECT_LE(rx.requests(), 40);  // at most one retry each
}

TEST_P(HttpClientTest, HostNamesWork) {
  // On the lean setting a name is handed to libcurl (resolved off the loop).
  Receiver rx([](const Seen&) { return Reply(200, "named"); });
  HttpResponse r = PostOne("http://localhost:" + rx.url().substr(17));
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.body, "named");
  EXPECT_NE(rx.last().head.find("Host: localhost:"), std::string::npos) << rx.last().head;
}

TEST_P(HttpClientTest, InterimResponseIsSkipped) {
  Receiver rx([](const Seen&) {
    return Answer{Answer::kReply,
                  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n"
                  "Retry-After: 3\r\n\r\nx"};
  });
  HttpResponse r = PostOne(rx.url());
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.retry_after, "3");
  EXPECT_EQ(r.body, "x");
}

// Microseconds of CPU the calling thread has used.
int64_t ThreadCpuUs() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000 + u.ru_utime.tv_usec +
         u.ru_stime.tv_usec;
}

// The figure: 20,000 POSTs, 50 in flight, to the receiver above (one
// thread, keep-alive), each Done posting the next request. Printed: the
// requests/s, and the loop thread's CPU per request (what the client costs
// whatever else the machine runs).
TEST_P(HttpClientTest, ThroughputOf20000PostsAt50InFlight) {
  constexpr int kTotal = 20'000;
  constexpr int kInFlight = 50;
  Receiver rx([](const Seen&) { return Reply(200, "{}"); });
  const std::string url = rx.url();
  const std::string body(200, 'j');
  int ok = 0;
  int done = 0;
  int started = 0;
  std::promise<void> finished;
  std::function<void()> start_one;
  start_one = [&] {
    ++started;
    HttpRequest req;
    req.url = url;
    req.body = body;
    client_->Post(std::move(req), [&](HttpResponse r) {
      if (r.status == 200) ++ok;
      if (++done == kTotal) finished.set_value();
      if (started < kTotal) start_one();
    });
  };
  const int64_t cpu_before = OnLoop([] { return ThreadCpuUs(); });
  const auto begin = std::chrono::steady_clock::now();
  OnLoop([&] {
    for (int i = 0; i < kInFlight; ++i) start_one();
  });
  ASSERT_EQ(finished.get_future().wait_for(120s), std::future_status::ready);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const int64_t cpu_us = OnLoop([] { return ThreadCpuUs(); }) - cpu_before;
  EXPECT_EQ(OnLoop([&] { return ok; }), kTotal);
  EXPECT_LE(rx.accepts(), kInFlight);
  std::printf(
      "http_client (%s): %d POSTs, %d in flight, %d connections: %.0f requests/s, "
      "%.1f us of loop CPU per request\n",
      GetParam() ? "lean" : "libcurl", kTotal, kInFlight, rx.accepts(), kTotal / seconds,
      static_cast<double>(cpu_us) / kTotal);
  RecordProperty("requests_per_s", static_cast<int>(kTotal / seconds));
}

INSTANTIATE_TEST_SUITE_P(Transports, HttpClientTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Lean" : "Curl";
                         });

}  // namespace
}  // namespace delayq::push
