#include "http/url.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace delayq::http {
namespace {

using Segments = std::vector<std::string>;

TEST(SplitTarget, PathAndQuerySplitAtTheFirstQuestionMark) {
  Target t = SplitTarget("/v1/jobs?wait=5&x=a?b");
  EXPECT_EQ(t.path, "/v1/jobs");
  EXPECT_EQ(t.query, "wait=5&x=a?b");
  t = SplitTarget("/v1/jobs");
  EXPECT_EQ(t.path, "/v1/jobs");
  EXPECT_EQ(t.query, "");
  t = SplitTarget("/?");
  EXPECT_EQ(t.path, "/");
  EXPECT_EQ(t.query, "");
  t = SplitTarget("");
  EXPECT_EQ(t.path, "");
}

TEST(SplitTarget, FragmentIsDropped) {
  TargetView v = SplitTargetView("/a?b=1#frag?x");
  EXPECT_EQ(v.path, "/a");
  EXPECT_EQ(v.query, "b=1");
}

TEST(SplitTarget, AbsoluteFormIsReducedToPathAndQuery) {
  TargetView v = SplitTargetView("http://host:7702/v1/stats?x=1");
  EXPECT_EQ(v.path, "/v1/stats");
  EXPECT_EQ(v.query, "x=1");
  v = SplitTargetView("http://host");
  EXPECT_EQ(v.path, "/");
  EXPECT_EQ(v.query, "");
  v = SplitTargetView("https://host?q");
  EXPECT_EQ(v.path, "/");
  EXPECT_EQ(v.query, "q");
  // "://" inside an origin-form target is just data.
  v = SplitTargetView("/cb?url=http://x/y");
  EXPECT_EQ(v.path, "/cb");
  EXPECT_EQ(v.query, "url=http://x/y");
  EXPECT_EQ(SplitTargetView("*").path, "*");
}

TEST(PercentDecode, EscapesAreDecodedAndPlusStaysPlus) {
  EXPECT_EQ(PercentDecode("a%2Fb%2fc+d%20e"), "a/b/c+d e");
  EXPECT_EQ(PercentDecode(""), "");
  EXPECT_EQ(PercentDecode("%00%FF"), std::string("\0\xff", 2));
  EXPECT_EQ(PercentDecodeQuery("a+b%2B"), "a b+");
}

TEST(PercentDecode, BadEscapesAreRefused) {
  for (const char* s : {"%", "%2", "a%2", "%zz", "%2g", "%%", "%-1", "%+1"}) {
    EXPECT_EQ(PercentDecode(s), std::nullopt) << s;
    EXPECT_EQ(PercentDecodeQuery(s), std::nullopt) << s;
  }
}

TEST(QueryParam, FirstMatchingKeyWinsAndIsDecoded) {
  std::string_view q = "wait=5000&topic=orders%2Eclose&wait=1&flag&empty=&sp=a+b";
  EXPECT_EQ(QueryParam(q, "wait"), "5000");
  EXPECT_EQ(QueryParam(q, "topic"), "orders.close");
  EXPECT_EQ(QueryParam(q, "flag"), "");
  EXPECT_EQ(QueryParam(q, "empty"), "");
  EXPECT_EQ(QueryParam(q, "sp"), "a b");
  EXPECT_EQ(QueryParam(q, "missing"), std::nullopt);
  EXPECT_EQ(QueryParam(q, "wai"), std::nullopt);
  EXPECT_EQ(QueryParam("", "a"), std::nullopt);
  EXPECT_EQ(QueryParam("&&a=1&", "a"), "1");
  EXPECT_EQ(QueryParam("a=1=2", "a"), "1=2");
}

TEST(QueryParam, EncodedKeysAreComparedDecoded) {
  EXPECT_EQ(QueryParam("my%20key=1", "my key"), "1");
  EXPECT_EQ(QueryParam("my+key=2", "my key"), "2");
}

TEST(QueryParam, BadEncodingIsNotAValueAndValidQuerySaysSo) {
  EXPECT_EQ(QueryParam("a=%zz", "a"), std::nullopt);
  EXPECT_FALSE(ValidQuery("a=1&b=%zz"));
  EXPECT_FALSE(ValidQuery("%g=1"));
  EXPECT_TRUE(ValidQuery("a=1&b=%41&c&d=+"));
  EXPECT_TRUE(ValidQuery(""));
}

TEST(PathSegments, EncodedSlashStaysInItsSegment) {
  EXPECT_EQ(PathSegments("/v1/jobs/a%2Fb"), (Segments{"v1", "jobs", "a/b"}));
  EXPECT_EQ(PathSegments("/v1/topics/orders.close/jobs"),
            (Segments{"v1", "topics", "orders.close", "jobs"}));
  EXPECT_EQ(PathSegments("/a+b%20c"), (Segments{"a+b c"}));
}

TEST(PathSegments, EmptySegmentsAreKept) {
  EXPECT_EQ(PathSegments("/"), (Segments{}));
  EXPECT_EQ(PathSegments("/a/"), (Segments{"a", ""}));
  EXPECT_EQ(PathSegments("//a"), (Segments{"", "a"}));
  EXPECT_EQ(PathSegments("/%2F"), (Segments{"/"}));
}

TEST(PathSegments, BadPathsAreRefused) {
  EXPECT_EQ(PathSegments(""), std::nullopt);
  EXPECT_EQ(PathSegments("v1/jobs"), std::nullopt);
  EXPECT_EQ(PathSegments("*"), std::nullopt);
  EXPECT_EQ(PathSegments("/v1/jobs/%2"), std::nullopt);
  EXPECT_EQ(PathSegments("/%zz/x"), std::nullopt);
}

}  // namespace
}  // namespace delayq::http
