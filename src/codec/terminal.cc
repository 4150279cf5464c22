#include "codec/terminal.h"

#include <cstdio>

#include "codec/utf8.h"

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

}  // namespace delayq::codec
