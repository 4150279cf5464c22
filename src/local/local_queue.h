// LocalQueue: the Queue interface over an in-process Engine, safe to call from
// any number of threads: store "memory", and store "embedded", which adds a
// durable log (store::Log) that the engine tells every change (Journal).
//
// Embedded: Open replays the log into the engine (and the subscriptions and
// schedules into their maps). A change is refused with
// the log's error while the log cannot write (nothing changes then). After a
// change, a call returns once the log has released it under the fsync policy
// (with caller_loop, the caller holds its reply instead: QueueDriver::Mark).
// Compaction runs in small steps on the timing thread (or the caller's loop):
// when the log holds more dead bytes than live ones (and more than a
// segment), the oldest closed segment is read, every job whose add it holds
// and which is still live is written again at the head, and once that is
// synced the segment is deleted. A step reads 256 KiB, so it never holds the
// engine for more than a few milliseconds. Subscriptions and schedules need
// no reading: each knows the segment of its latest record, and those of the
// segment being compacted are appended again first.
//
// One mutex guards the engine; each call holds it for the engine operation
// only. Reserve callbacks never run under the mutex: the engine's callbacks
// are queued and run by the calling thread after it unlocks, so a callback
// may call the queue again.
//
// Timing: a runner thread sleeps in poll(2) on two timerfds, one armed at the
// engine's next wall-clock deadline (CLOCK_REALTIME, absolute, cancelled when
// the clock is stepped so a step is noticed at once) and one at its next
// monotonic deadline, plus an eventfd that calls use to wake it when they
// create an earlier deadline. No polling loop: with nothing scheduled it
// sleeps until woken. With a manual clock it sleeps until the clock moves.
// With OpenOptions::caller_loop there is no runner: the caller's event loop
// polls the same three descriptors and calls RunDue (QueueDriver).
#ifndef DELAYQ_LOCAL_LOCAL_QUEUE_H_
#define DELAYQ_LOCAL_LOCAL_QUEUE_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "delayq/queue.h"
#include "engine/engine.h"
#include "far/checkpoint.h"
#include "far/index_files.h"
#include "log/log.h"
#include "log/record_reader.h"
#include "serving/serving_queue.h"

namespace delayq {

class LocalQueue final : public ServingQueue, private QueueDriver {
 public:
  // Stores kMemory and kEmbedded. caller_loop: no runner thread, the caller
  // drives the timers (driver()). fs: where the log's files are reached
  // (null: the real file system). Errors: as engine::Engine::Create;
  // kInternal if the runner's file descriptors cannot be made; as
  // store::Log::Open.
  static Result<std::unique_ptr<LocalQueue>> Open(const QueueOptions& options,
                                                  bool caller_loop = false,
                                                  std::shared_ptr<store::FileSystem> fs = nullptr);
  // Stops the runner; reserves still waiting are answered kUnavailable.
  ~LocalQueue() override;

  Result<AddResult> Add(const JobSpec& spec) override;
  uint64_t ReserveAsync(const ReserveRequest& req, ReserveCallback done) override;
  bool CancelReserve(uint64_t ticket) override;
  Status Finish(std::string_view id, std::string_view receipt) override;
  // Under one lock, and one wait for the log.
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
  // Subscriptions, kept in a map beside the engine under the same mutex
  // (memory: until the process ends; embedded: in the log too). Each answers
  // inside the call, once the change is released like a job's change.
  void PutSubscriptionAsync(const Subscription& s, SubscriptionCallback done) override;
  void DeleteSubscriptionAsync(std::string_view name, std::string_view url,
                               CountCallback done) override;
  void SubscriptionsAsync(std::string_view name, SubscriptionsCallback done) override;
  // Schedules, kept like subscriptions: a map by name beside the engine,
  // under the same mutex, SCHEDULE records in the log. A firing is one turn
  // under the mutex: its jobs' records and the schedule's go out in the same
  // write (and fdatasync); a firing cut short by a crash may leave jobs
  // without the schedule's change, which the next firing's ids dedup.
  // Before anything changes, a firing's jobs are checked (each needs an id:
  // kInvalidArgument otherwise) and its room asked for; an add that fails
  // for want of memory leaves the jobs added before it and the schedule as
  // it was.
  void PutScheduleAsync(const Schedule& s, ScheduleCallback done) override;
  void DeleteScheduleAsync(std::string_view name, ScheduleCallback done) override;
  void SchedulesAsync(std::string_view name, SchedulesCallback done) override;
  void FireScheduleAsync(const ScheduleFiring& f, ScheduleFiredCallback done) override;
  QueueDriver* driver() override { return runner_.joinable() ? nullptr : this; }
  // Embedded: the log's figures (log_writes, log_syncs, ...) and health.
  StoreFigures Figures() override;
  // Embedded: what recovery found.
  std::string OpenedSummary() override;

  // Embedded only: the log's figures, compaction's, and what recovery found.
  struct StoreStats {
    store::LogStats log;
    uint64_t live_bytes = 0;  // estimated bytes of the live jobs' records
    store::RecoveryReport recovery;
    double recovery_seconds = 0;
    bool failing = false;  // the log cannot write now (or has failed for good)
    bool failed = false;   // for good: a failed fdatasync (see store::Log)
    // Ok; or why changes are refused: the log cannot write (failing), or
    // the disk is full and adds are refused (log.short_of_space).
    Status health;
    uint64_t refused_changes = 0;  // changes refused because the log could not take them
  };
  bool embedded() const { return log_ != nullptr; }
  StoreStats store_stats();
  std::string_view fsync_policy() const;

 private:
  class LogJournal;
  // A subscription's instance, keyed by (name, url).
  using SubscriptionKey = std::pair<std::string, std::string>;
  struct SubscriptionEntry {
    Subscription s;
    uint64_t segment = 0;  // embedded: the log segment holding its latest record
  };
  using Subscriptions = std::map<SubscriptionKey, SubscriptionEntry>;
  struct ScheduleEntry {
    Schedule s;
    uint64_t segment = 0;  // embedded: the log segment holding its latest record
  };
  using Schedules = std::map<std::string, ScheduleEntry, std::less<>>;

  // QueueDriver (caller_loop only).
  std::vector<int> PollFds() const override;
  void RunDue() override;
  bool MaybeDue() const override;
  uint64_t Mark() const override { return log_ ? log_->end() : 0; }
  uint64_t Released() const override { return log_ ? log_->released() : 0; }
  void Flush() override;
  void FlushIdle() override;
  bool Failed() const override { return log_ && log_->failed(); }
  // One turn of the timing work: what is due, then the timers re-armed.
  // False once the queue is stopping.
  bool RunDueOnce();

  using Deferred = std::vector<std::pair<ReserveCallback, Result<Deliveries>>>;

  LocalQueue(std::unique_ptr<engine::Engine> engine, std::unique_ptr<store::Log> log,
             std::unique_ptr<LogJournal> journal, std::unique_ptr<far::IndexFiles> far_files,
             std::shared_ptr<Clock> clock, int wake_fd, int wall_fd, int mono_fd, bool caller_loop);
  static Result<std::unique_ptr<store::Log>> OpenLog(
      const QueueOptions& options, std::shared_ptr<store::FileSystem> fs, engine::Engine& engine,
      LogJournal& journal, std::unique_ptr<far::IndexFiles>* far_files,
      store::RecoveryReport* report, uint64_t* live_bytes, Subscriptions* subscriptions,
      Schedules* schedules, store::LogResume* resumed);

  // Runs fn(engine) under the mutex, wakes the runner if fn made an earlier
  // deadline, then runs the reserve callbacks fn completed, unlocked.
  template <typename F>
  auto WithEngine(F&& fn);
  // WithEngine for a call that changes something: refused while the log
  // cannot write; waits for the log afterwards unless the caller drives us.
  // bytes: an upper bound of the change's records (Log::Room).
  template <typename F>
  auto Change(uint64_t bytes, store::Log::Need need, F&& fn);
  // --- far-future checkpoints (far_checkpoint.cc; far/checkpoint.h) ------
  // Embedded with a memory window. The first half (REQUIRES: mu_): seals
  // the far index, rolls the log and writes everything in memory again,
  // filling c. live: the runs are held, not synced, and the log is not
  // fsynced here (FinishCheckpoint waits for both); else (a stop) both are.
  // False (logged) when there is none to write.
  bool BeginCheckpoint(far::Checkpoint* c, uint64_t* synced_at, bool live);
  // At a clean stop (REQUIRES: mu_): the checkpoint that spares the next
  // start the far jobs' replay; none if a step fails (logged).
  void WriteCheckpoint();
  // While serving (REQUIRES: mu_): begins one if a crash's restart would
  // replay enough (QueueOptions::far_checkpoint_bytes); checkpoint_thread_
  // writes the slots' table off the lock (FinishCheckpoint).
  void MaybeCheckpoint();
  void FinishCheckpoint(far::Checkpoint c, uint64_t synced_at);
  // Compaction begins on `segment` (REQUIRES: mu_): the checkpoint on disk
  // goes first if the segment holds records it names.
  void DropCheckpoint(uint64_t segment);
  // The checkpoint on disk is this one (its resume point).
  void NoteCheckpoint(const store::LogResume& r);
  // One while serving failed: the next try waits (backoff_ms, doubling).
  void CheckpointFailed();
  // What a crash's restart would replay now, in bytes of log.
  uint64_t CrashReplayBytes() const;
  // At open, before replay: takes the far jobs a checkpoint kept into the
  // engine (reader: the checkpoint, read) if all of it checks out. Errors:
  // kNotFound without one; why it is not used (nothing taken then).
  static Status ResumeFromCheckpoint(const store::LogOptions& lo, const std::string& far_dir,
                                     engine::Engine& engine, far::IndexFiles& files,
                                     std::unique_ptr<far::CheckpointReader>* reader);
  // One step of compaction (REQUIRES: mu_); true if there is more to do now.
  bool CompactStep();
  // Writes in full, and lets go of, delayed jobs that went beyond the
  // memory window while in memory (Engine::SettleFar), a step at a time
  // (REQUIRES: mu_); true if more wait.
  bool SettleStep();
  bool ShouldCompact() const;
  // Wakes the timing thread (or the caller's loop) to compact, if due.
  void MaybeCompact();
  void RunCallbacks(Deferred& deferred);
  void Wake();
  void RunLoop();
  void Arm(const engine::Engine::Deadlines& d);

  std::shared_ptr<Clock> clock_;
  int clock_token_ = 0;
  const int wake_fd_;  // eventfd
  const int wall_fd_;  // timerfd, CLOCK_REALTIME
  const int mono_fd_;  // timerfd, CLOCK_MONOTONIC

  // Embedded with a memory window: the sealed runs of the far jobs' time
  // index. Before the engine, which reads them until it goes.
  std::unique_ptr<far::IndexFiles> far_files_;

  std::mutex mu_;
  // State below is protected by mu_.
  std::unique_ptr<engine::Engine> engine_;
  Deferred deferred_;                // callbacks completed by the engine
  engine::Engine::Deadlines armed_;  // what the runner sleeps until
  void SetArmed(const engine::Engine::Deadlines& d);
  // Copies of armed_, readable without the mutex (MaybeDue).
  std::atomic<int64_t> armed_wall_ms_{engine::kNever};
  std::atomic<int64_t> armed_mono_ms_{engine::kNever};
  bool stopping_ = false;
  // Subscriptions by (name, url): the order SubscriptionsAsync answers in.
  // The helpers below REQUIRE mu_.
  Subscriptions subscriptions_;
  // Forgets the instances lapsed at now_ms. No record says so: replay drops
  // them by their expires_ms (docs/log-format.md).
  void ForgetLapsed(int64_t now_ms);
  // Embedded: tells the log (and live_bytes_) that `n` more or fewer live
  // instances have their latest record where e's is.
  void CountSubscription(const SubscriptionEntry& e, int64_t n);
  // Embedded: appends e's record (a compaction's copy: rewrite), and notes
  // where it went.
  void LogSubscription(SubscriptionEntry& e, bool rewrite = false);
  Subscriptions::iterator DropSubscription(Subscriptions::iterator it);
  // Compaction: appends again every live instance whose latest record is in
  // `segment`. False, having appended nothing, if the log has no room now.
  bool KeepSubscriptions(uint64_t segment);
  // Schedules by name; the helpers below REQUIRE mu_ and mirror the
  // subscriptions' ones.
  Schedules schedules_;
  void CountSchedule(const ScheduleEntry& e, int64_t n);
  void LogSchedule(ScheduleEntry& e, bool rewrite = false);
  bool KeepSchedules(uint64_t segment);
  // Embedded: room for a change's records, asked again under the mutex once
  // the stored schedule (and so its record's size) is known.
  Status ScheduleRoom(uint64_t bytes, store::Log::Need need);

  // Embedded only. The journal is the engine's; the log outlives it.
  std::unique_ptr<store::Log> log_;
  std::unique_ptr<LogJournal> journal_;
  std::atomic<uint64_t> live_bytes_{0};
  std::atomic<uint64_t> refused_changes_{0};
  store::RecoveryReport recovery_;
  double recovery_seconds_ = 0;
  const bool caller_loop_;
  Limits limits_;  // a firing's jobs are checked against them before any is added
  uint64_t log_segment_bytes_ = 0;
  int64_t memory_window_ms_ = -1;          // embedded: QueueOptions::memory_window_ms
  std::shared_ptr<store::FileSystem> fs_;  // embedded: where the files are
  std::string far_dir_;                    // embedded: <data_dir>/far
  std::atomic<bool> compaction_idle_{true};
  struct Compaction {
    uint64_t segment = 0;  // being compacted; 0: none
    uint64_t offset = 0;   // of its records read so far
    std::string carry;     // a record cut by the end of a read
    bool scanned = false;
    uint64_t remove_after = 0;  // log position to be synced before it goes
    bool stuck = false;         // a segment could not be read: no more tries
    bool records_kept = false;  // its subscriptions and schedules were appended again
  } compaction_;                // GUARDED_BY(mu_)

  struct CheckpointState {
    std::atomic<bool> running{false};  // checkpoint_thread_ writes one (read by ShouldCompact)
    bool on_disk = false;              // a checkpoint is on disk (its runs held)
    // What a crash's restart replays: base_bytes, and what was appended
    // since the log's end() was base_end.
    uint64_t base_end = 0;
    uint64_t base_bytes = 0;
    uint64_t next_base_end = 0;  // base_end once the one being written is on disk
    uint64_t rewrite_bytes = 0;  // what the last one wrote again
    int64_t retry_after_ms = 0;  // monotonic; after a failure
    uint64_t presync_at = 0;     // one is due: the log synced to here first (0: not asked)
    uint64_t segment = 0;        // the one on disk: its resume point, and the segments
    std::set<uint64_t> needed;   // before it that hold far records (compaction drops it)
    int64_t backoff_ms = 0;      // after failures in a row: doubles, up to an hour
    int64_t began_ms = 0;        // the last one's time under the lock
    uint64_t written = 0;
    uint64_t failed = 0;
  } checkpoint_;  // GUARDED_BY(mu_)
  uint64_t far_checkpoint_bytes_ = 0;
  std::thread checkpoint_thread_;  // joined before the stop's checkpoint

  std::thread runner_;  // started last (by Open), joined first; none with caller_loop
};

}  // namespace delayq

#endif  // DELAYQ_LOCAL_LOCAL_QUEUE_H_
