#include "cli/reply_fields.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "codec/utf8.h"
#include "wire/encode.h"

namespace delayq::cli {

using redis::Reply;

void Out(std::string_view s) { std::fwrite(s.data(), 1, s.size(), stdout); }

void PrintFields(const Pairs& fields) {
  size_t width = 0;
  for (const auto& [k, v] : fields) width = std::max(width, k.size());
  std::string out;
  for (const auto& [k, v] : fields) {
    out += k;
    out += ':';
    if (!v.empty()) out.append(width - k.size() + 1, ' ');
    out += codec::EscapeForTerminal(v);
    out += '\n';
  }
  Out(out);
}

std::optional<Pairs> ParseFields(const Reply& r) {
  if (r.type() != Reply::Type::kArray || r.elements().size() % 2 != 0) return std::nullopt;
  Pairs fields;
  for (size_t i = 0; i < r.elements().size(); i += 2) {
    const Reply& k = r.elements()[i];
    const Reply& v = r.elements()[i + 1];
    if (k.type() != Reply::Type::kString) return std::nullopt;
    if (v.type() == Reply::Type::kString) {
      fields.emplace_back(k.str(), v.str());
    } else if (v.type() == Reply::Type::kInteger) {
      fields.emplace_back(k.str(), std::to_string(v.integer()));
    } else if (v.type() == Reply::Type::kArray) {  // a text list (a subscription's topics)
      std::vector<std::string> items;
      for (const Reply& e : v.elements()) {
        if (e.type() != Reply::Type::kString) return std::nullopt;
        items.push_back(e.str());
      }
      fields.emplace_back(k.str(), wire::JoinList(items));
    } else {
      return std::nullopt;
    }
  }
  return fields;
}

std::optional<int64_t> AsInteger(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  size_t start = s[0] == '-' ? 1 : 0;
  if (start == s.size()) return std::nullopt;
  if (s.size() - start > 1 && s[start] == '0') return std::nullopt;  // keep "007" a string
  for (size_t i = start; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
  }
  return std::stoll(s);
}

bool WritePairsJson(codec::JsonWriter& w, const Reply& pairs,
                    wire::Kind (*kind_of)(std::string_view key)) {
  if (pairs.type() != Reply::Type::kArray || pairs.elements().size() % 2 != 0) return false;
  w.BeginObject();
  for (size_t i = 0; i < pairs.elements().size(); i += 2) {
    const std::string& key = pairs.elements()[i].str();
    const Reply& v = pairs.elements()[i + 1];
    if (v.type() == Reply::Type::kArray) {
      w.Key(key);
      w.BeginArray();
      for (const Reply& e : v.elements()) w.String(e.str());
      w.EndArray();
      continue;
    }
    const std::string text =
        v.type() == Reply::Type::kInteger ? std::to_string(v.integer()) : v.str();
    const wire::Kind kind = kind_of(key);
    std::optional<int64_t> n = AsInteger(text);
    double d = 0;
    auto parsed = std::from_chars(text.data(), text.data() + text.size(), d);
    const bool is_double =
        !text.empty() && parsed.ec == std::errc() && parsed.ptr == text.data() + text.size();
    if ((kind == wire::Kind::kUint || kind == wire::Kind::kInt) && n) {
      w.Key(key);
      w.Int(*n);
    } else if (kind == wire::Kind::kBool && n) {
      w.Key(key);
      w.Bool(*n != 0);
    } else if (kind == wire::Kind::kDouble && is_double) {
      w.Key(key);
      w.Raw(wire::FormatDouble(d));
    } else {
      w.TextField(key, text);  // a body that is not UTF-8: body_base64, as HTTP
    }
  }
  w.EndObject();
  return true;
}

}  // namespace delayq::cli
