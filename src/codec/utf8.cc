#include "codec/utf8.h"

#include <simdjson.h>

namespace delayq::codec {

bool IsValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

size_t Utf8SequenceLength(std::string_view s, size_t i) {
  if (static_cast<unsigned char>(s[i]) < 0x80) return 1;
  size_t bad = 0;
  return Utf8SequenceAt(s, i, &bad);
}

}  // namespace delayq::codec
