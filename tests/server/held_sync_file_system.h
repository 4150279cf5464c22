// HeldSyncFileSystem: the real file system, except that while `Hold()` is in
// force every fdatasync (File::Sync) blocks until the test lets it go —
// `Release()` (it then succeeds) or `Fail()` (it then fails with EIO, as a
// dying disk's fdatasync does). For the reply gate's tests: a reply that
// waits for its change to be durable must not leave while the sync that
// makes it so has not returned, however long that is — no sleeps, no races
// with a delay.
//
// Everything else (appends, prepared zeros, directory syncs) goes straight to
// the real file system.
#ifndef DELAYQ_TESTS_SERVER_HELD_SYNC_FILE_SYSTEM_H_
#define DELAYQ_TESTS_SERVER_HELD_SYNC_FILE_SYSTEM_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "log/file.h"

namespace delayq::server::testing {

class HeldSyncFileSystem final : public store::FileSystem {
 public:
  // From now on, syncs block until Release or Fail.
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    holding_ = true;
    failing_ = false;
  }
  // Lets the held syncs (and later ones) run and succeed.
  void Release() { Let(/*fail=*/false); }
  // Lets the held syncs (and later ones) return EIO without syncing.
  void Fail() { Let(/*fail=*/true); }
  // Syncs blocked now.
  int held() const {
    std::lock_guard<std::mutex> lock(mu_);
    return blocked_;
  }
  // Waits up to `timeout` for a sync to block; false if none did.
  bool WaitHeld(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return blocked_ > 0; });
  }

  Result<std::unique_ptr<store::File>> Open(const std::string& path, bool create) override {
    auto f = real_->Open(path, create);
    if (!f.ok()) return f.status();
    return std::unique_ptr<store::File>(new HeldFile(this, std::move(f).value()));
  }
  Status Remove(const std::string& path) override { return real_->Remove(path); }
  Status Rename(const std::string& from, const std::string& to) override {
    return real_->Rename(from, to);
  }
  Result<std::vector<std::string>> List(const std::string& dir) override {
    return real_->List(dir);
  }
  Status SyncDir(const std::string& dir) override { return real_->SyncDir(dir); }
  Status CreateDir(const std::string& dir) override { return real_->CreateDir(dir); }
  Result<std::unique_ptr<store::File>> Lock(const std::string& path) override {
    return real_->Lock(path);
  }

 private:
  void Let(bool fail) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      holding_ = false;
      failing_ = fail;
    }
    cv_.notify_all();
  }
  // Blocks while held; true if the sync is to fail.
  bool Gate() {
    std::unique_lock<std::mutex> lock(mu_);
    if (holding_) {
      ++blocked_;
      cv_.notify_all();
      cv_.wait(lock, [this] { return !holding_; });
      --blocked_;
    }
    return failing_;
  }

  class HeldFile final : public store::File {
   public:
    HeldFile(HeldSyncFileSystem* fs, std::unique_ptr<store::File> f) : fs_(fs), f_(std::move(f)) {}
    size_t Append(const char* data, size_t n, Status* error) override {
      return f_->Append(data, n, error);
    }
    void SetWritePosition(uint64_t offset) override { f_->SetWritePosition(offset); }
    Status WriteZeros(uint64_t offset, uint64_t n) override { return f_->WriteZeros(offset, n); }
    Status Sync() override {
      if (fs_->Gate()) return Unavailable("fdatasync: Input/output error");
      return f_->Sync();
    }
    Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) override {
      return f_->ReadAt(offset, buf, n);
    }
    Status Truncate(uint64_t size) override { return f_->Truncate(size); }
    Result<uint64_t> Size() override { return f_->Size(); }
    const std::string& path() const override { return f_->path(); }

   private:
    HeldSyncFileSystem* fs_;
    std::unique_ptr<store::File> f_;
  };

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool holding_ = false;
  bool failing_ = false;
  int blocked_ = 0;
  std::shared_ptr<store::FileSystem> real_ = store::PosixFileSystem();
};

}  // namespace delayq::server::testing

#endif  // DELAYQ_TESTS_SERVER_HELD_SYNC_FILE_SYSTEM_H_
