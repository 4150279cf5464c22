// Time is injected. delayq reads two clocks:
//
//  - the wall clock (Unix ms), which defines a job's run_at_ms: "run at 09:00"
//    means 09:00 by the wall clock, even if the clock is stepped meanwhile;
//  - a monotonic clock, which measures durations that must not stretch or
//    shrink when the wall clock is stepped: TTR reservations, long-poll waits
//    and topic pauses.
//
// SystemClock reads the real clocks. ManualClock is for tests: time moves only
// when the test moves it, and the owners of a queue are told so they can act
// on the new time at once (see Subscribe).
//
// Thread-safety: all methods of both clocks are safe to call concurrently.
#ifndef DELAYQ_CLOCK_H_
#define DELAYQ_CLOCK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace delayq {

class Clock {
 public:
  virtual ~Clock() = default;

  // Wall-clock time in milliseconds since the Unix epoch. May jump either way.
  virtual int64_t NowMs() const = 0;
  // Milliseconds from an arbitrary origin; never decreases.
  virtual int64_t MonotonicMs() const = 0;

  // True for clocks that advance by themselves with real time; false for a
  // manual clock, whose owner must be told of every move (Subscribe).
  virtual bool IsRealTime() const = 0;

  // Calls `fn` after every change of time on a manual clock. Real-time clocks
  // never call it. Returns a token for Unsubscribe.
  // REQUIRES: fn is cheap, thread-safe, and does not call back into the clock.
  virtual int Subscribe(std::function<void()> fn) = 0;
  virtual void Unsubscribe(int token) = 0;
};

// The process-wide real clock (CLOCK_REALTIME and CLOCK_MONOTONIC).
std::shared_ptr<Clock> SystemClock();

class ManualClock final : public Clock {
 public:
  // Starts at wall time `wall_ms` and monotonic time 0.
  explicit ManualClock(int64_t wall_ms = 1'700'000'000'000);

  int64_t NowMs() const override;
  int64_t MonotonicMs() const override;
  bool IsRealTime() const override { return false; }
  int Subscribe(std::function<void()> fn) override;
  void Unsubscribe(int token) override;

  // Moves both clocks forward by `ms` (>= 0) and notifies subscribers.
  void Advance(int64_t ms);
  // Steps only the wall clock by `ms` (either sign), as an NTP step or an
  // operator would; the monotonic clock is untouched.
  void StepWall(int64_t ms);

 private:
  void Notify();

  mutable std::mutex mu_;
  int64_t wall_ms_;                                                 // GUARDED_BY(mu_)
  int64_t mono_ms_ = 0;                                             // GUARDED_BY(mu_)
  int next_token_ = 1;                                              // GUARDED_BY(mu_)
  std::vector<std::pair<int, std::function<void()>>> subscribers_;  // GUARDED_BY(mu_)
};

}  // namespace delayq

#endif  // DELAYQ_CLOCK_H_
