// The encoders that walk the field tables (wire/fields.h): a struct as a JSON
// object, as RESP field/value pairs, as a RESP array of values (a delivery),
// and its figures as Prometheus samples.
#ifndef DELAYQ_WIRE_ENCODE_H_
#define DELAYQ_WIRE_ENCODE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/json_writer.h"
#include "wire/fields.h"

namespace delayq::wire {

// A kDouble's text: the shortest that reads back as the same double ("2.5",
// "0", "1e-07"), as JSON and RESP carry it.
std::string FormatDouble(double v);
// A kTextList's text in INFO and the command line: "a,b" (the lists held,
// topic names, have no commas).
std::string JoinList(const std::vector<std::string>& list);

// JSON: `"key":value`, a kBytes value by JsonWriter::TextField's rule.
void WriteJsonValue(codec::JsonWriter& w, std::string_view key, const Value& v);
// RESP: the key, then the value: in RESP2 a bulk string (numbers as their
// digits, as Redis's HGETALL and CONFIG GET answer); in RESP3 (`resp3`),
// where the pair is a map's entry and types carry over, as AppendRespValue.
void AppendRespPair(std::string* out, std::string_view key, const Value& v, bool resp3 = false);
// Redis INFO's text: "key:value\r\n" (numbers as their digits).
void AppendInfoLine(std::string* out, std::string_view key, const Value& v);
// RESP: the value alone; numbers as RESP integers.
void AppendRespValue(std::string* out, const Value& v);
// Prometheus text format 0.0.4: HELP and TYPE of a metric, and one sample.
void AppendMetricHeader(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help);
void AppendSample(std::string* out, std::string_view name, std::string_view labels, uint64_t v);

// The fields of `v` as members of the JSON object being written (no braces).
template <typename T, size_t N>
void WriteJsonFields(codec::JsonWriter& w, const T& v, const Field<T> (&fields)[N]) {
  for (const Field<T>& f : fields) {
    const Value x = f.get(v);
    if (f.omit_empty && x.text.empty() && (x.kind == Kind::kText || x.kind == Kind::kBytes)) {
      continue;
    }
    WriteJsonValue(w, f.name, x);
  }
}

// `v` as one JSON object.
template <typename T, size_t N>
void WriteJson(codec::JsonWriter& w, const T& v, const Field<T> (&fields)[N]) {
  w.BeginObject();
  WriteJsonFields(w, v, fields);
  w.EndObject();
}

// `v` as RESP key/value pairs, and room for `extra_pairs` more that the
// caller appends after it (AppendRespPair, with the same `resp3`): a flat
// array of pairs in RESP2, a map in RESP3 (a connection after HELLO 3).
template <typename T, size_t N>
void AppendRespPairs(std::string* out, const T& v, const Field<T> (&fields)[N],
                     size_t extra_pairs = 0, bool resp3 = false);

// `v`'s pairs alone, without the array or map header: more pairs after
// AppendRespPairs' own (its extra_pairs counts them), from another table.
template <typename T, size_t N>
void AppendRespFields(std::string* out, const T& v, const Field<T> (&fields)[N],
                      bool resp3 = false) {
  for (const Field<T>& f : fields) AppendRespPair(out, f.resp_name(), f.get(v), resp3);
}

// The kind of the row named `key` (its name or RESP name) in `fields`, or
// nullopt: what the command line reading RESP pairs back makes of a value.
template <typename T, size_t N>
std::optional<Kind> KindOf(std::string_view key, const Field<T> (&fields)[N]) {
  for (const Field<T>& f : fields) {
    if (f.name == key || f.resp_name() == key) return f.get(T{}).kind;
  }
  return std::nullopt;
}

// `v` as INFO lines, one per field, under their RESP names.
template <typename T, size_t N>
void AppendInfoLines(std::string* out, const T& v, const Field<T> (&fields)[N]) {
  for (const Field<T>& f : fields) AppendInfoLine(out, f.resp_name(), f.get(v));
}

// `v` as a RESP array of its fields' values alone, in table order (a
// delivery in RESERVE's and PEEK's replies).
template <typename T, size_t N>
void AppendRespValues(std::string* out, const T& v, const Field<T> (&fields)[N]);

// Deliveries as RESERVE answers them: an array of AppendRespValues(d,
// kDeliveryFields) for each, byte for byte, without walking the table: a
// burst hands out ten thousand jobs at once, and the table's Value per
// field cost four times as much (tests/wire checks the two agree).
void AppendRespDeliveries(std::string* out, const std::vector<Delivery>& ds);

// The Prometheus samples of the fields that have a metric; a metric's HELP
// and TYPE come before its first sample.
template <typename T, size_t N>
void AppendMetrics(std::string* out, const T& v, const Field<T> (&fields)[N]) {
  std::string_view last;
  for (const Field<T>& f : fields) {
    if (f.metric.name.empty()) continue;
    if (f.metric.name != last) AppendMetricHeader(out, f.metric.name, f.metric.type, f.metric.help);
    last = f.metric.name;
    const Value x = f.get(v);
    AppendSample(out, f.metric.name, f.metric.label, x.kind == Kind::kUint ? x.u : x.i);
  }
}

// Whether `key` is a text field in any table (a command line reading pairs
// keeps "007" an id, not the number 7).
bool IsTextKey(std::string_view key);

// resp/writer.h's, for the templates here (the command line, which uses
// this header, does not see src/resp).
void AppendRespArrayHeader(std::string* out, size_t n);
// A map of `pairs` pairs: "%n" in RESP3, the flat array "*2n" in RESP2.
void AppendRespMapHeader(std::string* out, size_t pairs, bool resp3);

template <typename T, size_t N>
void AppendRespPairs(std::string* out, const T& v, const Field<T> (&fields)[N], size_t extra_pairs,
                     bool resp3) {
  AppendRespMapHeader(out, N + extra_pairs, resp3);
  AppendRespFields(out, v, fields, resp3);
}

template <typename T, size_t N>
void AppendRespValues(std::string* out, const T& v, const Field<T> (&fields)[N]) {
  AppendRespArrayHeader(out, N);
  for (const Field<T>& f : fields) AppendRespValue(out, f.get(v));
}

}  // namespace delayq::wire

#endif  // DELAYQ_WIRE_ENCODE_H_
