#include "http/url.h"

namespace delayq::http {
namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends the decoded `s` to *out; false on a bad escape (*out is then
// partly written).
bool DecodeInto(std::string_view s, bool plus_is_space, std::string* out) {
  out->reserve(out->size() + s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (s.size() - i < 3) return false;
      int hi = HexValue(s[i + 1]);
      int lo = HexValue(s[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

std::optional<std::string> Decode(std::string_view s, bool plus_is_space) {
  std::string out;
  if (!DecodeInto(s, plus_is_space, &out)) return std::nullopt;
  return out;
}

// Calls f(key, value) for each '&'-separated parameter, still encoded (value
// "" when there is no '='); stops early when f returns false.
template <typename F>
void ForEachParam(std::string_view query, F f) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view param = query.substr(0, amp);
    if (!param.empty()) {
      size_t eq = param.find('=');
      std::string_view key = param.substr(0, eq);
      std::string_view value =
          eq == std::string_view::npos ? std::string_view() : param.substr(eq + 1);
      if (!f(key, value)) return;
    }
    if (amp == std::string_view::npos) return;
    query.remove_prefix(amp + 1);
  }
}

}  // namespace

TargetView SplitTargetView(std::string_view target) {
  target = target.substr(0, target.find('#'));
  // Absolute form: "scheme://authority" before any '/' or '?' is dropped.
  size_t scheme_end = target.find("://");
  if (scheme_end != std::string_view::npos && scheme_end > 0 &&
      scheme_end < target.find_first_of("/?")) {
    target.remove_prefix(scheme_end + 3);
    size_t path_start = target.find_first_of("/?");
    target = path_start == std::string_view::npos ? std::string_view() : target.substr(path_start);
    if (target.empty() || target.front() == '?') {
      return {"/", target.empty() ? std::string_view() : target.substr(1)};
    }
  }
  size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

Target SplitTarget(std::string_view target) {
  TargetView v = SplitTargetView(target);
  return {std::string(v.path), std::string(v.query)};
}

std::optional<std::string> PercentDecode(std::string_view s) { return Decode(s, false); }

std::optional<std::string> PercentDecodeQuery(std::string_view s) { return Decode(s, true); }

std::optional<std::string> QueryParam(std::string_view query, std::string_view key) {
  std::optional<std::string> found;
  std::string decoded_key;
  ForEachParam(query, [&](std::string_view k, std::string_view v) {
    if (k.find_first_of("%+") == std::string_view::npos) {
      if (k != key) return true;
    } else {
      decoded_key.clear();
      if (!DecodeInto(k, true, &decoded_key) || decoded_key != key) return true;
    }
    found = PercentDecodeQuery(v);  // std::nullopt when badly encoded
    return false;
  });
  return found;
}

bool ValidQuery(std::string_view query) {
  bool ok = true;
  std::string scratch;
  ForEachParam(query, [&](std::string_view k, std::string_view v) {
    scratch.clear();
    ok = DecodeInto(k, true, &scratch) && DecodeInto(v, true, &scratch);
    return ok;
  });
  return ok;
}

std::optional<std::vector<std::string>> PathSegments(std::string_view path) {
  if (path.empty() || path.front() != '/') return std::nullopt;
  std::vector<std::string> segments;
  path.remove_prefix(1);
  if (path.empty()) return segments;
  for (;;) {
    size_t slash = path.find('/');
    std::string& segment = segments.emplace_back();
    if (!DecodeInto(path.substr(0, slash), false, &segment)) return std::nullopt;
    if (slash == std::string_view::npos) return segments;
    path.remove_prefix(slash + 1);
  }
}

}  // namespace delayq::http
