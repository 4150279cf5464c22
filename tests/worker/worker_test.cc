// The worker runtime (include/delayq/worker.h) over real queues: the
// in-process memory and embedded stores on a ManualClock, where backoff and
// touch times are exact, and the Redis store on a real redis-server. Handlers
// that must stay running block on a Gate the test opens; nothing sleeps to
// let time pass.
#include "delayq/worker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "delayq/clock.h"
#include "delayq/queue.h"
#include "redis/redis_harness.h"
#include "testing/forwarding_queue.h"
#include "testing/poll.h"
#include "worker/faulty_queue.h"

namespace delayq {
namespace {

using std::chrono::seconds;

constexpr auto kWait = seconds(20);  // PollUntil's deadline: only a failing test waits it out

// Handlers wait on it until the test opens it (60 s at most, so a failing
// test still ends).
class Gate {
 public:
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, seconds(60), [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

std::unique_ptr<Queue> OpenMemory(std::shared_ptr<Clock> clock) {
  QueueOptions o;
  o.store = StoreKind::kMemory;
  o.clock = std::move(clock);
  auto q = OpenQueue(o);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

std::string Add(Queue& q, const std::string& topic, const std::string& id, int64_t delay_ms = 0,
                uint32_t ttr_ms = kDefaultTtrMs, uint32_t max_attempts = 0) {
  JobSpec spec;
  spec.topic = topic;
  spec.id = id;
  spec.delay_ms = delay_ms;
  spec.ttr_ms = ttr_ms;
  spec.max_attempts = max_attempts;
  spec.body = "body of " + id;
  auto added = q.Add(spec);
  EXPECT_TRUE(added.ok()) << added.status().ToString();
  return id;
}

JobInfo GetJob(Queue& q, const std::string& id) {
  auto info = q.Get(id);
  EXPECT_TRUE(info.ok()) << id << ": " << info.status().ToString();
  return info.ok() ? *info : JobInfo{};
}

// A worker on `clock` (its touches and Stop's drain follow it).
std::unique_ptr<Worker> NewWorker(Queue& q, std::shared_ptr<Clock> clock,
                                  WorkerOptions options = {}) {
  options.clock = std::move(clock);
  auto w = Worker::Create(q, std::move(options));
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

template <typename F>
bool Eventually(F&& f) {
  return PollUntil(std::forward<F>(f), kWait);
}

uint64_t Waiting(Queue& q, const std::string& topic) {
  auto t = q.Topic(topic);
  return t.ok() ? t->waiting : 0;
}

TEST(BackoffDelayMs, FirstRetryWaitsTheBaseThenGrowsJitteredAndCapped) {
  Backoff b;  // 1 s, x2, 10 min
  EXPECT_EQ(BackoffDelayMs(b, 1, 0.0), 1000);
  EXPECT_EQ(BackoffDelayMs(b, 1, 1.0), 1000);
  EXPECT_EQ(BackoffDelayMs(b, 0, 1.0), 1000);  // read as the first attempt
  EXPECT_EQ(BackoffDelayMs(b, 2, 0.0), 1000);  // d = 2 s, jitter [1 s, 2 s]
  EXPECT_EQ(BackoffDelayMs(b, 2, 0.5), 1500);
  EXPECT_EQ(BackoffDelayMs(b, 2, 1.0), 2000);
  EXPECT_EQ(BackoffDelayMs(b, 5, 0.0), 8000);  // d = 16 s
  EXPECT_EQ(BackoffDelayMs(b, 5, 1.0), 16000);
  EXPECT_EQ(BackoffDelayMs(b, 11, 1.0), 600'000);  // 1024 s, capped at 10 min
  EXPECT_EQ(BackoffDelayMs(b, 11, 0.0), 300'000);
  EXPECT_EQ(BackoffDelayMs(b, 4'000'000'000U, 1.0), 600'000);  // no overflow
  EXPECT_EQ(BackoffDelayMs(b, 3, 7.0), 4000);                  // random clamped to 1
  EXPECT_EQ(BackoffDelayMs(b, 3, -1.0), 2000);                 // ... and to 0
  Backoff small{100, 3.0, 150};
  EXPECT_EQ(BackoffDelayMs(small, 2, 0.0), 100);  // d = 150 (capped), d/2 < base
  EXPECT_EQ(BackoffDelayMs(small, 2, 1.0), 150);
}

// 0 * factor^(n-1) once factor^(n-1) overflows to infinity was NaN, read
// as "past the cap": a zero base waited the cap after ~1024 attempts.
TEST(BackoffDelayMs, AZeroBaseWaitsNothingAtAnyAttempt) {
  Backoff zero{0, 2.0, 600'000};
  EXPECT_EQ(BackoffDelayMs(zero, 1, 1.0), 0);
  EXPECT_EQ(BackoffDelayMs(zero, 1024, 1.0), 0);
  EXPECT_EQ(BackoffDelayMs(zero, 1025, 0.5), 0);
  EXPECT_EQ(BackoffDelayMs(zero, 4'000'000'000U, 1.0), 0);
  Backoff slow{1, 1.0, 10};  // factor 1: never grows, however many attempts
  EXPECT_EQ(BackoffDelayMs(slow, 4'000'000'000U, 1.0), 1);
  Backoff huge{1, 1000.0, kMaxDelayMs};  // overflows at the 104th attempt: capped
  EXPECT_EQ(BackoffDelayMs(huge, 200, 1.0), kMaxDelayMs);
}

TEST(Worker, RefusesBadOptionsAndHandlersNamingWhatIsWrong) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  WorkerOptions bad;
  bad.threads = 0;
  auto w0 = Worker::Create(*q, bad);
  ASSERT_FALSE(w0.ok());
  EXPECT_EQ(w0.status().code(), Code::kInvalidArgument);
  EXPECT_NE(w0.status().message().find("threads"), std::string::npos);

  auto w = NewWorker(*q, clock);
  auto ok = [](const Delivery&) { return Outcome::Success(); };
  EXPECT_EQ(w->Start().code(), Code::kInvalidArgument);  // no handlers
  EXPECT_NE(w->Handle("bad topic!", ok).message().find("topic"), std::string::npos);
  EXPECT_NE(w->Handle("t", nullptr).message().find("handler"), std::string::npos);
  TopicOptions bad_backoff;
  bad_backoff.backoff.factor = 0.5;
  EXPECT_NE(w->Handle("t", ok, bad_backoff).message().find("factor"), std::string::npos);
  bad_backoff.backoff = {1000, 2.0, 10};
  EXPECT_NE(w->Handle("t", ok, bad_backoff).message().find("cap_ms"), std::string::npos);
  ASSERT_TRUE(w->Handle("t", ok).ok());
  EXPECT_NE(w->Handle("t", ok).message().find("already"), std::string::npos);
  ASSERT_TRUE(w->Start().ok());
  EXPECT_EQ(w->Start().code(), Code::kInvalidArgument);
  EXPECT_EQ(w->Handle("u", ok).code(), Code::kInvalidArgument);
}

TEST(Worker, SuccessFinishesTheJobAndAnIdleWorkerHoldsOneWaitingReserve) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  std::mutex mu;
  std::vector<std::string> seen;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery& d) {
                 std::lock_guard<std::mutex> l(mu);
                 seen.push_back(d.id + ":" + d.body);
                 return Outcome::Success();
               }).ok());
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return Waiting(*q, "t") == 1; }));
  Add(*q, "t", "j1");  // pushed to the waiting reserve: the clock does not move
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 1; }));
  EXPECT_EQ(q->Get("j1").status().code(), Code::kNotFound);
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(seen, std::vector<std::string>{"j1:body of j1"});
  }
  ASSERT_TRUE(Eventually([&] { return Waiting(*q, "t") == 1; }));
  WorkerStats s = w->Stats();
  EXPECT_EQ(s.handled, 1u);
  EXPECT_EQ(s.errors, 0u) << s.last_error;
  w->Stop(0);
  EXPECT_EQ(Waiting(*q, "t"), 0u);  // Stop cancelled it
}

// The run_at of each released job, attempts 1..6, at both ends of the jitter.
void ExpectBackoffs(double random, const std::vector<int64_t>& expected) {
  SCOPED_TRACE("random " + std::to_string(random));
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  WorkerOptions options;
  options.random = [random] { return random; };
  auto w = NewWorker(*q, clock, options);
  TopicOptions topic;
  topic.backoff = {1000, 2.0, 10'000};
  ASSERT_TRUE(w->Handle(
                   "t", [](const Delivery&) { return Outcome::Retry("nope"); }, topic)
                  .ok());
  Add(*q, "t", "j");
  ASSERT_TRUE(w->Start().ok());
  for (size_t n = 1; n <= expected.size(); ++n) {
    ASSERT_TRUE(Eventually([&] { return w->Stats().retried == n; })) << "attempt " << n;
    JobInfo info = GetJob(*q, "j");
    EXPECT_EQ(info.state, JobState::kDelayed);
    EXPECT_EQ(info.attempts, n);
    EXPECT_EQ(info.last_error, "nope");
    EXPECT_EQ(info.run_at_ms - clock->NowMs(), expected[n - 1]) << "attempt " << n;
    clock->Advance(expected[n - 1] - 1);  // never early
    EXPECT_EQ(GetJob(*q, "j").state, JobState::kDelayed);
    clock->Advance(1);
  }
  w->Stop(0);
}

TEST(Worker, RetriesBackOffExponentiallyWithJitterNeverBelowTheBase) {
  // base 1 s, x2, cap 10 s: d = 1, 2, 4, 8, 10, 10 s; jittered to [d/2, d], >= 1 s.
  ExpectBackoffs(0.0, {1000, 1000, 2000, 4000, 5000, 5000});
  ExpectBackoffs(1.0, {1000, 2000, 4000, 8000, 10'000, 10'000});
  ExpectBackoffs(0.5, {1000, 1500, 3000, 6000, 7500, 7500});
}

TEST(Worker, AThrownExceptionIsARetryWithItsWhatAsLastError) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) -> Outcome {
                 throw std::runtime_error("database unreachable");
               }).ok());
  Add(*q, "t", "j");
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().retried == 1; }));
  JobInfo info = GetJob(*q, "j");
  EXPECT_EQ(info.state, JobState::kDelayed);
  EXPECT_EQ(info.last_error, "database unreachable");
  EXPECT_EQ(info.run_at_ms, clock->NowMs() + 1000);  // the default backoff's first step
  EXPECT_EQ(info.attempts, 1u);
}

TEST(Worker, RetryInUsesTheHandlersDelay) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) {
                 return Outcome::RetryIn(12'345, "rate limited");
               }).ok());
  Add(*q, "t", "j");
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().retried == 1; }));
  JobInfo info = GetJob(*q, "j");
  EXPECT_EQ(info.run_at_ms, clock->NowMs() + 12'345);
  EXPECT_EQ(info.last_error, "rate limited");
}

TEST(Worker, AJobWhoseMaxAttemptsAreUsedUpIsBuriedByTheQueue) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Retry("again"); }).ok());
  Add(*q, "t", "j", 0, kDefaultTtrMs, /*max_attempts=*/2);
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().retried == 1; }));
  EXPECT_EQ(GetJob(*q, "j").state, JobState::kDelayed);
  EXPECT_EQ(w->Stats().exhausted, 0u);
  clock->Advance(1000);
  ASSERT_TRUE(Eventually([&] { return w->Stats().retried == 2; }));
  JobInfo info = GetJob(*q, "j");
  EXPECT_EQ(info.state, JobState::kBuried);
  EXPECT_EQ(info.attempts, 2u);
  EXPECT_EQ(info.last_error, "again; max_attempts (2) used up");
  EXPECT_EQ(w->Stats().buried, 0u);     // the handler did not bury it
  EXPECT_EQ(w->Stats().exhausted, 1u);  // the queue did
}

TEST(Worker, OnAcknowledgedTellsAReleaseThatBuriedFromOneThatRetries) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  std::mutex mu;
  std::vector<std::pair<uint32_t, bool>> heard;  // attempts, ReleaseBuries
  WorkerOptions wo;
  wo.on_acknowledged = [&](const Delivery& job, Ack::Kind kind, const Status& answer) {
    ASSERT_EQ(kind, Ack::Kind::kRelease);
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(job.max_attempts, 2u);
    std::lock_guard<std::mutex> l(mu);
    heard.emplace_back(job.attempts, ReleaseBuries(job));
  };
  auto w = NewWorker(*q, clock, wo);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Retry("again"); }).ok());
  Add(*q, "t", "j", 0, kDefaultTtrMs, /*max_attempts=*/2);
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().retried == 1; }));
  clock->Advance(1000);
  ASSERT_TRUE(Eventually([&] { return w->Stats().retried == 2; }));
  w->Stop(0);
  std::lock_guard<std::mutex> l(mu);
  EXPECT_EQ(heard, (std::vector<std::pair<uint32_t, bool>>{{1, false}, {2, true}}));
  EXPECT_EQ(GetJob(*q, "j").state, JobState::kBuried);
}

TEST(Worker, BuryBuriesTheJobWithTheReason) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Bury("malformed body"); }).ok());
  Add(*q, "t", "j");
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().buried == 1; }));
  JobInfo info = GetJob(*q, "j");
  EXPECT_EQ(info.state, JobState::kBuried);
  EXPECT_EQ(info.last_error, "malformed body");
}

TEST(Worker, ALongHandlerIsTouchedEveryHalfTtrAndKeepsItsReservation) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  Gate gate;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  const int64_t t0 = clock->NowMs();
  Add(*q, "t", "j", 0, /*ttr_ms=*/10'000);
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().running == 1; }));
  const std::string receipt = GetJob(*q, "j").receipt;
  EXPECT_EQ(GetJob(*q, "j").reserved_until_ms, t0 + 10'000);
  clock->Advance(4999);
  clock->Advance(1);
  ASSERT_TRUE(Eventually([&] { return w->Stats().touched == 1; }));
  // Touched at half the TTR exactly, not before: a full TTR from then.
  EXPECT_EQ(GetJob(*q, "j").reserved_until_ms, t0 + 5000 + 10'000);
  clock->Advance(5000);  // the first TTR is over: the touch kept the job
  ASSERT_TRUE(Eventually([&] { return w->Stats().touched == 2; }));
  JobInfo info = GetJob(*q, "j");
  EXPECT_EQ(info.state, JobState::kReserved);
  EXPECT_EQ(info.receipt, receipt);
  EXPECT_EQ(info.reserved_until_ms, t0 + 10'000 + 10'000);
  EXPECT_EQ(info.attempts, 1u);
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 1; }));
  EXPECT_EQ(q->Get("j").status().code(), Code::kNotFound);
  EXPECT_EQ(w->Stats().errors, 0u) << w->Stats().last_error;
}

// A touch that fails on a transient error (kUnavailable: the queue was out
// of reach) is tried again 100 ms later, then 200 ms, ..., not half a TTR
// later, when the reservation would be gone.
TEST(Worker, AFailedTouchIsRetriedPromptlyWithinTheTtr) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  FaultyQueue q(*real);
  std::atomic<int> fail_touches{2};
  q.set_policy([&](FaultyQueue::Op op, std::string_view) {
    if (op == FaultyQueue::Op::kTouch && fail_touches.fetch_sub(1) > 0) {
      return FaultyQueue::Fault::kFail;
    }
    return FaultyQueue::Fault::kNone;
  });
  auto w = NewWorker(q, clock);
  Gate gate;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  const int64_t t0 = clock->NowMs();
  Add(q, "t", "j", 0, /*ttr_ms=*/10'000);
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().running == 1; }));
  clock->Advance(5000);
  ASSERT_TRUE(Eventually([&] { return q.touch_calls.load() == 1 && w->Stats().errors == 1; }));
  clock->Advance(100);  // the first retry: fails again
  ASSERT_TRUE(Eventually([&] { return q.touch_calls.load() == 2 && w->Stats().errors == 2; }));
  clock->Advance(200);  // the second, 200 ms later: accepted
  ASSERT_TRUE(Eventually([&] { return w->Stats().touched == 1; }));
  EXPECT_EQ(q.touch_calls.load(), 3);
  EXPECT_EQ(GetJob(q, "j").reserved_until_ms, t0 + 5300 + 10'000);
  clock->Advance(5000);  // every half TTR again from the touch that held
  ASSERT_TRUE(Eventually([&] { return w->Stats().touched == 2; }));
  EXPECT_EQ(GetJob(q, "j").reserved_until_ms, t0 + 10'300 + 10'000);
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 1; }));
  EXPECT_EQ(q.Get("j").status().code(), Code::kNotFound);
}

// Only an answer that the delivery is over (not_found here: the job was
// deleted; stale_receipt) ends a job's touches: no retry follows it.
TEST(Worker, ATouchAnsweredNotFoundIsNotRetried) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  FaultyQueue q(*real);
  WorkerOptions options;
  options.threads = 2;
  auto w = NewWorker(q, clock, options);
  Gate gate;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  Add(q, "t", "gone", 0, /*ttr_ms=*/10'000);
  Add(q, "t", "kept", 0, /*ttr_ms=*/10'600);  // touched at 5300: after any retry of "gone"
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().running == 2; }));
  ASSERT_TRUE(q.Delete("gone").ok());
  clock->Advance(5000);
  ASSERT_TRUE(Eventually([&] { return q.touch_calls.load() == 1 && w->Stats().errors == 1; }));
  EXPECT_NE(w->Stats().last_error.find("not_found"), std::string::npos) << w->Stats().last_error;
  clock->Advance(100);
  clock->Advance(200);
  ASSERT_TRUE(Eventually([&] { return w->Stats().touched == 1; }));  // "kept", at 5300
  EXPECT_EQ(q.touch_calls.load(), 2);
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return w->Stats().handled == 2; }));
}

// A job handled while the queue is out of reach keeps its outcome: the ack
// is sent again (100 ms, 200 ms, ... later) until the queue takes it, and
// the job is touched meanwhile so its reservation does not run out.
TEST(Worker, AFailedAcknowledgeIsResentUntilTheQueueTakesIt) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  FaultyQueue q(*real);
  std::atomic<bool> acks_down{true};
  q.set_policy([&](FaultyQueue::Op op, std::string_view) {
    return op == FaultyQueue::Op::kAck && acks_down ? FaultyQueue::Fault::kFail
                                                    : FaultyQueue::Fault::kNone;
  });
  auto w = NewWorker(q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Success(); }).ok());
  const int64_t t0 = clock->NowMs();
  Add(q, "t", "j", 0, /*ttr_ms=*/10'000);
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return q.ack_calls.load() == 1 && w->Stats().errors == 1; }));
  clock->Advance(100);  // resent: refused again
  ASSERT_TRUE(Eventually([&] { return q.ack_calls.load() == 2 && w->Stats().errors == 2; }));
  clock->Advance(4900);  // half the TTR: touched while its outcome waits
  ASSERT_TRUE(Eventually([&] { return w->Stats().touched == 1; }));
  EXPECT_EQ(GetJob(q, "j").reserved_until_ms, t0 + 5000 + 10'000);
  EXPECT_EQ(GetJob(q, "j").state, JobState::kReserved);
  EXPECT_EQ(w->Stats().succeeded, 0u);
  acks_down = false;
  clock->Advance(6000);  // past the first TTR, and past the next resend
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 1; }));
  EXPECT_EQ(q.Get("j").status().code(), Code::kNotFound);
  EXPECT_EQ(w->Stats().handled, 1u);
}

// What `delayq work` logs: the queue's answer to each outcome, once, when it
// is final. A reply lost after the finish was applied: resent, answered
// not_found (the job is gone), and not resent again.
TEST(Worker, OnAcknowledgedGetsTheQueuesFinalAnswerOfEachOutcome) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  FaultyQueue q(*real);
  std::atomic<int> lose{1};
  q.set_policy([&](FaultyQueue::Op op, std::string_view id) {
    return op == FaultyQueue::Op::kAck && id == "lost-reply" && lose.fetch_sub(1) > 0
               ? FaultyQueue::Fault::kLoseReply
               : FaultyQueue::Fault::kNone;
  });
  std::mutex mu;
  std::vector<std::string> answers;
  WorkerOptions options;
  options.threads = 1;
  options.on_acknowledged = [&](const Delivery& d, Ack::Kind kind, const Status& s) {
    std::lock_guard<std::mutex> l(mu);
    answers.push_back(d.id + " " + std::to_string(static_cast<int>(kind)) + " " +
                      (s.ok() ? "ok" : s.ToString()));
  };
  auto w = NewWorker(q, clock, options);
  ASSERT_TRUE(w->Handle("t", [](const Delivery& d) {
                 return d.id == "buried" ? Outcome::Bury("no") : Outcome::Success();
               }).ok());
  Add(q, "t", "lost-reply");
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return q.ack_calls.load() == 1 && w->Stats().errors == 1; }));
  clock->Advance(100);
  ASSERT_TRUE(Eventually([&] { return w->Stats().errors == 2; }));
  Add(q, "t", "buried");
  ASSERT_TRUE(Eventually([&] { return w->Stats().buried == 1; }));
  clock->Advance(10'000);
  ASSERT_TRUE(Eventually([&] { return Waiting(q, "t") == 1; }));
  EXPECT_EQ(q.ack_calls.load(), 3);  // not resent after not_found
  EXPECT_EQ(q.Get("lost-reply").status().code(), Code::kNotFound);
  std::lock_guard<std::mutex> l(mu);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].rfind("lost-reply 0 ", 0), 0u) << answers[0];
  EXPECT_NE(answers[0].find("not_found"), std::string::npos) << answers[0];
  EXPECT_EQ(answers[1], "buried 2 ok");
}

// Stop's drain bounds the resends: an outcome the queue has not taken by
// the deadline is given up, counted in errors and reported to
// on_acknowledged with the last error.
TEST(Worker, StopResendsAcksUntilTheDrainDeadlineThenGivesUpCountingIt) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  FaultyQueue q(*real);
  q.set_policy([&](FaultyQueue::Op op, std::string_view) {
    return op == FaultyQueue::Op::kAck ? FaultyQueue::Fault::kFail : FaultyQueue::Fault::kNone;
  });
  std::atomic<int> reported{0};
  std::atomic<bool> unavailable{false};
  WorkerOptions options;
  options.on_acknowledged = [&](const Delivery&, Ack::Kind, const Status& s) {
    unavailable = s.code() == Code::kUnavailable;
    ++reported;
  };
  auto w = NewWorker(q, clock, options);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Success(); }).ok());
  Add(q, "t", "j", 0, /*ttr_ms=*/10'000);
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return q.ack_calls.load() == 1 && w->Stats().errors == 1; }));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    w->Stop(1000);
    stopped = true;
  });
  ASSERT_TRUE(Eventually([&] { return Waiting(q, "t") == 0; }));  // Stop has begun
  clock->Advance(100);
  // Resent in the drain, and refused again.
  ASSERT_TRUE(Eventually([&] { return q.ack_calls.load() == 2 && w->Stats().errors == 2; }));
  EXPECT_FALSE(stopped.load());
  EXPECT_EQ(reported.load(), 0);
  // Past the deadline however late Stop read the clock for it. "Stop has
  // begun" above may be seen before Stop has even read the clock (no reserve
  // was open to withdraw: Waiting is 0 between reserves), and under load
  // Stop may read it only after this Advance too: then its deadline is
  // further on, so the clock moves on a second at a time, still short of the
  // job's 10 s TTR (two earlier flakes: the deadline out of reach).
  clock->Advance(1000);
  for (int i = 0; i < 8 && !PollUntil([&] { return stopped.load(); }, seconds(2)); ++i) {
    clock->Advance(1000);
  }
  EXPECT_TRUE(stopped.load());
  if (!stopped) clock->Advance(60'000);
  stopper.join();
  EXPECT_EQ(reported.load(), 1);
  EXPECT_TRUE(unavailable.load());
  EXPECT_GE(w->Stats().errors, 3u);  // and given up
  EXPECT_NE(w->Stats().last_error.find("unavailable"), std::string::npos) << w->Stats().last_error;
  EXPECT_EQ(GetJob(q, "j").state, JobState::kReserved);  // back after its TTR
}

TEST(Worker, NeverRunsMoreHandlersOfATopicThanItsConcurrency) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  WorkerOptions options;
  options.threads = 4;
  auto w = NewWorker(*q, clock, options);
  Gate gate;
  std::atomic<int> active{0};
  std::atomic<int> most{0};
  TopicOptions two;
  two.concurrency = 2;
  ASSERT_TRUE(w->Handle(
                   "c",
                   [&](const Delivery&) {
                     int now = ++active;
                     int prev = most.load();
                     while (now > prev && !most.compare_exchange_weak(prev, now)) {
                     }
                     gate.Wait();
                     --active;
                     return Outcome::Success();
                   },
                   two)
                  .ok());
  ASSERT_TRUE(w->Handle("d", [](const Delivery&) { return Outcome::Success(); }).ok());
  for (int i = 0; i < 6; ++i) Add(*q, "c", "c" + std::to_string(i));
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return active.load() == 2; }));
  // Four slots, so the batch took four jobs of "c"; two wait for room.
  ASSERT_TRUE(Eventually([&] { return w->Stats().held == 2; }));
  EXPECT_EQ(w->Stats().running, 2u);
  EXPECT_EQ(active.load(), 2);
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 6; }));
  EXPECT_EQ(most.load(), 2);
}

// A Queue that counts the reserves made through it; everything else goes
// straight to the real queue it wraps.
class CountingQueue final : public ForwardingQueue {
 public:
  explicit CountingQueue(Queue& q) : ForwardingQueue(q) {}
  std::atomic<int> reserves{0};
  std::atomic<uint32_t> last_count{0};
  // Acknowledge: the size of each batch, in order; while ack_gate is set,
  // every call waits for it to open (acks_in counts the calls inside).
  Gate* ack_gate = nullptr;
  std::atomic<int> acks_in{0};
  std::vector<size_t> Batches() {
    std::lock_guard<std::mutex> l(mu_);
    return batches_;
  }

  std::vector<Status> Acknowledge(std::span<const Ack> acks) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      batches_.push_back(acks.size());
    }
    ++acks_in;
    if (ack_gate != nullptr) ack_gate->Wait();
    return target().Acknowledge(acks);
  }

  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override {
    ++reserves;
    last_count = req.count;
    return target().ReserveAsync(req, std::move(done));
  }

 private:
  std::mutex mu_;
  std::vector<size_t> batches_;  // GUARDED_BY(mu_)
};

// Answers its first reserves with a given error, then forwards.
class RefusingQueue final : public ForwardingQueue {
 public:
  RefusingQueue(Queue& q, Status refusal, int times)
      : ForwardingQueue(q), refusal_(std::move(refusal)), left_(times) {}
  std::atomic<int> reserves{0};

  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override {
    ++reserves;
    if (left_.fetch_sub(1) > 0) {
      done(refusal_);
      return 0;
    }
    return target().ReserveAsync(req, std::move(done));
  }

 private:
  const Status refusal_;
  std::atomic<int> left_;
};

// A wait that the server's shutdown ended is reserved again at once (the
// client reconnects, to another server if it has one), not after the
// backoff that a store out of reach gets: the clock does not move here.
TEST(Worker, AReserveEndedByTheServersShutdownIsReservedAgainAtOnce) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  RefusingQueue q(*real, Unavailable(std::string(kShuttingDownPrefix) + "the server is stopping"),
                  1);
  auto w = NewWorker(q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Success(); }).ok());
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return q.reserves.load() == 2; }));
  Add(q, "t", "j");
  EXPECT_TRUE(Eventually([&] { return w->Stats().succeeded == 1; }));
  w->Stop(0);
}

// Any other failed reserve waits reserve_retry_ms first.
TEST(Worker, AFailedReserveIsReservedAgainAfterTheRetryDelay) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  RefusingQueue q(*real, Unavailable("redis: none of the Redis addresses given answered"), 1);
  auto w = NewWorker(q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Success(); }).ok());
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().errors == 1; }));
  EXPECT_EQ(q.reserves.load(), 1);
  clock->Advance(100);
  EXPECT_TRUE(Eventually([&] { return q.reserves.load() == 2; }));
  w->Stop(0);
}

TEST(Worker, ReservesOneBatchForAllItsIdleSlots) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  CountingQueue q(*real);
  WorkerOptions options;
  options.threads = 4;
  auto w = NewWorker(q, clock, options);
  Gate gate;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  for (int i = 0; i < 6; ++i) Add(q, "t", "j" + std::to_string(i));
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().running == 4; }));
  EXPECT_EQ(q.reserves.load(), 1);  // one call for the four idle slots
  EXPECT_EQ(q.last_count.load(), 4u);
  EXPECT_EQ(GetJob(q, "j4").state, JobState::kReady);  // never more than its threads
  gate.Open();
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 6; }));
  ASSERT_TRUE(Eventually([&] { return Waiting(q, "t") == 1; }));
  EXPECT_EQ(w->Stats().reserves, static_cast<uint64_t>(q.reserves.load()));
}

// While one thread waits for the queue to take an acknowledgment, the
// others go on: their outcomes wait for the next batch, their slots take
// new jobs at once.
TEST(Worker, OutcomesReadyWhileAnAckIsUnderWayGoTogetherInTheNextBatch) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  CountingQueue q(*real);
  Gate acks_open, others_go;
  q.ack_gate = &acks_open;
  WorkerOptions options;
  options.threads = 4;
  auto w = NewWorker(q, clock, options);
  ASSERT_TRUE(w->Handle("t", [&](const Delivery& d) {
                 if (d.id != "j0") others_go.Wait();
                 return Outcome::Success();
               }).ok());
  for (int i = 0; i < 4; ++i) Add(q, "t", "j" + std::to_string(i));
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return q.acks_in.load() == 1; }));  // j0's, held up
  others_go.Open();
  ASSERT_TRUE(Eventually([&] { return w->Stats().handled == 4; }));
  Add(q, "t", "j4");  // a slot whose job's ack waits takes a new job
  ASSERT_TRUE(Eventually([&] { return w->Stats().handled == 5; }));
  EXPECT_EQ(w->Stats().succeeded, 0u);
  EXPECT_EQ(q.Batches(), std::vector<size_t>{1});
  acks_open.Open();
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 5; }));
  EXPECT_EQ(q.Batches(), (std::vector<size_t>{1, 4}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(q.Get("j" + std::to_string(i)).status().code(), Code::kNotFound);
  }
  EXPECT_EQ(w->Stats().errors, 0u);
}

// A worker whose handlers are fast reserves ahead of its threads, as many
// jobs as it handled in the last few milliseconds, so it makes far fewer
// reserves than jobs (ReservesOneBatchForAllItsIdleSlots: slow handlers
// hold no more than the threads).
TEST(Worker, FastHandlersReserveAheadInBatches) {
  auto q = OpenMemory(SystemClock());
  WorkerOptions options;
  options.threads = 1;
  auto w = NewWorker(*q, SystemClock(), options);
  ASSERT_TRUE(w->Handle("fast", [](const Delivery&) { return Outcome::Success(); }).ok());
  // Enough to outlast the first 10 ms window (one reserve per job: no pace
  // known yet) many times over, even on a fast machine.
  constexpr uint64_t kJobs = 200'000;
  for (uint64_t i = 0; i < kJobs; ++i) Add(*q, "fast", "f" + std::to_string(i));
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == kJobs; }));
  const WorkerStats st = w->Stats();
  EXPECT_LT(st.reserves, kJobs / 4) << "about one reserve per job: nothing was read ahead";
  EXPECT_LT(st.ack_batches, kJobs) << "one ack per call: no batches";
  EXPECT_EQ(st.errors, 0u) << st.last_error;
  w->Stop(0);
  EXPECT_EQ(q->Stats()->jobs, 0u);
}

TEST(Worker, StopUnreservesUnstartedJobsAndReleasesRunningOnesAtTheDeadline) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  WorkerOptions options;
  options.threads = 2;
  auto w = NewWorker(*q, clock, options);
  Gate gate;
  std::atomic<int> ran{0};
  TopicOptions one;
  one.concurrency = 1;
  std::string started;  // written by the handler before `ran` moves
  ASSERT_TRUE(w->Handle(
                   "a",
                   [&](const Delivery& d) {
                     started = d.id;
                     ++ran;
                     gate.Wait();
                     return Outcome::Success();
                   },
                   one)
                  .ok());
  ASSERT_TRUE(w->Handle("b", [](const Delivery&) { return Outcome::Success(); }).ok());
  Add(*q, "a", "a1");
  Add(*q, "a", "a2");
  ASSERT_TRUE(w->Start().ok());
  // Both jobs of "a" came in one batch; its concurrency lets one run.
  ASSERT_TRUE(Eventually([&] { return ran.load() == 1 && w->Stats().held == 1; }));
  const std::string running = started;
  const std::string unstarted = running == "a1" ? "a2" : "a1";
  w->Stop(0);
  JobInfo r = GetJob(*q, running);
  EXPECT_EQ(r.state, JobState::kReady);  // the next worker gets it at once
  EXPECT_EQ(r.attempts, 1u);             // it did run
  EXPECT_EQ(r.last_error, "worker stopped while the handler ran");
  JobInfo u = GetJob(*q, unstarted);
  EXPECT_EQ(u.state, JobState::kReady);
  EXPECT_EQ(u.attempts, 0u);  // never started: not counted
  EXPECT_EQ(u.last_error, "");
  EXPECT_EQ(w->Stats().given_back, 2u);
  gate.Open();  // the abandoned handler returns Success: ignored
  w.reset();    // waits for it
  EXPECT_EQ(GetJob(*q, running).state, JobState::kReady);
  EXPECT_EQ(ran.load(), 1);
}

TEST(Worker, StopLetsARunningHandlerFinishWithinTheDrain) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  Gate gate;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  Add(*q, "t", "j");
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().running == 1; }));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    w->Stop(60'000);
    stopped = true;
  });
  ASSERT_TRUE(Eventually([&] { return Waiting(*q, "t") == 0; }));  // Stop has begun
  EXPECT_FALSE(stopped.load());
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return stopped.load(); }));
  stopper.join();
  EXPECT_EQ(q->Get("j").status().code(), Code::kNotFound);  // finished, not given back
  EXPECT_EQ(w->Stats().succeeded, 1u);
  EXPECT_EQ(w->Stats().given_back, 0u);
}

TEST(Worker, StopsDrainEndsWhenTheWorkersClockReachesIt) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  Gate gate;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  Add(*q, "t", "j");
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().running == 1 && Waiting(*q, "t") == 1; }));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    w->Stop(5000);
    stopped = true;
  });
  ASSERT_TRUE(Eventually([&] { return Waiting(*q, "t") == 0; }));  // Stop has begun
  clock->Advance(4999);
  EXPECT_EQ(GetJob(*q, "j").state, JobState::kReserved);
  clock->Advance(1);
  EXPECT_TRUE(Eventually([&] { return stopped.load(); }));
  if (!stopped) clock->Advance(60'000);  // so the join below ends even if the test failed
  stopper.join();
  EXPECT_EQ(GetJob(*q, "j").state, JobState::kReady);
  gate.Open();
}

// A drain longer than half the TTR: the running job is still touched, so
// its reservation outlives the TTR and no other worker can start it.
TEST(Worker, TouchesContinueDuringDrain) {
  auto clock = std::make_shared<ManualClock>();
  auto q = OpenMemory(clock);
  auto w = NewWorker(*q, clock);
  Gate gate;
  ASSERT_TRUE(w->Handle("t", [&](const Delivery&) {
                 gate.Wait();
                 return Outcome::Success();
               }).ok());
  const int64_t t0 = clock->NowMs();
  Add(*q, "t", "j", 0, /*ttr_ms=*/2000);
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().running == 1 && Waiting(*q, "t") == 1; }));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    w->Stop(10'000);
    stopped = true;
  });
  ASSERT_TRUE(Eventually([&] { return Waiting(*q, "t") == 0; }));  // Stop has begun
  clock->Advance(1000);
  EXPECT_TRUE(Eventually([&] { return w->Stats().touched == 1; }));
  EXPECT_EQ(GetJob(*q, "j").reserved_until_ms, t0 + 1000 + 2000);
  clock->Advance(1000);  // the first TTR is over; the touch kept the job
  EXPECT_TRUE(Eventually([&] { return w->Stats().touched == 2; }));
  JobInfo info = GetJob(*q, "j");
  EXPECT_EQ(info.state, JobState::kReserved);
  EXPECT_EQ(info.reserved_until_ms, t0 + 2000 + 2000);
  gate.Open();
  EXPECT_TRUE(Eventually([&] { return stopped.load(); }));
  if (!stopped) clock->Advance(60'000);  // so the join below ends even if the test failed
  stopper.join();
  EXPECT_EQ(q->Get("j").status().code(), Code::kNotFound);  // finished by its one holder
  EXPECT_EQ(w->Stats().succeeded, 1u);
  EXPECT_EQ(w->Stats().errors, 0u) << w->Stats().last_error;
}

// A reserve's callback runs on the queue's thread (the network client's I/O
// thread, or whoever made the jobs ready): the worker makes no Queue call
// there, neither the next reserve nor a give-back, so the callback never
// waits for a round trip.
TEST(Worker, MakesNoQueueCallInsideAReserveCallback) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  FaultyQueue q(*real);
  auto w = NewWorker(q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Success(); }).ok());
  ASSERT_TRUE(w->Start().ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Eventually([&] { return Waiting(q, "t") == 1; }));
    Add(q, "t", "j" + std::to_string(i));  // answers the waiting reserve on this thread
    ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == uint64_t(i + 1); }));
  }
  ASSERT_TRUE(
      Eventually([&] { return Waiting(q, "t") == 1; }));  // the next reserve, made elsewhere
  EXPECT_EQ(q.calls_in_callback.load(), 0);
}

// Stop while a reserve's answer is on its way: the jobs it brings are given
// back, off the callback's thread, and Stop waits for that.
TEST(Worker, JobsArrivingDuringStopAreGivenBackOffTheCallbackThread) {
  auto clock = std::make_shared<ManualClock>();
  auto real = OpenMemory(clock);
  FaultyQueue q(*real);
  Gate answer;
  std::atomic<int> held_up{0};
  std::atomic<bool> hold{false};
  q.set_before_callback([&] {
    if (!hold) return;
    ++held_up;
    answer.Wait();
  });
  auto w = NewWorker(q, clock);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Success(); }).ok());
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return Waiting(q, "t") == 1; }));
  hold = true;
  std::thread adder([&] { Add(q, "t", "j"); });  // its Add runs the held callback
  ASSERT_TRUE(Eventually([&] { return held_up.load() == 1; }));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    w->Stop(0);
    stopped = true;
  });
  ASSERT_TRUE(Eventually([&] { return q.cancels.load() == 1; }));  // too late: it is answered
  answer.Open();
  EXPECT_TRUE(Eventually([&] { return stopped.load(); }));
  stopper.join();
  adder.join();
  JobInfo j = GetJob(q, "j");
  EXPECT_EQ(j.state, JobState::kReady);
  EXPECT_EQ(j.attempts, 0u);
  EXPECT_EQ(w->Stats().given_back, 1u);
  EXPECT_EQ(w->Stats().handled, 0u);
  EXPECT_EQ(q.calls_in_callback.load(), 0);
}

TEST(Worker, ARestartedWorkerGetsEveryJobThatFellDueWhileDownAtOnce) {
  auto clock = std::make_shared<ManualClock>();
  char tmpl[] = "/tmp/delayq-worker-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  QueueOptions o;
  o.store = StoreKind::kEmbedded;
  o.data_dir = dir;
  o.clock = clock;
  std::mutex mu;
  std::multiset<std::string> seen;
  auto handler = [&](const Delivery& d) {
    std::lock_guard<std::mutex> l(mu);
    seen.insert(d.id);
    return Outcome::Success();
  };
  {
    auto q = OpenQueue(o);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    Add(**q, "t", "now");
    for (int i = 1; i <= 3; ++i) Add(**q, "t", "later" + std::to_string(i), 60'000 + i);
    auto w = NewWorker(**q, clock);
    ASSERT_TRUE(w->Handle("t", handler).ok());
    ASSERT_TRUE(w->Start().ok());
    ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 1; }));
    w->Stop(1000);
  }                             // the worker and the queue are gone
  clock->Advance(10 * 60'000);  // the "later" jobs fall due meanwhile
  auto q = OpenQueue(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto w = NewWorker(**q, clock);
  ASSERT_TRUE(w->Handle("t", handler).ok());
  ASSERT_TRUE(w->Start().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 3; }));  // the clock stands still
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(seen, (std::multiset<std::string>{"now", "later1", "later2", "later3"}));
  }
  w.reset();
  q->reset();
  std::filesystem::remove_all(dir);
}

TEST(Worker, RunsOverTheRedisStore) {
  auto redis = redis_harness::RedisServer::Start();
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  QueueOptions o;
  o.store = StoreKind::kRedis;
  o.redis_url = (*redis)->url();
  o.redis_prefix = "worker" + std::to_string(getpid());
  auto q = OpenQueue(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  auto w = NewWorker(**q, SystemClock());
  TopicOptions fast;
  fast.backoff = {0, 2.0, 0};  // retries due at once
  ASSERT_TRUE(w->Handle(
                   "smoke",
                   [](const Delivery& d) {
                     if (d.id == "bad") return Outcome::Bury("cannot parse");
                     if (d.id == "flaky" && d.attempts == 1)
                       throw std::runtime_error("first try fails");
                     return Outcome::Success();
                   },
                   fast)
                  .ok());
  ASSERT_TRUE(w->Start().ok());
  for (int i = 0; i < 20; ++i) Add(**q, "smoke", "j" + std::to_string(i));
  Add(**q, "smoke", "bad");
  Add(**q, "smoke", "flaky");
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 21; }));
  WorkerStats s = w->Stats();
  EXPECT_EQ(s.buried, 1u);
  EXPECT_EQ(s.retried, 1u);
  EXPECT_EQ(s.errors, 0u) << s.last_error;
  JobInfo bad = GetJob(**q, "bad");
  EXPECT_EQ(bad.state, JobState::kBuried);
  EXPECT_EQ(bad.last_error, "cannot parse");
  w->Stop(5000);
  auto stats = (*q)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->jobs, 1u);  // only the buried one is left
}

TEST(Worker, KeepsAskingWhileRedisIsAwayAndGoesOnWhenItIsBack) {
  redis_harness::RedisServerOptions ro;
  ro.append_only = true;
  auto redis = redis_harness::RedisServer::Start(ro);
  ASSERT_TRUE(redis.ok()) << redis.status().ToString();
  QueueOptions o;
  o.store = StoreKind::kRedis;
  o.redis_url = (*redis)->url();
  o.redis_prefix = "outage" + std::to_string(getpid());
  auto q = OpenQueue(o);
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  WorkerOptions options;
  options.reserve_wait_ms = 1000;  // a wake-up lost while Redis was away costs 1 s at most
  auto w = NewWorker(**q, SystemClock(), options);
  ASSERT_TRUE(w->Handle("t", [](const Delivery&) { return Outcome::Success(); }).ok());
  ASSERT_TRUE(w->Start().ok());
  Add(**q, "t", "before");
  ASSERT_TRUE(Eventually([&] { return w->Stats().succeeded == 1; }));
  ASSERT_TRUE((*redis)->Stop().ok());
  ASSERT_TRUE(Eventually([&] { return w->Stats().errors >= 3; })) << w->Stats().last_error;
  WorkerStats away = w->Stats();
  EXPECT_NE(away.last_error.find("unavailable"), std::string::npos) << away.last_error;
  // Failed reserves are asked again after a pause that grows, not in a loop.
  EXPECT_LE(away.reserves, away.errors + 3);
  ASSERT_TRUE((*redis)->Restart().ok());
  ASSERT_TRUE(Eventually([&] { return (*q)->Get("before").status().code() == Code::kNotFound; }));
  Add(**q, "t", "after");
  EXPECT_TRUE(Eventually([&] { return w->Stats().succeeded == 2; })) << w->Stats().last_error;
  w->Stop(1000);
}

}  // namespace
}  // namespace delayq
