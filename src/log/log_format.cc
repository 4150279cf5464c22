#include "log/log_format.h"

#include <xxhash.h>

#include <cstring>
#include <vector>

#include "engine/job_record.h"

namespace delayq::store {
namespace {

constexpr uint8_t kFlagGenerated = 1;  // the engine made the id up
constexpr uint8_t kFlagError = 2;      // a last_error follows
constexpr uint8_t kFlagIdHandle = 4;   // the id is in the generated form of this seq: only
                                       // its handle part is stored
constexpr uint8_t kFlagGiveBacks = 8;  // (version 2) give_backs follows attempts
// (version 3) reserved with a TTR of the reserve's own: it follows the deadline
constexpr uint8_t kFlagReservationTtr = 16;

// The job's creation time, which run_at and deadlines are stored relative to
// (most are a delay away from it: a few bytes instead of six).
int64_t Base(uint64_t seq) {
  return static_cast<int64_t>(seq >> engine::JobRecord::kSeqCounterBits);
}

// An id of the generated form whose seq part is the record's seq is stored
// as its handle part alone; anything else as text.
bool IdIsHandle(std::string_view id, uint64_t seq, uint32_t* handle) {
  uint64_t id_seq = 0;
  return engine::ParseGeneratedId(id, &id_seq, handle) && id_seq == seq;
}

void PutU32(uint32_t v, char* p) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void PutU64(uint64_t v, char* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// Seeded with the segment number: a record left over from a segment file's
// earlier use (segment files are reused) does not check out in its new one.
uint32_t Checksum(const char* p, size_t n, uint64_t segment) {
  return static_cast<uint32_t>(XXH3_64bits_withSeed(p, n, segment));
}

// Reads a payload; every getter fails once the bytes run out.
class Reader {
 public:
  explicit Reader(std::string_view b) : p_(b.data()), end_(b.data() + b.size()) {}
  bool Varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return false;
      auto byte = static_cast<uint8_t>(*p_++);
      r |= uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) {
        *v = r;
        return true;
      }
    }
    return false;
  }
  bool U32(uint32_t* v) {
    uint64_t x;
    if (!Varint(&x) || x > 0xffffffffu) return false;
    *v = static_cast<uint32_t>(x);
    return true;
  }
  bool Signed(int64_t* v) {
    uint64_t x;
    if (!Varint(&x)) return false;
    *v = static_cast<int64_t>((x >> 1) ^ (~(x & 1) + 1));
    return true;
  }
  bool Fixed64(uint64_t* v) {
    if (end_ - p_ < 8) return false;
    *v = GetU64(p_);
    p_ += 8;
    return true;
  }
  bool Byte(uint8_t* v) {
    if (p_ == end_) return false;
    *v = static_cast<uint8_t>(*p_++);
    return true;
  }
  bool String(std::string_view* s) {
    uint64_t n;
    if (!Varint(&n) || n > static_cast<uint64_t>(end_ - p_)) return false;
    *s = std::string_view(p_, n);
    p_ += n;
    return true;
  }
  bool Done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

bool ValidState(uint8_t s) { return s <= static_cast<uint8_t>(JobState::kBuried); }

bool DecodeJobState(Reader& r, engine::JobImage* job, uint8_t* flags) {
  uint8_t state;
  int64_t run_at = 0;
  if (!r.Byte(flags) || !r.Byte(&state) || !ValidState(state) || !r.Varint(&job->seq) ||
      !r.Signed(&run_at)) {
    return false;
  }
  job->state = static_cast<JobState>(state);
  job->run_at_ms = Base(job->seq) + run_at;
  if (job->state == JobState::kReserved) {
    int64_t until = 0;
    if (!r.Signed(&until)) return false;
    job->reserved_until_ms = job->run_at_ms + until;
    if ((*flags & kFlagReservationTtr) && !r.U32(&job->reservation_ttr_ms)) return false;
  }
  return true;
}

// give_backs, present only when flagged (never in version 1).
bool GiveBacks(Reader& r, uint8_t flags, engine::JobImage* job) {
  return !(flags & kFlagGiveBacks) || r.U32(&job->give_backs);
}

// The id: text, or (kFlagIdHandle) the handle part of the generated form,
// whose text is then written into `buf`.
bool DecodeId(Reader& r, uint8_t flags, uint64_t seq, char (&buf)[engine::kGeneratedIdBytes],
              std::string_view* id) {
  if (!(flags & kFlagIdHandle)) return r.String(id);
  uint32_t handle = 0;
  if (!r.U32(&handle)) return false;
  *id = engine::FormatGeneratedId(seq, handle, buf);
  return true;
}

}  // namespace

void EncodeSegmentHeader(const SegmentHeader& h, std::string* out) {
  char buf[kSegmentHeaderBytes] = {};
  std::memcpy(buf, kSegmentMagic.data(), kSegmentMagic.size());
  PutU32(kFormatVersion, buf + 8);
  PutU64(h.number, buf + 16);
  PutU64(h.last_seq, buf + 24);
  out->append(buf, sizeof buf);
}

Status DecodeSegmentHeader(std::string_view bytes, SegmentHeader* h) {
  if (bytes.size() < kSegmentHeaderBytes) return Internal("segment header is cut short");
  if (bytes.substr(0, kSegmentMagic.size()) != kSegmentMagic) {
    return Internal("not a delayq log segment (wrong magic bytes)");
  }
  uint32_t version = GetU32(bytes.data() + 8);
  if (version < kOldestFormatVersion || version > kFormatVersion) {
    return Internal("log format version " + std::to_string(version) + ", this delayq reads " +
                    std::to_string(kOldestFormatVersion) + " to " + std::to_string(kFormatVersion));
  }
  h->version = version;
  h->number = GetU64(bytes.data() + 16);
  h->last_seq = GetU64(bytes.data() + 24);
  return Status::Ok();
}

namespace {

// Writes one record into `out`: room for the most it can take is made
// first, fields go in through a pointer, and the string is cut to what was
// written (one resize instead of a capacity check per byte).
class RecordWriter {
 public:
  RecordWriter(RecordType type, size_t max_payload, uint64_t segment, std::string* out)
      : out_(out), start_(out->size()), segment_(segment) {
    out->resize(start_ + kRecordHeaderBytes + max_payload);
    p_ = out->data() + start_ + 8;
    *p_++ = static_cast<char>(type);
  }
  void Byte(uint8_t v) { *p_++ = static_cast<char>(v); }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      *p_++ = static_cast<char>((v & 0x7f) | 0x80);
      v >>= 7;
    }
    *p_++ = static_cast<char>(v);
  }
  void Signed(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }
  void Fixed64(uint64_t v) {
    PutU64(v, p_);
    p_ += 8;
  }
  void String(std::string_view s) {
    Varint(s.size());
    if (!s.empty()) std::memcpy(p_, s.data(), s.size());  // an empty view's data may be null
    p_ += s.size();
  }
  // The id: its handle when it is this seq's generated form, else its text.
  void Id(const engine::JobImage& job) {
    uint32_t handle = job.handle;
    if (handle != 0 || IdIsHandle(job.id, job.seq, &handle)) {
      Varint(handle);
    } else {
      String(job.id);
    }
  }
  // Fills in the length and checksum, and cuts `out` to the record's end.
  void Finish() {
    char* start = out_->data() + start_;
    auto length = static_cast<uint32_t>(p_ - start - 8);
    PutU32(length, start + 4);
    PutU32(Checksum(start + 4, length + 4, segment_), start);
    out_->resize(static_cast<size_t>(p_ - out_->data()));
  }

  static constexpr size_t kVarint = 10;
  static size_t StringMax(std::string_view s) { return kVarint + s.size(); }

 private:
  std::string* out_;
  size_t start_;
  uint64_t segment_;
  char* p_;
};

uint8_t IdFlag(const engine::JobImage& job) {
  uint32_t handle = 0;
  return job.handle != 0 || IdIsHandle(job.id, job.seq, &handle) ? kFlagIdHandle : 0;
}

bool HasReservationTtr(const engine::JobImage& job) {
  return job.state == JobState::kReserved && job.reservation_ttr_ms != 0;
}

// The flags every job record but REMOVE shares.
uint8_t JobFlags(const engine::JobImage& job) {
  return (job.last_error.empty() ? 0 : kFlagError) | (job.give_backs == 0 ? 0 : kFlagGiveBacks) |
         (HasReservationTtr(job) ? kFlagReservationTtr : 0) | IdFlag(job);
}

}  // namespace

void EncodePut(const engine::JobImage& job, uint64_t segment, std::string* out) {
  size_t max = 2 + 9 * RecordWriter::kVarint + RecordWriter::StringMax(job.id) +
               RecordWriter::StringMax(job.topic) + RecordWriter::StringMax(job.last_error) +
               RecordWriter::StringMax(job.body);
  RecordWriter w(RecordType::kPut, max, segment, out);
  w.Byte((job.generated_id ? kFlagGenerated : 0) | JobFlags(job));
  w.Byte(static_cast<uint8_t>(job.state));
  w.Varint(job.seq);
  w.Signed(job.run_at_ms - Base(job.seq));
  if (job.state == JobState::kReserved) w.Signed(job.reserved_until_ms - job.run_at_ms);
  if (HasReservationTtr(job)) w.Varint(job.reservation_ttr_ms);
  w.Varint(job.ttr_ms);
  w.Varint(job.priority);
  w.Varint(job.max_attempts);
  w.Varint(job.attempts);
  if (job.give_backs != 0) w.Varint(job.give_backs);
  w.Id(job);
  w.String(job.topic);
  if (!job.last_error.empty()) w.String(job.last_error);
  w.String(job.body);
  w.Finish();
}

void EncodeUpdate(const engine::JobImage& job, uint64_t segment, std::string* out) {
  size_t max = 2 + 6 * RecordWriter::kVarint + RecordWriter::StringMax(job.id) +
               RecordWriter::StringMax(job.last_error);
  RecordWriter w(RecordType::kUpdate, max, segment, out);
  w.Byte(JobFlags(job));
  w.Byte(static_cast<uint8_t>(job.state));
  w.Varint(job.seq);
  w.Signed(job.run_at_ms - Base(job.seq));
  if (job.state == JobState::kReserved) w.Signed(job.reserved_until_ms - job.run_at_ms);
  if (HasReservationTtr(job)) w.Varint(job.reservation_ttr_ms);
  w.Varint(job.attempts);
  if (job.give_backs != 0) w.Varint(job.give_backs);
  w.Id(job);
  if (!job.last_error.empty()) w.String(job.last_error);
  w.Finish();
}

void EncodeRemove(const engine::JobImage& job, uint64_t segment, std::string* out) {
  RecordWriter w(RecordType::kRemove, 1 + RecordWriter::kVarint + RecordWriter::StringMax(job.id),
                 segment, out);
  w.Byte(IdFlag(job));
  w.Varint(job.seq);
  w.Id(job);
  w.Finish();
}

void EncodePause(std::string_view topic, int64_t paused_until_ms, uint64_t segment,
                 std::string* out) {
  RecordWriter w(RecordType::kPause, RecordWriter::kVarint + RecordWriter::StringMax(topic),
                 segment, out);
  w.Signed(paused_until_ms);
  w.String(topic);
  w.Finish();
}

// flags (1: the add named no id) · state · expires_ms · run_at_ms -
// expires_ms · key · id
void EncodeDedup(const engine::DedupImage& add, uint64_t segment, std::string* out) {
  size_t max = 2 + 2 * RecordWriter::kVarint + RecordWriter::StringMax(add.key) +
               RecordWriter::StringMax(add.id);
  RecordWriter w(RecordType::kDedup, max, segment, out);
  w.Byte(add.add_id.empty() ? kFlagGenerated : 0);
  w.Byte(static_cast<uint8_t>(add.state));
  w.Signed(add.expires_ms);
  w.Signed(add.run_at_ms - add.expires_ms);
  w.String(add.key);
  w.String(add.id);
  w.Finish();
}

// flags (1: a removal) · name · url, and for a put: created_ms ·
// renewed_ms - created_ms · ttl_ms · concurrency · timeout_ms ·
// retry.min_backoff_ms · retry.max_backoff_ms · retry.max_doublings ·
// rate_per_s (IEEE 754 double, 8 bytes LE) · topic count · topics · secret
// count · secrets. expires_ms is renewed_ms + ttl_ms (0 without a ttl).
namespace {
constexpr uint8_t kFlagUnsubscribe = 1;
constexpr size_t kSubscriptionFixed = 1 + 10 * RecordWriter::kVarint + 8;

size_t StringsMax(const std::vector<std::string>& v) {
  size_t n = RecordWriter::kVarint;
  for (const std::string& s : v) n += RecordWriter::StringMax(s);
  return n;
}
}  // namespace

size_t SubscriptionBound(const Subscription& s) {
  return kRecordHeaderBytes + kSubscriptionFixed + RecordWriter::StringMax(s.name) +
         RecordWriter::StringMax(s.url) + StringsMax(s.topics) + StringsMax(s.secrets);
}

void EncodeSubscription(const Subscription& s, uint64_t segment, std::string* out) {
  RecordWriter w(RecordType::kSubscription, SubscriptionBound(s) - kRecordHeaderBytes, segment,
                 out);
  w.Byte(0);
  w.String(s.name);
  w.String(s.url);
  w.Signed(s.created_ms);
  w.Signed(s.renewed_ms - s.created_ms);
  w.Signed(s.ttl_ms);
  w.Varint(s.concurrency);
  w.Varint(s.timeout_ms);
  w.Signed(s.retry.min_backoff_ms);
  w.Signed(s.retry.max_backoff_ms);
  w.Varint(s.retry.max_doublings);
  uint64_t rate = 0;
  static_assert(sizeof rate == sizeof s.rate_per_s);
  std::memcpy(&rate, &s.rate_per_s, sizeof rate);
  w.Fixed64(rate);
  w.Varint(s.topics.size());
  for (const std::string& t : s.topics) w.String(t);
  w.Varint(s.secrets.size());
  for (const std::string& k : s.secrets) w.String(k);
  w.Finish();
}

void EncodeUnsubscribe(std::string_view name, std::string_view url, uint64_t segment,
                       std::string* out) {
  RecordWriter w(RecordType::kSubscription,
                 1 + RecordWriter::StringMax(name) + RecordWriter::StringMax(url), segment, out);
  w.Byte(kFlagUnsubscribe);
  w.String(name);
  w.String(url);
  w.Finish();
}

// flags (1: a removal; 2: paused; 4: pause_on_failure) · name, and for a
// put: cron · timezone · topic · body · ttr_ms · priority · max_attempts ·
// catchup u8 · overlap u8 · catchup_window_ms · revision · version ·
// created_ms · updated_ms - created_ms · next_fire_at_ms · planned_version ·
// last_fire_at_ms · first_fire_at_ms · gap count · gaps (from, to - from) ·
// buffered_fire_at_ms · paused_at_ms · pause_reason · firings · skipped.
namespace {
constexpr uint8_t kFlagUnschedule = 1;
constexpr uint8_t kFlagPaused = 2;
constexpr uint8_t kFlagPauseOnFailure = 4;
constexpr size_t kScheduleNumbers = 17;  // varints besides the gaps and the strings
}  // namespace

size_t ScheduleBound(const Schedule& s) {
  return kRecordHeaderBytes + 3 + kScheduleNumbers * RecordWriter::kVarint +
         2 * RecordWriter::kVarint * s.gaps.size() + RecordWriter::StringMax(s.name) +
         RecordWriter::StringMax(s.cron) + RecordWriter::StringMax(s.timezone) +
         RecordWriter::StringMax(s.topic) + RecordWriter::StringMax(s.body) +
         RecordWriter::StringMax(s.pause_reason);
}

void EncodeSchedule(const Schedule& s, uint64_t segment, std::string* out) {
  RecordWriter w(RecordType::kSchedule, ScheduleBound(s) - kRecordHeaderBytes, segment, out);
  w.Byte((s.paused ? kFlagPaused : 0) | (s.pause_on_failure ? kFlagPauseOnFailure : 0));
  w.String(s.name);
  w.String(s.cron);
  w.String(s.timezone);
  w.String(s.topic);
  w.String(s.body);
  w.Varint(s.ttr_ms);
  w.Varint(s.priority);
  w.Varint(s.max_attempts);
  w.Byte(static_cast<uint8_t>(s.catchup));
  w.Byte(static_cast<uint8_t>(s.overlap));
  w.Signed(s.catchup_window_ms);
  w.Varint(s.revision);
  w.Varint(s.version);
  w.Signed(s.created_ms);
  w.Signed(s.updated_ms - s.created_ms);
  w.Signed(s.next_fire_at_ms);
  w.Varint(s.planned_version);
  w.Signed(s.last_fire_at_ms);
  w.Signed(s.first_fire_at_ms);
  w.Varint(s.gaps.size());
  for (const auto& [from, to] : s.gaps) {
    w.Signed(from);
    w.Signed(to - from);
  }
  w.Signed(s.buffered_fire_at_ms);
  w.Signed(s.paused_at_ms);
  w.String(s.pause_reason);
  w.Varint(s.firings);
  w.Varint(s.skipped);
  w.Finish();
}

void EncodeUnschedule(std::string_view name, uint64_t segment, std::string* out) {
  RecordWriter w(RecordType::kSchedule, 1 + RecordWriter::StringMax(name), segment, out);
  w.Byte(kFlagUnschedule);
  w.String(name);
  w.Finish();
}

namespace {

// A count of strings, then the strings; at most `max` (more is damage: a
// scan past a bad record decodes unchecked bytes, and must not allocate for
// a count they make up).
bool DecodeStrings(Reader& r, size_t max, std::vector<std::string>* out) {
  uint64_t n = 0;
  if (!r.Varint(&n) || n > max) return false;
  out->reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    std::string_view s;
    if (!r.String(&s)) return false;
    out->emplace_back(s);
  }
  return true;
}

bool DecodeSubscription(Reader& r, Record* record) {
  uint8_t flags = 0;
  std::string_view name;
  std::string_view url;
  if (!r.Byte(&flags) || (flags & ~kFlagUnsubscribe) != 0 || !r.String(&name) || !r.String(&url)) {
    return false;
  }
  auto s = std::make_unique<Subscription>();
  s->name = name;
  s->url = url;
  record->unsubscribe = (flags & kFlagUnsubscribe) != 0;
  if (!record->unsubscribe) {
    int64_t renewed = 0;
    uint64_t rate = 0;
    if (!r.Signed(&s->created_ms) || !r.Signed(&renewed) || !r.Signed(&s->ttl_ms) ||
        !r.U32(&s->concurrency) || !r.U32(&s->timeout_ms) || !r.Signed(&s->retry.min_backoff_ms) ||
        !r.Signed(&s->retry.max_backoff_ms) || !r.U32(&s->retry.max_doublings) ||
        !r.Fixed64(&rate) || !DecodeStrings(r, kMaxSubscriptionTopics, &s->topics) ||
        !DecodeStrings(r, kMaxSubscriptionSecrets, &s->secrets)) {
      return false;
    }
    s->renewed_ms = s->created_ms + renewed;
    s->expires_ms = s->ttl_ms == 0 ? 0 : s->renewed_ms + s->ttl_ms;
    std::memcpy(&s->rate_per_s, &rate, sizeof rate);
  }
  record->subscription = std::move(s);
  return true;
}

bool DecodeScheduleState(Reader& r, Schedule* s) {
  std::string_view pause_reason;
  uint64_t gaps = 0;
  if (!r.Signed(&s->next_fire_at_ms) || !r.Varint(&s->planned_version) ||
      !r.Signed(&s->last_fire_at_ms) || !r.Signed(&s->first_fire_at_ms) || !r.Varint(&gaps) ||
      gaps > kMaxScheduleGaps) {
    return false;
  }
  s->gaps.reserve(gaps);
  for (uint64_t i = 0; i < gaps; ++i) {
    int64_t from = 0;
    int64_t span = 0;
    if (!r.Signed(&from) || !r.Signed(&span)) return false;
    s->gaps.emplace_back(from, from + span);
  }
  if (!r.Signed(&s->buffered_fire_at_ms) || !r.Signed(&s->paused_at_ms) ||
      !r.String(&pause_reason) || !r.Varint(&s->firings) || !r.Varint(&s->skipped)) {
    return false;
  }
  s->pause_reason = pause_reason;
  return true;
}

bool DecodeSchedule(Reader& r, Record* record) {
  uint8_t flags = 0;
  std::string_view name;
  if (!r.Byte(&flags) || (flags & ~(kFlagUnschedule | kFlagPaused | kFlagPauseOnFailure)) != 0 ||
      !r.String(&name)) {
    return false;
  }
  auto s = std::make_unique<Schedule>();
  s->name = name;
  record->unschedule = (flags & kFlagUnschedule) != 0;
  if (!record->unschedule) {
    std::string_view cron, timezone, topic, body;
    uint8_t catchup = 0;
    uint8_t overlap = 0;
    int64_t updated = 0;
    if (!r.String(&cron) || !r.String(&timezone) || !r.String(&topic) || !r.String(&body) ||
        !r.U32(&s->ttr_ms) || !r.U32(&s->priority) || !r.U32(&s->max_attempts) ||
        !r.Byte(&catchup) || catchup > static_cast<uint8_t>(Catchup::kAll) || !r.Byte(&overlap) ||
        overlap > static_cast<uint8_t>(Overlap::kBufferOne) || !r.Signed(&s->catchup_window_ms) ||
        !r.Varint(&s->revision) || !r.Varint(&s->version) || !r.Signed(&s->created_ms) ||
        !r.Signed(&updated) || !DecodeScheduleState(r, s.get())) {
      return false;
    }
    s->cron = cron;
    s->timezone = timezone;
    s->topic = topic;
    s->body = body;
    s->catchup = static_cast<Catchup>(catchup);
    s->overlap = static_cast<Overlap>(overlap);
    s->updated_ms = s->created_ms + updated;
    s->paused = (flags & kFlagPaused) != 0;
    s->pause_on_failure = (flags & kFlagPauseOnFailure) != 0;
  } else if (flags != kFlagUnschedule) {
    return false;
  }
  record->schedule = std::move(s);
  return true;
}

bool DecodeDedup(Reader& r, engine::DedupImage* add) {
  uint8_t flags = 0;
  uint8_t state = 0;
  int64_t run_at = 0;
  if (!r.Byte(&flags) || !r.Byte(&state) || !ValidState(state) || !r.Signed(&add->expires_ms) ||
      !r.Signed(&run_at) || !r.String(&add->key) || !r.String(&add->id)) {
    return false;
  }
  add->state = static_cast<JobState>(state);
  add->run_at_ms = add->expires_ms + run_at;
  add->add_id = (flags & kFlagGenerated) ? std::string_view() : add->id;
  return true;
}

// The length of the record at the front of `bytes`, once its header is there
// and the length is possible. `error`: may be null.
ReadOutcome ReadLength(std::string_view bytes, uint32_t* length, std::string* error) {
  if (bytes.size() < kRecordHeaderBytes) return ReadOutcome::kIncomplete;
  *length = GetU32(bytes.data() + 4);
  if (*length == 0 || *length > kMaxRecordLength) {
    if (error != nullptr) *error = "record length " + std::to_string(*length) + " is impossible";
    return ReadOutcome::kCorrupt;
  }
  if (bytes.size() - 8 < *length) return ReadOutcome::kIncomplete;
  return ReadOutcome::kRecord;
}

bool ChecksumMatches(std::string_view bytes, uint32_t length, uint64_t segment) {
  return Checksum(bytes.data() + 4, length + 4, segment) == GetU32(bytes.data());
}

// Decodes the whole record of `length` at the front of `bytes` (its checksum
// is the caller's). `error`: may be null (a scan past damage, which tries
// every position, would pay for the text at each).
ReadOutcome DecodeRecord(std::string_view bytes, uint32_t length, Record* record, size_t* size,
                         std::string* error) {
  *size = 8 + size_t{length};
  auto type = static_cast<uint8_t>(bytes[8]);
  Reader r(bytes.substr(kRecordHeaderBytes, length - 1));
  record->type = RecordType::kPut;
  record->job = engine::JobImage{};
  record->topic = {};
  record->paused_until_ms = 0;
  record->dedup = engine::DedupImage{};
  engine::JobImage& job = record->job;
  bool ok = false;
  uint8_t flags = 0;
  switch (type) {
    case static_cast<uint8_t>(RecordType::kPut):
      record->type = RecordType::kPut;
      ok = DecodeJobState(r, &job, &flags) && r.U32(&job.ttr_ms) && r.U32(&job.priority) &&
           r.U32(&job.max_attempts) && r.U32(&job.attempts) && GiveBacks(r, flags, &job) &&
           DecodeId(r, flags, job.seq, record->id_buf, &job.id) && r.String(&job.topic) &&
           (!(flags & kFlagError) || r.String(&job.last_error)) && r.String(&job.body);
      job.generated_id = flags & kFlagGenerated;
      break;
    case static_cast<uint8_t>(RecordType::kUpdate):
      record->type = RecordType::kUpdate;
      ok = DecodeJobState(r, &job, &flags) && r.U32(&job.attempts) && GiveBacks(r, flags, &job) &&
           DecodeId(r, flags, job.seq, record->id_buf, &job.id) &&
           (!(flags & kFlagError) || r.String(&job.last_error));
      break;
    case static_cast<uint8_t>(RecordType::kRemove):
      record->type = RecordType::kRemove;
      ok = r.Byte(&flags) && r.Varint(&job.seq) &&
           DecodeId(r, flags, job.seq, record->id_buf, &job.id);
      break;
    case static_cast<uint8_t>(RecordType::kPause):
      record->type = RecordType::kPause;
      ok = r.Signed(&record->paused_until_ms) && r.String(&record->topic);
      break;
    case static_cast<uint8_t>(RecordType::kDedup):
      record->type = RecordType::kDedup;
      ok = DecodeDedup(r, &record->dedup);
      break;
    case static_cast<uint8_t>(RecordType::kSubscription):
      record->type = RecordType::kSubscription;
      record->subscription.reset();
      record->unsubscribe = false;
      ok = DecodeSubscription(r, record);
      break;
    case static_cast<uint8_t>(RecordType::kSchedule):
      record->type = RecordType::kSchedule;
      record->schedule.reset();
      record->unschedule = false;
      ok = DecodeSchedule(r, record);
      break;
    default:
      if (error != nullptr) *error = "unknown record type " + std::to_string(type);
      return ReadOutcome::kCorrupt;
  }
  if (!ok || !r.Done()) {
    if (error != nullptr) {
      *error = "record content does not parse (type " + std::to_string(type) + ")";
    }
    return ReadOutcome::kCorrupt;
  }
  return ReadOutcome::kRecord;
}

}  // namespace

ReadOutcome ReadRecord(std::string_view bytes, uint64_t segment, Record* record, size_t* size,
                       std::string* error) {
  uint32_t length = 0;
  if (ReadOutcome o = ReadLength(bytes, &length, error); o != ReadOutcome::kRecord) return o;
  if (!ChecksumMatches(bytes, length, segment)) {
    *error = "record checksum does not match";
    return ReadOutcome::kCorrupt;
  }
  record->segment = segment;
  return DecodeRecord(bytes, length, record, size, error);
}

size_t ParsedRecordSize(std::string_view bytes) {
  if (bytes.size() < kRecordHeaderBytes || !IsRecordType(static_cast<uint8_t>(bytes[8]))) return 0;
  uint32_t length = 0;
  if (ReadLength(bytes, &length, nullptr) != ReadOutcome::kRecord) return 0;
  Record record;
  size_t size = 0;
  return DecodeRecord(bytes, length, &record, &size, nullptr) == ReadOutcome::kRecord ? size : 0;
}

bool RecordChecksumMatches(std::string_view bytes, size_t size, uint64_t segment) {
  return size >= kRecordHeaderBytes && size <= bytes.size() &&
         ChecksumMatches(bytes, static_cast<uint32_t>(size - 8), segment);
}

size_t PutBytes(const engine::JobImage& job) {
  size_t id = job.handle != 0 ? engine::kGeneratedIdBytes : job.id.size();
  return kRecordHeaderBytes + 24 + id + job.topic.size() + job.body.size();
}
// (id.size() overstates a generated id by ~20 bytes; the same on add and
// removal, so the sum stays true to within that.)

size_t SubscriptionBytes(const Subscription& s) {
  // Header, flags, the numbers at a typical size, and a length byte a string.
  size_t n = kRecordHeaderBytes + 1 + 30 + 8 + 2 + s.name.size() + s.url.size();
  for (const std::string& t : s.topics) n += 1 + t.size();
  for (const std::string& k : s.secrets) n += 1 + k.size();
  return n;
}

size_t ScheduleBytes(const Schedule& s) {
  // Header, flags, the numbers at a typical size, and a length byte a string.
  return kRecordHeaderBytes + 3 + 60 + 12 * s.gaps.size() + 6 + s.name.size() + s.cron.size() +
         s.timezone.size() + s.topic.size() + s.body.size() + s.pause_reason.size();
}

}  // namespace delayq::store
