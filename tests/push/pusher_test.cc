// The pusher in-process: a real memory store on a ManualClock, driven by a
// real net::EventLoop on a thread of the test (as `delayq serve` drives it),
// POSTing over real sockets to a real receiver (testing/http_receiver.h).
// The queue's time is the manual clock's, so "never early" and the backoff
// are checked to the millisecond; only HTTP timeouts run on real time.
#include "push/pusher.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "delayq/queue.h"
#include "net/event_loop.h"
#include "queue/open.h"
#include "server/queue_on_loop.h"
#include "testing/http_receiver.h"
#include "testing/poll.h"

namespace delayq::push {
namespace {

using namespace std::chrono_literals;
using testing::HttpReceiver;
using testing::ReceivedRequest;
using testing::ReceiverAnswer;

constexpr auto kWait = 10s;

class PusherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    clock_ = std::make_shared<ManualClock>();
    QueueOptions qo;
    qo.store = StoreKind::kMemory;
    qo.clock = clock_;
    OpenOptions oo;
    oo.caller_loop = true;
    auto q = OpenServingQueue(qo, oo);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    queue_ = std::move(*q);
    auto loop = net::EventLoop::Create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    auto on_loop = server::QueueOnLoop::Attach(loop_.get(), queue_.get());
    ASSERT_TRUE(on_loop.ok());
    on_loop_ = std::move(*on_loop);
    PusherOptions po;
    po.clock = clock_;
    po.refresh_ms = 50;
    po.reserve_wait_ms = 200;
    auto pusher = Pusher::Create(loop_.get(), queue_.get(), po);
    ASSERT_TRUE(pusher.ok()) << pusher.status().ToString();
    pusher_ = std::move(*pusher);
    thread_ = std::thread([this] { loop_->Run(); });
    OnLoop([this] { pusher_->Start(); });
  }

  void TearDown() override {
    if (pusher_ != nullptr) OnLoop([this] { pusher_.reset(); });
    if (thread_.joinable()) {
      loop_->Stop();
      thread_.join();
    }
    on_loop_.reset();
  }

  // Runs fn on the loop thread and waits for it.
  void OnLoop(std::function<void()> fn) {
    std::promise<void> done;
    loop_->Post([&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  Subscription Sub(const std::string& url, const std::string& topic = "order.close") {
    Subscription s;
    s.name = "orders";
    s.url = url;
    s.topics = {topic};
    s.retry.min_backoff_ms = 1000;
    s.retry.max_backoff_ms = 60'000;
    s.retry.max_doublings = 3;
    return s;
  }

  Subscription Put(const Subscription& s) {
    std::promise<Result<Subscription>> got;
    OnLoop([&] { pusher_->Put(s, [&](Result<Subscription> r) { got.set_value(std::move(r)); }); });
    Result<Subscription> r = got.get_future().get();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Subscription{};
  }

  std::vector<InstanceView> Describe(const std::string& name) {
    std::promise<Result<std::vector<InstanceView>>> got;
    OnLoop([&] {
      pusher_->Describe(name,
                        [&](Result<std::vector<InstanceView>> r) { got.set_value(std::move(r)); });
    });
    auto r = got.get_future().get();
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : std::vector<InstanceView>{};
  }

  std::string AddJob(const std::string& id, int64_t delay_ms = 0, uint32_t max_attempts = 0,
                     const std::string& topic = "order.close") {
    JobSpec spec;
    spec.topic = topic;
    spec.id = id;
    spec.body = R"({"order":42})";
    spec.delay_ms = delay_ms;
    spec.max_attempts = max_attempts;
    Result<AddResult> r = Result<AddResult>(Status::Ok());
    OnLoop([&] { r = queue_->Add(spec); });
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return id;
  }

  Result<JobInfo> Get(const std::string& id) {
    Result<JobInfo> r = Result<JobInfo>(Status::Ok());
    OnLoop([&] { r = queue_->Get(id); });
    return r;
  }

  // Advances the manual clock on the loop thread (the queue's timers run there).
  void Advance(int64_t ms) {
    OnLoop([&] { clock_->Advance(ms); });
  }

  bool WaitForState(const std::string& id, JobState state) {
    return PollUntil(
        [&] {
          auto j = Get(id);
          return j.ok() && j->state == state;
        },
        kWait);
  }

  std::shared_ptr<ManualClock> clock_;
  std::unique_ptr<ServingQueue> queue_;
  std::unique_ptr<net::EventLoop> loop_;
  std::unique_ptr<server::QueueOnLoop> on_loop_;
  std::unique_ptr<Pusher> pusher_;
  std::thread thread_;
};

TEST_F(PusherTest, A2xxFinishesTheJobAndTheBodyIsTheJobWithoutItsReceipt) {
  HttpReceiver receiver;
  Put(Sub(receiver.url("/hooks/close")));
  AddJob("order-1");
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 1; }, kWait));
  ASSERT_TRUE(PollUntil([&] { return Get("order-1").status().code() == Code::kNotFound; }, kWait));
  ReceivedRequest req = receiver.requests()[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.path, "/hooks/close");
  EXPECT_EQ(req.headers["content-type"], "application/json");
  EXPECT_EQ(req.headers["webhook-id"], "order-1");
  EXPECT_EQ(req.headers["webhook-timestamp"], std::to_string(clock_->NowMs() / 1000));
  EXPECT_EQ(req.headers.count("webhook-signature"), 0u);  // no secret, no signature
  EXPECT_EQ(req.headers["delayq-attempt"], "1");
  EXPECT_NE(req.body.find(R"("id":"order-1")"), std::string::npos) << req.body;
  EXPECT_NE(req.body.find(R"("topic":"order.close")"), std::string::npos) << req.body;
  EXPECT_NE(req.body.find(R"("body":"{\"order\":42}")"), std::string::npos) << req.body;
  EXPECT_NE(req.body.find(R"("attempts":1)"), std::string::npos) << req.body;
  EXPECT_EQ(req.body.find("receipt"), std::string::npos) << req.body;
  auto views = Describe("orders");
  ASSERT_EQ(views.size(), 1u);
  EXPECT_TRUE(PollUntil([&] { return Describe("orders")[0].figures.delivered == 1; }, kWait));
}

TEST_F(PusherTest, AJobIsPushedAtItsRunAtAndNeverBefore) {
  HttpReceiver receiver;
  Put(Sub(receiver.url()));
  AddJob("later", 10'000);
  Advance(9'999);
  // A millisecond before its time it cannot be reserved, so nothing was sent.
  EXPECT_EQ(Get("later")->state, JobState::kDelayed);
  EXPECT_EQ(receiver.count(), 0u);
  Advance(1);
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 1; }, kWait));
}

TEST_F(PusherTest, A500ReleasesWithTheBackoffAndKeepsTheError) {
  HttpReceiver receiver;
  receiver.SetAnswer([](const ReceivedRequest&) { return ReceiverAnswer{500, {}, "db down"}; });
  Put(Sub(receiver.url()));
  AddJob("retry-me");
  ASSERT_TRUE(WaitForState("retry-me", JobState::kDelayed));
  auto job = Get("retry-me");
  // The first retry waits exactly min_backoff_ms: jitter never goes below it.
  EXPECT_EQ(job->run_at_ms - clock_->NowMs(), 1000);
  EXPECT_NE(job->last_error.find("HTTP 500: db down"), std::string::npos) << job->last_error;
  EXPECT_EQ(job->attempts, 1u);
  Advance(1000);
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 2; }, kWait));
  ASSERT_TRUE(PollUntil(
      [&] {
        auto j = Get("retry-me");
        return j.ok() && j->state == JobState::kDelayed && j->attempts == 2;
      },
      kWait));
  // The second: doubled (2000), less up to a fifth of jitter.
  int64_t wait = Get("retry-me")->run_at_ms - clock_->NowMs();
  EXPECT_GE(wait, 1600);
  EXPECT_LE(wait, 2000);
  EXPECT_TRUE(PollUntil([&] { return Describe("orders")[0].figures.failed == 2; }, kWait));
  EXPECT_NE(Describe("orders")[0].figures.last_error.find("HTTP 500"), std::string::npos);
}

TEST_F(PusherTest, A429WithRetryAfterWaitsThatLongCappedAtTheMaximum) {
  HttpReceiver receiver;
  receiver.SetAnswer([](const ReceivedRequest&) {
    return ReceiverAnswer{429, {{"Retry-After", "7"}}, ""};
  });
  Put(Sub(receiver.url()));
  AddJob("slow-down");
  ASSERT_TRUE(WaitForState("slow-down", JobState::kDelayed));
  EXPECT_EQ(Get("slow-down")->run_at_ms - clock_->NowMs(), 7000);

  receiver.SetAnswer([](const ReceivedRequest&) {
    return ReceiverAnswer{503, {{"Retry-After", "86400"}}, ""};
  });
  Advance(7000);
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 2; }, kWait));
  ASSERT_TRUE(PollUntil(
      [&] {
        return Get("slow-down")->attempts == 2 && Get("slow-down")->state == JobState::kDelayed;
      },
      kWait));
  EXPECT_EQ(Get("slow-down")->run_at_ms - clock_->NowMs(), 60'000);  // max_backoff_ms
}

TEST_F(PusherTest, UsingUpMaxAttemptsBuriesTheJob) {
  HttpReceiver receiver;
  receiver.SetAnswer([](const ReceivedRequest&) { return ReceiverAnswer{500, {}, ""}; });
  Put(Sub(receiver.url()));
  AddJob("dead-letter", 0, /*max_attempts=*/1);
  ASSERT_TRUE(WaitForState("dead-letter", JobState::kBuried));
  EXPECT_NE(Get("dead-letter")->last_error.find("HTTP 500"), std::string::npos);
}

TEST_F(PusherTest, ARefusedConnectionReleasesTheJob) {
  // A port nobody listens on: bind one, note it, close it.
  int port;
  {
    HttpReceiver gone;
    port = gone.port();
  }
  Put(Sub("http://127.0.0.1:" + std::to_string(port) + "/"));
  AddJob("nobody-home");
  ASSERT_TRUE(WaitForState("nobody-home", JobState::kDelayed));
  auto job = Get("nobody-home");
  EXPECT_EQ(job->attempts, 1u);
  EXPECT_NE(job->last_error.find("refused"), std::string::npos) << job->last_error;
}

TEST_F(PusherTest, ATimeoutReleasesTheJobAndAHungReceiverHoldsOnlyItsSlots) {
  HttpReceiver hung;
  hung.SetAnswer([](const ReceivedRequest&) {
    ReceiverAnswer a;
    a.hang = true;
    return a;
  });
  HttpReceiver fine;
  Subscription slow = Sub(hung.url(), "slow.topic");
  slow.name = "slow";
  slow.timeout_ms = 300;
  slow.concurrency = 2;
  Put(slow);
  Subscription fast = Sub(fine.url(), "fast.topic");
  fast.name = "fast";
  Put(fast);
  for (int i = 0; i < 5; ++i) AddJob("s" + std::to_string(i), 0, 0, "slow.topic");
  for (int i = 0; i < 20; ++i) AddJob("f" + std::to_string(i), 0, 0, "fast.topic");
  // The hung one never holds more than its two slots; the other one's jobs
  // all go through meanwhile.
  ASSERT_TRUE(PollUntil([&] { return fine.count() == 20; }, kWait));
  EXPECT_LE(hung.max_active(), 2);
  ASSERT_TRUE(PollUntil(
      [&] {
        return Get("s0")->state == JobState::kDelayed || Get("s1")->state == JobState::kDelayed;
      },
      kWait));
  for (const char* id : {"s0", "s1"}) {
    auto j = Get(id);
    if (j->state == JobState::kDelayed) {
      EXPECT_NE(j->last_error.find("timed out"), std::string::npos) << j->last_error;
    }
  }
}

// A pushed job is reserved for its request's timeout and a second, not its
// own TTR: a server that dies mid-request leaves it for a minute, not ten.
// The receiver hangs (the request runs on real time); the reservation runs
// on the manual clock, which stands still until the test moves it.
TEST_F(PusherTest, APushedJobIsReservedForTheRequestsTimeoutNotItsTtr) {
  HttpReceiver hung;
  hung.SetAnswer([](const ReceivedRequest&) {
    ReceiverAnswer a;
    a.hang = true;
    return a;
  });
  Subscription s = Sub(hung.url());
  s.timeout_ms = 60'000;
  s.concurrency = 1;
  Put(s);
  JobSpec spec;
  spec.topic = "order.close";
  spec.id = "long-ttr";
  spec.ttr_ms = 600'000;
  Result<AddResult> added = Result<AddResult>(Status::Ok());
  OnLoop([&] { added = queue_->Add(spec); });
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  ASSERT_TRUE(PollUntil([&] { return hung.count() == 1; }, kWait));
  auto job = Get("long-ttr");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReserved);
  EXPECT_EQ(job->reserved_until_ms - clock_->NowMs(), 61'000);
  EXPECT_EQ(job->ttr_ms, 600'000u) << "the job keeps its own TTR";
  // The server "died": nobody touches, nobody answers. The job is free once
  // the request's time is up, and that attempt counts as a TTR that ran out.
  Advance(60'999);
  EXPECT_EQ(Get("long-ttr")->state, JobState::kReserved);
  Advance(1);
  job = Get("long-ttr");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, JobState::kReady) << "the one slot is still held by the hung request";
  EXPECT_NE(job->last_error.find("ttr of 61000 ms ran out"), std::string::npos) << job->last_error;
}

TEST_F(PusherTest, ConcurrencyBoundsRequestsInFlightAndInstancesShareTheWork) {
  std::atomic<bool> open{false};
  auto gate = [&](const ReceivedRequest&) {
    while (!open.load()) std::this_thread::sleep_for(1ms);
    return ReceiverAnswer{};
  };
  HttpReceiver a;
  HttpReceiver b;
  a.SetAnswer(gate);
  b.SetAnswer(gate);
  Subscription sa = Sub(a.url());
  sa.concurrency = 3;
  Subscription sb = Sub(b.url());
  sb.concurrency = 2;
  Put(sa);
  Put(sb);
  for (int i = 0; i < 30; ++i) AddJob("c" + std::to_string(i));
  ASSERT_TRUE(PollUntil([&] { return a.active() == 3 && b.active() == 2; }, kWait));
  open = true;
  ASSERT_TRUE(PollUntil([&] { return a.count() + b.count() == 30; }, kWait));
  EXPECT_LE(a.max_active(), 3);
  EXPECT_LE(b.max_active(), 2);
  EXPECT_GT(a.count(), 0u);
  EXPECT_GT(b.count(), 0u);
}

TEST_F(PusherTest, A410RemovesTheInstanceAndTheJobGoesElsewhereUncounted) {
  HttpReceiver gone;
  gone.SetAnswer([](const ReceivedRequest&) { return ReceiverAnswer{410, {}, ""}; });
  Put(Sub(gone.url()));
  AddJob("moving");
  ASSERT_TRUE(PollUntil([&] { return gone.count() >= 1; }, kWait));
  ASSERT_TRUE(PollUntil([&] { return Describe("orders").empty(); }, kWait));
  ASSERT_TRUE(WaitForState("moving", JobState::kReady));
  EXPECT_EQ(Get("moving")->attempts, 0u);  // given back, not counted
  HttpReceiver next;
  Put(Sub(next.url()));
  ASSERT_TRUE(PollUntil([&] { return next.count() == 1; }, kWait));
  EXPECT_EQ(next.requests()[0].headers["delayq-attempt"], "1");
}

TEST_F(PusherTest, AnInstanceNotRenewedWithinItsTtlLapsesAndARenewalBringsItBack) {
  HttpReceiver receiver;
  Subscription s = Sub(receiver.url());
  s.ttl_ms = 5000;
  Put(s);
  Advance(5000);
  AddJob("after-lapse");
  ASSERT_TRUE(PollUntil([&] { return Describe("orders").empty(); }, kWait));
  EXPECT_EQ(Get("after-lapse")->state, JobState::kReady);
  EXPECT_EQ(receiver.count(), 0u);
  Put(s);  // renewed
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 1; }, kWait));
}

TEST_F(PusherTest, RatePerSecondSpacesTheStarts) {
  HttpReceiver receiver;
  Subscription s = Sub(receiver.url());
  s.rate_per_s = 2;  // one start per 500 ms of the (manual) clock
  s.concurrency = 50;
  Put(s);
  for (int i = 0; i < 5; ++i) AddJob("r" + std::to_string(i));
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 1; }, kWait));
  Advance(499);
  ASSERT_TRUE(PollUntil(
      [&] { return Get("r1").ok() && Get("r0").status().code() == Code::kNotFound; }, kWait));
  EXPECT_EQ(receiver.count(), 1u);  // nothing more before 500 ms
  Advance(1);
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 2; }, kWait));
  // No credit is saved up while nothing was asked: after a second's pause,
  // one start now and the next 500 ms later, never a burst.
  Advance(1000);
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 3; }, kWait));
  Advance(499);
  ASSERT_TRUE(PollUntil([&] { return Get("r2").status().code() == Code::kNotFound; }, kWait));
  EXPECT_EQ(receiver.count(), 3u);
  Advance(1);
  ASSERT_TRUE(PollUntil([&] { return receiver.count() == 4; }, kWait));
}

TEST_F(PusherTest, StopWaitsForRequestsThenGivesTheRestBackUncounted) {
  HttpReceiver hung;
  hung.SetAnswer([](const ReceivedRequest&) {
    ReceiverAnswer a;
    a.hang = true;
    return a;
  });
  Put(Sub(hung.url()));
  AddJob("in-flight");
  ASSERT_TRUE(PollUntil([&] { return hung.active() == 1; }, kWait));
  std::promise<void> stopped;
  OnLoop([&] { pusher_->Stop(100, [&] { stopped.set_value(); }); });
  ASSERT_EQ(stopped.get_future().wait_for(kWait), std::future_status::ready);
  ASSERT_TRUE(WaitForState("in-flight", JobState::kReady));
  EXPECT_EQ(Get("in-flight")->attempts, 0u);
}

TEST_F(PusherTest, BadSubscriptionsAreRefusedNamingTheField) {
  auto put = [&](Subscription s) {
    std::promise<Result<Subscription>> got;
    OnLoop([&] { pusher_->Put(s, [&](Result<Subscription> r) { got.set_value(std::move(r)); }); });
    return got.get_future().get().status();
  };
  Subscription s = Sub("ftp://example.com/");
  EXPECT_EQ(put(s).message(), "url: scheme must be http or https, not \"ftp\"");
  s = Sub("http://127.0.0.1:1/");
  s.concurrency = 0;
  EXPECT_NE(put(s).message().find("concurrency"), std::string::npos);
  s = Sub("http://127.0.0.1:1/");
  s.secrets = {"not-a-secret"};
  EXPECT_NE(put(s).message().find("secret"), std::string::npos);
  s = Sub("http://127.0.0.1:1/");
  s.retry.max_backoff_ms = 10;
  EXPECT_NE(put(s).message().find("retry.max_backoff_ms"), std::string::npos);
}

}  // namespace
}  // namespace delayq::push
