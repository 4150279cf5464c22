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

TEST(ReplyWriter, MapsNullsAndTextTakeTheConnectionsProtocol) {
  std::string v2, v3;
  for (auto [out, p] : {std::pair{&v2, Protocol::kResp2}, std::pair{&v3, Protocol::kResp3}}) {
    AppendMapHeader(out, 2, p);
    AppendSetHeader(out, 3, p);
    AppendNull(out, p);
    AppendNullArray(out, p);
    AppendVerbatim(out, "# Server\r\n", p);
  }
  EXPECT_EQ(v2, "*4\r\n*3\r\n$-1\r\n*-1\r\n$10\r\n# Server\r\n\r\n");
  EXPECT_EQ(v3, "%2\r\n~3\r\n_\r\n_\r\n=14\r\ntxt:# Server\r\n\r\n");
}

}  // namespace
}  // namespace delayq::resp
