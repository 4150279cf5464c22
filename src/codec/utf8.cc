#include "codec/utf8.h"

#include <simdjson.h>

#include <cstdio>
#include <string>

namespace delayq::codec {
namespace {

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
    size_t n = Utf8SequenceLength(s, i);
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

bool IsValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  if (static_cast<unsigned char>(s[i]) < 0x80) return 1;
  size_t bad = 0;
  return Utf8SequenceAt(s, i, &bad);
}

}  // namespace delayq::codec
