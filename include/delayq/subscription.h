// Push delivery (SPEC §8, "service mode"): an application registers the
// HTTP endpoints that handle a topic's jobs, and the server POSTs each job
// there when it is due, instead of the application reserving it.
//
// A Subscription is one endpoint (an instance) of an application: a name
// shared by every instance of that application, and the instance's url.
// Instances under one name share the name's deliveries, round-robin over
// the live ones, each within its own concurrency. (name, url) identifies an
// instance: putting it again renews and updates it.
//
// Stores keep subscriptions as a second kind of record beside their jobs:
// the embedded log (durable, replayed on open), Redis (shared by every
// server on it). docs/push.md says what a delivery does.
#ifndef DELAYQ_SUBSCRIPTION_H_
#define DELAYQ_SUBSCRIPTION_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq {

// Names: 1–100 bytes of [A-Za-z0-9._:-], like topics.
inline constexpr size_t kMaxSubscriptionNameBytes = 100;
inline constexpr size_t kMaxSubscriptionUrlBytes = 2048;
inline constexpr size_t kMaxSubscriptionTopics = 100;
inline constexpr uint32_t kMaxSubscriptionConcurrency = 10'000;
inline constexpr size_t kMaxSubscriptionSecrets = 10;
// The defaults of an instance's options.
inline constexpr uint32_t kDefaultPushConcurrency = 10;
inline constexpr uint32_t kDefaultPushTimeoutMs = 30'000;
inline constexpr int64_t kMaxPushTimeoutMs = 30LL * 60 * 1000;  // 30 minutes
inline constexpr int64_t kMaxSubscriptionTtlMs = 7LL * 24 * 3600 * 1000;
inline constexpr int64_t kMaxPushBackoffMs = 24LL * 3600 * 1000;

// How a failed delivery is tried again (Cloud Tasks' shape): the first
// retry waits min_backoff_ms, each next one twice as long for max_doublings
// retries, then grows by 2^max_doublings x min_backoff_ms per retry, up to
// max_backoff_ms.
// Jitter takes up to a fifth off a wait, never below min_backoff_ms.
struct RetryPolicy {
  int64_t min_backoff_ms = 1'000;
  int64_t max_backoff_ms = 300'000;
  uint32_t max_doublings = 16;
};

struct Subscription {
  std::string name;                                // the application; required
  std::string url;                                 // http:// or https://; required
  std::vector<std::string> topics;                 // 1..kMaxSubscriptionTopics topic names
  uint32_t concurrency = kDefaultPushConcurrency;  // requests in flight, 1..10000
  uint32_t timeout_ms = kDefaultPushTimeoutMs;     // per request, 1..kMaxPushTimeoutMs
  // 0: stays until deleted. Else the instance lapses unless put again within
  // this long (1000..kMaxSubscriptionTtlMs).
  int64_t ttl_ms = 0;
  // Standard Webhooks secrets, "whsec_" + base64 of the key; each signs
  // every request (several during a rotation). Empty: requests unsigned.
  std::vector<std::string> secrets;
  RetryPolicy retry;
  // Requests started per second to this instance, counted across every
  // server; 0: no limit.
  double rate_per_s = 0;

  // Kept by the store, not given by the caller.
  int64_t created_ms = 0;  // wall clock of the first put
  int64_t renewed_ms = 0;  // wall clock of the latest put
  // renewed_ms + ttl_ms, or 0 without a ttl: from then on the instance has
  // lapsed, gets nothing, and the store forgets it.
  int64_t expires_ms = 0;
};

// Checks every caller-given field of a subscription; kInvalidArgument naming
// the field ("url: scheme must be http or https", "retry.min_backoff_ms: ...").
Status ValidateSubscription(const Subscription& s);
// A topic-like name for subscriptions: kInvalidArgument naming `what`.
Status ValidateSubscriptionName(std::string_view name);

// Whether an instance has lapsed at wall time now_ms.
inline bool Lapsed(const Subscription& s, int64_t now_ms) {
  return s.expires_ms != 0 && s.expires_ms <= now_ms;
}

}  // namespace delayq

#endif  // DELAYQ_SUBSCRIPTION_H_
