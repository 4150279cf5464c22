#include "cli/json_writer.h"

#include <cstdio>

#include "http/base64.h"
#include "http/json_writer.h"

namespace delayq::cli {
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
    size_t n = http::Utf8SequenceLength(s, i);
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
