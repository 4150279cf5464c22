// IndexFiles: the sealed runs of the far jobs' time index (engine::FarSet),
// one file each in <data_dir>/far/, read back a block at a time as the
// runs are consumed. Format: docs/log-format.md, "Far-future jobs".
//
// A run describes this process's slots, so a run is only read by the
// process that wrote it, or by the next one when a checkpoint at a clean
// stop (far/checkpoint.h) names it (Keep, Adopt): each process names its
// runs with an epoch of its own (in the header and every block's checksum),
// and once it holds the data directory (the log's lock) removes every run
// it did not write or adopt (replay places every far job again). Runs are
// fsynced only for a checkpoint (a crash that loses one loses the process
// that could read it).
//
// Writing: Write takes the entries and returns at once; a thread of its own
// sorts and writes them (a run of a million: ~30 ms of sorting and ~30 ms
// of writing a new file, which the engine's owner does not wait for). A
// Read of a run not yet written waits for it. A run whose write fails (a
// full disk) stays in memory and is read from there, and the failure is
// logged.
//
// Thread-safety: Write, Read and Remove from one owner (the queue's mutex);
// the writer thread is the object's own.
#ifndef DELAYQ_FAR_INDEX_FILES_H_
#define DELAYQ_FAR_INDEX_FILES_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "delayq/status.h"
#include "engine/far_set.h"
#include "log/file.h"

namespace delayq::far {

inline constexpr std::string_view kRunMagic = "DQFARIDX";
inline constexpr uint32_t kRunVersion = 2;
inline constexpr size_t kRunHeaderBytes = 40;
inline constexpr size_t kEntryBytes = 24;
inline constexpr size_t kBlockEntries = 4096;

class IndexFiles final : public engine::FarIndexFiles {
 public:
  // Creates `dir` if missing. Errors: kUnavailable (the path and the
  // system's reason).
  static Result<std::unique_ptr<IndexFiles>> Open(const std::string& dir,
                                                  std::shared_ptr<store::FileSystem> fs);

  // Stops the writer (runs not yet written are dropped) and removes the runs.
  ~IndexFiles() override;

  uint64_t Write(std::vector<engine::FarEntry> entries) override;
  Result<size_t> Read(uint64_t run, uint64_t from, std::span<engine::FarEntry> out) override;
  void Remove(uint64_t run) override;

  // Removes the runs an earlier process left, but those adopted (call once
  // the data directory is locked). Errors: the file system's.
  Status RemoveOthers();
  std::string RunName(uint64_t run) const;

  // A run as a checkpoint names it.
  struct RunFileInfo {
    uint64_t run = 0;
    uint64_t entries = 0;
  };
  // For a checkpoint: waits until every run is written, fsyncs each file
  // and the directory. Errors: a run kept in memory (its write failed), the
  // file system's.
  Result<std::vector<RunFileInfo>> Sync();
  // The runs outlive this object (a checkpoint names them).
  void Keep() {
    std::lock_guard<std::mutex> lock(mu_);
    keep_ = true;
  }
  // A checkpoint while serving: Pin the runs it names as it begins, SyncRuns
  // (any thread) to have those written and fsynced, then Commit once its
  // file is in place (they stay held, the ones held before let go) or Unpin
  // if it failed. ReleaseAll once no checkpoint is on disk any more. A held
  // run that is used up (Remove) stays until it is let go.
  void Pin(const std::vector<uint64_t>& runs);
  Result<std::vector<RunFileInfo>> SyncRuns();
  void Commit();
  void Unpin();
  void ReleaseAll();
  // Removes every run in `dir` (a start that does not use a window).
  static Status RemoveAll(store::FileSystem& fs, const std::string& dir);
  uint64_t epoch() const { return epoch_; }
  uint64_t next_run() const { return next_; }
  // Takes over the runs a checkpoint names (an earlier process's `epoch`):
  // each must be there, whole, with its header. Errors (nothing taken):
  // kInternal naming the file and what is wrong; the file system's. Call
  // before any Write.
  Status Adopt(uint64_t epoch, uint64_t next_run, const std::vector<RunFileInfo>& runs);
  // Lets go of the runs adopted (not used after all): RemoveOthers removes
  // them; runs written from now on take a new epoch, as at Open.
  void Forget();

 private:
  IndexFiles(std::string dir, std::shared_ptr<store::FileSystem> fs);
  uint64_t BlockChecksum(const char* data, size_t n, uint64_t run, uint64_t block) const;
  void WriterLoop();
  // Sorts and writes one run; the file, or why not.
  Result<std::unique_ptr<store::File>> WriteRun(uint64_t run, std::vector<engine::FarEntry>& e);

  struct RunFile {
    std::unique_ptr<store::File> file;  // null while being written, or if that failed
    uint64_t entries = 0;
    bool written = false;
    // A run whose write failed (a full disk) is kept here, sorted, and read
    // from memory: an index is not lost for want of space.
    std::vector<engine::FarEntry> memory;
    // Used up (Remove): goes once written, and no checkpoint holds it.
    bool removed = false;
  };
  // Whether the run is named by the checkpoint on disk or the one being
  // written. REQUIRES: mu_.
  bool Held(uint64_t run) const { return committed_.count(run) != 0 || pending_.count(run) != 0; }
  // Removes the run's file and entry if it is used up, written and not
  // held. REQUIRES: mu_.
  void DropIfDone(std::map<uint64_t, RunFile>::iterator it);
  // Every used-up run that nothing holds any more. REQUIRES: mu_.
  void DropDone();
  const std::string dir_;
  const std::shared_ptr<store::FileSystem> fs_;
  uint64_t next_ = 1;
  uint64_t epoch_ = 0;    // in this process's run names
  std::string read_buf_;  // the owner's

  std::mutex mu_;
  std::condition_variable written_cv_;
  std::condition_variable work_cv_;
  std::map<uint64_t, RunFile> runs_;                                      // GUARDED_BY(mu_)
  std::deque<std::pair<uint64_t, std::vector<engine::FarEntry>>> queue_;  // GUARDED_BY(mu_)
  bool stop_ = false;                                                     // GUARDED_BY(mu_)
  bool keep_ = false;                                                     // GUARDED_BY(mu_): Keep
  std::set<uint64_t> committed_;  // GUARDED_BY(mu_): named by the checkpoint on disk
  std::set<uint64_t> pending_;    // GUARDED_BY(mu_): by the one being written
  std::thread writer_;
};

}  // namespace delayq::far

#endif  // DELAYQ_FAR_INDEX_FILES_H_
