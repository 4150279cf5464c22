// IndexedHeap: a 4-ary min-heap whose entries know where they are.
//
// Every move of an entry is reported through OnMove(entry, position), so the
// owner can store the position in the job record and later remove or
// re-order that entry in O(log n) instead of searching for it. A 4-ary heap
// is shallower than a binary one (half the levels) and its children share a
// cache line, which matters at ten million delayed jobs; inserts with random
// keys cost O(1) sift steps on average.
//
// Thread-safety: none.
#ifndef DELAYQ_ENGINE_HEAP_H_
#define DELAYQ_ENGINE_HEAP_H_

#include <cassert>
#include <cstddef>
#include <utility>
#include <vector>

namespace delayq::engine {

// kArity: children per node; 4 measured best (docs/engine.md), other values
// exist for that comparison.
template <typename Entry, typename Less, typename OnMove, size_t kArity = 4>
class IndexedHeap {
 public:
  struct NoPrefetch {
    void operator()(const Entry&) const {}
  };

  IndexedHeap(Less less, OnMove on_move) : less_(std::move(less)), on_move_(std::move(on_move)) {}

  size_t size() const { return v_.size(); }
  bool empty() const { return v_.empty(); }
  // REQUIRES: !empty().
  const Entry& Top() const { return v_.front(); }
  const Entry& At(size_t pos) const { return v_[pos]; }
  Entry& At(size_t pos) { return v_[pos]; }

  void Push(Entry e) {
    v_.push_back(std::move(e));
    SiftUp(v_.size() - 1);
  }

  // Removes and returns the entry at `pos`. REQUIRES: pos < size().
  Entry Remove(size_t pos) {
    assert(pos < v_.size());
    Entry out = std::move(v_[pos]);
    Entry last = std::move(v_.back());
    v_.pop_back();
    if (pos < v_.size()) {
      v_[pos] = std::move(last);
      Fix(pos);
    }
    return out;
  }

  Entry Pop() { return Remove(0); }

  // Removes every entry `taken` holds for and hands each to `sink`, in no
  // particular order. REQUIRES: `taken` holds for every entry ordered before
  // one it holds for (a deadline: those are a subtree at the root).
  //
  // A few are popped one by one. Many (a burst falling due on one tick) cost
  // one pass instead: the survivors are compacted and re-heaped in O(n),
  // rather than O(k log n) pops whose sift steps compare ties again and
  // again. `prefetch(entry)` is called a little before `taken`, `sink`,
  // `Less` or `OnMove` first look at an entry, so that an owner whose
  // entries point at records (the engine) can start loading them. `sink`
  // must not call TakeWhile (the scratch is the thread's).
  template <typename Taken, typename Sink, typename Prefetch = NoPrefetch>
  void TakeWhile(Taken taken, Sink sink, Prefetch prefetch = Prefetch{}) {
    if (v_.empty() || !taken(v_.front())) return;
    // The subtree of taken entries, breadth first: a child is announced when
    // queued and judged when its turn comes. Its size picks the way.
    // Scratch kept for its capacity, per thread rather than per heap (an
    // engine has two heaps per topic).
    static thread_local std::vector<size_t> marks;
    static thread_local std::vector<size_t> walk;
    marks.clear();
    walk.clear();
    walk.push_back(0);
    for (size_t head = 0; head < walk.size(); ++head) {
      size_t pos = walk[head];
      if (head > 0 && !taken(v_[pos])) continue;  // the root was judged above
      marks.push_back(pos);
      size_t first = pos * kArity + 1;
      size_t end = first + kArity < v_.size() ? first + kArity : v_.size();
      for (size_t c = first; c < end; ++c) {
        prefetch(v_[c]);
        walk.push_back(c);
      }
    }
    const size_t k = marks.size();
    const size_t n = v_.size();
    size_t levels = 1;
    for (size_t m = n; m >= kArity; m /= kArity) ++levels;
    if (k * levels * kArity < n) {
      for (size_t i = 0; i < k; ++i) sink(Pop());
      return;
    }
    constexpr size_t kAhead = 8;
    std::vector<bool> gone(n, false);
    for (size_t pos : marks) gone[pos] = true;
    size_t kept = 0;
    for (size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) prefetch(v_[i + kAhead]);
      if (gone[i]) {
        sink(std::move(v_[i]));
      } else {
        if (kept != i) v_[kept] = std::move(v_[i]);
        ++kept;
      }
    }
    v_.resize(kept);
    // Floyd's build: sift down every parent, last first; then tell every
    // entry where it ended (compaction moved most of them).
    for (size_t i = kept / kArity + 1; i-- > 0;) {
      if (i < kept) SiftDownReporting<false>(i);
    }
    for (size_t i = 0; i < kept; ++i) {
      if (i + kAhead < kept) prefetch(v_[i + kAhead]);
      on_move_(v_[i], i);
    }
  }

  // Restores order after the key of the entry at `pos` changed either way.
  void Fix(size_t pos) {
    if (pos > 0 && less_(v_[pos], v_[Parent(pos)])) {
      SiftUp(pos);
    } else {
      SiftDown(pos);
    }
  }

  // Entries in heap order (not sorted), for inspection.
  const std::vector<Entry>& entries() const { return v_; }

 private:
  static size_t Parent(size_t i) { return (i - 1) / kArity; }

  void SiftUp(size_t pos) {
    Entry e = std::move(v_[pos]);
    while (pos > 0) {
      size_t parent = Parent(pos);
      if (!less_(e, v_[parent])) break;
      v_[pos] = std::move(v_[parent]);
      on_move_(v_[pos], pos);
      pos = parent;
    }
    v_[pos] = std::move(e);
    on_move_(v_[pos], pos);
  }

  void SiftDown(size_t pos) { SiftDownReporting<true>(pos); }

  // kReport false: moves go unreported (TakeWhile's rebuild reports every
  // position once, after).
  template <bool kReport>
  void SiftDownReporting(size_t pos) {
    const size_t n = v_.size();
    Entry e = std::move(v_[pos]);
    for (;;) {
      size_t first = pos * kArity + 1;
      if (first >= n) break;
      size_t best = first;
      size_t end = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < end; ++c) {
        if (less_(v_[c], v_[best])) best = c;
      }
      if (!less_(v_[best], e)) break;
      v_[pos] = std::move(v_[best]);
      if constexpr (kReport) on_move_(v_[pos], pos);
      pos = best;
    }
    v_[pos] = std::move(e);
    if constexpr (kReport) on_move_(v_[pos], pos);
  }

  Less less_;
  OnMove on_move_;
  std::vector<Entry> v_;
};

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_HEAP_H_
