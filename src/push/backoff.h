// When a failed push is tried again: the retry policy's backoff (Cloud
// Tasks' shape, include/delayq/subscription.h RetryPolicy) with jitter, and
// the receiver's Retry-After, which overrides it on 429 and 503.
#ifndef DELAYQ_PUSH_BACKOFF_H_
#define DELAYQ_PUSH_BACKOFF_H_

#include <cstdint>
#include <optional>
#include <string_view>

#include "delayq/subscription.h"

namespace delayq::push {

// The wait before the next attempt after `failures` failed ones (1 = the
// first failed). min_backoff_ms after the first; doubling for max_doublings
// retries; then growing linearly by 2^max_doublings x min_backoff_ms per
// retry (Cloud Tasks' documented example: 10 s, 300 s, 3 doublings gives 10,
// 20, 40, 80, 160, 240, 300 s); never over max_backoff_ms. `unit` in [0,1) (a random draw) takes up to a fifth off,
// never below min_backoff_ms. Pure: the caller draws `unit`.
int64_t BackoffMs(const RetryPolicy& policy, uint32_t failures, double unit);

// A Retry-After header's value (delay-seconds, or an HTTP-date) as ms from
// now_ms (wall clock); nullopt when absent or unreadable. Capped at
// max_ms; never negative.
std::optional<int64_t> ParseRetryAfterMs(std::string_view value, int64_t now_ms, int64_t max_ms);

}  // namespace delayq::push

#endif  // DELAYQ_PUSH_BACKOFF_H_
