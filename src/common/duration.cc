#include "common/duration.h"

#include <cstddef>

namespace delayq {
namespace {

struct Unit {
  std::string_view name;
  int64_t ms;
};
// Longest name first where one is a prefix of another ("ms" before "m").
constexpr Unit kUnits[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};

Status Bad(std::string_view what, std::string_view text, std::string_view why) {
  std::string msg(what);
  msg += ": ";
  msg += why;
  msg += " in '";
  msg += text;
  msg += "' (a duration is a whole number and a unit: 1500ms, 5s, 30m, 2h, 1d, or 1h30m)";
  return InvalidArgument(std::move(msg));
}

}  // namespace

Result<int64_t> ParseDurationMs(std::string_view text, std::string_view what) {
  if (text.empty()) return Bad(what, text, "nothing");
  if (text == "0") return int64_t{0};
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    int64_t n = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      if (n > kMaxDurationMs) return Bad(what, text, "too long a duration");
      n = n * 10 + (text[i] - '0');
      ++i;
    }
    if (i == start) {
      if (text[i] == '-') return Bad(what, text, "a negative duration");
      return Bad(what, text, "a number expected at '" + std::string(text.substr(i)) + "'");
    }
    if (i == text.size())
      return Bad(what, text, "no unit after " + std::string(text.substr(start)));
    if (text[i] == '.') return Bad(what, text, "a fraction (use a smaller unit: 1500ms, 90s)");
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (text.substr(i, u.name.size()) == u.name) {
        unit = &u;
        break;
      }
    }
    if (unit == nullptr) {
      size_t end = i;
      while (end < text.size() && !(text[end] >= '0' && text[end] <= '9')) ++end;
      return Bad(what, text, "unknown unit '" + std::string(text.substr(i, end - i)) + "'");
    }
    i += unit->name.size();
    if (n > kMaxDurationMs / unit->ms || total + n * unit->ms > kMaxDurationMs) {
      return Bad(what, text, "more than 100 years");
    }
    total += n * unit->ms;
  }
  return total;
}

std::string FormatDurationMs(int64_t ms) {
  if (ms <= 0) return "0";
  std::string out;
  if (ms % 1000 != 0) {
    // Milliseconds that do not make whole seconds read back best as they are.
    return std::to_string(ms) + "ms";
  }
  int64_t rest = ms;
  for (int k = 4; k >= 1; --k) {  // d, h, m, s
    int64_t n = rest / kUnits[k].ms;
    if (n > 0) {
      out += std::to_string(n);
      out += kUnits[k].name;
      rest -= n * kUnits[k].ms;
    }
  }
  return out;
}

}  // namespace delayq
