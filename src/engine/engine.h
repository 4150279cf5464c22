// Engine: the in-process delay queue — job table, timers, ready queues and the
// state machine of SPEC §4. No sockets, no files, no threads.
//
// Indexes (all hold 4-byte JobArena handles; a job sits in exactly one, and
// JobRecord::pos is its position there):
//   ids_          hash set of jobs with client-chosen ids, by id text (a
//                 generated id is seq + handle, so it needs no entry)
//   per topic     delayed: 4-ary heap by run_at
//                 ready:   4-ary heap by (priority, run_at, order of adding)
//                 buried:  ordered set by order of adding
//   timers_       heap of topics by their earliest delayed job
//   reservations_ heap of reserved jobs by TTR deadline (monotonic)
//   far_          delayed jobs due beyond the memory window, with no record
//                 here: their records stay in the durable store (FarSet,
//                 SetFarStore); each is brought back as its time nears
// and, apart from the jobs, the adds made with an idempotency key within the
// dedup window (dedup_, by the add's id and key; remembered_, oldest first):
// what a repeat of one is answered (see Remembered).
//
// Timing is event driven: NextDeadlines() tells the owner when something
// falls due; the owner sleeps until then (or until woken by an earlier
// deadline) and calls Tick(). Every other call also acts on the current time
// first, so the engine is never stale, whatever the owner's timer does.
//
// Clocks: run_at is wall-clock Unix ms (a job "runs at 09:00"). TTR, long-poll
// waits and pauses are durations and run on the monotonic clock, so stepping
// the wall clock neither expires reservations nor stretches waits. A wall
// clock stepped forward makes jobs whose run_at it passed due at once; one
// stepped back makes delayed jobs wait for their run_at again. Jobs already
// ready stay ready: never early is judged against the clock when promoted.
//
// Thread-safety: none. One owner thread (the server's loop, or LocalQueue
// under its mutex) calls everything. Reserve callbacks run inside engine
// calls and must not call back into the engine.
#ifndef DELAYQ_ENGINE_ENGINE_H_
#define DELAYQ_ENGINE_ENGINE_H_

#include <cstdint>
#include <limits>
#include <list>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "delayq/clock.h"
#include "delayq/job.h"
#include "delayq/queue.h"
#include "delayq/status.h"
#include "engine/far_set.h"
#include "engine/heap.h"
#include "engine/huge_page_allocator.h"
#include "engine/job_arena.h"
#include "engine/job_record.h"
#include "engine/journal.h"

namespace delayq::engine {

inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct EngineOptions {
  // Required.
  std::shared_ptr<Clock> clock;
  Limits limits;
  // Address space reserved for job records. Default: 32 GiB (the most 32-bit
  // handles reach); only touched pages use memory.
  size_t arena_reserve_bytes = JobArena::kMaxReserveBytes;
  // Idempotent adds (JobSpec::idempotency_key): how long one is remembered
  // from the add (0: not at all), and how many at most (the oldest go
  // first). Defaults: QueueOptions's.
  int64_t dedup_window_ms = kDefaultDedupWindowMs;
  size_t max_remembered_adds = kMaxRememberedAdds;
};

class Engine {
 public:
  // Errors: kInvalidArgument without a clock; kUnavailable if the arena
  // cannot be reserved.
  static Result<std::unique_ptr<Engine>> Create(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The operations of Queue (see delayq/queue.h for their contracts).
  Result<AddResult> Add(const JobSpec& spec);
  // Calls `done` inside this call and returns 0, or registers a waiter and
  // returns its id; the waiter's `done` runs inside a later call (Tick, Add,
  // Release, Kick, Resume, ...) when jobs arrive or the wait runs out.
  uint64_t Reserve(const ReserveRequest& req, ReserveCallback done);
  // True if the waiter was registered and its `done` will now never run.
  bool CancelWaiter(uint64_t waiter);
  // Answers every waiting reserve with `status` (on shutdown).
  void FailWaiters(const Status& status);
  Status Finish(std::string_view id, std::string_view receipt);
  Status Delete(std::string_view id);
  Status Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                 std::string_view error);
  Status Touch(std::string_view id, std::string_view receipt);
  Status Unreserve(std::string_view id, std::string_view receipt);
  Status Bury(std::string_view id, std::string_view receipt, std::string_view reason);
  // Finish, Release and Bury for each ack in order, on one reading of the
  // clocks: one answer per ack (Queue::Acknowledge).
  std::vector<Status> Acknowledge(std::span<const Ack> acks);
  Status Kick(std::string_view id);
  Result<uint64_t> KickTopic(std::string_view topic, uint64_t n);
  Result<JobInfo> Get(std::string_view id);
  Result<JobInfo> Peek(std::string_view topic, JobState state);
  Status Pause(std::string_view topic, int64_t duration_ms);
  Status Resume(std::string_view topic);
  std::vector<TopicInfo> Topics();
  Result<TopicInfo> Topic(std::string_view topic);
  QueueStats Stats();

  // Acts on the current time: delayed jobs due by now become ready, expired
  // reservations go back to ready (or buried), ended pauses end, expired
  // waits answer empty, and waiting reserves are served.
  //
  // One call serves waiting reserves up to about kServeSliceJobs jobs (at
  // least one whole reserve): a burst of ten thousand due jobs for many
  // waiters goes out in slices, so the owner can send the first answers
  // while the rest are still being taken. ServeLeft() says a slice was cut
  // short; NextDeadlines() is then due now, and the next call (any call)
  // serves the next slice.
  void Tick();
  bool ServeLeft() const { return serve_cut_; }
  static constexpr uint32_t kServeSliceJobs = 256;

  // When Tick next has work: the earliest job due time (wall clock) and the
  // earliest TTR / wait / pause deadline (monotonic clock); kNever for none.
  struct Deadlines {
    int64_t wall_ms = kNever;
    int64_t mono_ms = kNever;
  };
  Deadlines NextDeadlines() const;

  // Milliseconds until NextDeadlines() by the engine's clock, 0 if overdue,
  // -1 if nothing is scheduled.
  int64_t MsUntilNextDeadline() const;

  // --- durability (the embedded store) -----------------------------------
  // Tells `journal` every durable change from now on (nullptr: nobody).
  void SetJournal(Journal* journal) { journal_ = journal; }

  // --- the memory window (the embedded store) --------------------------------
  // From now on, a delayed job due more than `window_ms` ahead (wall clock)
  // leaves memory: only a FarSet slot stays (what finding it by id needs);
  // its record is in `store`, read back to answer for it (GET, DELETE,
  // PEEK, KICK) and to bring it back `window_ms` before it is due. Call
  // before replay, with the object that is also the journal, and
  // EndRestore once replay is over (or at once, with nothing to replay).
  // Every answer is the same as with every job in memory.
  // `files`: where the far jobs' time index is sealed once kMaxMutableFar
  // entries are in memory (null: all kept in memory).
  // window_bytes: a budget for the jobs in memory (their records' bytes):
  // past it, jobs beyond the window's start come in only when due, and
  // adds not yet due go far (0: none).
  void SetFarStore(FarStore* store, int64_t window_ms, FarIndexFiles* files = nullptr,
                   size_t max_mutable = kMaxMutableFar, uint64_t window_bytes = 0);
  static constexpr size_t kMaxMutableFar = 1 << 20;
  // Delayed jobs beyond the window still in memory because they changed
  // since their record was written (a release with a long delay, a replay):
  // writes each in full (FarStore::StoreJob) and lets it go, up to about
  // `max_bytes` of records. True if more wait.
  bool SettleFar(uint64_t max_bytes);
  bool settle_pending() const { return !settle_.empty(); }
  // Compaction: the far job whose record (of id `id`) is at `location`, or
  // FarSet::kNoSlot; MoveFar: its record was written again at `location`.
  uint32_t FarAt(std::string_view id, uint64_t location);
  void MoveFar(uint32_t slot, uint64_t location) { far_.Move(slot, location); }
  // After a repair moved records: each far job's new location (fn(old)).
  template <typename Fn>
  void RelocateFar(Fn&& fn) {
    far_.ForEachLive([&](uint32_t slot) { far_.Move(slot, fn(far_.location(slot))); });
  }
  struct FarFigures {
    uint64_t jobs = 0;          // far now
    uint64_t entries = 0;       // time index entries (live or not)
    uint64_t loads = 0;         // brought back near
    uint64_t stores = 0;        // written in full to go far (SettleFar)
    uint64_t reads = 0;         // records read back
    uint64_t read_errors = 0;   // reads that failed
    uint64_t lost = 0;          // whose record did not check out when due
    uint64_t index_errors = 0;  // the time index's files could not be written or read
    uint64_t sealed_runs = 0;   // runs of the time index in files now
    uint64_t seals = 0;         // runs written
    uint64_t rebuilds = 0;      // of the time index, after a run did not check out
  };
  FarFigures far_figures() const;

  // Replay: rebuilds state from what a Journal was told, in the same order,
  // on an engine nobody else has called yet. Times are judged by the clocks
  // as the engine read them when it was created; Tick() afterwards. A job
  // comes back in the state it had: a reservation with its deadline (wall
  // clock; one that ran out meanwhile times out on the first Tick), a delayed
  // job whose run_at passed is ready at once. A restored job keeps its id
  // text, generated or not. Updates and removals of a job that is not there
  // (or is there with another seq) are ignored: their add was compacted away
  // with them. RestorePut says whether it replaced a live job of that id (a
  // copy compaction wrote); `location` is where the record lies (0: not
  // known; then the job stays in memory). Errors: kUnavailable when memory
  // runs out; the far store's, reading a far job back.
  Status RestorePut(const JobImage& job, uint64_t location, bool* replaced);
  // Room in the id table for `jobs` restored jobs, so replay does not rehash.
  void ReserveIds(size_t jobs) { ids_.reserve(jobs); }
  Status RestoreUpdate(const JobImage& job);
  Status RestoreRemove(std::string_view id, uint64_t seq);
  void RestorePause(std::string_view topic, int64_t paused_until_ms);
  // An add with an idempotency key, remembered again (unless it expired).
  void RestoreDedup(const DedupImage& add);
  // Replay is over (RestorePut no more): far slots freed meanwhile are
  // handed out again from now on.
  // Replay has passed the records a checkpoint wrote again: each add from
  // here on is looked up again (it may replace a job the checkpoint knows).
  void EndResumedRewrite() { resumed_seq_ = 0; }
  void EndRestore() {
    far_.EndRestore();
    resumed_seq_ = 0;
  }
  // Generated ids and seqs continue after `seq`.
  void RestoreSeq(uint64_t seq) { last_seq_ = std::max(last_seq_, seq); }
  uint64_t last_seq() const { return last_seq_; }
  // The Stats counters start from zero (after a replay: they count since
  // this process opened the queue, not what replaying did).
  void ResetCounters() { counters_ = QueueStats{}; }

  // The live job `id` if it is still the incarnation `seq` (compaction asks
  // whether a logged add is still needed). The image points into the engine
  // and into `id`: valid until the next call. far: a far job too (read
  // back from the store).
  bool FindImage(std::string_view id, uint64_t seq, JobImage* image, bool far = true);
  // Topics paused now, with the wall-clock end of the pause (-1: until resumed).
  std::vector<std::pair<std::string, int64_t>> PausedTopics();

  // --- a far-future checkpoint (far/checkpoint.h) ------------------------------
  // The owner writes everything in memory again (ForEachJob, PausedTopics,
  // ForEachRemembered) at the head of a new segment, and keeps what the far
  // jobs need besides their records: this image and the slots
  // (BeginFarSnapshot). The next start restores both before it replays
  // from that segment on.
  struct FarImage {
    int64_t horizon_ms = 0;
    uint64_t last_seq = 0;
    bool client_took_generated_form = false;
    std::vector<std::string> topics;  // every topic's name, by index
    FarSet::Image far;
  };
  // Seals the time index's mutable part (a run for the files) and describes
  // the far jobs; false (nothing to keep) while the index is being made
  // again or a run could not be read.
  bool SealFar(FarImage* out);
  const FarSet& far_set() const { return far_; }
  // The slots' table as SealFar left it, for a checkpoint written while the
  // engine serves (FarSet::BeginSnapshot and its chunks).
  void BeginFarSnapshot() { far_.BeginSnapshot(); }
  size_t FarSnapshotChunk(size_t i, uint64_t* loc, uint32_t* aux) {
    return far_.SnapshotChunk(i, loc, aux);
  }
  void EndFarSnapshot() { far_.EndSnapshot(); }
  size_t far_jobs() const { return far_.jobs(); }
  // The runs outlive the engine (SealFar's checkpoint names them).
  void KeepFarRuns() { far_.KeepRuns(); }
  // Takes the far jobs a checkpoint kept, their slots from `load`: right
  // after SetFarStore, before replay, on an engine with no topic yet.
  // Errors: FarSet::Restore's; the engine is as it was then.
  Status RestoreFar(const FarImage& image, const FarSet::SlotLoader& load);
  // Calls fn(image) for every job in memory, in any state (the image's
  // views last for the call).
  void ForEachJob(const std::function<void(const JobImage&)>& fn) const;
  // Calls fn(add) for every add remembered now, oldest first.
  void ForEachRemembered(const std::function<void(const DedupImage&)>& fn) const;

  size_t job_count() const { return live_jobs_; }
  const Clock& clock() const { return *clock_; }

 private:
  // Transparent string hashing (Debian's Abseil has its own string_view type,
  // so its default heterogeneous lookup does not accept std::string_view).
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };
  struct NameEq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };

  // --- index functors: they read the arena through the engine --------------
  struct IdHash {
    const Engine* e;
    using is_transparent = void;
    size_t operator()(std::string_view id) const;
    size_t operator()(uint32_t h) const;
  };
  struct IdEq {
    const Engine* e;
    using is_transparent = void;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(uint32_t h, std::string_view id) const;
    bool operator()(std::string_view id, uint32_t h) const { return (*this)(h, id); }
  };
  struct SetPos {
    const Engine* e;
    void operator()(uint32_t h, size_t pos) const;
  };
  // A delayed heap entry carries a coarse copy of its run_at (256 ms units
  // since 2020, saturating; see DelayKey in engine.cc), so sift steps compare
  // inline and read records only to break ties: an add at ten million jobs
  // then does not wait for a random parent record to come from DRAM.
  struct DelayEntry {
    uint32_t key;
    uint32_t handle;
  };
  struct DelayLess {
    const Engine* e;
    bool operator()(const DelayEntry& a, const DelayEntry& b) const;
  };
  struct DelayPos {
    const Engine* e;
    void operator()(const DelayEntry& d, size_t pos) const { SetPos{e}(d.handle, pos); }
  };
  // A ready heap entry carries its job's whole order key (priority, run_at,
  // seq), so sift steps never read a record: ten thousand jobs falling due on
  // one millisecond are promoted and handed out without a random record read
  // per comparison. Only ready jobs have one (24 bytes each); the many
  // delayed jobs keep 8-byte entries.
  struct ReadyEntry {
    uint32_t priority;
    uint32_t handle;
    int64_t run_at_ms;
    uint64_t seq;
  };
  struct ReadyLess {
    bool operator()(const ReadyEntry& a, const ReadyEntry& b) const {
      if (a.priority != b.priority) return a.priority < b.priority;
      if (a.run_at_ms != b.run_at_ms) return a.run_at_ms < b.run_at_ms;
      return a.seq < b.seq;
    }
  };
  struct ReadyPos {
    const Engine* e;
    void operator()(const ReadyEntry& r, size_t pos) const { SetPos{e}(r.handle, pos); }
  };
  struct Reservation {
    int64_t until_mono;
    uint32_t handle;
    // This reservation's TTR: what a touch extends it by. The job's own, or
    // the reserve's ReserveRequest::ttr_ms (it fits in the padding: entries
    // stay 16 bytes).
    uint32_t ttr_ms;
  };
  struct ReservationLess {
    bool operator()(const Reservation& a, const Reservation& b) const {
      return a.until_mono < b.until_mono;
    }
  };
  struct ReservationPos {
    const Engine* e;
    void operator()(const Reservation& r, size_t pos) const { SetPos{e}(r.handle, pos); }
  };
  struct TimerLess {
    const Engine* e;
    bool operator()(uint32_t ta, uint32_t tb) const;
  };
  struct TimerPos {
    Engine* e;
    void operator()(uint32_t topic, size_t pos) const;
  };

  using DelayHeap = IndexedHeap<DelayEntry, DelayLess, DelayPos>;
  using ReadyHeap = IndexedHeap<ReadyEntry, ReadyLess, ReadyPos>;

  static constexpr uint32_t kNotInHeap = std::numeric_limits<uint32_t>::max();

  struct TopicState {
    TopicState(Engine* e, std::string n, uint32_t i)
        : name(std::move(n)),
          index(i),
          delayed(DelayLess{e}, DelayPos{e}),
          ready(ReadyLess{}, ReadyPos{e}) {}
    std::string name;
    uint32_t index;  // in topics_
    DelayHeap delayed;
    ReadyHeap ready;
    absl::btree_set<std::pair<uint64_t, uint32_t>> buried;  // (seq, handle)
    uint64_t reserved = 0;
    int64_t paused_until_mono = 0;    // 0: not paused; kNever: until resumed
    std::list<uint64_t> waiters;      // waiter ids, oldest first
    uint32_t timer_pos = kNotInHeap;  // position in timers_
    bool serve_pending = false;       // queued in serve_queue_
  };

  struct Waiter {
    std::vector<uint32_t> topics;
    std::vector<std::list<uint64_t>::iterator> links;  // one per topic
    uint32_t count = 1;
    uint64_t max_bytes = 0;  // ReserveRequest::max_bytes
    uint32_t ttr_ms = 0;     // ReserveRequest::ttr_ms
    int64_t deadline_mono = 0;
    ReserveCallback done;
  };

  Engine(EngineOptions options, std::unique_ptr<JobArena> arena);

  JobRecord* Rec(uint32_t h) const { return reinterpret_cast<JobRecord*>(arena_->Ptr(h)); }
  JobState StateOf(uint32_t h) const { return static_cast<JobState>(Rec(h)->state); }

  // Reads the clocks and acts on the time (see Tick).
  void Advance();
  void PromoteDue();
  void ExpireReservations();
  void EndPauses();
  void ExpireWaiters();
  void ServePending();
  void MarkServe(uint32_t topic);

  uint32_t FindJob(std::string_view id) const;  // 0 if absent
  // The far job `id`: its slot (FarSet::kNoSlot if none) and its record in
  // `out`. Errors: the far store's.
  Status FindFar(std::string_view id, uint32_t* slot, StoredJob* out);
  Status ReadFar(uint32_t slot, StoredJob* out);
  // Whether `id` names a live job, near or far (a read error counts as yes:
  // the caller then picks another id).
  bool IdTaken(std::string_view id);
  // Beyond the horizon, or past the byte budget and not due yet.
  bool IsFar(int64_t run_at_ms) const {
    return far_store_ != nullptr &&
           (run_at_ms > horizon_ms_ || (run_at_ms > now_wall_ && OverBudget()));
  }
  // Brings the far job in `slot` (read into `job`) into memory, scheduled;
  // 0 when memory is exhausted (it stays far).
  uint32_t BringNear(uint32_t slot, const StoredJob& job);
  // The far job in `slot` is gone.
  void DropFar(uint32_t slot, const StoredJob& job);
  // An add replaces the live job of its id: the one in memory (`old`), or
  // the far one (`old_far`, read into `old_far_job`), if either.
  void ReplaceOld(uint32_t old, uint32_t old_far, const StoredJob& old_far_job);
  // Moves the horizon on and brings near the far jobs it reached.
  void LoadFar();
  bool OverBudget() const;
  // The time index lost a run (its bytes did not check out): rebuilt from
  // the far jobs' records, every one read. False if a read failed (I/O):
  // tried again later.
  bool RebuildFarIndex();
  // Places a far job (slot taken) and seals the time index's mutable part
  // when it is full.
  void PlaceFar(uint32_t slot, uint32_t topic, int64_t run_at_ms, uint64_t seq, uint64_t location,
                bool hashed, uint32_t id_hash);
  Result<AddResult> AddFar(const JobSpec& spec, int64_t run_at, uint32_t old, uint32_t old_far,
                           const StoredJob& old_far_job, bool remember);
  // What an ack (finish, release, ...) that needs a reservation is told
  // about a far job (delayed), or NotFound without one.
  Status AnswerFar(std::string_view id, std::string_view receipt);
  JobInfo InfoOf(const StoredJob& job) const;
  bool IsIndexed(uint32_t h) const;            // the index of its state holds it
  uint32_t TopicIndex(std::string_view name);  // creates on first use
  const TopicState* FindTopic(std::string_view name) const;
  uint64_t NextSeq();
  // The receipt of the job's current delivery, written into `buf`: 16 hex
  // digits of seq, 8 of the delivery number (attempts + give-backs, mod
  // 2^32). Each delivery of an add gets a number no earlier one had: a
  // reserve raises it, and nothing lowers it (Unreserve takes an attempt
  // back but counts a give-back), so a receipt is never handed out twice.
  // Compared without allocating on finish.
  static constexpr size_t kReceiptBytes = delayq::kReceiptBytes;
  std::string_view Receipt(uint32_t h, char (&buf)[kReceiptBytes]) const;
  // Deliveries of the job given back by Unreserve.
  uint32_t GiveBacks(uint32_t h) const;
  void SetGiveBacks(uint32_t h, uint32_t n);
  // Whether `receipt` (its shape already checked: ValidateReceipt) is the
  // job's current reservation; an empty one only asks that it be reserved.
  Status CheckReservation(uint32_t h, std::string_view id, std::string_view receipt) const;

  // Creates the record for `spec` (`id` empty for a generated one); neither
  // indexes it by id nor schedules it. Returns 0 when memory is exhausted.
  uint32_t CreateRecord(std::string_view id, std::string_view body, uint64_t seq, uint32_t topic,
                        int64_t run_at, uint32_t ttr_ms, uint32_t priority, uint32_t max_attempts);
  // The job as the journal sees it, and the calls that tell it.
  JobImage ImageOf(uint32_t h) const;
  void JournalPut(uint32_t h);
  void JournalUpdate(uint32_t h);
  void JournalRemoved(uint32_t h);
  void AttachRestored(uint32_t h, const JobImage& job);
  int64_t PauseEndWall(const TopicState& t) const;
  void DestroyRecord(uint32_t h);
  // Removes the job from the index of its state / puts it in the index of a
  // new state.
  void Detach(uint32_t h);
  void AttachDelayed(uint32_t h);
  void AttachReady(uint32_t h);
  void AttachReserved(uint32_t h, int64_t until_mono, uint32_t ttr_ms);
  void AttachBuried(uint32_t h);
  // Reservation ended without success (release, TTR): buried if attempts are
  // used up, else due again at `retry_at` (nullopt: ready now, run_at kept).
  // `error` becomes the last_error (empty clears it). Returns true if buried.
  bool EndAttempt(uint32_t h, std::optional<int64_t> retry_at, std::string_view error);
  void Schedule(uint32_t h);  // delayed or ready by run_at vs now
  void UpdateTimer(uint32_t topic);
  void SetLastError(uint32_t h, std::string_view error);
  void ClearLastError(uint32_t h);

  Delivery Deliver(uint32_t h, uint32_t ttr_ms);
  // Pops up to `count` best ready jobs across `topics` and reserves them,
  // stopping before the job that would take the bodies past `max_bytes`
  // (0: no limit) unless it would be the first.
  // ttr_ms: ReserveRequest::ttr_ms (0: each job's own TTR).
  Deliveries TakeBest(const std::vector<uint32_t>& topics, uint32_t count, uint64_t max_bytes,
                      uint32_t ttr_ms);
  void UnlinkWaiter(Waiter& w);
  JobInfo Info(uint32_t h) const;
  TopicInfo InfoOf(const TopicState& t) const;
  bool Paused(const TopicState& t) const { return t.paused_until_mono > now_mono_; }

  // --- idempotent adds -------------------------------------------------------
  // An add with an idempotency key, as a repeat of it is answered.
  struct Remembered {
    std::string key;  // the add's id (empty: generated), '\0', its idempotency key
    AddResult result;
    int64_t expires_ms = 0;  // wall clock
  };
  static std::string DedupKey(std::string_view add_id, std::string_view key);
  // The add remembered under (add_id, key) and not expired, or nullptr.
  const Remembered* FindRemembered(std::string_view add_id, std::string_view key);
  // Remembers an applied add (replacing an older one of the same key),
  // forgetting the oldest beyond max_remembered_adds_; tells the journal.
  void Remember(const JobSpec& spec, const AddResult& result, int64_t expires_ms);
  void Insert(std::string key, const AddResult& result, int64_t expires_ms);
  // Forgets the expired adds at the front (the oldest).
  void ForgetExpired();

  std::shared_ptr<Clock> clock_;
  Limits limits_;
  int64_t dedup_window_ms_;
  size_t max_remembered_adds_;
  // Remembered adds, oldest first; dedup_ indexes them by key (views into
  // the list's nodes, which never move).
  std::list<Remembered> remembered_;
  absl::flat_hash_map<std::string_view, std::list<Remembered>::iterator, NameHash, NameEq> dedup_;
  std::unique_ptr<JobArena> arena_;

  int64_t now_wall_ = 0;    // as read by the last Advance()
  bool time_held_ = false;  // inside Acknowledge: Advance() keeps the time it read
  int64_t now_mono_ = 0;
  uint64_t last_seq_ = 0;
  // Set once any client id had the generated form; until then generated ids
  // cannot collide and need no lookup.
  bool client_took_generated_form_ = false;

  // Jobs with client-chosen ids, by id; a generated id names its handle.
  absl::flat_hash_set<uint32_t, IdHash, IdEq, HugePageAllocator<uint32_t>> ids_;
  size_t live_jobs_ = 0;
  absl::flat_hash_set<uint32_t> big_bodies_;  // records whose body is out of line
  std::vector<std::unique_ptr<TopicState>> topics_;
  absl::flat_hash_map<std::string, uint32_t, NameHash, NameEq> topic_index_;
  IndexedHeap<uint32_t, TimerLess, TimerPos> timers_;
  IndexedHeap<Reservation, ReservationLess, ReservationPos> reservations_;
  absl::flat_hash_map<uint32_t, std::string> last_errors_;  // by handle
  // Give-backs by handle, for jobs with JobRecord::kFlagGivenBack: rare, so
  // kept beside the records, which stay 48 bytes.
  absl::flat_hash_map<uint32_t, uint32_t> give_backs_;
  absl::flat_hash_set<uint32_t> paused_topics_;
  std::vector<uint32_t> serve_queue_;  // topics with new ready jobs
  bool serve_cut_ = false;             // the last ServePending stopped at its slice

  absl::flat_hash_map<uint64_t, Waiter> waiters_;
  std::set<std::pair<int64_t, uint64_t>> waiter_deadlines_;  // (deadline_mono, id)
  uint64_t next_waiter_ = 1;

  // The memory window (SetFarStore): far_store_ null, horizon_ms_ kNever
  // without one. Jobs due by horizon_ms_ are in memory; it only grows.
  FarSet far_;
  FarStore* far_store_ = nullptr;
  int64_t window_ms_ = kNever;
  uint64_t window_bytes_ = 0;  // 0: no budget
  uint64_t near_bytes_ = 0;    // records in the arena (and their out-of-line bodies)
  int64_t horizon_ms_ = kNever;
  int64_t far_retry_mono_ = 0;        // after a failed read, loading waits until then
  bool far_rebuild_pending_ = false;  // the time index is being made again (RebuildFarIndex)
  // RestoreFar until EndRestore: the records replayed with a seq up to this
  // are the checkpoint's copies of the jobs that were in memory, each once
  // and none far, so RestorePut looks for no job they would replace.
  uint64_t resumed_seq_ = 0;
  // Delayed jobs beyond the horizon still in memory: (handle, seq).
  std::vector<std::pair<uint32_t, uint64_t>> settle_;
  StoredJob scratch_;  // FindImage's far job
  FarFigures far_counts_;

  QueueStats counters_;  // only the counter fields are kept here
  Journal* journal_ = nullptr;
};

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_ENGINE_H_
