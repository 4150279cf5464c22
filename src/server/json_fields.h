// JsonFields: a request body of the HTTP front end, one JSON object parsed
// with simdjson and read field by field, with errors that name the field.
// Unknown fields are errors (a typo such as "dealy_ms" for "delay_ms" must
// not silently add a job due now), except where the caller allows any (the
// seed's lenient /command).
//
// Private to the HTTP front end (http_routes.cc, seed_command.cc).
#ifndef DELAYQ_SERVER_JSON_FIELDS_H_
#define DELAYQ_SERVER_JSON_FIELDS_H_

#include <simdjson.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::server {

namespace dom = simdjson::dom;

// "an array", "a string", ...: for error messages.
std::string_view TypeName(dom::element_type t);

// A request body: one JSON object, read field by field with errors that
// name the field. An empty body reads as {}.
class JsonFields {
 public:
  // `allowed` empty: any field is accepted. Errors (kInvalidArgument):
  // "request: not valid JSON at byte N: what" (N counted from 0 in `text`),
  // "request: expected a JSON object, got an array", "unknown field 'topic'
  // (did you mean 'topics'?)" (the nearest of `allowed`, common/suggest.h;
  // when none is near, the list of them).
  Status Parse(dom::parser& parser, std::string_view text,
               std::initializer_list<std::string_view> allowed);

  std::optional<dom::element> Find(std::string_view key) const;

  // The object under `key` ("retry": {...}), read field by field as this one
  // is: its unknown fields are refused against `allowed`, and every error
  // names its fields under the object's ("retry.min_backoff_ms: ...").
  // *out is left empty (every read absent) when `key` is absent.
  Status Object(std::string_view key, std::initializer_list<std::string_view> allowed,
                JsonFields* out) const;

  Status String(std::string_view key, std::optional<std::string>* out) const;

  Status Int(std::string_view key, int64_t min, int64_t max, std::optional<int64_t>* out) const;

  Status Bool(std::string_view key, bool* out) const;

  // A JSON number (an integer too), min..max.
  Status Double(std::string_view key, double min, double max, std::optional<double>* out) const;

  // An array of 1..max_items strings ("topics[2]: expected a string, got
  // an integer" names the element that is not).
  Status Strings(std::string_view key, size_t max_items,
                 std::optional<std::vector<std::string>>* out) const;

  // Seconds as a JSON number (the seed's protocol), converted to ms.
  Status Seconds(std::string_view key, std::optional<int64_t>* out_ms) const;

  // A duration given either way, not both: `key` a string with a unit
  // ("delay": "5s"; ParseDurationMs) or `ms_key` an integer of milliseconds
  // ("delay_ms": 5000). Either way it must be min..max ms. *out_ms is left
  // as it was when neither is given.
  Status Duration(std::string_view key, std::string_view ms_key, int64_t min, int64_t max,
                  std::optional<int64_t>* out_ms) const;

  // What finish, release, touch and bury act on: "receipt" (the one the
  // reserve handed out), or "force": true and no receipt to act by id alone
  // (*receipt empty, *forced true). Neither, or both, is kInvalidArgument.
  Status Receipt(std::string* receipt, bool* forced) const;

  // "body" (a string is its content; any other JSON value its compact text)
  // or "body_base64" (bytes).
  Status Body(std::string* out) const;

  static Status WrongType(std::string_view key, std::string_view want, const dom::element& e);

  // "unknown field 'key'" with the nearest allowed name, or the list of them.
  static Status UnknownField(std::string_view key, std::initializer_list<std::string_view> allowed);

 private:
  // `key` as errors name it: under the enclosing object's name, if any.
  std::string Name(std::string_view key) const { return prefix_ + std::string(key); }
  // Refuses the first field of object_ not in `allowed`.
  Status CheckKnown(std::initializer_list<std::string_view> allowed) const;

  dom::object object_;
  bool has_object_ = false;
  std::string prefix_;  // "retry." for a nested object's fields; "" at the top
};

}  // namespace delayq::server

#endif  // DELAYQ_SERVER_JSON_FIELDS_H_
