// UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF), for deciding whether bytes can travel as a JSON string,
// and the escaping of text for a terminal that keeps what is UTF-8.
#ifndef DELAYQ_CODEC_UTF8_H_
#define DELAYQ_CODEC_UTF8_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace delayq::codec {

// True when `s` is well-formed UTF-8. SIMD-fast (simdjson).
bool IsValidUtf8(std::string_view s);

// The length of the well-formed UTF-8 sequence starting at s[i] (1 for
// ASCII), or 0 when the bytes there are not one (same rules as above).
size_t Utf8SequenceLength(std::string_view s, size_t i);

// Text for a terminal: valid UTF-8 is kept, control characters and bytes
// that are not UTF-8 are shown as \n, \t, \r or \xHH, so a body can neither
// break the layout nor drive the terminal.
std::string EscapeForTerminal(std::string_view s);

// The length of the well-formed UTF-8 sequence at s[i] (a lead byte >= 0x80),
// or 0 when ill-formed; then *bad is the length of its maximal subpart (>= 1),
// the bytes one U+FFFD stands for (the Unicode "maximal subpart" rule, as
// browsers and simdutf apply it). Inline: the JSON writer calls it per
// non-ASCII character.
inline size_t Utf8SequenceAt(std::string_view s, size_t i, size_t* bad) {
  auto at = [&](size_t k) -> unsigned { return static_cast<unsigned char>(s[k]); };
  unsigned c = at(i);
  size_t len;
  unsigned lo = 0x80, hi = 0xBF;  // the second byte's range (RFC 3629 table)
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;  // no overlong forms
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    *bad = 1;
    return 0;
  }
  for (size_t k = 1; k < len; ++k) {
    unsigned b = i + k < s.size() ? at(i + k) : 0;
    unsigned min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) {
      *bad = k;
      return 0;
    }
  }
  return len;
}

}  // namespace delayq::codec

#endif  // DELAYQ_CODEC_UTF8_H_
