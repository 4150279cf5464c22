#include "delayq/clock.h"

#include <time.h>

#include <algorithm>

namespace delayq {
namespace {

int64_t ReadMs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

class RealClock final : public Clock {
 public:
  int64_t NowMs() const override { return ReadMs(CLOCK_REALTIME); }
  int64_t MonotonicMs() const override { return ReadMs(CLOCK_MONOTONIC); }
  bool IsRealTime() const override { return true; }
  int Subscribe(std::function<void()>) override { return 0; }
  void Unsubscribe(int) override {}
};

}  // namespace

std::shared_ptr<Clock> SystemClock() {
  static const std::shared_ptr<Clock> kClock = std::make_shared<RealClock>();
  return kClock;
}

ManualClock::ManualClock(int64_t wall_ms) : wall_ms_(wall_ms) {}

int64_t ManualClock::NowMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return wall_ms_;
}

int64_t ManualClock::MonotonicMs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return mono_ms_;
}

int ManualClock::Subscribe(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.emplace_back(next_token_, std::move(fn));
  return next_token_++;
}

void ManualClock::Unsubscribe(int token) {
  std::lock_guard<std::mutex> lock(mu_);
  subscribers_.erase(std::remove_if(subscribers_.begin(), subscribers_.end(),
                                    [token](const auto& s) { return s.first == token; }),
                     subscribers_.end());
}

void ManualClock::Advance(int64_t ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ms > 0) {
      wall_ms_ += ms;
      mono_ms_ += ms;
    }
  }
  Notify();
}

void ManualClock::StepWall(int64_t ms) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    wall_ms_ += ms;
  }
  Notify();
}

void ManualClock::Notify() {
  // Subscribers are called under the lock so that Unsubscribe() returning
  // guarantees the callback is not running; they must not call the clock.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : subscribers_) s.second();
}

}  // namespace delayq
