#include "far/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace delayq::far {
namespace {

static_assert(std::endian::native == std::endian::little, "checkpoints are written little-endian");

constexpr std::string_view kTempName = "checkpoint.dq.tmp";
constexpr size_t kChunkSlots = engine::FarSet::kSnapshotChunkSlots;  // the loader's unit

// The metadata: integers little-endian, strings and lists with a count first.
class Writer {
 public:
  void U64(uint64_t v) { out_.append(reinterpret_cast<const char*>(&v), 8); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Str(std::string_view s) {
    U64(s.size());
    out_.append(s);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  uint64_t U64() {
    if (in_.size() - at_ < 8) {
      bad_ = true;
      return 0;
    }
    uint64_t v;
    std::memcpy(&v, in_.data() + at_, 8);
    at_ += 8;
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  // A count of items of at least `item_bytes` each: never more than the rest holds.
  uint64_t Count(size_t item_bytes) {
    uint64_t n = U64();
    if (n > (in_.size() - at_) / item_bytes) {
      bad_ = true;
      return 0;
    }
    return n;
  }
  std::string Str() {
    uint64_t n = Count(1);
    std::string s(in_.substr(at_, n));
    at_ += n;
    return s;
  }
  bool ok() const { return !bad_ && at_ == in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
  bool bad_ = false;
};

std::string EncodeMeta(const Checkpoint& c) {
  Writer w;
  // A list of pairs: its count, then each pair's two numbers.
  auto pairs = [&w](const auto& list, auto pair) {
    w.U64(list.size());
    for (const auto& item : list) {
      auto [a, b] = pair(item);
      w.U64(static_cast<uint64_t>(a));
      w.U64(static_cast<uint64_t>(b));
    }
  };
  const store::LogResume& l = c.log;
  w.U64(l.segment);
  w.U64(l.last_seq);
  w.U64(l.rewrite_end);
  w.U64(l.before.size());
  for (const store::LogResume::Before& b : l.before) {
    w.U64(b.number);
    w.I64(b.live_puts);
    w.I64(b.far_puts);
  }
  pairs(l.moved, [](const auto& m) { return m; });
  const engine::Engine::FarImage& f = c.far;
  w.I64(f.horizon_ms);
  w.U64(f.last_seq);
  w.U64(f.client_took_generated_form ? 1 : 0);
  w.U64(f.topics.size());
  for (const std::string& t : f.topics) w.Str(t);
  w.U64(f.far.slots);
  w.U64(f.far.jobs);
  w.U64(f.far.sealed_entries);
  w.U64(f.far.topic_jobs.size());
  for (uint64_t j : f.far.topic_jobs) w.U64(j);
  pairs(f.far.runs, [](const auto& r) { return std::pair(r.file, r.next); });
  w.U64(c.epoch);
  w.U64(c.next_run);
  pairs(c.run_files, [](const auto& r) { return std::pair(r.run, r.entries); });
  w.U64(c.far_live_bytes);
  return std::move(w.out());
}

bool DecodeMeta(std::string_view in, Checkpoint* c) {
  Reader r(in);
  store::LogResume& l = c->log;
  l.segment = r.U64();
  l.last_seq = r.U64();
  l.rewrite_end = r.U64();
  l.before.resize(r.Count(24));
  for (auto& b : l.before) {
    b.number = r.U64();
    b.live_puts = r.I64();
    b.far_puts = r.I64();
  }
  l.moved.resize(r.Count(16));
  for (auto& [seq, segment] : l.moved) {
    seq = r.U64();
    segment = r.U64();
  }
  engine::Engine::FarImage& f = c->far;
  f.horizon_ms = r.I64();
  f.last_seq = r.U64();
  f.client_took_generated_form = r.U64() != 0;
  f.topics.resize(r.Count(8));
  for (std::string& t : f.topics) t = r.Str();
  uint64_t slots = r.U64();
  f.far.slots = static_cast<uint32_t>(std::min<uint64_t>(slots, UINT32_MAX));
  f.far.jobs = r.U64();
  f.far.sealed_entries = r.U64();
  f.far.topic_jobs.resize(r.Count(8));
  for (uint64_t& j : f.far.topic_jobs) j = r.U64();
  f.far.runs.resize(r.Count(16));
  for (auto& run : f.far.runs) {
    run.file = r.U64();
    run.next = r.U64();
  }
  c->epoch = r.U64();
  c->next_run = r.U64();
  c->run_files.resize(r.Count(16));
  for (auto& run : c->run_files) {
    run.run = r.U64();
    run.entries = r.U64();
  }
  c->far_live_bytes = r.U64();
  return r.ok() && slots == f.far.slots;
}

uint64_t ChunkChecksum(const char* data, size_t n, uint64_t seed, uint64_t chunk) {
  return XXH3_64bits_withSeed(data, n, seed + chunk * 0x9E3779B97F4A7C15ull);
}

uint64_t ChunkBytes(size_t n) { return n * 12 + 8; }

}  // namespace

Status WriteCheckpoint(store::FileSystem& fs, const std::string& dir, const Checkpoint& c,
                       const SlotChunks& chunks) {
  const std::string temp = dir + "/" + std::string(kTempName);
  (void)fs.Remove(temp);
  auto opened = fs.Open(temp, /*create=*/true);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<store::File> file = std::move(opened).value();
  std::string meta = EncodeMeta(c);
  uint64_t seed = XXH3_64bits(meta.data(), meta.size());
  std::string buf(kCheckpointHeaderBytes, '\0');
  std::memcpy(buf.data(), kCheckpointMagic.data(), kCheckpointMagic.size());
  uint32_t version = kCheckpointVersion;
  std::memcpy(buf.data() + 8, &version, 4);
  uint64_t meta_bytes = meta.size();
  std::memcpy(buf.data() + 16, &meta_bytes, 8);
  std::memcpy(buf.data() + 24, &seed, 8);
  buf += meta;
  Status error;
  auto flush = [&](bool always) {
    if (!error.ok() || (!always && buf.size() < (8u << 20))) return;
    if (file->Append(buf.data(), buf.size(), &error) < buf.size() && error.ok()) {
      error = Unavailable("far-future checkpoint: " + temp + ": short write");
    }
    buf.clear();
  };
  std::vector<uint64_t> loc(kChunkSlots);
  std::vector<uint32_t> aux(kChunkSlots);
  const uint64_t slots = c.far.far.slots;
  for (uint64_t chunk = 0; chunk * kChunkSlots < slots && error.ok(); ++chunk) {
    size_t n = chunks(chunk, loc.data(), aux.data());
    if (n != std::min<uint64_t>(kChunkSlots, slots - chunk * kChunkSlots)) {
      error = Internal("far-future checkpoint: chunk " + std::to_string(chunk) +
                       " of the slots has " + std::to_string(n) + " slots");
      break;
    }
    size_t start = buf.size();
    buf.append(reinterpret_cast<const char*>(loc.data()), n * 8);
    buf.append(reinterpret_cast<const char*>(aux.data()), n * 4);
    uint64_t sum = ChunkChecksum(buf.data() + start, n * 12, seed, chunk);
    buf.append(reinterpret_cast<const char*>(&sum), 8);
    flush(false);
  }
  flush(true);
  if (error.ok()) error = file->Sync();
  file.reset();
  if (error.ok()) error = fs.Rename(temp, dir + "/" + std::string(kCheckpointName));
  if (error.ok()) error = fs.SyncDir(dir);
  if (!error.ok()) (void)fs.Remove(temp);
  return error;
}

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(store::FileSystem& fs,
                                                                 const std::string& dir) {
  auto names = fs.List(dir);
  if (!names.ok()) return names.status();
  if (std::find(names->begin(), names->end(), kCheckpointName) == names->end()) {
    return NotFound("no far-future checkpoint");
  }
  const std::string path = dir + "/" + std::string(kCheckpointName);
  auto opened = fs.Open(path, /*create=*/false);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<CheckpointReader> r(new CheckpointReader);
  r->file_ = std::move(opened).value();
  auto size = r->file_->Size();
  if (!size.ok()) return size.status();
  auto bad = [&](const std::string& what) { return Internal(path + ": " + what); };
  std::string header(kCheckpointHeaderBytes, '\0');
  auto got = r->file_->ReadAt(0, header.data(), header.size());
  if (!got.ok()) return got.status();
  if (*got < header.size() || header.compare(0, kCheckpointMagic.size(), kCheckpointMagic) != 0) {
    return bad("not a far-future checkpoint");
  }
  uint32_t version = 0;
  uint64_t meta_bytes = 0;
  std::memcpy(&version, header.data() + 8, 4);
  std::memcpy(&meta_bytes, header.data() + 16, 8);
  std::memcpy(&r->seed_, header.data() + 24, 8);
  if (version != kCheckpointVersion) return bad("version " + std::to_string(version));
  if (meta_bytes > *size - kCheckpointHeaderBytes) return bad("cut short");
  std::string meta(meta_bytes, '\0');
  got = r->file_->ReadAt(kCheckpointHeaderBytes, meta.data(), meta.size());
  if (!got.ok()) return got.status();
  if (*got < meta.size() || XXH3_64bits(meta.data(), meta.size()) != r->seed_) {
    return bad("does not match its checksum");
  }
  if (!DecodeMeta(meta, &r->c_)) return bad("does not parse");
  uint64_t slots = r->c_.far.far.slots;
  uint64_t full = slots / kChunkSlots;
  uint64_t want = kCheckpointHeaderBytes + meta_bytes + full * ChunkBytes(kChunkSlots) +
                  (slots % kChunkSlots != 0 ? ChunkBytes(slots % kChunkSlots) : 0);
  if (*size != want) {
    return bad("holds " + std::to_string(*size) + " bytes, not " + std::to_string(want));
  }
  r->offset_ = kCheckpointHeaderBytes + meta_bytes;
  return r;
}

Status CheckpointReader::LoadSlots(uint64_t* loc, uint32_t* aux, size_t n) {
  std::string buf(ChunkBytes(n), '\0');
  auto got = file_->ReadAt(offset_, buf.data(), buf.size());
  if (!got.ok()) return got.status();
  uint64_t sum = 0;
  if (*got == buf.size()) std::memcpy(&sum, buf.data() + n * 12, 8);
  if (*got < buf.size() || sum != ChunkChecksum(buf.data(), n * 12, seed_, chunk_)) {
    return Internal(file_->path() + ": slots at byte " + std::to_string(offset_) +
                    " do not match their checksum");
  }
  std::memcpy(loc, buf.data(), n * 8);
  std::memcpy(aux, buf.data() + n * 8, n * 4);
  offset_ += buf.size();
  ++chunk_;
  return Status::Ok();
}

namespace {

Status RemoveNamed(store::FileSystem& fs, const std::string& dir,
                   std::initializer_list<std::string_view> which) {
  auto names = fs.List(dir);
  if (!names.ok()) return Status::Ok();  // no directory: no checkpoint
  bool removed = false;
  for (std::string_view name : which) {
    if (std::find(names->begin(), names->end(), name) == names->end()) continue;
    if (Status s = fs.Remove(dir + "/" + std::string(name)); !s.ok()) return s;
    removed = true;
  }
  return removed ? fs.SyncDir(dir) : Status::Ok();
}

}  // namespace

Status RemoveCheckpoint(store::FileSystem& fs, const std::string& dir) {
  return RemoveNamed(fs, dir, {kCheckpointName, kTempName});
}

Status RemoveCheckpointTemp(store::FileSystem& fs, const std::string& dir) {
  return RemoveNamed(fs, dir, {kTempName});
}

}  // namespace delayq::far
