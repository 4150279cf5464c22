// Log: the embedded store's durable, segmented, append-only record of what
// changed (format: log_format.h, docs/log-format.md).
//
// Writing. Records are encoded into an in-memory buffer as the engine makes
// its changes (Append*). WriteOut() writes the whole buffer with one write(2):
// the server calls it once per loop turn, so the changes of every connection
// in a turn leave together (group commit). Positions are byte counts since
// open: end() grows with Append, written() with WriteOut, synced() with each
// fdatasync. released() is what a reply may wait for under the fsync policy:
//   always    synced(): a sync thread fdatasyncs whatever was written when it
//             is asked (RequestSync), so one fdatasync covers every write
//             waiting for it, and the next covers what came meanwhile. An
//             owner with nothing else to do runs the fdatasync itself
//             (WriteOutAndSync), sparing the two thread wake-ups
//   everysec  written(); the sync thread fdatasyncs once a second
//   never     written(); the OS writes back when it likes
// A segment is closed (fdatasynced) when it reaches segment_bytes, so only the
// newest segment can end in a torn record.
//
// Preparing space. Growing a file costs more than writing over allocated
// space: the pages are new to the page cache, and with fsync always every
// fdatasync must also commit the new size (measured here: ~190 µs against
// ~130 µs). So a prepare thread writes zeros ahead of the appends in the
// segment being written, prepare_bytes at a time, once they come within
// prepare_bytes of its end. A write that passes the prepared space waits for
// a chunk of zeros being written (prepare_mu_), never the other way round.
// Zeros after the last record are cut quietly at recovery, and a closed
// segment is cut to its records.
//
// Room before a change. Prepared space is also what keeps a full disk from
// losing a change: the owner asks Room() for an upper bound of a change's
// records before it makes the change, and Room() makes sure they land in
// space the file system has already given the head (preparing it on the
// caller's thread if the prepare thread has not), so writing them cannot
// fail for want of space. When the file system refuses (ENOSPC, EDQUOT), the
// change is refused before anything changed, and the log is short of space
// until a later prepare succeeds (tried again at most every 100 ms by Room(),
// every second by the prepare thread): writes resume by themselves once
// space returns. A change that adds data must leave reserve_bytes() of the
// prepared room for those that only keep existing jobs moving (reserve,
// finish, delete: they let workers drain a full disk's queue) and for the
// timers' updates, which are never refused. While short, the head is not
// closed at segment_bytes: its prepared room is all there is.
//
// Failures. A write that fails all the same (EIO; or ENOSPC for records that
// bypassed Room: timers' updates beyond the reserve, or a segment whose
// successor cannot be made) keeps what it could not write and tries again on
// the next WriteOut, at most every 100 ms (the notify fd wakes the owner for
// it); health() is the error meanwhile, so the owner refuses new changes and
// serves again once a write succeeds. Changes in a write that failed stay in
// memory and are written by the retry: their callers were told of the error
// but the change may survive a restart. A failed fdatasync is final
// (after one, Linux may have dropped the dirty pages: retrying could claim
// durability for lost data): health() stays failed until the process restarts
// and recovers from what is on disk.
//
// Reading. Open() replays every record, oldest segment first, through a
// callback. After a bad record (checksum, content, or a length running past
// the end) it scans the rest of the segment for a record of that segment
// that verifies. None: in the newest segment a torn tail, cut off and
// reported. One: damage amid records that may have been acknowledged, as is
// any bad record of an older segment: Open fails naming the file, the
// offset and the commands that would start it, and changes nothing; with
// LogOptions::repair the damaged bytes (up to the next record that
// verifies, or the segment's end) are dropped instead, the segment
// rewritten without them, and each span logged and counted. Writing then
// continues at the end of the newest segment, or in a new one.
//
// Thread-safety: Append*, WriteOut and the segment calls are made by one
// owner at a time (the queue's mutex); positions and health() may be read by
// any thread; the sync thread is the log's own.
#ifndef DELAYQ_LOG_LOG_H_
#define DELAYQ_LOG_LOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "delayq/options.h"
#include "delayq/status.h"
#include "engine/journal.h"
#include "log/file.h"
#include "log/log_format.h"

namespace delayq::store {

// A lock for a few hundred nanoseconds at most (BasicLockable).
class SpinLock {
 public:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// Where a replay may begin instead of at the oldest segment. A far-future
// checkpoint (far/checkpoint.h) rolls the log (Roll), writes everything a
// replay needs but the far-future jobs' records again from the new segment
// on, and keeps this (ResumePoint, then EndRewrite or Seal): the segments
// before it are opened but not replayed, their accounts taken from here;
// the new segment and every later one are replayed.
struct LogResume {
  uint64_t segment = 0;  // replay starts here
  uint64_t last_seq = 0;
  // Where the records written again end (engine::MakeLocation: segment and
  // byte offset): those before are copies of jobs the replay has not seen
  // (no replace lookup), those from there on changes like any other.
  uint64_t rewrite_end = 0;
  struct Before {
    uint64_t number = 0;
    int64_t live_puts = 0;
    // Live PUTs once the rewrite is written (EndRewrite): the far jobs'
    // records. A segment with none holds nothing the resume reads, so
    // compaction may delete it (the oldest first) and the resume stands.
    int64_t far_puts = 0;
  };
  std::vector<Before> before;  // every segment before `segment`, oldest first
  // Jobs whose latest PUT lies outside the segment their seq falls in.
  std::vector<std::pair<uint64_t, uint64_t>> moved;  // seq, segment
};

struct LogOptions {
  std::string dir;                             // created if missing
  FsyncPolicy fsync = FsyncPolicy::kEverySec;  // delayq/options.h
  uint64_t segment_bytes = 64 << 20;
  // Zeros are written this far ahead of the appends, this much at a time
  // (see "Preparing space"); 0: none. Default: 1 MiB.
  uint64_t prepare_bytes = 1 << 20;
  std::shared_ptr<FileSystem> fs;  // default: PosixFileSystem()
  // Damage amid records (see "Reading"): false, Open fails; true, the
  // damaged bytes are dropped and every record that verifies is kept.
  bool repair = false;
  // Called for each span a repair dropped, once its segment is rewritten:
  // the records after it in that segment moved back by its length.
  std::function<void(uint64_t segment, uint64_t begin, uint64_t end)> repaired;
  // Called once the directory is locked, before replay: where to replay
  // from (a checkpoint's resume point, which CheckResume has passed; it must
  // outlive Open), or null for everything. Unset: everything.
  std::function<const LogResume*()> resume_from;
};

struct LogStats {
  uint64_t writes = 0;          // write(2) batches
  uint64_t syncs = 0;           // fdatasync calls
  uint64_t appended_bytes = 0;  // since open
  uint64_t disk_bytes = 0;      // segment files now
  uint64_t segments = 0;
  uint64_t rewritten_bytes = 0;  // by compaction
  uint64_t removed_segments = 0;
  uint64_t reused_files = 0;    // segments written over a deleted one's file
  uint64_t prepared_bytes = 0;  // zeros written ahead of the appends
  uint64_t write_failures = 0;  // write(2) batches that failed (and were retried)
  uint64_t room_failures = 0;   // preparations of space the file system refused
  bool short_of_space = false;  // the file system refuses more space now (see Room)
};

// What recovery found; reported in the log and the server's start-up line.
struct RecoveryReport {
  uint64_t resumed_from = 0;  // the segment a checkpoint's replay began at; 0: none
  uint64_t segments = 0;
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t torn_bytes = 0;    // cut from the end of the newest segment (not zeros)
  uint64_t torn_records = 0;  // such cuts (a torn write each): 0 or 1
  std::string torn_reason;
  uint64_t unused_bytes = 0;  // zeros after the last record (prepared space), cut too
  // LogOptions::repair: damaged spans dropped (each a bad record and what
  // follows it up to the next record that verifies, or to the segment's end)
  uint64_t repaired_spans = 0;
  uint64_t repaired_bytes = 0;
};

class Log {
 public:
  using Replay = std::function<Status(const Record&)>;

  // Opens `options.dir` (creating it), locks it, replays every record
  // through `replay` (an error from it stops Open), then starts a segment.
  // Errors: kUnavailable for files and directories (path and errno text),
  // kInternal for damage (file, offset, what is wrong).
  static Result<std::unique_ptr<Log>> Open(const LogOptions& options, const Replay& replay,
                                           RecoveryReport* report);
  // Bytes of the segment files in options.dir (0 if there are none).
  static uint64_t SizeOnDisk(const LogOptions& options);
  // Ok if options.dir holds exactly the segments before `resume`'s that it
  // names (but for oldest ones that held no far record, which compaction
  // may have deleted), then its segment and any after it, up to at least
  // the one where the rewrite ends: a replay from there is the whole story.
  // Else kNotFound (or the file system's error) saying what differs.
  static Status CheckResume(const LogOptions& options, const LogResume& resume);
  // The file name of segment `number` in the data directory.
  static std::string SegmentName(uint64_t number);
  // Writes what is buffered, fdatasyncs, stops the sync thread.
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;

  // --- appending (owner) ----------------------------------------------------
  // Returns where the record goes (engine::MakeLocation: its segment and
  // byte offset), readable once written (Written, RecordReader).
  uint64_t AppendPut(const engine::JobImage& job);
  // A kPut of a live job by compaction (counted apart).
  uint64_t AppendRewrite(const engine::JobImage& job);
  void AppendUpdate(const engine::JobImage& job);
  void AppendRemove(const engine::JobImage& job);
  void AppendPause(std::string_view topic, int64_t paused_until_ms);
  void AppendDedup(const engine::DedupImage& add);
  // A subscription's instance as stored; returns the number of the segment
  // it went to, whose live instances it counts one more (LiveSubscriptions).
  // Only the owner knows which record an instance's latest supersedes: it
  // tells with SubscriptionsMoved.
  // `rewrite`: a copy by compaction (counted apart, as AppendRewrite's).
  uint64_t AppendSubscription(const Subscription& s, bool rewrite = false);
  // The removal of an instance, or of every instance of `name` when url is
  // empty.
  void AppendUnsubscribe(std::string_view name, std::string_view url);
  // `n` more (or, negative, fewer) live instances have their latest record
  // in segment `number`: an instance put again, removed or lapsed is one
  // fewer in the segment of its former record; recovery counts them all.
  void SubscriptionsMoved(uint64_t number, int64_t n);
  // A schedule as stored, and its removal: counted like subscriptions (the
  // owner knows which record of a schedule is its latest).
  uint64_t AppendSchedule(const Schedule& s, bool rewrite = false);
  void AppendUnschedule(std::string_view name);
  void SchedulesMoved(uint64_t number, int64_t n);
  // Every later segment header says no seq above this was issued before it.
  void NoteSeq(uint64_t seq) { last_seq_ = std::max(last_seq_, seq); }
  // The highest job seq the log has seen (replay included).
  uint64_t last_seq() const { return last_seq_; }

  // --- a checkpoint (owner) ------------------------------------------------
  // Writes what is buffered and closes the segment being written, full or
  // not; appends go to a new one from now on. Answers its number.
  Result<uint64_t> Roll();
  // Right after Roll, before anything is appended: the accounts of the
  // segments before the new one, for LogResume.
  LogResume ResumePoint();
  // Once the records to write again are appended: writes them and notes
  // where they end in `resume`, and what each segment before holds then
  // (Before::far_puts). Returns the position WaitSynced needs.
  Result<uint64_t> EndRewrite(LogResume* resume);
  // EndRewrite, and fdatasyncs them here.
  Status Seal(LogResume* resume);
  // Blocks until synced() >= pos, asking the sync thread (any thread).
  // Errors: health() when the log fails.
  Status WaitSynced(uint64_t pos);

  // --- room (owner) ---------------------------------------------------------
  // What a change does to the queue's size, for Room() while short of space.
  enum class Need {
    kGrow,    // adds data (a job): must leave reserve_bytes()
    kUpkeep,  // moves existing jobs along (reserve, finish, delete, release, ...)
  };
  // What a change that adds data must leave of the prepared room: a
  // quarter of a segment at most.
  static constexpr uint64_t kShortReserveBytes = 256 << 10;
  uint64_t reserve_bytes() const {
    return std::min<uint64_t>(kShortReserveBytes, options_.segment_bytes / 4);
  }
  // Ok if `bytes` more records can be appended into space the file system
  // has already given the segment being written (see "Room before a
  // change"). Call under the owner's mutex, before the change, with an upper
  // bound of its records (log_format.h's *Bound). With prepare_bytes 0 there
  // is no prepared space and no promise: Ok unless health() is not.
  // Errors: health()'s; kUnavailable "disk full: ..." naming the file and
  // the file system's error when it refuses the space.
  Status Room(uint64_t bytes, Need need);
  // True while the file system refuses space (see "Room before a change").
  bool short_of_space() const { return short_of_space_.load(std::memory_order_acquire); }
  // Ok, or while short of space why: "disk full: ..." naming the directory
  // and the file system's error.
  Status space();

  // Writes the buffer (one write(2)) and closes the segment if it is full.
  // With fsync always, also asks the sync thread for a sync. Errors: as health().
  Status WriteOut();
  // WriteOut for an owner that would otherwise wait: with fsync always, the
  // fdatasync runs here, on the caller's thread, unless the sync thread is
  // syncing or the last fdatasync took over kSyncHereMaxUs (a slow disk
  // must not stall the caller); then as WriteOut. Returns whether it synced.
  bool WriteOutAndSync();
  // Blocks until released() >= pos (writing and syncing as needed, together
  // with whoever else waits). Errors: health() when the write fails or the
  // log has failed; what was appended is still written later if it can be.
  Status WaitReleased(uint64_t pos);
  // Asks the sync thread to fdatasync what has been written.
  void RequestSync();

  // Whether the record at `location` (an AppendPut's) has been written to
  // its file (else it is still in memory: WriteOut writes it).
  bool Written(uint64_t location) const;

  uint64_t end() const { return end_.load(std::memory_order_acquire); }
  uint64_t written() const { return written_.load(std::memory_order_acquire); }
  uint64_t synced() const { return synced_.load(std::memory_order_acquire); }
  uint64_t released() const { return policy_ == FsyncPolicy::kAlways ? synced() : written(); }
  // Ok, or why changes cannot be made durable now.
  Status health() const;
  // True once an fdatasync has failed (see the top of this file).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Readable when released() moved, a write should be retried, or a second
  // passed with activity (the owner's chance to compact). Level: drain it.
  int notify_fd() const { return notify_fd_; }
  FsyncPolicy policy() const { return policy_; }
  LogStats stats() const;

  // --- compaction (owner) ---------------------------------------------------
  // The oldest closed segment (never the one being written), or 0 for none.
  uint64_t OldestClosed() const;
  // Reads up to n bytes of a closed segment's records, from `offset` bytes
  // after its header. Returns fewer only at its end.
  Result<std::string> ReadClosed(uint64_t number, uint64_t offset, size_t n);
  // Live jobs whose latest PUT is in the segment (0 for one already gone),
  // and whether it holds PAUSE records. A segment with no live PUTs holds
  // nothing a replay needs but its pauses, so compaction need not read it.
  int64_t LivePuts(uint64_t number);
  // Live subscription instances whose latest record is in the segment (as
  // the owner counted them: AppendSubscription, SubscriptionsMoved).
  int64_t LiveSubscriptions(uint64_t number);
  // Likewise, schedules (AppendSchedule, SchedulesMoved).
  int64_t LiveSchedules(uint64_t number);
  bool HasPauses(uint64_t number);
  // The latest wall-clock expiry of the remembered adds (kDedup records) in
  // the segment, 0 for none: compaction keeps the segment until then, so a
  // restart within an add's dedup window still remembers it.
  int64_t DedupUntil(uint64_t number);
  // When nothing was written for half a second and no live job's PUT (nor
  // live subscription or schedule) is in the segment being written, and it holds at
  // least `min_bytes`: closes it, so
  // that compaction can delete it (an idle log shrinks to its live set).
  // Returns whether it did.
  bool RollIfIdleAndDead(uint64_t min_bytes);
  // Deletes a closed segment. Call only once everything it held that is
  // still needed has been appended again and synced.
  Status RemoveClosed(uint64_t number);
  uint64_t disk_bytes() const { return disk_bytes_.load(std::memory_order_relaxed); }

 private:
  struct Segment {
    uint64_t number = 0;
    std::string path;
    uint64_t bytes = 0;
    uint32_t version = kFormatVersion;  // of its header
    std::shared_ptr<File> file;         // open while it is the one being written
  };

  // What each segment holds that matters to compaction; one per segment, in
  // order, including the next one while the newest is being closed.
  struct Account {
    uint64_t number = 0;
    uint64_t first_seq = 0;  // adds written here have seq >= this (and < the next's)
    int64_t live_puts = 0;
    bool has_pauses = false;
    int64_t dedup_until_ms = 0;      // DedupUntil
    int64_t live_subscriptions = 0;  // LiveSubscriptions
    int64_t live_schedules = 0;      // LiveSchedules
  };

  explicit Log(const LogOptions& options);
  // The numbers of the segment files in `dir`, in order.
  static Result<std::vector<uint64_t>> SegmentNumbers(FileSystem& fs, const std::string& dir);
  Status Recover(const Replay& replay, RecoveryReport* report);
  Status ReplaySegment(Segment& seg, bool newest, const Replay& replay, RecoveryReport* report);
  // A segment before a resume's: its header checked, not replayed.
  Status SkipSegment(Segment& seg, int64_t live_puts);
  const LogResume* resume_ = nullptr;  // during Open: LogOptions::resume_from's
  // Records read and checked from one chunk of a segment, by ReadChunk.
  struct Chunk {
    Status status;
    std::string buf;    // the records' bytes: a carried-over part, then the chunk read
    uint64_t base = 0;  // file offset of buf[0]
    std::vector<std::unique_ptr<Record>> records;  // whole ones, in order
    size_t consumed = 0;                           // bytes of buf they take
    ReadOutcome stop = ReadOutcome::kIncomplete;   // what followed them
    std::string error;                             // why, if kCorrupt
    bool eof = false;                              // the read reached the end of the file
  };
  static Chunk ReadChunk(File* file, uint64_t file_size, std::string carry, uint64_t base,
                         uint64_t segment);
  // Where the whole records read from `from` end, and why there.
  struct RecordsEnd {
    uint64_t at = 0;
    std::string why;  // empty: the end of the file, on a record's end
  };
  // Replays the records of segment `number` from byte `from` up to the
  // first bad one or the end.
  Result<RecordsEnd> ReplayRecords(File& file, uint64_t size, uint64_t from, uint64_t number,
                                   const Replay& replay, RecoveryReport* report);
  void Count(const Record& rec, uint64_t number);  // for compaction's accounts
  // What follows a bad record at `offset`, by FindWholeRecord.
  struct After {
    enum What {
      kNothing,    // no record of this segment verifies after it: a torn end
      kRecord,     // one does, at `at`: damage amid records
      kUndecided,  // the scan's budget ran out (only bytes crafted to parse do that)
    } what = kNothing;
    uint64_t at = 0;
  };
  static Result<After> FindWholeRecord(File& file, uint64_t offset, uint64_t size,
                                       uint64_t segment);
  // The error that stops the start at damage, with what would start it.
  Status Damaged(const std::string& path, uint64_t offset, uint64_t size, const std::string& what,
                 const After& after) const;
  // Bytes [begin, end) of a segment that repair drops, and why.
  struct Span {
    uint64_t begin = 0;
    uint64_t end = 0;
    std::string why;
  };
  // Rewrites `seg` (its records up to seg.bytes) without `dropped`, logs and
  // counts what was dropped.
  Status Repair(Segment& seg, File& file, const std::vector<Span>& dropped, RecoveryReport* report);
  static Result<bool> AllZeros(File& file, uint64_t offset, uint64_t size);
  // The end of the last byte that is not zero in [offset, size); offset if none.
  static Result<uint64_t> DataEnd(File& file, uint64_t offset, uint64_t size);
  std::string SparePath() const;
  Status OpenHead();
  Status StartSegment(uint64_t number, uint64_t last_seq);
  // REQUIRES: io_mu_.
  Status WriteOutLocked();
  Status WriteUnwritten();
  // The segment being written, as it is now (under seg_mu_).
  struct HeadView {
    uint64_t number;
    std::shared_ptr<File> file;
    uint64_t bytes;
  };
  HeadView Head() const;
  Status Rotate();
  // Appends go to the next segment from now on (its account begun); Rotate
  // makes its file. REQUIRES: buf_mu_ and io_mu_.
  void BeginNextSegment();
  // REQUIRES: buf_mu_ (or recovery, before any thread).
  Account* AccountOf(uint64_t number);
  uint64_t SegmentOfSeq(uint64_t seq) const;  // 0: a segment already deleted
  void CountPut(uint64_t seq, uint64_t number);
  void CountRemove(uint64_t seq);
  void SyncLoop();
  // One fdatasync of the newest segment; records its outcome (synced(), or
  // the log failed) and how long it took. REQUIRES: not sync_mu_.
  void SyncNewest();
  void Notify();
  // The head segment is `number`, prepared up to `end`, holding
  // `head_bytes` so far (REQUIRES: not prepare_mu_); 0: none, while one is
  // closed.
  void SetPrepared(uint64_t number, uint64_t end, uint64_t head_bytes);
  // prepared_end_ and room_end_ together. REQUIRES: prepare_mu_.
  void StorePrepared(uint64_t end);
  // After a write that ended at `at` in the head: asks for more zeros ahead
  // if they run short.
  void MaybeAskPrepare(uint64_t at);
  void PrepareLoop();
  // Writes one chunk of zeros if the head needs one; false if it did not.
  bool PrepareChunk();
  // Makes the next segment's file (spare.dq, prepare_bytes of zeros) once
  // the head is prepared to its end, unless there is one: closing the head
  // then never waits for space, nor finds none on a full disk.
  void PrepareSpare();
  // After a preparation (or a write past the prepared space) that failed
  // with `error` or succeeded (ok): the log is short of space, or not.
  // REQUIRES: prepare_mu_ (or the write path's equivalent).
  void NoteRoom(const Status& error);
  // Room()'s refusal. REQUIRES: prepare_mu_.
  Status NoRoom(uint64_t want) const;

  const LogOptions options_;
  const FsyncPolicy policy_;
  std::shared_ptr<FileSystem> fs_;
  std::unique_ptr<File> lock_;
  int notify_fd_ = -1;

  // Appending: the owner's (under its own mutex), plus the swap in WriteOut.
  // Held for one record's encoding or a swap: a spin lock costs less than a
  // mutex's calls, three times a job's life.
  SpinLock buf_mu_;
  std::string buf_;  // GUARDED_BY(buf_mu_)
  uint64_t last_seq_ = 0;
  std::deque<Account> accounts_;  // GUARDED_BY(buf_mu_)
  // Log position of byte 0 of the segment appends go to (accounts_.back()):
  // a record appended at position p lies at byte p - append_base_ of it.
  int64_t append_base_ = 0;  // GUARDED_BY(buf_mu_)
  // seq -> segment, for jobs whose latest PUT was written by compaction
  // (outside the segment their seq falls in).
  std::unordered_map<uint64_t, uint64_t> moved_;  // GUARDED_BY(buf_mu_)
  std::atomic<uint64_t> end_{0};
  std::atomic<uint64_t> rewritten_bytes_{0};

  // Writing: one writer at a time.
  std::mutex io_mu_;
  std::string unwritten_;  // GUARDED_BY(io_mu_): the batch being written, or a failed write's rest
  uint64_t unwritten_end_ = 0;   // log position at the end of unwritten_
  bool rotate_pending_ = false;  // GUARDED_BY(io_mu_): the newest segment is full
  bool has_spare_ = false;       // GUARDED_BY(io_mu_): spare.dq exists, for the next segment
  std::atomic<uint64_t> reused_files_{0};
  bool presynced_ = false;                 // GUARDED_BY(io_mu_): a sync was asked as it neared full
  bool sync_here_ = false;                 // GUARDED_BY(io_mu_): WriteOutAndSync will sync, not ask
  std::atomic<int64_t> last_write_ms_{0};  // monotonic, of the last batch written
  int64_t last_failed_write_ms_ = 0;
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> synced_{0};

  // Segments; the last one is being written.
  mutable std::mutex seg_mu_;
  std::deque<Segment> segments_;  // GUARDED_BY(seg_mu_)
  static constexpr uint64_t kNoOffset = ~uint64_t{0};
  // In the head: where the batch that failed part-way began (kNoOffset:
  // none). GUARDED_BY(seg_mu_)
  uint64_t incomplete_from_ = kNoOffset;
  uint64_t removed_segments_ = 0;        // GUARDED_BY(seg_mu_)
  std::atomic<uint64_t> disk_bytes_{0};  // sum of segments_[*].bytes

  mutable std::mutex state_mu_;
  Status write_error_;  // GUARDED_BY(state_mu_)
  Status sync_error_;   // GUARDED_BY(state_mu_)
  std::atomic<bool> failed_{false};
  std::atomic<bool> troubled_{false};  // either error above is set: health() takes the lock
  std::atomic<uint64_t> writes_{0};
  std::atomic<uint64_t> syncs_{0};

  // Held while the newest segment is synced or closed.
  std::mutex rotate_mu_;
  // The sync thread.
  std::mutex sync_mu_;
  std::condition_variable sync_cv_;       // wakes the sync thread
  std::condition_variable synced_cv_;     // wakes WaitReleased
  uint64_t sync_requested_ = 0;           // GUARDED_BY(sync_mu_)
  bool syncing_ = false;                  // GUARDED_BY(sync_mu_): an fdatasync runs
  std::atomic<int64_t> last_sync_us_{0};  // how long the last fdatasync took
  bool stop_ = false;                     // GUARDED_BY(sync_mu_)
  std::thread sync_thread_;

  // Preparing space. prepare_mu_ is held while zeros are written, and by a
  // write that passes prepared_end_; prepared_end_ only grows within a
  // segment, so a write below it needs no lock.
  std::mutex prepare_mu_;
  uint64_t prepare_segment_ = 0;           // GUARDED_BY(prepare_mu_): 0 while one closes
  std::atomic<uint64_t> prepared_end_{0};  // in the head: records or zeros up to here
  int64_t head_base_ = 0;  // GUARDED_BY(prepare_mu_): log position of the head's byte 0
  // prepared_end_ as a log position: appends up to here land in prepared
  // space (Room's fast path); 0 while a segment closes.
  std::atomic<int64_t> room_end_{0};
  int64_t prepare_failed_ms_ = 0;  // GUARDED_BY(prepare_mu_): a write of zeros failed
  std::string room_error_;         // GUARDED_BY(prepare_mu_): the last such failure
  std::atomic<bool> prepare_asked_{false};
  std::atomic<uint64_t> prepared_bytes_{0};
  std::atomic<bool> short_of_space_{false};
  std::atomic<uint64_t> room_failures_{0};
  std::atomic<uint64_t> write_failures_{0};
  std::mutex prepare_sig_mu_;  // for prepare_cv_ only: held for no work
  std::condition_variable prepare_cv_;
  bool prepare_stop_ = false;  // GUARDED_BY(prepare_sig_mu_)
  std::thread prepare_thread_;
};

}  // namespace delayq::store

#endif  // DELAYQ_LOG_LOG_H_
