#include "redis/reply.h"

#include <cstdio>

namespace delayq::redis {
namespace {

void AppendEscaped(std::string_view s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      *out += static_cast<char>(c);
    } else {
      char hex[5];
      snprintf(hex, sizeof hex, "\\x%02x", c);
      *out += hex;
    }
  }
  *out += '"';
}

void Render(const Reply& r, std::string* out) {
  switch (r.type()) {
    case Reply::Type::kNil:
      *out += "nil";
      break;
    case Reply::Type::kInteger:
      *out += std::to_string(r.integer());
      break;
    case Reply::Type::kString:
      AppendEscaped(r.str(), out);
      break;
    case Reply::Type::kStatus:
      *out += "+" + r.str();
      break;
    case Reply::Type::kError:
      *out += "-" + r.str();
      break;
    case Reply::Type::kArray:
      *out += '[';
      for (size_t i = 0; i < r.elements().size(); ++i) {
        if (i > 0) *out += ", ";
        Render(r.elements()[i], out);
      }
      *out += ']';
      break;
  }
}

}  // namespace

std::string_view Reply::error_code() const {
  if (type_ != Type::kError) return {};
  std::string_view s = str_;
  return s.substr(0, s.find(' '));
}

std::string Reply::ToString() const {
  std::string out;
  Render(*this, &out);
  return out;
}

}  // namespace delayq::redis
