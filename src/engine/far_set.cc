#include "engine/far_set.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>

namespace delayq::engine {

FarSet::FarSet()
    : timers_(TimerLess{this}, TimerPos{this}), by_id_(0, SlotHash{this}, SlotEq{this}) {}

FarSet::~FarSet() = default;

uint32_t FarSet::IdHash(std::string_view id) {
  return static_cast<uint32_t>(XXH3_64bits(id.data(), id.size()));
}

bool FarSet::TimerLess::operator()(uint32_t a, uint32_t b) const {
  const Entry& x = f->topics_[a].heap.front();
  const Entry& y = f->topics_[b].heap.front();
  if (x.run_at_ms != y.run_at_ms) return x.run_at_ms < y.run_at_ms;
  return x.seq < y.seq;
}

void FarSet::TimerPos::operator()(uint32_t topic, size_t pos) const {
  f->topics_[topic].pos = static_cast<uint32_t>(pos);
}

// --- slots ---------------------------------------------------------------------

uint32_t FarSet::Take() {
  uint32_t slot = free_;
  if (slot != kNoSlot) {
    free_ = Aux(slot);
  } else {
    if (size_ >= kFarTag) return kNoSlot;  // the tag bit is not a slot's
    if ((size_ >> kChunkBits) >= chunks_.size()) chunks_.push_back(std::make_unique<Chunk>());
    slot = size_++;
  }
  Loc(slot) = kTakenMark;
  Aux(slot) = 0;
  return slot;
}

void FarSet::Untake(uint32_t slot) {
  assert(Loc(slot) == kTakenMark);
  Loc(slot) = 0;
  Aux(slot) = free_;
  free_ = slot;
}

void FarSet::Place(uint32_t slot, uint32_t topic, int64_t run_at_ms, uint64_t seq,
                   uint64_t location, bool hashed, uint32_t id_hash) {
  assert(Loc(slot) == kTakenMark && location > kTakenMark && !(location >> 63));
  Loc(slot) = location | (hashed ? uint64_t{1} << 63 : 0);
  if (hashed) {
    Aux(slot) = id_hash;
    by_id_.insert(slot);
  }
  ++jobs_;
  TopicFar& t = TopicOf(topic);
  ++t.jobs;
  t.heap.push_back(Entry{run_at_ms, seq, slot});
  std::push_heap(t.heap.begin(), t.heap.end(), EntryLater{});
  ++entries_;
  UpdateTimer(topic);
}

void FarSet::Drop(uint32_t slot, uint32_t topic) {
  assert(live(slot));
  if (Loc(slot) >> 63) by_id_.erase(slot);
  Loc(slot) = 0;
  Aux(slot) = free_;
  free_ = slot;
  --jobs_;
  --topics_[topic].jobs;
}

void FarSet::Move(uint32_t slot, uint64_t location) {
  assert(live(slot) && location > kTakenMark && !(location >> 63));
  Loc(slot) = location | (Loc(slot) & (uint64_t{1} << 63));
}

// --- time ------------------------------------------------------------------------

FarSet::TopicFar& FarSet::TopicOf(uint32_t topic) {
  if (topic >= topics_.size()) topics_.resize(topic + 1);
  return topics_[topic];
}

void FarSet::UpdateTimer(uint32_t topic) {
  TopicFar& t = topics_[topic];
  constexpr uint32_t kOut = std::numeric_limits<uint32_t>::max();
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

void FarSet::PopFront(uint32_t topic) {
  TopicFar& t = topics_[topic];
  std::pop_heap(t.heap.begin(), t.heap.end(), EntryLater{});
  t.heap.pop_back();
  --entries_;
  // A topic whose far jobs are all gone gives its memory back.
  if (t.heap.empty()) t.heap.shrink_to_fit();
  UpdateTimer(topic);
}

void FarSet::SkipFree(uint32_t topic) {
  TopicFar& t = topics_[topic];
  while (!t.heap.empty() && !live(t.heap.front().slot)) PopFront(topic);
}

int64_t FarSet::NextDue() const {
  if (timers_.empty()) return kNone;
  return topics_[timers_.Top()].heap.front().run_at_ms;
}

bool FarSet::PopDue(int64_t horizon_ms, uint32_t* topic, Entry* out) {
  while (!timers_.empty()) {
    uint32_t t = timers_.Top();
    const Entry e = topics_[t].heap.front();
    if (e.run_at_ms > horizon_ms) return false;
    PopFront(t);
    if (!live(e.slot)) continue;
    *topic = t;
    *out = e;
    return true;
  }
  return false;
}

void FarSet::PushBack(uint32_t topic, const Entry& e) {
  TopicFar& t = TopicOf(topic);
  t.heap.push_back(e);
  std::push_heap(t.heap.begin(), t.heap.end(), EntryLater{});
  ++entries_;
  UpdateTimer(topic);
}

const FarSet::Entry* FarSet::Earliest(uint32_t topic) {
  if (topic >= topics_.size()) return nullptr;
  SkipFree(topic);
  const TopicFar& t = topics_[topic];
  return t.heap.empty() ? nullptr : &t.heap.front();
}

void FarSet::PopTop(uint32_t topic) {
  if (topic < topics_.size() && !topics_[topic].heap.empty()) PopFront(topic);
}

}  // namespace delayq::engine
