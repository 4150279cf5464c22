#include "wire/encode.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <string>

#include "resp/writer.h"

namespace delayq::wire {

std::string FormatDouble(double v) {
  if (!std::isfinite(v)) return "0";  // JSON has no NaN or infinity; no field holds one
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string JoinList(const std::vector<std::string>& list) {
  std::string out;
  for (const std::string& s : list) {
    if (!out.empty()) out += ',';
    out += s;
  }
  return out;
}

namespace {

void AppendRespList(std::string* out, const std::vector<std::string>& list) {
  resp::AppendArrayHeader(out, list.size());
  for (const std::string& s : list) resp::AppendBulk(out, s);
}

}  // namespace

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
    case Kind::kDouble:
      w.Key(key);
      w.Raw(FormatDouble(v.d));
      return;
    case Kind::kTextList:
      w.Key(key);
      w.BeginArray();
      for (const std::string& s : *v.list) w.String(s);
      w.EndArray();
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
    case Kind::kDouble:
      return resp::AppendBulk(out, FormatDouble(v.d));
    case Kind::kTextList:
      return AppendRespList(out, *v.list);
  }
}

namespace {

// RESP's header line for `v`: type byte, digits, CRLF, at p; returns the end.
char* PutNumberLine(char* p, char type, int64_t v) {
  *p++ = type;
  p = std::to_chars(p, p + 20, v).ptr;
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

char* PutBulk(char* p, std::string_view s) {
  p = PutNumberLine(p, '$', static_cast<int64_t>(s.size()));
  if (!s.empty()) std::memcpy(p, s.data(), s.size());
  p += s.size();
  *p++ = '\r';
  *p++ = '\n';
  return p;
}

}  // namespace

void AppendRespDeliveries(std::string* out, const std::vector<Delivery>& ds) {
  // Every header line is at most 23 bytes (type, sign, 20 digits... CRLF
  // included): 1 + 10 of them per delivery, and one for the array.
  constexpr size_t kLine = 24;
  constexpr size_t kFields = std::size(kDeliveryFields);
  static_assert(kFields == 10, "AppendRespDeliveries writes ten fields: update it with the table");
  size_t need = kLine;
  for (const Delivery& d : ds) {
    need += (1 + kFields) * kLine + 4 * 2 + d.id.size() + d.topic.size() + d.body.size() +
            d.receipt.size();
  }
  size_t at = out->size();
  out->resize(at + need);
  char* p = out->data() + at;
  p = PutNumberLine(p, '*', static_cast<int64_t>(ds.size()));
  for (const Delivery& d : ds) {
    // The order of kDeliveryFields.
    p = PutNumberLine(p, '*', static_cast<int64_t>(kFields));
    p = PutBulk(p, d.id);
    p = PutBulk(p, d.topic);
    p = PutBulk(p, d.body);
    p = PutBulk(p, d.receipt);
    p = PutNumberLine(p, ':', d.attempts);
    p = PutNumberLine(p, ':', d.ttr_ms);
    p = PutNumberLine(p, ':', d.priority);
    p = PutNumberLine(p, ':', d.run_at_ms);
    p = PutNumberLine(p, ':', d.reserved_until_ms);
    p = PutNumberLine(p, ':', d.max_attempts);
  }
  out->resize(static_cast<size_t>(p - out->data()));
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
    case Kind::kDouble:
      return resp::AppendBulk(out, FormatDouble(v.d));
    case Kind::kTextList:
      return AppendRespList(out, *v.list);  // a nested array, as XINFO answers one
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
    case Kind::kDouble:
      out->append(FormatDouble(v.d));
      break;
    case Kind::kTextList:
      out->append(JoinList(*v.list));
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
         TextIn(key, kStatsFields) || TextIn(key, kScheduleFields);
}

}  // namespace delayq::wire
