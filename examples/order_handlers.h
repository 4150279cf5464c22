// The work of examples/worker.cc and examples/remote_worker.cc, which differ
// only in where the queue lives: the handler of topic "orders.close" (success
// closes an order, a thrown exception retries it later with backoff, Bury
// sets an unparsable one aside), the jobs both programs add, and how they
// wait for them and stop.
#ifndef DELAYQ_EXAMPLES_ORDER_HANDLERS_H_
#define DELAYQ_EXAMPLES_ORDER_HANDLERS_H_

#include <atomic>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>

#include "delayq/queue.h"
#include "delayq/worker.h"

namespace orders {

// Registers the handler of "orders.close" on `worker`; each order closed adds
// one to *closed. Call before Start.
inline delayq::Status HandleOrders(delayq::Worker& worker, std::atomic<int>* closed) {
  delayq::TopicOptions topic;
  topic.concurrency = 2;        // of this topic, at most 2 at once
  topic.backoff.base_ms = 200;  // retries after 200 ms, then 200-400 ms, ...
  return worker.Handle(
      "orders.close",
      [closed](const delayq::Delivery& job) {
        if (job.body == "not json") return delayq::Outcome::Bury("cannot parse the order");
        if (job.body == R"({"order":3})" && job.attempts == 1) {
          throw std::runtime_error("payment service busy");  // retried with backoff
        }
        std::printf("closed %s (attempt %u)\n", job.id.c_str(), job.attempts);
        ++*closed;
        return delayq::Outcome::Success();
      },
      topic);
}

// Adds order-1..3, due in 100, 200 and 300 ms, and order-bad, due at once.
// An order kept from an earlier run (kExists) is fine: order-bad stays
// buried from the first run.
inline delayq::Status AddOrders(delayq::Queue& queue) {
  for (int i = 1; i <= 3; ++i) {
    delayq::JobSpec spec;
    spec.topic = "orders.close";
    spec.id = "order-" + std::to_string(i);
    spec.delay_ms = 100 * i;
    spec.body = R"({"order":)" + std::to_string(i) + "}";
    auto added = queue.Add(spec);
    if (!added.ok() && added.status().code() != delayq::Code::kExists) return added.status();
  }
  delayq::JobSpec bad;
  bad.topic = "orders.close";
  bad.id = "order-bad";
  bad.body = "not json";
  auto added = queue.Add(bad);
  if (!added.ok() && added.status().code() != delayq::Code::kExists) return added.status();
  return delayq::Status::Ok();
}

// Waits (at most 10 s) for the three orders, stops the worker (a drain of up
// to 5 s), prints its figures. The exit code: 0 when all three were closed.
inline int WaitStopAndReport(delayq::Worker& worker, const std::atomic<int>& closed) {
  for (int i = 0; i < 1000 && closed < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  worker.Stop(5000);
  delayq::WorkerStats stats = worker.Stats();
  std::printf("succeeded %llu, retried %llu, buried %llu\n",
              static_cast<unsigned long long>(stats.succeeded),
              static_cast<unsigned long long>(stats.retried),
              static_cast<unsigned long long>(stats.buried));
  return closed == 3 ? 0 : 1;
}

}  // namespace orders

#endif  // DELAYQ_EXAMPLES_ORDER_HANDLERS_H_
