// JsonWriter appends JSON to a std::string, for replies built on the hot
// path: no DOM, no allocation beyond the output's growth, commas placed by
// the writer.
//
//   std::string out;
//   JsonWriter w(&out);
//   w.BeginObject();
//   w.Key("id");   w.String(id);
//   w.Key("jobs"); w.BeginArray(); w.Uint(1); w.Uint(2); w.EndArray();
//   w.EndObject();                       // {"id":"...","jobs":[1,2]}
//
// The writer trusts its caller for structure (Key only inside an object,
// before each value; Begin/End balanced): it does not check, as a malformed
// call sequence is a bug in the server, not input. Everything else is safe
// for any input: String() escapes what JSON requires and always produces
// valid UTF-8 (each ill-formed byte sequence becomes U+FFFD), so bytes that
// must round-trip go as base64 after IsValidUtf8() says no.
//
// Thread-safety: none; a writer per reply. *out must outlive the writer.
#ifndef DELAYQ_HTTP_JSON_WRITER_H_
#define DELAYQ_HTTP_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace delayq::http {

// True when `s` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF). SIMD-fast (simdjson).
bool IsValidUtf8(std::string_view s);
// The length of the well-formed UTF-8 sequence starting at s[i] (1 for
// ASCII), or 0 when the bytes there are not one (same rules as above).
size_t Utf8SequenceLength(std::string_view s, size_t i);

class JsonWriter {
 public:
  // Appends to *out, after whatever it already holds.
  explicit JsonWriter(std::string* out) : out_(out) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }

  // An object member's name; the next call writes its value.
  void Key(std::string_view key);

  void String(std::string_view s);
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Bool(bool v);
  void Null();
  // `json` as a value, unchecked: it must be one valid JSON value.
  void Raw(std::string_view json);

 private:
  void Separate() {
    if (need_comma_) out_->push_back(',');
  }
  void Open(char c) {
    Separate();
    out_->push_back(c);
    need_comma_ = false;
  }
  void Close(char c) {
    out_->push_back(c);
    need_comma_ = true;
  }
  // Appends `s` quoted and escaped.
  void AppendQuoted(std::string_view s);

  std::string* out_;
  // A value was just written at this level: the next key or value needs a
  // comma. After '{', '[' or a key there is none, so no stack is needed.
  bool need_comma_ = false;
};

}  // namespace delayq::http

#endif  // DELAYQ_HTTP_JSON_WRITER_H_
