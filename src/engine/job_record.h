// JobRecord: how one job is laid out in the JobArena.
//
// A 48-byte header followed by the id and the body in one allocation:
//
//   | header (48) | id (id_len bytes, or 8 for a generated id) | body or pointer |
//
// A generated id is kept as its 8-byte number and printed as 16 hex digits.
// A body that would make the record larger than JobArena::kMaxRecordBytes is
// kept in its own heap block and the record holds the pointer instead.
//
// Fields are ordered for packing; there is no padding. Which index the job
// sits in follows from `state`, and `pos` is its position there (see
// engine.h), so one field serves every index.
#ifndef DELAYQ_ENGINE_JOB_RECORD_H_
#define DELAYQ_ENGINE_JOB_RECORD_H_

#include <cstdint>
#include <cstring>
#include <string_view>

namespace delayq::engine {

struct JobRecord {
  int64_t run_at_ms;  // wall-clock due time; kept while reserved or buried
  uint64_t seq;       // order of adding: (created_at_ms << 20) | counter
  uint32_t ttr_ms;
  uint32_t priority;
  uint32_t max_attempts;  // 0 = unlimited
  uint32_t attempts;      // deliveries so far
  uint32_t pos;           // position in the heap that holds the job (delayed, ready, reserved)
  uint32_t topic;         // index into Engine::topics_
  uint32_t body_len;
  uint16_t id_len;  // 0: generated id, stored as 8 bytes
  uint8_t state;    // JobState
  uint8_t flags;    // kFlag*

  static constexpr uint8_t kFlagBodyOutOfLine = 1;
  static constexpr uint8_t kFlagHasLastError = 2;
  static constexpr int kSeqCounterBits = 20;

  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }

  size_t id_bytes() const { return id_len == 0 ? 8 : id_len; }
  bool body_out_of_line() const { return flags & kFlagBodyOutOfLine; }
  size_t record_bytes() const {
    return sizeof(JobRecord) + id_bytes() + (body_out_of_line() ? sizeof(char*) : body_len);
  }
  int64_t created_at_ms() const { return static_cast<int64_t>(seq >> kSeqCounterBits); }

  uint64_t generated_id() const {
    uint64_t v;
    std::memcpy(&v, data(), sizeof v);
    return v;
  }
  const char* body_ptr() const {
    if (!body_out_of_line()) return data() + id_bytes();
    const char* p;
    std::memcpy(&p, data() + id_bytes(), sizeof p);
    return p;
  }
  std::string_view body() const { return {body_ptr(), body_len}; }
};

static_assert(sizeof(JobRecord) == 48, "JobRecord header must stay 48 bytes (SPEC §12 memory)");

// Prints a generated id: 16 lower-case hex digits, so ids sort by time.
inline std::string_view FormatGeneratedId(uint64_t v, char (&buf)[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, v >>= 4) buf[i] = kHex[v & 15];
  return {buf, 16};
}

// The id of a record; `buf` holds the text of a generated id.
inline std::string_view IdOf(const JobRecord* r, char (&buf)[16]) {
  if (r->id_len == 0) return FormatGeneratedId(r->generated_id(), buf);
  return {r->data(), r->id_len};
}

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_JOB_RECORD_H_
