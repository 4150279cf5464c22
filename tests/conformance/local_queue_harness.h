// Harnesses for the in-process queue (LocalQueue, stores "memory" and
// "embedded"): on a ManualClock or the system clock, called directly or
// driven by an event loop of the test's own with caller_loop (as `delayq
// serve` drives it). Shared by memory_queue_test.cc and
// embedded_queue_test.cc.
#ifndef DELAYQ_TESTS_CONFORMANCE_LOCAL_QUEUE_HARNESS_H_
#define DELAYQ_TESTS_CONFORMANCE_LOCAL_QUEUE_HARNESS_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "conformance/queue_conformance.h"
#include "delayq/clock.h"
#include "delayq/queue.h"
#include "queue/open.h"

namespace delayq::conformance {

// A queue opened with caller_loop, and the loop that drives it: a thread
// polling the queue's descriptors (and one of its own, to stop) and calling
// RunDue. Every operation goes straight to the queue.
class LoopDrivenQueue final : public Queue {
 public:
  explicit LoopDrivenQueue(std::unique_ptr<ServingQueue> q) : q_(std::move(q)) {
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
        driver->Flush();  // a loop turn ends: the embedded store writes
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
  Status Release(std::string_view id, std::string_view r, int64_t d, std::string_view e) override {
    return q_->Release(id, r, d, e);
  }
  Status Touch(std::string_view id, std::string_view r) override { return q_->Touch(id, r); }
  Status Unreserve(std::string_view id, std::string_view r) override {
    return q_->Unreserve(id, r);
  }
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
  std::unique_ptr<ServingQueue> q_;
  int stop_ = eventfd(0, EFD_CLOEXEC);
  std::thread loop_;
};

// Opens `options` on `clock`, wrapped in a LoopDrivenQueue with caller_loop.
inline std::unique_ptr<Queue> OpenLocal(QueueOptions options, std::shared_ptr<Clock> clock,
                                        bool caller_loop) {
  options.clock = std::move(clock);
  OpenOptions open;
  open.caller_loop = caller_loop;
  auto queue = OpenServingQueue(options, open);
  if (!queue.ok()) {
    ADD_FAILURE() << "OpenServingQueue(" << StoreKindName(options.store)
                  << "): " << queue.status().ToString();
    return nullptr;
  }
  if (caller_loop) return std::make_unique<LoopDrivenQueue>(std::move(queue).value());
  return std::move(queue).value();
}

// Where a harness gets the options of each fresh queue it opens.
using OptionsMaker = std::function<QueueOptions()>;

class ManualClockHarness final : public QueueHarness {
 public:
  ManualClockHarness(OptionsMaker options, bool caller_loop)
      : options_(std::move(options)), caller_loop_(caller_loop) {}
  std::unique_ptr<Queue> Open() override { return OpenLocal(options_(), clock_, caller_loop_); }
  std::shared_ptr<ManualClock> clock() const { return clock_; }
  void AdvanceMs(int64_t ms) override { clock_->Advance(ms); }
  int64_t NowMs() override { return clock_->NowMs(); }
  bool exact_time() const override { return true; }

 private:
  OptionsMaker options_;
  bool caller_loop_;
  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
};

class SystemClockHarness final : public QueueHarness {
 public:
  SystemClockHarness(OptionsMaker options, bool caller_loop)
      : options_(std::move(options)), caller_loop_(caller_loop) {}
  std::unique_ptr<Queue> Open() override {
    return OpenLocal(options_(), SystemClock(), caller_loop_);
  }
  void AdvanceMs(int64_t ms) override { WaitForSystemClockMs(ms); }
  int64_t NowMs() override { return SystemClock()->NowMs(); }
  bool exact_time() const override { return false; }

 private:
  OptionsMaker options_;
  bool caller_loop_;
};

}  // namespace delayq::conformance

#endif  // DELAYQ_TESTS_CONFORMANCE_LOCAL_QUEUE_HARNESS_H_
