// net::Connection's holes: replies that come later keep their place, so a
// connection's replies leave in request order whatever order they come in.
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

}  // namespace
}  // namespace delayq::net
