// JobArena: handles, size classes, reuse and exhaustion.
#include "engine/job_arena.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <utility>
#include <vector>

namespace delayq::engine {
namespace {

std::unique_ptr<JobArena> MakeArena(size_t bytes = size_t{1} << 30) {
  auto arena = JobArena::Create(bytes);
  EXPECT_TRUE(arena.ok()) << arena.status().ToString();
  if (!arena.ok()) return nullptr;
  return std::move(arena).value();
}

size_t Rounded(size_t bytes) { return (bytes + JobArena::kUnit - 1) / JobArena::kUnit * 8; }

// [begin, end) of the record `h` of `bytes`, in bytes from the base.
std::pair<size_t, size_t> Span(uint32_t h, size_t bytes) {
  return {size_t{h} * JobArena::kUnit, size_t{h} * JobArena::kUnit + Rounded(bytes)};
}

TEST(JobArena, HandlesAreNonZeroAndDistinct) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  std::set<uint32_t> seen;
  for (int i = 0; i < 5000; ++i) {
    uint32_t h = arena->Allocate(64);
    ASSERT_NE(h, 0u);
    EXPECT_TRUE(seen.insert(h).second) << "handle " << h << " handed out twice";
  }
}

TEST(JobArena, HandleAddressesEightByteUnits) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  uint32_t a = arena->Allocate(24);
  uint32_t b = arena->Allocate(24);
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);
  EXPECT_EQ(arena->Ptr(b) - arena->Ptr(a),
            static_cast<std::ptrdiff_t>((int64_t{b} - int64_t{a}) * 8));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena->Ptr(a)) % 8, 0u);
  EXPECT_EQ(arena->Ptr(0) + size_t{a} * 8, arena->Ptr(a));
}

TEST(JobArena, RecordsOfOneClassDoNotOverlap) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  std::vector<uint32_t> hs;
  // More than one page's worth, so the class spans pages.
  for (int i = 0; i < 3000; ++i) hs.push_back(arena->Allocate(100));
  std::sort(hs.begin(), hs.end());
  for (size_t i = 1; i < hs.size(); ++i) {
    EXPECT_GE(Span(hs[i], 100).first, Span(hs[i - 1], 100).second) << i;
  }
}

TEST(JobArena, RecordsAcrossSizeClassesDoNotOverlapAndKeepTheirBytes) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  struct Rec {
    uint32_t h;
    size_t bytes;
    unsigned char fill;
  };
  std::vector<Rec> recs;
  // Every size 1..4096 once, then a second round so classes reuse pages.
  for (int round = 0; round < 2; ++round) {
    for (size_t bytes = 1; bytes <= JobArena::kMaxRecordBytes; ++bytes) {
      uint32_t h = arena->Allocate(bytes);
      ASSERT_NE(h, 0u) << "size " << bytes;
      auto fill = static_cast<unsigned char>(recs.size() * 31 + 7);
      std::memset(arena->Ptr(h), fill, bytes);
      recs.push_back({h, bytes, fill});
    }
  }
  // No two records share a byte.
  std::vector<std::pair<size_t, size_t>> spans;
  for (const Rec& r : recs) spans.push_back(Span(r.h, r.bytes));
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    ASSERT_GE(spans[i].first, spans[i - 1].second) << "records overlap";
  }
  // And every record still holds what was written to it.
  for (const Rec& r : recs) {
    const auto* p = reinterpret_cast<const unsigned char*>(arena->Ptr(r.h));
    for (size_t i = 0; i < r.bytes; ++i) {
      ASSERT_EQ(p[i], r.fill) << "record of " << r.bytes << " bytes corrupted at " << i;
    }
  }
}

TEST(JobArena, FreeThenAllocateSameSizeReusesTheSlot) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  uint32_t a = arena->Allocate(200);
  uint32_t b = arena->Allocate(200);
  arena->Free(a, 200);
  EXPECT_EQ(arena->Allocate(200), a);
  // Sizes that round to the same class share free slots.
  arena->Free(b, 200);
  EXPECT_EQ(arena->Allocate(193), b);
}

TEST(JobArena, FreedSlotsAreReusedBeforeFreshOnes) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  std::vector<uint32_t> hs;
  for (int i = 0; i < 10; ++i) hs.push_back(arena->Allocate(48));
  for (uint32_t h : hs) arena->Free(h, 48);
  std::set<uint32_t> again;
  for (int i = 0; i < 10; ++i) again.insert(arena->Allocate(48));
  EXPECT_EQ(again, std::set<uint32_t>(hs.begin(), hs.end()));
  uint32_t fresh = arena->Allocate(48);
  EXPECT_EQ(again.count(fresh), 0u);
  EXPECT_GT(fresh, *again.rbegin());
}

TEST(JobArena, FreeDoesNotLendSlotToOtherClass) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  uint32_t a = arena->Allocate(64);
  arena->Free(a, 64);
  uint32_t b = arena->Allocate(128);
  EXPECT_NE(b, a);
  // b is in another class's page; the freed 64-byte slot is still there.
  EXPECT_EQ(arena->Allocate(64), a);
}

TEST(JobArena, EachSizeClassTakesItsOwnPage) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  EXPECT_EQ(arena->used_page_bytes(), 0u);
  arena->Allocate(8);
  EXPECT_EQ(arena->used_page_bytes(), JobArena::kPageBytes);
  arena->Allocate(8);
  EXPECT_EQ(arena->used_page_bytes(), JobArena::kPageBytes);
  arena->Allocate(16);
  EXPECT_EQ(arena->used_page_bytes(), 2 * JobArena::kPageBytes);
}

TEST(JobArena, ExhaustedReservationReturnsZero) {
  // 16 pages: 16 size classes fit, the 17th does not.
  auto arena = MakeArena(16 * JobArena::kPageBytes);
  ASSERT_NE(arena, nullptr);
  for (size_t i = 1; i <= 16; ++i) {
    EXPECT_NE(arena->Allocate(i * 8), 0u) << "class " << i;
  }
  EXPECT_EQ(arena->Allocate(17 * 8), 0u);
  // Classes that already have a page keep serving from it.
  EXPECT_NE(arena->Allocate(8), 0u);
}

TEST(JobArena, FullPageOfLargestClassMovesToNextPage) {
  auto arena = MakeArena();
  ASSERT_NE(arena, nullptr);
  const size_t per_page = JobArena::kPageBytes / JobArena::kMaxRecordBytes;  // 16
  std::set<uint32_t> hs;
  for (size_t i = 0; i < per_page * 3; ++i) {
    uint32_t h = arena->Allocate(JobArena::kMaxRecordBytes);
    ASSERT_NE(h, 0u);
    hs.insert(h);
    std::memset(arena->Ptr(h), static_cast<int>(i), JobArena::kMaxRecordBytes);
  }
  EXPECT_EQ(hs.size(), per_page * 3);
  EXPECT_LE(arena->used_page_bytes(), 4 * JobArena::kPageBytes);
}

TEST(JobArena, SmallReservationIsHonoured) {
  auto arena = JobArena::Create(JobArena::kPageBytes);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_NE((*arena)->Allocate(8), 0u);
  EXPECT_EQ((*arena)->Allocate(16), 0u);  // only one page was asked for
}

TEST(JobArena, OversizeReservationIsCapped) {
  // Asking for more than 32 GiB must not fail: it is capped.
  auto arena = JobArena::Create(size_t{1} << 40);
  ASSERT_TRUE(arena.ok()) << arena.status().ToString();
  EXPECT_NE((*arena)->Allocate(8), 0u);
}

}  // namespace
}  // namespace delayq::engine
