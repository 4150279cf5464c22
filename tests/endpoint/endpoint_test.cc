// delayq::Endpoint over real sockets on 127.0.0.1: its HTTP side driven by
// a test client that POSTs job JSON as the servers do, and its registration
// against a real HTTP server (testing::HttpReceiver) standing in for the
// delayq servers' routes, recording every PUT and DELETE. Renewal times
// are checked on a ManualClock. The end-to-end run against `delayq serve`
// is tests/integration/endpoint_test.py.
#include "delayq/endpoint.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "codec/base64.h"
#include "codec/webhook_signature.h"
#include "testing/http_receiver.h"
#include "testing/poll.h"

namespace delayq {
namespace {

using std::chrono::milliseconds;
using testing::HttpReceiver;
using testing::ReceivedRequest;
using testing::ReceiverAnswer;

constexpr const char* kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kJob =
    R"({"id":"order-1001","topic":"order.close","body":"{\"order\":1001}","attempts":2,)"
    R"("ttr_ms":60000,"priority":7,"run_at_ms":1700000000000,)"
    R"("reserved_until_ms":1700000060000,"max_attempts":5,"state":"reserved"})";

std::string JobFor(const std::string& topic, const std::string& id = "j1") {
  return R"({"id":")" + id + R"(","topic":")" + topic + R"(","body":"x","attempts":1})";
}

// A port nothing listens on: bound, then closed.
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

int PortOf(const std::string& url) {
  size_t colon = url.rfind(':');
  return std::stoi(url.substr(colon + 1));
}

struct Reply {
  int status = 0;                              // 0: the connection closed without an answer
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// One keep-alive connection to the endpoint, as the server's pool holds.
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Client() { ::close(fd_); }

  void Send(const std::string& body, const std::vector<std::string>& headers = {},
            const std::string& method = "POST") {
    std::string out = method + " / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n";
    for (const std::string& h : headers) out += h + "\r\n";
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    ASSERT_EQ(::send(fd_, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
  }

  Reply Receive() {
    Reply r;
    size_t head_end;
    while ((head_end = in_.find("\r\n\r\n")) == std::string::npos) {
      if (!Fill()) return r;
    }
    std::string head = in_.substr(0, head_end);
    r.status = std::stoi(head.substr(9, 3));
    size_t pos = head.find("\r\n");
    while (pos != std::string::npos) {
      pos += 2;
      size_t end = head.find("\r\n", pos);
      std::string line = head.substr(pos, end == std::string::npos ? end : end - pos);
      size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      pos = end;
    }
    size_t length = std::stoul(r.headers["content-length"]);
    while (in_.size() < head_end + 4 + length) {
      if (!Fill()) return Reply();
    }
    r.body = in_.substr(head_end + 4, length);
    in_.erase(0, head_end + 4 + length);
    return r;
  }

  Reply Post(const std::string& body, const std::vector<std::string>& headers = {}) {
    Send(body, headers);
    return Receive();
  }

  bool connected() const { return connected_; }

 private:
  bool Fill() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20'000) <= 0) return false;
    char buf[4096];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }

  int fd_;
  bool connected_ = false;
  std::string in_;
};

// A gate a handler waits at until the test opens it.
class Gate {
 public:
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

// The delayq servers' subscription routes, as far as an endpoint sees them:
// PUT and DELETE answered 200 (or what the test sets), each recorded with
// the endpoint's clock's monotonic time at its arrival.
class FakeFreeRegistry {
 public:
  explicit FakeFreeRegistry(std::shared_ptr<Clock> clock = nullptr) : clock_(std::move(clock)) {
    receiver_.SetAnswer([this](const ReceivedRequest& req) {
      std::lock_guard<std::mutex> l(mu_);
      calls_.push_back({req, clock_ ? clock_->MonotonicMs() : 0});
      if (req.method == "PUT" && put_status_ != 200) {
        return ReceiverAnswer{put_status_, {}, put_body_};
      }
      return ReceiverAnswer{200, {}, "{}"};
    });
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(receiver_.port()); }
  void AnswerPuts(int status, std::string body = {}) {
    std::lock_guard<std::mutex> l(mu_);
    put_status_ = status;
    put_body_ = std::move(body);
  }
  struct Call {
    ReceivedRequest req;
    int64_t mono_ms;
  };
  std::vector<Call> calls(const std::string& method) const {
    std::lock_guard<std::mutex> l(mu_);
    std::vector<Call> out;
    for (const Call& c : calls_) {
      if (c.req.method == method) out.push_back(c);
    }
    return out;
  }
  bool WaitCalls(const std::string& method, size_t n) const {
    return PollUntil([&] { return calls(method).size() >= n; }, milliseconds(10'000));
  }

 private:
  std::shared_ptr<Clock> clock_;
  HttpReceiver receiver_;
  mutable std::mutex mu_;
  std::vector<Call> calls_;
  int put_status_ = 200;
  std::string put_body_;
};

EndpointOptions Options(const FakeFreeRegistry& registry) {
  EndpointOptions o;
  o.servers = registry.address();
  o.name = "orders";
  o.threads = 2;
  return o;
}

std::unique_ptr<Endpoint> Make(EndpointOptions options) {
  auto e = Endpoint::Create(std::move(options));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

// ---------------------------------------------------------------- the HTTP side

class EndpointHttp : public ::testing::Test {
 protected:
  void StartWith(EndpointOptions options) {
    endpoint_ = Make(std::move(options));
    ASSERT_NE(endpoint_, nullptr);
    ASSERT_TRUE(endpoint_
                    ->Handle("order.close",
                             [this](const Delivery& d) {
                               {
                                 std::lock_guard<std::mutex> l(mu_);
                                 seen_.push_back(d);
                               }
                               if (d.body == "retry") return Outcome::Retry("payment service busy");
                               if (d.body == "retry-in")
                                 return Outcome::RetryIn(1500, "come back later");
                               if (d.body == "retry-in-0") return Outcome::RetryIn(0, "at once");
                               if (d.body == "bury") return Outcome::Bury("cannot parse the order");
                               if (d.body == "throw") throw std::runtime_error("database down");
                               if (d.body == "block") gate_.Wait();
                               return Outcome::Success();
                             })
                    .ok());
    ASSERT_TRUE(endpoint_->Start().ok());
  }
  void SetUp() override { StartWith(Options(registry_)); }
  std::vector<Delivery> seen() {
    std::lock_guard<std::mutex> l(mu_);
    return seen_;
  }
  int port() const { return PortOf(endpoint_->url()); }
  std::string Job(const std::string& body) {
    return R"({"id":"j1","topic":"order.close","body":")" + body + R"(","attempts":1})";
  }

  FakeFreeRegistry registry_;
  Gate gate_;
  std::mutex mu_;
  std::vector<Delivery> seen_;
  std::unique_ptr<Endpoint> endpoint_;
};

TEST_F(EndpointHttp, SuccessAnswers200AndTheHandlerGetsTheJobAsADelivery) {
  Client c(port());
  Reply r = c.Post(kJob);
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(seen().size(), 1u);
  const Delivery d = seen()[0];
  EXPECT_EQ(d.id, "order-1001");
  EXPECT_EQ(d.topic, "order.close");
  EXPECT_EQ(d.body, R"({"order":1001})");
  EXPECT_EQ(d.attempts, 2u);
  EXPECT_EQ(d.ttr_ms, 60000u);
  EXPECT_EQ(d.priority, 7u);
  EXPECT_EQ(d.run_at_ms, 1700000000000);
  EXPECT_EQ(d.reserved_until_ms, 1700000060000);
  EXPECT_EQ(d.max_attempts, 5u);
  EXPECT_EQ(d.receipt, "");
  EXPECT_EQ(endpoint_->Stats().succeeded, 1u);
  EXPECT_EQ(endpoint_->Stats().requests, 1u);
}

TEST_F(EndpointHttp, BodyBase64IsDecoded) {
  Client c(port());
  const std::string bytes("\xff\x00\x01", 3);
  Reply r = c.Post(R"({"id":"b","topic":"order.close","body_base64":")" +
                   codec::Base64Encode(bytes) + R"("})");
  EXPECT_EQ(r.status, 200);
  ASSERT_EQ(seen().size(), 1u);
  EXPECT_EQ(seen()[0].body, bytes);
}

TEST_F(EndpointHttp, RetryAnswers500WithTheErrorAsBody) {
  Client c(port());
  Reply r = c.Post(Job("retry"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "payment service busy");
  EXPECT_EQ(r.headers.count("delayq-outcome"), 0u);
  EXPECT_EQ(r.headers.count("retry-after"), 0u);
  EXPECT_EQ(endpoint_->Stats().retried, 1u);
}

TEST_F(EndpointHttp, RetryInAnswers503WithRetryAfterInWholeSecondsRoundedUp) {
  Client c(port());
  Reply r = c.Post(Job("retry-in"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["retry-after"], "2");  // 1500 ms
  EXPECT_EQ(r.body, "come back later");
  Reply now = c.Post(Job("retry-in-0"));
  EXPECT_EQ(now.status, 503);
  EXPECT_EQ(now.headers["retry-after"], "0");
  EXPECT_EQ(endpoint_->Stats().retried, 2u);
  EXPECT_EQ(endpoint_->Stats().busy, 0u);
}

TEST_F(EndpointHttp, BuryAnswers500WithTheBuryHeaderAndTheReason) {
  Client c(port());
  Reply r = c.Post(Job("bury"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.headers["delayq-outcome"], "bury");
  EXPECT_EQ(r.body, "cannot parse the order");
  EXPECT_EQ(endpoint_->Stats().buried, 1u);
}

TEST_F(EndpointHttp, AnExceptionAnswersAsRetryWithItsWhat) {
  Client c(port());
  Reply r = c.Post(Job("throw"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "database down");
  EXPECT_EQ(r.headers.count("delayq-outcome"), 0u);
  EXPECT_EQ(endpoint_->Stats().retried, 1u);
}

TEST_F(EndpointHttp, UnknownTopicAnswers500SoAnotherInstanceMayTakeIt) {
  Client c(port());
  Reply r = c.Post(JobFor("invoice.send"));
  EXPECT_EQ(r.status, 500);
  EXPECT_EQ(r.body, "no handler for topic invoice.send");
  EXPECT_TRUE(seen().empty());
  EXPECT_EQ(endpoint_->Stats().errors, 1u);
}

TEST_F(EndpointHttp, ABodyThatIsNotAJobAnswers400NamingWhatIsWrong) {
  Client c(port());
  EXPECT_EQ(c.Post("not json").status, 400);
  Reply no_id = c.Post(R"({"topic":"order.close"})");
  EXPECT_EQ(no_id.status, 400);
  EXPECT_EQ(no_id.body, "id: required");
  Reply bad = c.Post(R"({"id":"a","topic":"order.close","attempts":-1})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("attempts"), std::string::npos) << bad.body;
  EXPECT_TRUE(seen().empty());
}

TEST_F(EndpointHttp, OneKeepAliveConnectionCarriesManyRequests) {
  Client c(port());
  for (int i = 0; i < 20; ++i) ASSERT_EQ(c.Post(Job("ok")).status, 200) << i;
  EXPECT_EQ(endpoint_->Stats().succeeded, 20u);
}

TEST_F(EndpointHttp, OnlyPostIsAccepted) {
  Client c(port());
  c.Send("", {}, "GET");
  Reply r = c.Receive();
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.headers["allow"], "POST");
}

TEST_F(EndpointHttp, MoreRequestsThanThreadsAnswer503RetryAfterOne) {
  // threads = 2: two blocked handlers fill it.
  Client a(port()), b(port()), c(port());
  a.Send(Job("block"));
  b.Send(Job("block"));
  ASSERT_TRUE(PollUntil([&] { return endpoint_->Stats().running == 2; }, milliseconds(10'000)));
  Reply busy = c.Post(Job("ok"));
  EXPECT_EQ(busy.status, 503);
  EXPECT_EQ(busy.headers["retry-after"], "1");
  EXPECT_EQ(endpoint_->Stats().busy, 1u);
  gate_.Open();
  EXPECT_EQ(a.Receive().status, 200);
  EXPECT_EQ(b.Receive().status, 200);
  EXPECT_EQ(c.Post(Job("ok")).status, 200);
}

// ---------------------------------------------------------------- signatures

class EndpointSignatures : public EndpointHttp {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>(1'800'000'000'000);
    EndpointOptions o = Options(registry_);
    o.secrets = {kSecret, other_};
    o.clock = clock_;
    StartWith(o);
  }
  std::vector<std::string> Signed(const std::string& secret, const std::string& body, int64_t ts_s,
                                  const std::string& id = "j1") {
    std::vector<std::string> keys = {*codec::DecodeWebhookSecret(secret)};
    return {"webhook-id: " + id, "webhook-timestamp: " + std::to_string(ts_s),
            "webhook-signature: " + codec::WebhookSignatureHeader(keys, id, ts_s, body)};
  }
  int64_t now_s() const { return clock_->NowMs() / 1000; }

  std::shared_ptr<ManualClock> clock_;
  const std::string other_ = "whsec_" + codec::Base64Encode(std::string(32, '\x2a'));
};

TEST_F(EndpointSignatures, ASignedRequestRunsTheHandler) {
  Client c(port());
  const std::string body = Job("ok");
  EXPECT_EQ(c.Post(body, Signed(kSecret, body, now_s())).status, 200);
  // Either key of a rotation, and a header with several entries.
  EXPECT_EQ(c.Post(body, Signed(other_, body, now_s())).status, 200);
  std::vector<std::string> keys = {std::string(32, 'k'), *codec::DecodeWebhookSecret(kSecret)};
  EXPECT_EQ(c.Post(body, {"webhook-id: j1", "webhook-timestamp: " + std::to_string(now_s()),
                          "webhook-signature: v0,xyz " +
                              codec::WebhookSignatureHeader(keys, "j1", now_s(), body)})
                .status,
            200);
  EXPECT_EQ(seen().size(), 3u);
}

TEST_F(EndpointSignatures, MissingOrWrongSignaturesAnswer401WithoutRunningTheHandler) {
  Client c(port());
  const std::string body = Job("ok");
  EXPECT_EQ(c.Post(body).status, 401);
  const std::string stranger = "whsec_" + codec::Base64Encode(std::string(24, 's'));
  EXPECT_EQ(c.Post(body, Signed(stranger, body, now_s())).status, 401);
  // Signed, then changed on the way: body, id, timestamp.
  EXPECT_EQ(c.Post(Job("okk"), Signed(kSecret, body, now_s())).status, 401);
  std::vector<std::string> h = Signed(kSecret, body, now_s());
  h[0] = "webhook-id: j2";
  EXPECT_EQ(c.Post(body, h).status, 401);
  h = Signed(kSecret, body, now_s());
  h[1] = "webhook-timestamp: " + std::to_string(now_s() + 1);
  EXPECT_EQ(c.Post(body, h).status, 401);
  EXPECT_TRUE(seen().empty());
  EXPECT_EQ(endpoint_->Stats().unauthorized, 5u);
}

TEST_F(EndpointSignatures, TimestampsMoreThanFiveMinutesOffAreRefused) {
  Client c(port());
  const std::string body = Job("ok");
  EXPECT_EQ(c.Post(body, Signed(kSecret, body, now_s() - 300)).status, 200);
  EXPECT_EQ(c.Post(body, Signed(kSecret, body, now_s() + 300)).status, 200);
  EXPECT_EQ(c.Post(body, Signed(kSecret, body, now_s() - 301)).status, 401);
  EXPECT_EQ(c.Post(body, Signed(kSecret, body, now_s() + 301)).status, 401);
  // A request replayed later: good when sent, stale 6 minutes on.
  std::vector<std::string> captured = Signed(kSecret, body, now_s());
  clock_->Advance(6 * 60 * 1000);
  EXPECT_EQ(c.Post(body, captured).status, 401);
  EXPECT_EQ(seen().size(), 2u);
}

TEST(WebhookSignature, VerifiesTheStandardWebhooksReferenceVector) {
  // TestWebhookSign of the reference libraries (github.com/standard-webhooks).
  std::vector<std::string> keys = {*codec::DecodeWebhookSecret(kSecret)};
  const std::string payload = R"({"test": 2432232314})";
  EXPECT_TRUE(codec::WebhookSignatureMatches(keys, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                                             payload,
                                             "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
  EXPECT_FALSE(codec::WebhookSignatureMatches(keys, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                                              payload,
                                              "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
  EXPECT_FALSE(codec::WebhookSignatureMatches({}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                                              payload,
                                              "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
}

// ---------------------------------------------------------------- registration

Handler Ok() {
  return [](const Delivery&) { return Outcome::Success(); };
}

TEST(EndpointRegistration, StartPutsTheSubscriptionWithTheToken) {
  FakeFreeRegistry registry;
  EndpointOptions o = Options(registry);
  o.token = "s3cret";
  o.threads = 3;
  o.ttl_ms = 9000;
  o.timeout_ms = 2000;
  o.secrets = {kSecret};
  o.retry = {500, 60'000, 4};
  auto e = Make(o);
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  ASSERT_TRUE(e->Handle("order.cancel", Ok()).ok());
  ASSERT_TRUE(e->Start().ok());
  auto puts = registry.calls("PUT");
  ASSERT_EQ(puts.size(), 1u);  // the first one before Start returns
  const ReceivedRequest& put = puts[0].req;
  EXPECT_EQ(put.path, "/v1/subscriptions/orders");
  EXPECT_EQ(put.headers.at("authorization"), "Bearer s3cret");
  EXPECT_EQ(put.headers.at("content-type"), "application/json");
  EXPECT_EQ(put.body, R"({"topics":["order.cancel","order.close"],"url":")" + e->url() +
                          R"(","concurrency":3,"ttl_ms":9000,"timeout_ms":2000,"secrets":[")" +
                          kSecret +
                          R"("],"retry":{"min_backoff_ms":500,"max_backoff_ms":60000,)"
                          R"("max_doublings":4}})");
  EXPECT_EQ(e->url(), "http://127.0.0.1:" + std::to_string(PortOf(e->url())) + "/");
  EXPECT_EQ(e->Stats().registrations, 1u);
}

TEST(EndpointRegistration, RenewsEveryThirdOfTheTtlOnTheClock) {
  auto clock = std::make_shared<ManualClock>();
  FakeFreeRegistry registry(clock);
  EndpointOptions o = Options(registry);
  o.ttl_ms = 3000;
  o.clock = clock;
  auto e = Make(o);
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  ASSERT_TRUE(e->Start().ok());
  ASSERT_EQ(registry.calls("PUT").size(), 1u);
  clock->Advance(999);
  clock->Advance(1);
  ASSERT_TRUE(registry.WaitCalls("PUT", 2));
  clock->Advance(1000);
  ASSERT_TRUE(registry.WaitCalls("PUT", 3));
  auto puts = registry.calls("PUT");
  EXPECT_EQ(puts[0].mono_ms, 0);
  EXPECT_EQ(puts[1].mono_ms, 1000);
  EXPECT_EQ(puts[2].mono_ms, 2000);
  EXPECT_EQ(puts[1].req.body, puts[0].req.body);
  EXPECT_TRUE(PollUntil([&] { return e->Stats().registrations == 3; }, milliseconds(10'000)));
}

TEST(EndpointRegistration, AFailedRenewalIsRetriedWithBackoffAndNeverFatal) {
  auto clock = std::make_shared<ManualClock>();
  FakeFreeRegistry registry(clock);
  EndpointOptions o = Options(registry);
  o.ttl_ms = 3000;
  o.clock = clock;
  auto e = Make(o);
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  ASSERT_TRUE(e->Start().ok());
  registry.AnswerPuts(500, R"({"error":{"code":"internal","message":"store down"}})");
  clock->Advance(1000);
  ASSERT_TRUE(registry.WaitCalls("PUT", 2));
  ASSERT_TRUE(
      PollUntil([&] { return e->Stats().registration_failures == 1; }, milliseconds(10'000)));
  EXPECT_NE(e->Stats().last_registration_error.find("HTTP 500: store down"), std::string::npos)
      << e->Stats().last_registration_error;
  clock->Advance(100);  // 100 ms after the failure
  ASSERT_TRUE(registry.WaitCalls("PUT", 3));
  ASSERT_TRUE(
      PollUntil([&] { return e->Stats().registration_failures == 2; }, milliseconds(10'000)));
  registry.AnswerPuts(200);
  clock->Advance(200);  // then 200 ms
  ASSERT_TRUE(registry.WaitCalls("PUT", 4));
  ASSERT_TRUE(PollUntil([&] { return e->Stats().registrations == 2; }, milliseconds(10'000)));
  clock->Advance(1000);  // back to every ttl / 3
  ASSERT_TRUE(registry.WaitCalls("PUT", 5));
  auto puts = registry.calls("PUT");
  EXPECT_EQ(puts[1].mono_ms, 1000);
  EXPECT_EQ(puts[2].mono_ms, 1100);
  EXPECT_EQ(puts[3].mono_ms, 1300);
  EXPECT_EQ(puts[4].mono_ms, 2300);
  // Still serving all along.
  Client c(PortOf(e->url()));
  EXPECT_EQ(c.Post(JobFor("order.close")).status, 200);
}

TEST(EndpointRegistration, GoesToTheFirstServerThatAnswers) {
  FakeFreeRegistry registry;
  EndpointOptions o = Options(registry);
  o.servers = "127.0.0.1:" + std::to_string(FreePort()) + ", " + registry.address();
  auto e = Make(o);
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  ASSERT_TRUE(e->Start().ok());
  EXPECT_EQ(registry.calls("PUT").size(), 1u);
  EXPECT_EQ(e->Stats().registrations, 1u);
  EXPECT_EQ(e->Stats().registration_failures, 0u);
}

TEST(EndpointRegistration, StartsWhenNoServerAnswersAndKeepsTrying) {
  EndpointOptions o;
  o.servers = "127.0.0.1:" + std::to_string(FreePort());
  o.name = "orders";
  auto e = Make(o);
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  ASSERT_TRUE(e->Start().ok());
  EXPECT_GE(e->Stats().registration_failures, 1u);
  EXPECT_NE(e->Stats().last_registration_error.find("127.0.0.1:"), std::string::npos);
  Client c(PortOf(e->url()));
  EXPECT_EQ(c.Post(JobFor("order.close")).status, 200);
  e->Stop(0);
}

TEST(EndpointRegistration, ARefusedFirstRegistrationFailsStart) {
  FakeFreeRegistry registry;
  registry.AnswerPuts(400, R"({"error":{"code":"invalid_argument","message":"url: bad"}})");
  auto e = Make(Options(registry));
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  Status st = e->Start();
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("HTTP 400: url: bad"), std::string::npos) << st.message();
  // No longer listening.
  Client c(PortOf(e->url()));
  EXPECT_FALSE(c.connected());

  FakeFreeRegistry locked;
  locked.AnswerPuts(401, R"({"error":{"code":"unauthorized","message":"missing token"}})");
  auto e2 = Make(Options(locked));
  ASSERT_TRUE(e2->Handle("order.close", Ok()).ok());
  EXPECT_EQ(e2->Start().code(), Code::kUnauthorized);
}

TEST(EndpointRegistration, StopDeletesTheInstanceBeforeTheDrainEnds) {
  FakeFreeRegistry registry;
  Gate gate;
  auto e = Make(Options(registry));
  ASSERT_TRUE(e->Handle("order.close", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  ASSERT_TRUE(e->Start().ok());
  Client running(PortOf(e->url())), late(PortOf(e->url()));
  running.Send(JobFor("order.close"));
  ASSERT_TRUE(PollUntil([&] { return e->Stats().running == 1; }, milliseconds(10'000)));
  auto stopped = std::async(std::launch::async, [&] { e->Stop(60'000); });
  ASSERT_TRUE(registry.WaitCalls("DELETE", 1));
  auto deletes = registry.calls("DELETE");
  EXPECT_EQ(deletes[0].req.path, "/v1/subscriptions/orders?url=http%3A%2F%2F127.0.0.1%3A" +
                                     std::to_string(PortOf(e->url())) + "%2F");
  // Draining: the handler still runs, Stop waits for it, and a request that
  // comes now is sent elsewhere.
  EXPECT_EQ(stopped.wait_for(milliseconds(0)), std::future_status::timeout);
  Reply gone = late.Post(JobFor("order.close", "j2"));
  EXPECT_EQ(gone.status, 410);
  gate.Open();
  EXPECT_EQ(running.Receive().status, 200);
  stopped.get();
  EXPECT_EQ(e->Stats().succeeded, 1u);
  EXPECT_EQ(registry.calls("PUT").size(), 1u);
}

TEST(EndpointRegistration, TheDrainEndsOnTheClockAndClosesTheConnection) {
  auto clock = std::make_shared<ManualClock>();
  FakeFreeRegistry registry(clock);
  Gate gate;
  EndpointOptions o = Options(registry);
  o.clock = clock;
  auto e = Make(o);
  ASSERT_TRUE(e->Handle("order.close", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  ASSERT_TRUE(e->Start().ok());
  Client running(PortOf(e->url()));
  running.Send(JobFor("order.close"));
  ASSERT_TRUE(PollUntil([&] { return e->Stats().running == 1; }, milliseconds(10'000)));
  auto stopped = std::async(std::launch::async, [&] { e->Stop(5000); });
  ASSERT_TRUE(registry.WaitCalls("DELETE", 1));
  clock->Advance(4999);
  EXPECT_EQ(stopped.wait_for(milliseconds(0)), std::future_status::timeout);
  clock->Advance(1);
  stopped.get();
  // The server sees the connection end without an answer (it releases the
  // job); the handler, abandoned, ends later on its own thread.
  EXPECT_EQ(running.Receive().status, 0);
  gate.Open();
}

// ---------------------------------------------------------------- options

TEST(EndpointCreate, CreateRefusesBadOptionsNamingThem) {
  auto refused = [](EndpointOptions o) {
    o.servers = o.servers.empty() ? "127.0.0.1:7700" : o.servers;
    auto e = Endpoint::Create(o);
    EXPECT_FALSE(e.ok());
    return e.ok() ? std::string() : e.status().message();
  };
  EndpointOptions o;
  o.name = "orders";
  EXPECT_EQ(refused([] {
              EndpointOptions x;
              return x;
            }())
                .rfind("name:", 0),
            0u);
  EndpointOptions threads = o;
  threads.threads = 0;
  EXPECT_EQ(refused(threads).rfind("threads:", 0), 0u);
  EndpointOptions wildcard = o;
  wildcard.listen = "0.0.0.0:0";
  EXPECT_EQ(refused(wildcard).rfind("advertise_url: required", 0), 0u);
  EndpointOptions url = o;
  url.advertise_url = "ftp://x/";
  EXPECT_EQ(refused(url).rfind("advertise_url:", 0), 0u);
  EndpointOptions secret = o;
  secret.secrets = {"nope"};
  EXPECT_EQ(refused(secret), "secrets[0]: must start with \"whsec_\" (Standard Webhooks)");
  EndpointOptions servers = o;
  servers.servers = "localhost";
  EXPECT_EQ(refused(servers).rfind("servers:", 0), 0u);
  EndpointOptions ttl = o;
  ttl.ttl_ms = 500;
  EXPECT_EQ(refused(ttl).rfind("ttl_ms:", 0), 0u);
  EndpointOptions listen = o;
  listen.listen = "127.0.0.1";
  EXPECT_EQ(refused(listen).rfind("listen:", 0), 0u);
}

TEST(EndpointCreate, TheAdvertisedUrlIsTheOneGivenAndServersComeFromTheEnvironment) {
  FakeFreeRegistry registry;
  ::setenv("DELAYQ_HTTP", registry.address().c_str(), 1);
  EndpointOptions o;
  o.name = "orders";
  o.listen = "0.0.0.0:0";
  o.advertise_url = "http://orders-7.internal:8080/delayq";
  auto e = Make(o);
  ::unsetenv("DELAYQ_HTTP");
  EXPECT_EQ(e->url(), "http://orders-7.internal:8080/delayq");
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  ASSERT_TRUE(e->Start().ok());
  ASSERT_EQ(registry.calls("PUT").size(), 1u);
  EXPECT_NE(
      registry.calls("PUT")[0].req.body.find(R"("url":"http://orders-7.internal:8080/delayq")"),
      std::string::npos);
}

TEST(EndpointCreate, HandleRefusesBadTopicsDuplicatesAndLateCalls) {
  FakeFreeRegistry registry;
  auto e = Make(Options(registry));
  EXPECT_EQ(e->Handle("bad topic", Ok()).code(), Code::kInvalidArgument);
  EXPECT_EQ(e->Handle("order.close", nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(e->Start().code(), Code::kInvalidArgument);  // no handlers
  ASSERT_TRUE(e->Handle("order.close", Ok()).ok());
  EXPECT_EQ(e->Handle("order.close", Ok()).code(), Code::kInvalidArgument);
  ASSERT_TRUE(e->Start().ok());
  EXPECT_EQ(e->Handle("order.open", Ok()).code(), Code::kInvalidArgument);
  EXPECT_EQ(e->Start().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace delayq
