// FarSet: the delayed jobs due beyond the engine's memory window, kept as
// little as finding them needs; each job's record (body and all) stays in
// the durable store, at a location the store gave (Journal::JobPut).
//
// A far job is a slot: its record's location (8 bytes) and, for a job found
// by its id text, 4 bytes of that text's hash. How a slot is found:
//   named   a job added far with a generated id: the id's handle part is
//           kFarTag | slot (FormatGeneratedId), so the id says where it is
//   hashed  any other id (a client's, or a generated one that named an
//           arena handle): an id index (a hash set of slots, by the id's
//           hash); candidates are confirmed by the caller, which reads the
//           record (the hash is 32 bits: collisions are rare, not absent)
// and when it falls due: a per-topic min-heap of entries (run_at, seq,
// slot), with a heap of topics by their earliest entry. Entries are never
// removed when a job goes (deleted, replaced, brought near): an entry whose
// slot is free is skipped, one whose slot holds another job (its seq
// differs from the record's) is the caller's to skip. So a delete costs no
// search, and nothing here is rewritten in place.
//
// Memory: a slot is 12 bytes in 64 Ki-slot chunks; the id index ~5-11 bytes
// a hashed slot; the time index 24 bytes an entry (until it goes to sealed
// files on disk: docs/engine.md "Far-future jobs").
//
// Thread-safety: none; owned by one Engine.
#ifndef DELAYQ_ENGINE_FAR_SET_H_
#define DELAYQ_ENGINE_FAR_SET_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "engine/heap.h"

namespace delayq::engine {

// In a generated id's handle part: the rest is a far slot, not an arena handle.
inline constexpr uint32_t kFarTag = 0x80000000u;

class FarSet {
 public:
  static constexpr uint32_t kNoSlot = std::numeric_limits<uint32_t>::max();
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();

  struct Entry {
    int64_t run_at_ms;
    uint64_t seq;
    uint32_t slot;
  };

  FarSet();
  ~FarSet();
  FarSet(const FarSet&) = delete;
  FarSet& operator=(const FarSet&) = delete;

  // The 32 bits of an id's hash the id index keys on.
  static uint32_t IdHash(std::string_view id);

  // --- slots ------------------------------------------------------------------
  // A free slot, taken (not yet findable); kNoSlot when slots ran out.
  uint32_t Take();
  // Makes a taken slot a far job of `topic` due at run_at_ms whose record is
  // at `location` (non-zero). hashed: found by the id index under `id_hash`
  // (else by its slot number: named).
  void Place(uint32_t slot, uint32_t topic, int64_t run_at_ms, uint64_t seq, uint64_t location,
             bool hashed, uint32_t id_hash);
  // The job in `slot` is gone (or brought near): frees the slot. Its time
  // entry stays, to be skipped.
  void Drop(uint32_t slot, uint32_t topic);
  // Gives a taken slot back unused.
  void Untake(uint32_t slot);
  bool live(uint32_t slot) const { return slot < size_ && Loc(slot) > kTakenMark; }
  bool named(uint32_t slot) const { return live(slot) && !(Loc(slot) >> 63); }
  uint64_t location(uint32_t slot) const { return Loc(slot) & ~(uint64_t{1} << 63); }
  // Compaction wrote the record again elsewhere.
  void Move(uint32_t slot, uint64_t location);
  // Calls fn(slot) for each hashed slot under `id_hash` until it returns true;
  // returns that slot, or kNoSlot.
  template <typename Fn>
  uint32_t FindHashed(uint32_t id_hash, Fn&& fn);
  // Calls fn(slot) for every live slot (after a repair moved records).
  template <typename Fn>
  void ForEachLive(Fn&& fn) const;

  // --- when they fall due -----------------------------------------------------
  size_t jobs() const { return jobs_; }
  uint64_t jobs(uint32_t topic) const { return topic < topics_.size() ? topics_[topic].jobs : 0; }
  // The earliest entry's run_at across topics (it may be dead), kNone if none.
  int64_t NextDue() const;
  // Pops the earliest entry due by `horizon_ms` whose slot is live; false if none.
  bool PopDue(int64_t horizon_ms, uint32_t* topic, Entry* out);
  // Puts back an entry PopDue gave (its record could not be read now).
  void PushBack(uint32_t topic, const Entry& e);
  // The topic's earliest entry whose slot is live, or nullptr; PopTop drops it
  // (when its slot holds another job).
  const Entry* Earliest(uint32_t topic);
  void PopTop(uint32_t topic);
  // Entries kept (live or not): what the time index costs.
  size_t entries() const { return entries_; }

 private:
  static constexpr uint32_t kChunkBits = 16;
  static constexpr uint32_t kChunkSlots = 1u << kChunkBits;
  static constexpr uint64_t kTakenMark = 1;  // Loc of a taken, not yet placed slot
  struct Chunk {
    uint64_t loc[kChunkSlots];  // 0 free, 1 taken; else bit 63: hashed, the rest: location
    uint32_t aux[kChunkSlots];  // hashed: the id hash; free: the next free slot
  };
  struct TopicFar {
    std::vector<Entry> heap;                              // min-heap by (run_at, seq)
    uint64_t jobs = 0;                                    // live slots of the topic
    uint32_t pos = std::numeric_limits<uint32_t>::max();  // in timers_
  };
  struct EntryLater {
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.run_at_ms != b.run_at_ms) return a.run_at_ms > b.run_at_ms;
      return a.seq > b.seq;
    }
  };
  struct TimerLess {
    const FarSet* f;
    bool operator()(uint32_t a, uint32_t b) const;
  };
  struct TimerPos {
    FarSet* f;
    void operator()(uint32_t topic, size_t pos) const;
  };
  // A lookup in the id index: the hash, and the caller's check of a candidate.
  struct Probe {
    uint32_t id_hash;
    void* fn;
    bool (*call)(void* fn, uint32_t slot);
  };
  struct SlotHash {
    const FarSet* f;
    using is_transparent = void;
    size_t operator()(uint32_t slot) const { return Mix(f->Aux(slot)); }
    size_t operator()(const Probe& p) const { return Mix(p.id_hash); }
  };
  struct SlotEq {
    const FarSet* f;
    using is_transparent = void;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    bool operator()(const Probe& p, uint32_t slot) const {
      return f->Aux(slot) == p.id_hash && p.call(p.fn, slot);
    }
    bool operator()(uint32_t slot, const Probe& p) const { return (*this)(p, slot); }
  };

  static size_t Mix(uint32_t h) { return static_cast<size_t>(h) * 0x9E3779B97F4A7C15ull; }
  uint64_t& Loc(uint32_t slot) {
    return chunks_[slot >> kChunkBits]->loc[slot & (kChunkSlots - 1)];
  }
  uint64_t Loc(uint32_t slot) const {
    return chunks_[slot >> kChunkBits]->loc[slot & (kChunkSlots - 1)];
  }
  uint32_t& Aux(uint32_t slot) {
    return chunks_[slot >> kChunkBits]->aux[slot & (kChunkSlots - 1)];
  }
  uint32_t Aux(uint32_t slot) const {
    return chunks_[slot >> kChunkBits]->aux[slot & (kChunkSlots - 1)];
  }
  TopicFar& TopicOf(uint32_t topic);
  void PopFront(uint32_t topic);  // pops the topic's top entry, fixes timers_
  void UpdateTimer(uint32_t topic);
  // Drops the topic's top entries whose slots are free.
  void SkipFree(uint32_t topic);

  std::vector<std::unique_ptr<Chunk>> chunks_;
  uint32_t size_ = 0;  // slots handed out at least once
  uint32_t free_ = kNoSlot;
  size_t jobs_ = 0;
  size_t entries_ = 0;
  std::vector<TopicFar> topics_;
  IndexedHeap<uint32_t, TimerLess, TimerPos> timers_;
  // The hashed slots, by id hash. A Probe's comparison is the caller's
  // check (it reads the record), so a lookup walks the candidates.
  absl::flat_hash_set<uint32_t, SlotHash, SlotEq> by_id_;
};

template <typename Fn>
uint32_t FarSet::FindHashed(uint32_t id_hash, Fn&& fn) {
  if (by_id_.empty()) return kNoSlot;
  using F = std::remove_reference_t<Fn>;
  Probe p{id_hash, const_cast<void*>(static_cast<const void*>(&fn)),
          [](void* f, uint32_t slot) -> bool { return (*static_cast<F*>(f))(slot); }};
  auto it = by_id_.find(p);
  return it == by_id_.end() ? kNoSlot : *it;
}

template <typename Fn>
void FarSet::ForEachLive(Fn&& fn) const {
  for (uint32_t s = 0; s < size_; ++s) {
    if (live(s)) fn(s);
  }
}

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_FAR_SET_H_
