// What the command line adds to http::JsonWriter: a writer that owns its
// text, fields that fall back to base64 for bytes that are not UTF-8, and
// escaping of text meant for a terminal.
#ifndef DELAYQ_CLI_JSON_WRITER_H_
#define DELAYQ_CLI_JSON_WRITER_H_

#include <string>
#include <string_view>

#include "http/json_writer.h"

namespace delayq::cli {

// Text for a terminal: valid UTF-8 is kept, control characters and bytes
// that are not UTF-8 are shown as \n, \t, \r or \xHH, so a body can neither
// break the layout nor drive the terminal.
std::string EscapeForTerminal(std::string_view s);

namespace internal {
struct JsonText {
  std::string text;
};
}  // namespace internal

// An http::JsonWriter over a string of its own (base-from-member: the string
// is built before the writer that points at it).
class JsonWriter : private internal::JsonText, public http::JsonWriter {
 public:
  JsonWriter() : internal::JsonText(), http::JsonWriter(&text) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // `"key": "value"` when `value` is valid UTF-8, else
  // `"key_base64": "<base64 of value>"` (SPEC §6 "body_base64").
  void TextField(std::string_view key, std::string_view value);

  // The document so far. Complete once every Begin has its End.
  const std::string& str() const { return text; }
};

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_JSON_WRITER_H_
