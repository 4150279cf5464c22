// FileSystem: every file operation the embedded store makes, behind one
// interface, so tests can wrap the real one and inject failures (short
// writes, ENOSPC, fsync errors, a crash at a chosen operation).
//
// Errors carry the path and strerror text; kUnavailable for every I/O error.
#ifndef DELAYQ_LOG_FILE_H_
#define DELAYQ_LOG_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "delayq/status.h"

namespace delayq::store {

// An open file. Not thread-safe, except that Sync and WriteZeros may run on
// other threads while Append runs (the store's sync and prepare threads), as
// long as WriteZeros and Append never cover the same bytes at once.
class File {
 public:
  virtual ~File() = default;
  // Writes at the write position and moves it on. Returns the bytes
  // written: fewer than `n` only together with an error status (a short
  // write), reported by `error`. The position starts at the file's end.
  virtual size_t Append(const char* data, size_t n, Status* error) = 0;
  // Moves the write position (a reused file is written from its start).
  virtual void SetWritePosition(uint64_t offset) = 0;
  // Writes n zero bytes at `offset` without moving the write position: space
  // made ready ahead of the appends (see store::Log, "Preparing space").
  virtual Status WriteZeros(uint64_t offset, uint64_t n) = 0;
  // fdatasync(2).
  virtual Status Sync() = 0;
  // Reads up to n bytes at `offset`; fewer only at the end of the file.
  virtual Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) = 0;
  // Cuts the file to `size` bytes (and syncs).
  virtual Status Truncate(uint64_t size) = 0;
  virtual Result<uint64_t> Size() = 0;
  virtual const std::string& path() const = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Opens for appending and reading; creates when `create` (failing if it
  // exists), else it must exist.
  virtual Result<std::unique_ptr<File>> Open(const std::string& path, bool create) = 0;
  virtual Status Remove(const std::string& path) = 0;
  // rename(2): replaces `to` if it exists.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Names (not paths) of the entries of `dir`, unsorted.
  virtual Result<std::vector<std::string>> List(const std::string& dir) = 0;
  // fsync(2) of the directory: makes creations and removals in it durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // Creates `dir` and missing parents (mode 0755); fine if it exists.
  virtual Status CreateDir(const std::string& dir) = 0;
  // Takes an exclusive lock on the directory `path` itself (flock(2) on the
  // directory) for the life of the returned file: a second store on the
  // same directory is refused. The directory, not a file in it: a file can
  // be deleted or replaced under its holder, and a second store would then
  // lock the new one and write the same log.
  virtual Result<std::unique_ptr<File>> Lock(const std::string& path) = 0;
};

// The real one: POSIX calls on local files.
std::shared_ptr<FileSystem> PosixFileSystem();

}  // namespace delayq::store

#endif  // DELAYQ_LOG_FILE_H_
