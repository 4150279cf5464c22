#include "far/index_files.h"

#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>

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
  auto names = fs->List(dir);
  if (!names.ok()) return names.status();
  for (const std::string& n : *names) {
    if (n.rfind("run-", 0) == 0) {
      if (Status s = fs->Remove(dir + "/" + n); !s.ok()) return s;
    }
  }
  return std::unique_ptr<IndexFiles>(new IndexFiles(dir, std::move(fs)));
}

std::string IndexFiles::RunName(uint64_t run) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "run-%016llx.dq", static_cast<unsigned long long>(run));
  return buf;
}

uint64_t IndexFiles::BlockChecksum(const char* data, size_t n, uint64_t run, uint64_t block) {
  return XXH3_64bits_withSeed(data, n, run * 1'000'003 + block);
}

Result<uint64_t> IndexFiles::Write(std::span<const engine::FarEntry> entries) {
  uint64_t run = next_++;
  std::string path = dir_ + "/" + RunName(run);
  auto file = fs_->Open(path, /*create=*/true);
  if (!file.ok()) return file.status();
  buf_.assign(kRunHeaderBytes, '\0');
  std::memcpy(buf_.data(), kRunMagic.data(), kRunMagic.size());
  PutU32(kRunVersion, buf_.data() + 8);
  PutU64(run, buf_.data() + 16);
  PutU64(entries.size(), buf_.data() + 24);
  for (size_t at = 0, block = 0; at < entries.size(); at += kBlockEntries, ++block) {
    size_t n = std::min(kBlockEntries, entries.size() - at);
    size_t start = buf_.size();
    buf_.resize(start + n * kEntryBytes + 8);
    char* p = buf_.data() + start;
    for (size_t i = 0; i < n; ++i, p += kEntryBytes) {
      const engine::FarEntry& e = entries[at + i];
      PutU64(static_cast<uint64_t>(e.run_at_ms), p);
      PutU64(e.seq, p + 8);
      PutU32(e.slot, p + 16);
      PutU32(e.topic, p + 20);
    }
    PutU64(BlockChecksum(buf_.data() + start, n * kEntryBytes, run, block), p);
  }
  Status error;
  if ((*file)->Append(buf_.data(), buf_.size(), &error) < buf_.size()) {
    (void)fs_->Remove(path);
    return error;
  }
  buf_.clear();
  buf_.shrink_to_fit();
  runs_[run] = RunFile{std::move(file).value(), entries.size()};
  return run;
}

Result<size_t> IndexFiles::Read(uint64_t run, uint64_t from, std::span<engine::FarEntry> out) {
  auto it = runs_.find(run);
  if (it == runs_.end())
    return Internal("far-future index: run " + std::to_string(run) + " is gone");
  const RunFile& r = it->second;
  if (from >= r.entries || out.empty()) return size_t{0};
  uint64_t block = from / kBlockEntries;
  size_t n =
      static_cast<size_t>(std::min<uint64_t>(kBlockEntries, r.entries - block * kBlockEntries));
  uint64_t offset = kRunHeaderBytes + block * (kBlockEntries * kEntryBytes + 8);
  buf_.resize(n * kEntryBytes + 8);
  auto got = r.file->ReadAt(offset, buf_.data(), buf_.size());
  if (!got.ok()) return got.status();
  if (*got < buf_.size() || GetU64(buf_.data() + n * kEntryBytes) !=
                                BlockChecksum(buf_.data(), n * kEntryBytes, run, block)) {
    return Internal("far-future index: " + r.file->path() + ": block " + std::to_string(block) +
                    (*got < buf_.size() ? " is cut short" : " does not match its checksum"));
  }
  size_t first = static_cast<size_t>(from - block * kBlockEntries);
  size_t count = std::min(out.size(), n - first);
  const char* p = buf_.data() + first * kEntryBytes;
  for (size_t i = 0; i < count; ++i, p += kEntryBytes) {
    out[i] = engine::FarEntry{static_cast<int64_t>(GetU64(p)), GetU64(p + 8), GetU32(p + 16),
                              GetU32(p + 20)};
  }
  return count;
}

void IndexFiles::Remove(uint64_t run) {
  auto it = runs_.find(run);
  if (it == runs_.end()) return;
  std::string path = it->second.file->path();
  runs_.erase(it);
  (void)fs_->Remove(path);
}

}  // namespace delayq::far
