// Internals of RedisQueue (redis_queue.h): each call to the Redis store is an
// Op that a dispatcher plans into a round of commands (Batch) together with
// every other pending op, sends as one Client::ExecBatch, and then reads its
// replies from. Ops of one kind on one bucket share a command (all pending
// adds of bucket 3 become one `add` call), and so do the reserve groups of a
// round (one `heads` and one `reserve` per bucket, each reply giving every
// group its own part); an op that needs several rounds (a reserve: heads,
// then reserve) stays active across rounds.
//
// The scripts, keys and reply formats are docs/redis-store.md's.
//
// Thread-safety: an Op and a Batch belong to one thread at a time (the
// dispatcher's, or the caller's for an op run inline). Context is shared by
// every thread of one queue: its fields are constant after Open except
// due (written by the queue under its mutex), ready_events and seq_floor.
#ifndef DELAYQ_REDIS_STORE_REDIS_QUEUE_OPS_H_
#define DELAYQ_REDIS_STORE_REDIS_QUEUE_OPS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "delayq/clock.h"
#include "delayq/job.h"
#include "delayq/queue.h"
#include "delayq/status.h"
#include "redis/client.h"
#include "redis_store/lua_scripts.h"

namespace delayq::rq {

// Reading the scripts' replies (shared by redis_push.cc and
// redis_schedule.cc): an integer (or a string of one), a bulk or status
// string, and the error for a reply of the wrong shape.
std::optional<int64_t> AsInt(const redis::Reply& r);
const std::string* AsText(const redis::Reply& r);
Status Malformed(std::string_view what, const redis::Reply& r);

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
inline constexpr uint32_t kFormat = 1;       // the store format these scripts speak
inline constexpr uint32_t kMaxBatch = 1000;  // jobs per script call (the scripts' MAX_BATCH)
// Topics over all the groups of one heads or reserve call (MAX_CALL_TOPICS).
inline constexpr size_t kMaxCallTopics = 1000;
inline constexpr uint32_t kMaxBuckets = 16384;
// Buckets of a new prefix on a cluster when the count is automatic.
inline constexpr uint32_t kClusterBuckets = 16;
inline constexpr uint32_t kAllBuckets = std::numeric_limits<uint32_t>::max();

// The scripts of src/redis_store/scripts/, embedded at build time: `Lua` and
// kLuaScripts are generated from DELAYQ_REDIS_SCRIPTS (redis_store/lua_scripts.h).
const redis::Script& ScriptOf(Lua lua);

// Whether `lua` reads Redis's clock (TIME) instead of taking the caller's
// now_ms as ARGV[1]: the push scripts, subscriptions and push_ledger, and
// schedules, whose times every server compares (docs/redis-store.md, "Push
// delivery", "Schedules").
bool ReadsRedisTime(Lua lua);

// Whether a call of `lua` changes what a caller is told of (an add, a
// reserve, a finish, ...): with QueueOptions::redis_wait_replicas, its node's
// pipeline ends with a WAIT and it counts only once the replicas have it
// (redis::Command::needs_replicas). Not: the reads (get, peek, heads, topics,
// stats), init, promote (made again by the next promote if a failover loses
// it) and push_ledger (the push slots and rates of this moment: a failover
// that loses some lets a few more pushes through at once, never a job lost).
// A read made with a changing script says so (Batch::NoWait).
bool NeedsReplicas(Lua lua);

// Per bucket, the earliest time (wall ms) a queue knows something falls due
// there: kNever when nothing is known, 0 at start (every bucket is promoted
// once). Notes (from add, release, heads, reserve and promote replies, and
// `d` wake messages) only lower it; the timer's promote of a bucket replaces
// it with what the promote reply says falls due next, keeping any note made
// while that promote was in flight: the note may be of a job its script did
// not see yet (one added just after it ran), and it counts however it
// compares with the due time known when the note arrived.
//
// Thread-safety: At and Known are lock-free, for any thread; the writers
// (Note, BeginPromote, EndPromote) must be serialized by the caller
// (RedisQueue's mutex).
class DueTimes {
 public:
  explicit DueTimes(uint32_t buckets);

  int64_t At(uint32_t bucket) const { return at_[bucket].load(std::memory_order_relaxed); }
  // Something is due in bucket by now_ms: promote before reading it.
  bool Known(uint32_t bucket, int64_t now_ms) const { return At(bucket) <= now_ms; }
  // Something falls due in bucket at ms. True if that is earlier than known.
  bool Note(uint32_t bucket, int64_t ms);
  // A promote of bucket is about to be sent.
  void BeginPromote(uint32_t bucket);
  // Its reply says next (kNever: nothing) falls due next there.
  void EndPromote(uint32_t bucket, int64_t next);

 private:
  std::unique_ptr<std::atomic<int64_t>[]> at_;
  std::vector<int64_t> noted_;  // the earliest note since BeginPromote
};

// What every op of one queue reads.
struct Context {
  std::shared_ptr<Clock> clock;
  Limits limits;
  int64_t dedup_window_ms = 0;  // QueueOptions::dedup_window_ms (add.lua's k flag)
  uint32_t wait_replicas = 0;   // QueueOptions::redis_wait_replicas
  // With wait_replicas: whether the master of a bucket is short of replicas
  // now (redis::Client::ShortOfReplicas). A reserve leaves such buckets out:
  // what it took there could be handed out only if a WAIT confirmed it, and
  // would otherwise sit reserved for nobody until its TTR. Empty: none is.
  std::function<bool(uint32_t bucket)> short_of_replicas;
  std::string prefix;
  uint32_t buckets = 0;
  std::vector<std::string> tags;  // "{<prefix>:<bucket>}" per bucket
  // What falls due where: read by ops to promote a bucket before reading
  // it; written by RedisQueue under its mutex.
  std::unique_ptr<DueTimes> due;
  // A clock of the events that may make jobs ready (RedisQueue ticks it,
  // under its mutex, and stamps each event): what a script read is known to
  // be stale when an event of its bucket and topic is stamped after its
  // command was planned.
  std::atomic<uint64_t> ready_events{0};
  // The last seq floor handed out (see NextSeqFloor).
  std::atomic<uint64_t> seq_floor{0};

  // XXH3_64bits(id, seed 0) mod buckets: part of the format.
  uint32_t BucketOf(std::string_view id) const;
  // max(now_ms * 1024, last + 1): the lower bound of the seq of the next job
  // this queue adds, so its adds keep their order across buckets (add.lua's
  // "@<seq floor>" flag).
  uint64_t NextSeqFloor(int64_t now_ms);
};

// A generated id: 24 hex digits, 12 of wall ms (never going back within the
// process), 4 drawn once per process, 8 of a process-wide counter.
std::string GenerateId(int64_t now_ms);

// A new job's record as add.lua (and schedule_fire.lua) take and store it
// (docs/redis-store.md, "The record" and "What add is given"): ready if
// run_at_ms <= now_ms, else delayed; seq the caller's seq floor. REQUIRES:
// ValidateJobSpec(spec) is ok.
std::string NewRecord(const JobSpec& spec, int64_t now_ms, int64_t run_at_ms, uint64_t seq);

// "job 'x'", the id cut at 64 bytes, as the engine quotes ids.
std::string QuoteId(std::string_view id);

// The Status of a script's error reply "<code> <message>" (a SPEC §5 code),
// or of another Redis error (OOM, BUSY, READONLY, ...: kUnavailable; the
// rest kInternal).
Status ErrorStatus(const redis::Reply& reply);

// One round: the commands of every op planned into it, then their replies.
class Batch {
 public:
  Batch(Context& ctx, int64_t now_ms);
  Context& ctx() { return ctx_; }
  int64_t now() const { return now_; }

  // Where one job's part of a shared command's reply is.
  struct Slot {
    size_t cmd = 0;
    size_t index = 0;
  };
  // Adds one job's fields (moved from) to the open `lua` command of
  // `bucket`, opening a new one when none is open or it is full (kMaxBatch
  // jobs or ~8 MiB of arguments).
  Slot Append(Lua lua, uint32_t bucket, std::vector<std::string>&& fields);
  // Adds several entries that must share one call (a schedule's claim and
  // the jobs made with it): a new command is opened unless they all fit the
  // open one. Returns the first entry's slot; entry i is at index + i.
  // REQUIRES: 1 <= entries.size() <= kMaxBatch.
  Slot AppendTogether(Lua lua, uint32_t bucket, std::vector<std::vector<std::string>>&& entries);
  // A command of its own: `lua` on `bucket` with now_ms then `args`.
  size_t Single(Lua lua, uint32_t bucket, std::vector<std::string> args);
  // Command `cmd`, of a script that may change things, only reads this time
  // (a list of subscriptions or schedules): it waits for no replica.
  void NoWait(size_t cmd) { cmds_[cmd].needs_replicas = false; }
  // (Append and Single give a script that ReadsRedisTime no now_ms.)

  // Where one reserve group's part of a shared `heads` or `reserve` call is.
  struct GroupSlot {
    size_t call = 0;   // which shared call of this round
    size_t group = 0;  // the group's place among that call's groups
  };
  // Adds a group (its `m` best keys of `topics`) to this round's `heads
  // ready` call on `bucket`, so that a round sends one heads per bucket
  // however many groups want one. A call that would pass a call's bounds
  // (kMaxBatch keys, kMaxCallTopics topics over its groups) is closed and
  // another opened. `promote`: the bucket is promoted before its heads calls
  // (once, however many groups ask). REQUIRES: 1 <= m <= kMaxBatch,
  // 1..kMaxReserveTopics topics.
  GroupSlot AddHeads(uint32_t bucket, uint32_t m, const std::vector<std::string>& topics,
                     bool promote);
  // Likewise a group's `count` jobs of `topics` from this round's `reserve`
  // call on `bucket` with the TTR override `ttr_ms` (ReserveRequest::ttr_ms;
  // one per call: groups with different ones go to different calls). The
  // script serves the groups in the order they were added, and a job taken
  // by one is not seen by the next.
  GroupSlot AddReserve(uint32_t bucket, uint32_t count, const std::vector<std::string>& topics,
                       uint32_t ttr_ms);
  // Adds the shared heads and reserve calls to the commands (each bucket's
  // promote first). Called once, after every op of the round was planned and
  // before the commands are sent.
  void Seal();

  std::vector<redis::Command>& commands() { return cmds_; }
  void SetResults(std::vector<Result<redis::Reply>> results) { results_ = std::move(results); }

  // The reply of command `cmd`: an error reply becomes its Status.
  Result<const redis::Reply*> ReplyOf(size_t cmd) const;
  // As ReplyOf, for an op that moves parts out of it.
  Result<redis::Reply*> TakeReply(size_t cmd);
  // A job's element of a shared command's array reply.
  Result<const redis::Reply*> Element(Slot slot) const;
  // A group's part of a shared heads or reserve call's reply: its
  // `entries` keys (heads: 3 integers each) or deliveries (reserve: 3
  // fields each, id, record and given back, which the caller may move out)
  // from fields[first]. An error reply, or a reply that does not match its
  // groups, fails every group of the call.
  struct GroupPart {
    std::vector<redis::Reply>* fields = nullptr;  // the call's whole reply
    size_t first = 0;
    size_t entries = 0;
    int64_t next_due_ms = -1;  // heads: the bucket's next due time (-1: none)
  };
  Result<GroupPart> Part(GroupSlot slot);
  // The promote command sent before a shared heads call (asked for by this
  // group or another), SIZE_MAX when there is none.
  size_t PromoteBefore(GroupSlot slot) const;

  // What replies taught, applied by the queue after the round.
  void NoteDue(uint32_t bucket, int64_t ms);  // something falls due there at ms
  // Jobs of `topic` became ready in `bucket` (kAllBuckets: in any; topic
  // "": of topics not known).
  void NoteReady(std::string topic, uint32_t bucket);
  // A script found no ready job of `topics` in `bucket`; planned when
  // Context::ready_events read `stamp`.
  struct Empty {
    uint32_t bucket;
    uint64_t stamp;
    const std::vector<std::string>* topics;
  };
  void NoteEmpty(Empty e) { empty_.push_back(e); }
  const std::map<uint32_t, int64_t>& due_notes() const { return due_; }
  const std::vector<Empty>& empty_notes() const { return empty_; }
  const std::set<std::pair<std::string, uint32_t>>& ready_notes() const { return ready_; }

 private:
  struct Open {
    size_t cmd;
    size_t jobs;
    size_t bytes;
  };
  // A heads or reserve call that serves several groups; its command is
  // made by Seal, when the number of groups is known.
  struct SharedCall {
    Lua lua = Lua::kHeads;
    uint32_t bucket = 0;
    uint32_t ttr_ms = 0;                  // reserve: its ttr_ms argument
    std::vector<std::string> group_args;  // per group: n, k, then k topics
    uint32_t groups = 0;
    uint32_t total = 0;  // the groups' n summed
    size_t topics = 0;   // the groups' k summed
    size_t cmd = SIZE_MAX;
    size_t promote = SIZE_MAX;  // heads: the promote sent before it
    // Where each group's count is in the reply; made on the first read.
    std::vector<size_t> starts;
    Status shape;  // a reply that does not match the groups
  };
  GroupSlot AddGroup(Lua lua, uint32_t bucket, uint32_t n, const std::vector<std::string>& topics,
                     uint32_t ttr_ms);
  // `lua` on `bucket` with `args`, marked needs_replicas as NeedsReplicas says.
  redis::Command Call(Lua lua, uint32_t bucket, std::vector<std::string> args) const;
  // The arguments a command of `lua` starts with: now_ms, or none.
  std::vector<std::string> FirstArgs(Lua lua) const;
  // Fills call.starts from its reply, or sets call.shape.
  void IndexReply(SharedCall& call, const redis::Reply& reply);

  Context& ctx_;
  const int64_t now_;
  const std::string now_text_;
  std::vector<redis::Command> cmds_;
  std::map<std::pair<Lua, uint32_t>, Open> open_;
  std::vector<SharedCall> shared_;
  // (lua, bucket, ttr_ms) -> shared_ index
  std::map<std::tuple<Lua, uint32_t, uint32_t>, size_t> open_shared_;
  std::set<uint32_t> promote_;  // buckets promoted before heads
  bool sealed_ = false;
  std::vector<Result<redis::Reply>> results_;
  std::map<uint32_t, int64_t> due_;
  std::set<std::pair<std::string, uint32_t>> ready_;
  std::vector<Empty> empty_;
};

class ReserveGroup;

// One call to the store (or one group of reserve attempts).
class Op {
 public:
  virtual ~Op() = default;
  // Adds this round's commands to `b`.
  virtual void Plan(Batch& b) = 0;
  // Reads this round's replies from `b`; true once the op has its result,
  // false when it needs another round.
  virtual bool Absorb(Batch& b) = 0;
  // Sets the result to `s` instead (the queue is closing).
  virtual void Fail(Status s) = 0;
  // Runs the callback with the result. Never under the queue's locks.
  virtual void Complete() = 0;
  // The job id it changes or reads, for the dispatcher's rule that ops of
  // different kinds on one id never share a round; empty for none.
  virtual std::string_view id() const { return {}; }
  virtual Lua kind() const = 0;
  // Roughly the bytes it sends, to bound a round.
  virtual size_t bytes() const { return 64; }
  virtual ReserveGroup* AsGroup() { return nullptr; }
  // Whether it may need more than one round. The dispatcher then starts no
  // op submitted after it until it completes (nor in its first round), so
  // calls made one after the other act one after the other (a connection's
  // pipeline: docs/api.md). Reserve groups are not held to it: waits are
  // ordered by the front end (a reserve holds back what follows it).
  virtual bool MayTakeRounds(const Context&) const { return false; }
  // Whether what it reads or changes is more than one job: a topic or the
  // whole queue (peek, topics, stats, pause, kick_topic). The dispatcher then
  // starts no op submitted after it in its round: an op behind it could join
  // a shared command opened before it (an `add` call of its bucket), which
  // runs first, and so be seen by a read made before it. The ops before it
  // in its round are planned, and run, before it. Ops on one job id need no
  // barrier: their order is kept per id (RedisQueue::TakeOps).
  virtual bool Barrier() const { return false; }
};

using AddDone = std::function<void(Result<AddResult>)>;
using StatusDone = std::function<void(Status)>;
using JobDone = std::function<void(Result<JobInfo>)>;
using CountDone = std::function<void(Result<uint64_t>)>;
// Per topic counts of the store, summed over buckets (waiting left at 0),
// and the pause end: -1 until resumed, 0 none, else wall ms.
struct TopicCounts {
  TopicInfo info;
  int64_t paused_until_ms = 0;
};
using TopicsDone = std::function<void(Result<std::vector<TopicCounts>>)>;
// Stats summed over buckets (waiting and topics left at 0), and every topic
// name the store knows.
struct StoreStats {
  QueueStats stats;
  std::set<std::string> topics;
};
using StatsDone = std::function<void(Result<StoreStats>)>;

// REQUIRES (all): arguments already validated as the Queue methods do.
std::unique_ptr<Op> MakeAdd(const JobSpec& spec, AddDone done);
std::unique_ptr<Op> MakeFinish(std::string_view id, std::string_view receipt, StatusDone done);
std::unique_ptr<Op> MakeTouch(std::string_view id, std::string_view receipt, StatusDone done);
std::unique_ptr<Op> MakeDelete(std::string_view id, StatusDone done);
std::unique_ptr<Op> MakeRelease(std::string_view id, std::string_view receipt, int64_t delay_ms,
                                std::string_view error, StatusDone done);
// Gives back a delivery without counting it (unreserve.lua). `surplus`: the
// delivery never left this queue (past a batch's byte budget), so it is not
// counted in reserves either.
std::unique_ptr<Op> MakeUnreserve(std::string_view id, std::string_view receipt, StatusDone done,
                                  bool surplus = false);
std::unique_ptr<Op> MakeBury(std::string_view id, std::string_view receipt, std::string_view reason,
                             StatusDone done);
std::unique_ptr<Op> MakeKick(std::string_view id, StatusDone done);
std::unique_ptr<Op> MakeGet(std::string_view id, JobDone done);
std::unique_ptr<Op> MakePeek(std::string_view topic, JobState state, JobDone done);
std::unique_ptr<Op> MakeKickTopic(std::string_view topic, uint64_t n, CountDone done);
// until_ms as pause.lua: -1 until resumed, 0 resume, > 0 the end (wall ms).
std::unique_ptr<Op> MakePause(std::string_view topic, int64_t until_ms, StatusDone done);
// Every topic, or only `topic` (then exactly one entry).
std::unique_ptr<Op> MakeTopics(std::optional<std::string> topic, TopicsDone done);
std::unique_ptr<Op> MakeStats(StatsDone done);

// One try of a ReserveAsync (a waiter's attempt).
struct Attempt {
  uint64_t ticket = 0;
  uint64_t serial = 0;  // which attempt of the waiter this is
  uint32_t count = 0;
  // ReserveRequest::max_bytes (0: none): the group hands it jobs while their
  // bodies fit (one at least), and the next attempt gets the rest.
  uint64_t max_bytes = 0;
  // Where to look: every bucket (a first attempt), or only those where jobs
  // of its topics became ready since its last attempt found none.
  bool all_buckets = true;
  std::vector<uint32_t> buckets;
  bool finished = false;  // got or error is its answer
  Status error;
  Deliveries got;
};

// Reserve attempts of several waiters with the same topics, served together:
// `heads` on every bucket the attempts look at (a bucket that has work due
// is promoted first), the sort keys merged, `reserve` on the buckets that
// hold the best for the summed count, the deliveries merged by (priority,
// run_at, seq) and handed to the attempts in order. The groups of one round
// share their calls (Batch::AddHeads, AddReserve): one heads and one reserve
// per bucket serve them all, so the cost of a round does not grow with the
// number of topic lists waiting; the groups of a round share no topic
// (RedisQueue::TakeAttempts). A bucket that hands out fewer than its heads
// promised (another server was faster) costs another round for the
// attempts that got nothing, at most twice. When the
// attempts look at one bucket only there is nothing to merge: `reserve`
// alone.
class ReserveGroup final : public Op {
 public:
  // ttr_ms: the attempts' ReserveRequest::ttr_ms (the same for all).
  ReserveGroup(std::vector<std::string> topics, uint32_t ttr_ms)
      : topics_(std::move(topics)), ttr_ms_(ttr_ms) {}
  const std::vector<std::string>& topics() const { return topics_; }
  // The attempts in order; the queue drops cancelled ones between rounds
  // and ends finished ones after each round.
  std::vector<Attempt> attempts;

  void Plan(Batch& b) override;
  bool Absorb(Batch& b) override;
  void Fail(Status s) override;
  void Complete() override {}
  Lua kind() const override { return Lua::kReserve; }
  ReserveGroup* AsGroup() override { return this; }
  // Whether its attempts have their jobs but wait for the surplus to be
  // given back (the queue answers them, and ends them, only after that).
  bool GivingBack() const { return stage_ == Stage::kGiveBack; }

 private:
  enum class Stage { kHeads, kPromote, kReserve, kGiveBack };
  struct Key {
    int64_t priority;
    int64_t run_at;
    int64_t seq;
    uint32_t bucket;
    bool operator<(const Key& o) const {
      if (priority != o.priority) return priority < o.priority;
      if (run_at != o.run_at) return run_at < o.run_at;
      if (seq != o.seq) return seq < o.seq;
      return bucket < o.bucket;
    }
  };
  uint32_t Wanted() const;  // summed count of the unfinished attempts
  // The buckets the unfinished attempts look at, ascending.
  std::vector<uint32_t> Scope(uint32_t buckets) const;
  void PlanHeads(Batch& b, const std::vector<uint32_t>& buckets, bool promote_known_due);
  // Reads the heads round; false (and the attempts failed) on an error.
  bool AbsorbHeads(Batch& b);
  bool AbsorbReserve(Batch& b);
  // The round that gives surplus_ back (unreserve.lua with `surplus`).
  void PlanGiveBack(Batch& b);
  bool AbsorbGiveBack(Batch& b);
  void FailAll(const Status& s);

  const std::vector<std::string> topics_;
  const uint32_t ttr_ms_;
  Stage stage_ = Stage::kHeads;
  int retries_ = 0;
  // Deliveries past every attempt's count or byte budget, given back
  // (unreserve, as surplus) in a round of their own before any attempt is
  // answered, so that a reserve after them finds them ready.
  Deliveries surplus_;
  std::vector<std::pair<size_t, const Delivery*>> give_back_cmds_;
  // This round's parts of the shared calls.
  struct HeadsCmd {
    uint32_t bucket;
    Batch::GroupSlot slot;
    uint64_t stamp;  // Context::ready_events when planned
  };
  std::vector<HeadsCmd> heads_cmds_;
  struct ReserveCmd {
    uint32_t bucket;
    Batch::GroupSlot slot;
    uint32_t count;  // asked for
    uint64_t stamp;  // Context::ready_events when planned
  };
  std::vector<ReserveCmd> reserve_cmds_;
  std::map<uint32_t, uint32_t> planned_;  // bucket -> count asked
  bool direct_ = false;                   // one bucket, reserved without heads: no promise to miss
  Status refused_;  // every bucket of its scope is short of replicas (Context::short_of_replicas)
  std::map<uint32_t, std::vector<Key>> keys_;  // heads' keys per bucket
  std::vector<uint32_t> redo_;  // buckets whose heads saw work due: promote and read again
};

}  // namespace delayq::rq

#endif  // DELAYQ_REDIS_STORE_REDIS_QUEUE_OPS_H_
