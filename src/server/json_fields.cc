#include "server/json_fields.h"

#include <cmath>
#include <utility>

#include "codec/base64.h"
#include "common/duration.h"
#include "delayq/job.h"

namespace delayq::server {

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
    return InvalidArgument(std::string("body: not valid JSON: ") + simdjson::error_message(err));
  }
  if (root.type() != dom::element_type::OBJECT) {
    return InvalidArgument("body: expected a JSON object, got " +
                           std::string(TypeName(root.type())));
  }
  object_ = root.get_object().value_unsafe();
  has_object_ = true;
  if (allowed.size() == 0) return Status::Ok();
  for (dom::key_value_pair kv : object_) {
    bool known = false;
    for (std::string_view a : allowed) known = known || kv.key == a;
    if (!known) {
      return InvalidArgument("unknown field '" + std::string(kv.key.substr(0, 64)) + "'");
    }
  }
  return Status::Ok();
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
  if (e->get_string().get(s)) return WrongType(key, "a string", *e);
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
    return InvalidArgument(std::string(key) + ": expected an integer" + range + ", got " +
                           (e->is_int64() ? "one out of range" : std::string(TypeName(e->type()))));
  }
  *out = v;
  return Status::Ok();
}

Status JsonFields::Bool(std::string_view key, bool* out) const {
  auto e = Find(key);
  if (!e) return Status::Ok();
  if (e->get_bool().get(*out)) return WrongType(key, "true or false", *e);
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
    return InvalidArgument(std::string(key) + " and " + std::string(ms_key) +
                           ": give one, not both");
  }
  std::string_view text;
  if (e->get_string().get(text)) {
    if (e->is_number()) {
      return InvalidArgument(std::string(key) +
                             ": expected a duration with a unit as a string, such as \"5s\" or "
                             "\"30m\"; for a number of milliseconds use " +
                             std::string(ms_key));
    }
    return WrongType(key, "a duration such as \"5s\"", *e);
  }
  Result<int64_t> d = ParseDurationMs(text, key);
  if (!d.ok()) return d.status();
  if (*d < min) return InvalidArgument(std::string(key) + ": at least " + FormatDurationMs(min));
  if (*d > max) return InvalidArgument(std::string(key) + ": at most " + FormatDurationMs(max));
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
