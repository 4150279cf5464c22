// The subscription conformance suite: the subscription calls of
// ServingQueue (PutSubscriptionAsync, DeleteSubscriptionAsync,
// SubscriptionsAsync; src/serving/serving_queue.h) as every store that keeps
// subscriptions must answer them — the in-process stores (memory, embedded)
// and the Redis store.
//
// How a store plugs in (local_subscription_test.cc is a complete example):
//
//   1. Write a SubscriptionHarness: Open() returns a fresh ServingQueue with
//      no subscriptions, on a ManualClock that AdvanceMs() moves.
//   2. Instantiate the suite in a file linked with subscription_conformance.cc:
//
//        INSTANTIATE_TEST_SUITE_P(
//            Redis, SubscriptionConformance,
//            testing::Values(SubscriptionImpl{
//                .name = "Standalone",
//                .make = [] { return std::make_unique<RedisSubscriptionHarness>(); }}),
//            SubscriptionImplName);
//
// Time is exact: the store's wall clock is a ManualClock, so created_ms,
// renewed_ms and expires_ms are checked to the millisecond and a lapse is
// checked 1 ms before and at expires_ms. Answers may come inside the call
// or later on another thread; the helpers wait for them with kDeadline.
#ifndef DELAYQ_TESTS_CONFORMANCE_SUBSCRIPTION_CONFORMANCE_H_
#define DELAYQ_TESTS_CONFORMANCE_SUBSCRIPTION_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/subscription.h"
#include "serving/serving_queue.h"

namespace delayq::conformance {

class SubscriptionHarness {
 public:
  virtual ~SubscriptionHarness() = default;
  // A fresh queue that keeps no subscriptions yet, on the harness's clock.
  // Returns nullptr (and may log why) if it cannot.
  virtual std::unique_ptr<ServingQueue> Open() = 0;
  // Moves the queue's wall clock forward by exactly `ms`.
  virtual void AdvanceMs(int64_t ms) = 0;
  // The queue's wall clock in Unix ms.
  virtual int64_t NowMs() = 0;
};

struct SubscriptionImpl {
  std::string name;  // [A-Za-z0-9_] only (a gtest parameter name)
  std::function<std::unique_ptr<SubscriptionHarness>()> make;  // once per test
};

std::string SubscriptionImplName(const testing::TestParamInfo<SubscriptionImpl>& info);
void PrintTo(const SubscriptionImpl& impl, std::ostream* os);

class SubscriptionConformance : public testing::TestWithParam<SubscriptionImpl> {
 protected:
  void SetUp() override;
  void TearDown() override;

  SubscriptionHarness& harness() { return *harness_; }
  ServingQueue& queue() { return *queue_; }

  std::unique_ptr<SubscriptionHarness> harness_;
  std::unique_ptr<ServingQueue> queue_;  // destroyed before harness_
};

// --- helpers, also for store-specific tests -----------------------------------

inline constexpr auto kSubscriptionDeadline = std::chrono::seconds(5);

// A valid instance of `name` at `url` for topic "orders".
inline Subscription Instance(std::string name, std::string url) {
  Subscription s;
  s.name = std::move(name);
  s.url = std::move(url);
  s.topics = {"orders"};
  return s;
}

// What an async call answered, waiting up to kSubscriptionDeadline.
template <typename T>
Result<T> Await(const std::function<void(std::function<void(Result<T>)>)>& call) {
  auto answer = std::make_shared<std::promise<Result<T>>>();
  auto future = answer->get_future();
  call([answer](Result<T> r) { answer->set_value(std::move(r)); });
  if (future.wait_for(kSubscriptionDeadline) != std::future_status::ready) {
    return Internal("the call was not answered within the deadline");
  }
  return future.get();
}

inline Result<Subscription> Put(ServingQueue& q, const Subscription& s) {
  return Await<Subscription>([&](auto done) { q.PutSubscriptionAsync(s, std::move(done)); });
}
inline Result<uint64_t> Unsubscribe(ServingQueue& q, std::string_view name,
                                    std::string_view url = "") {
  return Await<uint64_t>([&](auto done) { q.DeleteSubscriptionAsync(name, url, std::move(done)); });
}
inline Result<std::vector<Subscription>> List(ServingQueue& q, std::string_view name = "") {
  return Await<std::vector<Subscription>>(
      [&](auto done) { q.SubscriptionsAsync(name, std::move(done)); });
}

// Puts `s`, EXPECTing success; the stored record (a default one on failure).
Subscription MustPut(ServingQueue& q, const Subscription& s);
// The instances listed, EXPECTing success.
std::vector<Subscription> MustList(ServingQueue& q, std::string_view name = "");
// "name url" of each, in order: what a test compares lists by.
std::vector<std::string> Keys(const std::vector<Subscription>& list);
// Whether every field of a and b is the same (names the first that differs).
testing::AssertionResult SameSubscription(const Subscription& a, const Subscription& b);

}  // namespace delayq::conformance

#endif  // DELAYQ_TESTS_CONFORMANCE_SUBSCRIPTION_CONFORMANCE_H_
