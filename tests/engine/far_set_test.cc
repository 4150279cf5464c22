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

}  // namespace
}  // namespace delayq::engine
