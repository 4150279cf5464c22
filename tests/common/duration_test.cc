// ParseDurationMs / FormatDurationMs: the one reader of human durations.
#include "common/duration.h"

#include <gtest/gtest.h>

#include <string>

namespace delayq {
namespace {

int64_t Ms(std::string_view text) {
  Result<int64_t> r = ParseDurationMs(text, "delay");
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
  return r.ok() ? *r : -1;
}

std::string Error(std::string_view text) {
  Result<int64_t> r = ParseDurationMs(text, "delay");
  EXPECT_FALSE(r.ok()) << text << " was accepted as " << (r.ok() ? *r : 0);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  return r.status().message();
}

TEST(ParseDurationMs, EachUnit) {
  EXPECT_EQ(Ms("1500ms"), 1500);
  EXPECT_EQ(Ms("5s"), 5000);
  EXPECT_EQ(Ms("30m"), 30 * 60'000);
  EXPECT_EQ(Ms("2h"), 2 * 3'600'000);
  EXPECT_EQ(Ms("1d"), 86'400'000);
  EXPECT_EQ(Ms("0"), 0);
  EXPECT_EQ(Ms("0s"), 0);
}

TEST(ParseDurationMs, GroupsAddUp) {
  EXPECT_EQ(Ms("1h30m"), 90 * 60'000);
  EXPECT_EQ(Ms("1m30s500ms"), 90'500);
  EXPECT_EQ(Ms("90s"), 90'000);
}

TEST(ParseDurationMs, MistakesNameTheFieldAndWhatIsWrong) {
  std::string bare = Error("30");
  EXPECT_NE(bare.find("delay: no unit after 30"), std::string::npos) << bare;
  EXPECT_NE(bare.find("30m"), std::string::npos) << bare;  // the expected form
  EXPECT_NE(Error("5x").find("unknown unit 'x'"), std::string::npos);
  EXPECT_NE(Error("-5s").find("negative"), std::string::npos);
  EXPECT_NE(Error("1.5s").find("fraction"), std::string::npos);
  EXPECT_NE(Error("").find("nothing"), std::string::npos);
  EXPECT_NE(Error("s").find("number expected"), std::string::npos);
  EXPECT_NE(Error("5 s").find("unknown unit ' s'"), std::string::npos);
  EXPECT_NE(Error("36501d").find("100 years"), std::string::npos);
  EXPECT_NE(Error("99999999999999999999999s").find("too long"), std::string::npos);
}

TEST(ParseDurationMs, AnUnknownUnitIsNamedWholeWithTheUnitsAndTheRightSpelling) {
  // Once read as 's' followed by "a number expected at 'ec'".
  EXPECT_EQ(Error("30sec"),
            "delay: unknown unit 'sec' in '30sec': write 30s (the units are ms, s, m, h and d: "
            "1500ms, 5s, 30m, 2h, 1d, or 1h30m)");
  EXPECT_EQ(Error("5x"),
            "delay: unknown unit 'x' in '5x' (the units are ms, s, m, h and d: 1500ms, 5s, 30m, "
            "2h, 1d, or 1h30m)");
  EXPECT_NE(Error("1hour30mins").find("unknown unit 'hour' in '1hour30mins': write 1h30m "),
            std::string::npos);
  EXPECT_NE(Error("5 Min").find("unknown unit ' Min' in '5 Min': write 5m "), std::string::npos);
  EXPECT_NE(Error("2days").find(": write 2d "), std::string::npos);
  EXPECT_NE(Error("250msec").find(": write 250ms "), std::string::npos);
  // No respelling when another group is no unit at all.
  EXPECT_EQ(Error("1hour5x").find("write"), std::string::npos);
  EXPECT_NE(Error("5ss").find("unknown unit 'ss'"), std::string::npos);
}

TEST(ParseDurationMsWithin, NamesTheBoundItCrossed) {
  EXPECT_EQ(*ParseDurationMsWithin("30s", "wait", 0, 60'000), 30'000);
  EXPECT_EQ(*ParseDurationMsWithin("1m", "wait", 60'000, 60'000), 60'000);
  EXPECT_EQ(ParseDurationMsWithin("2d", "request-timeout", 0, 86'400'000).status().message(),
            "request-timeout: '2d' is longer than the longest allowed, 1d");
  EXPECT_EQ(ParseDurationMsWithin("0", "ttr", 1000, 86'400'000).status().message(),
            "ttr: '0' is shorter than the least allowed, 1s");
  // A text that is not a duration says so first, as ParseDurationMs does.
  EXPECT_EQ(ParseDurationMsWithin("5x", "wait", 0, 1000).status().message(),
            ParseDurationMs("5x", "wait").status().message());
}

TEST(FormatDurationMs, ReadsBackAsTheSameDuration) {
  EXPECT_EQ(FormatDurationMs(0), "0");
  EXPECT_EQ(FormatDurationMs(1500), "1500ms");
  EXPECT_EQ(FormatDurationMs(30 * 60'000), "30m");
  EXPECT_EQ(FormatDurationMs(90 * 60'000), "1h30m");
  EXPECT_EQ(FormatDurationMs(86'400'000 + 5000), "1d5s");
  for (int64_t ms : {1LL, 999LL, 1000LL, 61'000LL, 3'600'000LL, 90'061'000LL}) {
    EXPECT_EQ(Ms(FormatDurationMs(ms)), ms) << ms;
  }
}

}  // namespace
}  // namespace delayq
