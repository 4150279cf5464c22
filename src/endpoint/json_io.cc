#include "endpoint/json_io.h"

#include <simdjson.h>

#include <limits>
#include <optional>

#include "codec/base64.h"
#include "codec/json_writer.h"

namespace delayq::endpoint {
namespace {

namespace dom = simdjson::dom;

dom::parser& Parser() {
  thread_local dom::parser parser;
  return parser;
}

// Reads an unsigned field into *out when present. kInvalidArgument for a
// value that is not an integer in [0, max].
template <typename T>
Status ReadUint(dom::object obj, std::string_view key, T* out) {
  dom::element e;
  if (obj[key].get(e) != simdjson::SUCCESS) return Status::Ok();
  uint64_t v = 0;
  if (e.get_uint64().get(v) != simdjson::SUCCESS || v > std::numeric_limits<T>::max()) {
    return InvalidArgument(std::string(key) + ": not an integer in 0.." +
                           std::to_string(std::numeric_limits<T>::max()));
  }
  *out = static_cast<T>(v);
  return Status::Ok();
}

Status ReadInt(dom::object obj, std::string_view key, int64_t* out) {
  dom::element e;
  if (obj[key].get(e) != simdjson::SUCCESS) return Status::Ok();
  if (e.get_int64().get(*out) != simdjson::SUCCESS) {
    return InvalidArgument(std::string(key) + ": not an integer");
  }
  return Status::Ok();
}

Status ReadString(dom::object obj, std::string_view key, bool required, std::string* out) {
  dom::element e;
  if (obj[key].get(e) != simdjson::SUCCESS) {
    return required ? InvalidArgument(std::string(key) + ": required") : Status::Ok();
  }
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) {
    return InvalidArgument(std::string(key) + ": not a string");
  }
  out->assign(s);
  return Status::Ok();
}

}  // namespace

Result<Delivery> ParseJobJson(std::string_view json) {
  dom::element root;
  if (auto err = Parser().parse(json.data(), json.size()).get(root); err != simdjson::SUCCESS) {
    return InvalidArgument(std::string("the body is not JSON: ") + simdjson::error_message(err));
  }
  dom::object obj;
  if (root.get_object().get(obj) != simdjson::SUCCESS) {
    return InvalidArgument("the body is not a JSON object (a job)");
  }
  Delivery d;
  Status st = ReadString(obj, "id", true, &d.id);
  if (st.ok()) st = ReadString(obj, "topic", true, &d.topic);
  if (st.ok()) st = ReadString(obj, "body", false, &d.body);
  std::string b64;
  bool has_b64 = false;
  if (st.ok()) {
    dom::element e;
    has_b64 = obj["body_base64"].get(e) == simdjson::SUCCESS;
    st = ReadString(obj, "body_base64", false, &b64);
  }
  if (st.ok() && has_b64) {
    std::optional<std::string> bytes = codec::Base64Decode(b64);
    if (!bytes) st = InvalidArgument("body_base64: not base64");
    if (bytes) d.body = std::move(*bytes);
  }
  if (st.ok()) st = ReadUint(obj, "attempts", &d.attempts);
  if (st.ok()) st = ReadUint(obj, "ttr_ms", &d.ttr_ms);
  if (st.ok()) st = ReadUint(obj, "priority", &d.priority);
  if (st.ok()) st = ReadUint(obj, "max_attempts", &d.max_attempts);
  if (st.ok()) st = ReadInt(obj, "run_at_ms", &d.run_at_ms);
  if (st.ok()) st = ReadInt(obj, "reserved_until_ms", &d.reserved_until_ms);
  if (!st.ok()) return st;
  return d;
}

std::string SubscriptionJson(const Subscription& s) {
  codec::JsonWriter w;
  w.BeginObject();
  w.Key("topics");
  w.BeginArray();
  for (const std::string& t : s.topics) w.String(t);
  w.EndArray();
  w.Key("url");
  w.String(s.url);
  w.Key("concurrency");
  w.Uint(s.concurrency);
  w.Key("ttl_ms");
  w.Int(s.ttl_ms);
  w.Key("timeout_ms");
  w.Uint(s.timeout_ms);
  if (!s.secrets.empty()) {
    w.Key("secrets");
    w.BeginArray();
    for (const std::string& secret : s.secrets) w.String(secret);
    w.EndArray();
  }
  w.Key("retry");
  w.BeginObject();
  w.Key("min_backoff_ms");
  w.Int(s.retry.min_backoff_ms);
  w.Key("max_backoff_ms");
  w.Int(s.retry.max_backoff_ms);
  w.Key("max_doublings");
  w.Uint(s.retry.max_doublings);
  w.EndObject();
  w.EndObject();
  return w.str();
}

std::string ErrorMessage(std::string_view answer) {
  dom::element root;
  std::string_view message;
  if (Parser().parse(answer.data(), answer.size()).get(root) == simdjson::SUCCESS &&
      root["error"]["message"].get_string().get(message) == simdjson::SUCCESS) {
    return std::string(message);
  }
  std::string out(answer.substr(0, 200));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return out;
}

}  // namespace delayq::endpoint
