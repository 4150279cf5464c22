#include "log/log.h"

#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>

#include "common/log.h"

namespace delayq::store {
namespace {

constexpr std::string_view kSegmentPrefix = "log-";
constexpr std::string_view kSegmentSuffix = ".dq";
constexpr std::string_view kSpareName = "spare.dq";      // the next segment's file, made ahead
constexpr std::string_view kNewSpareName = "spare.new";  // one being made
constexpr size_t kReadChunk = 4 << 20;
constexpr int64_t kRetryWriteMs = 100;
// What a scan past a bad record may spend hashing candidates beyond four
// times the bytes it scans: two records of the largest size. Honest bytes
// (records of this segment or of a reused file's earlier one, zeros,
// torn writes) spend about the bytes scanned once.
constexpr uint64_t kScanBudgetBytes = 2 * uint64_t{kMaxRecordLength};
// WriteOutAndSync leaves the fdatasync to the sync thread once one took
// longer than this: a slow disk must not stall its caller's loop.
constexpr int64_t kSyncHereMaxUs = 2000;

int64_t MonoUs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000 + ts.tv_nsec / 1000;
}

int64_t MonoMs() { return MonoUs() / 1000; }

// Whether a file system error says it is out of space (ENOSPC, EDQUOT),
// from the strerror text Status carries.
bool IsNoSpace(const std::string& error) {
  return error.find("No space") != std::string::npos || error.find("quota") != std::string::npos;
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

// `text` for a shell, in single quotes.
std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string Log::SparePath() const { return options_.dir + "/" + std::string(kSpareName); }

std::string Log::SegmentName(uint64_t number) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(number));
  return std::string(kSegmentPrefix) + buf + std::string(kSegmentSuffix);
}

Log::Log(const LogOptions& options)
    : options_(options), policy_(options.fsync), fs_(options.fs ? options.fs : PosixFileSystem()) {}

Result<std::unique_ptr<Log>> Log::Open(const LogOptions& options, const Replay& replay,
                                       RecoveryReport* report) {
  if (options.dir.empty()) return InvalidArgument("data directory: must not be empty");
  std::unique_ptr<Log> log(new Log(options));
  if (Status s = log->fs_->CreateDir(options.dir); !s.ok()) return s;
  auto lock = log->fs_->Lock(options.dir);
  if (!lock.ok()) return lock.status();
  log->lock_ = std::move(lock).value();
  log->notify_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (log->notify_fd_ < 0) return Internal("log: cannot create an eventfd");
  *report = RecoveryReport{};
  if (options.resume_from) log->resume_ = options.resume_from();
  if (Status s = log->Recover(replay, report); !s.ok()) return s;
  log->resume_ = nullptr;
  auto names = log->fs_->List(options.dir);
  if (names.ok()) {
    for (const std::string& name : *names) {
      log->has_spare_ |= name == kSpareName;
      if (name == kNewSpareName) (void)log->fs_->Remove(options.dir + "/" + name);  // cut short
    }
  }
  if (Status s = log->OpenHead(); !s.ok()) return s;
  log->sync_thread_ = std::thread([l = log.get()] { l->SyncLoop(); });
  if (options.prepare_bytes > 0) {
    log->prepare_thread_ = std::thread([l = log.get()] { l->PrepareLoop(); });
  }
  return log;
}

uint64_t Log::SizeOnDisk(const LogOptions& options) {
  std::shared_ptr<FileSystem> fs = options.fs ? options.fs : PosixFileSystem();
  auto names = fs->List(options.dir);
  if (!names.ok()) return 0;
  uint64_t total = 0;
  for (const std::string& name : *names) {
    if (ParseSegmentName(name) == 0) continue;
    auto file = fs->Open(options.dir + "/" + name, /*create=*/false);
    if (!file.ok()) continue;
    auto size = (*file)->Size();
    if (size.ok()) total += *size;
  }
  return total;
}

Log::~Log() {
  if (prepare_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(prepare_sig_mu_);
      prepare_stop_ = true;
    }
    prepare_cv_.notify_all();
    prepare_thread_.join();
  }
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
    uint64_t logical = 0;
    {
      std::lock_guard<std::mutex> lock(seg_mu_);
      if (!segments_.empty()) {
        file = segments_.back().file;
        logical = segments_.back().bytes;
      }
    }
    // Cut to its records (a reused file or prepared space may hold more) and
    // synced: a clean stop leaves nothing for the next start to cut.
    if (file && !failed() && unwritten_.empty()) (void)file->Truncate(logical);
  }
  if (notify_fd_ >= 0) close(notify_fd_);
}

// Writing continues in the newest segment if it has room and this format
// version, else in a new one (a segment of an older version would hold
// records its header does not announce).
Status Log::OpenHead() {
  if (!segments_.empty() && segments_.back().bytes < options_.segment_bytes &&
      segments_.back().version == kFormatVersion) {
    auto file = fs_->Open(segments_.back().path, /*create=*/false);
    if (!file.ok()) return file.status();
    segments_.back().file = std::move(file).value();
    SetPrepared(segments_.back().number, segments_.back().bytes, segments_.back().bytes);
    append_base_ = static_cast<int64_t>(end()) - static_cast<int64_t>(segments_.back().bytes);
    return Status::Ok();
  }
  uint64_t next = segments_.empty() ? 1 : segments_.back().number + 1;
  accounts_.push_back(Account{next, last_seq_ + 1});
  append_base_ = static_cast<int64_t>(end()) - static_cast<int64_t>(kSegmentHeaderBytes);
  return StartSegment(next, last_seq_);
}

// --- recovery ------------------------------------------------------------------

Result<std::vector<uint64_t>> Log::SegmentNumbers(FileSystem& fs, const std::string& dir) {
  auto names = fs.List(dir);
  if (!names.ok()) return names.status();
  std::vector<uint64_t> numbers;
  for (const std::string& name : *names) {
    if (uint64_t n = ParseSegmentName(name); n != 0) numbers.push_back(n);
  }
  std::sort(numbers.begin(), numbers.end());
  return numbers;
}

namespace {

// How many of the segments `resume` names before its own are gone: the
// oldest ones that held no far record, which compaction may delete (it
// deletes the oldest segment first).
size_t BeforeGone(const LogResume& resume, const std::vector<uint64_t>& numbers) {
  size_t gone = 0;
  while (gone < resume.before.size() && resume.before[gone].far_puts <= 0 &&
         (numbers.empty() || numbers[0] != resume.before[gone].number)) {
    ++gone;
  }
  return gone;
}

}  // namespace

Status Log::Recover(const Replay& replay, RecoveryReport* report) {
  auto listed = SegmentNumbers(*fs_, options_.dir);
  if (!listed.ok()) return listed.status();
  const std::vector<uint64_t>& numbers = *listed;
  for (size_t i = 1; i < numbers.size(); ++i) {
    // Compaction deletes the oldest segment only: a gap is a lost file.
    if (numbers[i] != numbers[i - 1] + 1) {
      return Internal("log segment " + options_.dir + "/" + SegmentName(numbers[i - 1] + 1) +
                      " is missing (segments " + std::to_string(numbers[i - 1]) + " and " +
                      std::to_string(numbers[i]) +
                      " are there): the changes it held are lost, so delayq will not start on a "
                      "guess; see docs/log-format.md, \"Damage\"");
    }
  }
  const LogResume* resume = resume_;
  if (resume != nullptr) {
    if (Status s = CheckResume(options_, *resume); !s.ok()) return Internal(s.message());
    for (const auto& [seq, number] : resume->moved) moved_[seq] = number;
    last_seq_ = std::max(last_seq_, resume->last_seq);
    report->resumed_from = resume->segment;
  }
  const size_t gone = resume != nullptr ? BeforeGone(*resume, numbers) : 0;
  for (size_t i = 0; i < numbers.size(); ++i) {
    Segment seg;
    seg.number = numbers[i];
    seg.path = options_.dir + "/" + SegmentName(seg.number);
    bool newest = i + 1 == numbers.size();
    if (resume != nullptr && seg.number < resume->segment) {
      if (Status s = SkipSegment(seg, resume->before[gone + i].live_puts); !s.ok()) return s;
      ++report->segments;
      disk_bytes_ += seg.bytes;
      segments_.push_back(std::move(seg));
      continue;
    }
    if (Status s = ReplaySegment(seg, newest, replay, report); !s.ok()) return s;
    if (seg.bytes == 0) continue;  // a newest segment torn before its header: removed
    ++report->segments;
    disk_bytes_ += seg.bytes;
    segments_.push_back(std::move(seg));
  }
  return Status::Ok();
}

Status Log::CheckResume(const LogOptions& options, const LogResume& resume) {
  std::shared_ptr<FileSystem> fs = options.fs ? options.fs : PosixFileSystem();
  auto numbers = SegmentNumbers(*fs, options.dir);
  if (!numbers.ok()) return numbers.status();
  std::vector<uint64_t> want;
  for (size_t i = BeforeGone(resume, *numbers); i < resume.before.size(); ++i)
    want.push_back(resume.before[i].number);
  // The segment where the rewrite ends, and every one from the resume
  // point to it, must be there; later ones are replayed too.
  uint64_t last = std::max(resume.segment, engine::LocationSegment(resume.rewrite_end));
  for (uint64_t n = resume.segment; n != 0 && n <= last; ++n) want.push_back(n);
  for (size_t i = want.size(); i < numbers->size() && !want.empty(); ++i) {
    if ((*numbers)[i] != want.back() + 1) break;
    want.push_back((*numbers)[i]);
  }
  if (resume.segment == 0 || *numbers != want) {
    return NotFound("the log's segments are not those the checkpoint names");
  }
  return Status::Ok();
}

Status Log::SkipSegment(Segment& seg, int64_t live_puts) {
  auto opened = fs_->Open(seg.path, /*create=*/false);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<File> file = std::move(opened).value();
  auto size = file->Size();
  if (!size.ok()) return size.status();
  std::string header(kSegmentHeaderBytes, '\0');
  auto got = file->ReadAt(0, header.data(), header.size());
  if (!got.ok()) return got.status();
  SegmentHeader h;
  Status s = *got < kSegmentHeaderBytes ? Internal("segment header cut short")
                                        : DecodeSegmentHeader(header, &h);
  if (s.ok() && h.number != seg.number) {
    s = Internal("header names segment " + std::to_string(h.number));
  }
  if (!s.ok()) {
    return Internal("log segment " + seg.path + " is damaged at byte 0: " + s.message() +
                    "; see docs/log-format.md, \"Damage\"");
  }
  seg.version = h.version;
  seg.bytes = *size;
  last_seq_ = std::max(last_seq_, h.last_seq);
  Account a{seg.number, h.last_seq + 1};
  a.live_puts = live_puts;
  accounts_.push_back(a);
  return Status::Ok();
}

Result<uint64_t> Log::Roll() {
  if (Status s = WriteOut(); !s.ok()) return s;
  std::lock_guard<std::mutex> io(io_mu_);
  if (rotate_pending_) {  // WriteOut could not close a full one
    if (Status s = Rotate(); !s.ok()) return s;
  }
  {
    std::lock_guard<SpinLock> lock(buf_mu_);
    BeginNextSegment();
  }
  if (Status s = Rotate(); !s.ok()) return s;
  std::lock_guard<SpinLock> lock(buf_mu_);
  return accounts_.back().number;
}

void Log::BeginNextSegment() {
  accounts_.push_back(Account{accounts_.back().number + 1, last_seq_ + 1});
  append_base_ = static_cast<int64_t>(end()) - static_cast<int64_t>(kSegmentHeaderBytes);
  rotate_pending_ = true;
}

LogResume Log::ResumePoint() {
  std::lock_guard<SpinLock> lock(buf_mu_);
  LogResume r;
  r.segment = accounts_.back().number;
  r.last_seq = last_seq_;
  for (size_t i = 0; i + 1 < accounts_.size(); ++i) {
    r.before.push_back(LogResume::Before{accounts_[i].number, accounts_[i].live_puts});
  }
  r.moved.assign(moved_.begin(), moved_.end());
  return r;
}

Result<uint64_t> Log::EndRewrite(LogResume* resume) {
  if (Status s = WriteOut(); !s.ok()) return s;
  if (Status s = health(); !s.ok()) return s;
  HeadView head = Head();
  resume->rewrite_end = engine::MakeLocation(head.number, head.bytes);
  std::lock_guard<SpinLock> lock(buf_mu_);
  for (LogResume::Before& b : resume->before) {
    const Account* a = AccountOf(b.number);
    b.far_puts = a != nullptr ? a->live_puts : 0;
  }
  return written();
}

Status Log::Seal(LogResume* resume) {
  auto end = EndRewrite(resume);
  if (!end.ok()) return end.status();
  SyncNewest();
  return health();
}

Status Log::WaitSynced(uint64_t pos) {
  std::unique_lock<std::mutex> lock(sync_mu_);
  for (;;) {
    if (synced() >= pos) return Status::Ok();
    if (failed()) {
      lock.unlock();
      return health();
    }
    sync_requested_ = std::max(sync_requested_, std::min(pos, written()));
    sync_cv_.notify_one();
    synced_cv_.wait_for(lock, std::chrono::milliseconds(kRetryWriteMs),
                        [&] { return synced() >= pos || failed(); });
  }
}

Status Log::ReplaySegment(Segment& seg, bool newest, const Replay& replay, RecoveryReport* report) {
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
  // Zeros at the very end are space prepared ahead of the appends, cut
  // quietly; anything else there was a write torn by a crash or a power
  // loss (or a reused file's old rest), cut with a warning that says where
  // and how much, and counted (RecoveryReport, /metrics).
  auto cut = [&](uint64_t offset, const std::string& why) -> Status {
    auto data_end = DataEnd(*file, offset, *size);
    if (!data_end.ok()) return data_end.status();
    uint64_t torn = *data_end - offset;
    report->unused_bytes += *size - *data_end;
    if (torn > 0) {
      report->torn_bytes += torn;
      report->torn_records += 1;
      report->torn_reason = why;
      ::delayq::Log(LogLevel::kWarn,
                    "log: %s: cut %llu bytes at byte %llu, the end of its last whole record: %s "
                    "(a write torn by a crash or a power loss, whose change is lost; or the old "
                    "rest of a reused file)",
                    seg.path.c_str(), static_cast<unsigned long long>(torn),
                    static_cast<unsigned long long>(offset), why.c_str());
    }
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
  if (Status s = DecodeSegmentHeader(header, &h); !s.ok()) {
    // A spare made ahead (zeros) renamed into place, its header cut short
    // by a crash: the start of the magic at most, then zeros. It held
    // nothing yet.
    if (newest) {
      size_t written = 0;
      while (written < kSegmentMagic.size() && header[written] == kSegmentMagic[written]) {
        ++written;
      }
      auto zeros = AllZeros(*file, written, *size);
      if (!zeros.ok()) return zeros.status();
      if (*zeros) return cut(0, "segment header cut short");
    }
    return damage(0, s.message());
  }
  if (h.number != seg.number) {
    // A reused file renamed into place before its new header was written.
    if (newest) return cut(0, "header of another segment");
    return damage(0, "header names segment " + std::to_string(h.number));
  }
  seg.version = h.version;
  last_seq_ = std::max(last_seq_, h.last_seq);
  accounts_.push_back(Account{seg.number, h.last_seq + 1});

  // A bad record (one that fails its checksum, does not parse, or whose
  // length runs past the end) is a torn end only if no record of this
  // segment verifies after it; else it is damage amid records that may have
  // been acknowledged, which stops the start, or, with repair, is dropped
  // with everything up to the next record that verifies.
  std::vector<Span> dropped;
  uint64_t from = kSegmentHeaderBytes;
  for (;;) {
    auto end = ReplayRecords(*file, *size, from, seg.number, replay, report);
    if (!end.ok()) return end.status();
    if (end->why.empty()) {
      seg.bytes = *size;
      break;
    }
    auto after = FindWholeRecord(*file, end->at, *size, seg.number);
    if (!after.ok()) return after.status();
    if (after->what == After::kRecord && options_.repair) {
      dropped.push_back(Span{end->at, after->at, end->why});
      from = after->at;
      continue;
    }
    if (after->what == After::kNothing && newest) {
      if (Status s = cut(end->at, end->why); !s.ok()) return s;
      break;
    }
    if (!options_.repair) return Damaged(seg.path, end->at, *size, end->why, *after);
    dropped.push_back(Span{end->at, *size, end->why});  // nothing after it to keep
    seg.bytes = *size;
    break;
  }
  if (!dropped.empty()) return Repair(seg, *file, dropped, report);
  report->bytes += seg.bytes;
  return Status::Ok();
}

// Reading and checking records (I/O, checksums, decoding) runs on a second
// thread, a chunk ahead of applying them here: a restart spends about as
// long on each.
Result<Log::RecordsEnd> Log::ReplayRecords(File& file, uint64_t size, uint64_t from,
                                           uint64_t number, const Replay& replay,
                                           RecoveryReport* report) {
  auto next =
      std::async(std::launch::async, &Log::ReadChunk, &file, size, std::string(), from, number);
  for (;;) {
    Chunk c = next.get();
    if (!c.status.ok()) return c.status;
    bool more = c.stop == ReadOutcome::kIncomplete && !c.eof;
    if (more) {
      next = std::async(std::launch::async, &Log::ReadChunk, &file, size, c.buf.substr(c.consumed),
                        c.base + c.consumed, number);
    }
    for (const std::unique_ptr<Record>& rec : c.records) {
      if (Status s = replay(*rec); !s.ok()) {
        if (more) (void)next.get();  // the reader must not outlive the file
        return s;
      }
      Count(*rec, number);
      ++report->records;
    }
    if (more) continue;
    RecordsEnd end{c.base + c.consumed, {}};
    if (c.stop == ReadOutcome::kCorrupt) {
      end.why = c.error;
    } else if (c.consumed != c.buf.size()) {
      end.why = "last record cut short";
    }
    return end;
  }
}

void Log::Count(const Record& rec, uint64_t number) {
  switch (rec.type) {
    case RecordType::kPut:
      last_seq_ = std::max(last_seq_, rec.job.seq);
      CountPut(rec.job.seq, number);
      break;
    case RecordType::kRemove:
      CountRemove(rec.job.seq);
      break;
    case RecordType::kPause:
      accounts_.back().has_pauses = true;
      break;
    case RecordType::kDedup:
      accounts_.back().dedup_until_ms =
          std::max(accounts_.back().dedup_until_ms, rec.dedup.expires_ms);
      break;
    case RecordType::kSubscription:  // counted by the owner (SubscriptionsMoved)
    case RecordType::kSchedule:      // likewise (SchedulesMoved)
    case RecordType::kUpdate:
      break;
  }
}

Log::Chunk Log::ReadChunk(File* file, uint64_t file_size, std::string carry, uint64_t base,
                          uint64_t segment) {
  Chunk c;
  c.buf = std::move(carry);
  c.base = base;
  size_t want = kReadChunk;
  if (c.buf.size() >= 8) {  // a record longer than a chunk: read all of it
    uint32_t len = 0;
    for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(c.buf[4 + i]);
    if (len <= kMaxRecordLength && 8 + size_t{len} > c.buf.size() + want) {
      want = 8 + size_t{len} - c.buf.size();
    }
  }
  size_t old = c.buf.size();
  // Never more than the file holds: a damaged length must not cost a
  // gigabyte of memory before its checksum is read.
  uint64_t left = file_size > base + old ? file_size - (base + old) : 0;
  want = static_cast<size_t>(std::min<uint64_t>(want, left));
  c.buf.resize(old + want);
  auto n = file->ReadAt(base + old, c.buf.data() + old, want);
  if (!n.ok()) {
    c.status = n.status();
    return c;
  }
  c.buf.resize(old + *n);
  c.eof = *n < want || base + old + *n >= file_size;
  std::string_view rest = c.buf;
  for (;;) {
    auto rec = std::make_unique<Record>();
    size_t size = 0;
    c.stop = rest.empty() ? ReadOutcome::kIncomplete
                          : ReadRecord(rest, segment, rec.get(), &size, &c.error);
    if (c.stop != ReadOutcome::kRecord) break;
    rec->offset = base + (c.buf.size() - rest.size());
    c.records.push_back(std::move(rec));
    rest.remove_prefix(size);
  }
  c.consumed = c.buf.size() - rest.size();
  return c;
}

// Looks for a record of `segment` that verifies, starting anywhere in
// (offset, the last byte that is not zero). Zeros prepared ahead end the
// scan where the data does; a reused file's old records parse but fail
// their checksums (another seed). The rest is read whole (at most the
// file); each position costs a few compares, and one that parses a hash of
// its length, within a budget only bytes crafted to parse as records can
// spend (kUndecided then).
Result<Log::After> Log::FindWholeRecord(File& file, uint64_t offset, uint64_t size,
                                        uint64_t segment) {
  After after;
  if (offset + 1 >= size) return after;
  std::string rest(static_cast<size_t>(size - offset), '\0');
  auto got = file.ReadAt(offset, rest.data(), rest.size());
  if (!got.ok()) return got.status();
  rest.resize(*got);
  size_t data_end = rest.find_last_not_of('\0');
  if (data_end == std::string::npos) return after;
  uint64_t budget = kScanBudgetBytes + 4 * uint64_t{data_end};
  std::string_view view(rest);
  const auto* type = reinterpret_cast<const uint8_t*>(rest.data()) + 8;
  size_t last = std::min(data_end, rest.size() - std::min(rest.size(), kRecordHeaderBytes));
  for (size_t i = 1; i <= last; ++i) {
    if (!IsRecordType(type[i])) continue;
    size_t n = ParsedRecordSize(view.substr(i));
    if (n == 0) continue;
    if (n > budget) {
      after.what = After::kUndecided;
      return after;
    }
    budget -= n;
    if (RecordChecksumMatches(view.substr(i), n, segment)) {
      after.what = After::kRecord;
      after.at = offset + i;
      return after;
    }
  }
  return after;
}

Status Log::Damaged(const std::string& path, uint64_t offset, uint64_t size,
                    const std::string& what, const After& after) const {
  std::string text =
      "log segment " + path + " is damaged at byte " + std::to_string(offset) + ": " + what;
  std::string truncate = "`truncate -s " + std::to_string(offset) + " " + ShellQuote(path) + "`";
  std::string start_anyway =
      ". To start anyway, knowing what is lost, stop delayq, keep a copy of " + options_.dir +
      ", then ";
  if (after.what == After::kRecord) {
    text += "; a whole record follows at byte " + std::to_string(after.at) +
            ", so this is damage amid records that may have been acknowledged, not a torn end: "
            "delayq will not start on a guess" +
            start_anyway + "either start it once with --repair, which drops bytes " +
            std::to_string(offset) + " to " + std::to_string(after.at) + " (" +
            std::to_string(after.at - offset) +
            " bytes) and keeps every record that verifies, or run " + truncate +
            ", which drops everything from byte " + std::to_string(offset) + " on";
  } else {
    text += after.what == After::kUndecided
                ? "; what follows could not be told from records within the scan's budget, so "
                  "delayq will not start on a guess"
                : ". Later segments depend on it, so delayq will not start on a guess";
    text += start_anyway + "run " + truncate + " (the " + std::to_string(size - offset) +
            " bytes from there on are lost), or start it once with --repair, which does the same";
  }
  return Internal(text + "; see docs/log-format.md, \"Damage\"");
}

// Rewrites the segment without the spans dropped, through a copy renamed
// over it once synced: a crash meanwhile leaves it as it was, to be
// repaired again. Records do not depend on where they are (the checksum's
// seed is the segment's number), so those after a span read as before.
Status Log::Repair(Segment& seg, File& file, const std::vector<Span>& dropped,
                   RecoveryReport* report) {
  const std::string copy = seg.path + ".repair";
  (void)fs_->Remove(copy);  // one a crash left
  auto out = fs_->Open(copy, /*create=*/true);
  if (!out.ok()) return out.status();
  uint64_t kept = 0;
  uint64_t at = 0;
  std::string buf;
  for (size_t i = 0; i <= dropped.size(); ++i) {
    uint64_t until = i < dropped.size() ? dropped[i].begin : seg.bytes;
    for (; at < until; at += buf.size()) {
      buf.resize(static_cast<size_t>(std::min<uint64_t>(until - at, kReadChunk)));
      auto got = file.ReadAt(at, buf.data(), buf.size());
      if (!got.ok()) return got.status();
      if (*got < buf.size()) return Internal("log: " + seg.path + " shrank while it was read");
      Status error;
      if ((*out)->Append(buf.data(), buf.size(), &error) < buf.size()) return error;
      kept += buf.size();
    }
    if (i == dropped.size()) break;
    const Span& d = dropped[i];
    at = d.end;
    report->repaired_spans += 1;
    report->repaired_bytes += d.end - d.begin;
    ::delayq::Log(LogLevel::kWarn,
                  "log: %s: repair dropped %llu bytes at byte %llu (%s), up to %s: the changes "
                  "in them are lost",
                  seg.path.c_str(), static_cast<unsigned long long>(d.end - d.begin),
                  static_cast<unsigned long long>(d.begin), d.why.c_str(),
                  d.end < seg.bytes
                      ? ("the next whole record, at byte " + std::to_string(d.end)).c_str()
                      : "the end of the segment");
  }
  if (Status s = (*out)->Sync(); !s.ok()) return s;
  out->reset();
  if (Status s = fs_->Rename(copy, seg.path); !s.ok()) return s;
  if (Status s = fs_->SyncDir(options_.dir); !s.ok()) return s;
  if (options_.repaired) {
    for (const Span& d : dropped) options_.repaired(seg.number, d.begin, d.end);
  }
  seg.bytes = kept;
  report->bytes += kept;
  return Status::Ok();
}

Result<uint64_t> Log::DataEnd(File& file, uint64_t offset, uint64_t size) {
  std::string buf;
  while (size > offset) {
    uint64_t n = std::min<uint64_t>(size - offset, kReadChunk);
    buf.resize(static_cast<size_t>(n));
    auto got = file.ReadAt(size - n, buf.data(), buf.size());
    if (!got.ok()) return got.status();
    if (*got < n) return Internal("log: " + file.path() + " shrank while it was read");
    size_t last = std::string_view(buf).find_last_not_of('\0');
    if (last != std::string_view::npos) return size - n + last + 1;
    size -= n;
  }
  return offset;
}

Result<bool> Log::AllZeros(File& file, uint64_t offset, uint64_t size) {
  std::string buf;
  while (offset < size) {
    buf.resize(static_cast<size_t>(std::min<uint64_t>(size - offset, kReadChunk)));
    auto got = file.ReadAt(offset, buf.data(), buf.size());
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    if (std::string_view(buf.data(), *got).find_first_not_of('\0') != std::string_view::npos) {
      return false;
    }
    offset += *got;
  }
  return true;
}

// --- space accounting ------------------------------------------------------------------

Log::Account* Log::AccountOf(uint64_t number) {
  if (accounts_.empty() || number < accounts_.front().number ||
      number - accounts_.front().number >= accounts_.size()) {
    return nullptr;
  }
  return &accounts_[number - accounts_.front().number];
}

uint64_t Log::SegmentOfSeq(uint64_t seq) const {
  if (!moved_.empty()) {
    auto it = moved_.find(seq);
    if (it != moved_.end()) return it->second;
  }
  // Adds are written in seq order, so segments own consecutive seq ranges.
  auto it = std::upper_bound(accounts_.begin(), accounts_.end(), seq,
                             [](uint64_t v, const Account& a) { return v < a.first_seq; });
  if (it == accounts_.begin()) return 0;  // in a segment already deleted
  return std::prev(it)->number;
}

void Log::CountPut(uint64_t seq, uint64_t number) {
  Account* a = AccountOf(number);
  if (a == nullptr) return;
  if (seq < a->first_seq) {  // a job added earlier, written again by compaction
    if (Account* old = AccountOf(SegmentOfSeq(seq)); old != nullptr && old != a) --old->live_puts;
    moved_[seq] = number;
  }
  ++a->live_puts;
}

void Log::CountRemove(uint64_t seq) {
  if (Account* a = AccountOf(SegmentOfSeq(seq)); a != nullptr) --a->live_puts;
  if (!moved_.empty()) moved_.erase(seq);
}

bool Log::RollIfIdleAndDead(uint64_t min_bytes) {
  if (MonoMs() - last_write_ms_.load(std::memory_order_relaxed) < 500 || failed()) return false;
  std::lock_guard<std::mutex> io(io_mu_);
  if (!unwritten_.empty() || rotate_pending_) return false;
  bool roll;
  {
    std::lock_guard<SpinLock> lock(buf_mu_);
    const Account& head = accounts_.back();
    if (!buf_.empty() || head.live_puts > 0 || head.live_subscriptions > 0 ||
        head.live_schedules > 0) {
      return false;
    }
    {
      std::lock_guard<std::mutex> seg(seg_mu_);
      roll = segments_.back().bytes >= min_bytes;
    }
    if (roll) BeginNextSegment();
  }
  if (roll && !Rotate().ok()) return false;
  // Idle: the spare file goes too, so that the disk holds the live set.
  if (has_spare_ && fs_->Remove(SparePath()).ok()) has_spare_ = false;
  return roll;
}

int64_t Log::LivePuts(uint64_t number) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  Account* a = AccountOf(number);
  return a == nullptr ? 0 : a->live_puts;
}

int64_t Log::LiveSubscriptions(uint64_t number) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  Account* a = AccountOf(number);
  return a == nullptr ? 0 : a->live_subscriptions;
}

int64_t Log::LiveSchedules(uint64_t number) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  Account* a = AccountOf(number);
  return a == nullptr ? 0 : a->live_schedules;
}

bool Log::HasPauses(uint64_t number) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  Account* a = AccountOf(number);
  return a != nullptr && a->has_pauses;
}

int64_t Log::DedupUntil(uint64_t number) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  Account* a = AccountOf(number);
  return a == nullptr ? 0 : a->dedup_until_ms;
}

// --- writing -----------------------------------------------------------------------

Status Log::StartSegment(uint64_t number, uint64_t last_seq) {
  Segment seg;
  seg.number = number;
  seg.path = options_.dir + "/" + SegmentName(number);
  if (has_spare_) {
    // A deleted segment's file, reused: its pages are still cached and its
    // blocks allocated, so writing over them costs a fraction of growing a
    // new file. Old records in it do not check out (their checksums have
    // another segment's seed), and the file is cut to size when closed.
    has_spare_ = false;
    if (Status s = fs_->Rename(SparePath(), seg.path); !s.ok()) return s;
    auto reused = fs_->Open(seg.path, /*create=*/false);
    if (!reused.ok()) return reused.status();
    seg.file = std::move(reused).value();
    // A segment grown past the size by an outsized record is cut back, so a
    // reused file never holds more space than a segment is meant to.
    auto old_size = seg.file->Size();
    if (old_size.ok() && *old_size > options_.segment_bytes) {
      if (Status s = seg.file->Truncate(options_.segment_bytes); !s.ok()) return s;
    }
    seg.file->SetWritePosition(0);
    reused_files_.fetch_add(1, std::memory_order_relaxed);
  } else {
    auto created = fs_->Open(seg.path, /*create=*/true);
    if (!created.ok()) return created.status();
    seg.file = std::move(created).value();
  }
  std::string header;
  EncodeSegmentHeader(SegmentHeader{number, last_seq}, &header);
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
  auto size = seg.file->Size();  // a reused file's: allocated already
  SetPrepared(number, std::max<uint64_t>(seg.bytes, size.ok() ? *size : 0), seg.bytes);
  std::lock_guard<std::mutex> lock(seg_mu_);
  disk_bytes_ += seg.bytes;
  segments_.push_back(std::move(seg));
  return Status::Ok();
}

uint64_t Log::AppendPut(const engine::JobImage& job) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  uint64_t number = accounts_.back().number;
  uint64_t location = engine::MakeLocation(
      number, static_cast<uint64_t>(static_cast<int64_t>(end()) - append_base_));
  EncodePut(job, number, &buf_);
  NoteSeq(job.seq);
  CountPut(job.seq, number);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
  return location;
}

uint64_t Log::AppendRewrite(const engine::JobImage& job) {
  uint64_t before = end();
  uint64_t location = AppendPut(job);
  rewritten_bytes_.fetch_add(end() - before, std::memory_order_relaxed);
  return location;
}

bool Log::Written(uint64_t location) const {
  uint64_t number = engine::LocationSegment(location);
  std::lock_guard<std::mutex> lock(seg_mu_);
  const Segment& head = segments_.back();
  if (number != head.number) return number < head.number;
  // Its first byte written: all of it, unless it is in a batch whose write
  // failed part-way (its retry writes the rest).
  uint64_t offset = engine::LocationOffset(location);
  return offset < head.bytes && offset < incomplete_from_;
}

void Log::AppendUpdate(const engine::JobImage& job) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  EncodeUpdate(job, accounts_.back().number, &buf_);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::AppendRemove(const engine::JobImage& job) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  EncodeRemove(job, accounts_.back().number, &buf_);
  CountRemove(job.seq);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::AppendPause(std::string_view topic, int64_t paused_until_ms) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  EncodePause(topic, paused_until_ms, accounts_.back().number, &buf_);
  accounts_.back().has_pauses = true;
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::AppendDedup(const engine::DedupImage& add) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  EncodeDedup(add, accounts_.back().number, &buf_);
  Account& a = accounts_.back();
  a.dedup_until_ms = std::max(a.dedup_until_ms, add.expires_ms);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

uint64_t Log::AppendSubscription(const Subscription& s, bool rewrite) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  Account& a = accounts_.back();
  EncodeSubscription(s, a.number, &buf_);
  ++a.live_subscriptions;
  size_t bytes = buf_.size() - before;
  if (rewrite) rewritten_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  end_.fetch_add(bytes, std::memory_order_release);
  return a.number;
}

void Log::AppendUnsubscribe(std::string_view name, std::string_view url) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  EncodeUnsubscribe(name, url, accounts_.back().number, &buf_);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::SubscriptionsMoved(uint64_t number, int64_t n) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  if (Account* a = AccountOf(number); a != nullptr) a->live_subscriptions += n;
}

uint64_t Log::AppendSchedule(const Schedule& s, bool rewrite) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  Account& a = accounts_.back();
  EncodeSchedule(s, a.number, &buf_);
  ++a.live_schedules;
  size_t bytes = buf_.size() - before;
  if (rewrite) rewritten_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  end_.fetch_add(bytes, std::memory_order_release);
  return a.number;
}

void Log::AppendUnschedule(std::string_view name) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  size_t before = buf_.size();
  EncodeUnschedule(name, accounts_.back().number, &buf_);
  end_.fetch_add(buf_.size() - before, std::memory_order_release);
}

void Log::SchedulesMoved(uint64_t number, int64_t n) {
  std::lock_guard<SpinLock> lock(buf_mu_);
  if (Account* a = AccountOf(number); a != nullptr) a->live_schedules += n;
}

Status Log::WriteOut() {
  std::lock_guard<std::mutex> lock(io_mu_);
  return WriteOutLocked();
}

Status Log::WriteOutLocked() {
  if (failed()) return health();
  bool retrying = false;
  if (troubled_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(state_mu_);
    retrying = !write_error_.ok();
  }
  if (retrying && MonoMs() - last_failed_write_ms_ < kRetryWriteMs) return health();
  // What a failed write left belongs to the segment it began in: first.
  if (!unwritten_.empty()) {
    if (Status s = WriteUnwritten(); !s.ok()) return s;
  }
  if (rotate_pending_) {
    if (Status s = Rotate(); !s.ok()) return s;
  }
  bool presync = false;
  {
    std::lock_guard<SpinLock> lock(buf_mu_);
    unwritten_.swap(buf_);
    unwritten_end_ = end();
    // A batch that fills the segment is its last: what is appended from now
    // on is counted in the next one, where it will be written.
    uint64_t head_bytes;
    {
      std::lock_guard<std::mutex> seg(seg_mu_);
      head_bytes = segments_.back().bytes;
    }
    // Short of space, only onto a spare (made ahead with room in it): a new
    // file would start with none, and the head's prepared room is all there
    // is (it closes once space is back).
    if (!unwritten_.empty() && head_bytes + unwritten_.size() >= options_.segment_bytes &&
        (has_spare_ || !short_of_space())) {
      accounts_.push_back(Account{accounts_.back().number + 1, last_seq_ + 1});
      // What is appended from now on starts after the next one's header.
      append_base_ =
          static_cast<int64_t>(unwritten_end_) - static_cast<int64_t>(kSegmentHeaderBytes);
      rotate_pending_ = true;
    } else if (!presynced_ && head_bytes >= options_.segment_bytes / 16 * 15) {
      // Nearly full: have the sync thread sync it now, so that closing it
      // (an fdatasync on this thread) finds little left to write back.
      presynced_ = true;
      presync = true;
    }
  }
  if (presync) RequestSync();
  if (!unwritten_.empty()) {
    if (Status s = WriteUnwritten(); !s.ok()) return s;
  }
  if (rotate_pending_) {
    if (Status s = Rotate(); !s.ok()) return s;
  }
  if (retrying) {
    std::lock_guard<std::mutex> lock(state_mu_);
    write_error_ = Status::Ok();
    troubled_.store(!sync_error_.ok(), std::memory_order_release);
    ::delayq::Log(LogLevel::kInfo, "log: writing again");
  }
  uint64_t target = written();
  if (policy_ == FsyncPolicy::kAlways && synced() < target && !sync_here_) {
    {
      std::lock_guard<std::mutex> lock(sync_mu_);
      sync_requested_ = std::max(sync_requested_, target);
    }
    // Outside the lock: woken while it is held, the sync thread would block
    // on it at once, and cost a second wake-up when it is released.
    sync_cv_.notify_one();
  }
  return Status::Ok();
}

Log::HeadView Log::Head() const {
  std::lock_guard<std::mutex> lock(seg_mu_);
  const Segment& h = segments_.back();
  return HeadView{h.number, h.file, h.bytes};
}

Status Log::WriteUnwritten() {
  auto [number, file, at] = Head();
  Status error;
  size_t n;
  if (at + unwritten_.size() <= prepared_end_.load(std::memory_order_acquire)) {
    n = file->Append(unwritten_.data(), unwritten_.size(), &error);
  } else {
    // Past the prepared space: not while zeros are being written there.
    std::lock_guard<std::mutex> lock(prepare_mu_);
    n = file->Append(unwritten_.data(), unwritten_.size(), &error);
    NoteRoom(n == unwritten_.size() ? Status::Ok() : error);
    if (at + n > prepared_end_.load(std::memory_order_relaxed)) {
      StorePrepared(at + n);
    }
  }
  MaybeAskPrepare(at + n);
  writes_.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(seg_mu_);
    segments_.back().bytes += n;
    disk_bytes_ += n;
    // Records from where a batch that failed part-way began are not whole
    // on file until its retry completes (Written).
    if (n < unwritten_.size() && incomplete_from_ == kNoOffset) incomplete_from_ = at;
    if (n == unwritten_.size()) incomplete_from_ = kNoOffset;
  }
  last_write_ms_.store(MonoMs(), std::memory_order_relaxed);
  if (n == unwritten_.size()) {
    unwritten_.clear();
    written_.store(unwritten_end_, std::memory_order_release);
    return Status::Ok();
  }
  // Keep the rest; a record cut here is completed by the retry (the write
  // position moved by what was written, so the bytes continue exactly there).
  unwritten_.erase(0, n);
  written_.store(unwritten_end_ - unwritten_.size(), std::memory_order_release);
  last_failed_write_ms_ = MonoMs();
  write_failures_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(state_mu_);
  if (write_error_.ok()) {
    ::delayq::Log(LogLevel::kError, "log: %s; changes are refused until a write succeeds",
                  error.message().c_str());
  }
  write_error_ = Unavailable("storage: " + error.message());
  troubled_.store(true, std::memory_order_release);
  return write_error_;
}

Status Log::Rotate() {
  auto [number, file, logical] = Head();
  SetPrepared(0, 0, 0);  // no more zeros into it
  {
    // Close the full segment: cut to its records (a reused file or prepared
    // space may hold more) and synced, so that only the newest can end in
    // anything else.
    std::lock_guard<std::mutex> lock(rotate_mu_);  // not while the sync thread syncs it
    Status s = file->Truncate(logical);
    syncs_.fetch_add(1, std::memory_order_relaxed);
    if (!s.ok()) {
      std::lock_guard<std::mutex> state(state_mu_);
      sync_error_ = Unavailable("storage failed: " + s.message() + "; restart delayq");
      failed_.store(true, std::memory_order_release);
      troubled_.store(true, std::memory_order_release);
      ::delayq::Log(LogLevel::kError, "log: %s: no more changes are accepted", s.message().c_str());
      return sync_error_;
    }
  }
  synced_.store(std::max(synced(), written()), std::memory_order_release);
  Account next;
  {
    std::lock_guard<SpinLock> lock(buf_mu_);
    next = accounts_.back();
  }
  // The old segment stays the newest until the new one exists.
  if (Status s = StartSegment(next.number, next.first_seq - 1); !s.ok()) {
    last_failed_write_ms_ = MonoMs();
    std::lock_guard<std::mutex> state(state_mu_);
    write_error_ = Unavailable("storage: " + s.message());
    troubled_.store(true, std::memory_order_release);
    return write_error_;
  }
  rotate_pending_ = false;
  presynced_ = false;
  std::lock_guard<std::mutex> seg(seg_mu_);
  segments_[segments_.size() - 2].file.reset();
  return Status::Ok();
}

void Log::RequestSync() {
  {
    std::lock_guard<std::mutex> lock(sync_mu_);
    sync_requested_ = std::max(sync_requested_, written());
  }
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
    // After a failed fdatasync nothing more is synced: requests stay unmet,
    // and must not keep this thread from sleeping.
    if ((sync_requested_ <= synced() || failed()) && wait_ms > 0) {
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
    // Wake-ups for the first seconds after writing stopped: the owner's
    // chance to let an idle log shrink (Log::RollIfIdleAndDead).
    bool stopped =
        second && !activity && MonoMs() - last_write_ms_.load(std::memory_order_relaxed) < 2500;
    last_written = target;
    if (second) last_sync = MonoMs();
    bool sync =
        target > synced() && !failed() && (asked || (policy_ == FsyncPolicy::kEverySec && second));
    if (sync) {
      syncing_ = true;
      lock.unlock();  // writers may ask for the next sync meanwhile
      SyncNewest();
      lock.lock();
      syncing_ = false;
      last_sync = MonoMs();
    }
    if (sync || activity || stopped || failed()) {
      lock.unlock();
      if (sync) synced_cv_.notify_all();
      Notify();
      lock.lock();
    }
  }
}

// --- preparing space ---------------------------------------------------------------

void Log::SetPrepared(uint64_t number, uint64_t end, uint64_t head_bytes) {
  std::lock_guard<std::mutex> lock(prepare_mu_);
  prepare_segment_ = number;
  prepare_failed_ms_ = 0;
  // The head's bytes so far are all written: its byte 0 sits this far
  // before written() in log positions.
  head_base_ = static_cast<int64_t>(written()) - static_cast<int64_t>(head_bytes);
  StorePrepared(end);
  if (number == 0) room_end_.store(0, std::memory_order_release);  // none while one closes
}

void Log::StorePrepared(uint64_t end) {
  prepared_end_.store(end, std::memory_order_release);
  room_end_.store(head_base_ + static_cast<int64_t>(end), std::memory_order_release);
}

void Log::MaybeAskPrepare(uint64_t at) {
  if (options_.prepare_bytes == 0) return;
  if (at + options_.prepare_bytes <= prepared_end_.load(std::memory_order_acquire)) return;
  if (prepare_asked_.exchange(true, std::memory_order_acq_rel)) return;
  { std::lock_guard<std::mutex> lock(prepare_sig_mu_); }  // not between its check and its wait
  prepare_cv_.notify_one();
}

void Log::PrepareLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(prepare_sig_mu_);
      prepare_cv_.wait(lock, [&] { return prepare_stop_ || prepare_asked_.load(); });
      if (prepare_stop_) return;
    }
    prepare_asked_.store(false, std::memory_order_release);
    while (PrepareChunk()) {
      std::lock_guard<std::mutex> lock(prepare_sig_mu_);
      if (prepare_stop_) return;
    }
    PrepareSpare();
  }
}

bool Log::PrepareChunk() {
  auto [number, file, at] = Head();
  if (!file) return false;
  std::lock_guard<std::mutex> lock(prepare_mu_);
  if (prepare_segment_ != number) return false;  // closing: never zeros after its records
  // After a failed write of zeros (a full disk), the appends alone find out
  // when there is room again; preparing tries again a second later.
  if (prepare_failed_ms_ != 0 && MonoMs() - prepare_failed_ms_ < 1000) return false;
  uint64_t from = prepared_end_.load(std::memory_order_relaxed);
  if (from >= at + options_.prepare_bytes || from >= options_.segment_bytes) return false;
  uint64_t n = std::min(options_.prepare_bytes, options_.segment_bytes - from);
  Status s = file->WriteZeros(from, n);
  NoteRoom(s);
  if (!s.ok()) return false;
  StorePrepared(from + n);
  prepared_bytes_.fetch_add(n, std::memory_order_relaxed);
  return true;
}

// --- room before a change -------------------------------------------------------------

Status Log::Room(uint64_t bytes, Need need) {
  if (Status s = health(); !s.ok()) return s;
  if (options_.prepare_bytes == 0) return Status::Ok();
  bool short_now = short_of_space();
  // A change that adds data leaves the reserve behind it, always: so that
  // when the disk fills, the room to drain the queue is there.
  uint64_t want = bytes + (need == Need::kGrow ? reserve_bytes() : 0);
  // Most changes: prepared space reaches past them (two atomic loads).
  if (!short_now &&
      static_cast<int64_t>(end() + want) <= room_end_.load(std::memory_order_acquire)) {
    return Status::Ok();
  }
  auto [number, file, head] = Head();
  // Appended and not yet written goes to the head too (a batch that passes
  // the segment's size is still written whole to it).
  uint64_t until = head + (end() - written()) + want;
  // Short of space, every change looks (at most every 100 ms) whether space
  // has come back, even one that the room left can take.
  if (until <= prepared_end_.load(std::memory_order_acquire) && !short_now) {
    return Status::Ok();
  }
  std::lock_guard<std::mutex> lock(prepare_mu_);
  uint64_t from = prepared_end_.load(std::memory_order_relaxed);
  // The head is being closed (Rotate): its successor starts with the space
  // of a reused file or fails to be made, which health() then reports.
  if (prepare_segment_ != number || !file) return Status::Ok();
  bool fits = until <= from;
  if (prepare_failed_ms_ != 0 && MonoMs() - prepare_failed_ms_ < kRetryWriteMs) {
    return fits ? Status::Ok() : NoRoom(want);
  }
  if (fits && !short_now) return Status::Ok();
  // Short of space, a change asks for no more than it needs, so that what
  // is left is still given out; a look whether space is back asks for a
  // chunk, as the prepare thread would.
  // Past the segment's end (the batch that closes it, or a head kept open
  // while short of space) a chunk is the reserve: cut when it closes.
  uint64_t chunk = from < options_.segment_bytes
                       ? std::min(options_.prepare_bytes, options_.segment_bytes - from)
                       : reserve_bytes();
  uint64_t n = fits ? 0 : until - from;
  if (!short_now || fits) n = std::max(n, chunk);
  Status s = file->WriteZeros(from, n);
  NoteRoom(s);
  if (!s.ok()) return fits ? Status::Ok() : NoRoom(want);
  StorePrepared(from + n);
  prepared_bytes_.fetch_add(n, std::memory_order_relaxed);
  return Status::Ok();
}

Status Log::space() {
  if (!short_of_space()) return Status::Ok();
  std::lock_guard<std::mutex> lock(prepare_mu_);
  return NoRoom(0);
}

Status Log::NoRoom(uint64_t want) const {
  bool full = IsNoSpace(room_error_);
  std::string what = want == 0 ? "jobs cannot be added to the log in "
                               : "cannot add " + std::to_string(want) + " bytes to the log in ";
  return Unavailable(std::string(full ? "disk full" : "no room for the log") + ": " + what +
                     options_.dir + " (" + room_error_ + ")");
}

void Log::NoteRoom(const Status& error) {
  if (error.ok()) {
    prepare_failed_ms_ = 0;
    if (short_of_space_.exchange(false, std::memory_order_acq_rel)) {
      ::delayq::Log(LogLevel::kInfo, "log: room again in %s: adding jobs resumes",
                    options_.dir.c_str());
    }
    return;
  }
  prepare_failed_ms_ = MonoMs();
  room_error_ = error.message();
  room_failures_.fetch_add(1, std::memory_order_relaxed);
  if (!short_of_space_.exchange(true, std::memory_order_acq_rel)) {
    ::delayq::Log(LogLevel::kError,
                  "log: %s: %s; adding jobs is refused until there is room "
                  "(reserve, finish and delete go on while %llu bytes of prepared space last)",
                  IsNoSpace(room_error_) ? "disk full" : "no room", error.message().c_str(),
                  static_cast<unsigned long long>(reserve_bytes()));
  }
}

void Log::PrepareSpare() {
  {
    std::lock_guard<std::mutex> lock(prepare_mu_);
    if (prepare_segment_ == 0 ||
        prepared_end_.load(std::memory_order_relaxed) < options_.segment_bytes) {
      return;  // the head first
    }
    if (prepare_failed_ms_ != 0 && MonoMs() - prepare_failed_ms_ < 1000) return;
  }
  {
    std::lock_guard<std::mutex> io(io_mu_);
    if (has_spare_) return;
  }
  std::string path = options_.dir + "/" + std::string(kNewSpareName);
  (void)fs_->Remove(path);
  auto file = fs_->Open(path, /*create=*/true);
  Status s = file.ok()
                 ? (*file)->WriteZeros(0, std::min(options_.prepare_bytes, options_.segment_bytes))
                 : file.status();
  if (file.ok()) file->reset();
  {
    std::lock_guard<std::mutex> lock(prepare_mu_);
    NoteRoom(s);
  }
  bool placed = false;
  if (s.ok()) {
    std::lock_guard<std::mutex> io(io_mu_);
    placed = !has_spare_ && fs_->Rename(path, SparePath()).ok();
    has_spare_ |= placed;
  }
  if (!placed) (void)fs_->Remove(path);
}

bool Log::WriteOutAndSync() {
  if (policy_ != FsyncPolicy::kAlways) {
    (void)WriteOut();
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(io_mu_);
    sync_here_ = true;
    (void)WriteOutLocked();
    sync_here_ = false;
  }
  uint64_t target = written();
  if (synced() >= target || failed()) return false;
  {
    std::unique_lock<std::mutex> lock(sync_mu_);
    if (syncing_ || sync_requested_ > synced() ||
        last_sync_us_.load(std::memory_order_relaxed) > kSyncHereMaxUs) {
      sync_requested_ = std::max(sync_requested_, target);
      lock.unlock();
      sync_cv_.notify_one();
      return false;
    }
    syncing_ = true;
  }
  SyncNewest();
  {
    std::lock_guard<std::mutex> lock(sync_mu_);
    syncing_ = false;
  }
  synced_cv_.notify_all();
  return true;
}

void Log::SyncNewest() {
  int64_t began = MonoUs();
  uint64_t target;
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
  last_sync_us_.store(MonoUs() - began, std::memory_order_relaxed);
  syncs_.fetch_add(1, std::memory_order_relaxed);
  if (s.ok()) {
    // The sync thread and WriteOutAndSync may both have synced: keep the
    // furthest.
    uint64_t was = synced();
    while (target > was && !synced_.compare_exchange_weak(was, target, std::memory_order_acq_rel)) {
    }
    return;
  }
  std::lock_guard<std::mutex> state(state_mu_);
  sync_error_ = Unavailable("storage failed: " + s.message() + "; restart delayq");
  failed_.store(true, std::memory_order_release);
  troubled_.store(true, std::memory_order_release);
  ::delayq::Log(LogLevel::kError, "log: %s: no more changes are accepted", s.message().c_str());
}

void Log::Notify() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(notify_fd_, &one, sizeof one);
}

Status Log::health() const {
  if (!troubled_.load(std::memory_order_acquire)) return Status::Ok();
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
  s.reused_files = reused_files_.load(std::memory_order_relaxed);
  s.prepared_bytes = prepared_bytes_.load(std::memory_order_relaxed);
  s.write_failures = write_failures_.load(std::memory_order_relaxed);
  s.room_failures = room_failures_.load(std::memory_order_relaxed);
  s.short_of_space = short_of_space();
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
      return InvalidArgument("log: segment " + std::to_string(number) +
                             " is not the oldest closed");
    }
    path = segments_.front().path;
  }
  {
    // One deleted segment is kept, as the file of the next new one.
    std::lock_guard<std::mutex> io(io_mu_);
    if (!has_spare_ && fs_->Rename(path, SparePath()).ok()) {
      has_spare_ = true;
    } else if (Status s = fs_->Remove(path); !s.ok()) {
      return s;
    }
  }
  (void)fs_->SyncDir(options_.dir);
  {
    std::lock_guard<SpinLock> lock(buf_mu_);
    if (!accounts_.empty() && accounts_.front().number == number) accounts_.pop_front();
  }
  std::lock_guard<std::mutex> lock(seg_mu_);
  disk_bytes_ -= segments_.front().bytes;
  segments_.pop_front();
  ++removed_segments_;
  return Status::Ok();
}

}  // namespace delayq::store
