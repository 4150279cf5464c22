// Runs the Queue conformance suite on the in-process engine (store "memory"),
// twice: on a ManualClock, where every test runs and time is exact, and on the
// system clock, which exercises the real timers and shows that the suite holds
// for real-time harnesses such as the network client's.
#include <chrono>
#include <memory>
#include <thread>

#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "delayq/queue.h"

namespace delayq::conformance {
namespace {

std::unique_ptr<Queue> OpenMemory(std::shared_ptr<Clock> clock) {
  QueueOptions options;
  options.store = "memory";
  options.clock = std::move(clock);
  auto queue = OpenQueue(options);
  if (!queue.ok()) {
    ADD_FAILURE() << "OpenQueue(memory): " << queue.status().ToString();
    return nullptr;
  }
  return std::move(queue).value();
}

class ManualClockHarness final : public QueueHarness {
 public:
  std::unique_ptr<Queue> Open() override { return OpenMemory(clock_); }
  void AdvanceMs(int64_t ms) override { clock_->Advance(ms); }
  int64_t NowMs() override { return clock_->NowMs(); }
  bool exact_time() const override { return true; }

 private:
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

class SystemClockHarness final : public QueueHarness {
 public:
  std::unique_ptr<Queue> Open() override { return OpenMemory(SystemClock()); }
  void AdvanceMs(int64_t ms) override {
    const Clock& clock = *SystemClock();
    const int64_t wall = clock.NowMs() + ms;
    const int64_t mono = clock.MonotonicMs() + ms;
    while (clock.NowMs() < wall || clock.MonotonicMs() < mono) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  int64_t NowMs() override { return SystemClock()->NowMs(); }
  bool exact_time() const override { return false; }
};

// Contract violations of LocalQueue found by the suite: none known. (Tags go
// here when a test in queue_conformance.cc reports one.)
const std::set<std::string> kMemoryKnownBugs = {};

INSTANTIATE_TEST_SUITE_P(
    Memory, QueueConformance,
    testing::Values(QueueImpl{.name = "ManualClock",
                              .make = [] { return std::make_unique<ManualClockHarness>(); },
                              .known_bugs = kMemoryKnownBugs},
                    QueueImpl{.name = "SystemClock",
                              .make = [] { return std::make_unique<SystemClockHarness>(); },
                              .known_bugs = kMemoryKnownBugs}),
    QueueImplName);

}  // namespace
}  // namespace delayq::conformance
