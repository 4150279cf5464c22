// IndexFiles: the sealed runs of the far jobs' time index (engine::FarSet),
// one file each in <data_dir>/far/, read back a block at a time as the
// runs are consumed. Format: docs/log-format.md, "Far-future index runs".
//
// A run describes this process's slots, so a run is only read by the
// process that wrote it: at open, runs left by an earlier one are removed
// (replay places every far job again), and no run is fsynced (a crash that
// loses one loses the process that could read it).
//
// Thread-safety: none; one owner (the queue's mutex).
#ifndef DELAYQ_FAR_INDEX_FILES_H_
#define DELAYQ_FAR_INDEX_FILES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>

#include "delayq/status.h"
#include "engine/far_set.h"
#include "log/file.h"

namespace delayq::far {

inline constexpr std::string_view kRunMagic = "DQFARIDX";
inline constexpr uint32_t kRunVersion = 1;
inline constexpr size_t kRunHeaderBytes = 32;
inline constexpr size_t kEntryBytes = 24;
inline constexpr size_t kBlockEntries = 4096;

class IndexFiles final : public engine::FarIndexFiles {
 public:
  // Creates `dir` if missing and removes the runs an earlier process left
  // in it. Errors: kUnavailable (the path and the system's reason).
  static Result<std::unique_ptr<IndexFiles>> Open(const std::string& dir,
                                                  std::shared_ptr<store::FileSystem> fs);

  Result<uint64_t> Write(std::span<const engine::FarEntry> entries) override;
  Result<size_t> Read(uint64_t run, uint64_t from, std::span<engine::FarEntry> out) override;
  void Remove(uint64_t run) override;

  static std::string RunName(uint64_t run);

 private:
  IndexFiles(std::string dir, std::shared_ptr<store::FileSystem> fs)
      : dir_(std::move(dir)), fs_(std::move(fs)) {}
  static uint64_t BlockChecksum(const char* data, size_t n, uint64_t run, uint64_t block);

  struct RunFile {
    std::unique_ptr<store::File> file;
    uint64_t entries = 0;
  };
  std::string dir_;
  std::shared_ptr<store::FileSystem> fs_;
  std::map<uint64_t, RunFile> runs_;
  uint64_t next_ = 1;
  std::string buf_;
};

}  // namespace delayq::far

#endif  // DELAYQ_FAR_INDEX_FILES_H_
