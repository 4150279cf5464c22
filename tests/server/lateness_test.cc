#include "server/lateness.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

namespace delayq::server {
namespace {

TEST(LatenessHistogram, EmptyReadsZero) {
  LatenessHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.QuantileUs(0.5), 0u);
  EXPECT_EQ(h.QuantileUs(0.99), 0u);
}

TEST(LatenessHistogram, SmallValuesAreExact) {
  LatenessHistogram h;
  for (int64_t v = 0; v < 8; ++v) h.Record(v);
  EXPECT_EQ(h.QuantileUs(0.5), 3u);  // rank 4 of 0..7
  EXPECT_EQ(h.QuantileUs(1.0), 7u);
  EXPECT_EQ(h.max_us(), 7u);
}

TEST(LatenessHistogram, NegativeCountsAsZero) {
  LatenessHistogram h;
  h.Record(-5);
  EXPECT_EQ(h.QuantileUs(1.0), 0u);
}

TEST(LatenessHistogram, QuantilesWithinOneEighthOfTheTruth) {
  LatenessHistogram h;
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(6.0, 1.5);  // median ~400 us, long tail
  std::vector<uint64_t> values;
  for (int i = 0; i < 100000; ++i) {
    auto v = static_cast<uint64_t>(dist(rng));
    values.push_back(v);
    h.Record(static_cast<int64_t>(v));
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99, 0.999}) {
    uint64_t truth = values[static_cast<size_t>(q * values.size()) - 1];
    uint64_t got = h.QuantileUs(q);
    EXPECT_GE(got, truth) << q;  // an upper bound of the true quantile's bucket
    EXPECT_LE(static_cast<double>(got), truth * 1.125 + 1) << q;
  }
  EXPECT_EQ(h.max_us(), values.back());
  EXPECT_EQ(h.count(), values.size());
}

TEST(LatenessHistogram, CountAtMostIsExactAtBucketBounds) {
  LatenessHistogram h;
  for (int64_t v : {100, 400, 900, 1500, 2500, 9000}) h.Record(v);
  EXPECT_EQ(h.CountAtMost(1023), 3u);  // 1023 is a bucket's upper bound
  EXPECT_EQ(h.CountAtMost(2047), 4u);
  EXPECT_EQ(h.CountAtMost(UINT64_MAX), 6u);
}

}  // namespace
}  // namespace delayq::server
