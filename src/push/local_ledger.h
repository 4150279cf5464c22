// LocalLedger: the PushLedger of a store that only this process pushes for
// (memory, embedded): slots, rate and figures counted in memory, under the
// same rules as the Redis store's ledger (serving/push_ledger.h). Figures
// start at zero with the process.
//
// Loop thread only; callbacks run inside the call.
#ifndef DELAYQ_PUSH_LOCAL_LEDGER_H_
#define DELAYQ_PUSH_LOCAL_LEDGER_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "delayq/clock.h"
#include "serving/push_ledger.h"

namespace delayq::push {

class LocalLedger final : public PushLedger {
 public:
  explicit LocalLedger(const Clock* clock) : clock_(clock) {}

  void Acquire(const Subscription& instance, uint32_t want, int64_t lease_ms,
               std::function<void(Result<Grant>)> done) override;
  void Settle(const Subscription& instance, std::string_view lease,
              const Outcome& outcome) override;
  void Figures(const std::vector<Subscription>& instances,
               std::function<void(Result<std::vector<PushFigures>>)> done) override;
  void Forget(const Subscription& instance) override;

 private:
  struct Instance {
    std::map<uint64_t, int64_t> leases;  // lease number -> monotonic expiry
    // The rate's GCRA: the theoretical arrival time of the next start, in
    // monotonic microseconds; a start is allowed when it is <= now.
    int64_t tat_us = 0;
    PushFigures figures;
  };
  Instance& At(const Subscription& instance);
  static void Expire(Instance& in, int64_t now_mono_ms);

  const Clock* clock_;
  std::map<std::pair<std::string, std::string>, Instance> instances_;  // (name, url)
  uint64_t next_lease_ = 1;
};

}  // namespace delayq::push

#endif  // DELAYQ_PUSH_LOCAL_LEDGER_H_
