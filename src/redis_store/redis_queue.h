// RedisQueue: the Queue interface over Redis or Redis Cluster (store
// "redis"), shared by every server and application that opens the same URL
// and prefix. The data model and the Lua scripts it calls are
// docs/redis-store.md's; its section "The client side: RedisQueue" explains
// the design below in more words.
//
// Batching. Every call becomes an op. One dispatcher thread takes all
// pending ops, merges those of one kind on one bucket into one script call
// (all pending adds of a bucket: one `add` with many jobs; finishes, touches
// and deletes likewise; reserves: those with the same topics form a group,
// and every group of the round shares one `heads` per bucket and one
// `reserve` per bucket that holds the best, whose replies give each group
// its own part), sends the whole round as one Client::ExecBatch (about one
// round trip, all nodes in parallel), then completes the ops. Calls made
// while a round is in flight wait for the next one: group commit. The
// blocking methods are the asynchronous path plus a wait; called on one of
// the queue's own threads (a callback), they run their ops on that thread
// instead, so a callback may call them without deadlock. Ops on one job id keep their order: ops of
// different kinds on one id never share a round. An op that may take more than one round (a
// KickTopic over several buckets or 1000 jobs) holds back every op submitted after it until
// it completes, so calls made one after the other act one after the other
// (rq::Op::MayTakeRounds); an add whose generated id collided holds back only what was not
// yet sent when it learned so. An op over more than one job (peek, topics, stats, pause,
// kick_topic) is a barrier: no op submitted after it shares its round
// (rq::Op::Barrier), so it sees the ops submitted before it and none after.
// Reserves are ordered against other calls by their callers (the front end); among
// themselves, groups that share a topic are never in flight together, so reserves on
// overlapping topics are served in the order submitted (TakeAttempts).
//
// Reserve. Best first across topics and buckets: `heads` (read-only) on
// every bucket, the keys merged, then `reserve` on the chosen buckets for
// the chosen counts; a bucket known or reported to have work due is
// promoted first (once per round), so a due job is never invisible. The
// cost of a round is one heads and one reserve per bucket however many
// topic lists wait (up to 1000 jobs and 1000 topics per call: more are
// split), so many waiters on different topics cost a fraction of a script
// call per job. A race with another server costs order, never correctness
// (the attempt looks again, twice at most). A bucket whose master cannot be
// reached (it died, its replica not promoted yet) is left out of the heads:
// the reserve is served from the others, and is unavailable only when no
// bucket answers. With redis_wait_replicas, so are the buckets of a master
// whose last full WAIT fell short (rq::Context::short_of_replicas), for two
// WAIT timeouts: nothing is reserved there that could not be handed out. A
// reserve that waits reads only
// the buckets where jobs of its topics may be ready (the queue remembers
// where they ran out, until an add, a wake message or a promote says
// otherwise), and none at all when that is nowhere. A reserve that waits is a local waiter (a
// ticket): it is tried again when this queue's own adds, kick_topics or resumes make its topics
// ready, when a wake message `r <bucket> <topic>` arrives from any server (Subscriber on
// `<prefix>:wake`), and after the subscriber reconnects (everything is
// re-checked then: messages sent meanwhile are lost). A waiter is registered
// before its first attempt, and a wake-up that arrives during an attempt makes
// it try once more.
//
// Timing, without polling loops: a timer thread sleeps until the earliest
// next-due time it knows for any bucket (from promote, heads, add, release
// and reserve replies, and `d <bucket> <ms>` messages), promotes the due
// buckets in one batch (again at once while a reply says work is left), and
// promotes every bucket at least once a second as the safety net
// docs/redis-store.md asks for. It also ends waits (QueueOptions::clock's
// monotonic time). With a ManualClock it sleeps until the clock moves.
// Scripts are given the clock's wall time as now_ms.
//
// Generated ids (an empty JobSpec::id): 24 hex digits: 12 of the wall ms
// (never going back within the process), 4 random per process, 8 of a
// process-wide counter (starting at random). Time-ordered within a
// process; two processes collide only if they drew the same 16 bits and
// their counters meet in the same ms, which the add script detects
// ("exists": a new id is made).
//
// Thread-safety: every method may be called from any number of threads at
// once. Callbacks (ReserveAsync's, the *Async forms') run on the dispatcher
// or timer thread (or on the destroying thread, with kUnavailable), never
// under an internal lock, so they may call the queue again; they must not
// block (nor call the blocking Reserve with a wait).
//
// Errors: as Queue's, the same messages as LocalQueue for bad input (checked
// here before any script runs); kUnavailable when Redis cannot be reached or
// refuses work (out of memory, loading, cluster down): the queue keeps
// working and recovers when Redis is back (the client layer reconnects with
// backoff). A call that fails with kUnavailable after its command was sent
// may or may not have taken effect.
#ifndef DELAYQ_REDIS_STORE_REDIS_QUEUE_H_
#define DELAYQ_REDIS_STORE_REDIS_QUEUE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "delayq/queue.h"
#include "redis/client.h"
#include "redis/subscriber.h"
#include "serving/serving_queue.h"

namespace delayq {

namespace rq {
class Op;
class Batch;
struct TopicCounts;
struct StoreStats;
class ReserveGroup;
struct Attempt;
struct Context;
class RedisLedger;
}  // namespace rq

class RedisQueue final : public ServingQueue {
 public:
  // Connects (QueueOptions::redis_url), runs the `init` script on every
  // bucket (writing format and bucket count on first use of the prefix),
  // subscribes to `<prefix>:wake` (waiting up to a second for the
  // subscription) and starts the dispatcher and timer threads.
  // OpenOptions::caller_loop is ignored: the queue runs its own threads and
  // driver() is null. Errors: kInvalidArgument naming the option
  // (redis_url, redis_prefix: 1-256 bytes without '{' or '}', redis_buckets:
  // 1..16384, or a prefix first used with another bucket count);
  // kUnavailable when none of the URL's addresses answers; kInternal when the prefix holds
  // another format.
  static Result<std::unique_ptr<RedisQueue>> Open(const QueueOptions& options);
  // Stops the threads (a round in flight ends first), then answers every op
  // not sent and every waiting reserve with kUnavailable on this thread.
  ~RedisQueue() override;

  Result<AddResult> Add(const JobSpec& spec) override;
  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override;
  // Returns true if the waiter was withdrawn before it could take a job.
  // While one of its attempts is in a round, waits for that round to end
  // (up to a round trip) to learn whether it took jobs.
  bool CancelReserve(uint64_t ticket) override;
  void AbandonReserve(uint64_t ticket) override;
  Status Finish(std::string_view id, std::string_view receipt) override;
  // Every ack submitted before the first is waited for, so the dispatcher
  // sends them in one round (the blocking forms one by one when called from
  // a callback of this queue's).
  std::vector<Status> Acknowledge(std::span<const Ack> acks) override;
  Status Delete(std::string_view id) override;
  Status Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                 std::string_view error) override;
  Status Touch(std::string_view id, std::string_view receipt) override;
  Status Unreserve(std::string_view id, std::string_view receipt) override;
  Status Bury(std::string_view id, std::string_view receipt, std::string_view reason) override;
  Status Kick(std::string_view id) override;
  Result<uint64_t> KickTopic(std::string_view topic, uint64_t n) override;
  Result<JobInfo> Get(std::string_view id) override;
  Result<JobInfo> Peek(std::string_view topic, JobState state) override;
  Status Pause(std::string_view topic, int64_t duration_ms) override;
  Status Resume(std::string_view topic) override;
  Result<std::vector<TopicInfo>> Topics() override;
  Result<TopicInfo> Topic(std::string_view topic) override;
  Result<QueueStats> Stats() override;
  // What the dispatcher has done: redis_rounds, redis_commands, redis_ops
  // (DispatchStats).
  StoreFigures Figures() override;

  void AddAsync(const JobSpec& spec, AddCallback done) override;
  void FinishAsync(std::string_view id, std::string_view receipt, StatusCallback done) override;
  void DeleteAsync(std::string_view id, StatusCallback done) override;
  void ReleaseAsync(std::string_view id, std::string_view receipt, int64_t delay_ms,
                    std::string_view error, StatusCallback done) override;
  void TouchAsync(std::string_view id, std::string_view receipt, StatusCallback done) override;
  void UnreserveAsync(std::string_view id, std::string_view receipt, StatusCallback done) override;
  void BuryAsync(std::string_view id, std::string_view receipt, std::string_view reason,
                 StatusCallback done) override;
  void GetAsync(std::string_view id, JobCallback done) override;
  void PeekAsync(std::string_view topic, JobState state, JobCallback done) override;
  void KickAsync(std::string_view id, StatusCallback done) override;
  void KickTopicAsync(std::string_view topic, uint64_t n, CountCallback done) override;
  void PauseAsync(std::string_view topic, int64_t duration_ms, StatusCallback done) override;
  void ResumeAsync(std::string_view topic, StatusCallback done) override;
  void TopicsAsync(TopicsCallback done) override;
  void TopicAsync(std::string_view topic, TopicCallback done) override;
  void StatsAsync(StatsCallback done) override;

  // Subscriptions: one hash under bucket 0's tag, changed by
  // subscriptions.lua on Redis's clock (created_ms, renewed_ms, expires_ms
  // are Redis's TIME, so every server agrees when an instance lapses).
  void PutSubscriptionAsync(const Subscription& s, SubscriptionCallback done) override;
  void DeleteSubscriptionAsync(std::string_view name, std::string_view url,
                               CountCallback done) override;
  void SubscriptionsAsync(std::string_view name, SubscriptionsCallback done) override;
  // The ledger in Redis (push_ledger.lua), shared by every server on the
  // prefix (rq::RedisLedger, redis_push.h). Lives as long as the queue.
  PushLedger* push_ledger() override;

  // Schedules: one hash under bucket 0's tag (schedules.lua, on Redis's
  // clock); a firing is a claim there, its jobs in their buckets
  // (schedule_fire.lua), then a clear, and a claim left half done by a
  // server that died is finished by the next claim or read
  // (rq::MakeFireSchedule, redis_schedule.h; docs/redis-store.md,
  // "Schedules").
  void PutScheduleAsync(const Schedule& s, ScheduleCallback done) override;
  void DeleteScheduleAsync(std::string_view name, ScheduleCallback done) override;
  void SchedulesAsync(std::string_view name, SchedulesCallback done) override;
  void FireScheduleAsync(const ScheduleFiring& f, ScheduleFiredCallback done) override;

  // --- For tests and benchmarks -------------------------------------------
  uint32_t buckets() const;
  // The bucket of a job id: XXH3_64bits(id) mod buckets().
  uint32_t BucketOf(std::string_view id) const;
  // What the dispatcher has done since Open.
  struct DispatchStats {
    uint64_t rounds = 0;    // ExecBatch calls
    uint64_t commands = 0;  // script calls sent in them
    uint64_t ops = 0;       // ops planned into them (an op of several rounds counts each)
  };
  DispatchStats dispatch_stats() const;

 private:
  struct Waiter;

  RedisQueue(std::unique_ptr<rq::Context> ctx, std::unique_ptr<redis::Client> client);

  // Hands `op` to the dispatcher, or runs it on this thread when the caller
  // will wait for it (`wait`) and this is one of the queue's threads. Fails
  // it with kUnavailable at once when the queue is closing.
  void Submit(std::unique_ptr<rq::Op> op, bool wait);
  // Submit, then waits for the result that `make`'s callback receives.
  template <typename T, typename Make>
  T Call(Make make);
  // Runs `op` to its end on this thread.
  void RunInline(rq::Op& op);
  // Applies what a round's replies taught (due times, ready topics).
  // REQUIRES: mu_ held.
  void ApplyNotes(const rq::Batch& b);

  void RunDispatcher();
  // Takes pending ops, then pending attempts (grouped by topics), into a
  // round. `held`: an op taken earlier needs another round, so no pending
  // op may start yet (rq::Op::MayTakeRounds). REQUIRE: mu_ held.
  void TakePending(std::vector<std::unique_ptr<rq::Op>>* round, bool held);
  void TakeOps(std::vector<std::unique_ptr<rq::Op>>* round);
  void TakeAttempts(std::vector<std::unique_ptr<rq::Op>>* round);
  // Marks a continuing group's attempts as running again; false when none is
  // left. REQUIRES: mu_ held.
  bool PrepareGroup(rq::ReserveGroup& group);
  // After a round: ends the finished attempts of `group`, queues callbacks.
  // REQUIRES: mu_ held.
  void SettleGroup(rq::ReserveGroup& group, std::vector<std::function<void()>>* callbacks);

  // The timer thread, and what it alone owns.
  struct TimerState;
  void RunTimer();
  // Answers the waits that ran out by `mono`. REQUIRES: mu_ held.
  void ExpireWaits(int64_t mono, std::vector<std::function<void()>>* callbacks);
  // Promotes the `due` buckets (begun in ctx_->due when chosen) and keeps
  // what the replies say falls due next.
  void Promote(TimerState& ts, const std::vector<uint32_t>& due, int64_t now);
  void PokeTimer();

  // Waiters. REQUIRE: mu_ held.
  void QueueAttempt(uint64_t ticket, Waiter& w);
  void EndAttempt(uint64_t ticket, Waiter& w, rq::Attempt& a,
                  std::vector<std::function<void()>>* callbacks);
  // Jobs of `topic` became ready: its waiters try again.
  void WakeTopic(const std::string& topic);
  void WakeAll();
  void EraseWaiter(uint64_t ticket);
  // Lowers bucket's next-due time to ms (and wakes the timer if it sleeps
  // past it).
  void LowerDue(uint32_t bucket, int64_t ms);
  // Jobs of `topic` ("": of any topic) may have become ready in `bucket`
  // (rq::kAllBuckets: in any): forget that heads found none there.
  void Invalidate(uint32_t bucket, const std::string& topic);
  // The buckets an attempt of a waiting reserve must look at: all but
  // those known to hold no ready job of its topics and nothing due.
  std::vector<uint32_t> WaiterScope(const Waiter& w, int64_t now_ms) const;

  void OnWakeMessage(std::string_view message);
  void OnSubscribed();

  // Adds this queue's waiting counts to topics.
  void AddWaiting(std::vector<TopicInfo>* topics, bool add_missing);
  // A pause's end (pause.lua's until_ms) for a duration (0: until resumed).
  int64_t PauseEnd(int64_t duration_ms) const;
  // What Topics, Topic and Stats make of the store's counts.
  Result<std::vector<TopicInfo>> TopicsOf(Result<std::vector<rq::TopicCounts>> counts);
  Result<TopicInfo> TopicOf(std::string_view topic, Result<std::vector<rq::TopicCounts>> counts);
  Result<QueueStats> StatsOf(Result<rq::StoreStats> store);

  const std::unique_ptr<rq::Context> ctx_;
  const std::shared_ptr<Clock> clock_;
  std::unique_ptr<redis::Client> client_;
  std::unique_ptr<redis::Subscriber> subscriber_;  // stopped after the threads
  int clock_token_ = 0;

  mutable std::mutex mu_;
  // State below is protected by mu_.
  std::condition_variable work_cv_;   // the dispatcher: work, or stopping
  std::condition_variable round_cv_;  // a round ended (CancelReserve), subscribed
  bool stopping_ = false;
  bool subscribed_ = false;
  std::deque<std::unique_ptr<rq::Op>> pending_;
  // Attempts to make, by (ticket, serial); stale ones are skipped.
  std::deque<std::pair<uint64_t, uint64_t>> pending_attempts_;
  std::vector<std::unique_ptr<rq::Op>> leftover_;            // the dispatcher's, when it stopped
  std::map<uint64_t, Waiter> waiters_;                       // by ticket
  std::map<std::string, std::set<uint64_t>> topic_waiters_;  // waits (wait_ms > 0) by topic
  std::set<std::pair<int64_t, uint64_t>> wait_deadlines_;    // (monotonic ms, ticket)
  uint64_t waiting_ = 0;                                     // waiters with wait_ms > 0
  uint64_t next_ticket_ = 1;
  // Per bucket, topics a script found without ready jobs, and nothing due
  // there, until something says otherwise (Invalidate: this queue's own adds,
  // kicks, releases, resumes; promotes that moved jobs; wake messages; a
  // reconnect of the subscriber). A script that acts on the time may also
  // make jobs ready, but only where something was due, and a due bucket is
  // always looked at. Only a waiting reserve trusts this, and only while
  // subscribed: a job another server made ready is announced by a wake
  // message, which wakes the waiter anyway; a reserve that does not wait
  // reads every bucket.
  struct Knowledge {
    std::set<std::string> empty;  // topics without ready jobs here
    // Stamps (Context::ready_events) of the last events that may have made
    // jobs of a topic (or of any) ready here.
    std::map<std::string, uint64_t> events;
    uint64_t any_event = 0;
  };
  std::vector<Knowledge> known_;
  DispatchStats dispatch_stats_;

  // The timer thread's wake-ups: its own mutex, never held while calling
  // the clock, because a ManualClock calls PokeTimer under its own lock.
  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  bool timer_poked_ = false;  // GUARDED_BY(timer_mu_)
  // What the timer thread sleeps until (the clock's wall and monotonic ms),
  // set under mu_: a due time or a wait that ends earlier pokes it.
  std::atomic<int64_t> timer_wakes_at_wall_{0};
  std::atomic<int64_t> timer_wakes_at_mono_{0};

  std::thread dispatcher_;
  std::thread timer_;
  std::unique_ptr<rq::RedisLedger> ledger_;  // its calls are ops of the dispatcher
};

}  // namespace delayq

#endif  // DELAYQ_REDIS_STORE_REDIS_QUEUE_H_
