// Runs the Queue conformance suite on the in-process engine (store "memory"):
// on a ManualClock, where every test runs and time is exact, and on the
// system clock, which exercises the real timers and shows that the suite holds
// for real-time harnesses such as the network client's. Both again with
// QueueOptions::caller_loop, driven by an event loop of the test's own (as
// `delayq serve` drives it).
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "delayq/queue.h"

namespace delayq::conformance {
namespace {

// A queue opened with caller_loop, and the loop that drives it: a thread
// polling the queue's descriptors (and one of its own, to stop) and calling
// RunDue. Every operation goes straight to the queue.
class LoopDrivenQueue final : public Queue {
 public:
  explicit LoopDrivenQueue(std::unique_ptr<Queue> q) : q_(std::move(q)) {
    QueueDriver* driver = q_->driver();
    EXPECT_NE(driver, nullptr);
    std::vector<pollfd> fds{{stop_, POLLIN, 0}};
    for (int fd : driver->PollFds()) fds.push_back({fd, POLLIN, 0});
    driver->RunDue();
    loop_ = std::thread([this, driver, fds]() mutable {
      for (;;) {
        if (poll(fds.data(), fds.size(), -1) < 0) continue;
        if (fds[0].revents != 0) return;
        driver->RunDue();
      }
    });
  }
  ~LoopDrivenQueue() override {
    uint64_t one = 1;
    EXPECT_EQ(write(stop_, &one, sizeof one), 8);
    loop_.join();
    close(stop_);
  }

  Result<AddResult> Add(const JobSpec& s) override { return q_->Add(s); }
  uint64_t ReserveAsync(const ReserveRequest& r, ReserveCallback d) override {
    return q_->ReserveAsync(r, std::move(d));
  }
  bool CancelReserve(uint64_t t) override { return q_->CancelReserve(t); }
  Status Finish(std::string_view id, std::string_view r) override { return q_->Finish(id, r); }
  Status Delete(std::string_view id) override { return q_->Delete(id); }
  Status Release(std::string_view id, std::string_view r, int64_t d,
                 std::string_view e) override {
    return q_->Release(id, r, d, e);
  }
  Status Touch(std::string_view id, std::string_view r) override { return q_->Touch(id, r); }
  Status Bury(std::string_view id, std::string_view r, std::string_view why) override {
    return q_->Bury(id, r, why);
  }
  Status Kick(std::string_view id) override { return q_->Kick(id); }
  Result<uint64_t> KickTopic(std::string_view t, uint64_t n) override {
    return q_->KickTopic(t, n);
  }
  Result<JobInfo> Get(std::string_view id) override { return q_->Get(id); }
  Result<JobInfo> Peek(std::string_view t, JobState s) override { return q_->Peek(t, s); }
  Status Pause(std::string_view t, int64_t ms) override { return q_->Pause(t, ms); }
  Status Resume(std::string_view t) override { return q_->Resume(t); }
  Result<std::vector<TopicInfo>> Topics() override { return q_->Topics(); }
  Result<TopicInfo> Topic(std::string_view t) override { return q_->Topic(t); }
  Result<QueueStats> Stats() override { return q_->Stats(); }

 private:
  std::unique_ptr<Queue> q_;
  int stop_ = eventfd(0, EFD_CLOEXEC);
  std::thread loop_;
};

std::unique_ptr<Queue> OpenMemory(std::shared_ptr<Clock> clock, bool caller_loop) {
  QueueOptions options;
  options.store = "memory";
  options.clock = std::move(clock);
  options.caller_loop = caller_loop;
  auto queue = OpenQueue(options);
  if (!queue.ok()) {
    ADD_FAILURE() << "OpenQueue(memory): " << queue.status().ToString();
    return nullptr;
  }
  if (caller_loop) return std::make_unique<LoopDrivenQueue>(std::move(queue).value());
  return std::move(queue).value();
}

class ManualClockHarness final : public QueueHarness {
 public:
  explicit ManualClockHarness(bool caller_loop) : caller_loop_(caller_loop) {}
  std::unique_ptr<Queue> Open() override { return OpenMemory(clock_, caller_loop_); }
  void AdvanceMs(int64_t ms) override { clock_->Advance(ms); }
  int64_t NowMs() override { return clock_->NowMs(); }
  bool exact_time() const override { return true; }

 private:
  bool caller_loop_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

class SystemClockHarness final : public QueueHarness {
 public:
  explicit SystemClockHarness(bool caller_loop) : caller_loop_(caller_loop) {}
  std::unique_ptr<Queue> Open() override { return OpenMemory(SystemClock(), caller_loop_); }
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

 private:
  bool caller_loop_;
};

// QueueDriver::MaybeDue, which a busy loop asks between connections: false
// until the armed deadline passes, true from then until RunDue re-arms.
TEST(LocalQueueDriver, MaybeDueTurnsTrueAtTheDeadlineAndRunDueClearsIt) {
  QueueOptions options;
  options.caller_loop = true;
  auto queue = OpenQueue(options);
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
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!driver->MaybeDue() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();  // polling with a deadline, as the loop would
  }
  ASSERT_TRUE(driver->MaybeDue());
  EXPECT_GE(SystemClock()->NowMs(), added->run_at_ms);
  driver->RunDue();
  EXPECT_FALSE(driver->MaybeDue());
  auto info = (*queue)->Get(added->id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->state, JobState::kReady);
}

// Contract violations of LocalQueue found by the suite: none known. (Tags go
// here when a test in queue_conformance.cc reports one.)
const std::set<std::string> kMemoryKnownBugs = {};

INSTANTIATE_TEST_SUITE_P(
    Memory, QueueConformance,
    testing::Values(
        QueueImpl{.name = "ManualClock",
                  .make = [] { return std::make_unique<ManualClockHarness>(false); },
                  .known_bugs = kMemoryKnownBugs},
        QueueImpl{.name = "SystemClock",
                  .make = [] { return std::make_unique<SystemClockHarness>(false); },
                  .known_bugs = kMemoryKnownBugs},
        QueueImpl{.name = "ManualClockCallerLoop",
                  .make = [] { return std::make_unique<ManualClockHarness>(true); },
                  .known_bugs = kMemoryKnownBugs},
        QueueImpl{.name = "SystemClockCallerLoop",
                  .make = [] { return std::make_unique<SystemClockHarness>(true); },
                  .known_bugs = kMemoryKnownBugs}),
    QueueImplName);

}  // namespace
}  // namespace delayq::conformance
