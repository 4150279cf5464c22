#include "far/index_files.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <random>

#include "common/log.h"

namespace delayq::far {
namespace {

void PutU32(uint32_t v, char* p) { std::memcpy(p, &v, 4); }  // little-endian hosts only
void PutU64(uint64_t v, char* p) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

static_assert(std::endian::native == std::endian::little, "runs are written little-endian");

Result<std::unique_ptr<IndexFiles>> IndexFiles::Open(const std::string& dir,
                                                     std::shared_ptr<store::FileSystem> fs) {
  if (!fs) fs = store::PosixFileSystem();
  if (Status s = fs->CreateDir(dir); !s.ok()) return s;
  return std::unique_ptr<IndexFiles>(new IndexFiles(dir, std::move(fs)));
}

Status IndexFiles::RemoveOthers() {
  auto names = fs_->List(dir_);
  if (!names.ok()) return names.status();
  std::set<std::string> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [run, r] : runs_) mine.insert(RunName(run));
  }
  for (const std::string& n : *names) {
    if (n.rfind("run-", 0) == 0 && mine.count(n) == 0) {
      if (Status s = fs_->Remove(dir_ + "/" + n); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

Status IndexFiles::RemoveAll(store::FileSystem& fs, const std::string& dir) {
  auto names = fs.List(dir);
  if (!names.ok()) return Status::Ok();  // no directory: no runs
  for (const std::string& n : *names) {
    if (n.rfind("run-", 0) != 0) continue;
    std::string path = dir;
    path += '/';
    path += n;
    if (Status s = fs.Remove(path); !s.ok()) return s;
  }
  return Status::Ok();
}

Result<std::vector<IndexFiles::RunFileInfo>> IndexFiles::Sync() {
  std::vector<RunFileInfo> out;
  std::unique_lock<std::mutex> lock(mu_);
  written_cv_.wait(lock, [&] {
    if (!queue_.empty()) return false;
    for (const auto& [run, r] : runs_) {
      if (!r.written) return false;
    }
    return true;
  });
  for (const auto& [run, r] : runs_) {
    if (r.removed) continue;  // used up, kept for the checkpoint on disk
    if (r.file == nullptr) {
      return Unavailable("far-future index: run " + std::to_string(run) +
                         " is kept in memory (its write failed)");
    }
    if (Status s = r.file->Sync(); !s.ok()) return s;
    out.push_back(RunFileInfo{run, r.entries});
  }
  if (Status s = fs_->SyncDir(dir_); !s.ok()) return s;
  return out;
}

Status IndexFiles::Adopt(uint64_t epoch, uint64_t next_run, const std::vector<RunFileInfo>& runs) {
  std::map<uint64_t, RunFile> adopted;
  uint64_t saved = epoch_;
  epoch_ = epoch;  // for RunName and the checks below; put back on failure
  auto fail = [&](Status s) {
    epoch_ = saved;
    return s;
  };
  for (const RunFileInfo& info : runs) {
    if (info.run == 0 || info.run >= next_run) {
      return fail(
          Internal("far-future checkpoint: run " + std::to_string(info.run) + " is out of range"));
    }
    std::string path = dir_ + "/" + RunName(info.run);
    auto file = fs_->Open(path, /*create=*/false);
    if (!file.ok()) return fail(file.status());
    uint64_t blocks = (info.entries + kBlockEntries - 1) / kBlockEntries;
    uint64_t want = kRunHeaderBytes + info.entries * kEntryBytes + blocks * 8;
    auto size = (*file)->Size();
    if (!size.ok()) return fail(size.status());
    std::string header(kRunHeaderBytes, '\0');
    auto got = (*file)->ReadAt(0, header.data(), header.size());
    if (!got.ok()) return fail(got.status());
    std::string what;
    if (*size != want) {
      what = "holds " + std::to_string(*size) + " bytes, not " + std::to_string(want);
    } else if (*got < kRunHeaderBytes || header.compare(0, kRunMagic.size(), kRunMagic) != 0) {
      what = "is not a run of the far-future index";
    } else if (GetU32(header.data() + 8) != kRunVersion) {
      what = "has version " + std::to_string(GetU32(header.data() + 8));
    } else if (GetU64(header.data() + 16) != info.run ||
               GetU64(header.data() + 24) != info.entries || GetU64(header.data() + 32) != epoch) {
      what = "is another run (its header names another)";
    }
    if (!what.empty()) {
      std::string message = "far-future index: " + path;
      message += ' ';
      message += what;
      return fail(Internal(message));
    }
    RunFile& r = adopted[info.run];
    r.file = std::move(file).value();
    r.entries = info.entries;
    r.written = true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  runs_ = std::move(adopted);
  // The checkpoint stays on disk and names them.
  committed_.clear();
  for (const auto& [run, r] : runs_) committed_.insert(run);
  next_ = std::max(next_, next_run);
  return Status::Ok();
}

void IndexFiles::Forget() {
  std::lock_guard<std::mutex> lock(mu_);
  runs_.clear();
  committed_.clear();
  // Runs from now on are this process's own again: names no run an
  // earlier one left can have (those go with RemoveOthers).
  epoch_ = std::random_device{}() | uint64_t{std::random_device{}()} << 32;
  next_ = 1;
}

IndexFiles::IndexFiles(std::string dir, std::shared_ptr<store::FileSystem> fs)
    : dir_(std::move(dir)),
      fs_(std::move(fs)),
      epoch_(std::random_device{}() | uint64_t{std::random_device{}()} << 32) {
  writer_ = std::thread([this] { WriterLoop(); });
}

IndexFiles::~IndexFiles() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  work_cv_.notify_all();
  writer_.join();
  if (keep_) return;  // a checkpoint names them
  for (auto& [run, r] : runs_) {
    if (committed_.count(run) != 0) continue;  // the checkpoint on disk names it
    if (r.file != nullptr) {
      std::string path = r.file->path();
      r.file.reset();
      (void)fs_->Remove(path);
    }
  }
}

std::string IndexFiles::RunName(uint64_t run) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "run-%016llx-%016llx.dq", static_cast<unsigned long long>(epoch_),
                static_cast<unsigned long long>(run));
  return buf;
}

uint64_t IndexFiles::BlockChecksum(const char* data, size_t n, uint64_t run, uint64_t block) const {
  // Seeded by where the block belongs: a block of another run, or of a run
  // of another process (epoch), does not check out.
  return XXH3_64bits_withSeed(data, n, epoch_ * 0x9E3779B97F4A7C15ull + run * 1'000'003 + block);
}

uint64_t IndexFiles::Write(std::vector<engine::FarEntry> entries) {
  uint64_t run = next_++;
  {
    std::lock_guard<std::mutex> lock(mu_);
    runs_[run].entries = entries.size();
    queue_.emplace_back(run, std::move(entries));
  }
  work_cv_.notify_one();
  return run;
}

void IndexFiles::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    auto [run, entries] = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    auto file = WriteRun(run, entries);
    if (!file.ok()) {
      ::delayq::Log(LogLevel::kError,
                    "far-future index: %s; its run of %zu entries stays in memory",
                    file.status().message().c_str(), entries.size());
    }
    lock.lock();
    RunFile& r = runs_[run];
    r.written = true;
    if (file.ok()) {
      r.file = std::move(file).value();
      entries = {};  // its memory back before the next
    } else {
      r.memory = std::move(entries);
    }
    DropIfDone(runs_.find(run));
    written_cv_.notify_all();
  }
}

Result<std::unique_ptr<store::File>> IndexFiles::WriteRun(uint64_t run,
                                                          std::vector<engine::FarEntry>& entries) {
  std::sort(entries.begin(), entries.end(), engine::EntryBefore);
  std::string path = dir_ + "/" + RunName(run);
  auto file = fs_->Open(path, /*create=*/true);
  if (!file.ok()) return file.status();
  std::string buf(kRunHeaderBytes, '\0');
  std::memcpy(buf.data(), kRunMagic.data(), kRunMagic.size());
  PutU32(kRunVersion, buf.data() + 8);
  PutU64(run, buf.data() + 16);
  PutU64(entries.size(), buf.data() + 24);
  PutU64(epoch_, buf.data() + 32);
  // Block by block: the entries' bytes as they are in memory (24 bytes,
  // little-endian, no padding), then the block's checksum.
  static_assert(sizeof(engine::FarEntry) == kEntryBytes);
  Status error;
  for (size_t at = 0, block = 0; at < entries.size(); at += kBlockEntries, ++block) {
    size_t n = std::min(kBlockEntries, entries.size() - at);
    size_t start = buf.size();
    buf.resize(start + n * kEntryBytes + 8);
    std::memcpy(buf.data() + start, &entries[at], n * kEntryBytes);
    PutU64(BlockChecksum(buf.data() + start, n * kEntryBytes, run, block),
           buf.data() + start + n * kEntryBytes);
    if (buf.size() >= (4u << 20) || at + n == entries.size()) {
      if ((*file)->Append(buf.data(), buf.size(), &error) < buf.size()) {
        (void)fs_->Remove(path);
        return error;
      }
      buf.clear();
    }
  }
  if (entries.empty() && (*file)->Append(buf.data(), buf.size(), &error) < buf.size()) {
    (void)fs_->Remove(path);
    return error;
  }
  return std::move(file).value();
}

Result<size_t> IndexFiles::Read(uint64_t run, uint64_t from, std::span<engine::FarEntry> out) {
  store::File* file = nullptr;
  uint64_t entries = 0;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = runs_.find(run);
    if (it == runs_.end()) {
      return Internal("far-future index: run " + std::to_string(run) + " is gone");
    }
    written_cv_.wait(lock, [&] { return it->second.written; });
    file = it->second.file.get();
    entries = it->second.entries;
    if (file == nullptr) {  // kept in memory
      const std::vector<engine::FarEntry>& m = it->second.memory;
      if (from >= m.size()) return size_t{0};
      size_t count = std::min<size_t>(out.size(), m.size() - static_cast<size_t>(from));
      std::copy_n(m.begin() + static_cast<ptrdiff_t>(from), count, out.begin());
      return count;
    }
  }
  // The file is the owner's from here: only Remove (the owner's) ends it.
  if (from >= entries || out.empty()) return size_t{0};
  uint64_t block = from / kBlockEntries;
  size_t n =
      static_cast<size_t>(std::min<uint64_t>(kBlockEntries, entries - block * kBlockEntries));
  uint64_t offset = kRunHeaderBytes + block * (kBlockEntries * kEntryBytes + 8);
  read_buf_.resize(n * kEntryBytes + 8);
  auto got = file->ReadAt(offset, read_buf_.data(), read_buf_.size());
  if (!got.ok()) return got.status();
  if (*got < read_buf_.size() || GetU64(read_buf_.data() + n * kEntryBytes) !=
                                     BlockChecksum(read_buf_.data(), n * kEntryBytes, run, block)) {
    return Internal("far-future index: " + file->path() + ": block " + std::to_string(block) +
                    (*got < read_buf_.size() ? " is cut short" : " does not match its checksum"));
  }
  size_t first = static_cast<size_t>(from - block * kBlockEntries);
  size_t count = std::min(out.size(), n - first);
  std::memcpy(out.data(), read_buf_.data() + first * kEntryBytes, count * kEntryBytes);
  return count;
}

void IndexFiles::Remove(uint64_t run) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = runs_.find(run);
  if (it == runs_.end()) return;
  it->second.removed = true;
  DropIfDone(it);
}

void IndexFiles::DropIfDone(std::map<uint64_t, RunFile>::iterator it) {
  if (it == runs_.end() || !it->second.removed || !it->second.written || Held(it->first)) return;
  if (it->second.file != nullptr) (void)fs_->Remove(it->second.file->path());
  runs_.erase(it);
}

void IndexFiles::DropDone() {
  for (auto it = runs_.begin(); it != runs_.end();) DropIfDone(it++);
}

void IndexFiles::Pin(const std::vector<uint64_t>& runs) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.clear();
  for (uint64_t run : runs) {
    if (runs_.count(run) != 0) pending_.insert(run);
  }
}

Result<std::vector<IndexFiles::RunFileInfo>> IndexFiles::SyncRuns() {
  std::vector<RunFileInfo> out;
  std::vector<store::File*> files;
  {
    std::unique_lock<std::mutex> lock(mu_);
    for (uint64_t run : pending_) {
      auto it = runs_.find(run);  // held: still there
      written_cv_.wait(lock, [&] { return it->second.written || stop_; });
      if (it->second.file == nullptr) {
        return Unavailable("far-future index: run " + std::to_string(run) +
                           " is kept in memory (its write failed)");
      }
      files.push_back(it->second.file.get());
      out.push_back(RunFileInfo{run, it->second.entries});
    }
  }
  // Held: the files stay open until Commit or Unpin, which only the
  // checkpoint's owner calls after this.
  for (store::File* f : files) {
    if (Status s = f->Sync(); !s.ok()) return s;
  }
  if (Status s = fs_->SyncDir(dir_); !s.ok()) return s;
  return out;
}

void IndexFiles::Commit() {
  std::lock_guard<std::mutex> lock(mu_);
  committed_ = std::move(pending_);
  pending_.clear();
  DropDone();
}

void IndexFiles::Unpin() {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.clear();
  DropDone();
}

void IndexFiles::ReleaseAll() {
  std::lock_guard<std::mutex> lock(mu_);
  committed_.clear();
  pending_.clear();
  DropDone();
}

}  // namespace delayq::far
