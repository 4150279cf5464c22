#include "codec/json_writer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "codec/utf8.h"

namespace delayq::codec {
namespace {

std::string Str(std::string_view s) {
  std::string out;
  JsonWriter(&out).String(s);
  return out;
}

TEST(JsonWriter, CommasAreHandledAtEveryLevel) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("id");
  w.String("j1");
  w.Key("n");
  w.Int(-3);
  w.Key("list");
  w.BeginArray();
  w.Uint(1);
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.Bool(true);
  w.Bool(false);
  w.Null();
  w.Raw("{\"r\":1}");
  w.EndArray();
  w.Key("o");
  w.BeginObject();
  w.Key("k");
  w.Null();
  w.EndObject();
  w.EndObject();
  EXPECT_EQ(out, R"({"id":"j1","n":-3,"list":[1,{},[],true,false,null,{"r":1}],"o":{"k":null}})");
}

TEST(JsonWriter, AppendsAfterExistingContent) {
  std::string out = "prefix ";
  JsonWriter w(&out);
  w.BeginArray();
  w.EndArray();
  EXPECT_EQ(out, "prefix []");
}

TEST(JsonWriter, IntegersAtTheirLimits) {
  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Int(std::numeric_limits<int64_t>::min());
  w.Int(std::numeric_limits<int64_t>::max());
  w.Uint(std::numeric_limits<uint64_t>::max());
  w.Int(0);
  w.EndArray();
  EXPECT_EQ(out, "[-9223372036854775808,9223372036854775807,18446744073709551615,0]");
}

TEST(JsonWriter, StringsAreEscaped) {
  EXPECT_EQ(Str("plain"), "\"plain\"");
  EXPECT_EQ(Str(""), "\"\"");
  EXPECT_EQ(Str("q\"b\\s/"), R"("q\"b\\s/")");
  EXPECT_EQ(Str("\b\f\n\r\t"), R"("\b\f\n\r\t")");
  EXPECT_EQ(Str(std::string("\0\x01\x1f\x7f", 4)), "\"\\u0000\\u0001\\u001f\x7f\"");
}

TEST(JsonWriter, KeysAreEscapedToo) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.Key("a\"b\n");
  w.Int(1);
  w.EndObject();
  EXPECT_EQ(out, R"({"a\"b\n":1})");
}

TEST(JsonWriter, ValidUtf8PassesThrough) {
  const std::string s = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF \xF4\x8F\xBF\xBF";
  EXPECT_TRUE(IsValidUtf8(s));
  EXPECT_EQ(Str(s), "\"" + s + "\"");
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacters) {
  const std::string r = "\xEF\xBF\xBD";
  struct Case {
    std::string in, out;
  } cases[] = {
      {"\xff", r},                          // never a UTF-8 byte
      {"a\x80z", "a" + r + "z"},            // lone continuation byte
      {"\xC3", r},                          // truncated at the end
      {"\xC3z", r + "z"},                   // truncated before ASCII
      {"\xE2\x82", r},                      // one U+FFFD for a truncated 3-byte form
      {"\xC0\xAF", r + r},                  // overlong '/'
      {"\xE0\x80\xAF", r + r + r},          // overlong, 3 bytes
      {"\xED\xA0\x80", r + r + r},          // a surrogate
      {"\xF4\x90\x80\x80", r + r + r + r},  // above U+10FFFF
      {"\xF0\x9F\x98", r},                  // truncated 4-byte form
      {"\xF5\x80", r + r},                  // lead byte out of range
      {"\"\xff\n", "\\\"" + r + "\\n"},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(IsValidUtf8(c.in)) << c.out;
    std::string got = Str(c.in);
    EXPECT_EQ(got, "\"" + c.out + "\"");
    EXPECT_TRUE(IsValidUtf8(got));
  }
}

TEST(JsonWriter, EveryByteValueGivesValidUtf8) {
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  std::string got = Str(all);
  EXPECT_TRUE(IsValidUtf8(got));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_GE(static_cast<unsigned char>(got[i]), 0x20) << "raw control byte at " << i;
  }
}

TEST(IsValidUtf8, AcceptsAsciiAndEmpty) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
  EXPECT_FALSE(IsValidUtf8("abc\xff"));
}

TEST(Utf8SequenceLength, MeasuresOneSequenceOrSaysIllFormed) {
  EXPECT_EQ(Utf8SequenceLength("a", 0), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xc3\xa9", 0), 2u);          // é
  EXPECT_EQ(Utf8SequenceLength("x\xe2\x82\xac", 1), 3u);     // €
  EXPECT_EQ(Utf8SequenceLength("\xf0\x9f\x98\x80", 0), 4u);  // 😀
  EXPECT_EQ(Utf8SequenceLength("\xc0\xaf", 0), 0u);          // overlong
  EXPECT_EQ(Utf8SequenceLength("\xed\xa0\x80", 0), 0u);      // surrogate
  EXPECT_EQ(Utf8SequenceLength("\xe2\x82", 0), 0u);          // cut short
  EXPECT_EQ(Utf8SequenceLength("\xff", 0), 0u);
}

TEST(JsonWriter, OwnsItsTextWhenGivenNoString) {
  JsonWriter w;
  w.BeginArray();
  w.Uint(1);
  w.Null();
  w.EndArray();
  EXPECT_EQ(w.str(), "[1,null]");
  std::string out = "x";
  JsonWriter to(&out);
  to.Bool(true);
  EXPECT_EQ(to.str(), "xtrue");
}

TEST(JsonWriter, TextFieldFallsBackToBase64ForBytesThatAreNotUtf8) {
  JsonWriter w;
  w.BeginObject();
  w.TextField("body", "h\xc3\xa9llo");
  w.TextField("body", std::string("\x00\x01\x02\xff", 4));
  w.TextField("id", "");
  w.EndObject();
  EXPECT_EQ(w.str(), "{\"body\":\"h\xc3\xa9llo\",\"body_base64\":\"AAEC/w==\",\"id\":\"\"}");
}

TEST(EscapeForTerminal, KeepsUtf8AndShowsControlsAndBadBytes) {
  EXPECT_EQ(EscapeForTerminal("plain \xc3\xa9"), "plain \xc3\xa9");
  EXPECT_EQ(EscapeForTerminal("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(EscapeForTerminal(std::string("\x1b[2J\x7f\xff\0", 7)), "\\x1b[2J\\x7f\\xff\\x00");
}

}  // namespace
}  // namespace delayq::codec
