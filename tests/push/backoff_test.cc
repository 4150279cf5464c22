#include "push/backoff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

namespace delayq::push {
namespace {

RetryPolicy Policy(int64_t min_ms, int64_t max_ms, uint32_t doublings) {
  RetryPolicy p;
  p.min_backoff_ms = min_ms;
  p.max_backoff_ms = max_ms;
  p.max_doublings = doublings;
  return p;
}

std::vector<int64_t> Schedule(const RetryPolicy& p, uint32_t n) {
  std::vector<int64_t> waits;
  for (uint32_t f = 1; f <= n; ++f) waits.push_back(BackoffMs(p, f, 0.0));
  return waits;
}

// Cloud Tasks' RetryConfig.max_doublings documentation: min_backoff 10s,
// max_backoff 300s, max_doublings 3 "will retry at 10s, 20s, 40s, 80s, 160s,
// 240s, 300s, 300s, ...".
TEST(Backoff, FollowsCloudTasksDocumentedExample) {
  EXPECT_EQ(Schedule(Policy(10'000, 300'000, 3), 9),
            (std::vector<int64_t>{10'000, 20'000, 40'000, 80'000, 160'000, 240'000, 300'000,
                                  300'000, 300'000}));
}

TEST(Backoff, ZeroDoublingsGrowLinearlyByTheMinimum) {
  EXPECT_EQ(Schedule(Policy(1'000, 4'500, 0), 6),
            (std::vector<int64_t>{1'000, 2'000, 3'000, 4'000, 4'500, 4'500}));
}

TEST(Backoff, DefaultPolicyDoublesFromOneSecondToFiveMinutes) {
  EXPECT_EQ(Schedule(RetryPolicy{}, 11),
            (std::vector<int64_t>{1'000, 2'000, 4'000, 8'000, 16'000, 32'000, 64'000, 128'000,
                                  256'000, 300'000, 300'000}));
}

TEST(Backoff, ZeroFailuresIsTreatedAsTheFirst) {
  EXPECT_EQ(BackoffMs(Policy(10'000, 300'000, 3), 0, 0.0), 10'000);
}

TEST(Backoff, MinimumEqualToMaximumIsConstant) {
  EXPECT_EQ(Schedule(Policy(7'000, 7'000, 16), 5), (std::vector<int64_t>(5, 7'000)));
}

TEST(Backoff, ZeroMinimumRetriesAtOnce) {
  EXPECT_EQ(Schedule(Policy(0, 300'000, 16), 4), (std::vector<int64_t>(4, 0)));
  EXPECT_EQ(BackoffMs(Policy(0, 300'000, 0), 1'000, 0.9), 0);
}

TEST(Backoff, ExtremesNeverOverflowPastTheMaximum) {
  const int64_t day = 24LL * 3600 * 1000;
  const uint32_t most = std::numeric_limits<uint32_t>::max();
  for (uint32_t doublings : {0u, 1u, 30u, 62u}) {
    for (uint32_t failures : {1u, 2u, 31u, 62u, 63u, 64u, 1'000u, most}) {
      const int64_t w = BackoffMs(Policy(day, day, doublings), failures, 0.0);
      EXPECT_EQ(w, day) << doublings << " " << failures;
      const int64_t v = BackoffMs(Policy(1, day, doublings), failures, 0.0);
      EXPECT_GE(v, 1) << doublings << " " << failures;
      EXPECT_LE(v, day) << doublings << " " << failures;
    }
  }
  EXPECT_EQ(BackoffMs(Policy(1, day, 62), most, 0.0), day);
  EXPECT_EQ(BackoffMs(Policy(1, day, 0), most, 0.0), day);
}

TEST(Backoff, ScheduleNeverShrinks) {
  for (uint32_t doublings : {0u, 3u, 16u}) {
    int64_t last = 0;
    for (uint32_t f = 1; f <= 200; ++f) {
      const int64_t w = BackoffMs(Policy(250, 3'600'000, doublings), f, 0.0);
      EXPECT_GE(w, last) << doublings << " " << f;
      last = w;
    }
  }
}

TEST(Backoff, JitterTakesUpToAFifthOff) {
  const RetryPolicy p = Policy(1'000, 300'000, 16);
  EXPECT_EQ(BackoffMs(p, 5, 0.0), 16'000);
  EXPECT_EQ(BackoffMs(p, 5, 0.5), 14'400);
  const int64_t most = BackoffMs(p, 5, 0.999999);
  EXPECT_GT(most, 12'800);
  EXPECT_LE(most, 12'801);
  EXPECT_EQ(BackoffMs(p, 20, 0.5), 270'000);  // off the maximum, never above it
  for (double u = 0; u < 1; u += 0.01) {
    const int64_t w = BackoffMs(p, 3, u);
    EXPECT_LE(w, 4'000) << u;
    EXPECT_GE(w, 3'200) << u;
  }
}

TEST(Backoff, JitterNeverGoesBelowTheMinimum) {
  const RetryPolicy p = Policy(10'000, 300'000, 3);
  EXPECT_EQ(BackoffMs(p, 1, 0.99), 10'000);  // 8'020 without the floor
  EXPECT_EQ(BackoffMs(p, 2, 0.99), 16'040);  // 20'000 less a fifth of 0.99
  EXPECT_EQ(BackoffMs(Policy(10'000, 11'000, 3), 2, 0.99), 10'000);
}

TEST(Backoff, DrawOutsideTheUnitIntervalIsClamped) {
  const RetryPolicy p = Policy(1'000, 300'000, 16);
  EXPECT_EQ(BackoffMs(p, 5, -3.0), 16'000);
  EXPECT_EQ(BackoffMs(p, 5, std::nan("")), 16'000);
  const int64_t high = BackoffMs(p, 5, 7.0);
  EXPECT_GE(high, 12'800);
  EXPECT_LE(high, 12'801);
  EXPECT_GE(BackoffMs(p, 5, std::numeric_limits<double>::infinity()), 12'800);
}

constexpr int64_t kMax = 300'000;
// Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example date) in Unix ms.
constexpr int64_t kRfcExampleMs = 784'111'777'000;

TEST(RetryAfter, DelaySecondsBecomeMs) {
  EXPECT_EQ(ParseRetryAfterMs("120", 0, kMax), 120'000);
  EXPECT_EQ(ParseRetryAfterMs("0", 0, kMax), 0);
  EXPECT_EQ(ParseRetryAfterMs("007", 0, kMax), 7'000);
  EXPECT_EQ(ParseRetryAfterMs(" \t5 ", 0, kMax), 5'000);  // optional whitespace around
  EXPECT_EQ(ParseRetryAfterMs("300", 123, kMax), 300'000);
}

TEST(RetryAfter, DelaySecondsAreCappedAtAnyLength) {
  EXPECT_EQ(ParseRetryAfterMs("301", 0, kMax), kMax);
  EXPECT_EQ(ParseRetryAfterMs("9223372036854775807", 0, kMax), kMax);
  EXPECT_EQ(ParseRetryAfterMs("99999999999999999999999999999999", 0, kMax), kMax);
  EXPECT_EQ(ParseRetryAfterMs("1", 0, 500), 500);
  EXPECT_EQ(ParseRetryAfterMs("5", 0, 0), 0);
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(ParseRetryAfterMs("99999999999999999999999999999999", 0, big), big);
  EXPECT_EQ(ParseRetryAfterMs("9223372036854775", 0, big), 9'223'372'036'854'775'000);
}

TEST(RetryAfter, ImfFixdateIsMsFromNow) {
  EXPECT_EQ(ParseRetryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", kRfcExampleMs - 30'000, kMax),
            30'000);
  EXPECT_EQ(ParseRetryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", kRfcExampleMs - 1, kMax), 1);
  // The day name is not checked against the date (RFC 9110 does not ask it).
  EXPECT_EQ(ParseRetryAfterMs("Mon, 06 Nov 1994 08:49:37 GMT", kRfcExampleMs - 2'000, kMax), 2'000);
  // 2024-02-29T00:00:00Z, a leap day, is 1709164800 s.
  EXPECT_EQ(ParseRetryAfterMs("Thu, 29 Feb 2024 00:00:00 GMT", 1'709'164'790'000, kMax), 10'000);
  EXPECT_EQ(ParseRetryAfterMs("Thu, 01 Jan 1970 00:00:10 GMT", 0, kMax), 10'000);
  EXPECT_EQ(ParseRetryAfterMs(" Thu, 01 Jan 1970 00:00:10 GMT\t", 0, kMax), 10'000);
}

TEST(RetryAfter, PastDateIsZeroAndFarDateIsCapped) {
  EXPECT_EQ(ParseRetryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", kRfcExampleMs, kMax), 0);
  EXPECT_EQ(ParseRetryAfterMs("Sun, 06 Nov 1994 08:49:37 GMT", kRfcExampleMs + 99'000, kMax), 0);
  EXPECT_EQ(ParseRetryAfterMs("Fri, 31 Dec 9999 23:59:59 GMT", kRfcExampleMs, kMax), kMax);
}

TEST(RetryAfter, GarbageIsNotRead) {
  for (const char* bad : {"",
                          "   ",
                          "abc",
                          "-5",
                          "+5",
                          "1.5",
                          "12abc",
                          "5 s",
                          "0x10",
                          "1e3",
                          "Sun, 06 Nov 1994 08:49:37 gmt",   // case matters
                          "Sun, 06 Nov 1994 08:49:37 UTC",   // only GMT
                          "Sunday, 06-Nov-94 08:49:37 GMT",  // RFC 850, obsolete
                          "Sun Nov  6 08:49:37 1994",        // asctime, obsolete
                          "Sun, 6 Nov 1994 08:49:37 GMT",    // the day is two digits
                          "Xyz, 06 Nov 1994 08:49:37 GMT",
                          "Sun, 06 Nox 1994 08:49:37 GMT",
                          "Sun, 31 Feb 2024 08:49:37 GMT",
                          "Sun, 29 Feb 2023 08:49:37 GMT",
                          "Sun, 00 Nov 1994 08:49:37 GMT",
                          "Sun, 06 Nov 1994 24:00:00 GMT",
                          "Sun, 06 Nov 1994 08:60:00 GMT",
                          "Sun, 06 Nov 1994 08:49:61 GMT",
                          "Sun, 06 Nov 19x4 08:49:37 GMT",
                          "Sun, 06 Nov 1994 08-49-37 GMT"}) {
    EXPECT_EQ(ParseRetryAfterMs(bad, kRfcExampleMs, kMax), std::nullopt) << '"' << bad << '"';
  }
}

TEST(RetryAfter, LeapSecondIsAccepted) {
  EXPECT_EQ(ParseRetryAfterMs("Sat, 31 Dec 2016 23:59:60 GMT", 1'483'228'790'000, kMax), 10'000);
}

TEST(RetryAfter, NegativeCapMeansNoWait) { EXPECT_EQ(ParseRetryAfterMs("5", 0, -1), 0); }

}  // namespace
}  // namespace delayq::push
