// Pusher: service mode (SPEC §8, docs/push.md). For each subscription name
// it reserves due jobs of its instances' topics from the ServingQueue on the
// server's event loop, as a waiting client does, and POSTs each to one live
// instance (round-robin, within the instance's slots), then finishes,
// releases with backoff, or buries the job from the answer.
//
// It is also what the front ends call to register, list and remove
// subscriptions: Put and Delete go to the store and reload the pusher's
// view at once; every server also reloads every `refresh_ms`, so one on the
// same Redis sees another's registrations within that.
//
// Loop thread only (every method, every callback).
#ifndef DELAYQ_PUSH_PUSHER_H_
#define DELAYQ_PUSH_PUSHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/clock.h"
#include "delayq/status.h"
#include "delayq/subscription.h"
#include "net/event_loop.h"
#include "push/http_client.h"
#include "serving/push_ledger.h"
#include "serving/serving_queue.h"

namespace delayq::push {

struct PusherOptions {
  HttpClientOptions http;
  std::shared_ptr<const Clock> clock;  // default: SystemClock()
  // How often the subscriptions are read again from the store.
  int64_t refresh_ms = 1000;
  // How long one reserve for a name waits for a job before it is made again.
  int64_t reserve_wait_ms = 1000;
};

// One instance as GET /v1/subscriptions shows it.
struct InstanceView {
  Subscription subscription;
  PushFigures figures;
};

struct PusherStats {
  uint64_t requests = 0;   // POSTs started
  uint64_t delivered = 0;  // 2xx
  uint64_t failed = 0;     // everything else
  uint64_t in_flight = 0;
  uint64_t subscriptions = 0;  // live instances known
};

class Pusher {
 public:
  static Result<std::unique_ptr<Pusher>> Create(net::EventLoop* loop, ServingQueue* queue,
                                                PusherOptions options);
  ~Pusher();
  Pusher(const Pusher&) = delete;
  Pusher& operator=(const Pusher&) = delete;

  // Reads the subscriptions and starts pushing.
  void Start();
  // Stops reserving and lets requests in flight end; `done` runs when none is
  // left, or after deadline_ms, when those still in flight are cancelled and
  // their jobs given back (Unreserve: the attempt is not counted).
  void Stop(int64_t deadline_ms, std::function<void()> done);

  // The front ends' calls. Put: ValidateSubscription, store, reload.
  void Put(const Subscription& s, std::function<void(Result<Subscription>)> done);
  // Removes (name, url), or every instance of name when url is empty;
  // answers how many went.
  void Delete(std::string_view name, std::string_view url,
              std::function<void(Result<uint64_t>)> done);
  // The live instances of `name` (every name when empty), with figures.
  void Describe(std::string_view name, std::function<void(Result<std::vector<InstanceView>>)> done);

  PusherStats stats() const;

 private:
  class Impl;
  explicit Pusher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace delayq::push

#endif  // DELAYQ_PUSH_PUSHER_H_
