#include "cli/json_writer.h"

#include <cstdio>

#include "http/base64.h"

namespace delayq::cli {
namespace {

// Length of the well-formed UTF-8 sequence that starts `s` (RFC 3629 table
// 3-7), or 0 if it does not start with one.
size_t Utf8SequenceLength(std::string_view s) {
  auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  auto cont = [&](size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return i < s.size() && b(i) >= lo && b(i) <= hi;
  };
  unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // no surrogates
  if (c >= 0xE1 && c <= 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}

void AppendHexByte(std::string* out, const char* prefix, unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%s%02x", prefix, c);
  *out += buf;
}

}  // namespace

std::string EscapeForTerminal(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = Utf8SequenceLength(s.substr(i));
    if (n > 1) {
      out.append(s.data() + i, n);
      i += n;
      continue;
    }
    if (n == 0 || c < 0x20 || c == 0x7F) {
      if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\r') {
        out += "\\r";
      } else {
        AppendHexByte(&out, "\\x", c);
      }
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

void JsonWriter::TextField(std::string_view key, std::string_view value) {
  if (http::IsValidUtf8(value)) {
    Key(key);
    String(value);
  } else {
    Key(std::string(key) + "_base64");
    String(http::Base64Encode(value));
  }
}

}  // namespace delayq::cli
