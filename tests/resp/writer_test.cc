#include "resp/writer.h"

#include <gtest/gtest.h>

#include <string>

namespace delayq::resp {
namespace {

TEST(ReplyWriter, EveryReplyTypeIsFramed) {
  std::string out;
  AppendSimple(&out, "OK");
  AppendError(&out, "NOTFOUND job 'x' does not exist");
  AppendInteger(&out, -42);
  AppendBulk(&out, std::string("a\0b", 3));
  AppendNullBulk(&out);
  AppendNullArray(&out);
  AppendArrayHeader(&out, 2);
  EXPECT_EQ(out, std::string("+OK\r\n-NOTFOUND job 'x' does not exist\r\n:-42\r\n$3\r\na\0b\r\n"
                             "$-1\r\n*-1\r\n*2\r\n",
                             5 + 34 + 6 + 9 + 5 + 5 + 4));
}

TEST(ReplyWriter, LineBreaksInSimpleRepliesCannotBreakFraming) {
  std::string out;
  AppendError(&out, "INVALID bad\r\nid");
  AppendSimple(&out, "a\nb");
  EXPECT_EQ(out, "-INVALID bad  id\r\n+a b\r\n");
}

}  // namespace
}  // namespace delayq::resp
