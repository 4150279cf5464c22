// The embedded store's on-disk format, version 4 (docs/log-format.md is the
// description for humans; this file and log_format.cc are the definition).
//
// A segment file starts with a 32-byte header:
//   magic "DQLOG\r\n\x1a" (8) | version u32 | zero u32 | segment number u64 | last seq u64
// followed by records:
//   checksum u32 | length u32 | type u8 | payload (length - 1 bytes)
// Integers in headers are little-endian. The checksum is the low 32 bits of
// XXH3-64, seeded with the segment number, over the length, type and payload
// bytes. Payloads use LEB128
// varints (signed values zigzag-encoded) and strings as varint length + bytes.
#ifndef DELAYQ_LOG_LOG_FORMAT_H_
#define DELAYQ_LOG_LOG_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "delayq/schedule.h"
#include "delayq/status.h"
#include "delayq/subscription.h"
#include "engine/job_record.h"
#include "engine/journal.h"

namespace delayq::store {

inline constexpr std::string_view kSegmentMagic{"DQLOG\r\n\x1a", 8};
// The version new segments get. Versions 1 to 3 are read too: version 3's
// records are version 4's without kSchedule records, version 2's are version
// 3's without kSubscription records (and flag 16), version 1's are version
// 2's without give-backs (flag 8) and kDedup records, so one decoder reads
// all four.
inline constexpr uint32_t kFormatVersion = 4;
inline constexpr uint32_t kOldestFormatVersion = 1;
inline constexpr size_t kSegmentHeaderBytes = 32;
inline constexpr size_t kRecordHeaderBytes = 9;  // checksum, length, type
// Larger lengths are damage, not records (a body is at most 1 GiB).
inline constexpr uint32_t kMaxRecordLength = (1u << 30) + (1u << 20);

enum class RecordType : uint8_t {
  kPut = 1,     // a job in full: added, replaced, or rewritten by compaction
  kUpdate = 2,  // a job's state, attempts, give-backs, run_at, deadline and last_error
  kRemove = 3,  // a job finished or deleted (or replaced)
  kPause = 4,   // a topic paused or resumed
  kDedup = 5,   // an add with an idempotency key (version 2)
  // A push subscription's instance put (in full) or removed (version 3).
  kSubscription = 6,
  // A schedule put or fired (in full: definition and firing state), or
  // removed (version 4; the last: IsRecordType knows).
  kSchedule = 7,
};

struct SegmentHeader {
  uint64_t number = 0;
  uint64_t last_seq = 0;              // every job seq in earlier segments is <= this
  uint32_t version = kFormatVersion;  // decoded: the segment's own; encoded: always kFormatVersion
};

void EncodeSegmentHeader(const SegmentHeader& h, std::string* out);
// Errors: kInternal naming what is wrong (magic, a version outside
// kOldestFormatVersion..kFormatVersion).
Status DecodeSegmentHeader(std::string_view bytes, SegmentHeader* h);

// Each appends one whole record (header included) to `out`, for the segment
// numbered `segment` (its checksum's seed).
void EncodePut(const engine::JobImage& job, uint64_t segment, std::string* out);
void EncodeUpdate(const engine::JobImage& job, uint64_t segment, std::string* out);
void EncodeRemove(const engine::JobImage& job, uint64_t segment,
                  std::string* out);  // id (or handle) and seq
void EncodePause(std::string_view topic, int64_t paused_until_ms, uint64_t segment,
                 std::string* out);
void EncodeDedup(const engine::DedupImage& add, uint64_t segment, std::string* out);
// An instance as stored (the store's times included).
void EncodeSubscription(const Subscription& s, uint64_t segment, std::string* out);
// The removal of the instance (name, url), or of every instance of `name`
// when url is empty.
void EncodeUnsubscribe(std::string_view name, std::string_view url, uint64_t segment,
                       std::string* out);
// A schedule as stored: definition, firing state and the store's fields.
void EncodeSchedule(const Schedule& s, uint64_t segment, std::string* out);
// The removal of the schedule `name`.
void EncodeUnschedule(std::string_view name, uint64_t segment, std::string* out);

// Upper bounds of one record's size, header included, from the lengths of
// its strings: what a change asks Log::Room for before it is made.
inline constexpr size_t kRecordBoundFixed = kRecordHeaderBytes + 2 + 8 * 10 + 4 * 10;
constexpr size_t PutBound(size_t id, size_t topic, size_t last_error, size_t body) {
  return kRecordBoundFixed + id + topic + last_error + body;
}
constexpr size_t UpdateBound(size_t id, size_t last_error) {
  return kRecordBoundFixed + id + last_error;
}
constexpr size_t DedupBound(size_t id, size_t key) { return kRecordBoundFixed + id + key; }
// A kSubscription record of `s` (a put) or of its name and url (a removal).
size_t SubscriptionBound(const Subscription& s);
constexpr size_t UnsubscribeBound(size_t name, size_t url) {
  return kRecordBoundFixed + name + url;
}
// A kSchedule record of `s` (a put or a firing) or of its name (a removal).
size_t ScheduleBound(const Schedule& s);
constexpr size_t UnscheduleBound(size_t name) { return kRecordBoundFixed + name; }

// One decoded record; string views point into the bytes it was read from,
// or into the record itself (a generated id's text): not copyable.
struct Record {
  Record() = default;
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;

  RecordType type = RecordType::kPut;
  engine::JobImage job;         // kPut, kUpdate, kRemove (id and seq)
  std::string_view topic;       // kPause
  int64_t paused_until_ms = 0;  // kPause
  engine::DedupImage dedup;     // kDedup
  // kSubscription: the instance; only its name and url for a removal.
  // Owned (unlike the views above): a replay keeps it as it is.
  std::unique_ptr<Subscription> subscription;
  // kSubscription: a removal (of every instance of the name if url is empty).
  bool unsubscribe = false;
  // kSchedule: the schedule as stored; only its name for a removal. Owned.
  std::unique_ptr<Schedule> schedule;
  // kSchedule: a removal.
  bool unschedule = false;
  uint64_t segment = 0;  // the segment it was read from (ReadRecord's)
  uint64_t offset = 0;   // and its byte offset there (set by the segment's reader)
  char id_buf[engine::kGeneratedIdBytes];
};

// What ReadRecord found at the front of `bytes`.
enum class ReadOutcome {
  kRecord,      // *record and *size are set
  kIncomplete,  // fewer bytes than the record's length says: more must be read, or, at the
                // end of the file, a record cut short or a damaged length (the reader
                // tells them apart: store::Log's recovery)
  kCorrupt,     // checksum or content wrong; *error says how
};
// `segment`: the number of the segment the bytes were read from.
ReadOutcome ReadRecord(std::string_view bytes, uint64_t segment, Record* record, size_t* size,
                       std::string* error);
// Whether `byte`, the ninth of a record, can be its type: a scan's first and
// cheapest test, which turns away nearly every position.
inline bool IsRecordType(uint8_t byte) {
  return byte >= static_cast<uint8_t>(RecordType::kPut) &&
         byte <= static_cast<uint8_t>(RecordType::kSchedule);
}
// What recovery looks for after a bad record (store::Log), in two steps so
// that a scan can bound what it spends: the size of the record that starts
// at the front of `bytes` if its length is possible, all of it is there and
// its content parses (cheap: strings are skipped by their lengths), else 0;
// then whether its checksum is `segment`'s (reads all of it). A record left
// by another segment (a reused file's old rest) parses but never matches.
size_t ParsedRecordSize(std::string_view bytes);
bool RecordChecksumMatches(std::string_view bytes, size_t size, uint64_t segment);

// The bytes a job's kPut record takes, near enough for space accounting.
size_t PutBytes(const engine::JobImage& job);
// Likewise for a subscription's kSubscription record.
size_t SubscriptionBytes(const Subscription& s);
// Likewise for a schedule's kSchedule record.
size_t ScheduleBytes(const Schedule& s);

}  // namespace delayq::store

#endif  // DELAYQ_LOG_LOG_FORMAT_H_
