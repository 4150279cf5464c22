// RequestParser through real byte streams: whole, pipelined, split at every
// byte, and hostile.
#include "resp/parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace delayq::resp {
namespace {

using Args = std::vector<std::string>;

// Feeds `stream` to a parser in pieces of `chunk` bytes, as reads would
// deliver it, and returns every command (or "ERR:<message>" on error).
std::vector<Args> Feed(const std::string& stream, size_t chunk, ParserLimits limits = {}) {
  RequestParser p(limits);
  std::string buf;
  std::vector<Args> out;
  for (size_t off = 0; off < stream.size() || !buf.empty();) {
    if (off < stream.size()) {
      buf.append(stream, off, chunk);
      off += chunk;
    }
    for (;;) {
      size_t consumed = 0;
      RequestParser::Status s = p.Parse(buf, &consumed);
      if (s == RequestParser::Status::kError) {
        out.push_back({"ERR:" + p.error()});
        return out;
      }
      if (s == RequestParser::Status::kCommand) {
        out.emplace_back(p.args().begin(), p.args().end());
      }
      buf.erase(0, consumed);
      if (s == RequestParser::Status::kNeedMore && consumed == 0) break;
    }
    if (off >= stream.size()) break;
  }
  return out;
}

TEST(RequestParser, MultibulkCommandIsParsed) {
  EXPECT_EQ(Feed("*3\r\n$3\r\nADD\r\n$1\r\nt\r\n$5\r\nhello\r\n", 1 << 20),
            (std::vector<Args>{{"ADD", "t", "hello"}}));
}

TEST(RequestParser, PipelinedCommandsComeOutInOrder) {
  std::string s;
  for (int i = 0; i < 100; ++i)
    s += "*2\r\n$4\r\nPING\r\n$" + std::to_string(std::to_string(i).size()) + "\r\n" +
         std::to_string(i) + "\r\n";
  auto cmds = Feed(s, 1 << 20);
  ASSERT_EQ(cmds.size(), 100u);
  EXPECT_EQ(cmds[42], (Args{"PING", "42"}));
}

TEST(RequestParser, CommandSplitAtEveryByteParsesTheSame) {
  static constexpr char kStream[] =
      "*4\r\n$3\r\nADD\r\n$6\r\norders\r\n$0\r\n\r\n$10\r\nbin\0\r\n\xff\x01yz\r\nPING x\r\n";
  const std::string s(kStream, sizeof kStream - 1);  // with its NUL byte
  auto whole = Feed(s, 1 << 20);
  ASSERT_EQ(whole.size(), 2u);
  EXPECT_EQ(whole[0][3], std::string("bin\0\r\n\xff\x01yz", 10));
  for (size_t chunk = 1; chunk < s.size(); ++chunk) {
    EXPECT_EQ(Feed(s, chunk), whole) << "chunk " << chunk;
  }
}

TEST(RequestParser, InlineCommandsSplitOnWhitespace) {
  EXPECT_EQ(Feed("ADD  t\t*  0 1000 hi\r\nPING\n", 1 << 20),
            (std::vector<Args>{{"ADD", "t", "*", "0", "1000", "hi"}, {"PING"}}));
}

TEST(RequestParser, EmptyLinesAndEmptyArraysAreSkipped) {
  EXPECT_EQ(Feed("\r\n\n*0\r\nPING\r\n", 1 << 20), (std::vector<Args>{{"PING"}}));
}

TEST(RequestParser, AbsurdLengthsAreErrorsNotAllocations) {
  EXPECT_EQ(Feed("*2147483647\r\n", 64), (std::vector<Args>{{"ERR:invalid multibulk length"}}));
  EXPECT_EQ(Feed("*1\r\n$99999999999999999999\r\n", 64),
            (std::vector<Args>{{"ERR:invalid bulk length"}}));
  EXPECT_EQ(Feed("*1\r\n$-1\r\n", 64), (std::vector<Args>{{"ERR:invalid bulk length"}}));
  EXPECT_EQ(Feed("*-1\r\n", 64), (std::vector<Args>{{"ERR:invalid multibulk length"}}));
}

TEST(RequestParser, LimitsAreEnforced) {
  ParserLimits limits;
  limits.max_args = 2;
  limits.max_bulk_bytes = 4;
  limits.max_inline_bytes = 8;
  EXPECT_EQ(Feed("*3\r\n", 64, limits), (std::vector<Args>{{"ERR:invalid multibulk length"}}));
  EXPECT_EQ(Feed("*1\r\n$5\r\n", 64, limits), (std::vector<Args>{{"ERR:invalid bulk length"}}));
  EXPECT_EQ(Feed("*1\r\n$4\r\nabcd\r\n", 64, limits), (std::vector<Args>{{"abcd"}}));
  EXPECT_EQ(Feed("a b c\r\n", 64, limits), (std::vector<Args>{{"ERR:too many arguments"}}));
  EXPECT_EQ(Feed("0123456789", 64, limits), (std::vector<Args>{{"ERR:too big inline request"}}));
}

TEST(RequestParser, ManyArgumentsCannotAddUpPastTheCommandLimit) {
  ParserLimits limits;
  limits.max_bulk_bytes = 10;
  limits.max_command_bytes = 40;
  // Each argument is within max_bulk_bytes; together they are not. The
  // error comes as soon as the header of the bulk that crosses the limit is
  // read, before its bytes arrive.
  EXPECT_EQ(Feed("*4\r\n$10\r\n0123456789\r\n$10\r\n0123456789\r\n$10\r\n", 64, limits),
            (std::vector<Args>{{"ERR:command longer than 40 bytes"}}));
  EXPECT_EQ(Feed("*2\r\n$10\r\n0123456789\r\n$10\r\n0123456789\r\n", 64, limits),
            (std::vector<Args>{{"0123456789", "0123456789"}}));
}

TEST(RequestParser, MalformedFramingIsAnError) {
  EXPECT_EQ(Feed("*1\r\n+PING\r\n", 64), (std::vector<Args>{{"ERR:expected '$', got '+'"}}));
  EXPECT_EQ(Feed("*1\r\n$4\r\nPINGxx", 64),
            (std::vector<Args>{{"ERR:expected CRLF after bulk string"}}));
  EXPECT_EQ(Feed("*1\rx", 64), (std::vector<Args>{{"ERR:expected CRLF after length"}}));
  EXPECT_EQ(Feed("*" + std::string(25, '9') + "\r\n", 64),
            (std::vector<Args>{{"ERR:invalid multibulk length"}}));
  EXPECT_EQ(Feed("*" + std::string(40, ' '), 64),
            (std::vector<Args>{{"ERR:length line too long"}}));
}

TEST(RequestParser, HalfSentCommandWaitsForTheRest) {
  RequestParser p;
  size_t consumed = 7;
  EXPECT_EQ(p.Parse("*2\r\n$4\r\nPI", &consumed), RequestParser::Status::kNeedMore);
  EXPECT_EQ(consumed, 0u);
  // The buffer may move between calls: the parser keeps offsets, not pointers.
  std::string moved = std::string("*2\r\n$4\r\nPING\r\n$1\r\nx\r\n");
  EXPECT_EQ(p.Parse(moved, &consumed), RequestParser::Status::kCommand);
  EXPECT_EQ(consumed, moved.size());
  EXPECT_EQ(p.args().size(), 2u);
  EXPECT_EQ(p.args()[1], "x");
}

}  // namespace
}  // namespace delayq::resp
