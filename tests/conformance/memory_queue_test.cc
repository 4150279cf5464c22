// Runs the Queue conformance suite on the in-process engine (store "memory"):
// on a ManualClock, where every test runs and time is exact, and on the
// system clock, which exercises the real timers and shows that the suite holds
// for real-time harnesses such as the network client's. Both again with
// QueueOptions::caller_loop, driven by an event loop of the test's own (as
// `delayq serve` drives it).
#include <poll.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "conformance/local_queue_harness.h"
#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "delayq/queue.h"
#include "queue/open.h"

namespace delayq::conformance {
namespace {

QueueOptions Memory() {
  QueueOptions o;
  o.store = StoreKind::kMemory;
  return o;
}

// QueueDriver::MaybeDue, which a busy loop asks between connections: false
// until the armed deadline passes, true from then until RunDue re-arms.
TEST(LocalQueueDriver, MaybeDueTurnsTrueAtTheDeadlineAndRunDueClearsIt) {
  QueueOptions options;
  OpenOptions open;
  open.caller_loop = true;
  auto queue = OpenServingQueue(options, open);
  ASSERT_TRUE(queue.ok());
  QueueDriver* driver = (*queue)->driver();
  ASSERT_NE(driver, nullptr);
  driver->RunDue();
  EXPECT_FALSE(driver->MaybeDue());  // nothing scheduled
  JobSpec spec;
  spec.topic = "t";
  spec.delay_ms = 30;
  auto added = (*queue)->Add(spec);
  ASSERT_TRUE(added.ok());
  driver->RunDue();  // what the loop does when the eventfd says "earlier deadline"
  EXPECT_TRUE(SystemClock()->NowMs() >= added->run_at_ms || !driver->MaybeDue());
  // Polling with a deadline, as the loop would (yielding between polls).
  ASSERT_TRUE(PollUntil([&] { return driver->MaybeDue(); }, std::chrono::seconds(5),
                        std::chrono::milliseconds(0)));
  EXPECT_GE(SystemClock()->NowMs(), added->run_at_ms);
  driver->RunDue();
  EXPECT_FALSE(driver->MaybeDue());
  auto info = (*queue)->Get(added->id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, JobState::kReady);
}

// A burst for more waiting reserves than one slice serves (Engine::Tick
// hands out ~256 jobs per round): the driver's descriptors stay readable
// until every slice is out, so a loop that just polls them and calls RunDue
// answers every reserve, one slice per call, with nothing else happening.
TEST(LocalQueueDriver, ABurstForManyWaitersKeepsTheDriverDueUntilEveryOneIsServed) {
  OpenOptions open;
  open.caller_loop = true;
  auto queue = OpenServingQueue(Memory(), open);
  ASSERT_TRUE(queue.ok());
  QueueDriver* driver = (*queue)->driver();
  driver->RunDue();
  ASSERT_TRUE((*queue)->Pause("t", 0).ok());
  for (int i = 0; i < 1200; ++i) {
    JobSpec spec;
    spec.topic = "t";
    ASSERT_TRUE((*queue)->Add(spec).ok());
  }
  constexpr int kWaiters = 4;
  std::vector<int> got(kWaiters, -1);
  for (int w = 0; w < kWaiters; ++w) {
    ReserveRequest req;
    req.topics = {"t"};
    req.count = 300;
    req.wait_ms = 60'000;
    EXPECT_NE((*queue)->ReserveAsync(req,
                                     [&got, w](Result<Deliveries> r) {
                                       got[static_cast<size_t>(w)] =
                                           r.ok() ? static_cast<int>(r->size()) : -2;
                                     }),
              0u);
  }
  ASSERT_TRUE((*queue)->Resume("t").ok());
  EXPECT_EQ(got[0], 300);
  EXPECT_EQ(got[1], -1) << "the resume served more than one slice";
  std::vector<pollfd> fds;
  for (int fd : driver->PollFds()) fds.push_back({fd, POLLIN, 0});
  int runs = 0;
  while (runs < 20 && poll(fds.data(), fds.size(), 0) > 0) {
    driver->RunDue();
    ++runs;
  }
  EXPECT_EQ(got, std::vector<int>(kWaiters, 300));
  EXPECT_EQ(runs, kWaiters - 1) << "one slice per RunDue, then nothing readable";
}

// Contract violations of LocalQueue found by the suite: none known. (Tags go
// here when a test in queue_conformance.cc reports one.)
const std::set<std::string> kMemoryKnownBugs = {};

INSTANTIATE_TEST_SUITE_P(
    Memory, QueueConformance,
    testing::Values(
        QueueImpl{.name = "ManualClock",
                  .make = [] { return std::make_unique<ManualClockHarness>(Memory, false); },
                  .known_bugs = kMemoryKnownBugs},
        QueueImpl{.name = "SystemClock",
                  .make = [] { return std::make_unique<SystemClockHarness>(Memory, false); },
                  .known_bugs = kMemoryKnownBugs},
        QueueImpl{.name = "ManualClockCallerLoop",
                  .make = [] { return std::make_unique<ManualClockHarness>(Memory, true); },
                  .known_bugs = kMemoryKnownBugs},
        QueueImpl{.name = "SystemClockCallerLoop",
                  .make = [] { return std::make_unique<SystemClockHarness>(Memory, true); },
                  .known_bugs = kMemoryKnownBugs}),
    QueueImplName);

}  // namespace
}  // namespace delayq::conformance
