// PushLedger: how the servers that push one store's jobs (src/push) count
// each instance's requests together, so that an instance's `concurrency`
// and `rate_per_s` hold across every server, and read its figures.
//
// A server takes slots before it reserves jobs for an instance, and settles
// each slot when its request ends (or when no job came for it). A slot is a
// lease: a server that dies holding one loses it after lease_ms, so the
// instance's slots come back by themselves.
//
// The Redis store implements it in Redis (ServingQueue::push_ledger); the
// in-process stores have none, and src/push counts in process with the same
// rules (push/local_ledger.h).
#ifndef DELAYQ_SERVING_PUSH_LEDGER_H_
#define DELAYQ_SERVING_PUSH_LEDGER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "delayq/subscription.h"

namespace delayq {

// What the servers know of one instance's requests.
struct PushFigures {
  // Slots held now by every server: requests in flight, and slots a server
  // took for a job it is waiting for (it gives them back within a second
  // or so when none comes).
  uint32_t slots_held = 0;
  // Requests in flight from the server that answers (Pusher::Describe fills
  // it; on one server, all of them).
  uint32_t in_flight = 0;
  uint64_t delivered = 0;       // requests answered 2xx
  uint64_t failed = 0;          // requests that failed (non-2xx, timeout, refused, ...)
  int64_t last_success_ms = 0;  // wall clock; 0: never
  int64_t last_error_ms = 0;    // wall clock; 0: never
  std::string last_error;       // what went wrong last ("HTTP 500", "timed out after 30000 ms")
};

class PushLedger {
 public:
  virtual ~PushLedger() = default;

  struct Grant {
    // One lease per slot granted (0..want of them), to settle each.
    std::vector<std::string> leases;
    // > 0 when the instance's rate held slots back: ms until one is free.
    int64_t rate_wait_ms = 0;
  };
  // Takes up to `want` slots of the instance, within its concurrency (slots
  // held by every server, leases not yet run out) and its rate_per_s
  // (requests started per second, every server's; a slot counts as a start
  // until settled unused). Each lease lasts lease_ms unless settled first.
  // `done` runs once, on a thread of the store's (post to your loop).
  virtual void Acquire(const Subscription& instance, uint32_t want, int64_t lease_ms,
                       std::function<void(Result<Grant>)> done) = 0;

  struct Outcome {
    bool used = false;  // false: no request was made; the rate's start is given back
    bool ok = false;    // a 2xx
    int64_t at_ms = 0;  // wall clock of the answer
    std::string error;  // when !ok && used
  };
  // Gives a slot back, with what its request did. Fire and forget.
  virtual void Settle(const Subscription& instance, std::string_view lease,
                      const Outcome& outcome) = 0;

  // The figures of each instance, in the order given.
  virtual void Figures(const std::vector<Subscription>& instances,
                       std::function<void(Result<std::vector<PushFigures>>)> done) = 0;

  // Forgets an instance's figures and slots (it was deleted).
  virtual void Forget(const Subscription& instance) = 0;
};

}  // namespace delayq

#endif  // DELAYQ_SERVING_PUSH_LEDGER_H_
