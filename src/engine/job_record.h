// JobRecord: how one job is laid out in the JobArena.
//
// A 48-byte header followed by the id and the body in one allocation:
//
//   | header (48) | id (id_len bytes; none for a generated id) | body or pointer |
//
// A generated id takes no space: it is derived from seq and the handle.
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
  // The fields heap operations touch come first, so that they share a cache
  // line more often (records are 8-byte aligned, not 64-byte).
  int64_t run_at_ms;  // wall-clock due time; kept while reserved or buried
  uint64_t seq;       // order of adding: (created_at_ms << 20) | counter
  uint32_t pos;       // position in the heap that holds the job (delayed, ready, reserved)
  uint32_t priority;  // lower first
  uint32_t ttr_ms;
  uint32_t max_attempts;  // 0 = unlimited
  uint32_t attempts;      // deliveries so far, less those given back (unreserve)
  uint32_t topic;         // index into Engine::topics_
  uint32_t body_len;
  uint16_t id_len;  // 0: generated id (derived, not stored; see FormatGeneratedId)
  uint8_t state;    // JobState, or kStateFree
  uint8_t flags;    // kFlag*

  static constexpr uint8_t kFlagBodyOutOfLine = 1;
  static constexpr uint8_t kFlagHasLastError = 2;
  // Some delivery was given back (Engine::give_backs_ holds how many).
  static constexpr uint8_t kFlagGivenBack = 4;
  // The id is spelled out but was generated (a job restored, or brought
  // back from far: its id names a handle that is not its own).
  static constexpr uint8_t kFlagGeneratedId = 8;
  static constexpr int kSeqCounterBits = 20;

  char* data() { return reinterpret_cast<char*>(this + 1); }
  const char* data() const { return reinterpret_cast<const char*>(this + 1); }

  size_t id_bytes() const { return id_len; }
  bool body_out_of_line() const { return flags & kFlagBodyOutOfLine; }
  size_t record_bytes() const {
    return sizeof(JobRecord) + id_bytes() + (body_out_of_line() ? sizeof(char*) : body_len);
  }
  int64_t created_at_ms() const { return static_cast<int64_t>(seq >> kSeqCounterBits); }

  const char* body_ptr() const {
    if (!body_out_of_line()) return data() + id_bytes();
    const char* p;
    std::memcpy(&p, data() + id_bytes(), sizeof p);
    return p;
  }
  std::string_view body() const { return {body_ptr(), body_len}; }
};

static_assert(sizeof(JobRecord) == 48, "JobRecord header must stay 48 bytes (SPEC §12 memory)");

inline constexpr uint8_t kStateFree = 0xff;  // JobRecord::state of a freed slot
inline constexpr size_t kGeneratedIdBytes = 24;

// Writes `digits` lower-case hex digits of v.
inline void WriteHex(uint64_t v, int digits, char* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = digits - 1; i >= 0; --i, v >>= 4) out[i] = kHex[v & 15];
}

// A generated id is not stored anywhere: it is 16 hex digits of the add's
// seq (so ids sort by time) followed by 8 of the record's handle, so the id
// itself says where the job is and needs no entry in the id table.
inline std::string_view FormatGeneratedId(uint64_t seq, uint32_t handle,
                                          char (&buf)[kGeneratedIdBytes]) {
  WriteHex(seq, 16, buf);
  WriteHex(handle, 8, buf + 16);
  return {buf, kGeneratedIdBytes};
}

// Parses the generated form; false for anything else (the caller must still
// check that a live job is there).
inline bool ParseGeneratedId(std::string_view id, uint64_t* seq, uint32_t* handle) {
  if (id.size() != kGeneratedIdBytes) return false;
  uint64_t v = 0;
  for (size_t i = 0; i < kGeneratedIdBytes; ++i) {
    char c = id[i];
    unsigned d;
    if (c >= '0' && c <= '9') {
      d = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      d = static_cast<unsigned>(c - 'a' + 10);
    } else {
      return false;
    }
    v = (v << 4) | d;
    if (i == 15) {
      *seq = v;
      v = 0;
    }
  }
  *handle = static_cast<uint32_t>(v);
  return true;
}

// The id of the record at handle `h`; `buf` holds the text of a generated id.
inline std::string_view IdOf(const JobRecord* r, uint32_t h, char (&buf)[kGeneratedIdBytes]) {
  if (r->id_len == 0) return FormatGeneratedId(r->seq, h, buf);
  return {r->data(), r->id_len};
}

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_JOB_RECORD_H_
