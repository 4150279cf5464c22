// String escaping runs over the input once: runs of bytes that need nothing
// are appended whole; a byte >= 0x80 starts a UTF-8 sequence that is checked
// in place (the Unicode "maximal subpart" rule decides how many bytes one
// U+FFFD replaces, as browsers and simdutf do), so valid text costs no
// second validation pass.
#include "codec/json_writer.h"

#include <charconv>

#include "codec/base64.h"
#include "codec/utf8.h"

namespace delayq::codec {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
constexpr char kHex[] = "0123456789abcdef";

// True for bytes that are copied as they are: printable ASCII but '"' and '\\'.
constexpr bool IsPlain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

}  // namespace

void JsonWriter::Key(std::string_view key) {
  Separate();
  AppendQuoted(key);
  out_->push_back(':');
  need_comma_ = false;
}

void JsonWriter::String(std::string_view s) {
  Separate();
  AppendQuoted(s);
  need_comma_ = true;
}

void JsonWriter::Int(int64_t v) {
  Separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out_->append(buf, r.ptr);
  need_comma_ = true;
}

void JsonWriter::Uint(uint64_t v) {
  Separate();
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out_->append(buf, r.ptr);
  need_comma_ = true;
}

void JsonWriter::Bool(bool v) {
  Separate();
  out_->append(v ? "true" : "false");
  need_comma_ = true;
}

void JsonWriter::Null() {
  Separate();
  out_->append("null");
  need_comma_ = true;
}

void JsonWriter::Raw(std::string_view json) {
  Separate();
  out_->append(json);
  need_comma_ = true;
}

void JsonWriter::TextField(std::string_view key, std::string_view value) {
  if (IsValidUtf8(value)) {
    Key(key);
    String(value);
  } else {
    Key(std::string(key) + "_base64");
    String(Base64Encode(value));
  }
}

void JsonWriter::AppendQuoted(std::string_view s) {
  std::string& out = *out_;
  out.reserve(out.size() + s.size() + 2);
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    size_t run = i;
    while (run < s.size() && IsPlain(static_cast<unsigned char>(s[run]))) ++run;
    out.append(s.data() + i, run - i);
    if (run == s.size()) break;
    i = run;
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t bad = 0;
      size_t len = Utf8SequenceAt(s, i, &bad);
      if (len > 0) {
        out.append(s.data() + i, len);
        i += len;
      } else {
        out.append(kReplacement, 3);
        i += bad;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default: {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out.append(esc, sizeof(esc));
      }
    }
  }
  out.push_back('"');
}

}  // namespace delayq::codec
