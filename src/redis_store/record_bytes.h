// The byte layout the Redis store's records share with its Lua scripts
// (struct.pack '>I<n>' and length-prefixed strings): unsigned big-endian
// integers of 1-8 bytes, int64 as their 8 bytes, strings after a 1-4 byte
// length. Writers append; Reader reads front to back, and a read past the
// end sets `bad` (a malformed record is reported by its caller, never read
// past). Used by the subscription and schedule codecs (redis_push.cc,
// redis_schedule.cc).
#ifndef DELAYQ_REDIS_STORE_RECORD_BYTES_H_
#define DELAYQ_REDIS_STORE_RECORD_BYTES_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace delayq::rq {

inline void PutU(std::string& out, size_t bytes, uint64_t v) {
  for (size_t i = bytes; i-- > 0;) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline void PutI(std::string& out, int64_t v) { PutU(out, 8, std::bit_cast<uint64_t>(v)); }

inline void PutS(std::string& out, size_t len_bytes, std::string_view s) {
  PutU(out, len_bytes, s.size());
  out.append(s);
}

struct Reader {
  std::string_view in;
  size_t at = 0;
  bool bad = false;

  uint64_t U(size_t bytes) {
    if (bad || in.size() - at < bytes) {
      bad = true;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>(in[at + i]);
    at += bytes;
    return v;
  }
  int64_t I() { return std::bit_cast<int64_t>(U(8)); }
  // A string after its `len_bytes`-byte length, viewed in `in`.
  std::string_view View(size_t len_bytes) {
    const size_t n = U(len_bytes);
    if (bad || in.size() - at < n) {
      bad = true;
      return {};
    }
    std::string_view s = in.substr(at, n);
    at += n;
    return s;
  }
  std::string S(size_t len_bytes) { return std::string(View(len_bytes)); }
};

}  // namespace delayq::rq

#endif  // DELAYQ_REDIS_STORE_RECORD_BYTES_H_
