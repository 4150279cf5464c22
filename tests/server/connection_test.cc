// net::Connection's holes: replies that come later keep their place, so a
// connection's replies leave in request order whatever order they come in;
// and the count of bytes written that tells which replies left.
#include "gtest/gtest.h"
#include "net/tcp_server.h"

namespace delayq::net {
namespace {

TEST(ConnectionHoles, RepliesLeaveInRequestOrderWhateverOrderTheyComeIn) {
  Connection c;
  c.out = "+first\r\n";
  uint64_t a = c.OpenHole();
  c.out += "+third\r\n";
  uint64_t b = c.OpenHole();
  uint64_t d = c.OpenHole();  // two holes in one place
  c.out += "+sixth\r\n";
  EXPECT_EQ(c.holes(), 3u);
  EXPECT_EQ(c.Writable(), 8u);  // up to the first hole only
  EXPECT_TRUE(c.Owed());

  EXPECT_TRUE(c.FillHole(d, "+fifth\r\n"));
  EXPECT_TRUE(c.FillHole(b, "+fourth\r\n"));
  EXPECT_FALSE(c.FillHole(b, "+again\r\n"));  // filled already
  EXPECT_EQ(c.Writable(), 8u);
  c.Consume(5);  // a short write
  EXPECT_EQ(c.Writable(), 3u);
  EXPECT_TRUE(c.FillHole(a, "+second\r\n"));
  EXPECT_EQ(c.holes(), 0u);
  EXPECT_EQ(c.Writable(), c.out.size());
  EXPECT_EQ(c.out, "t\r\n+second\r\n+third\r\n+fourth\r\n+fifth\r\n+sixth\r\n");
}

TEST(ConnectionHoles, NothingIsWritableBeforeAHoleAtTheFront) {
  Connection c;
  uint64_t a = c.OpenHole();
  c.out = "+later\r\n";
  EXPECT_EQ(c.Writable(), 0u);
  EXPECT_TRUE(c.Owed());
  c.FillHole(a, "");  // an empty reply is a reply too
  EXPECT_EQ(c.Writable(), c.out.size());
  c.Consume(c.out.size());
  EXPECT_FALSE(c.Owed());
}

// What a front end reads to tell which replies a closed connection never
// sent: written() counts every byte consumed, and HoleAt follows a hole as
// the bytes before it leave.
TEST(ConnectionHoles, WrittenCountsBytesSentAndHoleAtFollowsTheHole) {
  Connection c;
  EXPECT_EQ(c.written(), 0u);
  c.out = "+one\r\n";
  uint64_t a = c.OpenHole();
  c.out += "+three\r\n";
  EXPECT_EQ(c.HoleAt(a), 6);
  c.Consume(4);
  EXPECT_EQ(c.written(), 4u);
  EXPECT_EQ(c.HoleAt(a), 2);  // byte written() + 2 of everything sent
  c.Consume(2);
  EXPECT_TRUE(c.FillHole(a, "+two\r\n"));
  EXPECT_EQ(c.HoleAt(a), -1);
  c.Consume(c.out.size());
  EXPECT_EQ(c.written(), 6u + 6u + 8u);
}

}  // namespace
}  // namespace delayq::net
