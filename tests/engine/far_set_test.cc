// FarSet's time index with its runs in real files (far::IndexFiles in a
// temporary directory): the order of entries that tie, and runs read back.
#include "engine/far_set.h"

#include <stdlib.h>

#include <cstdlib>
#include <random>
#include <string>

#include "far/index_files.h"
#include "gtest/gtest.h"

namespace delayq::engine {
namespace {

class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/delayq-far-set-test.XXXXXX";
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One job placed twice (a release past the window, then its slot taken by
// another job and it settled again): two entries with the same time and
// seq, different slots. Whichever sorts first, the live one is popped.
TEST(FarSet, EntriesThatTieOnTimeAndSeqAreAllPoppedWhateverTheirOrder) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 100; ++round) {
    TempDir tmp;
    auto files = far::IndexFiles::Open(tmp.path(), nullptr);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    FarSet far;
    far.SetFiles(files->get(), 64);
    // Filler after them, in random order, so that the run is sorted.
    uint32_t first = far.Take();
    uint32_t second = far.Take();
    bool dead_first = rng() % 2 == 0;
    far.Place(first, 0, 1000, 7, 100 + first, true, 1);
    far.Place(second, 0, 1000, 7, 100 + second, true, 2);
    for (int i = 0; i < 62; ++i) {
      uint32_t s = far.Take();
      far.Place(s, 0, 2000 + static_cast<int64_t>(rng() % 1000), 100 + i, 100 + s, false, 0);
    }
    ASSERT_TRUE(far.seal_due());
    far.Seal();
    ASSERT_EQ(far.sealed_runs(), 1u);
    far.Drop(dead_first ? first : second, 0);
    FarSet::Entry e{};
    Status error;
    ASSERT_TRUE(far.PopDue(1000, &e, &error)) << error.ToString();
    EXPECT_EQ(e.slot, dead_first ? second : first);
    EXPECT_FALSE(far.PopDue(1000, &e, &error));
    EXPECT_TRUE(error.ok());
    size_t rest = 0;
    while (far.PopDue(3000, &e, &error)) ++rest;
    EXPECT_EQ(rest, 62u);
  }
}

// A snapshot is the slots' table as it was at BeginSnapshot, however the set
// changed since (slots dropped, taken again, placed, moved, new ones past
// its end), and copies aside only the chunks that changed before they were
// handed out.
TEST(FarSet, ASnapshotIsTheTableAsItWasWhateverChangesAfter) {
  constexpr size_t kChunk = FarSet::kSnapshotChunkSlots;
  FarSet far;
  std::vector<uint64_t> was_loc;
  const uint32_t n = static_cast<uint32_t>(3 * kChunk + 100);  // four chunks
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t s = far.Take();
    ASSERT_EQ(s, i);
    far.Place(s, i % 3, 1000 + i, i + 1, 100 + 2 * uint64_t{i}, i % 2 == 0, i * 7);
  }
  for (uint32_t i = 0; i < n; i += 5) far.Drop(i, i % 3);
  auto expected = [&](uint32_t i) -> std::pair<uint64_t, uint32_t> {
    if (i % 5 == 0) return {0, 0};  // free (its aux: the free list's, not compared)
    return {(100 + 2 * uint64_t{i}) | (i % 2 == 0 ? uint64_t{1} << 63 : 0), i % 2 == 0 ? i * 7 : 0};
  };
  far.BeginSnapshot();
  ASSERT_EQ(far.snapshot_chunks(), 4u);
  std::vector<uint64_t> loc(kChunk);
  std::vector<uint32_t> aux(kChunk);
  // Chunk 0 handed out first: later changes to it cost nothing.
  ASSERT_EQ(far.SnapshotChunk(0, loc.data(), aux.data()), kChunk);
  far.Drop(1, 1);
  // Chunk 1: a slot dropped and taken again by another job; chunk 2: moved;
  // chunk 3 (part of it the snapshot's): a free slot taken, and new slots.
  far.Drop(kChunk + 1, (kChunk + 1) % 3);
  uint32_t again = far.Take();  // the free list's head: the slot just dropped
  EXPECT_EQ(again, kChunk + 1);
  far.Place(again, 2, 5, 999, 77, false, 0);
  far.Move(2 * kChunk + 1, 4242);
  for (int i = 0; i < 200; ++i) {
    uint32_t s = far.Take();
    far.Place(s, 0, 9, 2000 + i, 8000 + i, true, 3);
  }
  EXPECT_EQ(far.snapshot_saved(), 3u) << "chunks 1, 2 and 3, copied aside";
  for (size_t c = 1; c < 4; ++c) {
    size_t got = far.SnapshotChunk(c, loc.data(), aux.data());
    ASSERT_EQ(got, c < 3 ? kChunk : 100u);
    for (size_t k = 0; k < got; ++k) {
      uint32_t i = static_cast<uint32_t>(c * kChunk + k);
      auto [l, a] = expected(i);
      ASSERT_EQ(loc[k], l) << "slot " << i;
      if (l != 0) {
        ASSERT_EQ(aux[k], a) << "slot " << i;
      }
    }
  }
  far.EndSnapshot();
  EXPECT_EQ(far.location(kChunk + 1), 77u);
  EXPECT_EQ(far.location(2 * kChunk + 1), 4242u);
  // No snapshot: changes copy nothing.
  far.Drop(2 * kChunk + 1, (2 * kChunk + 1) % 3);
  EXPECT_EQ(far.snapshot_saved(), 0u);
}

}  // namespace
}  // namespace delayq::engine
