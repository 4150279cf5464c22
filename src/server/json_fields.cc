#include "server/json_fields.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "codec/base64.h"
#include "codec/utf8.h"
#include "common/duration.h"
#include "common/suggest.h"
#include "delayq/job.h"

namespace delayq::server {
namespace {

// Where a text that simdjson refused stops being JSON (RFC 8259), and why.
// simdjson's DOM parser checks a whole document at SIMD speed but says
// neither where nor, in words a user can act on, what; this runs only on a
// body already refused, so its byte-at-a-time pace costs nothing otherwise.
class SyntaxScanner {
 public:
  explicit SyntaxScanner(std::string_view text) : t_(text) {}

  // The first error, or nullopt when the text is JSON to this scanner
  // (simdjson refused it for a reason of its own).
  std::optional<std::pair<size_t, std::string>> FirstError() {
    if (Value(0) && (SkipSpace(), i_ == t_.size())) return std::nullopt;
    if (error_.empty()) error_ = "text after the JSON value, " + Found();
    return std::make_pair(i_, error_);
  }

 private:
  // simdjson's own limit.
  static constexpr int kMaxDepth = 1024;

  void SkipSpace() {
    while (i_ < t_.size() &&
           (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) {
      ++i_;
    }
  }
  // "found 'x'", "found byte 0x01", "the body ended there".
  std::string Found() const {
    if (i_ >= t_.size()) return "but the request ended there";
    unsigned char ch = static_cast<unsigned char>(t_[i_]);
    char buf[24];
    if (ch >= 0x20 && ch < 0x7f) {
      std::snprintf(buf, sizeof buf, "found '%c'", ch);
    } else {
      std::snprintf(buf, sizeof buf, "found byte 0x%02X", ch);
    }
    return buf;
  }
  bool Fail(std::string why) {
    error_ = std::move(why);
    return false;
  }
  bool Expect(char ch, std::string_view what) {
    SkipSpace();
    if (i_ < t_.size() && t_[i_] == ch) {
      ++i_;
      return true;
    }
    return Fail("expected " + std::string(what) + ", " + Found());
  }

  bool Value(int depth) {
    SkipSpace();
    if (i_ >= t_.size()) return Fail("expected a value, " + Found());
    switch (t_[i_]) {
      case '{':
        return Container(depth, '}');
      case '[':
        return Container(depth, ']');
      case '"':
        return String();
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        if (t_[i_] == '-' || (t_[i_] >= '0' && t_[i_] <= '9')) return Number();
        return Fail("expected a value (an object, array, string, number, true, false or null), " +
                    Found());
    }
  }

  bool Container(int depth, char close) {
    if (depth + 1 > kMaxDepth) {
      return Fail("nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    const bool object = close == '}';
    ++i_;  // '{' or '['
    SkipSpace();
    if (i_ < t_.size() && t_[i_] == close) {
      ++i_;
      return true;
    }
    for (;;) {
      if (object) {
        SkipSpace();
        if (i_ >= t_.size() || t_[i_] != '"') {
          return Fail("expected a field name in double quotes, " + Found());
        }
        if (!String() || !Expect(':', "':' after the field name")) return false;
      }
      if (!Value(depth + 1)) return false;
      SkipSpace();
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < t_.size() && t_[i_] == close) {
        ++i_;
        return true;
      }
      return Fail(object ? "expected ',' or '}' after a field, " + Found()
                         : "expected ',' or ']' after an element, " + Found());
    }
  }

  bool String() {
    const size_t open = i_++;
    while (i_ < t_.size()) {
      unsigned char ch = static_cast<unsigned char>(t_[i_]);
      if (ch == '"') {
        ++i_;
        return true;
      }
      if (ch < 0x20)
        return Fail("a control character in a string (write it as an escape: \\n, \\u0001)");
      if (ch == '\\') {
        if (i_ + 1 >= t_.size()) break;
        char e = t_[i_ + 1];
        if (e == 'u') {
          for (size_t k = 2; k < 6; ++k) {
            if (i_ + k >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_ + k]))) {
              return Fail("\\u must be followed by 4 hex digits");
            }
          }
          i_ += 6;
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          return Fail(
              "unknown escape in a string (use \\\" \\\\ \\/ \\b \\f \\n \\r \\t or \\uXXXX)");
        }
        i_ += 2;
        continue;
      }
      if (ch >= 0x80) {
        size_t len = codec::Utf8SequenceLength(t_, i_);
        if (len == 0) return Fail("bytes that are not UTF-8 in a string");
        i_ += len;
        continue;
      }
      ++i_;
    }
    i_ = open;
    return Fail("a string that is never closed (no ending '\"')");
  }

  bool Literal(std::string_view word) {
    if (t_.substr(i_, word.size()) != word) {
      return Fail("expected a value (an object, array, string, number, true, false or null), " +
                  Found());
    }
    i_ += word.size();
    return true;
  }

  bool Number() {
    const size_t start = i_;
    auto digits = [&] {
      size_t from = i_;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
      return i_ > from;
    };
    if (t_[i_] == '-') ++i_;
    if (i_ < t_.size() && t_[i_] == '0') {
      ++i_;
    } else if (!digits()) {
      return Fail("a number needs a digit after '-', " + Found());
    }
    bool integer = true;
    if (i_ < t_.size() && t_[i_] == '.') {
      ++i_;
      integer = false;
      if (!digits()) return Fail("a number needs a digit after '.', " + Found());
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
      integer = false;
      if (i_ < t_.size() && (t_[i_] == '+' || t_[i_] == '-')) ++i_;
      if (!digits()) return Fail("a number needs a digit in its exponent, " + Found());
    }
    // What simdjson refuses of a well-formed number: integers beyond 64
    // bits, and numbers beyond a double.
    std::string text(t_.substr(start, i_ - start));
    errno = 0;
    if (integer) {
      if (text[0] == '-') {
        (void)std::strtoll(text.c_str(), nullptr, 10);
      } else {
        (void)std::strtoull(text.c_str(), nullptr, 10);
      }
    } else {
      (void)std::strtod(text.c_str(), nullptr);
    }
    if (errno == ERANGE) {
      i_ = start;
      return Fail(integer ? "an integer beyond 64 bits" : "a number beyond the range of a double");
    }
    return true;
  }

  std::string_view t_;
  size_t i_ = 0;
  std::string error_;
};

// "0", "1000000", "0.5": a range's bound in a message.
std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

}  // namespace

std::string_view TypeName(dom::element_type t) {
  switch (t) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
      return "an integer";
    case dom::element_type::DOUBLE:
      return "a number";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return "a boolean";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "a value";
}

Status JsonFields::Parse(dom::parser& parser, std::string_view text,
                         std::initializer_list<std::string_view> allowed) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return Status::Ok();
  dom::element root;
  if (auto err = parser.parse(text.data(), text.size()).get(root); err) {
    // "request", not "body": a job's "body" is one of the fields.
    if (auto at = SyntaxScanner(text).FirstError()) {
      return InvalidArgument("request: not valid JSON at byte " + std::to_string(at->first) + ": " +
                             at->second);
    }
    return InvalidArgument(std::string("request: not valid JSON: ") + simdjson::error_message(err));
  }
  if (root.type() != dom::element_type::OBJECT) {
    return InvalidArgument("request: expected a JSON object, got " +
                           std::string(TypeName(root.type())));
  }
  object_ = root.get_object().value_unsafe();
  has_object_ = true;
  return CheckKnown(allowed);
}

Status JsonFields::CheckKnown(std::initializer_list<std::string_view> allowed) const {
  if (allowed.size() == 0) return Status::Ok();
  for (dom::key_value_pair kv : object_) {
    bool known = false;
    for (std::string_view a : allowed) known = known || kv.key == a;
    if (known) continue;
    if (prefix_.empty()) return UnknownField(kv.key, allowed);
    // A nested object's: its names and the suggestion under the object's.
    std::vector<std::string> names;
    for (std::string_view a : allowed) names.push_back(Name(a));
    std::string message = "unknown field '" + Name(kv.key.substr(0, 64)) + "'";
    if (std::optional<std::string> near = Nearest(Name(kv.key), names)) {
      return InvalidArgument(message + " (did you mean '" + *near + "'?)");
    }
    message += " (its fields: ";
    for (size_t i = 0; i < names.size(); ++i) message += (i == 0 ? "" : ", ") + names[i];
    return InvalidArgument(message + ")");
  }
  return Status::Ok();
}

Status JsonFields::Object(std::string_view key, std::initializer_list<std::string_view> allowed,
                          JsonFields* out) const {
  out->prefix_ = Name(key) + ".";
  out->has_object_ = false;
  auto e = Find(key);
  if (!e) return Status::Ok();
  if (e->get_object().get(out->object_)) return WrongType(Name(key), "an object", *e);
  out->has_object_ = true;
  return out->CheckKnown(allowed);
}

Status JsonFields::Double(std::string_view key, double min, double max,
                          std::optional<double>* out) const {
  auto e = Find(key);
  if (!e) return Status::Ok();
  double v = 0;
  if (e->get_double().get(v) || !std::isfinite(v) || v < min || v > max) {
    return InvalidArgument(
        Name(key) + ": expected a number " + FormatNumber(min) + ".." + FormatNumber(max) +
        ", got " + (e->is_number() ? "one out of range" : std::string(TypeName(e->type()))));
  }
  *out = v;
  return Status::Ok();
}

Status JsonFields::Strings(std::string_view key, size_t max_items,
                           std::optional<std::vector<std::string>>* out) const {
  auto e = Find(key);
  if (!e) return Status::Ok();
  dom::array arr;
  if (e->get_array().get(arr)) return WrongType(Name(key), "an array of strings", *e);
  if (arr.size() == 0) return InvalidArgument(Name(key) + ": expected at least one");
  if (arr.size() > max_items) {
    return InvalidArgument(Name(key) + ": " + std::to_string(arr.size()) + " given, at most " +
                           std::to_string(max_items) + " allowed");
  }
  std::vector<std::string> items;
  for (dom::element item : arr) {
    std::string_view text;
    if (item.get_string().get(text)) {
      return WrongType(Name(key) + "[" + std::to_string(items.size()) + "]", "a string", item);
    }
    items.emplace_back(text);
  }
  *out = std::move(items);
  return Status::Ok();
}

Status JsonFields::UnknownField(std::string_view key,
                                std::initializer_list<std::string_view> allowed) {
  std::string message = "unknown field '" + std::string(key.substr(0, 64)) + "'";
  std::vector<std::string> known(allowed.begin(), allowed.end());
  if (std::optional<std::string> near = Nearest(key, known)) {
    return InvalidArgument(message + " (did you mean '" + *near + "'?)");
  }
  // Nothing near: what the endpoint reads, so the right name is one look away.
  message += " (this request's fields: ";
  for (size_t i = 0; i < known.size(); ++i) message += (i == 0 ? "" : ", ") + known[i];
  return InvalidArgument(message + ")");
}

std::optional<dom::element> JsonFields::Find(std::string_view key) const {
  if (!has_object_) return std::nullopt;
  dom::element e;
  if (object_.at_key(key).get(e)) return std::nullopt;
  if (e.is_null()) return std::nullopt;  // "field": null reads as absent
  return e;
}

Status JsonFields::String(std::string_view key, std::optional<std::string>* out) const {
  auto e = Find(key);
  if (!e) return Status::Ok();
  std::string_view s;
  if (e->get_string().get(s)) return WrongType(Name(key), "a string", *e);
  *out = std::string(s);
  return Status::Ok();
}

Status JsonFields::Int(std::string_view key, int64_t min, int64_t max,
                       std::optional<int64_t>* out) const {
  auto e = Find(key);
  if (!e) return Status::Ok();
  int64_t v = 0;
  if (e->get_int64().get(v) || v < min || v > max) {
    std::string range;
    if (min != INT64_MIN || max != INT64_MAX) {
      range = " " + std::to_string(min) + ".." + std::to_string(max);
    }
    return InvalidArgument(Name(key) + ": expected an integer" + range + ", got " +
                           (e->is_int64() ? "one out of range" : std::string(TypeName(e->type()))));
  }
  *out = v;
  return Status::Ok();
}

Status JsonFields::Bool(std::string_view key, bool* out) const {
  auto e = Find(key);
  if (!e) return Status::Ok();
  if (e->get_bool().get(*out)) return WrongType(Name(key), "true or false", *e);
  return Status::Ok();
}

Status JsonFields::Seconds(std::string_view key, std::optional<int64_t>* out_ms) const {
  auto e = Find(key);
  if (!e) return Status::Ok();
  double s = 0;
  if (e->get_double().get(s) || !std::isfinite(s) || s < 0 ||
      s * 1000 > static_cast<double>(kMaxDelayMs)) {
    return InvalidArgument(std::string(key) + ": expected seconds, a number >= 0");
  }
  *out_ms = static_cast<int64_t>(std::llround(s * 1000));
  return Status::Ok();
}

Status JsonFields::Duration(std::string_view key, std::string_view ms_key, int64_t min, int64_t max,
                            std::optional<int64_t>* out_ms) const {
  std::optional<int64_t> ms;
  if (Status s = Int(ms_key, min, max, &ms); !s.ok()) return s;
  auto e = Find(key);
  if (!e) {
    if (ms) *out_ms = ms;
    return Status::Ok();
  }
  if (ms) {
    return InvalidArgument(Name(key) + " and " + Name(ms_key) + ": give one, not both");
  }
  std::string_view text;
  if (e->get_string().get(text)) {
    if (e->is_number()) {
      return InvalidArgument(Name(key) +
                             ": expected a duration with a unit as a string, such as \"5s\" or "
                             "\"30m\"; for a number of milliseconds use " +
                             Name(ms_key));
    }
    return WrongType(Name(key), "a duration such as \"5s\"", *e);
  }
  Result<int64_t> d = ParseDurationMs(text, Name(key));
  if (!d.ok()) return d.status();
  if (*d < min) return InvalidArgument(Name(key) + ": at least " + FormatDurationMs(min));
  if (*d > max) return InvalidArgument(Name(key) + ": at most " + FormatDurationMs(max));
  *out_ms = *d;
  return Status::Ok();
}

Status JsonFields::Receipt(std::string* receipt, bool* forced) const {
  std::optional<std::string> given;
  if (Status s = String("receipt", &given); !s.ok()) return s;
  *forced = false;
  if (Status s = Bool("force", forced); !s.ok()) return s;
  if (given && *forced)
    return InvalidArgument("receipt and force: give receipt or force, not both");
  if (*forced) return Status::Ok();
  if (!given) {
    return InvalidArgument(
        "receipt: required — the receipt from the reserve that handed the job out "
        "(\"force\": true acts by id alone)");
  }
  // "" would read as force in the Queue call: a receipt given must be one.
  if (given->empty()) {
    return InvalidArgument(
        "receipt: expected the 24 hex digits a reserve hands out, got none (\"force\": true "
        "acts by id alone)");
  }
  *receipt = std::move(*given);
  return Status::Ok();
}

Status JsonFields::Body(std::string* out) const {
  auto text = Find("body");
  auto b64 = Find("body_base64");
  if (text && b64) return InvalidArgument("body and body_base64: give one, not both");
  if (text) {
    std::string_view s;
    if (!text->get_string().get(s)) {
      *out = std::string(s);
    } else {
      *out = simdjson::minify(*text);
    }
    return Status::Ok();
  }
  if (b64) {
    std::string_view s;
    if (b64->get_string().get(s)) return WrongType("body_base64", "a base64 string", *b64);
    auto bytes = codec::Base64Decode(s);
    if (!bytes) return InvalidArgument("body_base64: not valid base64");
    *out = std::move(*bytes);
  }
  return Status::Ok();
}

Status JsonFields::WrongType(std::string_view key, std::string_view want, const dom::element& e) {
  return InvalidArgument(std::string(key) + ": expected " + std::string(want) + ", got " +
                         std::string(TypeName(e.type())));
}

}  // namespace delayq::server
