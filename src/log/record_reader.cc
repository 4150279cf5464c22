#include "log/record_reader.h"

#include <utility>

#include "log/log.h"
#include "log/log_format.h"

namespace delayq::store {

RecordReader::RecordReader(std::string dir, std::shared_ptr<FileSystem> fs)
    : dir_(std::move(dir)), fs_(fs ? std::move(fs) : PosixFileSystem()) {}

Result<File*> RecordReader::Segment(uint64_t number) {
  auto it = open_.find(number);
  if (it != open_.end()) return it->second.get();
  auto file = fs_->Open(dir_ + "/" + Log::SegmentName(number), /*create=*/false);
  if (!file.ok()) return file.status();
  // The oldest segments are the least read again (far jobs move forward).
  if (open_.size() >= kMaxOpen) open_.erase(open_.begin());
  return open_.emplace(number, std::move(file).value()).first->second.get();
}

void RecordReader::Forget(uint64_t number) { open_.erase(number); }

void RecordReader::NoteDropped(uint64_t number, uint64_t begin, uint64_t end) {
  open_.erase(number);  // rewritten: another file now
  dropped_[number].emplace_back(begin, end);
}

uint64_t RecordReader::Relocate(uint64_t location) const {
  auto it = dropped_.find(engine::LocationSegment(location));
  if (it == dropped_.end()) return location;
  uint64_t offset = engine::LocationOffset(location);
  uint64_t back = 0;
  for (const auto& [begin, end] : it->second) {
    if (end <= offset) back += end - begin;
  }
  return engine::MakeLocation(it->first, offset - back);
}

Status RecordReader::ReadPut(uint64_t location, engine::StoredJob* out) {
  location = Relocate(location);
  uint64_t number = engine::LocationSegment(location);
  uint64_t offset = engine::LocationOffset(location);
  auto file = Segment(number);
  if (!file.ok()) return file.status();
  auto where = [&] { return (*file)->path() + " at byte " + std::to_string(offset); };
  // Most records fit the first read; a longer one is read again whole.
  size_t want = 4096;
  for (int tries = 0; tries < 2; ++tries) {
    buf_.resize(want);
    auto n = (*file)->ReadAt(offset, buf_.data(), want);
    if (!n.ok()) return n.status();
    buf_.resize(*n);
    Record rec;
    size_t size = 0;
    std::string error;
    ReadOutcome got = ReadRecord(buf_, number, &rec, &size, &error);
    if (got == ReadOutcome::kCorrupt) return Internal("log: " + where() + ": " + error);
    if (got == ReadOutcome::kIncomplete) {
      if (buf_.size() < 8 || *n < want) {
        return Internal("log: " + where() + ": the record is cut short");
      }
      uint32_t len = 0;
      for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(buf_[4 + i]);
      want = 8 + size_t{len};
      continue;
    }
    if (rec.type != RecordType::kPut) {
      return Internal("log: " + where() + ": not a job's PUT record");
    }
    const engine::JobImage& job = rec.job;
    out->fields = job;
    out->id.assign(job.id);
    out->topic.assign(job.topic);
    out->body.assign(job.body);
    out->last_error.assign(job.last_error);
    out->generated_id = job.generated_id;
    return Status::Ok();
  }
  return Internal("log: " + where() + ": the record is cut short");
}

}  // namespace delayq::store
