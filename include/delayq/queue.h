// Queue: the one interface to a delay queue, whatever keeps it.
//
// Three implementations fit it: the in-process engine (store "memory", and
// "embedded" with its durable log), the Redis store, and the network client
// that speaks to a `delayq serve`. The worker runtime and the conformance
// test suite are written against this interface only.
//
// Thread-safety: every method of every implementation may be called from any
// number of threads at once.
//
// Waiting without a thread per waiter: ReserveAsync registers a callback and
// returns at once, so a server can hold thousands of long-polls. Reserve() is
// the blocking convenience built on it.
//
// Guarantees (SPEC §4; docs/api.md says the same per call):
//  - At least once: an added job is handed out until it is finished or
//    deleted, across restarts (within the fsync policy) and across workers
//    that die (its reservation expires after its TTR).
//  - A receipt names one delivery and is never issued again (not after a
//    release, an Unreserve or a restart), so Finish, Release, Touch and Bury
//    with an older delivery's receipt fail with kStaleReceipt.
//  - Never twice at once while held: a second delivery happens only once a
//    reservation truly expired. Keeping it alive is the holder's part
//    (Touch; delayq::Worker touches at half the TTR, retries failed touches
//    and resends failed acknowledgments, during Stop's drain too).
//  - A repeated add with the same JobSpec::idempotency_key within the dedup
//    window changes nothing, even if the job was finished meanwhile (the
//    network client sends one key per Add call on every attempt).
//  - Embedded store, FsyncPolicy::kAlways: a call that changed something
//    returns once the change is on disk (a server's reply leaves then too).
//
// This header is the application's API. What a server needs beyond it (the
// asynchronous forms of every call, a driver for its event loop, the store's
// own figures) is the internal ServingQueue (src/serving), which every store
// implements.
#ifndef DELAYQ_QUEUE_H_
#define DELAYQ_QUEUE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/clock.h"
#include "delayq/job.h"
#include "delayq/options.h"
#include "delayq/status.h"

namespace delayq {

inline constexpr uint32_t kMaxReserveCount = 1000;
inline constexpr size_t kMaxReserveTopics = 100;

struct ReserveRequest {
  std::vector<std::string> topics;  // 1..kMaxReserveTopics valid topic names
  uint32_t count = 1;               // jobs at most, 1..kMaxReserveCount
  // How long to wait for the first job when none is ready. 0: answer at once.
  // When jobs become ready during the wait, the callback gets up to `count`
  // of those ready at that moment; it does not wait to fill the batch.
  int64_t wait_ms = 0;
  // Bytes of bodies one reply may carry at most; 0: no limit. The batch
  // stops before the job that would take it past this, but always holds at
  // least one job, however large; the jobs left stay ready. A server sets it
  // from its output limit, so a batch it cannot write is never taken out of
  // the queue (see docs/api.md, "Batches").
  uint64_t max_bytes = 0;
  // The TTR of the reservations this reserve makes, in ms; 0: each job's own
  // (JobSpec::ttr_ms). Any other value (a JobSpec's ttr_ms allows every
  // uint32_t above 0) replaces the job's TTR for this delivery alone: the
  // reservation ends ttr_ms after the reserve unless touched, the Delivery's
  // ttr_ms and reserved_until_ms say so, and a Touch of this delivery
  // extends it by ttr_ms again. The job keeps its own ttr_ms (JobInfo) for
  // its later deliveries. An in-process caller that bounds how long it holds
  // a job (the pusher: one HTTP request) sets it, so a holder that dies
  // frees the job after that bound instead of the job's TTR. Embedded store:
  // after a restart the deadline is kept (the log has it) but a touch
  // extends by the job's own TTR. The network client refuses it
  // (kInvalidArgument): the wire protocols do not carry it.
  uint32_t ttr_ms = 0;
};

// Checks a reserve's topics (1..kMaxReserveTopics valid names), count and
// wait, as every Queue implementation does. Returns kInvalidArgument naming
// the field.
Status ValidateReserveRequest(const ReserveRequest& req);

using Deliveries = std::vector<Delivery>;
// Called exactly once per ReserveAsync, unless cancelled first: with the jobs
// handed over (empty when the wait ran out) or an error.
using ReserveCallback = std::function<void(Result<Deliveries>)>;

// One acknowledgment of a reserved job, for Queue::Acknowledge: what Finish,
// Release or Bury would do with it.
struct Ack {
  enum class Kind : unsigned char { kFinish, kRelease, kBury };
  Kind kind = Kind::kFinish;
  std::string id;
  std::string receipt;   // as Finish's (empty: by id alone)
  int64_t delay_ms = 0;  // kRelease: due again after this, >= 0
  std::string text;      // kRelease: the error; kBury: the reason
};

struct TopicInfo {
  std::string name;
  uint64_t delayed = 0;
  uint64_t ready = 0;
  uint64_t reserved = 0;
  uint64_t buried = 0;
  uint64_t waiting = 0;  // reserves waiting on this topic
  bool paused = false;
  int64_t paused_for_ms = 0;  // remaining pause; -1 = until resumed
};

struct QueueStats {
  uint64_t jobs = 0;  // live jobs in every state
  uint64_t delayed = 0;
  uint64_t ready = 0;
  uint64_t reserved = 0;
  uint64_t buried = 0;
  uint64_t topics = 0;
  uint64_t waiting = 0;  // reserves waiting
  // Counters since start.
  uint64_t added = 0;
  uint64_t replaced = 0;
  uint64_t reserves = 0;  // jobs handed out
  uint64_t finished = 0;
  uint64_t deleted = 0;
  uint64_t released = 0;
  uint64_t timed_out = 0;  // reservations whose TTR ran out
  uint64_t buried_total = 0;
  uint64_t kicked = 0;
};

class Queue {
 public:
  virtual ~Queue() = default;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Adds a job (SPEC §3). Errors: kInvalidArgument naming the field,
  // kTooLarge for the body, kExists for a live id without spec.replace.
  // With spec.idempotency_key, a repeat of an add applied within the dedup
  // window (QueueOptions::dedup_window_ms, from that add) changes nothing
  // and returns what the first returned, whatever became of the job since
  // (JobSpec::idempotency_key; docs/api.md, "Idempotent adds"). Without
  // one, re-adding the id of a finished or deleted job adds it again.
  virtual Result<AddResult> Add(const JobSpec& spec) = 0;

  // Hands out up to req.count ready jobs of req.topics, best first (priority,
  // then run_at, then order of adding, across all the topics). When none is
  // ready and req.wait_ms > 0, waits for one without holding a thread.
  // `done` runs exactly once: inside this call, or later on a thread of the
  // queue's own, or inside another call to this queue that made jobs ready
  // (an Add, Release, Kick, ... by any thread: the in-process queue hands
  // jobs over without a thread hop). Never under the queue's internal locks,
  // so it may call the queue; it must not block, throw, destroy the queue,
  // nor take a lock that a caller of this queue may hold. Returns a ticket
  // for CancelReserve, or 0 when `done` already ran inside this call. Once
  // the queue is closing, `done` gets kUnavailable at once.
  // Errors (through `done`): kInvalidArgument for bad topics or count.
  virtual uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) = 0;

  // Withdraws a waiting reserve. Returns true if `done` will never run; false
  // if it has already run or is running now.
  virtual bool CancelReserve(uint64_t ticket) = 0;

  // Gives back a job whose delivery never reached its client (a server whose
  // connection closed before the reply was written), or that its worker
  // never began (a worker stopping with jobs still in hand): ready again at once, in
  // its place in line (run_at kept), and the delivery is not counted, so
  // attempts and max_attempts are as before it. last_error is unchanged. The
  // receipt is required: only the delivery that went astray is undone. The
  // next delivery of the job gets a new receipt (a receipt names one
  // delivery, never reused, on every store and across restarts), so this
  // one stays stale: sent again, it cannot touch the next holder's delivery.
  // Errors: kInvalidArgument without a receipt (no force here);
  // otherwise as Finish.
  virtual Status Unreserve(std::string_view id, std::string_view receipt) = 0;

  // Blocking form of ReserveAsync, for applications. Waits at most
  // req.wait_ms; an empty vector means nothing became ready in time.
  Result<Deliveries> Reserve(const ReserveRequest& req);

  // Acknowledges a reserved job: it is gone. `receipt` is the one its
  // reserve handed out; an empty receipt skips the check and acts on the job
  // by id alone, whoever holds it (what the servers call "force": their
  // clients must give a receipt or ask for force explicitly; the seed's
  // /command finishes by id alone).
  // Errors: kInvalidArgument for a receipt that is not 24 hex digits
  // (ValidateReceipt); kNotFound; kNotReserved when the job is not reserved
  // and no receipt was given; kStaleReceipt when a receipt is given and is
  // not the job's current reservation (its TTR ran out and it was handed out
  // again).
  virtual Status Finish(std::string_view id, std::string_view receipt) = 0;

  // Applies several acknowledgments at once and returns one Status per ack,
  // in the same order, each what Finish, Release or Bury would have returned
  // for it; one that fails does not stop the others. The same as those calls
  // one by one, in order, but cheaper for a caller with many jobs in hand
  // (the Worker): the network client sends them as one pipeline (one round
  // trip), the in-process queue applies them under one lock and, embedded,
  // waits for its log once; the Redis store sends them in one round. The
  // default makes the calls one by one.
  virtual std::vector<Status> Acknowledge(std::span<const Ack> acks);

  // Removes a job in any state. Errors: kNotFound.
  virtual Status Delete(std::string_view id) = 0;

  // Gives a reserved job back: due again after delay_ms (>= 0), with `error`
  // kept as its last_error. Buried instead if max_attempts are used up.
  // Errors: as Finish; kInvalidArgument for a negative delay.
  virtual Status Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                         std::string_view error) = 0;

  // Extends a reservation to a full TTR from now: the job's TTR, or the
  // ReserveRequest::ttr_ms of the reserve that handed it out (the
  // Delivery's ttr_ms either way). Errors: as Finish.
  virtual Status Touch(std::string_view id, std::string_view receipt) = 0;

  // Sets a reserved job aside until kicked, with `reason` as its last_error.
  // Errors: as Finish.
  virtual Status Bury(std::string_view id, std::string_view receipt, std::string_view reason) = 0;

  // Makes a buried or delayed job ready now. Errors: kNotFound;
  // kInvalidArgument when the job is ready or reserved.
  virtual Status Kick(std::string_view id) = 0;

  // Makes up to n buried jobs of a topic ready, oldest first; returns how many.
  // Errors: kInvalidArgument for a bad topic name.
  virtual Result<uint64_t> KickTopic(std::string_view topic, uint64_t n) = 0;

  // The job and its state. Errors: kNotFound.
  virtual Result<JobInfo> Get(std::string_view id) = 0;

  // The next job of a topic in `state` (kReady: the next to be reserved;
  // kDelayed: the next to fall due; kBuried: the next to be kicked).
  // Errors: kNotFound when there is none; kInvalidArgument for kReserved.
  virtual Result<JobInfo> Peek(std::string_view topic, JobState state) = 0;

  // Stops handing out jobs of a topic for duration_ms (0: until Resume).
  // Jobs keep falling due meanwhile. Errors: kInvalidArgument.
  virtual Status Pause(std::string_view topic, int64_t duration_ms) = 0;
  // Ends a pause; waiting reserves get the topic's ready jobs at once.
  virtual Status Resume(std::string_view topic) = 0;

  // Topics that have jobs, waiting reserves or a pause, by name.
  virtual Result<std::vector<TopicInfo>> Topics() = 0;
  // One topic; an unknown valid name reads as empty. Errors: kInvalidArgument.
  virtual Result<TopicInfo> Topic(std::string_view topic) = 0;
  virtual Result<QueueStats> Stats() = 0;

 protected:
  Queue() = default;
};

// Opens a queue; StoreKind::kEmbedded first recovers every job from its log.
// Errors: kInvalidArgument for a bad option; kUnavailable
// when the store cannot be reached (a data directory that cannot be made,
// read or locked); kInternal for a damaged log (file, offset and why).
// StoreKind::kRemote (the network client) connects to nothing here: a server
// that cannot be reached shows on the first call, as kUnavailable naming
// every server tried. Its calls are retried on the next server only where a
// repeat cannot duplicate work: adds (each Add call sends one idempotency
// key on every attempt, and the id the client generates when the spec has
// none, so a retry whose first attempt ran changes nothing — even if the
// job was finished, deleted or reserved meanwhile — as long as it arrives
// within the servers' dedup window, QueueOptions::dedup_window_ms, 5
// minutes by default), changes that carry a receipt, and reads. A reserve
// whose reply was lost is not retried, and the jobs it may have taken come
// back after their TTR. Its reserve callbacks run on a thread
// of its own.
Result<std::unique_ptr<Queue>> OpenQueue(const QueueOptions& options);

}  // namespace delayq

#endif  // DELAYQ_QUEUE_H_
