// The Queue conformance suite: one set of tests, written against the public
// delayq::Queue interface only, that every implementation must pass — the
// in-process engine ("memory" store), the Redis store and the network client.
//
// How an implementation plugs in (see memory_queue_test.cc for a complete
// example):
//
//   1. Write a QueueHarness: Open() returns a fresh, empty queue; AdvanceMs()
//      moves that queue's time forward; NowMs() reads its wall clock.
//   2. Instantiate the suite in a file linked with queue_conformance.cc:
//
//        INSTANTIATE_TEST_SUITE_P(
//            Redis, QueueConformance,
//            testing::Values(QueueImpl{
//                .name = "ManualClock",
//                .make = [] { return std::make_unique<RedisHarness>(); }}),
//            QueueImplName);
//
//      and add the file to a test target beside queue_conformance.cc (one
//      binary may instantiate several implementations).
//
// Time. Tests never sleep to wait for time: they call AdvanceMs() and wait for
// the effect with a deadline (kDeadline, 5 s, reached only when something is
// broken). Two kinds of harness fit:
//
//  - exact time (exact_time() true): the queue runs on a delayq::ManualClock;
//    time moves only when AdvanceMs() moves it, by exactly that much. Every
//    test runs, including the boundary ones ("not due 1 ms before run_at").
//  - real time (exact_time() false): the queue, or the server behind it, runs
//    on the system clock and AdvanceMs() waits. Boundary checks that a real
//    clock cannot make deterministic are skipped; every delay a test must
//    observe before it passes is brief_ms() (500 ms by default), so calls made
//    in between have ample time; delays a test merely moves past stay tens of
//    milliseconds.
//
// What the suite relies on beyond the letter of queue.h — each is what a user
// of any implementation may rely on too:
//  - the default Limits (256 KiB bodies);
//  - generated ids sort, as strings, in the order they were made ("time-
//    ordered", SPEC §3);
//  - Topic().waiting counts a waiting reserve once ReserveAsync has returned
//    or soon after (tests poll it, with a deadline, to know a wait began);
//  - CancelReserve() returning true means the waiter is gone everywhere: it
//    takes no job afterwards (a network client must cancel on the server
//    before it answers true);
//  - a reserve callback may call the queue (Finish, Add, Stats) on whatever
//    thread it runs, without deadlock;
//  - destroying the queue answers every waiting reserve with kUnavailable.
//
// Contract violations. A test that finds an implementation breaking the
// contract fails, unless that implementation's QueueImpl lists the violation's
// tag in known_bugs: then it is skipped with a message starting "BUG(tag)", so
// the suite stays green while the bug is open and the skip is visible in the
// output. Known bugs are per implementation, never global.
//
// Thread-safety: a harness is used by one test at a time, but AdvanceMs() and
// NowMs() may be called from several of that test's threads at once, and
// NowMs() from inside reserve callbacks.
#ifndef DELAYQ_TESTS_CONFORMANCE_QUEUE_CONFORMANCE_H_
#define DELAYQ_TESTS_CONFORMANCE_QUEUE_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "delayq/queue.h"
#include "testing/poll.h"

namespace delayq::conformance {

// One implementation under test, as the suite sees it. A new harness is made
// for every test, so harness state (a clock, a Redis key prefix, a server) is
// never shared between tests.
class QueueHarness {
 public:
  virtual ~QueueHarness() = default;

  // Opens a fresh, empty queue: no jobs, no topics, no waiters, no pauses.
  // May be called more than once in a test; all queues opened by one harness
  // share its time. Returns nullptr (and may log why) if it cannot.
  virtual std::unique_ptr<Queue> Open() = 0;

  // Moves the queue's time forward by `ms` (>= 0): when it returns, both the
  // wall clock and the monotonic clock the queue reads are at least `ms` past
  // what they read when the call began. Exact harnesses move a ManualClock by
  // exactly `ms` and return at once; real-time harnesses wait. Effects of the
  // move (jobs falling due, TTRs and waits running out) may be delivered to
  // reserve callbacks asynchronously, after AdvanceMs returns.
  virtual void AdvanceMs(int64_t ms) = 0;

  // The queue's wall clock in Unix ms, as run_at_ms, created_at_ms and
  // reserved_until_ms are measured. A real-time harness reads the same clock
  // the queue (or its server, on this machine) reads.
  virtual int64_t NowMs() = 0;

  // True when time moves only through AdvanceMs, and by exactly what it says.
  virtual bool exact_time() const = 0;

  // A delay that a test must be able to observe before it passes: a TTR that
  // must hold across a few calls, a release delay or pause whose effect is
  // checked before AdvanceMs moves past it. Any value works for exact time;
  // a real-time harness over a slow transport may raise it.
  virtual int64_t brief_ms() const { return exact_time() ? 20 : 500; }
};

// How a test-suite instantiation names and makes its harness.
struct QueueImpl {
  // Test-name suffix: [A-Za-z0-9_] only (a gtest parameter name).
  std::string name;
  // Called once per test.
  std::function<std::unique_ptr<QueueHarness>()> make;
  // Tags of contract violations this implementation is known to have; the
  // tests that find them skip with "BUG(tag): ..." instead of failing.
  std::set<std::string> known_bugs;
};

// For gtest: names an instantiation's tests after QueueImpl::name.
std::string QueueImplName(const testing::TestParamInfo<QueueImpl>& info);
void PrintTo(const QueueImpl& impl, std::ostream* os);

// The fixture: a fresh harness and queue per test.
class QueueConformance : public testing::TestWithParam<QueueImpl> {
 protected:
  void SetUp() override;
  void TearDown() override;

  QueueHarness& harness() { return *harness_; }
  Queue& queue() { return *queue_; }
  bool KnownBug(std::string_view tag) const;

  std::unique_ptr<QueueHarness> harness_;
  std::unique_ptr<Queue> queue_;  // destroyed before harness_
};

// --- helpers the tests share -----------------------------------------------------
//
// Also usable by implementation-specific tests (a Redis failover test, say).
// Each EXPECTs success where its name says Must/One/Now and returns a neutral
// value on failure, so a test carries on and reports everything it finds.

// How long an answer may take before the test calls it missing. Only a broken
// queue gets near it.
inline constexpr auto kDeadline = std::chrono::seconds(5);
// How long a "this does not happen" check watches. Such checks only ever run
// where nothing may legitimately happen, so a longer watch would only slow the
// suite, never change a correct outcome.
inline constexpr auto kQuiet = std::chrono::milliseconds(20);
// A delay, TTR or wait that never passes within a test.
inline constexpr int64_t kLongMs = 600'000;
// A delay a test only moves past, never observes before it passes.
inline constexpr int64_t kShortMs = 20;

inline testing::AssertionResult HasCode(const Status& s, Code code) {
  if (s.code() == code) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "expected " << CodeName(code) << ", got " << s.ToString();
}

inline testing::AssertionResult IsOk(const Status& s) { return HasCode(s, Code::kOk); }

// kInvalidArgument (or `code`) with a message that names `field`.
inline testing::AssertionResult Rejects(const Status& s, std::string_view field,
                                        Code code = Code::kInvalidArgument) {
  if (s.code() != code) {
    return testing::AssertionFailure()
           << "expected " << CodeName(code) << " naming '" << field << "', got " << s.ToString();
  }
  if (s.message().find(field) == std::string::npos) {
    return testing::AssertionFailure()
           << "message does not name '" << field << "': " << s.ToString();
  }
  return testing::AssertionSuccess();
}

inline JobSpec Spec(std::string topic, std::string id = "") {
  JobSpec spec;
  spec.topic = std::move(topic);
  spec.id = std::move(id);
  return spec;
}

inline JobSpec Delayed(std::string topic, std::string id, int64_t delay_ms) {
  JobSpec spec = Spec(std::move(topic), std::move(id));
  spec.delay_ms = delay_ms;
  return spec;
}

// prefix + n + suffix, e.g. Name("job-", 7) == "job-7".
inline std::string Name(std::string_view prefix, int64_t n, std::string_view suffix = "") {
  std::string s(prefix);
  s += std::to_string(n);
  s += suffix;
  return s;
}

// Adds `spec` and returns what add answered (a default AddResult on failure).
inline AddResult MustAdd(Queue& q, const JobSpec& spec) {
  auto r = q.Add(spec);
  EXPECT_TRUE(IsOk(r.status())) << "adding '" << spec.id << "' to " << spec.topic;
  return r.ok() ? *r : AddResult{};
}

// Reserves without waiting.
inline Deliveries ReserveNow(Queue& q, std::vector<std::string> topics, uint32_t count = 1) {
  ReserveRequest req;
  req.topics = std::move(topics);
  req.count = count;
  auto r = q.Reserve(req);
  EXPECT_TRUE(IsOk(r.status()));
  return r.ok() ? *r : Deliveries{};
}

// Reserves exactly one job of `topic` without waiting; an empty Delivery (and
// a failure) if none is ready.
inline Delivery ReserveOne(Queue& q, const std::string& topic) {
  Deliveries got = ReserveNow(q, {topic});
  EXPECT_EQ(got.size(), 1u) << "no job of " << topic << " was ready";
  return got.empty() ? Delivery{} : got.front();
}

inline std::vector<std::string> Ids(const Deliveries& deliveries) {
  std::vector<std::string> ids;
  for (const Delivery& d : deliveries) ids.push_back(d.id);
  return ids;
}

// "delayed", "ready", "reserved", "buried", "gone" (not found), or the error.
inline std::string State(Queue& q, std::string_view id) {
  auto info = q.Get(id);
  if (info.ok()) return std::string(StateName(info->state));
  if (info.status().code() == Code::kNotFound) return "gone";
  return "error: " + info.status().ToString();
}

inline JobInfo MustGet(Queue& q, std::string_view id) {
  auto info = q.Get(id);
  EXPECT_TRUE(IsOk(info.status())) << "get " << id;
  return info.ok() ? *info : JobInfo{};
}

inline TopicInfo MustTopic(Queue& q, std::string_view topic) {
  auto info = q.Topic(topic);
  EXPECT_TRUE(IsOk(info.status())) << "topic " << topic;
  return info.ok() ? *info : TopicInfo{};
}

inline JobInfo MustPeek(Queue& q, std::string_view topic, JobState state) {
  auto info = q.Peek(topic, state);
  EXPECT_TRUE(IsOk(info.status())) << "peek " << topic << " " << StateName(state);
  return info.ok() ? *info : JobInfo{};
}

// How many KickTopic kicked; 0 (and a failure) on error.
inline uint64_t MustKickTopic(Queue& q, std::string_view topic, uint64_t n) {
  auto kicked = q.KickTopic(topic, n);
  EXPECT_TRUE(IsOk(kicked.status())) << "kick " << topic;
  return kicked.ok() ? *kicked : 0;
}

// Reserves the next job of `topic` and buries it; returns its id.
inline std::string BuryNext(Queue& q, const std::string& topic, std::string_view reason = "") {
  Delivery d = ReserveOne(q, topic);
  EXPECT_TRUE(IsOk(q.Bury(d.id, d.receipt, reason))) << "bury " << d.id;
  return d.id;
}

inline QueueStats MustStats(Queue& q) {
  auto s = q.Stats();
  EXPECT_TRUE(IsOk(s.status()));
  return s.ok() ? *s : QueueStats{};
}

inline ReserveRequest Request(std::vector<std::string> topics, int64_t wait_ms,
                              uint32_t count = 1) {
  ReserveRequest req;
  req.topics = std::move(topics);
  req.wait_ms = wait_ms;
  req.count = count;
  return req;
}

// One ReserveAsync in flight: its ticket and the future of its answer. Counts
// calls of the callback (the contract says exactly one) and records the thread
// and the queue's time at the answer. Safe to outlive the test: the callback
// holds the shared state, never the probe.
class ReserveProbe {
 public:
  // Calls q.ReserveAsync(req). If `on_answer` is given, the callback runs it
  // (with the result, before recording it) — e.g. to call back into the queue.
  ReserveProbe(Queue& q, const ReserveRequest& req, std::function<int64_t()> now = nullptr,
               std::function<void(const Result<Deliveries>&)> on_answer = nullptr)
      : state_(std::make_shared<State>()) {
    state_->now = std::move(now);
    state_->on_answer = std::move(on_answer);
    future_ = state_->promise.get_future();
    std::shared_ptr<State> s = state_;
    ticket_ = q.ReserveAsync(req, [s](Result<Deliveries> r) {
      if (s->calls.fetch_add(1) != 0) return;  // a second call is a bug: counted, not set
      s->thread = std::this_thread::get_id();
      if (s->now) s->answered_at_ms = s->now();
      if (s->on_answer) s->on_answer(r);
      s->promise.set_value(std::move(r));
    });
  }

  uint64_t ticket() const { return ticket_; }
  // True once the callback has answered; waits at most `d` for it.
  bool Answered(std::chrono::milliseconds d = std::chrono::milliseconds(0)) {
    return future_.wait_for(d) == std::future_status::ready;
  }
  // The answer, waiting up to kDeadline. Call once.
  Result<Deliveries> Take() {
    if (future_.wait_for(kDeadline) != std::future_status::ready) {
      return Internal("reserve was not answered within the deadline");
    }
    return future_.get();
  }
  // Deliveries of a successful answer; a failure otherwise.
  Deliveries TakeOk() {
    auto r = Take();
    EXPECT_TRUE(IsOk(r.status()));
    return r.ok() ? *r : Deliveries{};
  }
  int calls() const { return state_->calls.load(); }
  // Valid after Answered() / Take().
  std::thread::id thread() const { return state_->thread; }
  int64_t answered_at_ms() const { return state_->answered_at_ms; }

 private:
  struct State {
    std::promise<Result<Deliveries>> promise;
    std::atomic<int> calls{0};
    std::thread::id thread;      // written before the promise is set
    int64_t answered_at_ms = 0;  // likewise
    std::function<int64_t()> now;
    std::function<void(const Result<Deliveries>&)> on_answer;
  };
  std::shared_ptr<State> state_;
  std::future<Result<Deliveries>> future_;
  uint64_t ticket_ = 0;
};

// What a harness on the system clock does for AdvanceMs: waits until both
// the wall and the monotonic clock have moved `ms` (the one place the suite
// lets time pass by itself).
inline void WaitForSystemClockMs(int64_t ms) {
  const Clock& clock = *SystemClock();
  const int64_t wall = clock.NowMs() + ms;
  const int64_t mono = clock.MonotonicMs() + ms;
  while (clock.NowMs() < wall || clock.MonotonicMs() < mono) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Polls `done` until it holds or the deadline passes (a wait for another
// thread's progress, not for time).
inline bool Eventually(const std::function<bool()>& done) { return PollUntil(done, kDeadline); }

// Polls `done` until it holds, or until `progress` (a count that grows
// while work gets done) has not moved for the deadline: a slow machine only
// takes longer, a stall fails.
inline bool EventuallyWhileProgressing(const std::function<bool()>& done,
                                       const std::function<uint64_t()>& progress) {
  return PollWhileProgressing(done, progress, kDeadline);
}

// Until `n` reserves wait on `topic` (so a following AdvanceMs counts from
// after the wait began).
inline bool WaitersReach(Queue& q, const std::string& topic, uint64_t n) {
  return Eventually([&] {
    auto t = q.Topic(topic);
    return t.ok() && t->waiting == n;
  });
}

// Queue::Reserve on a thread of its own, so a test can wait for the blocking
// call with a deadline. A call that never returns is abandoned (its thread
// detached), so the test fails instead of hanging.
class BlockingReserve {
 public:
  BlockingReserve(Queue& q, ReserveRequest req)
      : answer_(std::make_shared<std::promise<Result<Deliveries>>>()),
        future_(answer_->get_future()),
        thread_([&q, req = std::move(req), answer = answer_] {
          try {
            answer->set_value(q.Reserve(req));
          } catch (const std::exception& e) {
            answer->set_value(Internal(std::string("Reserve() threw: ") + e.what()));
          }
        }) {}
  ~BlockingReserve() {
    if (!future_.valid() ||
        future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      thread_.join();
    } else {
      thread_.detach();
    }
  }
  BlockingReserve(const BlockingReserve&) = delete;
  BlockingReserve& operator=(const BlockingReserve&) = delete;

  // What Reserve() returned, waiting up to kDeadline. Call once.
  Result<Deliveries> Take() {
    if (future_.wait_for(kDeadline) != std::future_status::ready) {
      return Internal("Reserve() did not return within the deadline");
    }
    return future_.get();
  }

 private:
  std::shared_ptr<std::promise<Result<Deliveries>>> answer_;
  std::future<Result<Deliveries>> future_;
  std::thread thread_;  // started last
};

// Runs fn on its own thread. False if it has not returned within kDeadline —
// a deadlock; the thread is then abandoned, and the caller must leak whatever
// the thread uses (e.g. queue_.release()) rather than destroy it.
inline bool ReturnsWithinDeadline(std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto finished = done->get_future();
  std::thread t([fn = std::move(fn), done] {
    fn();
    done->set_value();
  });
  if (finished.wait_for(kDeadline) == std::future_status::ready) {
    t.join();
    return true;
  }
  t.detach();
  return false;
}

// A consumer: reserves batches of `topics` and finishes each job, calling
// `seen` for every delivery, until `stop` is set; then withdraws its waiting
// reserve. The waits are long: only new jobs or `stop` end them.
inline void Consume(Queue& q, const std::vector<std::string>& topics, const std::atomic<bool>& stop,
                    const std::function<void(const Delivery&)>& seen) {
  while (!stop.load()) {
    ReserveProbe probe(q, Request(topics, kLongMs, 16));
    bool answered = false;
    while (!(answered = probe.Answered(std::chrono::milliseconds(2)))) {
      if (stop.load() && q.CancelReserve(probe.ticket())) return;
    }
    auto r = probe.Take();
    if (!r.ok()) {
      ADD_FAILURE() << "reserve failed: " << r.status().ToString();
      return;
    }
    for (const Delivery& d : *r) {
      seen(d);
      Status s = q.Finish(d.id, d.receipt);
      EXPECT_TRUE(IsOk(s)) << d.id;
    }
  }
}

// Reports a contract violation: a skip marked BUG when the implementation
// lists `tag` as a known bug, a failure otherwise. Returns from the test.
#define CONFORMANCE_VIOLATION(tag, what)                         \
  do {                                                           \
    if (KnownBug(tag)) GTEST_SKIP() << "BUG(" tag "): " << what; \
    FAIL() << "contract violation (" tag "): " << what;          \
  } while (0)

}  // namespace delayq::conformance

#endif  // DELAYQ_TESTS_CONFORMANCE_QUEUE_CONFORMANCE_H_
