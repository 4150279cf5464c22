// JsonWriter appends JSON to a std::string, for replies built on the hot
// path: no DOM, no allocation beyond the output's growth, commas placed by
// the writer. It writes to a string of the caller's, or to one of its own.
//
//   std::string out;
//   JsonWriter w(&out);
//   w.BeginObject();
//   w.Key("id");   w.String(id);
//   w.Key("jobs"); w.BeginArray(); w.Uint(1); w.Uint(2); w.EndArray();
//   w.EndObject();                       // {"id":"...","jobs":[1,2]}
//
//   JsonWriter own;                      // the same over its own string
//   own.BeginObject(); own.TextField("body", bytes); own.EndObject();
//   Print(own.str());
//
// The writer trusts its caller for structure (Key only inside an object,
// before each value; Begin/End balanced): it does not check, as a malformed
// call sequence is a bug in the caller, not input. Everything else is safe
// for any input: String() escapes what JSON requires and always produces
// valid UTF-8 (each ill-formed byte sequence becomes U+FFFD), so bytes that
// must round-trip go as base64: TextField() decides.
//
// Thread-safety: none; a writer per reply. *out must outlive the writer.
#ifndef DELAYQ_CODEC_JSON_WRITER_H_
#define DELAYQ_CODEC_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace delayq::codec {

class JsonWriter {
 public:
  // Appends to *out, after whatever it already holds.
  explicit JsonWriter(std::string* out) : out_(out) {}
  // Writes to a string of its own: str().
  JsonWriter() : out_(&own_) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

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

  // Bytes as a member (SPEC §6 "body_base64"): `"key":"value"` when `value`
  // is valid UTF-8, else `"key_base64":"<base64 of value>"`, so the bytes
  // are exact either way. The one place that rule is written.
  void TextField(std::string_view key, std::string_view value);

  // The text written so far (the caller's string, or its own). Complete
  // once every Begin has its End.
  const std::string& str() const { return *out_; }

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

  std::string own_;  // the text, when the writer was given no string
  std::string* out_;
  // A value was just written at this level: the next key or value needs a
  // comma. After '{', '[' or a key there is none, so no stack is needed.
  bool need_comma_ = false;
};

}  // namespace delayq::codec

#endif  // DELAYQ_CODEC_JSON_WRITER_H_
