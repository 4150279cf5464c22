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
// and when it falls due: the time index, entries (run_at, seq, slot, topic)
// in two parts:
//   mutable  the newest entries, a min-heap per topic with a heap of topics
//            by their earliest; at most max_mutable entries in all
//   sealed   runs of entries sorted by (run_at, seq) in files
//            (FarIndexFiles), handed over when the mutable part fills (the
//            files sort and write them off the caller's thread); only the
//            next block of each run is in memory (its first entry until it
//            is reached), and a heap of runs by their next entry
// The earliest entry of either part is the next due. Entries are never
// removed when a job goes (deleted, replaced, brought near): an entry whose
// slot is free is skipped, one whose slot holds another job (its seq
// differs from the record's) is the caller's to skip. So a delete costs no
// search, and nothing is rewritten in place.
//
// Memory: a slot is 12 bytes in 64 Ki-slot chunks; the id index ~5-11 bytes
// a hashed slot; the time index a bounded mutable part plus a block (96 KB)
// per sealed run: docs/engine.md "Far-future jobs".
//
// Thread-safety: none; owned by one Engine.
#ifndef DELAYQ_ENGINE_FAR_SET_H_
#define DELAYQ_ENGINE_FAR_SET_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "delayq/status.h"
#include "engine/heap.h"

namespace delayq::engine {

// In a generated id's handle part: the rest is a far slot, not an arena handle.
inline constexpr uint32_t kFarTag = 0x80000000u;

// One entry of the time index.
struct FarEntry {
  int64_t run_at_ms;
  uint64_t seq;
  uint32_t slot;
  uint32_t topic;  // the engine's topic index
};

// The time index's order: by run_at, then seq, slot and topic (total, so a
// run's sorted file and its entry kept in memory agree on which is first).
inline bool EntryBefore(const FarEntry& a, const FarEntry& b) {
  if (a.run_at_ms != b.run_at_ms) return a.run_at_ms < b.run_at_ms;
  if (a.seq != b.seq) return a.seq < b.seq;
  if (a.slot != b.slot) return a.slot < b.slot;
  return a.topic < b.topic;
}

// Where sealed runs of the time index are kept (files beside the log).
class FarIndexFiles {
 public:
  virtual ~FarIndexFiles() = default;
  // Takes a run: its entries sorted by (run_at, seq) are the run, kept from
  // now on (written out on a thread of its own: the caller does not wait
  // for the sort or the write). Answers its number.
  virtual uint64_t Write(std::vector<FarEntry> entries) = 0;
  // Reads entries of run `run` (sorted) from index `from` into `out`: at
  // least one unless `from` is its end (0 then), at most out.size(); waits
  // for the run's write if it is not done. Errors: I/O; kInternal for bytes
  // that do not check out, and for a run whose write failed.
  virtual Result<size_t> Read(uint64_t run, uint64_t from, std::span<FarEntry> out) = 0;
  // The run is used up.
  virtual void Remove(uint64_t run) = 0;
};

class FarSet {
 public:
  static constexpr uint32_t kNoSlot = std::numeric_limits<uint32_t>::max();
  static constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  using Entry = FarEntry;

  FarSet();
  ~FarSet();
  FarSet(const FarSet&) = delete;
  FarSet& operator=(const FarSet&) = delete;

  // Sealed runs go to `files` once the mutable part holds max_mutable
  // entries (Seal); without files, every entry stays in memory.
  void SetFiles(FarIndexFiles* files, size_t max_mutable) {
    files_ = files;
    max_mutable_ = max_mutable;
  }

  // The 32 bits of an id's hash the id index keys on.
  static uint32_t IdHash(std::string_view id);

  // --- slots ------------------------------------------------------------------
  // A free slot, taken (not yet findable); kNoSlot when slots ran out.
  uint32_t Take();
  // Restoring (replay): Take hands out new slots only, and TakeAt takes the
  // slot a generated id names if it is free (kNoSlot if not), so that ids
  // keep naming their slots across restarts. EndRestore links the free ones.
  void BeginRestore() { restoring_ = true; }
  uint32_t TakeAt(uint32_t slot);
  void EndRestore();
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
  uint32_t slots() const { return size_; }  // handed out at least once
  uint64_t jobs(uint32_t topic) const { return topic < topics_.size() ? topics_[topic].jobs : 0; }
  // The earliest entry's run_at (it may be dead), kNone if none; kMin-ish
  // (the smallest int64) while a run's next block could not be read.
  int64_t NextDue() const;
  // Pops the earliest entry due by `horizon_ms` whose slot is live: true
  // with it in *out; false when none is due, or on error (*error set: a run
  // could not be read; nothing is lost, it is tried again by the next call).
  bool PopDue(int64_t horizon_ms, Entry* out, Status* error);
  // Puts back an entry PopDue gave (its record could not be read now).
  void PushBack(const Entry& e);
  // Calls accept(entry) for the topic's entries whose slots are live, in
  // time order, until it returns true; false if it never did. Reads the
  // sealed runs (from where loading is) when the mutable part has none.
  // Errors: the files'.
  template <typename Fn>
  Result<bool> FindEarliest(uint32_t topic, Fn&& accept);

  // The mutable part is full: Seal() is due.
  bool seal_due() const { return files_ != nullptr && mutable_entries_ >= max_mutable_; }
  // Hands the mutable part's entries to the files as a sealed run; only its
  // earliest entry stays in memory (the run's first block is read back when
  // it is reached). O(entries) copies and compares, no sort, no I/O.
  void Seal();

  // Forgets the whole time index (its runs removed) and the topics' counts,
  // for a rebuild: each live slot is then Reindex'ed.
  void ClearIndex();
  // Counts the entry's job in its topic again (ClearIndex zeroed them).
  void Reindex(const Entry& e) {
    ++TopicOf(e.topic).jobs;
    PushMutable(e);
  }
  // A slot whose record cannot be read (its topic unknown) is gone.
  void DropUnread(uint32_t slot);

  // --- a checkpoint (a clean stop, and the start after it) -----------------------
  // A sealed run and the index of its next entry not yet popped.
  struct RunCursor {
    uint64_t file = 0;
    uint64_t next = 0;
  };
  // What a checkpoint keeps of the set besides the slots themselves.
  struct Image {
    uint32_t slots = 0;  // handed out at least once (the slots' table is this long)
    uint64_t jobs = 0;
    uint64_t sealed_entries = 0;
    std::vector<uint64_t> topic_jobs;  // by topic index
    std::vector<RunCursor> runs;
  };
  // REQUIRES: the mutable part empty (Seal first) and no run stuck
  // (Describable).
  Image Describe() const;
  bool Describable() const;
  // The slots' table as it is at BeginSnapshot, a chunk at a time, however
  // the set changes meanwhile (a checkpoint while serving writes it off the
  // engine's lock): a chunk is copied aside the first time it changes
  // before SnapshotChunk handed it out, so a snapshot costs at most the
  // chunks that change meanwhile (768 KB each). One at a time.
  void BeginSnapshot();
  size_t snapshot_chunks() const;
  // Copies chunk i (of snapshot_chunks()) as it was; returns its slots.
  size_t SnapshotChunk(size_t i, uint64_t* loc, uint32_t* aux);
  // Chunks copied aside so far (what the snapshot costs).
  size_t snapshot_saved() const { return snapshot_ == nullptr ? 0 : snapshot_->saved_count; }
  void EndSnapshot() { snapshot_.reset(); }
  static constexpr size_t kSnapshotChunkSlots = size_t{1} << 16;
  // Fills n slots' loc and aux (a chunk at a time, in order).
  using SlotLoader = std::function<Status(uint64_t* loc, uint32_t* aux, size_t n)>;
  // Takes the state a checkpoint describes: the slots from `load`, the runs
  // from the files (their next blocks read). REQUIRES: an empty set,
  // restoring (BeginRestore). Errors: load's, the files', kInternal if the
  // slots do not add up to the image; the set is left empty then.
  Status Restore(const Image& image, const SlotLoader& load);
  // The runs outlive the set (a checkpoint names them): they are not
  // removed when it goes.
  void KeepRuns() { keep_runs_ = true; }

  // Entries kept (live or not), and those in memory: what the index costs.
  size_t entries() const { return mutable_entries_ + sealed_entries_; }
  size_t mutable_entries() const { return mutable_entries_; }
  size_t sealed_runs() const { return runs_heap_.size(); }

 private:
  static constexpr uint32_t kChunkBits = 16;
  static constexpr uint32_t kChunkSlots = 1u << kChunkBits;
  static constexpr uint64_t kTakenMark = 1;  // Loc of a taken, not yet placed slot
  static constexpr size_t kRunBlock = 4096;  // entries of a run read at a time
  struct Chunk {
    uint64_t loc[kChunkSlots];  // 0 free, 1 taken; else bit 63: hashed, the rest: location
    uint32_t aux[kChunkSlots];  // hashed: the id hash; free: the next free slot
  };
  struct Snapshot {
    uint32_t size = 0;                          // slots at BeginSnapshot
    std::vector<bool> handed;                   // by chunk: SnapshotChunk gave it
    std::vector<std::unique_ptr<Chunk>> saved;  // by chunk: as it was, if it changed
    size_t saved_count = 0;
  };
  struct TopicFar {
    std::vector<Entry> heap;  // the mutable part: min-heap by (run_at, seq)
    uint64_t jobs = 0;        // live slots of the topic
    uint32_t pos = std::numeric_limits<uint32_t>::max();  // in timers_
  };
  // A total order: entries of one job placed twice (the same seq, another
  // slot or time) still sort one way, in memory and in the files alike.
  struct EntryLater {
    bool operator()(const Entry& a, const Entry& b) const { return EntryBefore(b, a); }
  };
  // A sealed run: its next entries, a block at a time.
  struct Run {
    uint64_t file = 0;
    uint64_t next = 0;       // index in the file of the entry after buf
    std::vector<Entry> buf;  // entries read, from pos on not yet popped
    size_t pos = 0;
    bool stuck = false;  // its next block could not be read: first in line, to try again
    uint32_t heap_pos = std::numeric_limits<uint32_t>::max();
  };
  struct TimerLess {
    const FarSet* f;
    bool operator()(uint32_t a, uint32_t b) const;
  };
  struct TimerPos {
    FarSet* f;
    void operator()(uint32_t topic, size_t pos) const;
  };
  struct RunLess {
    const FarSet* f;
    bool operator()(uint32_t a, uint32_t b) const;
  };
  struct RunPos {
    FarSet* f;
    void operator()(uint32_t run, size_t pos) const;
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

  // Before a slot changes: its chunk is copied aside if a snapshot still
  // needs it as it was.
  void BeforeWrite(uint32_t slot) {
    if (snapshot_ != nullptr) SaveChunk(slot >> kChunkBits);
  }
  void SaveChunk(size_t chunk);
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
  void PushMutable(const Entry& e);
  void PopMutable(uint32_t topic);  // pops the topic's top entry, fixes timers_
  void ClearMutable();
  void UpdateTimer(uint32_t topic);
  // The run's head moved (or it ended): refills its block when used up,
  // re-places it in runs_heap_ or retires it.
  void Advanced(uint32_t run, Status* error);
  const Entry* RunHead(uint32_t run) const;

  std::vector<std::unique_ptr<Chunk>> chunks_;
  uint32_t size_ = 0;  // slots handed out at least once
  uint32_t free_ = kNoSlot;
  bool restoring_ = false;              // BeginRestore: the free list is not kept
  bool keep_runs_ = false;              // KeepRuns
  std::unique_ptr<Snapshot> snapshot_;  // BeginSnapshot
  size_t jobs_ = 0;
  size_t mutable_entries_ = 0;
  size_t sealed_entries_ = 0;  // in runs, not yet popped
  std::vector<TopicFar> topics_;
  IndexedHeap<uint32_t, TimerLess, TimerPos> timers_;
  FarIndexFiles* files_ = nullptr;
  size_t max_mutable_ = std::numeric_limits<size_t>::max();
  std::vector<std::unique_ptr<Run>> runs_;  // by index; null once retired
  IndexedHeap<uint32_t, RunLess, RunPos> runs_heap_;
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

template <typename Fn>
Result<bool> FarSet::FindEarliest(uint32_t topic, Fn&& accept) {
  // A merge of the topic's entries: its mutable heap, sorted, and each run
  // from its head, read a block at a time.
  struct Source {
    std::vector<Entry> buf;
    size_t pos = 0;
    uint64_t next = 0;  // in the file; for a run
    uint64_t file = 0;
    bool run = false;
  };
  std::vector<Source> sources;
  if (topic < topics_.size() && !topics_[topic].heap.empty()) {
    Source m;
    m.buf = topics_[topic].heap;
    std::sort(m.buf.begin(), m.buf.end(),
              [](const Entry& a, const Entry& b) { return EntryLater{}(b, a); });
    sources.push_back(std::move(m));
  }
  for (const auto& r : runs_) {
    if (r == nullptr) continue;
    Source s;
    s.run = true;
    s.file = r->file;
    s.buf.assign(r->buf.begin() + static_cast<ptrdiff_t>(r->pos), r->buf.end());
    s.next = r->next;
    sources.push_back(std::move(s));
  }
  std::vector<Entry> block(kRunBlock);
  // Moves a source to its next entry of the topic whose slot is live.
  auto settle = [&](Source& s) -> Status {
    for (;;) {
      while (s.pos < s.buf.size() && (s.buf[s.pos].topic != topic || !live(s.buf[s.pos].slot))) {
        ++s.pos;
      }
      if (s.pos < s.buf.size() || !s.run) return Status::Ok();
      auto n = files_->Read(s.file, s.next, block);
      if (!n.ok()) return n.status();
      if (*n == 0) return Status::Ok();
      s.buf.assign(block.begin(), block.begin() + static_cast<ptrdiff_t>(*n));
      s.pos = 0;
      s.next += *n;
    }
  };
  for (Source& s : sources) {
    if (Status st = settle(s); !st.ok()) return st;
  }
  for (;;) {
    Source* best = nullptr;
    for (Source& s : sources) {
      if (s.pos >= s.buf.size()) continue;
      if (best == nullptr || EntryLater{}(best->buf[best->pos], s.buf[s.pos])) best = &s;
    }
    if (best == nullptr) return false;
    if (accept(best->buf[best->pos])) return true;
    ++best->pos;
    if (Status st = settle(*best); !st.ok()) return st;
  }
}

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_FAR_SET_H_
