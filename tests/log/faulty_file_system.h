// FaultyFileSystem: the real file system with failures injected at chosen
// points, for the store's tests. A "point" is every Append, Sync and SyncDir,
// counted from 1 across all files (not WriteZeros: see there).
//
//   crash_at = N   at point N the process "dies": an Append writes only
//                  `torn_bytes` of its data (a torn write), a Sync does
//                  nothing, and every later operation writes nothing and
//                  fails, as if the process were gone (what reached the file
//                  before stays, as the page cache keeps it on a real crash)
//   full           the disk is full, until it is cleared: what grows a file
//                  fails with ENOSPC (an Append past the file's size writes
//                  what fits in it plus `torn_bytes` at most; WriteZeros past
//                  it writes nothing), while writes over space a file already
//                  has succeed, as on a real file system
//   fail_writes    every Append writes `torn_bytes` at most, then fails with
//                  EIO, until it is cleared: a failing device
//   fail_sync      every Sync fails with EIO
//   sync_delay_us  every Sync takes this much longer: a slow disk
// It also keeps the thread of the last Sync (last_sync_thread).
#ifndef DELAYQ_TESTS_LOG_FAULTY_FILE_SYSTEM_H_
#define DELAYQ_TESTS_LOG_FAULTY_FILE_SYSTEM_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "log/file.h"

namespace delayq::store {

class FaultyFileSystem final : public FileSystem {
 public:
  std::atomic<uint64_t> points{0};
  std::atomic<uint64_t> crash_at{0};  // 0: never
  std::atomic<size_t> torn_bytes{0};
  std::atomic<bool> full{false};
  std::atomic<bool> fail_writes{false};
  std::atomic<bool> fail_sync{false};
  std::atomic<bool> crashed{false};
  std::atomic<int64_t> sync_delay_us{0};
  std::atomic<std::thread::id> last_sync_thread{};

  Result<std::unique_ptr<File>> Open(const std::string& path, bool create) override {
    if (crashed) return Unavailable("crashed");
    auto f = real_->Open(path, create);
    if (!f.ok()) return f.status();
    return std::unique_ptr<File>(new FaultyFile(this, std::move(f).value()));
  }
  Status Remove(const std::string& path) override {
    if (crashed) return Unavailable("crashed");
    return real_->Remove(path);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (crashed) return Unavailable("crashed");
    return real_->Rename(from, to);
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    return real_->List(dir);
  }
  Status SyncDir(const std::string& dir) override {
    if (Point() || crashed) return Unavailable("crashed");
    return real_->SyncDir(dir);
  }
  Status CreateDir(const std::string& dir) override { return real_->CreateDir(dir); }
  Result<std::unique_ptr<File>> Lock(const std::string& path) override { return real_->Lock(path); }

 private:
  // Counts a point; true if the crash happens at it.
  bool Point() {
    uint64_t n = ++points;
    if (crash_at != 0 && n == crash_at) {
      crashed = true;
      return true;
    }
    return false;
  }

  class FaultyFile final : public File {
   public:
    static uint64_t SizeOf(File& f) {
      auto size = f.Size();
      return size.ok() ? *size : 0;
    }
    FaultyFile(FaultyFileSystem* fs, std::unique_ptr<File> f)
        : fs_(fs), f_(std::move(f)), pos_(SizeOf(*f_)) {}
    size_t Append(const char* data, size_t n, Status* error) override {
      bool crash_now = fs_->Point();
      size_t room = n;  // what may be written before the failure
      if (crash_now || fs_->fail_writes) {
        room = 0;
      } else if (fs_->full) {
        uint64_t size = SizeOf(*f_);
        room = size > pos_ ? static_cast<size_t>(std::min<uint64_t>(n, size - pos_)) : 0;
      }
      if (room < n) {
        size_t part = std::min(n, room + fs_->torn_bytes.load());
        size_t done = part == 0 ? 0 : f_->Append(data, part, error);
        pos_ += done;
        *error = crash_now   ? Unavailable("crashed")
                 : fs_->full ? Unavailable("write: No space left on device")
                             : Unavailable("write: Input/output error");
        return done;
      }
      if (fs_->crashed) {
        *error = Unavailable("crashed");
        return 0;
      }
      size_t done = f_->Append(data, n, error);
      pos_ += done;
      return done;
    }
    void SetWritePosition(uint64_t offset) override {
      f_->SetWritePosition(offset);
      pos_ = offset;
    }
    // Not a point: zeros prepared ahead hold nothing acknowledged, and the
    // log's thread writes them at times no test can count on.
    Status WriteZeros(uint64_t offset, uint64_t n) override {
      if (fs_->crashed) return Unavailable("crashed");
      if (fs_->full && offset + n > SizeOf(*f_)) {
        return Unavailable("write: No space left on device");
      }
      return f_->WriteZeros(offset, n);
    }
    Status Sync() override {
      fs_->last_sync_thread = std::this_thread::get_id();
      if (int64_t us = fs_->sync_delay_us; us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(us));  // the disk, not a test's wait
      }
      if (fs_->Point() || fs_->crashed) return Unavailable("crashed");
      if (fs_->fail_sync) return Unavailable("fdatasync: Input/output error");
      return f_->Sync();
    }
    Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) override {
      return f_->ReadAt(offset, buf, n);
    }
    Status Truncate(uint64_t size) override {
      if (fs_->crashed) return Unavailable("crashed");
      return f_->Truncate(size);
    }
    Result<uint64_t> Size() override { return f_->Size(); }
    const std::string& path() const override { return f_->path(); }

   private:
    FaultyFileSystem* fs_;
    std::unique_ptr<File> f_;
    uint64_t pos_;  // the write position (File's starts at the end)
  };

  std::shared_ptr<FileSystem> real_ = PosixFileSystem();
};

}  // namespace delayq::store

#endif  // DELAYQ_TESTS_LOG_FAULTY_FILE_SYSTEM_H_
