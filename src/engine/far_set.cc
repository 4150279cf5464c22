#include "engine/far_set.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>

namespace delayq::engine {

namespace {
constexpr uint32_t kOut = std::numeric_limits<uint32_t>::max();
constexpr int64_t kStuck = std::numeric_limits<int64_t>::min();
}  // namespace

FarSet::FarSet()
    : timers_(TimerLess{this}, TimerPos{this}),
      runs_heap_(RunLess{this}, RunPos{this}),
      by_id_(0, SlotHash{this}, SlotEq{this}) {}

FarSet::~FarSet() {
  if (files_ == nullptr || keep_runs_) return;
  for (const auto& r : runs_) {
    if (r != nullptr) files_->Remove(r->file);
  }
}

uint32_t FarSet::IdHash(std::string_view id) {
  return static_cast<uint32_t>(XXH3_64bits(id.data(), id.size()));
}

bool FarSet::TimerLess::operator()(uint32_t a, uint32_t b) const {
  return EntryLater{}(f->topics_[b].heap.front(), f->topics_[a].heap.front());
}

void FarSet::TimerPos::operator()(uint32_t topic, size_t pos) const {
  f->topics_[topic].pos = static_cast<uint32_t>(pos);
}

const FarSet::Entry* FarSet::RunHead(uint32_t run) const {
  const Run& r = *runs_[run];
  return r.pos < r.buf.size() ? &r.buf[r.pos] : nullptr;
}

bool FarSet::RunLess::operator()(uint32_t a, uint32_t b) const {
  const Run& x = *f->runs_[a];
  const Run& y = *f->runs_[b];
  if (x.stuck != y.stuck) return x.stuck;
  if (x.stuck) return a < b;
  return EntryLater{}(*f->RunHead(b), *f->RunHead(a));
}

void FarSet::RunPos::operator()(uint32_t run, size_t pos) const {
  f->runs_[run]->heap_pos = static_cast<uint32_t>(pos);
}

// --- slots ---------------------------------------------------------------------

uint32_t FarSet::TakeAt(uint32_t slot) {
  if (!restoring_ || slot >= kFarTag) return kNoSlot;
  while (size_ <= slot) {  // the slots before it are free (0), unlinked until EndRestore
    if ((size_ >> kChunkBits) >= chunks_.size()) chunks_.push_back(std::make_unique<Chunk>());
    uint32_t chunk_end = ((size_ >> kChunkBits) + 1) << kChunkBits;
    size_ = std::min(chunk_end, slot + 1);
  }
  if (Loc(slot) != 0) return kNoSlot;
  Loc(slot) = kTakenMark;
  Aux(slot) = 0;
  return slot;
}

void FarSet::EndRestore() {
  restoring_ = false;
  free_ = kNoSlot;
  for (uint32_t s = size_; s-- > 0;) {
    if (Loc(s) == 0) {
      Aux(s) = free_;
      free_ = s;
    }
  }
}

uint32_t FarSet::Take() {
  uint32_t slot = restoring_ ? kNoSlot : free_;
  if (slot != kNoSlot) {
    free_ = Aux(slot);
  } else {
    if (size_ >= kFarTag) return kNoSlot;  // the tag bit is not a slot's
    if ((size_ >> kChunkBits) >= chunks_.size()) chunks_.push_back(std::make_unique<Chunk>());
    slot = size_++;
  }
  BeforeWrite(slot);
  Loc(slot) = kTakenMark;
  Aux(slot) = 0;
  return slot;
}

void FarSet::Untake(uint32_t slot) {
  assert(Loc(slot) == kTakenMark);
  BeforeWrite(slot);
  Loc(slot) = 0;
  Aux(slot) = free_;
  free_ = slot;
}

void FarSet::Place(uint32_t slot, uint32_t topic, int64_t run_at_ms, uint64_t seq,
                   uint64_t location, bool hashed, uint32_t id_hash) {
  assert(Loc(slot) == kTakenMark && location > kTakenMark && !(location >> 63));
  BeforeWrite(slot);
  Loc(slot) = location | (hashed ? uint64_t{1} << 63 : 0);
  if (hashed) {
    Aux(slot) = id_hash;
    by_id_.insert(slot);
  }
  ++jobs_;
  ++TopicOf(topic).jobs;
  PushMutable(Entry{run_at_ms, seq, slot, topic});
}

void FarSet::Drop(uint32_t slot, uint32_t topic) {
  assert(live(slot));
  BeforeWrite(slot);
  if (Loc(slot) >> 63) by_id_.erase(slot);  // by its hash: before aux changes
  Loc(slot) = 0;
  Aux(slot) = free_;
  free_ = slot;
  --jobs_;
  --topics_[topic].jobs;
}

void FarSet::Move(uint32_t slot, uint64_t location) {
  assert(live(slot) && location > kTakenMark && !(location >> 63));
  BeforeWrite(slot);
  Loc(slot) = location | (Loc(slot) & (uint64_t{1} << 63));
}

// --- the mutable part ------------------------------------------------------------

FarSet::TopicFar& FarSet::TopicOf(uint32_t topic) {
  if (topic >= topics_.size()) topics_.resize(topic + 1);
  return topics_[topic];
}

void FarSet::UpdateTimer(uint32_t topic) {
  TopicFar& t = topics_[topic];
  if (t.heap.empty()) {
    if (t.pos != kOut) {
      timers_.Remove(t.pos);
      t.pos = kOut;
    }
  } else if (t.pos == kOut) {
    timers_.Push(topic);
  } else {
    timers_.Fix(t.pos);
  }
}

void FarSet::PushMutable(const Entry& e) {
  TopicFar& t = TopicOf(e.topic);
  t.heap.push_back(e);
  std::push_heap(t.heap.begin(), t.heap.end(), EntryLater{});
  ++mutable_entries_;
  UpdateTimer(e.topic);
}

void FarSet::PopMutable(uint32_t topic) {
  TopicFar& t = topics_[topic];
  std::pop_heap(t.heap.begin(), t.heap.end(), EntryLater{});
  t.heap.pop_back();
  --mutable_entries_;
  // A topic whose far jobs are all gone gives its memory back.
  if (t.heap.empty()) t.heap.shrink_to_fit();
  UpdateTimer(topic);
}

void FarSet::PushBack(const Entry& e) { PushMutable(e); }

void FarSet::ClearMutable() {
  for (uint32_t topic = 0; topic < topics_.size(); ++topic) {
    TopicFar& t = topics_[topic];
    if (t.heap.empty()) continue;
    t.heap.clear();
    t.heap.shrink_to_fit();
    UpdateTimer(topic);
  }
  mutable_entries_ = 0;
}

// --- sealed runs ---------------------------------------------------------------------

void FarSet::Seal() {
  // Dead entries go along (telling them would cost a random read each).
  std::vector<Entry> all;
  all.reserve(mutable_entries_);
  for (TopicFar& t : topics_) all.insert(all.end(), t.heap.begin(), t.heap.end());
  ClearMutable();
  if (all.empty()) return;
  // The earliest is the sorted run's first entry: it stands for the run
  // until it is popped, and the rest is read from index 1 on.
  Entry first = *std::min_element(
      all.begin(), all.end(), [](const Entry& a, const Entry& b) { return EntryLater{}(b, a); });
  auto run = std::make_unique<Run>();
  sealed_entries_ += all.size();
  run->file = files_->Write(std::move(all));
  run->buf.assign(1, first);
  run->next = 1;
  runs_.push_back(std::move(run));
  runs_heap_.Push(static_cast<uint32_t>(runs_.size() - 1));
}

void FarSet::Advanced(uint32_t run, Status* error) {
  Run& r = *runs_[run];
  if (r.pos >= r.buf.size()) {
    r.buf.resize(kRunBlock);
    auto n = files_->Read(r.file, r.next, r.buf);
    if (!n.ok()) {
      r.buf.clear();
      r.pos = 0;
      r.stuck = true;
      if (error != nullptr) *error = n.status();
      runs_heap_.Fix(r.heap_pos);
      return;
    }
    r.stuck = false;
    r.buf.resize(*n);
    r.pos = 0;
    r.next += *n;
    if (*n == 0) {  // used up
      runs_heap_.Remove(r.heap_pos);
      files_->Remove(r.file);
      runs_[run].reset();
      return;
    }
  }
  runs_heap_.Fix(r.heap_pos);
}

void FarSet::ClearIndex() {
  ClearMutable();
  for (TopicFar& t : topics_) t.jobs = 0;
  for (auto& r : runs_) {
    if (r == nullptr) continue;
    runs_heap_.Remove(r->heap_pos);
    files_->Remove(r->file);
    r.reset();
  }
  runs_.clear();
  sealed_entries_ = 0;
}

void FarSet::DropUnread(uint32_t slot) {
  BeforeWrite(slot);
  if (Loc(slot) >> 63) by_id_.erase(slot);
  Loc(slot) = 0;
  Aux(slot) = free_;
  free_ = slot;
  --jobs_;
}

// --- popping ---------------------------------------------------------------------------

int64_t FarSet::NextDue() const {
  int64_t due = kNone;
  if (!timers_.empty()) due = topics_[timers_.Top()].heap.front().run_at_ms;
  if (!runs_heap_.empty()) {
    const Run& r = *runs_[runs_heap_.Top()];
    due = std::min(due, r.stuck ? kStuck : r.buf[r.pos].run_at_ms);
  }
  return due;
}

bool FarSet::PopDue(int64_t horizon_ms, Entry* out, Status* error) {
  for (;;) {
    const Entry* mut = timers_.empty() ? nullptr : &topics_[timers_.Top()].heap.front();
    uint32_t run = runs_heap_.empty() ? kOut : runs_heap_.Top();
    if (run != kOut && runs_[run]->stuck) {
      Status st;
      Advanced(run, &st);  // try its block again
      if (!st.ok()) {
        *error = st;
        return false;
      }
      continue;
    }
    const Entry* head = run == kOut ? nullptr : RunHead(run);
    bool from_run = head != nullptr && (mut == nullptr || EntryLater{}(*mut, *head));
    const Entry* e = from_run ? head : mut;
    if (e == nullptr || e->run_at_ms > horizon_ms) return false;
    Entry got = *e;
    if (from_run) {
      ++runs_[run]->pos;
      --sealed_entries_;
      Advanced(run, nullptr);  // a failed read is tried again by the next call
    } else {
      PopMutable(got.topic);
    }
    if (!live(got.slot)) continue;
    *out = got;
    return true;
  }
}

}  // namespace delayq::engine

namespace delayq::engine {

// --- a checkpoint ------------------------------------------------------------------------

void FarSet::BeginSnapshot() {
  snapshot_ = std::make_unique<Snapshot>();
  snapshot_->size = size_;
  snapshot_->handed.assign(snapshot_chunks(), false);
  snapshot_->saved.resize(snapshot_chunks());
}

size_t FarSet::snapshot_chunks() const {
  return snapshot_ == nullptr ? 0 : (snapshot_->size + kChunkSlots - 1) / kChunkSlots;
}

void FarSet::SaveChunk(size_t chunk) {
  Snapshot& s = *snapshot_;
  if (chunk >= s.handed.size() || s.handed[chunk] || s.saved[chunk] != nullptr) return;
  s.saved[chunk] = std::make_unique<Chunk>(*chunks_[chunk]);
  ++s.saved_count;
}

size_t FarSet::SnapshotChunk(size_t i, uint64_t* loc, uint32_t* aux) {
  Snapshot& s = *snapshot_;
  assert(i < s.handed.size() && !s.handed[i]);
  size_t n = std::min<size_t>(kChunkSlots, s.size - i * kChunkSlots);
  const Chunk& c = s.saved[i] != nullptr ? *s.saved[i] : *chunks_[i];
  std::copy_n(c.loc, n, loc);
  std::copy_n(c.aux, n, aux);
  s.handed[i] = true;
  s.saved[i].reset();
  return n;
}

bool FarSet::Describable() const {
  if (mutable_entries_ != 0) return false;
  for (const auto& r : runs_) {
    if (r != nullptr && r->stuck) return false;
  }
  return true;
}

FarSet::Image FarSet::Describe() const {
  assert(Describable());
  Image image;
  image.slots = size_;
  image.jobs = jobs_;
  image.sealed_entries = sealed_entries_;
  for (const TopicFar& t : topics_) image.topic_jobs.push_back(t.jobs);
  for (const auto& r : runs_) {
    if (r == nullptr) continue;
    image.runs.push_back(RunCursor{r->file, r->next - (r->buf.size() - r->pos)});
  }
  return image;
}

Status FarSet::Restore(const Image& image, const SlotLoader& load) {
  assert(restoring_ && size_ == 0 && runs_.empty() && jobs_ == 0);
  auto fail = [&](Status s) {
    for (auto& r : runs_) {
      if (r != nullptr && r->heap_pos != std::numeric_limits<uint32_t>::max()) {
        runs_heap_.Remove(r->heap_pos);
      }
    }
    runs_.clear();
    by_id_.clear();
    chunks_.clear();
    topics_.clear();
    size_ = 0;
    jobs_ = 0;
    sealed_entries_ = 0;
    return s;
  };
  if (image.slots >= kFarTag) return fail(Internal("far-future checkpoint: too many slots"));
  size_t hashed = 0;
  for (uint32_t at = 0; at < image.slots; at += kChunkSlots) {
    chunks_.push_back(std::make_unique<Chunk>());
    Chunk& c = *chunks_.back();
    size_t n = std::min(kChunkSlots, image.slots - at);
    if (Status s = load(c.loc, c.aux, n); !s.ok()) return fail(s);
    for (size_t i = 0; i < n; ++i) {
      if (c.loc[i] == kTakenMark) c.loc[i] = 0;  // taken, never placed: free
      if (c.loc[i] != 0) ++jobs_;
      if (c.loc[i] >> 63) ++hashed;
    }
    size_ = at + static_cast<uint32_t>(n);
  }
  uint64_t by_topic = 0;
  for (uint64_t j : image.topic_jobs) by_topic += j;
  if (jobs_ != image.jobs || by_topic != image.jobs) {
    return fail(Internal("far-future checkpoint: its slots hold " + std::to_string(jobs_) +
                         " jobs, its counts say " + std::to_string(image.jobs) + " (and " +
                         std::to_string(by_topic) + " by topic)"));
  }
  by_id_.reserve(hashed);
  for (uint32_t s = 0; s < size_; ++s) {
    if (Loc(s) >> 63) by_id_.insert(s);
  }
  topics_.resize(image.topic_jobs.size());
  for (size_t t = 0; t < topics_.size(); ++t) topics_[t].jobs = image.topic_jobs[t];
  for (const RunCursor& c : image.runs) {
    auto run = std::make_unique<Run>();
    run->file = c.file;
    run->buf.resize(kRunBlock);
    auto n = files_ == nullptr ? Result<size_t>(Internal("far-future checkpoint: runs, no files"))
                               : files_->Read(c.file, c.next, run->buf);
    if (!n.ok()) return fail(n.status());
    if (*n == 0) {  // used up
      files_->Remove(c.file);
      continue;
    }
    run->buf.resize(*n);
    run->next = c.next + *n;
    runs_.push_back(std::move(run));
    runs_heap_.Push(static_cast<uint32_t>(runs_.size() - 1));
  }
  sealed_entries_ = image.sealed_entries;
  return Status::Ok();
}

}  // namespace delayq::engine
