// The Redis store's side of push delivery (src/push): subscriptions as
// records of one hash, and the PushLedger that every server on the store
// shares, both under bucket 0's tag and changed only by the scripts
// subscriptions.lua and push_ledger.lua, which read Redis's clock (TIME) so
// that every server compares the same times. Keys, the record and the
// scripts' contracts: docs/redis-store.md, "Push delivery".
//
// The calls are ops of RedisQueue's dispatcher (redis_queue_ops.h) like any
// other: subscription calls are a script call each; every ledger call of a
// round (acquires, settles, figures, forgets, of any instances) shares one
// push_ledger call. Callbacks run on the dispatcher thread.
#ifndef DELAYQ_REDIS_STORE_REDIS_PUSH_H_
#define DELAYQ_REDIS_STORE_REDIS_PUSH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/subscription.h"
#include "redis_store/redis_queue_ops.h"
#include "serving/push_ledger.h"

namespace delayq::rq {

// The record's version (its first byte); a reader refuses another.
inline constexpr uint8_t kSubscriptionRecordVersion = 1;

// The record of `s` as subscriptions.lua takes it: the head's times 0 (the
// script writes them), then every field the caller gives. REQUIRES:
// ValidateSubscription(s) is ok.
std::string EncodeSubscription(const Subscription& s);
// A stored record: every field, the store's times included. kInternal
// naming what is wrong when it is not one.
Result<Subscription> DecodeSubscription(std::string_view record);

// The hash field (and ledger key suffix) of an instance: "<name> <url>".
std::string InstanceKey(const Subscription& s);

using SubscriptionDone = std::function<void(Result<Subscription>)>;
using SubscriptionsDone = std::function<void(Result<std::vector<Subscription>>)>;

// REQUIRES (all): arguments validated (ValidateSubscription,
// ValidateSubscriptionName).
std::unique_ptr<Op> MakePutSubscription(const Subscription& s, SubscriptionDone done);
// url empty: every instance of name.
std::unique_ptr<Op> MakeDeleteSubscription(std::string_view name, std::string_view url,
                                           CountDone done);
// name empty: every name. Sorted by name, then url.
std::unique_ptr<Op> MakeListSubscriptions(std::string_view name, SubscriptionsDone done);

// The PushLedger of a RedisQueue: each call an op handed to `submit` (the
// queue's dispatcher). Thread-safety: any thread.
class RedisLedger final : public PushLedger {
 public:
  explicit RedisLedger(std::function<void(std::unique_ptr<Op>)> submit)
      : submit_(std::move(submit)) {}

  void Acquire(const Subscription& instance, uint32_t want, int64_t lease_ms,
               std::function<void(Result<Grant>)> done) override;
  void Settle(const Subscription& instance, std::string_view lease,
              const Outcome& outcome) override;
  void Figures(const std::vector<Subscription>& instances,
               std::function<void(Result<std::vector<PushFigures>>)> done) override;
  void Forget(const Subscription& instance) override;

 private:
  const std::function<void(std::unique_ptr<Op>)> submit_;
};

}  // namespace delayq::rq

#endif  // DELAYQ_REDIS_STORE_REDIS_PUSH_H_
