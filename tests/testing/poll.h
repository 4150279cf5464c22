// The one polling helper of the C++ tests: wait for a condition that another
// thread or process brings about, with a deadline. Tests never sleep to let
// time pass (they move an injected clock); the pause between two polls is a
// poll interval, nothing more. Header-only: include "testing/poll.h".
#ifndef DELAYQ_TESTS_TESTING_POLL_H_
#define DELAYQ_TESTS_TESTING_POLL_H_

#include <chrono>
#include <cstdint>
#include <thread>

namespace delayq {

// Calls `done` until it returns true (then true) or `timeout` has passed
// (then false). `interval` is the pause between calls; zero yields instead.
template <typename Done>
bool PollUntil(Done&& done, std::chrono::milliseconds timeout,
               std::chrono::milliseconds interval = std::chrono::milliseconds(1)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (interval.count() > 0) {
      std::this_thread::sleep_for(interval);
    } else {
      std::this_thread::yield();
    }
  }
  return true;
}

// Like PollUntil, but the deadline is `stall` after `progress()` (a count that
// grows while work gets done) last moved: a slow machine only takes longer,
// a stall fails.
template <typename Done, typename Progress>
bool PollWhileProgressing(Done&& done, Progress&& progress, std::chrono::milliseconds stall,
                          std::chrono::milliseconds interval = std::chrono::milliseconds(1)) {
  uint64_t last = progress();
  auto deadline = std::chrono::steady_clock::now() + stall;
  while (!done()) {
    const uint64_t now = progress();
    if (now != last) {
      last = now;
      deadline = std::chrono::steady_clock::now() + stall;
    } else if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(interval);
  }
  return true;
}

}  // namespace delayq

#endif  // DELAYQ_TESTS_TESTING_POLL_H_
