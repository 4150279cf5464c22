// Checkpoint: what lets a start replay only what came after it, not the
// far-future jobs' records one by one. Format and recovery:
// docs/log-format.md, "The far-future checkpoint".
//
// LocalQueue (src/local/far_checkpoint.cc) writes one while serving, each
// time a crash's restart would replay QueueOptions::far_checkpoint_bytes of
// log, and at a clean stop:
//   1. seals the far jobs' time index (Engine::SealFar); at a stop has its
//      runs written and fsynced (IndexFiles::Sync), while serving holds them
//      (IndexFiles::Pin) and fsyncs them in step 4 (SyncRuns);
//   2. rolls the log (Log::Roll) and notes the accounts of the segments
//      before the new one (Log::ResumePoint);
//   3. writes everything in memory again at the head of the new segment:
//      every near job in its state, pauses, remembered adds,
//      subscriptions, schedules; notes where they end (Log::EndRewrite; at
//      a stop Log::Seal fdatasyncs them here);
//   4. writes this file (far/checkpoint.dq: to a temporary name, fsynced,
//      renamed, the directory fsynced): the log's resume point, the far
//      jobs' image and their slots' table as it was at step 3 (while
//      serving, on a thread of its own from the engine's snapshot, once the
//      log's sync has passed step 3's records); then keeps the runs it
//      names (Keep at a stop; Commit while serving).
// Steps 1-3 hold the engine's lock. A step that fails leaves the
// checkpoint before, or none. The next start that finds it, with a memory
// window, checks it whole (checksums, the log's segments as it names them,
// every run there with its header) before it changes anything, restores
// the slots and replays from the new segment on; anything that does not
// check out is logged, the file removed, and the start replays everything.
// A start that used it keeps it: a later crash resumes from it again.
// Compaction removes it before it begins (LocalQueue::DropCheckpoint).
#ifndef DELAYQ_FAR_CHECKPOINT_H_
#define DELAYQ_FAR_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"
#include "engine/engine.h"
#include "far/index_files.h"
#include "log/file.h"
#include "log/log.h"

namespace delayq::far {

inline constexpr std::string_view kCheckpointName = "checkpoint.dq";
inline constexpr std::string_view kCheckpointMagic = "DQFARCKP";
inline constexpr uint32_t kCheckpointVersion = 2;
inline constexpr size_t kCheckpointHeaderBytes = 32;

struct Checkpoint {
  store::LogResume log;
  engine::Engine::FarImage far;
  uint64_t epoch = 0;     // the runs' (IndexFiles::epoch)
  uint64_t next_run = 0;  // IndexFiles::next_run
  std::vector<IndexFiles::RunFileInfo> run_files;
  // The estimate of the far jobs' record bytes (LocalQueue's live bytes,
  // less the jobs written again).
  uint64_t far_live_bytes = 0;
};

// Copies chunk i of the slots' table (engine::FarSet::SnapshotChunk) into
// loc and aux; returns its slots.
using SlotChunks = std::function<size_t(size_t i, uint64_t* loc, uint32_t* aux)>;

// Writes `dir`/checkpoint.dq: `c`, then the slots' table (c.far.far.slots
// slots) from `chunks`, in order: to a temporary name, fsynced, renamed, the
// directory fsynced. Errors: the file system's (no file is left then).
Status WriteCheckpoint(store::FileSystem& fs, const std::string& dir, const Checkpoint& c,
                       const SlotChunks& chunks);

// Reads a checkpoint: the header and everything but the slots at Open, the
// slots in order by LoadSlots (engine::FarSet::SlotLoader), each chunk
// checked as it comes.
class CheckpointReader {
 public:
  // Errors: kNotFound if there is none; kInternal naming what does not
  // check out; the file system's.
  static Result<std::unique_ptr<CheckpointReader>> Open(store::FileSystem& fs,
                                                        const std::string& dir);
  const Checkpoint& checkpoint() const { return c_; }
  Status LoadSlots(uint64_t* loc, uint32_t* aux, size_t n);

 private:
  CheckpointReader() = default;
  std::unique_ptr<store::File> file_;
  Checkpoint c_;
  uint64_t offset_ = 0;  // of the next chunk
  uint64_t chunk_ = 0;
  uint64_t seed_ = 0;
};

// Removes `dir`/checkpoint.dq (and a temporary one a stop cut short), and
// fsyncs the directory if it did. None there: Ok.
Status RemoveCheckpoint(store::FileSystem& fs, const std::string& dir);
// Removes only the temporary one a crash may have left (the checkpoint
// stands). None there: Ok.
Status RemoveCheckpointTemp(store::FileSystem& fs, const std::string& dir);

}  // namespace delayq::far

#endif  // DELAYQ_FAR_CHECKPOINT_H_
