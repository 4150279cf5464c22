// Journal: how the engine tells a durable store what changed, and JobImage:
// a job's durable fields, viewed in place (no copies).
//
// The engine calls the journal inside each state change, in the order the
// changes happen, so the calls replayed in order rebuild the same jobs and
// pauses (Engine::Restore*). Not every transition is told, only those that
// cannot be derived from time (the decision is written down in
// docs/log-format.md):
//   JobPut      a job was added (or replaced: JobRemoved of the old one first);
//               answers where its record went (a location, FarStore)
//   JobUpdate   reserved, released, touched, buried, kicked, TTR ran out
//   JobRemoved  finished, deleted, replaced
//   TopicPause  paused or resumed
//   Dedup       an add with an idempotency key was applied (after its JobPut)
// Not told: delayed -> ready (run_at says when), a pause that ran out
// (its end time says when), waits of reserves (they do not survive a restart).
#ifndef DELAYQ_ENGINE_JOURNAL_H_
#define DELAYQ_ENGINE_JOURNAL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "delayq/job.h"
#include "delayq/status.h"

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

// Where a job's record lies in the store: segment << 36 | byte offset (see
// MakeLocation); 0 for none. Opaque to the engine.
inline constexpr uint64_t MakeLocation(uint64_t segment, uint64_t offset) {
  return segment << 36 | offset;
}
inline constexpr uint64_t LocationSegment(uint64_t location) { return location >> 36; }
inline constexpr uint64_t LocationOffset(uint64_t location) {
  return location & ((uint64_t{1} << 36) - 1);
}
// Segments numbered up to this fit a location (bit 63 stays clear).
inline constexpr uint64_t kMaxLocationSegment = (uint64_t{1} << 27) - 1;

// A job read back from the store (FarStore::ReadJob), owning its text.
struct StoredJob {
  JobImage fields;  // the scalars; its views are not set
  std::string id, topic, body, last_error;
  bool generated_id = false;
  // The job as a JobImage whose views point into this.
  JobImage Image() const {
    JobImage i = fields;
    i.handle = 0;
    i.id = id;
    i.generated_id = generated_id;
    i.topic = topic;
    i.body = body;
    i.last_error = last_error;
    return i;
  }
};

class Journal {
 public:
  virtual ~Journal() = default;
  // Each gets the job as it is after the change (JobRemoved: just before).
  // JobPut answers the location of the job's record (0: none kept).
  virtual uint64_t JobPut(const JobImage& job) = 0;
  virtual void JobUpdate(const JobImage& job) = 0;
  virtual void JobRemoved(const JobImage& job) = 0;
  // paused_until_ms: wall clock; 0 = not paused, -1 = until resumed.
  virtual void TopicPause(std::string_view topic, int64_t paused_until_ms) = 0;
  // An add with an idempotency key; nothing by default (a journal that does
  // not keep them forgets them at a restart).
  virtual void Dedup(const DedupImage& /*add*/) {}
};

// The store far-future jobs' records are read back from (the embedded
// store's log), for an engine with a memory window (EngineOptions).
class FarStore {
 public:
  virtual ~FarStore() = default;
  // The job whose PUT record is at `location`. Errors: the store's (I/O, a
  // record that does not check out).
  virtual Status ReadJob(uint64_t location, StoredJob* out) = 0;
  // Writes the job in full again, as its one record from now on (a job
  // going far that has changed since its add); answers the location, 0 if
  // it cannot now (then the job stays in memory for a later try).
  virtual uint64_t StoreJob(const JobImage& job) = 0;
};

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_JOURNAL_H_
