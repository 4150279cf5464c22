#include "store/log.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "common/log.h"

namespace delayq::store {
namespace {

constexpr std::string_view kSegmentPrefix = "log-";
constexpr std::string_view kSegmentSuffix = ".dq";
constexpr size_t kReadChunk = 4 << 20;
constexpr int64_t kRetryWriteMs = 100;

int64_t MonoMs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

// "log-0000000000000001.dq" -> 1; 0 for anything else.
uint64_t ParseSegmentName(const std::string& name) {
  if (name.size() != kSegmentPrefix.size() + 16 + kSegmentSuffix.size()) return 0;
  if (name.compare(0, kSegmentPrefix.size(), kSegmentPrefix) != 0) return 0;
  if (name.compare(name.size() - kSegmentSuffix.size(), kSegmentSuffix.size(), kSegmentSuffix) !=
      0) {
    return 0;
  }
  uint64_t v = 0;
  for (size_t i = kSegmentPrefix.size(); i < kSegmentPrefix.size() + 16; ++i) {
    char c = name[i];
    if (c >= '0' && c <= '9') {
      v = v * 16 + static_cast<uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      v = v * 16 + static_cast<uint64_t>(c - 'a' + 10);
    } else {
      return 0;
    }
  }
  return v;
}

}  // namespace

bool ParseFsyncPolicy(std::string_view name, FsyncPolicy* policy) {
  if (name == "always") {
    *policy = FsyncPolicy::kAlways;
  } else if (name == "everysec") {
    *policy = FsyncPolicy::kEverySec;
  } else if (name == "never") {
    *policy = FsyncPolicy::kNever;
  } else {
    return false;
  }
  return true;
}

std::string_view FsyncPolicyName(FsyncPolicy policy) {
  switch (policy) {
    case FsyncPolicy::kAlways:
      return "always";
    case FsyncPolicy::kEverySec:
      return "everysec";
    case FsyncPolicy::kNever:
      return "never";
  }
  return "?";
}

std::string Log::SegmentName(uint64_t number) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(number));
  return std::string(kSegmentPrefix) + buf + std::string(kSegmentSuffix);
}

Log::Log(const LogOptions& options)
    : options_(options),
      policy_(options.fsync),
      fs_(options.fs ? options.fs : PosixFileSystem()) {}

Result<std::unique_ptr<Log>> Log::Open(const LogOptions& options, const Replay& replay,
                                       RecoveryReport* report) {
  if (options.dir.empty()) return InvalidArgument("data directory: must not be empty");
  std::unique_ptr<Log> log(new Log(options));
  if (Status s = log->fs_->CreateDir(options.dir); !s.ok()) return s;
  auto lock = log->fs_->Lock(options.dir + "/LOCK");
  if (!lock.ok()) return lock.status();
  log->lock_ = std::move(lock).value();
  log->notify_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (log->notify_fd_ < 0) return Internal("log: cannot create an eventfd");
  *report = RecoveryReport{};
  if (Status s = log->Recover(replay, report); !s.ok()) return s;
  uint64_t next = log->segments_.empty() ? 1 : log->segments_.back().number + 1;
  if (Status s = log->StartSegment(next); !s.ok()) return s;
  log->sync_thread_ = std::thread([l = log.get()] { l->SyncLoop(); });
  return log;
}

Log::~Log() {
  if (sync_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(io_mu_);
      (void)WriteOutLocked();
    }
    {
      std::lock_guard<std::mutex> lock(sync_mu_);
      stop_ = true;
    }
    sync_cv_.notify_all();
    sync_thread_.join();
    std::shared_ptr<File> file;
    {
      std::lock_guard<std::mutex> lock(seg_mu_);
      if (!segments_.empty()) file = segments_.back().file;
    }
    if (file && !failed() && written() > synced()) (void)file->Sync();
  }
  if (notify_fd_ >= 0) close(notify_fd_);
}

// --- recovery ------------------------------------------------------------------

Status Log::Recover(const Replay& replay, RecoveryReport* report) {
  auto names = fs_->List(options_.dir);
  if (!names.ok()) return names.status();
  std::vector<uint64_t> numbers;
  for (const std::string& name : *names) {
    if (uint64_t n = ParseSegmentName(name); n != 0) numbers.push_back(n);
  }
  std::sort(numbers.begin(), numbers.end());
  for (size_t i = 0; i < numbers.size(); ++i) {
    Segment seg;
    seg.number = numbers[i];
    seg.path = options_.dir + "/" + SegmentName(seg.number);
    bool newest = i + 1 == numbers.size();
    if (Status s = ReplaySegment(seg, newest, replay, report); !s.ok()) return s;
    if (seg.bytes == 0) continue;  // a newest segment torn before its header: removed
    ++report->segments;
    disk_bytes_ += seg.bytes;
    segments_.push_back(std::move(seg));
  }
  return Status::Ok();
}

Status Log::ReplaySegment(Segment& seg, bool newest, const Replay& replay,
                          RecoveryReport* report) {
  auto opened = fs_->Open(seg.path, /*create=*/false);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<File> file = std::move(opened).value();
  auto size = file->Size();
  if (!size.ok()) return size.status();
  auto damage = [&](uint64_t offset, const std::string& what) {
    return Internal("log segment " + seg.path + " is damaged at byte " + std::to_string(offset) +
                    ": " + what +
                    ". Later segments depend on it, so delayq will not start on a guess; see "
                    "docs/log-format.md, \"Damage\"");
  };
  // Cuts a torn end of the newest segment back to its last whole record.
  auto cut = [&](uint64_t offset, const std::string& why) -> Status {
    report->torn_bytes += *size - offset;
    report->torn_reason = why;
    ::delayq::Log(LogLevel::kWarn, "log: %s ends in %llu bytes that are not a whole record (%s): cut off",
        seg.path.c_str(), static_cast<unsigned long long>(*size - offset), why.c_str());
    if (offset < kSegmentHeaderBytes) {
      file.reset();
      seg.bytes = 0;
      return fs_->Remove(seg.path);
    }
    seg.bytes = offset;
    return file->Truncate(offset);
  };

  std::string header(kSegmentHeaderBytes, '\0');
  auto got = file->ReadAt(0, header.data(), header.size());
  if (!got.ok()) return got.status();
  if (*got < kSegmentHeaderBytes) {
    if (newest) return cut(0, "segment header cut short");
    return damage(0, "segment header cut short");
  }
  SegmentHeader h;
  if (Status s = DecodeSegmentHeader(header, &h); !s.ok()) return damage(0, s.message());
  if (h.number != seg.number) return damage(0, "header names segment " + std::to_string(h.number));
  last_seq_ = std::max(last_seq_, h.last_seq);

  std::string buf;
  size_t pos = 0;                     // in buf
  uint64_t base = kSegmentHeaderBytes;  // file offset of buf[0]
  bool eof = false;
  for (;;) {
    Record rec;
    size_t rec_size = 0;
    std::string error;
    ReadOutcome outcome = ReadOutcome::kIncomplete;
    if (pos < buf.size()) {
      outcome = ReadRecord(std::string_view(buf).substr(pos), &rec, &rec_size, &error);
    }
    if (outcome == ReadOutcome::kRecord) {
      if (Status s = replay(rec); !s.ok()) return s;
      if (rec.type == RecordType::kPut) last_seq_ = std::max(last_seq_, rec.job.seq);
      ++report->records;
      pos += rec_size;
      continue;
    }
    if (outcome == ReadOutcome::kCorrupt) {
      if (newest) return cut(base + pos, error);
      return damage(base + pos, error);
    }
    // Incomplete: read more, or this is the end.
    if (eof) {
      if (pos == buf.size()) break;
      if (newest) return cut(base + pos, "last record cut short");
      return damage(base + pos, "last record cut short");
    }
    buf.erase(0, pos);
    base += pos;
    pos = 0;
    size_t want = kReadChunk;
    if (buf.size() >= 8) {  // a record longer than a chunk: read all of it
      uint32_t len = 0;
      for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(buf[4 + i]);
      if (len <= kMaxRecordLength && 8 + size_t{len} > buf.size() + want) {
        want = 8 + size_t{len} - buf.size();
      }
    }
    size_t old = buf.size();
    buf.resize(old + want);
    auto n = file->ReadAt(base + old, buf.data() + old, want);
    if (!n.ok()) return n.status();
    buf.resize(old + *n);
    if (*n < want) eof = true;
  }
  seg.bytes = *size;
  report->bytes += *size;
  return Status::Ok();
}

// --- writing -----------------------------------------------------------------------

Status Log::StartSegment(uint64_t number) {
  Segment seg;
  seg.number = number;
  seg.path = options_.dir + "/" + SegmentName(number);
  auto created = fs_->Open(seg.path, /*create=*/true);
  if (!created.ok()) return created.status();
  seg.file = std::move(created).value();
  std::string header;
  EncodeSegmentHeader(SegmentHeader{number, last_seq_}, &header);
  Status error;
  size_t n = seg.file->Append(header.data(), header.size(), &error);
  if (n != header.size()) {
    seg.file.reset();
    (void)fs_->Remove(seg.path);
    return error;
  }
  // The header and the directory entry are made durable now, so that a
  // segment which exists is always a readable one.
  if (Status s = seg.file->Sync(); !s.ok()) return s;
  if (Status s = fs_->SyncDir(options_.dir); !s.ok()) return s;
  seg.bytes = header.size();
  std::lock_guard<std::mutex> lock(seg_mu_);
  disk_bytes_ += seg.bytes;
  segments_.push_back(std::move(seg));
  return Status::Ok();
}

void Log::AppendPut(const engine::JobImage& job) {
  std::lock_guard<std::mutex> lock(buf_mu_);
  size_t before = buf_.size();
  EncodePut(job, &buf_);
  NoteSeq(job.seq);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::AppendRewrite(const engine::JobImage& job) {
  uint64_t before = end();
  AppendPut(job);
  rewritten_bytes_.fetch_add(end() - before, std::memory_order_relaxed);
}

void Log::AppendUpdate(const engine::JobImage& job) {
  std::lock_guard<std::mutex> lock(buf_mu_);
  size_t before = buf_.size();
  EncodeUpdate(job, &buf_);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::AppendRemove(std::string_view id, uint64_t seq) {
  std::lock_guard<std::mutex> lock(buf_mu_);
  size_t before = buf_.size();
  EncodeRemove(id, seq, &buf_);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::AppendPause(std::string_view topic, int64_t paused_until_ms) {
  std::lock_guard<std::mutex> lock(buf_mu_);
  size_t before = buf_.size();
  EncodePause(topic, paused_until_ms, &buf_);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

Status Log::WriteOut() {
  std::lock_guard<std::mutex> lock(io_mu_);
  return WriteOutLocked();
}

Status Log::WriteOutLocked() {
  if (failed()) return health();
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(buf_mu_);
    target = end();
    if (unwritten_.empty()) {
      unwritten_.swap(buf_);
    } else {
      unwritten_.append(buf_);
      buf_.clear();
    }
  }
  if (unwritten_.empty()) return Status::Ok();
  bool retrying = false;
  {
    std::lock_guard<std::mutex> lock(state_mu_);
    retrying = !write_error_.ok();
  }
  if (retrying && MonoMs() - last_failed_write_ms_ < kRetryWriteMs) return health();
  std::shared_ptr<File> file;
  {
    std::lock_guard<std::mutex> lock(seg_mu_);
    file = segments_.back().file;
  }
  Status error;
  size_t n = file->Append(unwritten_.data(), unwritten_.size(), &error);
  writes_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(seg_mu_);
    segments_.back().bytes += n;
    disk_bytes_ += n;
  }
  if (n < unwritten_.size()) {
    // Keep the rest; a record cut here is completed by the retry (the file
    // is append-only, so the bytes continue exactly where they stopped).
    unwritten_.erase(0, n);
    written_.store(target - unwritten_.size(), std::memory_order_release);
    last_failed_write_ms_ = MonoMs();
    std::lock_guard<std::mutex> lock(state_mu_);
    if (write_error_.ok()) {
      ::delayq::Log(LogLevel::kError, "log: %s; changes are refused until a write succeeds",
          error.message().c_str());
    }
    write_error_ = Unavailable("storage: " + error.message());
    return write_error_;
  }
  unwritten_.clear();
  written_.store(target, std::memory_order_release);
  if (retrying) {
    std::lock_guard<std::mutex> lock(state_mu_);
    write_error_ = Status::Ok();
    ::delayq::Log(LogLevel::kInfo, "log: writing again");
  }
  uint64_t seg_bytes;
  {
    std::lock_guard<std::mutex> lock(seg_mu_);
    seg_bytes = segments_.back().bytes;
  }
  if (seg_bytes >= options_.segment_bytes) {
    // Close the full segment: synced, so that only the newest can be torn.
    std::lock_guard<std::mutex> lock(rotate_mu_);  // not while the sync thread syncs it
    Status s = file->Sync();
    syncs_.fetch_add(1, std::memory_order_relaxed);
    if (!s.ok()) {
      std::lock_guard<std::mutex> state(state_mu_);
      sync_error_ = Unavailable("storage failed: " + s.message() + "; restart delayq");
      failed_.store(true, std::memory_order_release);
      ::delayq::Log(LogLevel::kError, "log: %s: no more changes are accepted", s.message().c_str());
      return sync_error_;
    }
    synced_.store(target, std::memory_order_release);
    uint64_t next;
    {
      std::lock_guard<std::mutex> seg(seg_mu_);
      next = segments_.back().number + 1;
    }
    // The old segment stays the newest until the new one exists.
    if (Status s2 = StartSegment(next); !s2.ok()) {
      std::lock_guard<std::mutex> state(state_mu_);
      write_error_ = Unavailable("storage: " + s2.message());
      return write_error_;
    }
    std::lock_guard<std::mutex> seg(seg_mu_);
    segments_[segments_.size() - 2].file.reset();
  }
  if (policy_ == FsyncPolicy::kAlways && synced() < target) {
    std::lock_guard<std::mutex> lock(sync_mu_);
    sync_requested_ = std::max(sync_requested_, target);
    sync_cv_.notify_one();
  }
  return Status::Ok();
}

void Log::RequestSync() {
  std::lock_guard<std::mutex> lock(sync_mu_);
  sync_requested_ = std::max(sync_requested_, written());
  sync_cv_.notify_one();
}

Status Log::WaitReleased(uint64_t pos) {
  for (;;) {
    if (released() >= pos) return Status::Ok();
    if (failed()) return health();
    if (written() < pos) {
      std::lock_guard<std::mutex> lock(io_mu_);
      if (written() < pos) {
        // The change stays in memory and is written once the disk lets us;
        // the caller cannot be told it is durable now.
        if (Status s = WriteOutLocked(); !s.ok()) return s;
      }
    }
    if (released() >= pos) return Status::Ok();
    std::unique_lock<std::mutex> lock(sync_mu_);
    if (written() >= pos && policy_ == FsyncPolicy::kAlways) {
      sync_requested_ = std::max(sync_requested_, pos);
      sync_cv_.notify_one();
    }
    synced_cv_.wait_for(lock, std::chrono::milliseconds(kRetryWriteMs),
                        [&] { return released() >= pos || failed(); });
  }
}

void Log::SyncLoop() {
  int64_t last_sync = MonoMs();
  uint64_t last_written = written();
  std::unique_lock<std::mutex> lock(sync_mu_);
  while (!stop_) {
    bool write_failing;
    {
      std::lock_guard<std::mutex> state(state_mu_);
      write_failing = !write_error_.ok();
    }
    int64_t wait_ms = write_failing ? kRetryWriteMs : 1000 - (MonoMs() - last_sync);
    if (sync_requested_ <= synced() && wait_ms > 0) {
      sync_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
      if (stop_) break;
    }
    if (write_failing) {
      lock.unlock();
      Notify();  // the owner retries the write
      lock.lock();
    }
    bool asked = sync_requested_ > synced();
    bool second = MonoMs() - last_sync >= 1000;
    if (!asked && !second) continue;
    uint64_t target = written();
    bool activity = target != last_written;
    last_written = target;
    if (second) last_sync = MonoMs();
    bool sync = target > synced() && !failed() &&
                (asked || (policy_ == FsyncPolicy::kEverySec && second));
    if (sync) {
      lock.unlock();  // writers may ask for the next sync meanwhile
      Status s;
      {
        // WriteOut closes a segment under rotate_mu_, so `file` stays the
        // newest while it syncs; appends to it do not wait.
        std::lock_guard<std::mutex> rotate(rotate_mu_);
        std::shared_ptr<File> file;
        {
          std::lock_guard<std::mutex> seg(seg_mu_);
          file = segments_.back().file;
          target = written();  // what `file` holds: a closed segment was synced whole
        }
        s = file->Sync();
      }
      lock.lock();
      syncs_.fetch_add(1, std::memory_order_relaxed);
      last_sync = MonoMs();
      if (s.ok()) {
        if (target > synced()) synced_.store(target, std::memory_order_release);
      } else {
        std::lock_guard<std::mutex> state(state_mu_);
        sync_error_ = Unavailable("storage failed: " + s.message() + "; restart delayq");
        failed_.store(true, std::memory_order_release);
        ::delayq::Log(LogLevel::kError, "log: %s: no more changes are accepted", s.message().c_str());
      }
      synced_cv_.notify_all();
    }
    if (sync || activity || failed()) {
      lock.unlock();
      Notify();
      lock.lock();
    }
  }
}

void Log::Notify() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(notify_fd_, &one, sizeof one);
}

Status Log::health() const {
  std::lock_guard<std::mutex> lock(state_mu_);
  if (!sync_error_.ok()) return sync_error_;
  return write_error_;
}

LogStats Log::stats() const {
  LogStats s;
  s.writes = writes_.load(std::memory_order_relaxed);
  s.syncs = syncs_.load(std::memory_order_relaxed);
  s.appended_bytes = end();
  s.rewritten_bytes = rewritten_bytes_.load(std::memory_order_relaxed);
  s.disk_bytes = disk_bytes();
  std::lock_guard<std::mutex> lock(seg_mu_);
  s.segments = segments_.size();
  s.removed_segments = removed_segments_;
  return s;
}

// --- compaction ----------------------------------------------------------------------

uint64_t Log::OldestClosed() const {
  std::lock_guard<std::mutex> lock(seg_mu_);
  return segments_.size() >= 2 ? segments_.front().number : 0;
}

Result<std::string> Log::ReadClosed(uint64_t number, uint64_t offset, size_t n) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(seg_mu_);
    auto it = std::find_if(segments_.begin(), segments_.end() - 1,
                           [&](const Segment& s) { return s.number == number; });
    if (segments_.empty() || it == segments_.end() - 1) {
      return InvalidArgument("log: no closed segment " + std::to_string(number));
    }
    path = it->path;
  }
  auto file = fs_->Open(path, /*create=*/false);
  if (!file.ok()) return file.status();
  std::string out(n, '\0');
  auto got = (*file)->ReadAt(kSegmentHeaderBytes + offset, out.data(), n);
  if (!got.ok()) return got.status();
  out.resize(*got);
  return out;
}

Status Log::RemoveClosed(uint64_t number) {
  std::string path;
  {
    std::lock_guard<std::mutex> lock(seg_mu_);
    if (segments_.size() < 2 || segments_.front().number != number) {
      return InvalidArgument("log: segment " + std::to_string(number) + " is not the oldest closed");
    }
    path = segments_.front().path;
  }
  if (Status s = fs_->Remove(path); !s.ok()) return s;
  (void)fs_->SyncDir(options_.dir);
  std::lock_guard<std::mutex> lock(seg_mu_);
  disk_bytes_ -= segments_.front().bytes;
  segments_.pop_front();
  ++removed_segments_;
  return Status::Ok();
}

}  // namespace delayq::store
