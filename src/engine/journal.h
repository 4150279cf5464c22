// Journal: how the engine tells a durable store what changed, and JobImage:
// a job's durable fields, viewed in place (no copies).
//
// The engine calls the journal inside each state change, in the order the
// changes happen, so the calls replayed in order rebuild the same jobs and
// pauses (Engine::Restore*). Not every transition is told, only those that
// cannot be derived from time (the decision is written down in
// docs/log-format.md):
//   JobPut      a job was added (or replaced: JobRemoved of the old one first)
//   JobUpdate   reserved, released, touched, buried, kicked, TTR ran out
//   JobRemoved  finished, deleted, replaced
//   TopicPause  paused or resumed
//   Dedup       an add with an idempotency key was applied (after its JobPut)
// Not told: delayed -> ready (run_at says when), a pause that ran out
// (its end time says when), waits of reserves (they do not survive a restart).
#ifndef DELAYQ_ENGINE_JOURNAL_H_
#define DELAYQ_ENGINE_JOURNAL_H_

#include <cstdint>
#include <string_view>

#include "delayq/job.h"

namespace delayq::engine {

struct JobImage {
  // The id's text; empty when `handle` says it instead.
  std::string_view id;
  // Non-zero: the id is FormatGeneratedId(seq, handle), not spelled out (the
  // engine's own generated ids, as it hands them to the journal).
  uint32_t handle = 0;
  bool generated_id = false;  // the engine made the id up (see FormatGeneratedId)
  uint64_t seq = 0;           // unique per add: a replaced job has a new one
  std::string_view topic;
  JobState state = JobState::kDelayed;
  int64_t run_at_ms = 0;
  int64_t reserved_until_ms = 0;  // wall clock; only for kReserved
  // kReserved by a reserve with a TTR of its own (ReserveRequest::ttr_ms):
  // that TTR, which a touch extends by; 0: the job's ttr_ms.
  uint32_t reservation_ttr_ms = 0;
  uint32_t ttr_ms = 0;
  uint32_t priority = 0;
  uint32_t max_attempts = 0;
  uint32_t attempts = 0;
  // Deliveries given back by Unreserve (not counted in attempts). A
  // receipt names delivery number attempts + give_backs, which never goes
  // down, so the count must survive a restart for receipts to stay unique.
  uint32_t give_backs = 0;
  std::string_view last_error;
  std::string_view body;
};

// An add made with an idempotency key, remembered for the dedup window: what
// a repeat of it is answered (Engine::Add, docs/api.md "Idempotent adds").
struct DedupImage {
  std::string_view add_id;              // the id the add named; empty for a generated one
  std::string_view key;                 // JobSpec::idempotency_key
  std::string_view id;                  // the id it answered (the generated one's text)
  JobState state = JobState::kDelayed;  // what it answered: kDelayed or kReady
  int64_t run_at_ms = 0;                // what it answered
  int64_t expires_ms = 0;               // wall clock: forgotten from then on
};

class Journal {
 public:
  virtual ~Journal() = default;
  // Each gets the job as it is after the change (JobRemoved: just before).
  virtual void JobPut(const JobImage& job) = 0;
  virtual void JobUpdate(const JobImage& job) = 0;
  virtual void JobRemoved(const JobImage& job) = 0;
  // paused_until_ms: wall clock; 0 = not paused, -1 = until resumed.
  virtual void TopicPause(std::string_view topic, int64_t paused_until_ms) = 0;
  // An add with an idempotency key; nothing by default (a journal that does
  // not keep them forgets them at a restart).
  virtual void Dedup(const DedupImage& /*add*/) {}
};

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_JOURNAL_H_
