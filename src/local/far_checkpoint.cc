// LocalQueue's far-future checkpoints (far/checkpoint.h): written while
// serving and at a clean stop, and resumed from at open. Format and
// recovery: docs/log-format.md, "The far-future checkpoint".
#include <algorithm>
#include <chrono>
#include <utility>

#include "common/log.h"
#include "far/checkpoint.h"
#include "local/local_queue.h"

namespace delayq {

namespace {
// After a checkpoint while serving failed: the next try waits this long,
// twice as long after each failure in a row, up to an hour.
constexpr int64_t kCheckpointRetryMs = 10'000;
constexpr int64_t kCheckpointRetryMaxMs = 3'600'000;
// The rewrite asks the log for room this much at a time.
constexpr uint64_t kRewriteStep = 256 << 10;
}  // namespace

Status LocalQueue::ResumeFromCheckpoint(const store::LogOptions& lo, const std::string& far_dir,
                                        engine::Engine& engine, far::IndexFiles& files,
                                        std::unique_ptr<far::CheckpointReader>* reader) {
  auto opened = far::CheckpointReader::Open(*lo.fs, far_dir);
  if (!opened.ok()) return opened.status();
  *reader = std::move(opened).value();
  const far::Checkpoint& c = (*reader)->checkpoint();
  if (Status s = store::Log::CheckResume(lo, c.log); !s.ok()) return s;
  if (Status s = files.Adopt(c.epoch, c.next_run, c.run_files); !s.ok()) return s;
  // This process goes on with the runs' epoch and numbers: runs the one
  // before left after the checkpoint would share names with the runs
  // replay seals, so they go now (the adopted ones stay), before the
  // engine takes anything (a failure from here leaves it untouched).
  Status s = files.RemoveOthers();
  if (s.ok()) {
    s = engine.RestoreFar(c.far, [r = reader->get()](uint64_t* loc, uint32_t* aux, size_t n) {
      return r->LoadSlots(loc, aux, n);
    });
  }
  // Not used after all: the runs adopted go with the others (RemoveOthers,
  // after replay), and new ones take names of their own (Forget).
  if (!s.ok()) return files.Forget(), s;
  // A checkpoint being written when the process before stopped is not
  // needed: this one stands.
  if (Status t = far::RemoveCheckpointTemp(*lo.fs, far_dir); !t.ok()) {
    ::delayq::Log(LogLevel::kWarn, "far-future checkpoint: %s", t.message().c_str());
  }
  return s;
}

bool LocalQueue::BeginCheckpoint(far::Checkpoint* c, uint64_t* synced_at, bool live) {
  if (!engine_->SealFar(&c->far)) {
    ::delayq::Log(LogLevel::kInfo, "far-future checkpoint: none (the time index is not whole)");
    return false;
  }
  // It writes the jobs in memory again to spare a start the far ones'
  // records: worth it only when those are at least as many.
  const uint64_t far_jobs = c->far.far.jobs;
  const uint64_t near_jobs = engine_->job_count() - far_jobs;
  if (far_jobs == 0 || far_jobs < near_jobs) {
    if (!live) {
      ::delayq::Log(LogLevel::kInfo, "far-future checkpoint: none (%llu far jobs, %llu in memory)",
                    static_cast<unsigned long long>(far_jobs),
                    static_cast<unsigned long long>(near_jobs));
    }
    return false;
  }
  auto fail = [&](const Status& s) {
    ::delayq::Log(LogLevel::kWarn, "far-future checkpoint: none: %s", s.message().c_str());
    if (live) far_files_->Unpin();
    return false;
  };
  c->epoch = far_files_->epoch();
  c->next_run = far_files_->next_run();
  if (live) {
    // The runs are written and fsynced off the lock (FinishCheckpoint);
    // held from now on, so that none used up meanwhile goes.
    std::vector<uint64_t> runs;
    for (const auto& r : c->far.far.runs) runs.push_back(r.file);
    far_files_->Pin(runs);
  } else {
    auto runs = far_files_->Sync();
    if (!runs.ok()) return fail(runs.status());
    c->run_files = std::move(runs).value();
  }
  // What it writes again is data added: room for it first, as for an add,
  // so that the room kept for reserves and finishes stays (and again as it
  // goes; without it, no checkpoint).
  if (live) {
    if (Status r = log_->Room(kRewriteStep, store::Log::Need::kGrow); !r.ok()) return fail(r);
  }
  auto segment = log_->Roll();
  if (!segment.ok()) return fail(segment.status());
  c->log = log_->ResumePoint();
  const uint64_t rolled_at = log_->end();
  // Everything else a replay needs, again, from the new segment on.
  // What is left of the live bytes once the jobs, subscriptions and
  // schedules written again are taken off: the far jobs' records.
  uint64_t far_bytes = live_bytes_.load(std::memory_order_relaxed);
  uint64_t batch = log_->end();
  Status error;
  uint64_t roomed = log_->end();
  engine_->ForEachJob([&](const engine::JobImage& j) {
    if (!error.ok()) return;
    if (live && log_->end() - roomed >= kRewriteStep) {
      error = log_->Room(kRewriteStep, store::Log::Need::kGrow);
      roomed = log_->end();
      if (!error.ok()) return;
    }
    log_->AppendRewrite(j);
    far_bytes -= std::min(far_bytes, store::PutBytes(j));
    if (log_->end() - batch >= (8u << 20)) {  // not the whole set in one buffer
      if (Status s = log_->WriteOut(); !s.ok() && error.ok()) error = s;
      batch = log_->end();
    }
  });
  // Cut short: the copies written are the jobs' latest records, as
  // compaction's are; the checkpoint before, if any, stands.
  if (!error.ok()) return fail(error);
  for (const auto& [topic, until] : engine_->PausedTopics()) log_->AppendPause(topic, until);
  engine_->ForEachRemembered([&](const engine::DedupImage& add) { log_->AppendDedup(add); });
  for (auto& [key, e] : subscriptions_) {
    far_bytes -= std::min(far_bytes, store::SubscriptionBytes(e.s));
    CountSubscription(e, -1);
    LogSubscription(e, /*rewrite=*/true);
  }
  for (auto& [name, e] : schedules_) {
    far_bytes -= std::min(far_bytes, store::ScheduleBytes(e.s));
    CountSchedule(e, -1);
    LogSchedule(e, /*rewrite=*/true);
  }
  if (live) {
    auto end = log_->EndRewrite(&c->log);
    if (!end.ok()) return fail(end.status());
    *synced_at = *end;
  } else if (Status s = log_->Seal(&c->log); !s.ok()) {
    return fail(s);
  }
  c->far_live_bytes = far_bytes;
  checkpoint_.next_base_end = rolled_at;
  checkpoint_.rewrite_bytes = log_->end() - rolled_at;
  return true;
}

void LocalQueue::WriteCheckpoint() {
  // Any step that fails leaves no new checkpoint: the next start resumes
  // from the one before, if any, or replays the whole log, which holds
  // everything (what was written again included).
  auto started = std::chrono::steady_clock::now();
  far::Checkpoint c;
  uint64_t synced_at = 0;
  if (!BeginCheckpoint(&c, &synced_at, /*live=*/false)) return;
  engine_->BeginFarSnapshot();
  Status s =
      far::WriteCheckpoint(*fs_, far_dir_, c, [this](size_t i, uint64_t* loc, uint32_t* aux) {
        return engine_->FarSnapshotChunk(i, loc, aux);
      });
  engine_->EndFarSnapshot();
  if (!s.ok()) {
    ::delayq::Log(LogLevel::kWarn, "far-future checkpoint: none: %s", s.message().c_str());
    return;
  }
  // Named by the checkpoint now: the runs stay when the engine and the
  // files go (without one, they are removed as ever).
  engine_->KeepFarRuns();
  far_files_->Keep();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ::delayq::Log(LogLevel::kInfo,
                "far-future checkpoint: %llu far jobs kept, %llu in memory written again, in "
                "%.2f s",
                static_cast<unsigned long long>(c.far.far.jobs),
                static_cast<unsigned long long>(engine_->job_count() - c.far.far.jobs), seconds);
}

uint64_t LocalQueue::CrashReplayBytes() const {
  return checkpoint_.base_bytes + (log_->end() - checkpoint_.base_end);
}

void LocalQueue::MaybeCheckpoint() {
  CheckpointState& k = checkpoint_;
  // Not while the disk is short of space: what it writes again would take
  // the room kept for reserves and finishes.
  // Not amid a compaction either (one stuck until a restart deletes nothing).
  if (far_files_ == nullptr || far_checkpoint_bytes_ == 0 || k.running || stopping_ ||
      (compaction_.segment != 0 && !compaction_.stuck) || !log_->health().ok() ||
      log_->short_of_space()) {
    return;
  }
  if (k.retry_after_ms != 0 && clock_->MonotonicMs() < k.retry_after_ms) return;
  const uint64_t far_jobs = engine_->far_jobs();
  if (far_jobs == 0 || far_jobs < engine_->job_count() - far_jobs) return;
  // Worth it once a crash's restart would replay the threshold, and at
  // least twice what it writes: the jobs in memory again, and the slots.
  uint64_t cost = std::max(
      {far_checkpoint_bytes_, 2 * k.rewrite_bytes, uint64_t{12} * engine_->far_set().slots()});
  if (CrashReplayBytes() < cost || (!compaction_.stuck && ShouldCompact())) return;
  // What the segment being written holds is synced first, by the log's
  // sync thread, off the lock: the roll's own fdatasync (under it) then
  // has only what came since to write. The runner comes back once it is
  // done (the log's notify fd).
  if (k.presync_at == 0) {
    k.presync_at = std::max<uint64_t>(log_->written(), 1);
    log_->RequestSync();
    return;
  }
  if (log_->synced() < k.presync_at) return;
  k.presync_at = 0;
  far::Checkpoint c;
  uint64_t synced_at = 0;
  auto started = std::chrono::steady_clock::now();
  if (!BeginCheckpoint(&c, &synced_at, /*live=*/true)) {
    CheckpointFailed();
    return;
  }
  engine_->BeginFarSnapshot();
  k.running = true;
  k.began_ms = static_cast<int64_t>(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
          .count());
  if (checkpoint_thread_.joinable()) checkpoint_thread_.join();  // the last one, finished
  checkpoint_thread_ = std::thread(
      [this, c = std::move(c), synced_at]() mutable { FinishCheckpoint(std::move(c), synced_at); });
}

void LocalQueue::FinishCheckpoint(far::Checkpoint c, uint64_t synced_at) {
  auto started = std::chrono::steady_clock::now();
  // What was written again is on disk before the file that skips the
  // records it replaces.
  Status s = log_->WaitSynced(synced_at);
  if (s.ok()) {
    auto files = far_files_->SyncRuns();  // those Pin held
    if (files.ok()) {
      c.run_files = std::move(files).value();
    } else {
      s = files.status();
    }
  }
  if (s.ok()) {
    s = far::WriteCheckpoint(*fs_, far_dir_, c, [this](size_t i, uint64_t* loc, uint32_t* aux) {
      std::lock_guard<std::mutex> lock(mu_);
      return engine_->FarSnapshotChunk(i, loc, aux);
    });
  }
  std::lock_guard<std::mutex> lock(mu_);
  size_t saved = engine_->far_set().snapshot_saved();
  engine_->EndFarSnapshot();
  CheckpointState& k = checkpoint_;
  k.running = false;
  if (!s.ok()) {
    far_files_->Unpin();
    CheckpointFailed();
    ::delayq::Log(LogLevel::kWarn, "far-future checkpoint while serving: none: %s",
                  s.message().c_str());
    return;
  }
  far_files_->Commit();
  NoteCheckpoint(c.log);
  k.retry_after_ms = 0;
  k.backoff_ms = 0;
  k.base_end = k.next_base_end;
  k.base_bytes = 0;
  ++k.written;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ::delayq::Log(LogLevel::kInfo,
                "far-future checkpoint while serving: %llu far jobs, %llu bytes in memory "
                "written again (%lld ms under the lock), the slots in %.2f s (%zu chunks copied "
                "aside)",
                static_cast<unsigned long long>(c.far.far.jobs),
                static_cast<unsigned long long>(k.rewrite_bytes),
                static_cast<long long>(k.began_ms), seconds, saved);
}

void LocalQueue::NoteCheckpoint(const store::LogResume& r) {
  CheckpointState& k = checkpoint_;
  k.on_disk = true;
  k.segment = r.segment;
  k.needed.clear();
  for (const store::LogResume::Before& b : r.before) {
    if (b.far_puts > 0) k.needed.insert(b.number);
  }
}

void LocalQueue::CheckpointFailed() {
  CheckpointState& k = checkpoint_;
  ++k.failed;
  k.backoff_ms =
      std::min(kCheckpointRetryMaxMs, k.backoff_ms == 0 ? kCheckpointRetryMs : 2 * k.backoff_ms);
  k.retry_after_ms = clock_->MonotonicMs() + k.backoff_ms;
}

void LocalQueue::DropCheckpoint(uint64_t segment) {
  CheckpointState& k = checkpoint_;
  if (far_files_ == nullptr || !k.on_disk) return;
  // A segment before the checkpoint's that held no far record when it was
  // written holds nothing a resume reads: it may go (Log::CheckResume).
  if (segment < k.segment && k.needed.count(segment) == 0) return;
  // Compaction is about to delete a segment it names (or copy records it
  // knows where they were): from here on a crash replays the whole log,
  // until the next one.
  if (Status s = far::RemoveCheckpoint(*fs_, far_dir_); !s.ok()) {
    ::delayq::Log(LogLevel::kWarn, "far-future checkpoint: cannot remove it: %s",
                  s.message().c_str());
  }
  far_files_->ReleaseAll();
  k.on_disk = false;
  k.presync_at = 0;
  k.base_end = log_->end();
  k.base_bytes = log_->disk_bytes();
}

}  // namespace delayq
