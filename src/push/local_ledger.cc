// LocalLedger: slots as numbered leases with a monotonic expiry, the rate as
// GCRA without burst (one start per 1e6 / rate_per_s µs), as the Redis
// store's ledger counts them in Redis.
#include "push/local_ledger.h"

#include <algorithm>
#include <cmath>

namespace delayq::push {

LocalLedger::Instance& LocalLedger::At(const Subscription& instance) {
  return instances_[{instance.name, instance.url}];
}

void LocalLedger::Expire(Instance& in, int64_t now_mono_ms) {
  for (auto it = in.leases.begin(); it != in.leases.end();) {
    it = it->second <= now_mono_ms ? in.leases.erase(it) : std::next(it);
  }
}

void LocalLedger::Acquire(const Subscription& instance, uint32_t want, int64_t lease_ms,
                          std::function<void(Result<Grant>)> done) {
  Instance& in = At(instance);
  const int64_t now = clock_->MonotonicMs();
  Expire(in, now);
  Grant grant;
  uint32_t free = instance.concurrency > in.leases.size()
                      ? instance.concurrency - static_cast<uint32_t>(in.leases.size())
                      : 0;
  uint32_t n = std::min(want, free);
  if (instance.rate_per_s > 0 && n > 0) {
    const int64_t now_us = now * 1000;
    const auto step_us = static_cast<int64_t>(std::ceil(1e6 / instance.rate_per_s));
    in.tat_us = std::max(in.tat_us, now_us);  // no credit saved up while idle
    uint32_t allowed = 0;
    while (allowed < n && in.tat_us <= now_us) {  // one start per step, no burst
      in.tat_us += step_us;
      ++allowed;
    }
    if (allowed < n) grant.rate_wait_ms = std::max<int64_t>(1, (in.tat_us - now_us + 999) / 1000);
    n = allowed;
  }
  for (uint32_t i = 0; i < n; ++i) {
    uint64_t lease = next_lease_++;
    in.leases.emplace(lease, now + lease_ms);
    grant.leases.push_back(std::to_string(lease));
  }
  in.figures.slots_held = static_cast<uint32_t>(in.leases.size());
  done(std::move(grant));
}

void LocalLedger::Settle(const Subscription& instance, std::string_view lease,
                         const Outcome& outcome) {
  auto found = instances_.find({instance.name, instance.url});
  if (found == instances_.end()) return;  // forgotten meanwhile
  Instance& in = found->second;
  uint64_t number = 0;
  for (char c : lease) number = number * 10 + static_cast<uint64_t>(c - '0');
  in.leases.erase(number);
  in.figures.slots_held = static_cast<uint32_t>(in.leases.size());
  if (!outcome.used) {
    // The start this slot was counted as never happened: give it back.
    if (instance.rate_per_s > 0) {
      in.tat_us -= static_cast<int64_t>(std::ceil(1e6 / instance.rate_per_s));
    }
    return;
  }
  if (outcome.ok) {
    ++in.figures.delivered;
    in.figures.last_success_ms = outcome.at_ms;
  } else {
    ++in.figures.failed;
    in.figures.last_error_ms = outcome.at_ms;
    in.figures.last_error = outcome.error;
  }
}

void LocalLedger::Figures(const std::vector<Subscription>& instances,
                          std::function<void(Result<std::vector<PushFigures>>)> done) {
  std::vector<PushFigures> out;
  out.reserve(instances.size());
  const int64_t now = clock_->MonotonicMs();
  for (const Subscription& s : instances) {
    auto found = instances_.find({s.name, s.url});
    if (found == instances_.end()) {
      out.emplace_back();
      continue;
    }
    Expire(found->second, now);
    found->second.figures.slots_held = static_cast<uint32_t>(found->second.leases.size());
    out.push_back(found->second.figures);
  }
  done(std::move(out));
}

void LocalLedger::Forget(const Subscription& instance) {
  instances_.erase({instance.name, instance.url});
}

}  // namespace delayq::push
