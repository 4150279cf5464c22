// The ops of RedisQueue: how each call becomes script calls, and how their
// replies become results. Formats: docs/redis-store.md.
#include "redis_store/redis_queue_ops.h"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>

namespace delayq::rq {
namespace {

constexpr size_t kMaxCommandBytes = 8 << 20;  // a shared command is closed past this
constexpr int kMaxReserveRetries = 2;

using redis::Reply;

// An array reply of `width` fields per entry.
Status CheckArray(const Reply& r, size_t width, std::string_view what) {
  if (!r.is_array() || r.elements().size() % width != 0) return Malformed(what, r);
  return Status::Ok();
}

// A job info array (14 fields) starting at `at`.
Status ParseInfo(const std::vector<Reply>& f, size_t at, JobInfo* info, int64_t* seq) {
  const std::string* id = AsText(f[at]);
  const std::string* topic = AsText(f[at + 1]);
  const std::string* state = AsText(f[at + 2]);
  const std::string* body = AsText(f[at + 3]);
  const std::string* receipt = AsText(f[at + 11]);
  const std::string* error = AsText(f[at + 12]);
  std::array<std::optional<int64_t>, 8> n = {AsInt(f[at + 4]),  AsInt(f[at + 5]), AsInt(f[at + 6]),
                                             AsInt(f[at + 7]),  AsInt(f[at + 8]), AsInt(f[at + 9]),
                                             AsInt(f[at + 10]), AsInt(f[at + 13])};
  std::optional<JobState> st = state ? ParseState(*state) : std::nullopt;
  if (!id || !topic || !st || !body || !receipt || !error ||
      std::any_of(n.begin(), n.end(), [](const auto& v) { return !v; })) {
    return Internal("redis store: malformed job info");
  }
  info->id = *id;
  info->topic = *topic;
  info->state = *st;
  info->body = *body;
  info->priority = static_cast<uint32_t>(*n[0]);
  info->ttr_ms = static_cast<uint32_t>(*n[1]);
  info->max_attempts = static_cast<uint32_t>(*n[2]);
  info->attempts = static_cast<uint32_t>(*n[3]);
  info->created_at_ms = *n[4];
  info->run_at_ms = *n[5];
  info->reserved_until_ms = *n[6];
  info->receipt = *receipt;
  info->last_error = *error;
  *seq = *n[7];
  return Status::Ok();
}

constexpr size_t kDeliveryFields = 3;  // fields per job of a reserve reply

// A reserve reply's job: its id, its record as stored after the reserve
// (docs/redis-store.md, "The record": state, attempts, priority, ttr_ms,
// max_attempts, run_at_ms (6 bytes), seq (7), topic (1-byte length),
// last_error (2-byte length), body; big-endian) and its deliveries given
// back. now_ms: the round's, which the script used for the TTR deadline;
// ttr_ms: the reserve's TTR override (0: the record's ttr_ms).
Status DecodeDelivery(std::vector<Reply>& f, size_t at, int64_t now_ms, uint32_t ttr_ms,
                      Delivery* d, int64_t* seq) {
  const std::string* id = AsText(f[at]);
  const std::string* rec = AsText(f[at + 1]);
  const std::optional<int64_t> given = AsInt(f[at + 2]);
  constexpr size_t kHead = 31;  // through the topic's length
  if (id == nullptr || rec == nullptr || !given || rec->size() < kHead + 2) {
    return Internal("redis store: malformed delivery");
  }
  auto u = [&](size_t from, size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>((*rec)[from + i]);
    return v;
  };
  const size_t topic_len = u(30, 1);
  if (u(0, 1) != 2 || rec->size() < kHead + topic_len + 2) {
    return Internal("redis store: malformed delivery");
  }
  const size_t err_len = u(kHead + topic_len, 2);
  const size_t body_at = kHead + topic_len + 2 + err_len;
  if (rec->size() < body_at) return Internal("redis store: malformed delivery");
  d->attempts = static_cast<uint32_t>(u(1, 4));
  d->priority = static_cast<uint32_t>(u(5, 4));
  d->ttr_ms = ttr_ms != 0 ? ttr_ms : static_cast<uint32_t>(u(9, 4));
  d->max_attempts = static_cast<uint32_t>(u(13, 4));
  d->run_at_ms = static_cast<int64_t>(u(17, 6));
  *seq = static_cast<int64_t>(u(23, 7));
  d->reserved_until_ms = now_ms + d->ttr_ms;
  d->topic.assign(*rec, kHead, topic_len);
  d->body.assign(*rec, body_at);
  // The delivery number: attempts never lowered by a give-back (unreserve).
  const auto delivery = static_cast<uint32_t>(d->attempts + static_cast<uint64_t>(*given));
  char receipt[25];
  std::snprintf(receipt, sizeof receipt, "%016llx%08x", static_cast<unsigned long long>(*seq),
                delivery);
  d->receipt.assign(receipt, 24);
  d->id = std::move(f[at].str());
  return Status::Ok();
}

// The status a batch script answered for one job.
Status JobStatus(const std::string& s, std::string_view id) {
  if (s == "ok") return Status::Ok();
  if (s == "not_found") return NotFound(QuoteId(id) + " does not exist");
  // "not_reserved <state>": named as the engine names it.
  if (s.rfind("not_reserved ", 0) == 0) {
    return NotReserved(QuoteId(id) + " is " + s.substr(13, 20) + ", not reserved");
  }
  if (s == "stale_receipt") {
    return StaleReceipt("receipt does not match the current reservation of " + QuoteId(id) +
                        " (its TTR may have run out and it was handed out again)");
  }
  return Internal("redis store: unexpected job status '" + s.substr(0, 40) + "'");
}

std::string Str(int64_t v) { return std::to_string(v); }

// A receipt as the scripts take it (docs/redis-store.md, "seq, created_at,
// receipts, ids"): "" stays "" (no check); the 24 lowercase hex digits of a
// receipt (seq, attempts) become 11 bytes, seq (7) and attempts (4),
// big-endian, which a script compares without formatting a receipt per job.
// RedisQueue refuses a receipt of another shape (ValidateReceipt) before it
// gets here; one that is well formed but can be no job's (upper case, as the
// engine compares receipts exactly, or a seq past 2^56) becomes "?", which
// matches none.
std::string ReceiptArg(std::string_view receipt) {
  if (receipt.empty()) return std::string();
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  // The first byte of the 8-byte seq field is 0 for every seq (< 2^53).
  if (receipt.size() != 24 || receipt[0] != '0' || receipt[1] != '0') return "?";
  std::string out(11, '\0');
  for (size_t i = 0; i < 11; ++i) {
    const int hi = hex(receipt[2 + 2 * i]);
    const int lo = hex(receipt[3 + 2 * i]);
    if (hi < 0 || lo < 0) return "?";
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

}  // namespace

std::optional<int64_t> AsInt(const Reply& r) {
  if (r.is_integer()) return r.integer();
  if (r.is_string() || r.is_status()) {
    const std::string& s = r.str();
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (end != s.c_str() + s.size()) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

const std::string* AsText(const Reply& r) {
  if (r.is_string() || r.is_status()) return &r.str();
  return nullptr;
}

Status Malformed(std::string_view what, const Reply& r) {
  return Internal("redis store: malformed " + std::string(what) +
                  " reply: " + r.ToString().substr(0, 200));
}

// --- scripts, context, helpers -------------------------------------------------

// The record: ready (1) if due by now_ms, else delayed (0); attempts 0;
// priority, ttr_ms, max_attempts (4 bytes each); run_at_ms (6); seq (7): the
// caller's seq floor; topic (1-byte length); no last_error (2-byte length
// 0); the body. Big-endian. The spec is valid (ValidateJobSpec), so each
// number fits its width.
std::string NewRecord(const JobSpec& spec, int64_t now_ms, int64_t run_at_ms, uint64_t seq) {
  constexpr size_t kFixed = 33;  // through last_error's length
  std::string r;
  r.reserve(kFixed + spec.topic.size() + spec.body.size());
  r.resize(kFixed + spec.topic.size());
  auto put = [&r](size_t at, size_t bytes, uint64_t v) {
    for (size_t i = bytes; i-- > 0; v >>= 8) r[at + i] = static_cast<char>(v & 0xff);
  };
  put(0, 1, run_at_ms <= now_ms ? 1 : 0);
  put(5, 4, spec.priority);
  put(9, 4, spec.ttr_ms);
  put(13, 4, spec.max_attempts);
  put(17, 6, static_cast<uint64_t>(run_at_ms));
  put(23, 7, seq);
  put(30, 1, spec.topic.size());
  r.replace(31, spec.topic.size(), spec.topic);
  // bytes 31 + topic .. 32 + topic: last_error's length, 0
  r += spec.body;
  return r;
}

const redis::Script& ScriptOf(Lua lua) {
  // Built once, never destroyed: ops may run while static destructors do.
  static const auto* scripts = [] {
    auto* all = new std::vector<redis::Script>();
    all->reserve(kLuaCount);
    for (const LuaScript& s : kLuaScripts) {
      all->emplace_back(std::string(s.text), std::string(s.sha1));
    }
    return all;
  }();
  return (*scripts)[static_cast<size_t>(lua)];
}

DueTimes::DueTimes(uint32_t buckets)
    : at_(std::make_unique<std::atomic<int64_t>[]>(buckets)), noted_(buckets, kNever) {
  for (uint32_t b = 0; b < buckets; ++b) at_[b].store(0, std::memory_order_relaxed);
}

bool DueTimes::Note(uint32_t bucket, int64_t ms) {
  noted_[bucket] = std::min(noted_[bucket], ms);
  if (ms >= At(bucket)) return false;
  at_[bucket].store(ms, std::memory_order_relaxed);
  return true;
}

void DueTimes::BeginPromote(uint32_t bucket) { noted_[bucket] = kNever; }

void DueTimes::EndPromote(uint32_t bucket, int64_t next) {
  at_[bucket].store(std::min(next, noted_[bucket]), std::memory_order_relaxed);
}

uint32_t Context::BucketOf(std::string_view id) const {
  return static_cast<uint32_t>(XXH3_64bits(id.data(), id.size()) % buckets);
}

uint64_t Context::NextSeqFloor(int64_t now_ms) {
  const uint64_t at_now = static_cast<uint64_t>(std::max<int64_t>(now_ms, 0)) * 1024;
  uint64_t last = seq_floor.load(std::memory_order_relaxed);
  uint64_t next;
  do {
    next = std::max(at_now, last + 1);
  } while (!seq_floor.compare_exchange_weak(last, next, std::memory_order_relaxed));
  return next;
}

std::string GenerateId(int64_t now_ms) {
  static std::mutex mu;
  static uint64_t last_ms = 0;  // GUARDED_BY(mu)
  static uint32_t counter = 0;  // GUARDED_BY(mu)
  static const uint32_t kProcess = [] {
    std::random_device rd;
    counter = rd();
    return rd() & 0xffff;
  }();
  uint64_t ms;
  uint32_t c;
  {
    std::lock_guard<std::mutex> lock(mu);
    last_ms = std::max(last_ms, static_cast<uint64_t>(std::max<int64_t>(now_ms, 0)));
    c = counter++;
    if (counter == 0) ++last_ms;  // keeps ids increasing past a wrap
    ms = last_ms;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%012" PRIx64 "%04x%08x",
                static_cast<uint64_t>(ms & 0xffffffffffffULL), kProcess, c);
  return std::string(buf, 24);
}

std::string QuoteId(std::string_view id) {
  std::string s = "job '";
  s.append(id.substr(0, 64));
  if (id.size() > 64) s += "...";
  s += "'";
  return s;
}

Status ErrorStatus(const Reply& reply) {
  std::string_view text = reply.is_error() ? std::string_view(reply.str()) : "";
  std::string_view code = text.substr(0, text.find(' '));
  std::string message(text.size() > code.size() ? text.substr(code.size() + 1) : "");
  for (Code c : {Code::kInvalidArgument, Code::kNotFound, Code::kExists, Code::kStaleReceipt,
                 Code::kNotReserved, Code::kTooLarge, Code::kUnauthorized, Code::kUnavailable,
                 Code::kInternal}) {
    if (CodeName(c) == code) return Status(c, message.empty() ? std::string(code) : message);
  }
  // Redis itself: out of memory, a script running too long, a replica, a
  // cluster reconfiguring, a server loading: the store is not there now.
  for (std::string_view busy : {"OOM", "BUSY", "READONLY", "LOADING", "MASTERDOWN", "CLUSTERDOWN",
                                "TRYAGAIN", "NOAUTH", "NOPERM", "NOREPLICAS"}) {
    if (code == busy) return Unavailable("redis: " + std::string(text));
  }
  return Internal("redis: " + std::string(text.substr(0, 300)));
}

// --- Batch ---------------------------------------------------------------------------

Batch::Batch(Context& ctx, int64_t now_ms) : ctx_(ctx), now_(now_ms), now_text_(Str(now_ms)) {}

bool ReadsRedisTime(Lua lua) {
  return lua == Lua::kSubscriptions || lua == Lua::kPushLedger || lua == Lua::kSchedules;
}

bool NeedsReplicas(Lua lua) {
  switch (lua) {
    case Lua::kInit:
    case Lua::kGet:
    case Lua::kPeek:
    case Lua::kHeads:
    case Lua::kTopics:
    case Lua::kStats:
    case Lua::kPromote:
    case Lua::kPushLedger:
      return false;
    default:
      return true;
  }
}

redis::Command Batch::Call(Lua lua, uint32_t bucket, std::vector<std::string> args) const {
  redis::Command c = redis::Command::Eval(ScriptOf(lua), {ctx_.tags[bucket]}, std::move(args));
  c.needs_replicas = NeedsReplicas(lua);
  return c;
}

std::vector<std::string> Batch::FirstArgs(Lua lua) const {
  if (ReadsRedisTime(lua)) return {};
  return {now_text_};
}

Batch::Slot Batch::Append(Lua lua, uint32_t bucket, std::vector<std::string>&& fields) {
  size_t bytes = 0;
  for (const std::string& f : fields) bytes += f.size() + 16;
  auto it = open_.find({lua, bucket});
  if (it == open_.end() || it->second.jobs >= kMaxBatch ||
      (it->second.jobs > 0 && it->second.bytes + bytes > kMaxCommandBytes)) {
    cmds_.push_back(Call(lua, bucket, FirstArgs(lua)));
    it = open_.insert_or_assign({lua, bucket}, Open{cmds_.size() - 1, 0, 0}).first;
  }
  Open& open = it->second;
  redis::Argv& argv = cmds_[open.cmd].argv;
  for (std::string& f : fields) argv.push_back(std::move(f));
  open.bytes += bytes;
  return Slot{open.cmd, open.jobs++};
}

Batch::Slot Batch::AppendTogether(Lua lua, uint32_t bucket,
                                  std::vector<std::vector<std::string>>&& entries) {
  size_t bytes = 0;
  for (const auto& fields : entries) {
    for (const std::string& f : fields) bytes += f.size() + 16;
  }
  auto it = open_.find({lua, bucket});
  if (it == open_.end() || it->second.jobs + entries.size() > kMaxBatch ||
      (it->second.jobs > 0 && it->second.bytes + bytes > kMaxCommandBytes)) {
    cmds_.push_back(Call(lua, bucket, FirstArgs(lua)));
    it = open_.insert_or_assign({lua, bucket}, Open{cmds_.size() - 1, 0, 0}).first;
  }
  Open& open = it->second;
  redis::Argv& argv = cmds_[open.cmd].argv;
  const Slot first{open.cmd, open.jobs};
  for (auto& fields : entries) {
    for (std::string& f : fields) argv.push_back(std::move(f));
  }
  open.bytes += bytes;
  open.jobs += entries.size();
  return first;
}

size_t Batch::Single(Lua lua, uint32_t bucket, std::vector<std::string> args) {
  if (!ReadsRedisTime(lua)) args.insert(args.begin(), now_text_);
  cmds_.push_back(Call(lua, bucket, std::move(args)));
  return cmds_.size() - 1;
}

Batch::GroupSlot Batch::AddHeads(uint32_t bucket, uint32_t m,
                                 const std::vector<std::string>& topics, bool promote) {
  if (promote) promote_.insert(bucket);
  return AddGroup(Lua::kHeads, bucket, m, topics, 0);
}

Batch::GroupSlot Batch::AddReserve(uint32_t bucket, uint32_t count,
                                   const std::vector<std::string>& topics, uint32_t ttr_ms) {
  return AddGroup(Lua::kReserve, bucket, count, topics, ttr_ms);
}

Batch::GroupSlot Batch::AddGroup(Lua lua, uint32_t bucket, uint32_t n,
                                 const std::vector<std::string>& topics, uint32_t ttr_ms) {
  n = std::clamp<uint32_t>(n, 1, kMaxBatch);
  auto it = open_shared_.find({lua, bucket, ttr_ms});
  if (it == open_shared_.end() || shared_[it->second].total + n > kMaxBatch ||
      shared_[it->second].topics + topics.size() > kMaxCallTopics) {
    SharedCall call;
    call.lua = lua;
    call.bucket = bucket;
    call.ttr_ms = ttr_ms;
    shared_.push_back(std::move(call));
    it = open_shared_.insert_or_assign({lua, bucket, ttr_ms}, shared_.size() - 1).first;
  }
  SharedCall& call = shared_[it->second];
  call.group_args.push_back(Str(n));
  call.group_args.push_back(Str(static_cast<int64_t>(topics.size())));
  call.group_args.insert(call.group_args.end(), topics.begin(), topics.end());
  call.total += n;
  call.topics += topics.size();
  return GroupSlot{it->second, call.groups++};
}

void Batch::Seal() {
  if (sealed_) return;
  sealed_ = true;
  // A bucket's promote goes before its heads calls in the same pipeline, so
  // they see what fell due.
  std::map<uint32_t, size_t> promotes;
  for (uint32_t bucket : promote_) {
    promotes[bucket] = Single(Lua::kPromote, bucket, {Str(kMaxBatch)});
  }
  for (SharedCall& call : shared_) {
    std::vector<std::string> args;
    args.reserve(call.group_args.size() + 2);
    if (call.lua == Lua::kHeads) {
      args.emplace_back("ready");
      if (auto p = promotes.find(call.bucket); p != promotes.end()) call.promote = p->second;
    } else {
      args.push_back(Str(static_cast<int64_t>(call.ttr_ms)));
    }
    args.push_back(Str(call.groups));
    for (std::string& a : call.group_args) args.push_back(std::move(a));
    call.group_args.clear();
    call.cmd = Single(call.lua, call.bucket, std::move(args));
  }
}

size_t Batch::PromoteBefore(GroupSlot slot) const { return shared_[slot.call].promote; }

void Batch::IndexReply(SharedCall& call, const Reply& reply) {
  // heads: next_due_ms, then per group n and n keys of 3 integers;
  // reserve: per group n and n deliveries of 3 fields (id, record, given).
  const bool heads = call.lua == Lua::kHeads;
  const size_t width = heads ? 3 : kDeliveryFields;
  const std::string_view what = heads ? "heads" : "reserve";
  if (!reply.is_array() || (heads && (reply.elements().empty() || !AsInt(reply.elements()[0])))) {
    call.shape = Malformed(what, reply);
    return;
  }
  const auto& f = reply.elements();
  size_t at = heads ? 1 : 0;
  for (uint32_t g = 0; g < call.groups; ++g) {
    std::optional<int64_t> n = at < f.size() ? AsInt(f[at]) : std::nullopt;
    if (!n || *n < 0 || static_cast<uint64_t>(*n) > (f.size() - at - 1) / width) {
      call.starts.clear();
      call.shape = Malformed(what, reply);
      return;
    }
    call.starts.push_back(at);
    at += 1 + static_cast<size_t>(*n) * width;
  }
  if (at != f.size()) {
    call.starts.clear();
    call.shape = Malformed(what, reply);
  }
}

Result<Batch::GroupPart> Batch::Part(GroupSlot slot) {
  SharedCall& call = shared_[slot.call];
  auto r = TakeReply(call.cmd);
  if (!r.ok()) return r.status();
  Reply& reply = **r;
  if (call.starts.empty() && call.shape.ok()) IndexReply(call, reply);
  if (!call.shape.ok()) return call.shape;
  auto& f = reply.elements();
  const size_t at = call.starts[slot.group];
  GroupPart part;
  part.fields = &f;
  part.first = at + 1;
  part.entries = static_cast<size_t>(*AsInt(f[at]));
  if (call.lua == Lua::kHeads) part.next_due_ms = *AsInt(f[0]);
  return part;
}

Result<const Reply*> Batch::ReplyOf(size_t cmd) const {
  if (cmd >= results_.size()) return Internal("redis store: no reply for a command");
  const Result<redis::Reply>& r = results_[cmd];
  if (!r.ok()) return r.status();
  if (r->is_error()) return ErrorStatus(*r);
  return &*r;
}

Result<Reply*> Batch::TakeReply(size_t cmd) {
  auto r = ReplyOf(cmd);
  if (!r.ok()) return r.status();
  return &*results_[cmd];
}

Result<const Reply*> Batch::Element(Slot slot) const {
  auto r = ReplyOf(slot.cmd);
  if (!r.ok()) return r.status();
  if (!(*r)->is_array() || slot.index >= (*r)->elements().size()) {
    return Malformed("batch", **r);
  }
  return &(*r)->elements()[slot.index];
}

void Batch::NoteDue(uint32_t bucket, int64_t ms) {
  if (ms < 0) return;
  auto [it, fresh] = due_.emplace(bucket, ms);
  if (!fresh) it->second = std::min(it->second, ms);
}

void Batch::NoteReady(std::string topic, uint32_t bucket) {
  ready_.emplace(std::move(topic), bucket);
}

// --- ops on one job -----------------------------------------------------------------

namespace {

class AddOp final : public Op {
 public:
  AddOp(const JobSpec& spec, AddDone done) : spec_(spec), done_(std::move(done)) {}

  void Plan(Batch& b) override {
    Context& c = b.ctx();
    const bool keyed = !spec_.idempotency_key.empty() && c.dedup_window_ms > 0;
    if (spec_.id.empty() || generated_) {
      generated_ = true;
      spec_.id = GenerateId(b.now());
      // A keyed add names its job by the key alone: every attempt must
      // reach the bucket that remembers it, the key's.
      if (keyed) {
        const uint32_t home = c.BucketOf(spec_.idempotency_key);
        while (c.BucketOf(spec_.id) != home) spec_.id = GenerateId(b.now());
      }
    }
    run_at_ = spec_.run_at_ms ? *spec_.run_at_ms : b.now() + spec_.delay_ms.value_or(0);
    bucket_ = c.BucketOf(spec_.id);
    // Built in place (an initializer list would copy every field twice). The
    // body is copied once, into the record (an add with a generated id may be
    // planned again, with a new id).
    std::vector<std::string> fields;
    fields.reserve(3);
    fields.push_back(spec_.id);
    std::string flags = spec_.replace ? "r" : "";
    if (keyed) {
      if (generated_) flags += 'g';
      flags += 'k' + std::to_string(c.dedup_window_ms) + ':' + spec_.idempotency_key;
    }
    fields.push_back(std::move(flags));
    fields.push_back(NewRecord(spec_, b.now(), run_at_, c.NextSeqFloor(b.now())));
    slot_ = b.Append(Lua::kAdd, bucket_, std::move(fields));
  }

  bool Absorb(Batch& b) override {
    auto e = b.Element(slot_);
    if (!e.ok()) {
      result_ = e.status();
      return true;
    }
    const std::string* s = AsText(**e);
    if (s && *s == "exists") {
      if (generated_) return false;  // another server's id: make a new one
      result_ = Exists(QuoteId(spec_.id) + " already exists (add with replace to update it)");
    } else if (s && s->starts_with("dedup ")) {
      result_ = ParseRemembered(**e, *s);
    } else if (s && (*s == "ready" || *s == "delayed")) {
      AddResult r;
      r.id = spec_.id;
      r.run_at_ms = run_at_;
      r.state = *s == "ready" ? JobState::kReady : JobState::kDelayed;
      if (r.state == JobState::kReady) {
        b.NoteReady(spec_.topic, bucket_);
      } else {
        b.NoteDue(bucket_, run_at_);
      }
      result_ = std::move(r);
    } else {
      result_ = Malformed("add", **e);
    }
    return true;
  }

  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  std::string_view id() const override { return generated_ ? std::string_view() : spec_.id; }
  Lua kind() const override { return Lua::kAdd; }

  // "dedup <state> <run_at_ms> <id>": what the first add with this key
  // answered (add.lua). Nothing changed, so nothing is noted.
  static Result<AddResult> ParseRemembered(const redis::Reply& reply, const std::string& s) {
    const size_t a = s.find(' ', 6);
    const size_t b = a == std::string::npos ? a : s.find(' ', a + 1);
    if (b == std::string::npos) return Malformed("add", reply);
    AddResult r;
    auto state = ParseState(std::string_view(s).substr(6, a - 6));
    char* end = nullptr;
    r.run_at_ms = std::strtoll(s.c_str() + a + 1, &end, 10);
    r.id = s.substr(b + 1);
    if (!state || end != s.c_str() + b || r.id.empty()) return Malformed("add", reply);
    r.state = *state;
    return r;
  }
  size_t bytes() const override { return spec_.body.size() + spec_.id.size() + 128; }

 private:
  JobSpec spec_;
  AddDone done_;
  bool generated_ = false;
  int64_t run_at_ = 0;
  uint32_t bucket_ = 0;
  Batch::Slot slot_;
  Result<AddResult> result_ = Internal("add: no result");
};

// finish, touch, delete: shared commands of (id[, receipt]) per job.
class BatchedIdOp final : public Op {
 public:
  BatchedIdOp(Lua lua, std::string_view id, std::string_view receipt, StatusDone done)
      : lua_(lua), id_(id), receipt_(ReceiptArg(receipt)), done_(std::move(done)) {}

  void Plan(Batch& b) override {
    std::vector<std::string> fields;
    fields.reserve(2);
    fields.push_back(id_);
    if (lua_ != Lua::kDelete) fields.push_back(receipt_);
    slot_ = b.Append(lua_, b.ctx().BucketOf(id_), std::move(fields));
  }
  bool Absorb(Batch& b) override {
    auto e = b.Element(slot_);
    if (!e.ok()) {
      result_ = e.status();
    } else if (const std::string* s = AsText(**e)) {
      result_ = JobStatus(*s, id_);
    } else {
      result_ = Malformed("batch", **e);
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  std::string_view id() const override { return id_; }
  Lua kind() const override { return lua_; }
  size_t bytes() const override { return id_.size() + receipt_.size() + 48; }

 private:
  const Lua lua_;
  const std::string id_;
  const std::string receipt_;
  StatusDone done_;
  Batch::Slot slot_;
  Status result_;
};

// release, bury, kick: one script call each.
class SingleIdOp final : public Op {
 public:
  SingleIdOp(Lua lua, std::string_view id, std::vector<std::string> args, int64_t delay_ms,
             StatusDone done)
      : lua_(lua), id_(id), args_(std::move(args)), delay_ms_(delay_ms), done_(std::move(done)) {}

  void Plan(Batch& b) override {
    bucket_ = b.ctx().BucketOf(id_);
    std::vector<std::string> args = {id_};
    args.insert(args.end(), args_.begin(), args_.end());
    cmd_ = b.Single(lua_, bucket_, std::move(args));
  }
  bool Absorb(Batch& b) override {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
      return true;
    }
    const std::string* s = AsText(**r);
    if (!s) {
      result_ = Malformed("script", **r);
    } else if (lua_ == Lua::kRelease && *s == "delayed") {
      b.NoteDue(bucket_, b.now() + delay_ms_);
    } else if ((lua_ == Lua::kRelease && *s == "ready") || lua_ == Lua::kKick ||
               lua_ == Lua::kUnreserve) {
      b.NoteReady("", bucket_);  // its topic is not known here; its wake message says
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  std::string_view id() const override { return id_; }
  Lua kind() const override { return lua_; }
  size_t bytes() const override {
    size_t n = id_.size() + 64;
    for (const std::string& a : args_) n += a.size();
    return n;
  }

 private:
  const Lua lua_;
  const std::string id_;
  const std::vector<std::string> args_;
  const int64_t delay_ms_;
  StatusDone done_;
  uint32_t bucket_ = 0;
  size_t cmd_ = 0;
  Status result_;
};

class GetOp final : public Op {
 public:
  GetOp(std::string_view id, JobDone done) : id_(id), done_(std::move(done)) {}
  void Plan(Batch& b) override { cmd_ = b.Single(Lua::kGet, b.ctx().BucketOf(id_), {id_}); }
  bool Absorb(Batch& b) override {
    auto r = b.ReplyOf(cmd_);
    if (!r.ok()) {
      result_ = r.status();
      return true;
    }
    JobInfo info;
    int64_t seq = 0;
    if (Status s = CheckArray(**r, 14, "get"); !s.ok() || (*r)->elements().empty()) {
      result_ = Malformed("get", **r);
    } else if (Status p = ParseInfo((*r)->elements(), 0, &info, &seq); !p.ok()) {
      result_ = p;
    } else {
      result_ = std::move(info);
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  std::string_view id() const override { return id_; }
  Lua kind() const override { return Lua::kGet; }

 private:
  const std::string id_;
  JobDone done_;
  size_t cmd_ = 0;
  Result<JobInfo> result_ = Internal("get: no result");
};

// --- ops over every bucket ------------------------------------------------------------

class PeekOp final : public Op {
 public:
  PeekOp(std::string_view topic, JobState state, JobDone done)
      : topic_(topic), state_(state), done_(std::move(done)) {}
  void Plan(Batch& b) override {
    first_ = b.commands().size();
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      b.Single(Lua::kPeek, i, {topic_, std::string(StateName(state_))});
    }
  }
  bool Absorb(Batch& b) override {
    std::optional<std::pair<std::array<int64_t, 3>, JobInfo>> best;
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      auto r = b.ReplyOf(first_ + i);
      if (!r.ok()) {
        result_ = r.status();
        return true;
      }
      if ((*r)->is_nil()) continue;
      JobInfo info;
      int64_t seq = 0;
      if (!(*r)->is_array() || (*r)->elements().size() != 14) {
        result_ = Malformed("peek", **r);
        return true;
      }
      if (Status s = ParseInfo((*r)->elements(), 0, &info, &seq); !s.ok()) {
        result_ = s;
        return true;
      }
      std::array<int64_t, 3> key = {info.priority, info.run_at_ms, seq};
      if (state_ == JobState::kDelayed) key = {info.run_at_ms, seq, 0};
      if (state_ == JobState::kBuried) key = {seq, 0, 0};
      if (!best || key < best->first) best.emplace(key, std::move(info));
    }
    if (best) {
      result_ = std::move(best->second);
    } else {
      result_ =
          NotFound("topic '" + topic_ + "' has no " + std::string(StateName(state_)) + " job");
    }
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kPeek; }
  bool Barrier() const override { return true; }

 private:
  const std::string topic_;
  const JobState state_;
  JobDone done_;
  size_t first_ = 0;
  Result<JobInfo> result_ = Internal("peek: no result");
};

// Up to n buried jobs of a topic, oldest first across buckets: `heads buried`
// everywhere, the n smallest seqs, `kick_topic` with each bucket's share;
// rounds of at most 1000 until n are kicked or none are left. On one bucket
// there is nothing to merge: `kick_topic` alone, one round for n <= 1000.
class KickTopicOp final : public Op {
 public:
  KickTopicOp(std::string_view topic, uint64_t n, CountDone done)
      : topic_(topic), left_(n), done_(std::move(done)) {}
  void Plan(Batch& b) override {
    cmds_.clear();
    const uint32_t m = static_cast<uint32_t>(std::min<uint64_t>(left_, kMaxBatch));
    if (!kicking_ && b.ctx().buckets == 1) {
      share_ = {{0, m}};
      full_ = true;  // as if heads had found m: a full kick_topic asks for more
      kicking_ = true;
    }
    if (!kicking_) {
      for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
        // One group: m seqs of the topic.
        cmds_.emplace_back(i, b.Single(Lua::kHeads, i, {"buried", "1", Str(m), "1", topic_}));
      }
      return;
    }
    for (const auto& [bucket, count] : share_) {
      cmds_.emplace_back(bucket, b.Single(Lua::kKickTopic, bucket, {topic_, Str(count)}));
    }
  }
  bool Absorb(Batch& b) override {
    if (!kicking_) {
      std::vector<std::pair<int64_t, uint32_t>> seqs;
      for (const auto& [bucket, cmd] : cmds_) {
        auto r = b.ReplyOf(cmd);
        if (!r.ok()) return Done(r.status());
        // next_due_ms, the number of seqs, the seqs.
        if (!(*r)->is_array() || (*r)->elements().size() < 2) return Done(Malformed("heads", **r));
        const auto& f = (*r)->elements();
        auto n = AsInt(f[1]);
        if (!n || static_cast<size_t>(*n) != f.size() - 2) return Done(Malformed("heads", **r));
        for (size_t i = 2; i < f.size(); ++i) {
          auto seq = AsInt(f[i]);
          if (!seq) return Done(Malformed("heads", **r));
          seqs.emplace_back(*seq, bucket);
        }
      }
      const size_t m = std::min<uint64_t>(left_, kMaxBatch);
      full_ = seqs.size() >= m;
      if (seqs.size() > m) {
        std::nth_element(seqs.begin(), seqs.begin() + m, seqs.end());
        seqs.resize(m);
      }
      share_.clear();
      for (const auto& s : seqs) ++share_[s.second];
      if (share_.empty()) return Done(Status::Ok());
      kicking_ = true;
      return false;
    }
    uint64_t kicked = 0;
    for (const auto& [bucket, cmd] : cmds_) {
      auto r = b.ReplyOf(cmd);
      if (!r.ok()) return Done(r.status());
      auto n = AsInt(**r);
      if (!n) return Done(Malformed("kick_topic", **r));
      kicked += static_cast<uint64_t>(*n);
    }
    // One bucket: no heads said how many there are; a full kick may leave more.
    if (b.ctx().buckets == 1) full_ = kicked >= share_.begin()->second;
    kicked_ += kicked;
    left_ -= std::min(left_, kicked);
    if (kicked > 0) b.NoteReady(topic_, kAllBuckets);
    kicking_ = false;
    // More may be buried than one round takes.
    if (left_ > 0 && full_ && kicked > 0) return false;
    return Done(Status::Ok());
  }
  void Fail(Status s) override { status_ = std::move(s); }
  void Complete() override {
    if (status_.ok()) {
      done_(kicked_);
    } else {
      done_(std::move(status_));
    }
  }
  Lua kind() const override { return Lua::kKickTopic; }
  bool Barrier() const override { return true; }
  bool MayTakeRounds(const Context& ctx) const override {
    return ctx.buckets > 1 || left_ > kMaxBatch;
  }

 private:
  bool Done(Status s) {
    status_ = std::move(s);
    return true;
  }
  const std::string topic_;
  uint64_t left_;
  CountDone done_;
  bool kicking_ = false;
  bool full_ = false;
  uint64_t kicked_ = 0;
  std::map<uint32_t, uint32_t> share_;
  std::vector<std::pair<uint32_t, size_t>> cmds_;
  Status status_;
};

class PauseOp final : public Op {
 public:
  PauseOp(std::string_view topic, int64_t until_ms, StatusDone done)
      : topic_(topic), until_ms_(until_ms), done_(std::move(done)) {}
  void Plan(Batch& b) override {
    first_ = b.commands().size();
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      b.Single(Lua::kPause, i, {topic_, Str(until_ms_)});
    }
  }
  bool Absorb(Batch& b) override {
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      auto r = b.ReplyOf(first_ + i);
      if (!r.ok()) {
        result_ = r.status();
        continue;
      }
      if (until_ms_ > 0) b.NoteDue(i, until_ms_);
    }
    if (until_ms_ == 0 && result_.ok()) b.NoteReady(topic_, kAllBuckets);
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kPause; }
  bool Barrier() const override { return true; }

 private:
  const std::string topic_;
  const int64_t until_ms_;
  StatusDone done_;
  size_t first_ = 0;
  Status result_;
};

// Sums `topics` replies (6 fields per topic) into *out by name.
Status SumTopics(const Reply& r, int64_t now_ms, std::map<std::string, TopicCounts>* out) {
  if (Status s = CheckArray(r, 6, "topics"); !s.ok()) return s;
  const auto& f = r.elements();
  for (size_t i = 0; i < f.size(); i += 6) {
    const std::string* name = AsText(f[i]);
    std::array<std::optional<int64_t>, 5> n = {AsInt(f[i + 1]), AsInt(f[i + 2]), AsInt(f[i + 3]),
                                               AsInt(f[i + 4]), AsInt(f[i + 5])};
    if (!name || std::any_of(n.begin(), n.end(), [](const auto& v) { return !v; })) {
      return Malformed("topics", r);
    }
    TopicCounts& t = (*out)[*name];
    t.info.name = *name;
    t.info.delayed += static_cast<uint64_t>(*n[0]);
    t.info.ready += static_cast<uint64_t>(*n[1]);
    t.info.reserved += static_cast<uint64_t>(*n[2]);
    t.info.buried += static_cast<uint64_t>(*n[3]);
    // Every bucket holds the same pause; one that ended but was not settled
    // yet reads as over.
    int64_t until = *n[4];
    if (until == -1 || t.paused_until_ms == -1) {
      t.paused_until_ms = -1;
    } else if (until > now_ms) {
      t.paused_until_ms = std::max(t.paused_until_ms, until);
    }
  }
  return Status::Ok();
}

class TopicsOp final : public Op {
 public:
  TopicsOp(std::optional<std::string> topic, TopicsDone done)
      : topic_(std::move(topic)), done_(std::move(done)) {}
  void Plan(Batch& b) override {
    first_ = b.commands().size();
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      std::vector<std::string> args;
      if (topic_) args.push_back(*topic_);
      b.Single(Lua::kTopics, i, std::move(args));
    }
  }
  bool Absorb(Batch& b) override {
    std::map<std::string, TopicCounts> sum;
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      auto r = b.ReplyOf(first_ + i);
      if (!r.ok()) {
        result_ = r.status();
        return true;
      }
      if (Status s = SumTopics(**r, b.now(), &sum); !s.ok()) {
        result_ = s;
        return true;
      }
    }
    std::vector<TopicCounts> out;
    for (auto& [name, t] : sum) {
      t.info.paused = t.paused_until_ms != 0;
      t.info.paused_for_ms =
          t.paused_until_ms > 0 ? t.paused_until_ms - b.now() : t.paused_until_ms;
      out.push_back(std::move(t));
    }
    result_ = std::move(out);
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kTopics; }
  bool Barrier() const override { return true; }

 private:
  const std::optional<std::string> topic_;
  TopicsDone done_;
  size_t first_ = 0;
  Result<std::vector<TopicCounts>> result_ = Internal("topics: no result");
};

class StatsOp final : public Op {
 public:
  explicit StatsOp(StatsDone done) : done_(std::move(done)) {}
  void Plan(Batch& b) override {
    first_ = b.commands().size();
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      b.Single(Lua::kStats, i, {});
      b.Single(Lua::kTopics, i, {});
    }
  }
  bool Absorb(Batch& b) override {
    StoreStats out;
    QueueStats& s = out.stats;
    std::map<std::string, TopicCounts> topics;
    for (uint32_t i = 0; i < b.ctx().buckets; ++i) {
      auto r = b.ReplyOf(first_ + 2 * i);
      if (!r.ok()) return Done(r.status());
      if (!(*r)->is_array() || (*r)->elements().size() != 14) return Done(Malformed("stats", **r));
      std::array<uint64_t*, 14> fields = {&s.jobs,         &s.delayed, &s.ready,    &s.reserved,
                                          &s.buried,       &s.added,   &s.replaced, &s.reserves,
                                          &s.finished,     &s.deleted, &s.released, &s.timed_out,
                                          &s.buried_total, &s.kicked};
      for (size_t k = 0; k < fields.size(); ++k) {
        auto v = AsInt((*r)->elements()[k]);
        if (!v) return Done(Malformed("stats", **r));
        *fields[k] += static_cast<uint64_t>(*v);
      }
      auto t = b.ReplyOf(first_ + 2 * i + 1);
      if (!t.ok()) return Done(t.status());
      if (Status st = SumTopics(**t, b.now(), &topics); !st.ok()) return Done(st);
    }
    for (const auto& [name, t] : topics) {
      const TopicInfo& i = t.info;
      if (i.delayed + i.ready + i.reserved + i.buried > 0 || t.paused_until_ms != 0) {
        out.topics.insert(name);
      }
    }
    result_ = std::move(out);
    return true;
  }
  void Fail(Status s) override { result_ = std::move(s); }
  void Complete() override { done_(std::move(result_)); }
  Lua kind() const override { return Lua::kStats; }
  bool Barrier() const override { return true; }

 private:
  bool Done(Status s) {
    result_ = std::move(s);
    return true;
  }
  StatsDone done_;
  size_t first_ = 0;
  Result<StoreStats> result_ = Internal("stats: no result");
};

}  // namespace

std::unique_ptr<Op> MakeAdd(const JobSpec& spec, AddDone done) {
  return std::make_unique<AddOp>(spec, std::move(done));
}
std::unique_ptr<Op> MakeFinish(std::string_view id, std::string_view receipt, StatusDone done) {
  return std::make_unique<BatchedIdOp>(Lua::kFinish, id, receipt, std::move(done));
}
std::unique_ptr<Op> MakeTouch(std::string_view id, std::string_view receipt, StatusDone done) {
  return std::make_unique<BatchedIdOp>(Lua::kTouch, id, receipt, std::move(done));
}
std::unique_ptr<Op> MakeDelete(std::string_view id, StatusDone done) {
  return std::make_unique<BatchedIdOp>(Lua::kDelete, id, "", std::move(done));
}
std::unique_ptr<Op> MakeRelease(std::string_view id, std::string_view receipt, int64_t delay_ms,
                                std::string_view error, StatusDone done) {
  return std::make_unique<SingleIdOp>(
      Lua::kRelease, id,
      std::vector<std::string>{ReceiptArg(receipt), Str(delay_ms), std::string(error)}, delay_ms,
      std::move(done));
}
std::unique_ptr<Op> MakeUnreserve(std::string_view id, std::string_view receipt, StatusDone done,
                                  bool surplus) {
  std::vector<std::string> args = {ReceiptArg(receipt)};
  if (surplus) args.emplace_back("surplus");
  return std::make_unique<SingleIdOp>(Lua::kUnreserve, id, std::move(args), 0, std::move(done));
}
std::unique_ptr<Op> MakeBury(std::string_view id, std::string_view receipt, std::string_view reason,
                             StatusDone done) {
  return std::make_unique<SingleIdOp>(
      Lua::kBury, id, std::vector<std::string>{ReceiptArg(receipt), std::string(reason)}, 0,
      std::move(done));
}
std::unique_ptr<Op> MakeKick(std::string_view id, StatusDone done) {
  return std::make_unique<SingleIdOp>(Lua::kKick, id, std::vector<std::string>{}, 0,
                                      std::move(done));
}
std::unique_ptr<Op> MakeGet(std::string_view id, JobDone done) {
  return std::make_unique<GetOp>(id, std::move(done));
}
std::unique_ptr<Op> MakePeek(std::string_view topic, JobState state, JobDone done) {
  return std::make_unique<PeekOp>(topic, state, std::move(done));
}
std::unique_ptr<Op> MakeKickTopic(std::string_view topic, uint64_t n, CountDone done) {
  return std::make_unique<KickTopicOp>(topic, n, std::move(done));
}
std::unique_ptr<Op> MakePause(std::string_view topic, int64_t until_ms, StatusDone done) {
  return std::make_unique<PauseOp>(topic, until_ms, std::move(done));
}
std::unique_ptr<Op> MakeTopics(std::optional<std::string> topic, TopicsDone done) {
  return std::make_unique<TopicsOp>(std::move(topic), std::move(done));
}
std::unique_ptr<Op> MakeStats(StatsDone done) { return std::make_unique<StatsOp>(std::move(done)); }

// --- reserve -----------------------------------------------------------------------------

uint32_t ReserveGroup::Wanted() const {
  uint32_t n = 0;
  for (const Attempt& a : attempts) {
    if (!a.finished) n += a.count;
  }
  return std::min(n, kMaxBatch);
}

std::vector<uint32_t> ReserveGroup::Scope(uint32_t buckets) const {
  std::set<uint32_t> scope;
  bool all = false;
  for (const Attempt& a : attempts) {
    if (a.finished) continue;
    all = all || a.all_buckets;
    for (uint32_t b : a.buckets) {
      if (b < buckets) scope.insert(b);
    }
  }
  if (all || scope.empty()) {
    std::vector<uint32_t> every(buckets);
    for (uint32_t i = 0; i < buckets; ++i) every[i] = i;
    return every;
  }
  return std::vector<uint32_t>(scope.begin(), scope.end());
}

void ReserveGroup::FailAll(const Status& s) {
  for (Attempt& a : attempts) {
    if (!a.finished) {
      a.finished = true;
      a.error = s;
    }
  }
}

void ReserveGroup::Fail(Status s) { FailAll(s); }

void ReserveGroup::PlanHeads(Batch& b, const std::vector<uint32_t>& buckets,
                             bool promote_known_due) {
  const uint32_t m = Wanted();
  const uint64_t stamp = b.ctx().ready_events.load(std::memory_order_relaxed);
  for (uint32_t bucket : buckets) {
    // What is due but not promoted yet is invisible to heads.
    const bool promote = !promote_known_due || b.ctx().due->Known(bucket, b.now());
    heads_cmds_.push_back({bucket, b.AddHeads(bucket, m, topics_, promote), stamp});
  }
}

void ReserveGroup::Plan(Batch& b) {
  heads_cmds_.clear();
  reserve_cmds_.clear();
  if (stage_ == Stage::kGiveBack) return PlanGiveBack(b);
  if (stage_ == Stage::kHeads) {
    std::vector<uint32_t> scope = Scope(b.ctx().buckets);
    if (const auto& is_short = b.ctx().short_of_replicas; is_short) {
      std::erase_if(scope, [&](uint32_t bucket) { return is_short(bucket); });
      if (scope.empty()) {
        refused_ = Unavailable(
            "redis: the masters of these jobs lack the replicas --redis-wait-replicas asks for "
            "(their last WAIT fell short): nothing is reserved there until one confirms again");
        return;  // nothing sent; Absorb answers
      }
    }
    direct_ = scope.size() == 1;
    if (direct_) {
      planned_ = {{scope[0], Wanted()}};  // nothing to merge: reserve at once
      stage_ = Stage::kReserve;
    } else {
      keys_.clear();
      PlanHeads(b, scope, /*promote_known_due=*/true);
      return;
    }
  }
  if (stage_ == Stage::kPromote) {
    PlanHeads(b, redo_, /*promote_known_due=*/false);
    return;
  }
  // kReserve. Attempts may have been withdrawn since the heads: take the
  // best of what is wanted now.
  if (!direct_) {
    std::vector<Key> all;
    for (const auto& [bucket, keys] : keys_) all.insert(all.end(), keys.begin(), keys.end());
    const size_t want = std::min<size_t>(Wanted(), all.size());
    std::partial_sort(all.begin(), all.begin() + want, all.end());
    planned_.clear();
    for (size_t i = 0; i < want; ++i) ++planned_[all[i].bucket];
  }
  for (auto& [bucket, count] : planned_) {
    if (count == 0) continue;
    const uint32_t n = std::min(count, kMaxBatch);
    const uint64_t stamp = b.ctx().ready_events.load(std::memory_order_relaxed);
    reserve_cmds_.push_back({bucket, b.AddReserve(bucket, n, topics_, ttr_ms_), n, stamp});
  }
}

bool ReserveGroup::AbsorbHeads(Batch& b) {
  redo_.clear();
  // A bucket whose master cannot be reached (it died, and its replica is not
  // promoted yet) is left out this round: the others are served. Only when
  // none answers is the reserve unavailable.
  Status unreachable;
  size_t read = 0;
  auto skip = [&](const HeadsCmd& h, Status s) {
    keys_[h.bucket].clear();
    unreachable = std::move(s);
  };
  for (const HeadsCmd& h : heads_cmds_) {
    const size_t promote = b.PromoteBefore(h.slot);
    if (promote != SIZE_MAX) {
      auto p = b.ReplyOf(promote);
      if (!p.ok() && p.status().code() == Code::kUnavailable) {
        skip(h, p.status());
        continue;
      }
      if (!p.ok()) {
        FailAll(p.status());
        return false;
      }
      if ((*p)->is_array() && (*p)->elements().size() == 3) {
        if (auto next = AsInt((*p)->elements()[2])) b.NoteDue(h.bucket, *next);
      }
    }
    auto part = b.Part(h.slot);
    if (!part.ok() && part.status().code() == Code::kUnavailable) {
      skip(h, part.status());
      continue;
    }
    if (!part.ok()) {
      FailAll(part.status());
      return false;
    }
    ++read;
    const int64_t next_due = part->next_due_ms;
    b.NoteDue(h.bucket, next_due);
    // Work due that nobody promoted yet (another server's job, a TTR that
    // ran out): promote and read again, once.
    if (next_due >= 0 && next_due <= b.now() && promote == SIZE_MAX) redo_.push_back(h.bucket);
    if (part->entries == 0 && (next_due < 0 || next_due > b.now())) {
      b.NoteEmpty({h.bucket, h.stamp, &topics_});
    }
    const std::vector<Reply>& f = *part->fields;
    std::vector<Key>& keys = keys_[h.bucket];
    keys.clear();
    for (size_t i = part->first; i < part->first + part->entries * 3; i += 3) {
      auto p = AsInt(f[i]);
      auto r = AsInt(f[i + 1]);
      auto s = AsInt(f[i + 2]);
      if (!p || !r || !s) {
        FailAll(Internal("redis store: malformed heads reply: a key that is not 3 integers"));
        return false;
      }
      keys.push_back(Key{*p, *r, *s, h.bucket});
    }
  }
  if (read == 0 && !unreachable.ok() && stage_ == Stage::kHeads) {  // (a redo read some before)
    FailAll(unreachable);
    return false;
  }
  return true;
}

bool ReserveGroup::AbsorbReserve(Batch& b) {
  struct Got {
    Key key;
    Delivery d;
  };
  std::vector<Got> got;
  Status error;
  bool short_bucket = false;
  for (const ReserveCmd& rc : reserve_cmds_) {
    const uint32_t bucket = rc.bucket;
    auto part = b.Part(rc.slot);  // the deliveries are moved out
    if (!part.ok()) {
      error = part.status();
      continue;
    }
    std::vector<Reply>& f = *part->fields;
    const size_t n = part->entries;
    if (n < rc.count) {
      // Fewer than asked: none of its topics has a ready job left there.
      b.NoteEmpty({bucket, rc.stamp, &topics_});
      if (!direct_) short_bucket = true;
    }
    int64_t earliest = kNever;
    for (size_t i = 0; i < n; ++i) {
      Got g;
      int64_t seq = 0;
      if (Status s =
              DecodeDelivery(f, part->first + i * kDeliveryFields, b.now(), ttr_ms_, &g.d, &seq);
          !s.ok()) {
        error = s;
        break;
      }
      g.key = Key{g.d.priority, g.d.run_at_ms, seq, bucket};
      earliest = std::min(earliest, g.d.reserved_until_ms);
      got.push_back(std::move(g));
    }
    // Its TTR deadlines: the timer promotes the bucket then.
    if (earliest != kNever) b.NoteDue(bucket, earliest);
  }
  std::sort(got.begin(), got.end(), [](const Got& x, const Got& y) { return x.key < y.key; });
  size_t next = 0;
  bool waiting = false;
  for (Attempt& a : attempts) {
    if (a.finished) continue;
    // As the engine cuts a batch: stop at the first job past the budget.
    uint64_t bytes = 0;
    while (next < got.size() && a.got.size() < a.count) {
      const uint64_t body = got[next].d.body.size();
      if (a.max_bytes != 0 && !a.got.empty() && bytes + body > a.max_bytes) break;
      bytes += body;
      a.got.push_back(std::move(got[next++].d));
    }
    if (a.got.empty() && error.ok() && short_bucket && retries_ < kMaxReserveRetries) {
      waiting = true;  // another server took what heads showed: look again
      continue;
    }
    a.finished = true;
    if (a.got.empty()) a.error = error;  // ok when the attempt simply found none
  }
  // What no attempt took (past the byte budgets) goes back before any
  // attempt is answered. An attempt that waits to look again cannot meet
  // it: it took what the attempts before it left, and there was none.
  for (; next < got.size(); ++next) surplus_.push_back(std::move(got[next].d));
  if (waiting) {
    ++retries_;
    stage_ = Stage::kHeads;
    return false;
  }
  if (!surplus_.empty()) {
    stage_ = Stage::kGiveBack;
    return false;
  }
  return true;
}

void ReserveGroup::PlanGiveBack(Batch& b) {
  give_back_cmds_.clear();
  for (const Delivery& d : surplus_) {
    const uint32_t bucket = b.ctx().BucketOf(d.id);
    give_back_cmds_.emplace_back(
        b.Single(Lua::kUnreserve, bucket, {d.id, ReceiptArg(d.receipt), "surplus"}), &d);
  }
}

bool ReserveGroup::AbsorbGiveBack(Batch& b) {
  // A job that could not be given back (Redis away) times out at its TTR,
  // as a delivery nobody acknowledges does.
  for (const auto& [cmd, d] : give_back_cmds_) {
    if (b.ReplyOf(cmd).ok()) b.NoteReady(d->topic, b.ctx().BucketOf(d->id));
  }
  give_back_cmds_.clear();
  surplus_.clear();
  stage_ = Stage::kReserve;  // done: the queue answers the attempts now
  return true;
}

bool ReserveGroup::Absorb(Batch& b) {
  if (!refused_.ok()) {
    FailAll(refused_);
    refused_ = Status::Ok();
    return true;
  }
  switch (stage_) {
    case Stage::kHeads:
    case Stage::kPromote: {
      const bool was_redo = stage_ == Stage::kPromote;
      if (!AbsorbHeads(b)) return true;
      if (!was_redo && !redo_.empty()) {
        stage_ = Stage::kPromote;
        return false;
      }
      size_t total = 0;
      for (const auto& [bucket, keys] : keys_) total += keys.size();
      if (total == 0) {
        for (Attempt& a : attempts) a.finished = true;
        return true;
      }
      stage_ = Stage::kReserve;
      return false;
    }
    case Stage::kReserve:
      return AbsorbReserve(b);
    case Stage::kGiveBack:
      return AbsorbGiveBack(b);
  }
  return true;
}

}  // namespace delayq::rq
