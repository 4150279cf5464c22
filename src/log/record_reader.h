// RecordReader: reads one record of the log by its location
// (engine::MakeLocation: segment number and byte offset), for the far-future
// jobs whose PUT record is the only copy of them (engine::FarStore). Segment
// files are opened on demand and a few are kept open.
//
// Only written bytes are read: the owner makes sure the record was written
// (Log::Written, Log::WriteOut) before asking. A location in a segment that
// was deleted, or that holds something else, does not check out (checksums
// are seeded with the segment number): an error, never another job.
//
// Thread-safety: none; one owner (the queue's mutex).
#ifndef DELAYQ_LOG_RECORD_READER_H_
#define DELAYQ_LOG_RECORD_READER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "delayq/status.h"
#include "engine/journal.h"
#include "log/file.h"

namespace delayq::store {

class RecordReader {
 public:
  RecordReader(std::string dir, std::shared_ptr<FileSystem> fs);

  // The PUT record at `location`, decoded into `out`. Errors: kUnavailable
  // for I/O (path and the system's reason); kInternal when the bytes there
  // are not a whole PUT record of that segment (cut short, checksum, type).
  Status ReadPut(uint64_t location, engine::StoredJob* out);
  // Closes segment `number` if it is open (it was deleted or reused).
  void Forget(uint64_t number);
  // A repair dropped bytes [begin, end) of segment `number`: locations
  // given before it are read where their records went (Relocate), until
  // ClearDropped (once every location kept was relocated).
  void NoteDropped(uint64_t number, uint64_t begin, uint64_t end);
  uint64_t Relocate(uint64_t location) const;
  void ClearDropped() { dropped_.clear(); }
  bool has_dropped() const { return !dropped_.empty(); }

 private:
  Result<File*> Segment(uint64_t number);

  static constexpr size_t kMaxOpen = 32;
  std::string dir_;
  std::shared_ptr<FileSystem> fs_;
  std::map<uint64_t, std::unique_ptr<File>> open_;
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> dropped_;  // by segment
  std::string buf_;
};

}  // namespace delayq::store

#endif  // DELAYQ_LOG_RECORD_READER_H_
