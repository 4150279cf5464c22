// ServingQueue: what a server needs of a queue beyond the application's API
// (include/delayq/queue.h), and what every store implements for it:
//
// - the asynchronous forms of every call, so one thread serves many clients
//   and never waits for the network on a client's behalf;
// - AbandonReserve, for a client that left while its reserve waited;
// - a QueueDriver, when the server's event loop runs the queue's timers and
//   holds replies until their change is durable;
// - the store's own figures and health, for STATS, /v1/stats, /metrics and
//   /healthz, whatever the store.
//
// The front ends (src/server) hold a ServingQueue and never ask which store
// it is. OpenServingQueue (src/queue/open.h) makes one.
//
// Thread-safety: as Queue.
#ifndef DELAYQ_SERVING_SERVING_QUEUE_H_
#define DELAYQ_SERVING_SERVING_QUEUE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/queue.h"
#include "delayq/schedule.h"
#include "delayq/subscription.h"
#include "serving/push_ledger.h"

namespace delayq {

// How an event-driven program (delayq serve) runs a queue's timers on its own
// loop thread instead of a thread of the queue's: it polls PollFds() with its
// other file descriptors and calls RunDue() when one is readable. Due jobs
// then reach waiting reserves without a hop through another thread.
class QueueDriver {
 public:
  virtual ~QueueDriver() = default;
  // Readable (level-triggered) whenever the queue has timing work to do.
  virtual std::vector<int> PollFds() const = 0;
  // Runs what is due, answers the waits that ended, and re-arms the timers.
  // Call from one thread: when a PollFds() fd is readable, and once at start.
  virtual void RunDue() = 0;
  // Whether a timer deadline has passed, read without a system call: a busy
  // loop asks between connections, to run RunDue without waiting for its
  // turn to end. May say false for work a PollFds() fd will announce anyway.
  virtual bool MaybeDue() const = 0;

  // Durability, for a store with a log (kEmbedded); a store without one
  // keeps these defaults. A reply to a call may go out once Released() has
  // reached the Mark() read after the call, and not before. Flush() ends a
  // loop turn: it writes what the turn's calls changed, together (and with
  // fsync always starts the fdatasync that will release them; a PollFds()
  // fd says when it has). Failed(): the store can no longer make changes
  // durable, so what waits for Released() never gets it.
  virtual uint64_t Mark() const { return 0; }
  virtual uint64_t Released() const { return 0; }
  virtual void Flush() {}
  // Flush() for a loop with nothing else ready, which would sleep next: with
  // fsync always the store may run the fdatasync here, on the caller's
  // thread, sparing two thread wake-ups (Released() has then moved).
  virtual void FlushIdle() { Flush(); }
  virtual bool Failed() const { return false; }
};

// A store's own figures, beside the queue's (QueueStats): what its log or
// its Redis rounds have done, and whether it can take changes now.
struct StoreFigures {
  // Named counters and gauges, in a fixed order per store; STATS and
  // /v1/stats list them after the queue's figures, /metrics as
  // delayq_<name>. A new figure is one line in the store's Figures().
  std::vector<std::pair<std::string_view, uint64_t>> fields;
  // Ok; or why changes are refused now (reads go on): /healthz "degraded".
  Status health;
  // For good: only a restart recovers (/healthz "failed", HTTP 503).
  bool failed = false;
  // How the store sees where it keeps jobs, one line for /healthz's
  // "topology" (the Redis store: its masters, their replicas, the last
  // WAIT's count); empty: nothing to say.
  std::string topology;
};

class ServingQueue : public Queue {
 public:
  // Withdraws a waiting reserve whose caller will not wait to learn whether
  // it already took jobs (a client that left). If it did, `done` still gets
  // them, later, and must give them back; else `done` may run with none or
  // never. Never blocks. By default: CancelReserve.
  virtual void AbandonReserve(uint64_t ticket) { (void)CancelReserve(ticket); }

  // Non-null when the queue was opened with OpenOptions::caller_loop: the
  // caller must drive its timers (see QueueDriver). Owned by the queue.
  virtual QueueDriver* driver() { return nullptr; }

  // The store's figures and health; empty fields for a store without any.
  virtual StoreFigures Figures() { return {}; }
  // One line for the server's log once the queue is open (what recovery
  // found, say); empty: nothing to say.
  virtual std::string OpenedSummary() { return {}; }

  // --- Asynchronous forms of every call ------------------------------------
  // Each returns at once and runs `done` exactly once with what the blocking
  // form would have returned, inside the call or later on a thread of the
  // queue's own, under the same rules as a ReserveAsync callback. A store
  // that waits on the network (Redis) answers later, and batches the calls
  // of many callers into one round trip; the in-process queue answers
  // inside the call. Arguments are copied before the call returns: views
  // need not outlive it. Default: the blocking form, then `done`.
  using AddCallback = std::function<void(Result<AddResult>)>;
  using StatusCallback = std::function<void(Status)>;
  virtual void AddAsync(const JobSpec& spec, AddCallback done);
  virtual void FinishAsync(std::string_view id, std::string_view receipt, StatusCallback done);
  virtual void DeleteAsync(std::string_view id, StatusCallback done);
  virtual void ReleaseAsync(std::string_view id, std::string_view receipt, int64_t delay_ms,
                            std::string_view error, StatusCallback done);
  virtual void TouchAsync(std::string_view id, std::string_view receipt, StatusCallback done);
  virtual void BuryAsync(std::string_view id, std::string_view receipt, std::string_view reason,
                         StatusCallback done);
  virtual void UnreserveAsync(std::string_view id, std::string_view receipt, StatusCallback done);
  using JobCallback = std::function<void(Result<JobInfo>)>;
  using CountCallback = std::function<void(Result<uint64_t>)>;
  using TopicsCallback = std::function<void(Result<std::vector<TopicInfo>>)>;
  using TopicCallback = std::function<void(Result<TopicInfo>)>;
  using StatsCallback = std::function<void(Result<QueueStats>)>;
  virtual void GetAsync(std::string_view id, JobCallback done);
  virtual void PeekAsync(std::string_view topic, JobState state, JobCallback done);
  virtual void KickAsync(std::string_view id, StatusCallback done);
  virtual void KickTopicAsync(std::string_view topic, uint64_t n, CountCallback done);
  virtual void PauseAsync(std::string_view topic, int64_t duration_ms, StatusCallback done);
  virtual void ResumeAsync(std::string_view topic, StatusCallback done);
  virtual void TopicsAsync(TopicsCallback done);
  virtual void TopicAsync(std::string_view topic, TopicCallback done);
  virtual void StatsAsync(StatsCallback done);

  // --- Subscriptions (push delivery: src/push, docs/push.md) ---------------
  // A second kind of record a store keeps beside its jobs: durable where its
  // jobs are (the embedded log), shared by every server on one Redis. The
  // memory store keeps them until the process ends. Same rules as the async
  // calls above. A store that keeps none answers kInternal (the default).
  //
  // Put: validates (ValidateSubscription), then adds or, for a (name, url)
  // already there, renews and updates the instance; sets created_ms (kept on
  // a renewal), renewed_ms and expires_ms from the store's wall clock, and
  // answers the record as stored.
  using SubscriptionCallback = std::function<void(Result<Subscription>)>;
  using SubscriptionsCallback = std::function<void(Result<std::vector<Subscription>>)>;
  virtual void PutSubscriptionAsync(const Subscription& s, SubscriptionCallback done);
  // Removes the instance (name, url), or every instance of `name` when url
  // is empty; answers how many went (0 when none was there).
  virtual void DeleteSubscriptionAsync(std::string_view name, std::string_view url,
                                       CountCallback done);
  // The live instances of `name` (every name when empty), by name then url.
  // Lapsed ones are left out, and forgotten by the store.
  virtual void SubscriptionsAsync(std::string_view name, SubscriptionsCallback done);
  // How the servers on this store count push requests across each other;
  // nullptr when this process is the only one that pushes for the store
  // (memory, embedded): src/push then counts in process. Owned by the queue.
  virtual PushLedger* push_ledger() { return nullptr; }

  // --- Schedules (periodic jobs: src/schedule, docs/schedules.md) ----------
  // A third kind of record, kept like subscriptions (durable in the log,
  // shared on Redis, in memory otherwise). Same rules as the async calls
  // above. A store that keeps none answers kInternal (the default).
  //
  // Put: validates (ValidateScheduleDefinition; the caller has parsed the
  // cron and time zone), then creates the schedule or replaces its
  // definition (the fields under "The definition"). Keeps the firing state
  // and created_ms; version and revision +1 (1 for a new one); updated_ms
  // from the store's wall clock; a put with paused false clears
  // pause_reason and paused_at_ms is left for the scheduler. Answers the
  // record as stored.
  using ScheduleCallback = std::function<void(Result<Schedule>)>;
  using SchedulesCallback = std::function<void(Result<std::vector<Schedule>>)>;
  using ScheduleFiredCallback = std::function<void(Result<ScheduleFired>)>;
  virtual void PutScheduleAsync(const Schedule& s, ScheduleCallback done);
  // Removes the schedule; answers the record as it was (kNotFound when none
  // was there). Its jobs stay (the scheduler withdraws the one added ahead).
  virtual void DeleteScheduleAsync(std::string_view name, ScheduleCallback done);
  // The schedule `name` (kNotFound when none), in a one-element vector; or
  // every schedule, by name, when name is empty.
  virtual void SchedulesAsync(std::string_view name, SchedulesCallback done);
  // The compare-and-set that makes a firing (ScheduleFiring in
  // include/delayq/schedule.h): atomic on the embedded and memory stores;
  // on Redis, the schedule's change is made first and its jobs after, and a
  // change whose jobs were not all made (a server died between) is finished
  // by the next server that reads the schedule, never made twice.
  // kNotFound when the schedule is gone.
  virtual void FireScheduleAsync(const ScheduleFiring& f, ScheduleFiredCallback done);

 protected:
  ServingQueue() = default;
};

}  // namespace delayq

#endif  // DELAYQ_SERVING_SERVING_QUEUE_H_
