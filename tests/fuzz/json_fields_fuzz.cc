// libFuzzer target for the HTTP front end's request bodies (JsonFields,
// src/server/json_fields.h): simdjson reads them, and a syntax scanner of our
// own says where and why one that simdjson refused is not JSON. Besides
// "never crash, never read out of bounds" (ASan, UBSan), it checks that an
// error's byte offset lies within the request, that a refused body is always
// refused with a "request:" message, and that the field readers hold on
// whatever an accepted body contains.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "server/json_fields.h"

namespace {

using delayq::Status;
using delayq::server::JsonFields;

void Check(bool ok) {
  if (!ok) std::abort();
}

constexpr std::string_view kAt = "request: not valid JSON at byte ";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  static simdjson::dom::parser parser;
  JsonFields fields;
  Status s = fields.Parse(parser, text,
                          {"topic", "topics", "id", "delay", "delay_ms", "ttr", "ttr_ms", "body",
                           "body_base64", "receipt", "force"});
  if (!s.ok()) {
    const std::string& m = s.message();
    Check(s.code() == delayq::Code::kInvalidArgument);
    if (m.starts_with(kAt)) {
      char* end = nullptr;
      const unsigned long long at = std::strtoull(m.c_str() + kAt.size(), &end, 10);
      Check(end != m.c_str() + kAt.size() && *end == ':' && at <= size);
    } else {
      Check(m.starts_with("request: ") || m.starts_with("unknown field '"));
    }
    return 0;
  }
  std::optional<std::string> str;
  std::optional<int64_t> num;
  std::string body, receipt;
  bool forced = false;
  (void)fields.String("topic", &str);
  (void)fields.String("id", &str);
  (void)fields.Int("delay_ms", 0, INT64_MAX, &num);
  (void)fields.Duration("delay", "delay_ms", 0, 100LL * 365 * 86400 * 1000, &num);
  (void)fields.Duration("ttr", "ttr_ms", 1, 86400LL * 1000, &num);
  (void)fields.Bool("force", &forced);
  (void)fields.Body(&body);
  (void)fields.Receipt(&receipt, &forced);
  return 0;
}
