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
//            testing::Values(QueueImpl{.name = "ManualClock", .make = [] {
//              return std::make_unique<RedisHarness>();
//            }}),
//            QueueImplName);
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
//    observe before it passes is brief_ms() (150 ms by default), so calls made
//    in between have ample time; delays a test merely moves past stay tens of
//    milliseconds.
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

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <string_view>

#include "delayq/queue.h"

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
  virtual int64_t brief_ms() const { return exact_time() ? 20 : 150; }
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

}  // namespace delayq::conformance

#endif  // DELAYQ_TESTS_CONFORMANCE_QUEUE_CONFORMANCE_H_
