// How the engine works, in brief (engine.h has the index map):
//
// A job moves between indexes by Detach() + Attach*(); the record never moves
// in memory except on replace, which re-creates it. Every public call starts
// with Advance(): it reads both clocks once and does whatever fell due since
// the last call, so results never depend on how punctual the owner's timer
// was. Jobs that become ready are not handed out on the spot: their topic is
// queued (MarkServe) and ServePending() gives them to waiting reserves, oldest
// waiter first, once the call's state changes are complete.
#include "engine/engine.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "common/ack.h"
#include "common/log.h"

namespace delayq::engine {
namespace {

// The delayed heaps' inline key: run_at in 256 ms units since 2020-01-01,
// clamped to [0, 2^32 - 1] (which reaches 2054). Monotonic in run_at, so
// ordering by key, then by the record's run_at, is ordering by run_at.
uint32_t DelayKey(int64_t run_at_ms) {
  constexpr int64_t kEpochMs = 1'577'836'800'000;
  int64_t k = (run_at_ms - kEpochMs) >> 8;
  if (k < 0) return 0;
  if (k > 0xffffffffLL) return 0xffffffffu;
  return static_cast<uint32_t>(k);
}

// True for ids of the generated form (24 lower-case hex digits).
bool LooksGenerated(std::string_view id) {
  uint64_t seq = 0;
  uint32_t handle = 0;
  return ParseGeneratedId(id, &seq, &handle);
}

std::string Quote(std::string_view id) {
  std::string s = "job '";
  s.append(id.substr(0, 64));
  if (id.size() > 64) s += "...";
  s += "'";
  return s;
}

}  // namespace

// --- index functors ----------------------------------------------------------

size_t Engine::NameHash::operator()(std::string_view s) const {
  return XXH3_64bits(s.data(), s.size());
}

size_t Engine::IdHash::operator()(std::string_view id) const {
  return XXH3_64bits(id.data(), id.size());
}

// Only jobs with a client-chosen id are in the id table.
size_t Engine::IdHash::operator()(uint32_t h) const {
  const JobRecord* r = e->Rec(h);
  return (*this)(std::string_view(r->data(), r->id_len));
}

bool Engine::IdEq::operator()(uint32_t h, std::string_view id) const {
  const JobRecord* r = e->Rec(h);
  return std::string_view(r->data(), r->id_len) == id;
}

void Engine::SetPos::operator()(uint32_t h, size_t pos) const {
  e->Rec(h)->pos = static_cast<uint32_t>(pos);
}

bool Engine::DelayLess::operator()(const DelayEntry& a, const DelayEntry& b) const {
  if (a.key != b.key) return a.key < b.key;
  const JobRecord* x = e->Rec(a.handle);
  const JobRecord* y = e->Rec(b.handle);
  if (x->run_at_ms != y->run_at_ms) return x->run_at_ms < y->run_at_ms;
  return x->seq < y->seq;
}

bool Engine::TimerLess::operator()(uint32_t ta, uint32_t tb) const {
  const JobRecord* x = e->Rec(e->topics_[ta]->delayed.Top().handle);
  const JobRecord* y = e->Rec(e->topics_[tb]->delayed.Top().handle);
  return x->run_at_ms < y->run_at_ms;
}

void Engine::TimerPos::operator()(uint32_t topic, size_t pos) const {
  e->topics_[topic]->timer_pos = static_cast<uint32_t>(pos);
}

// --- construction --------------------------------------------------------------

Result<std::unique_ptr<Engine>> Engine::Create(EngineOptions options) {
  if (!options.clock) return InvalidArgument("engine: a clock is required");
  auto arena = JobArena::Create(options.arena_reserve_bytes);
  if (!arena.ok()) return arena.status();
  return std::unique_ptr<Engine>(new Engine(std::move(options), std::move(arena).value()));
}

Engine::Engine(EngineOptions options, std::unique_ptr<JobArena> arena)
    : clock_(std::move(options.clock)),
      limits_(options.limits),
      dedup_window_ms_(std::max<int64_t>(0, options.dedup_window_ms)),
      max_remembered_adds_(options.max_remembered_adds),
      arena_(std::move(arena)),
      ids_(0, IdHash{this}, IdEq{this}),
      timers_(TimerLess{this}, TimerPos{this}),
      reservations_(ReservationLess{}, ReservationPos{this}) {
  now_wall_ = clock_->NowMs();
  now_mono_ = clock_->MonotonicMs();
}

Engine::~Engine() {
  for (uint32_t h : big_bodies_) delete[] Rec(h)->body_ptr();
}

// --- time ------------------------------------------------------------------------

void Engine::Advance() {
  if (time_held_) return;
  now_wall_ = clock_->NowMs();
  // The monotonic clock never goes back; guard anyway so deadlines stay sane.
  now_mono_ = std::max(now_mono_, clock_->MonotonicMs());
  if (far_store_ != nullptr && now_mono_ >= far_retry_mono_) LoadFar();
  PromoteDue();
  if (!reservations_.empty() && reservations_.Top().until_mono <= now_mono_) ExpireReservations();
  if (!paused_topics_.empty()) EndPauses();
  // Serve before expiring waits: a job that fell due during a wait goes to
  // the waiter even when this call comes late (and while a slice was cut
  // short, waits end only once the jobs ready for them are handed out).
  ServePending();
  if (!serve_cut_ && !waiter_deadlines_.empty() && waiter_deadlines_.begin()->first <= now_mono_) {
    ExpireWaiters();
  }
}

void Engine::Tick() { Advance(); }

void Engine::PromoteDue() {
  // A few due at a time (the usual trickle) are popped one by one; past
  // kPopFirst in one call it is a burst (ten thousand schedules firing on one
  // millisecond), and the rest leave the heap in one pass (TakeWhile).
  constexpr int kPopFirst = 32;
  while (!timers_.empty()) {
    uint32_t t = timers_.Top();
    TopicState& ts = *topics_[t];
    if (Rec(ts.delayed.Top().handle)->run_at_ms > now_wall_) break;
    auto make_ready = [&](uint32_t h) {
      JobRecord* r = Rec(h);
      r->state = static_cast<uint8_t>(JobState::kReady);
      ts.ready.Push(ReadyEntry{r->priority, h, r->run_at_ms, r->seq});
    };
    int popped = 0;
    do {
      make_ready(ts.delayed.Pop().handle);
    } while (++popped < kPopFirst && !ts.delayed.empty() &&
             Rec(ts.delayed.Top().handle)->run_at_ms <= now_wall_);
    if (popped == kPopFirst) {
      // The key says most of it (256 ms units): only entries in now's unit
      // read their record.
      const uint32_t now_key = DelayKey(now_wall_);
      ts.delayed.TakeWhile(
          [&](const DelayEntry& d) {
            return d.key < now_key || (d.key == now_key && Rec(d.handle)->run_at_ms <= now_wall_);
          },
          [&](const DelayEntry& d) { make_ready(d.handle); },
          // Ten thousand records read in a burst are mostly not in cache.
          [&](const DelayEntry& d) { __builtin_prefetch(Rec(d.handle), 1); });
    }
    UpdateTimer(t);
    MarkServe(t);
  }
}

void Engine::ExpireReservations() {
  while (!reservations_.empty() && reservations_.Top().until_mono <= now_mono_) {
    uint32_t h = reservations_.Top().handle;
    uint32_t ttr = reservations_.Top().ttr_ms;
    JobRecord* r = Rec(h);
    Detach(h);
    ++counters_.timed_out;
    std::string why = "ttr of " + std::to_string(ttr) + " ms ran out (attempt " +
                      std::to_string(r->attempts) + ")";
    // Back where it was in its topic: run_at is unchanged.
    EndAttempt(h, std::nullopt, why);
    JournalUpdate(h);
  }
}

void Engine::EndPauses() {
  for (auto it = paused_topics_.begin(); it != paused_topics_.end();) {
    TopicState& ts = *topics_[*it];
    if (ts.paused_until_mono <= now_mono_) {
      ts.paused_until_mono = 0;
      MarkServe(*it);
      paused_topics_.erase(it++);
    } else {
      ++it;
    }
  }
}

void Engine::ExpireWaiters() {
  while (!waiter_deadlines_.empty() && waiter_deadlines_.begin()->first <= now_mono_) {
    uint64_t id = waiter_deadlines_.begin()->second;
    waiter_deadlines_.erase(waiter_deadlines_.begin());
    auto it = waiters_.find(id);
    if (it == waiters_.end()) continue;
    Waiter w = std::move(it->second);
    waiters_.erase(it);
    UnlinkWaiter(w);
    w.done(Deliveries{});
  }
}

Engine::Deadlines Engine::NextDeadlines() const {
  Deadlines d;
  if (serve_cut_) {  // the next slice of waiting reserves: now
    d.wall_ms = now_wall_;
    d.mono_ms = now_mono_;
    return d;
  }
  if (!timers_.empty()) d.wall_ms = Rec(topics_[timers_.Top()]->delayed.Top().handle)->run_at_ms;
  if (far_store_ != nullptr && far_.NextDue() != FarSet::kNone) {
    if (far_retry_mono_ > now_mono_) {
      d.mono_ms = far_retry_mono_;
    } else {
      int64_t due = far_.NextDue();
      // A run whose next block could not be read says the smallest time: now.
      // Over the byte budget, a far job comes in when due.
      int64_t lead = OverBudget() ? 0 : window_ms_;
      d.wall_ms = std::min(d.wall_ms, due < now_wall_ ? now_wall_ : due - lead);
    }
  }
  if (!reservations_.empty()) d.mono_ms = std::min(d.mono_ms, reservations_.Top().until_mono);
  if (!waiter_deadlines_.empty()) d.mono_ms = std::min(d.mono_ms, waiter_deadlines_.begin()->first);
  for (uint32_t t : paused_topics_) d.mono_ms = std::min(d.mono_ms, topics_[t]->paused_until_mono);
  return d;
}

int64_t Engine::MsUntilNextDeadline() const {
  Deadlines d = NextDeadlines();
  int64_t wait = kNever;
  if (d.wall_ms != kNever) wait = std::max<int64_t>(0, d.wall_ms - clock_->NowMs());
  if (d.mono_ms != kNever) {
    wait = std::min(wait, std::max<int64_t>(0, d.mono_ms - clock_->MonotonicMs()));
  }
  return wait == kNever ? -1 : wait;
}

// --- lookups -------------------------------------------------------------------

uint32_t Engine::FindJob(std::string_view id) const {
  if (!ids_.empty()) {
    auto it = ids_.find(id);
    if (it != ids_.end()) return *it;
  }
  // A generated id names its handle. It comes from outside, so the handle is
  // trusted only once it is a slot start holding a live generated job with
  // that seq which its index really holds.
  uint64_t seq = 0;
  uint32_t h = 0;
  if (!ParseGeneratedId(id, &seq, &h) || seq == 0 || !arena_->IsSlotStart(h)) return 0;
  const JobRecord* r = Rec(h);
  if (r->state == kStateFree || r->id_len != 0 || r->seq != seq) return 0;
  return IsIndexed(h) ? h : 0;
}

bool Engine::IsIndexed(uint32_t h) const {
  const JobRecord* r = Rec(h);
  if (r->topic >= topics_.size()) return false;
  const TopicState& ts = *topics_[r->topic];
  switch (r->state) {
    case static_cast<uint8_t>(JobState::kDelayed):
      return r->pos < ts.delayed.size() && ts.delayed.At(r->pos).handle == h;
    case static_cast<uint8_t>(JobState::kReady):
      return r->pos < ts.ready.size() && ts.ready.At(r->pos).handle == h;
    case static_cast<uint8_t>(JobState::kReserved):
      return r->pos < reservations_.size() && reservations_.At(r->pos).handle == h;
    case static_cast<uint8_t>(JobState::kBuried):
      return ts.buried.count({r->seq, h}) != 0;
    default:
      return false;
  }
}

uint32_t Engine::TopicIndex(std::string_view name) {
  auto it = topic_index_.find(name);
  if (it != topic_index_.end()) return it->second;
  auto idx = static_cast<uint32_t>(topics_.size());
  topics_.push_back(std::make_unique<TopicState>(this, std::string(name), idx));
  topic_index_.emplace(std::string(name), idx);
  return idx;
}

const Engine::TopicState* Engine::FindTopic(std::string_view name) const {
  auto it = topic_index_.find(name);
  return it == topic_index_.end() ? nullptr : topics_[it->second].get();
}

uint64_t Engine::NextSeq() {
  // Time-ordered and strictly increasing, even if the wall clock steps back.
  uint64_t ms = static_cast<uint64_t>(std::max<int64_t>(now_wall_, 0));
  uint64_t seq = ms << JobRecord::kSeqCounterBits;
  if (seq <= last_seq_) seq = last_seq_ + 1;
  last_seq_ = seq;
  return seq;
}

std::string_view Engine::Receipt(uint32_t h, char (&buf)[kReceiptBytes]) const {
  // Unique per delivery of a job: the add (seq) and the delivery number. A
  // re-added (replaced) job has a new seq, so old receipts go stale.
  const JobRecord* r = Rec(h);
  WriteHex(r->seq, 16, buf);
  WriteHex(static_cast<uint32_t>(r->attempts + GiveBacks(h)), 8, buf + 16);
  return {buf, kReceiptBytes};
}

uint32_t Engine::GiveBacks(uint32_t h) const {
  if (!(Rec(h)->flags & JobRecord::kFlagGivenBack)) return 0;
  return give_backs_.at(h);
}

void Engine::SetGiveBacks(uint32_t h, uint32_t n) {
  JobRecord* r = Rec(h);
  if (n == 0) {
    if (r->flags & JobRecord::kFlagGivenBack) give_backs_.erase(h);
    r->flags &= ~JobRecord::kFlagGivenBack;
    return;
  }
  give_backs_[h] = n;
  r->flags |= JobRecord::kFlagGivenBack;
}

namespace {

Status NotReservedNow(std::string_view id, JobState state, std::string_view receipt) {
  if (receipt.empty()) {
    return NotReserved(Quote(id) + " is " + std::string(StateName(state)) + ", not reserved");
  }
  return StaleReceipt("receipt does not match the current reservation of " + Quote(id) +
                      " (its TTR may have run out and it was handed out again)");
}

}  // namespace

Status Engine::CheckReservation(uint32_t h, std::string_view id, std::string_view receipt) const {
  const JobRecord* r = Rec(h);
  bool reserved = r->state == static_cast<uint8_t>(JobState::kReserved);
  if (reserved) {
    char buf[kReceiptBytes];
    if (receipt.empty() || Receipt(h, buf) == receipt) return Status::Ok();
  }
  return NotReservedNow(id, StateOf(h), receipt);
}

// --- records -----------------------------------------------------------------------

uint32_t Engine::CreateRecord(std::string_view id, std::string_view body, uint64_t seq,
                              uint32_t topic, int64_t run_at, uint32_t ttr_ms, uint32_t priority,
                              uint32_t max_attempts) {
  size_t id_bytes = id.size();
  size_t inline_size = sizeof(JobRecord) + id_bytes + body.size();
  bool out_of_line = inline_size > JobArena::kMaxRecordBytes;
  size_t size = out_of_line ? sizeof(JobRecord) + id_bytes + sizeof(char*) : inline_size;
  uint32_t h = arena_->Allocate(size);
  if (h == 0) return 0;
  near_bytes_ += size + (out_of_line ? body.size() : 0);
  JobRecord* r = Rec(h);
  r->run_at_ms = run_at;
  r->seq = seq;
  r->ttr_ms = ttr_ms;
  r->priority = priority;
  r->max_attempts = max_attempts;
  r->attempts = 0;
  r->pos = kNotInHeap;
  r->topic = topic;
  r->body_len = static_cast<uint32_t>(body.size());
  r->id_len = static_cast<uint16_t>(id.size());
  r->state = static_cast<uint8_t>(JobState::kDelayed);
  r->flags = out_of_line ? JobRecord::kFlagBodyOutOfLine : 0;
  if (!id.empty()) std::memcpy(r->data(), id.data(), id.size());
  char* body_dst = r->data() + id_bytes;
  if (out_of_line) {
    char* block = new char[body.size()];
    std::memcpy(block, body.data(), body.size());
    std::memcpy(body_dst, &block, sizeof block);
    big_bodies_.insert(h);
  } else if (!body.empty()) {
    std::memcpy(body_dst, body.data(), body.size());
  }
  return h;
}

void Engine::DestroyRecord(uint32_t h) {
  JobRecord* r = Rec(h);
  if (r->id_len != 0) ids_.erase(h);
  ClearLastError(h);
  SetGiveBacks(h, 0);
  if (r->body_out_of_line()) {
    delete[] r->body_ptr();
    big_bodies_.erase(h);
    near_bytes_ -= r->body_len;
  }
  size_t bytes = r->record_bytes();
  near_bytes_ -= bytes;
  r->state = kStateFree;  // a generated id naming this slot no longer matches
  --live_jobs_;
  arena_->Free(h, bytes);
}

void Engine::SetLastError(uint32_t h, std::string_view error) {
  if (error.empty()) {
    ClearLastError(h);
    return;
  }
  last_errors_[h] = std::string(error.substr(0, 1024));
  Rec(h)->flags |= JobRecord::kFlagHasLastError;
}

void Engine::ClearLastError(uint32_t h) {
  JobRecord* r = Rec(h);
  if (r->flags & JobRecord::kFlagHasLastError) {
    last_errors_.erase(h);
    r->flags &= ~JobRecord::kFlagHasLastError;
  }
}

// --- state transitions ---------------------------------------------------------

void Engine::Detach(uint32_t h) {
  JobRecord* r = Rec(h);
  TopicState& ts = *topics_[r->topic];
  switch (static_cast<JobState>(r->state)) {
    case JobState::kDelayed: {
      bool was_top = r->pos == 0;
      ts.delayed.Remove(r->pos);
      if (was_top) UpdateTimer(r->topic);
      break;
    }
    case JobState::kReady:
      ts.ready.Remove(r->pos);
      break;
    case JobState::kReserved:
      reservations_.Remove(r->pos);
      --ts.reserved;
      break;
    case JobState::kBuried:
      ts.buried.erase({r->seq, h});
      break;
  }
  r->pos = kNotInHeap;
}

void Engine::AttachDelayed(uint32_t h) {
  JobRecord* r = Rec(h);
  r->state = static_cast<uint8_t>(JobState::kDelayed);
  TopicState& ts = *topics_[r->topic];
  ts.delayed.Push(DelayEntry{DelayKey(r->run_at_ms), h});
  if (r->pos == 0) UpdateTimer(r->topic);
}

void Engine::AttachReady(uint32_t h) {
  JobRecord* r = Rec(h);
  r->state = static_cast<uint8_t>(JobState::kReady);
  topics_[r->topic]->ready.Push(ReadyEntry{r->priority, h, r->run_at_ms, r->seq});
  MarkServe(r->topic);
}

void Engine::AttachReserved(uint32_t h, int64_t until_mono, uint32_t ttr_ms) {
  JobRecord* r = Rec(h);
  r->state = static_cast<uint8_t>(JobState::kReserved);
  ++topics_[r->topic]->reserved;
  reservations_.Push(Reservation{until_mono, h, ttr_ms});
}

void Engine::AttachBuried(uint32_t h) {
  JobRecord* r = Rec(h);
  r->state = static_cast<uint8_t>(JobState::kBuried);
  topics_[r->topic]->buried.insert({r->seq, h});
  ++counters_.buried_total;
}

void Engine::Schedule(uint32_t h) {
  JobRecord* r = Rec(h);
  if (r->run_at_ms <= now_wall_) {
    AttachReady(h);
  } else {
    AttachDelayed(h);
    // Beyond the window, but changed since its record was written: it goes
    // once written in full (SettleFar).
    if (IsFar(r->run_at_ms)) settle_.emplace_back(h, r->seq);
  }
}

bool Engine::EndAttempt(uint32_t h, std::optional<int64_t> retry_at, std::string_view error) {
  JobRecord* r = Rec(h);
  if (r->max_attempts != 0 && r->attempts >= r->max_attempts) {
    std::string why(error);
    why += why.empty() ? "" : "; ";
    why += "max_attempts (" + std::to_string(r->max_attempts) + ") used up";
    SetLastError(h, why);
    AttachBuried(h);
    return true;
  }
  SetLastError(h, error);
  if (!retry_at) {
    // Due already: it was ready before it was reserved, whatever the wall
    // clock says now (it may have been stepped back meanwhile).
    AttachReady(h);
    return false;
  }
  r->run_at_ms = *retry_at;
  Schedule(h);
  return false;
}

void Engine::UpdateTimer(uint32_t t) {
  TopicState& ts = *topics_[t];
  if (ts.delayed.empty()) {
    if (ts.timer_pos != kNotInHeap) {
      timers_.Remove(ts.timer_pos);
      ts.timer_pos = kNotInHeap;
    }
  } else if (ts.timer_pos == kNotInHeap) {
    timers_.Push(t);
  } else {
    timers_.Fix(ts.timer_pos);
  }
}

void Engine::MarkServe(uint32_t t) {
  TopicState& ts = *topics_[t];
  if (!ts.serve_pending && !ts.waiters.empty()) {
    ts.serve_pending = true;
    serve_queue_.push_back(t);
  }
}

// --- reserve -------------------------------------------------------------------

Delivery Engine::Deliver(uint32_t h, uint32_t ttr_ms) {
  JobRecord* r = Rec(h);
  ++r->attempts;
  ++counters_.reserves;
  uint32_t ttr = ttr_ms != 0 ? ttr_ms : r->ttr_ms;
  AttachReserved(h, now_mono_ + ttr, ttr);
  JournalUpdate(h);
  Delivery d;
  char buf[kGeneratedIdBytes];
  d.id = std::string(IdOf(r, h, buf));
  d.topic = topics_[r->topic]->name;
  d.body = std::string(r->body());
  char receipt[kReceiptBytes];
  d.receipt = std::string(Receipt(h, receipt));
  d.attempts = r->attempts;
  d.ttr_ms = ttr;
  d.priority = r->priority;
  d.run_at_ms = r->run_at_ms;
  d.reserved_until_ms = now_wall_ + ttr;
  d.max_attempts = r->max_attempts;
  return d;
}

Deliveries Engine::TakeBest(const std::vector<uint32_t>& topics, uint32_t count, uint64_t max_bytes,
                            uint32_t ttr_ms) {
  Deliveries out;
  // Room for the whole answer at once: growing it would move every
  // delivery taken so far, again and again (a burst answers 500 at a time).
  size_t ready = 0;
  for (uint32_t t : topics) ready += topics_[t]->ready.size();
  out.reserve(std::min<size_t>(count, ready));
  ReadyLess less;
  uint64_t bytes = 0;
  while (out.size() < count) {
    TopicState* best = nullptr;
    for (uint32_t t : topics) {
      TopicState* ts = topics_[t].get();
      if (ts->ready.empty() || Paused(*ts)) continue;
      if (best == nullptr || less(ts->ready.Top(), best->ready.Top())) best = ts;
    }
    if (best == nullptr) break;
    // The budget is checked before the job is popped: one that does not fit
    // stays first in line, untouched.
    uint64_t body = Rec(best->ready.Top().handle)->body_len;
    if (max_bytes != 0 && !out.empty() && bytes + body > max_bytes) break;
    bytes += body;
    uint32_t h = best->ready.Pop().handle;
    out.push_back(Deliver(h, ttr_ms));
  }
  return out;
}

uint64_t Engine::Reserve(const ReserveRequest& req, ReserveCallback done) {
  Advance();
  if (Status s = ValidateReserveRequest(req); !s.ok()) {
    done(std::move(s));
    return 0;
  }
  // Only a waiter needs entries for topics nobody has used yet; a reserve
  // that answers at once must not leave one behind per name it was given.
  bool wait = req.wait_ms > 0;
  std::vector<uint32_t> topics;
  topics.reserve(req.topics.size());
  for (const std::string& name : req.topics) {
    auto it = topic_index_.find(name);
    if (it == topic_index_.end() && !wait) continue;
    uint32_t t = it == topic_index_.end() ? TopicIndex(name) : it->second;
    if (std::find(topics.begin(), topics.end(), t) == topics.end()) topics.push_back(t);
  }
  Deliveries got = TakeBest(topics, req.count, req.max_bytes, req.ttr_ms);
  if (!got.empty() || !wait) {
    done(std::move(got));
    return 0;
  }
  uint64_t id = next_waiter_++;
  Waiter& w = waiters_[id];
  w.topics = std::move(topics);
  w.count = req.count;
  w.max_bytes = req.max_bytes;
  w.ttr_ms = req.ttr_ms;
  // A day is longer than any sane long-poll; the cap keeps the sum in range.
  w.deadline_mono = now_mono_ + std::min<int64_t>(req.wait_ms, 86'400'000);
  w.done = std::move(done);
  for (uint32_t t : w.topics) {
    auto& list = topics_[t]->waiters;
    w.links.push_back(list.insert(list.end(), id));
  }
  waiter_deadlines_.insert({w.deadline_mono, id});
  return id;
}

void Engine::UnlinkWaiter(Waiter& w) {
  for (size_t i = 0; i < w.topics.size(); ++i) topics_[w.topics[i]]->waiters.erase(w.links[i]);
}

void Engine::FailWaiters(const Status& status) {
  auto waiters = std::move(waiters_);
  waiters_.clear();
  waiter_deadlines_.clear();
  for (auto& [id, w] : waiters) {
    UnlinkWaiter(w);
    w.done(status);
  }
}

bool Engine::CancelWaiter(uint64_t waiter) {
  auto it = waiters_.find(waiter);
  if (it == waiters_.end()) return false;
  Waiter w = std::move(it->second);
  waiters_.erase(it);
  UnlinkWaiter(w);
  waiter_deadlines_.erase({w.deadline_mono, waiter});
  return true;
}

void Engine::ServePending() {
  // Oldest waiter first, across every topic that has new ready jobs: waiter
  // ids grow with age, so the smallest front id among those topics wins.
  serve_cut_ = false;
  size_t served = 0;
  for (;;) {
    uint64_t oldest = 0;
    for (size_t i = 0; i < serve_queue_.size();) {
      TopicState& ts = *topics_[serve_queue_[i]];
      if (ts.waiters.empty() || ts.ready.empty() || Paused(ts)) {
        ts.serve_pending = false;
        serve_queue_[i] = serve_queue_.back();
        serve_queue_.pop_back();
        continue;
      }
      if (oldest == 0 || ts.waiters.front() < oldest) oldest = ts.waiters.front();
      ++i;
    }
    if (oldest == 0) return;
    if (served >= kServeSliceJobs) {
      serve_cut_ = true;
      return;
    }
    auto it = waiters_.find(oldest);
    assert(it != waiters_.end());
    Waiter w = std::move(it->second);
    waiters_.erase(it);
    UnlinkWaiter(w);
    waiter_deadlines_.erase({w.deadline_mono, oldest});
    Deliveries got = TakeBest(w.topics, w.count, w.max_bytes, w.ttr_ms);
    served += got.size();
    w.done(std::move(got));
  }
}

// --- operations ------------------------------------------------------------------

Result<AddResult> Engine::Add(const JobSpec& spec) {
  Advance();
  std::string_view id = spec.id;
  // At ten million jobs a client id's table slot is a cache miss: start it
  // first, to overlap validation and the record's creation. (A generated id
  // needs no table, see FormatGeneratedId; the delay heap compares inline
  // keys, see DelayKey.)
  if (!id.empty()) ids_.prefetch(id);
  if (Status s = ValidateJobSpec(spec, limits_); !s.ok()) return s;
  bool remember = !spec.idempotency_key.empty() && dedup_window_ms_ > 0;
  if (remember) {
    // A repeat of an add already applied (its reply was lost): answered as
    // the first was, whatever became of the job since.
    ForgetExpired();
    if (const Remembered* r = FindRemembered(id, spec.idempotency_key)) return r->result;
  }
  int64_t run_at = now_wall_;  // delay_ms is bounded by validation: no overflow
  if (spec.delay_ms) run_at = now_wall_ + *spec.delay_ms;
  if (spec.run_at_ms) run_at = *spec.run_at_ms;

  uint32_t old = 0;
  uint32_t old_far = FarSet::kNoSlot;
  StoredJob old_far_job;
  if (!id.empty()) {
    old = FindJob(id);
    if (old == 0) {
      if (Status s = FindFar(id, &old_far, &old_far_job); !s.ok()) return s;
    }
    if ((old != 0 || old_far != FarSet::kNoSlot) && !spec.replace) {
      return Exists(Quote(id) + " already exists (add with replace to update it)");
    }
    if (LooksGenerated(id)) client_took_generated_form_ = true;
  }
  if (IsFar(run_at)) return AddFar(spec, run_at, old, old_far, old_far_job, remember);
  // The new record first: if memory runs out, a replaced job stays as it was.
  uint32_t topic = TopicIndex(spec.topic);
  uint32_t h = CreateRecord(id, spec.body, NextSeq(), topic, run_at, spec.ttr_ms, spec.priority,
                            spec.max_attempts);
  if (h == 0) return Unavailable("job memory exhausted (arena reservation full)");
  char buf[kGeneratedIdBytes];
  // A client may have taken a generated id's exact text as its own id; only
  // then is a lookup worth its cache miss. A new seq makes a new text.
  while (id.empty() && client_took_generated_form_ &&
         IdTaken(FormatGeneratedId(Rec(h)->seq, h, buf))) {
    Rec(h)->seq = NextSeq();
  }
  ReplaceOld(old, old_far, old_far_job);
  if (!id.empty()) ids_.insert(h);
  ++live_jobs_;
  ++counters_.added;
  Schedule(h);
  JournalPut(h);
  AddResult result;
  result.id = std::string(IdOf(Rec(h), h, buf));
  result.state = StateOf(h);
  result.run_at_ms = run_at;
  if (remember) Remember(spec, result, now_wall_ + dedup_window_ms_);
  ServePending();
  return result;
}

// --- idempotent adds -----------------------------------------------------------------
//
// Remembered from the add itself, not from a finish or delete: a repeat is
// told apart from a new add by its key, whatever the job's state, so no
// tombstone is needed when the job goes. Remembered adds are kept in the
// order they were made: with one window for all, that is the order they
// expire in, so forgetting looks at the front only.

std::string Engine::DedupKey(std::string_view add_id, std::string_view key) {
  std::string k;
  k.reserve(add_id.size() + 1 + key.size());
  k.append(add_id);
  k.push_back('\0');  // ids hold no control characters: the split is unambiguous
  k.append(key);
  return k;
}

const Engine::Remembered* Engine::FindRemembered(std::string_view add_id, std::string_view key) {
  if (dedup_.empty()) return nullptr;
  auto it = dedup_.find(std::string_view(DedupKey(add_id, key)));
  if (it == dedup_.end() || it->second->expires_ms <= now_wall_) return nullptr;
  return &*it->second;
}

void Engine::Insert(std::string key, const AddResult& result, int64_t expires_ms) {
  if (auto old = dedup_.find(std::string_view(key)); old != dedup_.end()) {
    auto node = old->second;
    dedup_.erase(old);
    remembered_.erase(node);
  }
  remembered_.push_back(Remembered{std::move(key), result, expires_ms});
  auto node = std::prev(remembered_.end());
  dedup_.emplace(std::string_view(node->key), node);
  while (dedup_.size() > max_remembered_adds_) {
    dedup_.erase(std::string_view(remembered_.front().key));
    remembered_.pop_front();
  }
}

void Engine::Remember(const JobSpec& spec, const AddResult& result, int64_t expires_ms) {
  Insert(DedupKey(spec.id, spec.idempotency_key), result, expires_ms);
  if (journal_ == nullptr) return;
  DedupImage image;
  image.add_id = spec.id;
  image.key = spec.idempotency_key;
  image.id = result.id;
  image.state = result.state;
  image.run_at_ms = result.run_at_ms;
  image.expires_ms = expires_ms;
  journal_->Dedup(image);
}

void Engine::ForgetExpired() {
  while (!remembered_.empty() && remembered_.front().expires_ms <= now_wall_) {
    dedup_.erase(std::string_view(remembered_.front().key));
    remembered_.pop_front();
  }
}

void Engine::RestoreDedup(const DedupImage& add) {
  if (dedup_window_ms_ == 0 || add.expires_ms <= now_wall_) return;
  AddResult result{std::string(add.id), add.state, add.run_at_ms};
  Insert(DedupKey(add.add_id, add.key), result, add.expires_ms);
}

Status Engine::Finish(std::string_view id, std::string_view receipt) {
  if (Status s = ValidateReceipt(receipt); !s.ok()) return s;
  Advance();
  uint32_t h = FindJob(id);
  if (h == 0) return AnswerFar(id, receipt);
  if (Status s = CheckReservation(h, id, receipt); !s.ok()) return s;
  JournalRemoved(h);
  Detach(h);
  DestroyRecord(h);
  ++counters_.finished;
  return Status::Ok();
}

Status Engine::Delete(std::string_view id) {
  Advance();
  uint32_t h = FindJob(id);
  if (h == 0) {
    uint32_t slot = FarSet::kNoSlot;
    StoredJob job;
    if (Status s = FindFar(id, &slot, &job); !s.ok()) return s;
    if (slot == FarSet::kNoSlot) return NotFound(Quote(id) + " does not exist");
    if (journal_ != nullptr) journal_->JobRemoved(job.Image());
    DropFar(slot, job);
    ++counters_.deleted;
    return Status::Ok();
  }
  JournalRemoved(h);
  Detach(h);
  DestroyRecord(h);
  ++counters_.deleted;
  return Status::Ok();
}

Status Engine::Release(std::string_view id, std::string_view receipt, int64_t delay_ms,
                       std::string_view error) {
  if (delay_ms < 0) return InvalidArgument("delay_ms: must be >= 0");
  if (delay_ms > kMaxDelayMs) return InvalidArgument("delay_ms: at most 100 years");
  if (Status s = ValidateReceipt(receipt); !s.ok()) return s;
  Advance();
  uint32_t h = FindJob(id);
  if (h == 0) return AnswerFar(id, receipt);
  if (Status s = CheckReservation(h, id, receipt); !s.ok()) return s;
  Detach(h);
  ++counters_.released;
  EndAttempt(h, now_wall_ + delay_ms, error);
  JournalUpdate(h);
  ServePending();
  return Status::Ok();
}

Status Engine::Touch(std::string_view id, std::string_view receipt) {
  if (Status s = ValidateReceipt(receipt); !s.ok()) return s;
  Advance();
  uint32_t h = FindJob(id);
  if (h == 0) return AnswerFar(id, receipt);
  if (Status s = CheckReservation(h, id, receipt); !s.ok()) return s;
  JobRecord* r = Rec(h);
  Reservation& res = reservations_.At(r->pos);
  res.until_mono = now_mono_ + res.ttr_ms;
  reservations_.Fix(r->pos);
  JournalUpdate(h);
  return Status::Ok();
}

Status Engine::Unreserve(std::string_view id, std::string_view receipt) {
  if (receipt.empty()) return InvalidArgument("receipt: required to give back a delivery");
  if (Status s = ValidateReceipt(receipt); !s.ok()) return s;
  Advance();
  uint32_t h = FindJob(id);
  if (h == 0) return AnswerFar(id, receipt);
  if (Status s = CheckReservation(h, id, receipt); !s.ok()) return s;
  JobRecord* r = Rec(h);
  Detach(h);
  // As if never handed out: the attempt is not counted, and the job is due
  // already (it was ready when reserved), so it takes its old place in line.
  // The delivery number stays: the next delivery's receipt is a new one,
  // so this receipt (a retried unreserve, say) never touches that delivery.
  --r->attempts;
  SetGiveBacks(h, GiveBacks(h) + 1);
  AttachReady(h);
  JournalUpdate(h);
  ServePending();
  return Status::Ok();
}

Status Engine::Bury(std::string_view id, std::string_view receipt, std::string_view reason) {
  if (Status s = ValidateReceipt(receipt); !s.ok()) return s;
  Advance();
  uint32_t h = FindJob(id);
  if (h == 0) return AnswerFar(id, receipt);
  if (Status s = CheckReservation(h, id, receipt); !s.ok()) return s;
  Detach(h);
  SetLastError(h, reason);
  AttachBuried(h);
  JournalUpdate(h);
  return Status::Ok();
}

std::vector<Status> Engine::Acknowledge(std::span<const Ack> acks) {
  Advance();
  time_held_ = true;
  struct TimeMoves {  // again, however this returns
    bool& held;
    ~TimeMoves() { held = false; }
  } time_moves{time_held_};
  std::vector<Status> out;
  out.reserve(acks.size());
  for (const Ack& a : acks) out.push_back(ApplyAck(*this, a));
  return out;
}

Status Engine::Kick(std::string_view id) {
  Advance();
  uint32_t h = FindJob(id);
  if (h == 0) {
    uint32_t slot = FarSet::kNoSlot;
    StoredJob job;
    if (Status s = FindFar(id, &slot, &job); !s.ok()) return s;
    if (slot == FarSet::kNoSlot) return NotFound(Quote(id) + " does not exist");
    h = BringNear(slot, job);
    if (h == 0) return Unavailable("job memory exhausted (arena reservation full)");
  }
  JobState state = StateOf(h);
  if (state != JobState::kBuried && state != JobState::kDelayed) {
    return InvalidArgument(Quote(id) + " is " + std::string(StateName(state)) +
                           "; only buried or delayed jobs can be kicked");
  }
  Detach(h);
  // A kicked delayed job is due now; a buried one keeps its place in line.
  if (state == JobState::kDelayed) Rec(h)->run_at_ms = now_wall_;
  ++counters_.kicked;
  AttachReady(h);
  JournalUpdate(h);
  ServePending();
  return Status::Ok();
}

Result<uint64_t> Engine::KickTopic(std::string_view topic, uint64_t n) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  Advance();
  auto it = topic_index_.find(topic);
  if (it == topic_index_.end()) return uint64_t{0};
  TopicState& ts = *topics_[it->second];
  uint64_t kicked = 0;
  while (kicked < n && !ts.buried.empty()) {
    uint32_t h = ts.buried.begin()->second;
    Detach(h);
    AttachReady(h);
    JournalUpdate(h);
    ++kicked;
  }
  counters_.kicked += kicked;
  ServePending();
  return kicked;
}

JobInfo Engine::Info(uint32_t h) const {
  const JobRecord* r = Rec(h);
  JobInfo info;
  char buf[kGeneratedIdBytes];
  info.id = std::string(IdOf(r, h, buf));
  info.topic = topics_[r->topic]->name;
  info.state = StateOf(h);
  info.body = std::string(r->body());
  info.priority = r->priority;
  info.ttr_ms = r->ttr_ms;
  info.max_attempts = r->max_attempts;
  info.attempts = r->attempts;
  info.created_at_ms = r->created_at_ms();
  info.run_at_ms = r->run_at_ms;
  if (info.state == JobState::kReserved) {
    info.reserved_until_ms = now_wall_ + (reservations_.At(r->pos).until_mono - now_mono_);
    char receipt[kReceiptBytes];
    info.receipt = std::string(Receipt(h, receipt));
  }
  if (r->flags & JobRecord::kFlagHasLastError) info.last_error = last_errors_.at(h);
  return info;
}

Result<JobInfo> Engine::Get(std::string_view id) {
  Advance();
  uint32_t h = FindJob(id);
  if (h != 0) return Info(h);
  uint32_t slot = FarSet::kNoSlot;
  StoredJob job;
  if (Status s = FindFar(id, &slot, &job); !s.ok()) return s;
  if (slot == FarSet::kNoSlot) return NotFound(Quote(id) + " does not exist");
  return InfoOf(job);
}

Result<JobInfo> Engine::Peek(std::string_view topic, JobState state) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  if (state == JobState::kReserved) {
    return InvalidArgument("state: peek takes ready, delayed or buried");
  }
  Advance();
  const TopicState* ts = FindTopic(topic);
  uint32_t h = 0;
  if (ts != nullptr) {
    if (state == JobState::kReady && !ts->ready.empty()) h = ts->ready.Top().handle;
    if (state == JobState::kDelayed && !ts->delayed.empty()) h = ts->delayed.Top().handle;
    if (state == JobState::kBuried && !ts->buried.empty()) h = ts->buried.begin()->second;
    // The topic's earliest far job, if it is due before the one here (past
    // the byte budget, far jobs may be due before the horizon).
    if (state == JobState::kDelayed && far_rebuild_pending_ && !RebuildFarIndex()) {
      return Unavailable("the far-future index is being rebuilt; try again");
    }
    if (state == JobState::kDelayed && far_.jobs(ts->index) != 0) {
      StoredJob job;
      Status error;
      auto accept = [&](const FarSet::Entry& e) {
        error = ReadFar(e.slot, &job);
        // Not when its slot holds another job now.
        return !error.ok() || (job.fields.seq == e.seq && job.fields.run_at_ms == e.run_at_ms);
      };
      auto found = far_.FindEarliest(ts->index, accept);
      if (!found.ok() && found.status().code() == Code::kInternal && RebuildFarIndex()) {
        found = far_.FindEarliest(ts->index, accept);
      }
      if (!found.ok()) return found.status();
      if (!error.ok()) return error;
      if (*found && (h == 0 || std::pair(job.fields.run_at_ms, job.fields.seq) <
                                   std::pair(Rec(h)->run_at_ms, Rec(h)->seq))) {
        return InfoOf(job);
      }
    }
  }
  if (h == 0) {
    return NotFound("topic '" + std::string(topic) + "' has no " + std::string(StateName(state)) +
                    " job");
  }
  return Info(h);
}

Status Engine::Pause(std::string_view topic, int64_t duration_ms) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  if (duration_ms < 0) return InvalidArgument("duration_ms: must be >= 0 (0 = until resumed)");
  Advance();
  uint32_t t = TopicIndex(topic);
  topics_[t]->paused_until_mono =
      duration_ms == 0 ? kNever : now_mono_ + std::min<int64_t>(duration_ms, kMaxDelayMs);
  paused_topics_.insert(t);
  if (journal_ != nullptr) journal_->TopicPause(topic, PauseEndWall(*topics_[t]));
  return Status::Ok();
}

Status Engine::Resume(std::string_view topic) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  Advance();
  auto it = topic_index_.find(topic);
  if (it == topic_index_.end()) return Status::Ok();
  topics_[it->second]->paused_until_mono = 0;
  paused_topics_.erase(it->second);
  if (journal_ != nullptr) journal_->TopicPause(topic, 0);
  MarkServe(it->second);
  ServePending();
  return Status::Ok();
}

TopicInfo Engine::InfoOf(const TopicState& t) const {
  TopicInfo info;
  info.name = t.name;
  info.delayed = t.delayed.size() + far_.jobs(t.index);
  info.ready = t.ready.size();
  info.reserved = t.reserved;
  info.buried = t.buried.size();
  info.waiting = t.waiters.size();
  info.paused = Paused(t);
  if (info.paused) {
    info.paused_for_ms = t.paused_until_mono == kNever ? -1 : t.paused_until_mono - now_mono_;
  }
  return info;
}

std::vector<TopicInfo> Engine::Topics() {
  Advance();
  std::vector<TopicInfo> out;
  for (const auto& t : topics_) {
    TopicInfo info = InfoOf(*t);
    if (info.delayed + info.ready + info.reserved + info.buried + info.waiting > 0 || info.paused) {
      out.push_back(std::move(info));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const TopicInfo& a, const TopicInfo& b) { return a.name < b.name; });
  return out;
}

Result<TopicInfo> Engine::Topic(std::string_view topic) {
  if (Status s = ValidateTopic(topic); !s.ok()) return s;
  Advance();
  const TopicState* ts = FindTopic(topic);
  if (ts == nullptr) {
    TopicInfo empty;
    empty.name = std::string(topic);
    return empty;
  }
  return InfoOf(*ts);
}

QueueStats Engine::Stats() {
  Advance();
  QueueStats s = counters_;
  s.jobs = live_jobs_;
  s.delayed = s.ready = s.reserved = s.buried = s.topics = 0;
  for (const auto& t : topics_) {
    s.delayed += t->delayed.size() + far_.jobs(t->index);
    s.ready += t->ready.size();
    s.reserved += t->reserved;
    s.buried += t->buried.size();
  }
  s.topics = Topics().size();
  s.waiting = waiters_.size();
  return s;
}

// --- durability --------------------------------------------------------------------

JobImage Engine::ImageOf(uint32_t h) const {
  const JobRecord* r = Rec(h);
  JobImage img;
  if (r->id_len == 0) {
    img.handle = h;  // the text is derived; not formatted here
  } else {
    img.id = std::string_view(r->data(), r->id_len);
  }
  img.generated_id = r->id_len == 0 || (r->flags & JobRecord::kFlagGeneratedId);
  img.seq = r->seq;
  img.topic = topics_[r->topic]->name;
  img.state = StateOf(h);
  img.run_at_ms = r->run_at_ms;
  if (img.state == JobState::kReserved) {
    const Reservation& res = reservations_.At(r->pos);
    img.reserved_until_ms = now_wall_ + (res.until_mono - now_mono_);
    if (res.ttr_ms != r->ttr_ms) img.reservation_ttr_ms = res.ttr_ms;
  }
  img.ttr_ms = r->ttr_ms;
  img.priority = r->priority;
  img.max_attempts = r->max_attempts;
  img.attempts = r->attempts;
  img.give_backs = GiveBacks(h);
  if (r->flags & JobRecord::kFlagHasLastError) img.last_error = last_errors_.at(h);
  img.body = r->body();
  return img;
}

void Engine::JournalPut(uint32_t h) {
  if (journal_ != nullptr) journal_->JobPut(ImageOf(h));
}

void Engine::JournalUpdate(uint32_t h) {
  if (journal_ != nullptr) journal_->JobUpdate(ImageOf(h));
}

void Engine::JournalRemoved(uint32_t h) {
  if (journal_ != nullptr) journal_->JobRemoved(ImageOf(h));
}

int64_t Engine::PauseEndWall(const TopicState& t) const {
  if (t.paused_until_mono == kNever) return -1;
  if (t.paused_until_mono <= now_mono_) return 0;
  return now_wall_ + (t.paused_until_mono - now_mono_);
}

Status Engine::RestorePut(const JobImage& job, uint64_t location, bool* replaced) {
  // A seq above every one seen is a new job (a replacing add logs the
  // removal first); only a job written again by compaction needs the lookup.
  *replaced = false;
  if (job.seq <= last_seq_ && job.seq > resumed_seq_) {
    if (uint32_t old = FindJob(job.id); old != 0) {
      Detach(old);
      DestroyRecord(old);
      *replaced = true;
    } else {
      uint32_t slot = FarSet::kNoSlot;
      StoredJob old_job;
      if (Status s = FindFar(job.id, &slot, &old_job); !s.ok()) return s;
      if (slot != FarSet::kNoSlot) {
        DropFar(slot, old_job);
        *replaced = true;
      }
    }
  }
  RestoreSeq(job.seq);
  if (!job.generated_id && LooksGenerated(job.id)) client_took_generated_form_ = true;
  uint32_t topic = TopicIndex(job.topic);
  if (location != 0 && job.state == JobState::kDelayed && IsFar(job.run_at_ms)) {
    // Its record is all it needs. A generated id that named a far slot
    // names the same one again if it is free; any other is found by its
    // text.
    uint64_t id_seq = 0;
    uint32_t handle = 0;
    uint32_t slot = FarSet::kNoSlot;
    if (job.generated_id && ParseGeneratedId(job.id, &id_seq, &handle) && id_seq == job.seq &&
        (handle & kFarTag) != 0) {
      slot = far_.TakeAt(handle & ~kFarTag);
    }
    bool hashed = slot == FarSet::kNoSlot;
    if (hashed) slot = far_.Take();
    if (slot == FarSet::kNoSlot) return Unavailable("far-future job slots exhausted");
    PlaceFar(slot, topic, job.run_at_ms, job.seq, location, hashed,
             hashed ? FarSet::IdHash(job.id) : 0);
    ++live_jobs_;
    return Status::Ok();
  }
  // The handle a generated id names is not this process's: keep its text.
  uint32_t h = CreateRecord(job.id, job.body, job.seq, topic, job.run_at_ms, job.ttr_ms,
                            job.priority, job.max_attempts);
  if (h == 0) return Unavailable("job memory exhausted (arena reservation full)");
  if (job.generated_id) Rec(h)->flags |= JobRecord::kFlagGeneratedId;
  ids_.insert(h);
  ++live_jobs_;
  JobRecord* r = Rec(h);
  r->attempts = job.attempts;
  SetGiveBacks(h, job.give_backs);
  if (!job.last_error.empty()) SetLastError(h, job.last_error);
  AttachRestored(h, job);
  return Status::Ok();
}

void Engine::AttachRestored(uint32_t h, const JobImage& job) {
  switch (job.state) {
    case JobState::kReady:
      AttachReady(h);  // ready stays ready, whatever the clock says now
      break;
    case JobState::kDelayed:
      Schedule(h);
      break;
    case JobState::kReserved:
      // The deadline is wall clock in the log; one that passed while
      // delayq was down times out on the first Tick.
      AttachReserved(h, now_mono_ + std::max<int64_t>(0, job.reserved_until_ms - now_wall_),
                     job.reservation_ttr_ms != 0 ? job.reservation_ttr_ms : Rec(h)->ttr_ms);
      break;
    case JobState::kBuried:
      AttachBuried(h);
      --counters_.buried_total;
      break;
  }
}

Status Engine::RestoreUpdate(const JobImage& job) {
  uint32_t h = FindJob(job.id);
  if (h == 0) {
    // A far job changes only once in memory.
    uint32_t slot = FarSet::kNoSlot;
    StoredJob far_job;
    if (Status s = FindFar(job.id, &slot, &far_job); !s.ok()) return s;
    if (slot == FarSet::kNoSlot || far_job.fields.seq != job.seq) return Status::Ok();
    h = BringNear(slot, far_job);
    if (h == 0) return Unavailable("job memory exhausted (arena reservation full)");
  }
  if (Rec(h)->seq != job.seq) return Status::Ok();
  Detach(h);
  JobRecord* r = Rec(h);
  r->attempts = job.attempts;
  SetGiveBacks(h, job.give_backs);
  r->run_at_ms = job.run_at_ms;
  SetLastError(h, job.last_error);
  AttachRestored(h, job);
  return Status::Ok();
}

Status Engine::RestoreRemove(std::string_view id, uint64_t seq) {
  uint32_t h = FindJob(id);
  if (h == 0) {
    uint32_t slot = FarSet::kNoSlot;
    StoredJob far_job;
    if (Status s = FindFar(id, &slot, &far_job); !s.ok()) return s;
    if (slot != FarSet::kNoSlot && far_job.fields.seq == seq) DropFar(slot, far_job);
    return Status::Ok();
  }
  if (Rec(h)->seq != seq) return Status::Ok();
  Detach(h);
  DestroyRecord(h);
  return Status::Ok();
}

void Engine::RestorePause(std::string_view topic, int64_t paused_until_ms) {
  uint32_t t = TopicIndex(topic);
  TopicState& ts = *topics_[t];
  if (paused_until_ms == 0 || (paused_until_ms > 0 && paused_until_ms <= now_wall_)) {
    ts.paused_until_mono = 0;
    paused_topics_.erase(t);
    return;
  }
  ts.paused_until_mono = paused_until_ms < 0 ? kNever : now_mono_ + (paused_until_ms - now_wall_);
  paused_topics_.insert(t);
}

bool Engine::FindImage(std::string_view id, uint64_t seq, JobImage* image, bool far) {
  uint32_t h = FindJob(id);
  if (h == 0 && far) {
    uint32_t slot = FarSet::kNoSlot;
    if (!FindFar(id, &slot, &scratch_).ok() || slot == FarSet::kNoSlot ||
        scratch_.fields.seq != seq) {
      return false;
    }
    *image = scratch_.Image();
    image->id = id;
    return true;
  }
  if (h == 0 || Rec(h)->seq != seq) return false;
  *image = ImageOf(h);
  image->id = id;  // the same text, spelled out
  return true;
}

std::vector<std::pair<std::string, int64_t>> Engine::PausedTopics() {
  std::vector<std::pair<std::string, int64_t>> out;
  for (uint32_t t : paused_topics_) {
    int64_t end = PauseEndWall(*topics_[t]);
    if (end != 0) out.emplace_back(topics_[t]->name, end);
  }
  return out;
}

// --- a checkpoint ----------------------------------------------------------------------

bool Engine::SealFar(FarImage* out) {
  if (far_store_ == nullptr || far_rebuild_pending_) return false;
  if (far_.mutable_entries() != 0) {
    far_.Seal();
    ++far_counts_.seals;
  }
  if (!far_.Describable()) return false;
  out->horizon_ms = horizon_ms_;
  out->last_seq = last_seq_;
  out->client_took_generated_form = client_took_generated_form_;
  out->topics.clear();
  for (const auto& t : topics_) out->topics.push_back(t->name);
  out->far = far_.Describe();
  return true;
}

Status Engine::RestoreFar(const FarImage& image, const FarSet::SlotLoader& load) {
  assert(far_store_ != nullptr && topics_.empty() && far_.jobs() == 0);
  if (image.far.topic_jobs.size() > image.topics.size()) {
    return Internal("far-future checkpoint: counts for " +
                    std::to_string(image.far.topic_jobs.size()) + " topics, names for " +
                    std::to_string(image.topics.size()));
  }
  if (Status s = far_.Restore(image.far, load); !s.ok()) return s;
  for (const std::string& name : image.topics) TopicIndex(name);
  horizon_ms_ = std::max(horizon_ms_, image.horizon_ms);
  RestoreSeq(image.last_seq);
  client_took_generated_form_ = client_took_generated_form_ || image.client_took_generated_form;
  live_jobs_ += far_.jobs();
  resumed_seq_ = image.last_seq;
  return Status::Ok();
}

void Engine::ForEachJob(const std::function<void(const JobImage&)>& fn) const {
  for (const auto& t : topics_) {
    for (size_t i = 0; i < t->delayed.size(); ++i) fn(ImageOf(t->delayed.At(i).handle));
    for (size_t i = 0; i < t->ready.size(); ++i) fn(ImageOf(t->ready.At(i).handle));
    for (const auto& [seq, h] : t->buried) fn(ImageOf(h));
  }
  for (size_t i = 0; i < reservations_.size(); ++i) fn(ImageOf(reservations_.At(i).handle));
}

void Engine::ForEachRemembered(const std::function<void(const DedupImage&)>& fn) const {
  for (const Remembered& r : remembered_) {
    if (r.expires_ms <= now_wall_) continue;
    size_t cut = r.key.find('\0');
    DedupImage add;
    add.add_id = std::string_view(r.key).substr(0, cut);
    add.key =
        cut == std::string::npos ? std::string_view() : std::string_view(r.key).substr(cut + 1);
    add.id = r.result.id;
    add.state = r.result.state;
    add.run_at_ms = r.result.run_at_ms;
    add.expires_ms = r.expires_ms;
    fn(add);
  }
}

// --- the memory window ---------------------------------------------------------------
//
// A far job has no record here, only a FarSet slot: its record in the far
// store is the job. So every far job's latest state is one PUT record: an
// add beyond the horizon writes it (AddFar); a job that changed in memory
// and then went beyond it (a release with a long delay, a replayed update)
// waits in memory until SettleFar has written it in full. Far jobs are
// delayed and nothing changes a delayed job but a kick (which brings it
// near first), a delete or a replace, so their records never go stale.

void Engine::SetFarStore(FarStore* store, int64_t window_ms, FarIndexFiles* files,
                         size_t max_mutable, uint64_t window_bytes) {
  far_store_ = store;
  window_bytes_ = window_bytes;
  if (store != nullptr) far_.BeginRestore();  // until EndRestore: replay comes first
  far_.SetFiles(files, std::max<size_t>(1, max_mutable));
  if (store == nullptr) {
    window_ms_ = kNever;
    horizon_ms_ = kNever;
    return;
  }
  window_ms_ = std::clamp<int64_t>(window_ms, 0, kMaxDelayMs);
  horizon_ms_ = now_wall_ + window_ms_;
}

Engine::FarFigures Engine::far_figures() const {
  FarFigures f = far_counts_;
  f.jobs = far_.jobs();
  f.entries = far_.entries();
  f.sealed_runs = far_.sealed_runs();
  return f;
}

Status Engine::ReadFar(uint32_t slot, StoredJob* out) {
  ++far_counts_.reads;
  Status s = far_store_->ReadJob(far_.location(slot), out);
  if (!s.ok()) ++far_counts_.read_errors;
  return s;
}

Status Engine::FindFar(std::string_view id, uint32_t* slot, StoredJob* out) {
  *slot = FarSet::kNoSlot;
  if (far_.jobs() == 0) return Status::Ok();
  // A generated id of a job added far names its slot.
  uint64_t seq = 0;
  uint32_t handle = 0;
  if (ParseGeneratedId(id, &seq, &handle) && (handle & kFarTag) != 0 &&
      far_.named(handle & ~kFarTag)) {
    uint32_t s = handle & ~kFarTag;
    if (Status st = ReadFar(s, out); !st.ok()) return st;
    if (out->fields.seq == seq && out->id == id) {
      *slot = s;
      return Status::Ok();
    }
  }
  // Any other id, by the hash of its text: each candidate's record says.
  Status error;
  *slot = far_.FindHashed(FarSet::IdHash(id), [&](uint32_t s) {
    if (!error.ok()) return false;
    error = ReadFar(s, out);
    return error.ok() && out->id == id;
  });
  return error;
}

uint32_t Engine::FarAt(std::string_view id, uint64_t location) {
  if (far_.jobs() == 0) return FarSet::kNoSlot;
  uint64_t seq = 0;
  uint32_t handle = 0;
  if (ParseGeneratedId(id, &seq, &handle) && (handle & kFarTag) != 0) {
    uint32_t s = handle & ~kFarTag;
    if (far_.named(s) && far_.location(s) == location) return s;
  }
  return far_.FindHashed(FarSet::IdHash(id),
                         [&](uint32_t s) { return far_.location(s) == location; });
}

bool Engine::IdTaken(std::string_view id) {
  if (ids_.find(id) != ids_.end()) return true;
  uint32_t slot = FarSet::kNoSlot;
  StoredJob job;
  return !FindFar(id, &slot, &job).ok() || slot != FarSet::kNoSlot;
}

void Engine::ReplaceOld(uint32_t old, uint32_t old_far, const StoredJob& old_far_job) {
  if (old != 0) {
    JournalRemoved(old);
    Detach(old);
    DestroyRecord(old);
    ++counters_.replaced;
  } else if (old_far != FarSet::kNoSlot) {
    if (journal_ != nullptr) journal_->JobRemoved(old_far_job.Image());
    DropFar(old_far, old_far_job);
    ++counters_.replaced;
  }
}

void Engine::DropFar(uint32_t slot, const StoredJob& job) {
  far_.Drop(slot, TopicIndex(job.topic));
  --live_jobs_;
}

uint32_t Engine::BringNear(uint32_t slot, const StoredJob& job) {
  const JobImage& f = job.fields;
  uint32_t topic = TopicIndex(job.topic);
  // Its id is spelled out and found by the id table: a generated one names
  // the slot, which is freed now.
  uint32_t h = CreateRecord(job.id, job.body, f.seq, topic, f.run_at_ms, f.ttr_ms, f.priority,
                            f.max_attempts);
  if (h == 0) return 0;
  JobRecord* r = Rec(h);
  if (job.generated_id) r->flags |= JobRecord::kFlagGeneratedId;
  r->attempts = f.attempts;
  SetGiveBacks(h, f.give_backs);
  if (!job.last_error.empty()) SetLastError(h, job.last_error);
  ids_.insert(h);
  far_.Drop(slot, topic);
  ++far_counts_.loads;
  Schedule(h);
  return h;
}

bool Engine::RebuildFarIndex() {
  ::delayq::Log(LogLevel::kWarn, "far-future index: rebuilding it from the records of %zu jobs",
                far_.jobs());
  // Until it is whole, loading waits for it (a read that fails stops it:
  // it starts over later).
  far_rebuild_pending_ = true;
  far_.ClearIndex();
  std::vector<uint32_t> slots;
  far_.ForEachLive([&](uint32_t s) { slots.push_back(s); });
  StoredJob job;
  for (uint32_t s : slots) {
    Status st = ReadFar(s, &job);
    if (st.code() == Code::kInternal) {
      ::delayq::Log(LogLevel::kError, "far-future job lost: %s", st.message().c_str());
      far_.DropUnread(s);
      --live_jobs_;
      ++far_counts_.lost;
      continue;
    }
    if (!st.ok()) return false;
    far_.Reindex(FarSet::Entry{job.fields.run_at_ms, job.fields.seq, s, TopicIndex(job.topic)});
    if (far_.seal_due()) far_.Seal();
  }
  far_rebuild_pending_ = false;
  ++far_counts_.rebuilds;
  return true;
}

void Engine::PlaceFar(uint32_t slot, uint32_t topic, int64_t run_at_ms, uint64_t seq,
                      uint64_t location, bool hashed, uint32_t id_hash) {
  far_.Place(slot, topic, run_at_ms, seq, location, hashed, id_hash);
  if (!far_.seal_due()) return;
  far_.Seal();
  ++far_counts_.seals;
}

bool Engine::OverBudget() const { return window_bytes_ != 0 && near_bytes_ >= window_bytes_; }

void Engine::LoadFar() {
  // Over the byte budget, only what is due comes in (and later adds go far
  // unless due): the horizon stays.
  if (far_rebuild_pending_ && !RebuildFarIndex()) {
    far_retry_mono_ = now_mono_ + 1000;
    return;
  }
  const int64_t target = OverBudget() ? now_wall_ : now_wall_ + window_ms_;
  FarSet::Entry e{};
  StoredJob job;
  Status error;
  int64_t loaded_at = kNever;  // run_at of the last job brought in
  for (;;) {
    // The budget is judged between milliseconds: jobs due on one come in
    // together, so every far job stays due after every one in memory.
    if (far_.NextDue() > now_wall_ && far_.NextDue() != loaded_at && OverBudget()) {
      if (loaded_at != kNever) horizon_ms_ = std::max(horizon_ms_, loaded_at);
      horizon_ms_ = std::max(horizon_ms_, now_wall_);
      return;
    }
    if (!far_.PopDue(target, &e, &error)) {
      if (error.ok()) {
        horizon_ms_ = std::max(horizon_ms_, target);
        return;
      }
      ::delayq::Log(LogLevel::kError, "%s", error.message().c_str());
      ++far_counts_.index_errors;
      // A run that does not check out is not trusted: the index is made
      // again from the records. An I/O error is tried again in a second.
      if (error.code() != Code::kInternal || !RebuildFarIndex()) {
        far_retry_mono_ = now_mono_ + 1000;
        return;
      }
      error = Status::Ok();
      continue;
    }
    uint32_t topic = e.topic;
    Status s = ReadFar(e.slot, &job);
    // The slot holds another job now, or this one placed again (another
    // entry is its own).
    if (s.ok() && (job.fields.seq != e.seq || job.fields.run_at_ms != e.run_at_ms)) continue;
    if (s.code() == Code::kInternal) {
      // The bytes there are not its record (damage the log's checksums
      // caught): the job is lost, and said so, rather than tried forever.
      ::delayq::Log(LogLevel::kError, "far-future job lost: %s", s.message().c_str());
      far_.Drop(e.slot, topic);
      --live_jobs_;
      ++far_counts_.lost;
      continue;
    }
    loaded_at = e.run_at_ms;
    if (!s.ok() || BringNear(e.slot, job) == 0) {
      // Not lost: tried again in a second (the far store's error is counted).
      far_.PushBack(e);
      far_retry_mono_ = now_mono_ + 1000;
      return;
    }
  }
}

bool Engine::SettleFar(uint64_t max_bytes) {
  uint64_t used = 0;
  size_t done = 0;
  for (; done < settle_.size(); ++done) {
    auto [h, seq] = settle_[done];
    JobRecord* r = Rec(h);
    // Gone, replaced, moved on, or no longer beyond the horizon: nothing to do.
    if (r->state != static_cast<uint8_t>(JobState::kDelayed) || r->seq != seq ||
        !IsFar(r->run_at_ms) || !IsIndexed(h)) {
      continue;
    }
    // An upper bound of its PUT record (fixed fields: at most ~130 bytes).
    uint64_t bytes = 160 + r->id_len + kGeneratedIdBytes + topics_[r->topic]->name.size() +
                     r->body_len +
                     ((r->flags & JobRecord::kFlagHasLastError) ? last_errors_.at(h).size() : 0);
    if (used + bytes > max_bytes) break;
    uint32_t slot = far_.Take();
    if (slot == FarSet::kNoSlot) break;
    uint64_t location = far_store_->StoreJob(ImageOf(h));
    if (location == 0) {
      far_.Untake(slot);
      break;
    }
    used += bytes;
    char buf[kGeneratedIdBytes];
    PlaceFar(slot, r->topic, r->run_at_ms, seq, location, /*hashed=*/true,
             FarSet::IdHash(IdOf(r, h, buf)));
    Detach(h);
    DestroyRecord(h);
    ++live_jobs_;  // the same job, far now
    ++far_counts_.stores;
  }
  settle_.erase(settle_.begin(), settle_.begin() + static_cast<ptrdiff_t>(done));
  return !settle_.empty();
}

Result<AddResult> Engine::AddFar(const JobSpec& spec, int64_t run_at, uint32_t old,
                                 uint32_t old_far, const StoredJob& old_far_job, bool remember) {
  std::string_view id = spec.id;
  uint32_t slot = far_.Take();
  if (slot == FarSet::kNoSlot) return Unavailable("far-future job slots exhausted");
  uint32_t topic = TopicIndex(spec.topic);
  uint64_t seq = NextSeq();
  char buf[kGeneratedIdBytes];
  while (id.empty() && client_took_generated_form_ &&
         IdTaken(FormatGeneratedId(seq, kFarTag | slot, buf))) {
    seq = NextSeq();
  }
  ReplaceOld(old, old_far, old_far_job);
  JobImage job;
  if (id.empty()) {
    job.handle = kFarTag | slot;
    job.generated_id = true;
  } else {
    job.id = id;
  }
  job.seq = seq;
  job.topic = spec.topic;
  job.state = JobState::kDelayed;
  job.run_at_ms = run_at;
  job.ttr_ms = spec.ttr_ms;
  job.priority = spec.priority;
  job.max_attempts = spec.max_attempts;
  job.body = spec.body;
  uint64_t location = journal_->JobPut(job);
  assert(location != 0);
  PlaceFar(slot, topic, run_at, seq, location, /*hashed=*/!id.empty(),
           id.empty() ? 0 : FarSet::IdHash(id));
  ++live_jobs_;
  ++counters_.added;
  AddResult result;
  result.id = id.empty() ? std::string(FormatGeneratedId(seq, kFarTag | slot, buf)) : spec.id;
  result.state = JobState::kDelayed;
  result.run_at_ms = run_at;
  if (remember) Remember(spec, result, now_wall_ + dedup_window_ms_);
  ServePending();
  return result;
}

Status Engine::AnswerFar(std::string_view id, std::string_view receipt) {
  uint32_t slot = FarSet::kNoSlot;
  StoredJob job;
  if (Status s = FindFar(id, &slot, &job); !s.ok()) return s;
  if (slot == FarSet::kNoSlot) return NotFound(Quote(id) + " does not exist");
  return NotReservedNow(id, JobState::kDelayed, receipt);
}

JobInfo Engine::InfoOf(const StoredJob& job) const {
  const JobImage& f = job.fields;
  JobInfo info;
  info.id = job.id;
  info.topic = job.topic;
  info.state = JobState::kDelayed;
  info.body = job.body;
  info.priority = f.priority;
  info.ttr_ms = f.ttr_ms;
  info.max_attempts = f.max_attempts;
  info.attempts = f.attempts;
  info.created_at_ms = static_cast<int64_t>(f.seq >> JobRecord::kSeqCounterBits);
  info.run_at_ms = f.run_at_ms;
  info.last_error = job.last_error;
  return info;
}

}  // namespace delayq::engine
