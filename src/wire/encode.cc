#include "wire/encode.h"

#include <string>

#include "resp/writer.h"

namespace delayq::wire {

void WriteJsonValue(codec::JsonWriter& w, std::string_view key, const Value& v) {
  switch (v.kind) {
    case Kind::kText:
      w.Key(key);
      w.String(v.text);
      return;
    case Kind::kBytes:
      w.TextField(key, v.text);
      return;
    case Kind::kUint:
      w.Key(key);
      w.Uint(v.u);
      return;
    case Kind::kInt:
      w.Key(key);
      w.Int(v.i);
      return;
    case Kind::kBool:
      w.Key(key);
      w.Bool(v.i != 0);
      return;
  }
}

void AppendRespValue(std::string* out, const Value& v) {
  switch (v.kind) {
    case Kind::kText:
    case Kind::kBytes:
      return resp::AppendBulk(out, v.text);
    case Kind::kUint:
      return resp::AppendInteger(out, static_cast<int64_t>(v.u));
    case Kind::kInt:
    case Kind::kBool:
      return resp::AppendInteger(out, v.i);
  }
}

void AppendRespPair(std::string* out, std::string_view key, const Value& v, bool resp3) {
  resp::AppendBulk(out, key);
  if (resp3) return AppendRespValue(out, v);
  switch (v.kind) {
    case Kind::kText:
    case Kind::kBytes:
      return resp::AppendBulk(out, v.text);
    case Kind::kUint:
      return resp::AppendBulk(out, std::to_string(static_cast<int64_t>(v.u)));
    case Kind::kInt:
    case Kind::kBool:
      return resp::AppendBulk(out, std::to_string(v.i));
  }
}

void AppendInfoLine(std::string* out, std::string_view key, const Value& v) {
  out->append(key).append(":");
  switch (v.kind) {
    case Kind::kText:
    case Kind::kBytes:
      out->append(v.text);
      break;
    case Kind::kUint:
      out->append(std::to_string(v.u));
      break;
    case Kind::kInt:
    case Kind::kBool:
      out->append(std::to_string(v.i));
      break;
  }
  out->append("\r\n");
}

void AppendRespArrayHeader(std::string* out, size_t n) { resp::AppendArrayHeader(out, n); }

void AppendRespMapHeader(std::string* out, size_t pairs, bool resp3) {
  resp::AppendMapHeader(out, pairs, resp3 ? resp::Protocol::kResp3 : resp::Protocol::kResp2);
}

void AppendMetricHeader(std::string* out, std::string_view name, std::string_view type,
                        std::string_view help) {
  out->append("# HELP ").append(name).append(" ").append(help).append("\n");
  out->append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void AppendSample(std::string* out, std::string_view name, std::string_view labels, uint64_t v) {
  out->append(name);
  if (!labels.empty()) out->append("{").append(labels).append("}");
  out->append(" ").append(std::to_string(v)).append("\n");
}

namespace {

template <typename T, size_t N>
bool TextIn(std::string_view key, const Field<T> (&fields)[N]) {
  for (const Field<T>& f : fields) {
    Kind k = f.get(T{}).kind;
    if ((k == Kind::kText || k == Kind::kBytes) && (f.name == key || f.resp_name() == key)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool IsTextKey(std::string_view key) {
  return TextIn(key, kDeliveryFields) || TextIn(key, kJobFields) || TextIn(key, kTopicFields) ||
         TextIn(key, kStatsFields);
}

}  // namespace delayq::wire
