// IndexedHeap: order, removal at any position, re-ordering after a key change,
// and the positions it reports through OnMove.
#include "engine/heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace delayq::engine {
namespace {

// Entries are indexes into `keys`; positions are recorded in `pos`.
struct Model {
  std::vector<int64_t> keys;
  std::vector<size_t> pos;
  size_t moves = 0;
};

struct KeyLess {
  const Model* m;
  bool operator()(uint32_t a, uint32_t b) const {
    if (m->keys[a] != m->keys[b]) return m->keys[a] < m->keys[b];
    return a < b;
  }
};

struct RecordPos {
  Model* m;
  void operator()(uint32_t e, size_t p) const {
    m->pos[e] = p;
    ++m->moves;
  }
};

using Heap = IndexedHeap<uint32_t, KeyLess, RecordPos>;
constexpr size_t kGone = static_cast<size_t>(-1);

class HeapTest : public ::testing::Test {
 protected:
  HeapTest() : heap_(KeyLess{&m_}, RecordPos{&m_}) {}

  uint32_t PushKey(int64_t key) {
    auto e = static_cast<uint32_t>(m_.keys.size());
    m_.keys.push_back(key);
    m_.pos.push_back(kGone);
    heap_.Push(e);
    return e;
  }

  // Every entry sits where OnMove last said, and no child is less than its
  // parent.
  void CheckInvariants() {
    const auto& v = heap_.entries();
    KeyLess less{&m_};
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_EQ(m_.pos[v[i]], i) << "entry " << v[i] << " reported at " << m_.pos[v[i]];
      if (i > 0) {
        ASSERT_FALSE(less(v[i], v[(i - 1) / 4])) << "heap order broken at " << i;
      }
    }
  }

  Model m_;
  Heap heap_;
};

TEST_F(HeapTest, EmptyHeap) {
  EXPECT_TRUE(heap_.empty());
  EXPECT_EQ(heap_.size(), 0u);
}

TEST_F(HeapTest, SingleEntryIsTopAtPositionZero) {
  uint32_t e = PushKey(5);
  EXPECT_FALSE(heap_.empty());
  EXPECT_EQ(heap_.Top(), e);
  EXPECT_EQ(m_.pos[e], 0u);
  EXPECT_EQ(heap_.Pop(), e);
  EXPECT_TRUE(heap_.empty());
}

TEST_F(HeapTest, PopOrderMatchesSortOnRandomKeys) {
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<int64_t> key(0, 500);  // many duplicates
  for (int i = 0; i < 2000; ++i) PushKey(key(rng));
  CheckInvariants();
  std::vector<uint32_t> expected(m_.keys.size());
  for (uint32_t i = 0; i < expected.size(); ++i) expected[i] = i;
  std::sort(expected.begin(), expected.end(), KeyLess{&m_});
  std::vector<uint32_t> got;
  while (!heap_.empty()) {
    EXPECT_EQ(m_.pos[heap_.Top()], 0u);
    got.push_back(heap_.Pop());
  }
  EXPECT_EQ(got, expected);
}

TEST_F(HeapTest, InterleavedPushPopKeepsOrder) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> key(-1000, 1000);
  std::vector<uint32_t> live;
  KeyLess less{&m_};
  for (int round = 0; round < 3000; ++round) {
    if (live.empty() || rng() % 3 != 0) {
      live.push_back(PushKey(key(rng)));
    } else {
      auto best = std::min_element(live.begin(), live.end(), less);
      ASSERT_EQ(heap_.Top(), *best);
      EXPECT_EQ(heap_.Pop(), *best);
      live.erase(best);
    }
  }
  CheckInvariants();
  EXPECT_EQ(heap_.size(), live.size());
}

TEST_F(HeapTest, RemoveAtArbitraryPositions) {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int64_t> key(0, 10'000);
  for (int i = 0; i < 1000; ++i) PushKey(key(rng));
  std::vector<bool> removed(m_.keys.size(), false);
  for (int i = 0; i < 600; ++i) {
    size_t p = rng() % heap_.size();
    uint32_t expected = heap_.At(p);
    EXPECT_EQ(heap_.Remove(p), expected);
    removed[expected] = true;
    CheckInvariants();
  }
  std::vector<uint32_t> expected;
  for (uint32_t e = 0; e < removed.size(); ++e) {
    if (!removed[e]) expected.push_back(e);
  }
  std::sort(expected.begin(), expected.end(), KeyLess{&m_});
  std::vector<uint32_t> got;
  while (!heap_.empty()) got.push_back(heap_.Pop());
  EXPECT_EQ(got, expected);
}

TEST_F(HeapTest, RemoveByReportedPositionRemovesThatEntry) {
  std::vector<uint32_t> es;
  for (int i = 0; i < 50; ++i) es.push_back(PushKey((i * 37) % 50));
  // Remove every third entry by the position OnMove reported for it.
  for (size_t i = 0; i < es.size(); i += 3) {
    EXPECT_EQ(heap_.Remove(m_.pos[es[i]]), es[i]);
    m_.pos[es[i]] = kGone;
    CheckInvariants();
  }
  std::vector<uint32_t> got;
  while (!heap_.empty()) got.push_back(heap_.Pop());
  for (size_t i = 0; i < es.size(); ++i) {
    bool present = std::find(got.begin(), got.end(), es[i]) != got.end();
    EXPECT_EQ(present, i % 3 != 0) << "entry " << es[i];
  }
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end(), KeyLess{&m_}));
}

TEST_F(HeapTest, RemoveLastPositionAndOnlyEntry) {
  uint32_t a = PushKey(1);
  uint32_t b = PushKey(2);
  EXPECT_EQ(heap_.Remove(1), b);
  CheckInvariants();
  EXPECT_EQ(heap_.Remove(0), a);
  EXPECT_TRUE(heap_.empty());
}

TEST_F(HeapTest, FixAfterKeyDecreaseMovesEntryUp) {
  for (int i = 0; i < 100; ++i) PushKey(100 + i);
  uint32_t e = heap_.entries().back();
  m_.keys[e] = -1;
  heap_.Fix(m_.pos[e]);
  CheckInvariants();
  EXPECT_EQ(heap_.Top(), e);
  EXPECT_EQ(m_.pos[e], 0u);
}

TEST_F(HeapTest, FixAfterKeyIncreaseMovesEntryDown) {
  for (int i = 0; i < 100; ++i) PushKey(100 + i);
  uint32_t top = heap_.Top();
  m_.keys[top] = 1'000'000;
  heap_.Fix(m_.pos[top]);
  CheckInvariants();
  EXPECT_NE(heap_.Top(), top);
  std::vector<uint32_t> got;
  while (!heap_.empty()) got.push_back(heap_.Pop());
  EXPECT_EQ(got.back(), top);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end(), KeyLess{&m_}));
}

TEST_F(HeapTest, RandomKeyChangesBothWaysKeepOrderAndPositions) {
  std::mt19937_64 rng(2024);
  std::uniform_int_distribution<int64_t> key(0, 1'000'000);
  for (int i = 0; i < 1500; ++i) PushKey(key(rng));
  for (int i = 0; i < 3000; ++i) {
    uint32_t e = static_cast<uint32_t>(rng() % m_.keys.size());
    m_.keys[e] = key(rng);
    heap_.Fix(m_.pos[e]);
  }
  CheckInvariants();
  std::vector<uint32_t> expected(m_.keys.size());
  for (uint32_t i = 0; i < expected.size(); ++i) expected[i] = i;
  std::sort(expected.begin(), expected.end(), KeyLess{&m_});
  std::vector<uint32_t> got;
  while (!heap_.empty()) got.push_back(heap_.Pop());
  EXPECT_EQ(got, expected);
}

TEST_F(HeapTest, FixWithUnchangedKeyIsHarmless) {
  for (int i = 0; i < 30; ++i) PushKey(i % 7);
  for (size_t p = 0; p < heap_.size(); ++p) heap_.Fix(p);
  CheckInvariants();
}

TEST_F(HeapTest, EveryPushReportsAPosition) {
  for (int i = 0; i < 200; ++i) {
    size_t before = m_.moves;
    uint32_t e = PushKey(200 - i);  // every push becomes the new top
    EXPECT_GT(m_.moves, before);
    EXPECT_EQ(m_.pos[e], 0u);
  }
  CheckInvariants();
}

// TakeWhile against a sorted model, for cuts that take none, a few (popped
// one by one), most, and all (the heap rebuilt): exactly the entries at or
// below the cut leave, each once; the rest stay in order at the positions
// reported.
TEST_F(HeapTest, TakeWhileTakesExactlyTheEntriesBelowTheCutAndKeepsTheRest) {
  std::mt19937 rng(7);
  for (size_t n : {1u, 2u, 5u, 17u, 300u, 5000u}) {
    for (double share : {0.0, 0.001, 0.05, 0.5, 0.97, 1.0}) {
      m_ = Model{};
      heap_ = Heap(KeyLess{&m_}, RecordPos{&m_});
      // Many ties: keys from a small range, as a burst due on one tick has.
      for (size_t i = 0; i < n; ++i) PushKey(static_cast<int64_t>(rng() % (n / 4 + 2)));
      std::vector<int64_t> sorted = m_.keys;
      std::sort(sorted.begin(), sorted.end());
      auto cut_at = static_cast<size_t>(share * static_cast<double>(n));
      int64_t cut = cut_at == 0 ? -1 : sorted[cut_at - 1];
      std::vector<uint32_t> taken;
      heap_.TakeWhile([&](uint32_t e) { return m_.keys[e] <= cut; },
                      [&](uint32_t e) { taken.push_back(e); });
      size_t expect = static_cast<size_t>(
          std::count_if(sorted.begin(), sorted.end(), [&](int64_t k) { return k <= cut; }));
      ASSERT_EQ(taken.size(), expect) << "n=" << n << " share=" << share;
      std::vector<bool> seen(n, false);
      for (uint32_t e : taken) {
        ASSERT_LE(m_.keys[e], cut);
        ASSERT_FALSE(seen[e]) << "entry " << e << " taken twice";
        seen[e] = true;
      }
      ASSERT_EQ(heap_.size(), n - expect);
      for (uint32_t e : heap_.entries()) ASSERT_GT(m_.keys[e], cut);
      CheckInvariants();
      int64_t last = cut;
      while (!heap_.empty()) {
        uint32_t e = heap_.Pop();
        ASSERT_GE(m_.keys[e], last);
        last = m_.keys[e];
      }
    }
  }
}

TEST_F(HeapTest, TakeWhileOnAnEmptyHeapOrWithNothingDueTakesNothing) {
  int calls = 0;
  heap_.TakeWhile([](uint32_t) { return true; }, [&](uint32_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  for (int k : {5, 3, 9}) PushKey(k);
  heap_.TakeWhile([&](uint32_t e) { return m_.keys[e] < 3; }, [&](uint32_t) { ++calls; });
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(heap_.size(), 3u);
  CheckInvariants();
}

TEST(IndexedHeap, WorksWithStructEntries) {
  struct Item {
    int64_t key;
    int id;
  };
  std::vector<size_t> pos(10, kGone);
  auto less = [](const Item& a, const Item& b) { return a.key < b.key; };
  auto on_move = [&pos](const Item& it, size_t p) { pos[it.id] = p; };
  IndexedHeap<Item, decltype(less), decltype(on_move)> heap(less, on_move);
  for (int i = 0; i < 10; ++i) heap.Push(Item{(i * 7) % 10, i});
  for (size_t p = 0; p < heap.size(); ++p) EXPECT_EQ(pos[heap.At(p).id], p);
  heap.At(pos[9]).key = -5;
  heap.Fix(pos[9]);
  EXPECT_EQ(heap.Top().id, 9);
  int64_t last = -100;
  while (!heap.empty()) {
    Item it = heap.Pop();
    EXPECT_GE(it.key, last);
    last = it.key;
  }
}

}  // namespace
}  // namespace delayq::engine
