// The bytes a name may hold: topics, subscription names and schedule names
// are 1-200 bytes of [A-Za-z0-9._:-]. One table, one load per byte (topics
// are checked on every add and reserve).
#ifndef DELAYQ_COMMON_NAME_CHARS_H_
#define DELAYQ_COMMON_NAME_CHARS_H_

#include <array>

namespace delayq {

inline constexpr std::array<bool, 256> kNameChars = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c) {
    t[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '-';
  }
  return t;
}();

inline bool IsNameChar(unsigned char c) { return kNameChars[c]; }

}  // namespace delayq

#endif  // DELAYQ_COMMON_NAME_CHARS_H_
