#include "local/local_queue.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <unordered_map>

#include "common/log.h"
#include "far/checkpoint.h"

namespace delayq {
namespace {

void ArmTimer(int fd, int64_t deadline_ms, bool cancel_on_set) {
  itimerspec spec{};
  if (deadline_ms != engine::kNever) {
    int64_t ms = deadline_ms <= 0 ? 1 : deadline_ms;  // 0 would disarm
    spec.it_value.tv_sec = ms / 1000;
    spec.it_value.tv_nsec = (ms % 1000) * 1'000'000;
  }
  int flags = TFD_TIMER_ABSTIME | (cancel_on_set ? TFD_TIMER_CANCEL_ON_SET : 0);
  timerfd_settime(fd, flags, &spec, nullptr);
}

void Drain(int fd) {
  uint64_t v;
  // A cancelled realtime timerfd reads ECANCELED; either way it is drained.
  while (read(fd, &v, sizeof v) > 0) {
  }
}

constexpr size_t kCompactChunk = 256 << 10;

using Need = store::Log::Need;
// Upper bounds of the records a change appends (Log::Room).
constexpr uint64_t kUpdateBytes = store::UpdateBound(kMaxIdBytes, 0);
constexpr uint64_t kPauseBytes = store::PutBound(0, kMaxTopicBytes, 0, 0);
// A kick of more asks room for this many only: the room of the rest is the
// prepared space beyond (a kick of a million would otherwise prepare 400 MB).
constexpr uint64_t kKickBoundJobs = 1024;

}  // namespace

// Tells the log what the engine changed, and keeps the live-bytes estimate
// that decides when to compact. Runs inside engine calls (under mu_). Also
// where far-future jobs are read back from (engine::FarStore): during
// replay straight from the segments being replayed (no log yet), then
// once what is asked for has been written.
class LocalQueue::LogJournal final : public engine::Journal, public engine::FarStore {
 public:
  LogJournal(const std::string& dir, std::shared_ptr<store::FileSystem> fs)
      : reader_(dir, std::move(fs)) {}
  void SetLog(store::Log* log) { log_ = log; }
  void SetLiveBytes(std::atomic<uint64_t>* live) { live_ = live; }
  store::RecordReader& reader() { return reader_; }

  uint64_t JobPut(const engine::JobImage& job) override {
    uint64_t location = log_->AppendPut(job);
    live_->fetch_add(store::PutBytes(job), std::memory_order_relaxed);
    return location;
  }
  Status ReadJob(uint64_t location, engine::StoredJob* out) override {
    if (log_ != nullptr && !log_->Written(location)) {
      if (Status s = log_->WriteOut(); !s.ok()) return s;
    }
    return reader_.ReadPut(location, out);
  }
  uint64_t StoreJob(const engine::JobImage& job) override { return log_->AppendPut(job); }
  void JobUpdate(const engine::JobImage& job) override { log_->AppendUpdate(job); }
  void JobRemoved(const engine::JobImage& job) override {
    log_->AppendRemove(job);
    live_->fetch_sub(store::PutBytes(job), std::memory_order_relaxed);
  }
  void TopicPause(std::string_view topic, int64_t paused_until_ms) override {
    log_->AppendPause(topic, paused_until_ms);
  }
  void Dedup(const engine::DedupImage& add) override { log_->AppendDedup(add); }

 private:
  store::Log* log_ = nullptr;
  std::atomic<uint64_t>* live_ = nullptr;
  store::RecordReader reader_;
};

Result<std::unique_ptr<store::Log>> LocalQueue::OpenLog(
    const QueueOptions& options, std::shared_ptr<store::FileSystem> fs, engine::Engine& engine,
    LogJournal& journal, std::unique_ptr<far::IndexFiles>* far_files, store::RecoveryReport* report,
    uint64_t* live_bytes, Subscriptions* subscriptions, Schedules* schedules,
    store::LogResume* resumed) {
  store::LogOptions lo;
  lo.dir = options.data_dir;
  lo.fsync = options.fsync;
  if (options.segment_bytes < 4096) return InvalidArgument("segment_bytes: at least 4096");
  lo.segment_bytes = options.segment_bytes;
  lo.repair = options.repair_log;
  lo.repaired = [&journal](uint64_t segment, uint64_t begin, uint64_t end) {
    journal.reader().NoteDropped(segment, begin, end);
  };
  lo.fs = fs ? std::move(fs) : store::PosixFileSystem();
  uint64_t live = 0;
  // Resuming from a checkpoint: where the records it wrote again end.
  uint64_t rewrite_end = 0;
  auto replay = [&](const store::Record& rec) -> Status {
    if (rewrite_end != 0 && engine::MakeLocation(rec.segment, rec.offset) >= rewrite_end) {
      engine.EndResumedRewrite();
      rewrite_end = 0;
    }
    engine::JobImage old;
    switch (rec.type) {
      case store::RecordType::kPut: {
        bool replaced = false;
        uint64_t location = engine::MakeLocation(rec.segment, rec.offset);
        if (Status s = engine.RestorePut(rec.job, location, &replaced); !s.ok()) return s;
        // A replaced job is the same job copied forward: the same size.
        if (!replaced) live += store::PutBytes(rec.job);
        break;
      }
      case store::RecordType::kUpdate:
        return engine.RestoreUpdate(rec.job);
      case store::RecordType::kRemove:
        if (engine.FindImage(rec.job.id, rec.job.seq, &old)) live -= store::PutBytes(old);
        return engine.RestoreRemove(rec.job.id, rec.job.seq);
      case store::RecordType::kPause:
        engine.RestorePause(rec.topic, rec.paused_until_ms);
        break;
      case store::RecordType::kDedup:
        engine.RestoreDedup(rec.dedup);
        break;
      case store::RecordType::kSubscription: {
        const Subscription& s = *rec.subscription;
        if (!rec.unsubscribe) {
          (*subscriptions)[SubscriptionKey(s.name, s.url)] = SubscriptionEntry{s, rec.segment};
        } else if (!s.url.empty()) {
          subscriptions->erase(SubscriptionKey(s.name, s.url));
        } else {
          auto it = subscriptions->lower_bound(SubscriptionKey(s.name, ""));
          while (it != subscriptions->end() && it->first.first == s.name) {
            it = subscriptions->erase(it);
          }
        }
        break;
      }
      case store::RecordType::kSchedule:
        if (rec.unschedule) {
          schedules->erase(rec.schedule->name);
        } else {
          (*schedules)[rec.schedule->name] = ScheduleEntry{*rec.schedule, rec.segment};
        }
        break;
    }
    return Status::Ok();
  };
  // Room for the jobs the log may hold (it keeps within about twice the
  // live set, at ~150 bytes a job), so the id table does not grow in steps.
  // With a memory window, most may never come into memory.
  if (options.memory_window_ms < 0) engine.ReserveIds(store::Log::SizeOnDisk(lo) / 300);
  // Far jobs are read back (replay's checks) through the journal, from the
  // segments being replayed.
  const std::string far_dir = options.data_dir + "/far";
  if (options.memory_window_ms >= 0) {
    auto files = far::IndexFiles::Open(far_dir, lo.fs);
    if (!files.ok()) return files.status();
    *far_files = std::move(files).value();
    engine.SetFarStore(&journal, options.memory_window_ms, far_files->get(),
                       options.far_index_memory_entries, options.memory_window_bytes);
  }
  // A checkpoint (far/checkpoint.h): used if it checks out whole (and kept:
  // a later crash resumes from it again), else removed before anything is
  // replayed.
  std::unique_ptr<far::CheckpointReader> checkpoint;
  lo.resume_from = [&]() -> const store::LogResume* {
    const store::LogResume* from = nullptr;
    if (*far_files != nullptr && !options.repair_log) {
      Status s = ResumeFromCheckpoint(lo, far_dir, engine, **far_files, &checkpoint);
      if (s.ok()) {
        const far::Checkpoint& c = checkpoint->checkpoint();
        from = &c.log;
        *resumed = c.log;
        rewrite_end = c.log.rewrite_end;
        live += c.far_live_bytes;
        ::delayq::Log(LogLevel::kInfo,
                      "far-future checkpoint: %llu far jobs restored; replaying from log segment "
                      "%llu",
                      static_cast<unsigned long long>(c.far.far.jobs),
                      static_cast<unsigned long long>(c.log.segment));
      } else if (s.code() != Code::kNotFound || checkpoint != nullptr) {
        ::delayq::Log(LogLevel::kWarn,
                      "far-future checkpoint not used (%s): replaying the whole log",
                      s.message().c_str());
        checkpoint.reset();
      }
    }
    if (from != nullptr) return from;  // it stays: a crash resumes from it again
    // Not used (none, no window, a repair, or it did not check out): gone,
    // with the runs it named when no window will remove them.
    Status s = far::RemoveCheckpoint(*lo.fs, far_dir);
    if (s.ok() && *far_files == nullptr) s = far::IndexFiles::RemoveAll(*lo.fs, far_dir);
    if (!s.ok()) {
      ::delayq::Log(LogLevel::kWarn, "far-future checkpoint: cannot remove it: %s",
                    s.message().c_str());
    }
    return from;
  };
  auto log = store::Log::Open(lo, replay, report);
  if (!log.ok()) return log.status();
  journal.SetLog(log->get());
  // The directory is this process's now (the log locked it): runs an
  // earlier one left name its slots, not ours.
  if (*far_files != nullptr) {
    if (Status s = (*far_files)->RemoveOthers(); !s.ok()) return s;
  }
  engine.EndRestore();
  // Far jobs whose records a repair moved: where they are now.
  if (journal.reader().has_dropped()) {
    engine.RelocateFar([&](uint64_t at) { return journal.reader().Relocate(at); });
    journal.reader().ClearDropped();
  }
  engine.RestoreSeq((*log)->last_seq());
  engine.Tick();  // what fell due or ran out while delayq was down
  engine.ResetCounters();
  *live_bytes = live;
  return log;
}

Result<std::unique_ptr<LocalQueue>> LocalQueue::Open(const QueueOptions& options, bool caller_loop,
                                                     std::shared_ptr<store::FileSystem> fs) {
  engine::EngineOptions eo;
  eo.clock = options.clock ? options.clock : SystemClock();
  eo.limits = options.limits;
  eo.dedup_window_ms = options.dedup_window_ms;
  // The journal and the index files before the engine: on an early
  // return the engine, which reads them, goes first.
  std::unique_ptr<LogJournal> journal;
  std::unique_ptr<far::IndexFiles> far_files;
  auto engine = engine::Engine::Create(eo);
  if (!engine.ok()) return engine.status();
  std::unique_ptr<store::Log> log;
  store::RecoveryReport report;
  store::LogResume resumed;
  uint64_t live = 0;
  Subscriptions subscriptions;
  Schedules schedules;
  auto started = std::chrono::steady_clock::now();
  if (options.store == StoreKind::kEmbedded) {
    if (options.memory_window_ms < -1) {
      return InvalidArgument("memory_window_ms: at least 0 (or -1: every job in memory)");
    }
    if (options.memory_window_ms >= 0 && options.segment_bytes > (uint64_t{1} << 34)) {
      return InvalidArgument(
          "segment_bytes: at most 16 GiB with a memory window (a far job's record is found by "
          "its offset in its segment)");
    }
    if (!fs) fs = store::PosixFileSystem();
    journal = std::make_unique<LogJournal>(options.data_dir, fs);
    auto opened = OpenLog(options, fs, **engine, *journal, &far_files, &report, &live,
                          &subscriptions, &schedules, &resumed);
    if (!opened.ok()) return opened.status();
    log = std::move(opened).value();
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  int wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  int wall = timerfd_create(CLOCK_REALTIME, TFD_NONBLOCK | TFD_CLOEXEC);
  int mono = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (wake < 0 || wall < 0 || mono < 0) {
    for (int fd : {wake, wall, mono}) {
      if (fd >= 0) close(fd);
    }
    return Internal("local queue: cannot create eventfd/timerfd");
  }
  auto q = std::unique_ptr<LocalQueue>(new LocalQueue(std::move(engine).value(), std::move(log),
                                                      std::move(journal), std::move(far_files),
                                                      eo.clock, wake, wall, mono, caller_loop));
  q->recovery_ = report;
  q->recovery_seconds_ = seconds;
  q->live_bytes_.store(live);
  q->log_segment_bytes_ = options.segment_bytes;
  q->memory_window_ms_ = options.store == StoreKind::kEmbedded ? options.memory_window_ms : -1;
  q->fs_ = std::move(fs);
  q->far_dir_ = options.data_dir + "/far";
  q->far_checkpoint_bytes_ = options.far_checkpoint_bytes;
  // What a crash's restart would replay now: what this one did.
  if (report.resumed_from != 0) q->NoteCheckpoint(resumed);
  q->checkpoint_.base_bytes = report.bytes;
  q->checkpoint_.base_end = q->log_ ? q->log_->end() : 0;
  q->limits_ = options.limits;
  {
    std::lock_guard<std::mutex> lock(q->mu_);
    q->subscriptions_ = std::move(subscriptions);
    if (q->log_) {
      // Replay could not tell the log which records are the latest.
      for (const auto& [key, e] : q->subscriptions_) q->CountSubscription(e, +1);
    }
    q->schedules_ = std::move(schedules);
    for (const auto& [name, e] : q->schedules_) q->CountSchedule(e, +1);
    // Those that lapsed while delayq was down, or before it stopped.
    q->ForgetLapsed(q->clock_->NowMs());
  }
  // Started once the fields above are set: its first turn may compact, and
  // compaction read with them unset (no segment size, no live bytes, no
  // subscriptions or schedules counted) would copy or delete what it must not.
  if (!caller_loop) q->runner_ = std::thread([p = q.get()] { p->RunLoop(); });
  return q;
}

LocalQueue::LocalQueue(std::unique_ptr<engine::Engine> engine, std::unique_ptr<store::Log> log,
                       std::unique_ptr<LogJournal> journal,
                       std::unique_ptr<far::IndexFiles> far_files, std::shared_ptr<Clock> clock,
                       int wake_fd, int wall_fd, int mono_fd, bool caller_loop)
    : clock_(std::move(clock)),
      wake_fd_(wake_fd),
      wall_fd_(wall_fd),
      mono_fd_(mono_fd),
      far_files_(std::move(far_files)),
      engine_(std::move(engine)),
      log_(std::move(log)),
      journal_(std::move(journal)),
      caller_loop_(caller_loop) {
  if (log_) {
    journal_->SetLiveBytes(&live_bytes_);
    engine_->SetJournal(journal_.get());
  }
  if (!clock_->IsRealTime()) clock_token_ = clock_->Subscribe([this] { Wake(); });
}

LocalQueue::~LocalQueue() {
  if (clock_token_ != 0) clock_->Unsubscribe(clock_token_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  Wake();
  if (runner_.joinable()) runner_.join();
  // A checkpoint being written takes the mutex a chunk at a time: joined
  // before the stop's own takes it.
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mu_);
    engine_->FailWaiters(Unavailable("queue closed"));
    deferred.swap(deferred_);
  }
  RunCallbacks(deferred);
  if (log_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (far_files_ != nullptr && log_->health().ok()) WriteCheckpoint();
    engine_->SetJournal(nullptr);
  }
  close(wake_fd_);
  close(wall_fd_);
  close(mono_fd_);
}

void LocalQueue::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof one);
}

void LocalQueue::RunCallbacks(Deferred& deferred) {
  for (auto& [done, result] : deferred) done(std::move(result));
  deferred.clear();
}

template <typename F>
auto LocalQueue::WithEngine(F&& fn) {
  Deferred deferred;
  std::unique_lock<std::mutex> lock(mu_);
  auto result = fn(*engine_);
  engine::Engine::Deadlines d = engine_->NextDeadlines();
  bool earlier = d.wall_ms < armed_.wall_ms || d.mono_ms < armed_.mono_ms;
  if (earlier) SetArmed(d);  // the runner re-arms from the engine anyway
  // Jobs that went beyond the memory window in memory: the runner writes
  // them out (SettleStep) right after this call.
  bool settle = log_ != nullptr && engine_->settle_pending();
  deferred.swap(deferred_);
  lock.unlock();
  if (earlier || settle) Wake();
  RunCallbacks(deferred);
  return result;
}

template <typename F>
auto LocalQueue::Change(uint64_t bytes, store::Log::Need need, F&& fn) {
  using R = decltype(fn(*engine_));
  if (log_ == nullptr) return WithEngine(std::forward<F>(fn));
  uint64_t mark = 0;
  bool refused = false;
  auto result = WithEngine([&](engine::Engine& e) {
    // Under the mutex: no other change takes the room between the two.
    if (Status s = log_->Room(bytes, need); !s.ok()) {
      refused = true;
      return R(s);
    }
    auto r = fn(e);
    mark = log_->end();
    return r;
  });
  if (refused) {
    refused_changes_.fetch_add(1, std::memory_order_relaxed);
    return result;
  }
  if (!caller_loop_) {
    if (Status s = log_->WaitReleased(mark); !s.ok()) return R(s);
    MaybeCompact();
    // Callers in a tight loop can keep the timing thread from the mutex for
    // long: while compaction is under way, each change also takes a step.
    if (!compaction_idle_.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (CompactStep()) Wake();
    }
  }
  return result;
}

void LocalQueue::Arm(const engine::Engine::Deadlines& d) {
  if (!clock_->IsRealTime()) return;  // a manual clock wakes us when it moves
  ArmTimer(wall_fd_, d.wall_ms, /*cancel_on_set=*/true);
  ArmTimer(mono_fd_, d.mono_ms, /*cancel_on_set=*/false);
}

bool LocalQueue::RunDueOnce() {
  Deferred deferred;
  engine::Engine::Deadlines d;
  bool more = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    engine_->Tick();
    // Waiting reserves left for the next slice: come back after this one's
    // answers are on their way.
    if (engine_->ServeLeft()) more = true;
    if (log_ && CompactStep()) more = true;
    if (log_ && SettleStep()) more = true;
    if (log_) MaybeCheckpoint();
    d = engine_->NextDeadlines();
    SetArmed(d);
    deferred.swap(deferred_);
  }
  // Without a caller's loop nobody else writes what timers and reserves
  // changed: write it here (the caller's loop does it in Flush).
  if (log_ && !caller_loop_) (void)log_->WriteOut();
  RunCallbacks(deferred);
  Arm(d);
  if (more) Wake();
  return true;
}

void LocalQueue::RunLoop() {
  pollfd fds[4] = {{wake_fd_, POLLIN, 0},
                   {wall_fd_, POLLIN, 0},
                   {mono_fd_, POLLIN, 0},
                   {log_ ? log_->notify_fd() : -1, POLLIN, 0}};
  while (RunDueOnce()) {
    while (poll(fds, 4, -1) < 0 && errno == EINTR) {
    }
    for (const pollfd& p : fds) {
      if (p.revents != 0) Drain(p.fd);
    }
  }
}

void LocalQueue::SetArmed(const engine::Engine::Deadlines& d) {
  armed_ = d;
  armed_wall_ms_.store(d.wall_ms, std::memory_order_relaxed);
  armed_mono_ms_.store(d.mono_ms, std::memory_order_relaxed);
}

bool LocalQueue::MaybeDue() const {
  if (!clock_->IsRealTime()) return false;  // a manual clock announces itself on wake_fd_
  return clock_->NowMs() >= armed_wall_ms_.load(std::memory_order_relaxed) ||
         clock_->MonotonicMs() >= armed_mono_ms_.load(std::memory_order_relaxed);
}

std::vector<int> LocalQueue::PollFds() const {
  std::vector<int> fds = {wake_fd_, wall_fd_, mono_fd_};
  if (log_) fds.push_back(log_->notify_fd());
  return fds;
}

void LocalQueue::RunDue() {
  for (int fd : PollFds()) Drain(fd);
  RunDueOnce();
}

void LocalQueue::Flush() {
  if (log_ == nullptr) return;
  (void)log_->WriteOut();
  MaybeCompact();
}

void LocalQueue::FlushIdle() {
  if (log_ == nullptr) return;
  (void)log_->WriteOutAndSync();
  MaybeCompact();
}

void LocalQueue::MaybeCompact() {
  // The timing thread (or the caller's loop) takes the steps.
  if (compaction_idle_.load(std::memory_order_relaxed) && ShouldCompact()) {
    compaction_idle_.store(false, std::memory_order_relaxed);
    Wake();
  }
}

// --- compaction ----------------------------------------------------------------

bool LocalQueue::ShouldCompact() const {
  // Not while a checkpoint is being written: it names the segments.
  if (checkpoint_.running) return false;
  uint64_t oldest = log_->OldestClosed();
  if (oldest == 0) return false;
  // Remembered adds still in their window keep their segment: a restart
  // must still know them (deleting it waits at most one window).
  if (log_->DedupUntil(oldest) > clock_->NowMs()) return false;
  // Nothing live in it: deleting it costs no reading.
  if (log_->LivePuts(oldest) <= 0 && log_->LiveSubscriptions(oldest) <= 0 &&
      log_->LiveSchedules(oldest) <= 0) {
    return true;
  }
  // Dead bytes beyond both the live ones and two segments: then copying the
  // live jobs of the oldest segment forward costs at most what it frees.
  uint64_t live = live_bytes_.load(std::memory_order_relaxed);
  uint64_t disk = log_->disk_bytes();
  return disk > live && disk - live > std::max<uint64_t>(live, 2 * log_segment_bytes_);
}

bool LocalQueue::CompactStep() {
  Compaction& c = compaction_;
  if (c.stuck) return false;
  if (c.segment == 0) {
    if (!ShouldCompact()) {
      compaction_idle_.store(true, std::memory_order_relaxed);
      // Idle, and nothing live in the segment being written: close it, so
      // that the next step deletes it.
      return log_->RollIfIdleAndDead(std::min<uint64_t>(log_segment_bytes_ / 4, 1 << 20));
    }
    c = Compaction{};
    c.segment = log_->OldestClosed();
    DropCheckpoint(c.segment);
    compaction_idle_.store(false, std::memory_order_relaxed);
    if (log_->LivePuts(c.segment) <= 0) {
      // No job needs it; only its pauses, subscriptions and schedules may,
      // and those are written anew.
      if (log_->HasPauses(c.segment)) {
        for (const auto& [topic, until] : engine_->PausedTopics()) log_->AppendPause(topic, until);
      }
      c.scanned = true;
      c.remove_after = log_->end();
    }
  }
  if (!c.records_kept) {
    // Without room the step waits, as a chunk's does (a second try copies
    // only what the first did not: a copy moves the record's segment).
    if (!KeepSubscriptions(c.segment) || !KeepSchedules(c.segment)) return false;
    c.records_kept = true;
    if (c.scanned) c.remove_after = log_->end();
  }
  if (!c.scanned) {
    // What a chunk's live jobs take at the head, at most. Without room the
    // step waits (a full disk): the next change or timer turn tries again.
    if (!log_->Room(kCompactChunk + c.carry.size(), Need::kUpkeep).ok()) return false;
    auto chunk = log_->ReadClosed(c.segment, c.offset, kCompactChunk);
    if (!chunk.ok()) {
      Log(LogLevel::kError, "compaction: %s; compaction stops until restart",
          chunk.status().message().c_str());
      c.stuck = true;
      return false;
    }
    bool end = chunk->size() < kCompactChunk;
    // Segment offset of the carry's first byte (ReadClosed counts after the header).
    uint64_t carry_at = store::kSegmentHeaderBytes + c.offset - c.carry.size();
    c.offset += chunk->size();
    c.carry.append(*chunk);
    std::string_view rest = c.carry;
    std::vector<std::pair<std::string, int64_t>> paused;
    bool paused_read = false;
    for (;;) {
      store::Record rec;
      size_t size = 0;
      std::string error;
      store::ReadOutcome got = store::ReadRecord(rest, c.segment, &rec, &size, &error);
      if (got == store::ReadOutcome::kIncomplete) break;
      if (got == store::ReadOutcome::kCorrupt) {
        Log(LogLevel::kError, "compaction: segment %llu: %s; compaction stops until restart",
            static_cast<unsigned long long>(c.segment), error.c_str());
        c.stuck = true;
        return false;
      }
      uint64_t at = carry_at + (c.carry.size() - rest.size());
      rest.remove_prefix(size);
      engine::JobImage live;
      uint32_t far = engine::FarSet::kNoSlot;
      if (rec.type == store::RecordType::kPut &&
          (far = engine_->FarAt(rec.job.id, engine::MakeLocation(c.segment, at))) !=
              engine::FarSet::kNoSlot) {
        // A far job: this record is all of it. Copied as read, and found there.
        engine_->MoveFar(far, log_->AppendRewrite(rec.job));
      } else if (rec.type == store::RecordType::kPut &&
                 engine_->FindImage(rec.job.id, rec.job.seq, &live, /*far=*/false)) {
        log_->AppendRewrite(live);
      } else if (rec.type == store::RecordType::kPause) {
        if (!paused_read) {
          paused = engine_->PausedTopics();
          paused_read = true;
        }
        for (const auto& [topic, until] : paused) {
          if (topic == rec.topic) log_->AppendPause(topic, until);
        }
      }
    }
    c.carry.erase(0, c.carry.size() - rest.size());
    if (!end) return true;
    if (!c.carry.empty()) {
      Log(LogLevel::kError, "compaction: segment %llu ends in a partial record; compaction stops",
          static_cast<unsigned long long>(c.segment));
      c.stuck = true;
      return false;
    }
    c.scanned = true;
    c.remove_after = log_->end();
  }
  // What was copied must be on disk before the only other copy goes.
  if (log_->synced() < c.remove_after) {
    if (log_->written() < c.remove_after) (void)log_->WriteOut();
    log_->RequestSync();  // the notify fd brings us back
    return false;
  }
  uint64_t segment = c.segment;
  c = Compaction{};
  compaction_idle_.store(true, std::memory_order_relaxed);
  journal_->reader().Forget(segment);  // its file may be reused for the next segment
  if (Status s = log_->RemoveClosed(segment); !s.ok()) {
    Log(LogLevel::kError, "compaction: %s; compaction stops until restart", s.message().c_str());
    c.stuck = true;
    return false;
  }
  return true;
}

bool LocalQueue::SettleStep() {
  if (!engine_->settle_pending()) return false;
  // Upkeep (the job exists already), so a full disk's kept room serves it.
  // The room asked for is the budget the step keeps within (at least one
  // job of the largest kind fits).
  uint64_t bound = std::max<uint64_t>(
      256 << 10, store::PutBound(kMaxIdBytes, kMaxTopicBytes, 1024, limits_.max_body_bytes));
  if (!log_->Room(bound, Need::kUpkeep).ok()) return false;  // in memory meanwhile
  return engine_->SettleFar(bound);
}

LocalQueue::StoreStats LocalQueue::store_stats() {
  StoreStats s;
  if (log_ == nullptr) return s;
  s.log = log_->stats();
  s.live_bytes = live_bytes_.load(std::memory_order_relaxed);
  s.recovery = recovery_;
  s.recovery_seconds = recovery_seconds_;
  s.failing = !log_->health().ok();
  s.failed = log_->failed();
  s.health = log_->health();
  if (s.health.ok()) s.health = log_->space();
  s.refused_changes = refused_changes_.load(std::memory_order_relaxed);
  return s;
}

std::string_view LocalQueue::fsync_policy() const {
  return log_ ? FsyncPolicyName(log_->policy()) : std::string_view("none");
}

StoreFigures LocalQueue::Figures() {
  if (log_ == nullptr) return {};
  StoreStats st = store_stats();
  StoreFigures f = {
      {
          {"log_writes", st.log.writes},
          {"log_syncs", st.log.syncs},
          {"log_bytes", st.log.appended_bytes},
          {"disk_bytes", st.log.disk_bytes},
          {"log_segments", st.log.segments},
          {"live_bytes", st.live_bytes},
          {"rewritten_bytes", st.log.rewritten_bytes},
          {"removed_segments", st.log.removed_segments},
          {"reused_files", st.log.reused_files},
          {"recovered_records", st.recovery.records},
          {"recovery_ms", static_cast<uint64_t>(st.recovery_seconds * 1000 + 0.5)},
          {"recovery_torn_records", st.recovery.torn_records},
          {"recovery_torn_bytes", st.recovery.torn_bytes},
          {"store_failing", st.failing ? 1u : 0u},
          {"store_disk_full", st.log.short_of_space ? 1u : 0u},
          {"refused_changes", st.refused_changes},
          {"log_write_failures", st.log.write_failures},
          {"log_room_failures", st.log.room_failures},
      },
      st.health,
      st.failed,
      /*topology=*/"",
  };
  if (memory_window_ms_ >= 0) {
    engine::Engine::FarFigures far;
    uint64_t checkpoints = 0;
    uint64_t checkpoint_failures = 0;
    uint64_t replay_bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      far = engine_->far_figures();
      checkpoints = checkpoint_.written;
      checkpoint_failures = checkpoint_.failed;
      if (log_) replay_bytes = CrashReplayBytes();
    }
    f.fields.insert(f.fields.end(), {
                                        {"far_jobs", far.jobs},
                                        {"far_index_entries", far.entries},
                                        {"far_loads", far.loads},
                                        {"far_stores", far.stores},
                                        {"far_reads", far.reads},
                                        {"far_read_errors", far.read_errors},
                                        {"far_lost", far.lost},
                                        {"far_index_runs", far.sealed_runs},
                                        {"far_index_seals", far.seals},
                                        {"far_index_rebuilds", far.rebuilds},
                                        {"far_index_errors", far.index_errors},
                                        {"far_checkpoints", checkpoints},
                                        {"far_checkpoint_failures", checkpoint_failures},
                                        {"far_crash_replay_bytes", replay_bytes},
                                    });
  }
  return f;
}

std::string LocalQueue::OpenedSummary() {
  if (log_ == nullptr) return {};
  uint64_t jobs = 0;
  if (auto stats = Stats(); stats.ok()) jobs = stats->jobs;
  char line[200];
  std::snprintf(line, sizeof line,
                "recovered %llu jobs from %llu records in %llu segments (%.1f MB) in %.3f s",
                static_cast<unsigned long long>(jobs),
                static_cast<unsigned long long>(recovery_.records),
                static_cast<unsigned long long>(recovery_.segments), recovery_.bytes / 1e6,
                recovery_seconds_);
  return line;
}

// --- the Queue operations: each is one engine call ---------------------------

Result<AddResult> LocalQueue::Add(const JobSpec& spec) {
  // An add may replace a job: its removal is an update's size.
  uint64_t bytes = store::PutBound(kMaxIdBytes, spec.topic.size(), 0, spec.body.size()) +
                   store::UpdateBound(kMaxIdBytes, 0);
  // An add with an idempotency key is remembered in a record of its own.
  if (!spec.idempotency_key.empty()) {
    bytes += store::DedupBound(kMaxIdBytes, spec.idempotency_key.size());
  }
  return Change(bytes, Need::kGrow, [&](engine::Engine& e) { return e.Add(spec); });
}

uint64_t LocalQueue::ReserveAsync(const ReserveRequest& req, ReserveCallback done) {
  // A reserve changes the job (attempts, deadline): refused like any change.
  // Room is asked for what it takes now; what a wait takes later comes out
  // of the reserve that timers use too (store::Log::reserve_bytes).
  Status refused;
  bool closed = false;
  uint64_t ticket = WithEngine([&](engine::Engine& e) -> uint64_t {
    // A callback run by the destructor may reserve again: answer at once
    // rather than register a waiter nobody would ever answer.
    if (stopping_) {
      closed = true;
      return 0;
    }
    if (log_) {
      refused = log_->Room(uint64_t{req.count} * kUpdateBytes, Need::kUpkeep);
      if (!refused.ok()) return 0;
    }
    // Runs under mu_ (inside an engine call): only queue the callback.
    return e.Reserve(req, [this, d = std::move(done)](Result<Deliveries> r) mutable {
      deferred_.emplace_back(std::move(d), std::move(r));
    });
  });
  // Neither moved from: the lambda was never made.
  if (closed) done(Unavailable("queue closed"));
  if (!refused.ok()) {
    refused_changes_.fetch_add(1, std::memory_order_relaxed);
    done(std::move(refused));
    return 0;
  }
  // Not waited for: a reservation that is lost comes back as ready.
  if (log_ && !caller_loop_) (void)log_->WriteOut();
  return ticket;
}

bool LocalQueue::CancelReserve(uint64_t ticket) {
  return WithEngine([&](engine::Engine& e) { return e.CancelWaiter(ticket); });
}

Status LocalQueue::Finish(std::string_view id, std::string_view receipt) {
  return Change(kUpdateBytes, Need::kUpkeep,
                [&](engine::Engine& e) { return e.Finish(id, receipt); });
}

std::vector<Status> LocalQueue::Acknowledge(std::span<const Ack> acks) {
  uint64_t bytes = 0;
  for (const Ack& a : acks) bytes += kUpdateBytes + a.text.size();
  std::vector<Status> out;
  // Room for all or none: a refused batch, or one whose log write failed,
  // answers every ack with why.
  Status all = Change(bytes, Need::kUpkeep, [&](engine::Engine& e) {
    out = e.Acknowledge(acks);
    return Status();
  });
  if (!all.ok()) return std::vector<Status>(acks.size(), all);
  return out;
}

Status LocalQueue::Delete(std::string_view id) {
  return Change(kUpdateBytes, Need::kUpkeep, [&](engine::Engine& e) { return e.Delete(id); });
}

Status LocalQueue::Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                           std::string_view error) {
  return Change(kUpdateBytes + error.size(), Need::kUpkeep,
                [&](engine::Engine& e) { return e.Release(id, receipt, delay_ms, error); });
}

Status LocalQueue::Touch(std::string_view id, std::string_view receipt) {
  return Change(kUpdateBytes, Need::kUpkeep,
                [&](engine::Engine& e) { return e.Touch(id, receipt); });
}

Status LocalQueue::Unreserve(std::string_view id, std::string_view receipt) {
  return Change(kUpdateBytes, Need::kUpkeep,
                [&](engine::Engine& e) { return e.Unreserve(id, receipt); });
}

Status LocalQueue::Bury(std::string_view id, std::string_view receipt, std::string_view reason) {
  return Change(kUpdateBytes + reason.size(), Need::kUpkeep,
                [&](engine::Engine& e) { return e.Bury(id, receipt, reason); });
}

Status LocalQueue::Kick(std::string_view id) {
  return Change(kUpdateBytes, Need::kUpkeep, [&](engine::Engine& e) { return e.Kick(id); });
}

Result<uint64_t> LocalQueue::KickTopic(std::string_view topic, uint64_t n) {
  // Room for the first kKickBoundJobs: a kick of more on a full disk may
  // leave the rest's updates to a write that is retried (see store::Log).
  uint64_t bytes = std::min<uint64_t>(n, kKickBoundJobs) * kUpdateBytes;
  return Change(bytes, Need::kUpkeep, [&](engine::Engine& e) { return e.KickTopic(topic, n); });
}

Result<JobInfo> LocalQueue::Get(std::string_view id) {
  return WithEngine([&](engine::Engine& e) { return e.Get(id); });
}

Result<JobInfo> LocalQueue::Peek(std::string_view topic, JobState state) {
  return WithEngine([&](engine::Engine& e) { return e.Peek(topic, state); });
}

Status LocalQueue::Pause(std::string_view topic, int64_t duration_ms) {
  return Change(kPauseBytes, Need::kUpkeep,
                [&](engine::Engine& e) { return e.Pause(topic, duration_ms); });
}

Status LocalQueue::Resume(std::string_view topic) {
  return Change(kPauseBytes, Need::kUpkeep, [&](engine::Engine& e) { return e.Resume(topic); });
}

Result<std::vector<TopicInfo>> LocalQueue::Topics() {
  return WithEngine([&](engine::Engine& e) { return Result<std::vector<TopicInfo>>(e.Topics()); });
}

Result<TopicInfo> LocalQueue::Topic(std::string_view topic) {
  return WithEngine([&](engine::Engine& e) { return e.Topic(topic); });
}

Result<QueueStats> LocalQueue::Stats() {
  return WithEngine([&](engine::Engine& e) { return Result<QueueStats>(e.Stats()); });
}

// --- subscriptions -------------------------------------------------------------

void LocalQueue::CountSubscription(const SubscriptionEntry& e, int64_t n) {
  if (log_ == nullptr) return;
  log_->SubscriptionsMoved(e.segment, n);
  // Live data like a job's PUT, so that compaction weighs copying it.
  uint64_t bytes = store::SubscriptionBytes(e.s) * static_cast<uint64_t>(n < 0 ? -n : n);
  if (n > 0) {
    live_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  } else {
    live_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }
}

void LocalQueue::LogSubscription(SubscriptionEntry& e, bool rewrite) {
  if (log_ == nullptr) return;
  e.segment = log_->AppendSubscription(e.s, rewrite);  // counted there in the log
  live_bytes_.fetch_add(store::SubscriptionBytes(e.s), std::memory_order_relaxed);
}

LocalQueue::Subscriptions::iterator LocalQueue::DropSubscription(Subscriptions::iterator it) {
  CountSubscription(it->second, -1);
  return subscriptions_.erase(it);
}

void LocalQueue::ForgetLapsed(int64_t now_ms) {
  for (auto it = subscriptions_.begin(); it != subscriptions_.end();) {
    it = Lapsed(it->second.s, now_ms) ? DropSubscription(it) : std::next(it);
  }
}

bool LocalQueue::KeepSubscriptions(uint64_t segment) {
  if (log_->LiveSubscriptions(segment) <= 0) return true;
  ForgetLapsed(clock_->NowMs());
  uint64_t bytes = 0;
  for (const auto& [key, e] : subscriptions_) {
    if (e.segment == segment) bytes += store::SubscriptionBound(e.s);
  }
  if (!log_->Room(bytes, Need::kUpkeep).ok()) return false;
  for (auto& [key, e] : subscriptions_) {
    if (e.segment != segment) continue;
    CountSubscription(e, -1);
    LogSubscription(e, /*rewrite=*/true);
  }
  return true;
}

void LocalQueue::PutSubscriptionAsync(const Subscription& s, SubscriptionCallback done) {
  if (Status st = ValidateSubscription(s); !st.ok()) return done(st);
  const SubscriptionKey key(s.name, s.url);
  // A new instance adds data; a renewal keeps one going, as a finish keeps
  // a job moving, so on a full disk it may use the room kept back for that
  // (an instance that could not renew would lapse and stop its pushes). Read
  // apart from the change: an instance deleted in between is renewed as
  // upkeep, one record either way.
  Need need = Need::kGrow;
  if (log_) {
    bool known = WithEngine([&](engine::Engine&) {
      auto it = subscriptions_.find(key);
      return it != subscriptions_.end() && !Lapsed(it->second.s, clock_->NowMs());
    });
    if (known) need = Need::kUpkeep;
  }
  auto put = [&](engine::Engine&) -> Result<Subscription> {
    int64_t now = clock_->NowMs();
    auto [it, added] = subscriptions_.try_emplace(key);
    SubscriptionEntry& e = it->second;
    // A lapsed instance was forgotten: putting it again starts it anew.
    bool renewal = !added && !Lapsed(e.s, now);
    if (!added) CountSubscription(e, -1);  // its record is superseded
    int64_t created = renewal ? e.s.created_ms : now;
    e.s = s;
    e.s.created_ms = created;
    e.s.renewed_ms = now;
    e.s.expires_ms = s.ttl_ms == 0 ? 0 : now + s.ttl_ms;
    LogSubscription(e);
    return e.s;
  };
  done(Change(store::SubscriptionBound(s), need, put));
}

void LocalQueue::DeleteSubscriptionAsync(std::string_view name, std::string_view url,
                                         CountCallback done) {
  if (Status st = ValidateSubscriptionName(name); !st.ok()) return done(st);
  auto remove = [&](engine::Engine&) -> Result<uint64_t> {
    ForgetLapsed(clock_->NowMs());
    uint64_t removed = 0;
    auto it = subscriptions_.lower_bound(SubscriptionKey(name, url));
    while (it != subscriptions_.end() && it->first.first == name &&
           (url.empty() || it->first.second == url)) {
      it = DropSubscription(it);
      ++removed;
    }
    // One record for every instance of the name when url is empty.
    if (removed > 0 && log_) log_->AppendUnsubscribe(name, url);
    return removed;
  };
  done(Change(store::UnsubscribeBound(name.size(), url.size()), Need::kUpkeep, remove));
}

void LocalQueue::SubscriptionsAsync(std::string_view name, SubscriptionsCallback done) {
  if (!name.empty()) {
    if (Status st = ValidateSubscriptionName(name); !st.ok()) return done(st);
  }
  done(WithEngine([&](engine::Engine&) -> Result<std::vector<Subscription>> {
    ForgetLapsed(clock_->NowMs());
    std::vector<Subscription> out;
    auto it = name.empty() ? subscriptions_.begin()
                           : subscriptions_.lower_bound(SubscriptionKey(name, ""));
    for (; it != subscriptions_.end() && (name.empty() || it->first.first == name); ++it) {
      out.push_back(it->second.s);
    }
    return out;
  }));
}

// --- schedules -----------------------------------------------------------------

namespace {

Status ScheduleNotFound(std::string_view name) {
  return NotFound("schedule \"" + std::string(name) + "\" not found");
}

// The fields a put gives (include/delayq/schedule.h, "The definition").
void CopyDefinition(const Schedule& from, Schedule* to) {
  to->name = from.name;
  to->cron = from.cron;
  to->timezone = from.timezone;
  to->topic = from.topic;
  to->body = from.body;
  to->ttr_ms = from.ttr_ms;
  to->priority = from.priority;
  to->max_attempts = from.max_attempts;
  to->catchup = from.catchup;
  to->catchup_window_ms = from.catchup_window_ms;
  to->overlap = from.overlap;
  to->paused = from.paused;
  to->pause_on_failure = from.pause_on_failure;
}

// The fields a firing writes ("Firing state"; `paused` only to set it).
void CopyFiringState(const Schedule& from, Schedule* to) {
  to->next_fire_at_ms = from.next_fire_at_ms;
  to->planned_version = from.planned_version;
  to->last_fire_at_ms = from.last_fire_at_ms;
  to->first_fire_at_ms = from.first_fire_at_ms;
  to->gaps = from.gaps;
  to->buffered_fire_at_ms = from.buffered_fire_at_ms;
  to->paused_at_ms = from.paused_at_ms;
  to->pause_reason = from.pause_reason;
  to->firings = from.firings;
  to->skipped = from.skipped;
  if (from.paused) to->paused = true;
}

}  // namespace

void LocalQueue::CountSchedule(const ScheduleEntry& e, int64_t n) {
  if (log_ == nullptr) return;
  log_->SchedulesMoved(e.segment, n);
  uint64_t bytes = store::ScheduleBytes(e.s) * static_cast<uint64_t>(n < 0 ? -n : n);
  if (n > 0) {
    live_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  } else {
    live_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  }
}

void LocalQueue::LogSchedule(ScheduleEntry& e, bool rewrite) {
  if (log_ == nullptr) return;
  e.segment = log_->AppendSchedule(e.s, rewrite);  // counted there in the log
  live_bytes_.fetch_add(store::ScheduleBytes(e.s), std::memory_order_relaxed);
}

bool LocalQueue::KeepSchedules(uint64_t segment) {
  if (log_->LiveSchedules(segment) <= 0) return true;
  uint64_t bytes = 0;
  for (const auto& [name, e] : schedules_) {
    if (e.segment == segment) bytes += store::ScheduleBound(e.s);
  }
  if (!log_->Room(bytes, Need::kUpkeep).ok()) return false;
  for (auto& [name, e] : schedules_) {
    if (e.segment != segment) continue;
    CountSchedule(e, -1);
    LogSchedule(e, /*rewrite=*/true);
  }
  return true;
}

Status LocalQueue::ScheduleRoom(uint64_t bytes, Need need) {
  if (log_ == nullptr) return Status::Ok();
  Status s = log_->Room(bytes, need);
  if (!s.ok()) refused_changes_.fetch_add(1, std::memory_order_relaxed);
  return s;
}

void LocalQueue::PutScheduleAsync(const Schedule& s, ScheduleCallback done) {
  if (Status st = ValidateScheduleDefinition(s); !st.ok()) return done(st);
  // A new schedule adds data; a change to one keeps it going (as a
  // subscription's renewal), so on a full disk it may use the room kept
  // back. Read apart from the change: one record either way.
  Need need = Need::kGrow;
  if (log_ && WithEngine([&](engine::Engine&) { return schedules_.contains(s.name); })) {
    need = Need::kUpkeep;
  }
  auto put = [&](engine::Engine&) -> Result<Schedule> {
    int64_t now = clock_->NowMs();
    auto it = schedules_.find(s.name);
    Schedule stored;
    if (it == schedules_.end()) {
      stored.version = 1;
      stored.revision = 1;
      stored.created_ms = now;
    } else {
      stored = it->second.s;  // keeps the firing state and created_ms
      ++stored.version;
      ++stored.revision;
    }
    CopyDefinition(s, &stored);
    stored.updated_ms = now;
    if (!s.paused) stored.pause_reason.clear();
    // The firing state kept may make the record longer than the caller's.
    if (Status st = ScheduleRoom(store::ScheduleBound(stored), need); !st.ok()) return st;
    if (it == schedules_.end()) {
      it = schedules_.try_emplace(s.name).first;
    } else {
      CountSchedule(it->second, -1);  // its record is superseded
    }
    it->second.s = std::move(stored);
    LogSchedule(it->second);
    return it->second.s;
  };
  done(Change(store::ScheduleBound(s), need, put));
}

void LocalQueue::DeleteScheduleAsync(std::string_view name, ScheduleCallback done) {
  if (Status st = ValidateScheduleName(name); !st.ok()) return done(st);
  auto remove = [&](engine::Engine&) -> Result<Schedule> {
    auto it = schedules_.find(name);
    if (it == schedules_.end()) return ScheduleNotFound(name);
    CountSchedule(it->second, -1);
    Schedule old = std::move(it->second.s);
    schedules_.erase(it);
    if (log_) log_->AppendUnschedule(name);
    return old;
  };
  done(Change(store::UnscheduleBound(name.size()), Need::kUpkeep, remove));
}

void LocalQueue::SchedulesAsync(std::string_view name, SchedulesCallback done) {
  if (!name.empty()) {
    if (Status st = ValidateScheduleName(name); !st.ok()) return done(st);
  }
  done(WithEngine([&](engine::Engine&) -> Result<std::vector<Schedule>> {
    std::vector<Schedule> out;
    if (name.empty()) {
      out.reserve(schedules_.size());
      for (const auto& [key, e] : schedules_) out.push_back(e.s);
      return out;
    }
    auto it = schedules_.find(name);
    if (it == schedules_.end()) return ScheduleNotFound(name);
    out.push_back(it->second.s);
    return out;
  }));
}

void LocalQueue::FireScheduleAsync(const ScheduleFiring& f, ScheduleFiredCallback done) {
  if (Status st = ValidateScheduleName(f.name); !st.ok()) return done(st);
  // Checked before anything changes: a firing is made whole or not at all.
  uint64_t bytes = 0;
  for (const JobSpec& job : f.jobs) {
    if (job.id.empty()) {
      return done(InvalidArgument("jobs: a firing's job needs an id (\"<schedule>@<ms>\")"));
    }
    if (Status st = ValidateJobSpec(job, limits_); !st.ok()) return done(st);
    bytes += store::PutBound(job.id.size(), job.topic.size(), 0, job.body.size());
  }
  bytes += f.withdraw.size() * kUpdateBytes;
  // Jobs add data; a firing without any (a skip, a pause) keeps a schedule going.
  Need need = f.jobs.empty() ? Need::kUpkeep : Need::kGrow;
  auto fire = [&](engine::Engine& e) -> Result<ScheduleFired> {
    auto it = schedules_.find(f.name);
    if (it == schedules_.end()) return ScheduleNotFound(f.name);
    ScheduleEntry& entry = it->second;
    ScheduleFired out;
    if (entry.s.revision != f.revision) {
      out.schedule = entry.s;
      return out;
    }
    Schedule next = entry.s;
    CopyFiringState(f.state, &next);
    ++next.revision;
    if (Status st = ScheduleRoom(bytes + store::ScheduleBound(next), need); !st.ok()) return st;
    for (const JobSpec& job : f.jobs) {
      // The id is the deduplication: a job already there, in any state, is
      // left as it is (never replaced, never remembered by a key).
      JobSpec add = job;
      add.replace = false;
      add.idempotency_key.clear();
      Result<AddResult> r = e.Add(add);
      if (r.ok()) {
        ++out.added;
      } else if (r.status().code() != Code::kExists) {
        return r.status();
      }
    }
    for (const std::string& id : f.withdraw) {
      Result<JobInfo> job = e.Get(id);
      if (job.ok() && job->state == JobState::kDelayed) (void)e.Delete(id);
    }
    CountSchedule(entry, -1);
    entry.s = std::move(next);
    LogSchedule(entry);
    out.applied = true;
    out.schedule = entry.s;
    return out;
  };
  done(Change(bytes, need, fire));
}

}  // namespace delayq
