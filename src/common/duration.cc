#include "common/duration.h"

#include <cstddef>

namespace delayq {
namespace {

struct Unit {
  std::string_view name;
  int64_t ms;
};
constexpr Unit kUnits[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};

// Units people write that are not ours, and which of ours they mean: the
// message then spells the whole duration right ("30sec" -> "30s").
struct Alias {
  std::string_view name;
  std::string_view unit;
};
constexpr Alias kAliases[] = {
    {"msec", "ms"},         {"msecs", "ms"}, {"millis", "ms"}, {"millisecond", "ms"},
    {"milliseconds", "ms"}, {"sec", "s"},    {"secs", "s"},    {"second", "s"},
    {"seconds", "s"},       {"min", "m"},    {"mins", "m"},    {"minute", "m"},
    {"minutes", "m"},       {"hr", "h"},     {"hrs", "h"},     {"hour", "h"},
    {"hours", "h"},         {"day", "d"},    {"days", "d"}};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// The unit `word` names, ours or an alias, ignoring case and the spaces
// around it ("5 Min"); nullptr when none.
const Unit* Lookup(std::string_view word) {
  while (!word.empty() && word.front() == ' ') word.remove_prefix(1);
  while (!word.empty() && word.back() == ' ') word.remove_suffix(1);
  std::string lower(word);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  std::string_view name = lower;
  for (const Alias& a : kAliases) {
    if (a.name == name) name = a.unit;
  }
  for (const Unit& u : kUnits) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

// `text` with every unit respelled as ours ("1hour30mins" -> "1h30m"), or
// "" when some group is not a number and a unit we can tell.
std::string Respelled(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    if (i == start) return {};
    out += text.substr(start, i - start);
    const size_t unit_at = i;
    while (i < text.size() && !IsDigit(text[i])) ++i;
    const Unit* u = Lookup(text.substr(unit_at, i - unit_at));
    if (u == nullptr) return {};
    out += u->name;
  }
  return out;
}

constexpr std::string_view kUnitList = "ms, s, m, h and d";

Status Bad(std::string_view what, std::string_view text, std::string_view why) {
  std::string msg(what);
  msg += ": ";
  msg += why;
  msg += " in '";
  msg += text;
  msg += "' (a duration is a whole number and a unit: 1500ms, 5s, 30m, 2h, 1d, or 1h30m)";
  return InvalidArgument(std::move(msg));
}

// "delay: unknown unit 'sec' in '30sec': write 30s (the units are ms, s, m,
// h and d: 1500ms, 5s, 30m, 2h, 1d, or 1h30m)".
Status UnknownUnit(std::string_view what, std::string_view text, std::string_view unit) {
  std::string msg(what);
  msg += ": unknown unit '";
  msg += unit;
  msg += "' in '";
  msg += text;
  msg += "'";
  if (std::string right = Respelled(text); !right.empty() && right != text) {
    msg += ": write ";
    msg += right;
  }
  msg += " (the units are ";
  msg += kUnitList;
  msg += ": 1500ms, 5s, 30m, 2h, 1d, or 1h30m)";
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
    while (i < text.size() && IsDigit(text[i])) {
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
    // The unit is every character up to the next number: "30sec" is an
    // unknown unit 'sec', not 's' followed by garbage.
    size_t end = i;
    while (end < text.size() && !IsDigit(text[end])) ++end;
    const std::string_view word = text.substr(i, end - i);
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
      if (word == u.name) unit = &u;
    }
    if (unit == nullptr) return UnknownUnit(what, text, word);
    i = end;
    if (n > kMaxDurationMs / unit->ms || total + n * unit->ms > kMaxDurationMs) {
      return Bad(what, text, "more than 100 years");
    }
    total += n * unit->ms;
  }
  return total;
}

Result<int64_t> ParseDurationMsWithin(std::string_view text, std::string_view what,
                                      int64_t least_ms, int64_t most_ms) {
  Result<int64_t> ms = ParseDurationMs(text, what);
  if (!ms.ok()) return ms;
  auto outside = [&](const char* which, int64_t bound) {
    return InvalidArgument(std::string(what) + ": '" + std::string(text) + "' is " + which +
                           " allowed, " + FormatDurationMs(bound));
  };
  if (*ms < least_ms) return outside("shorter than the least", least_ms);
  if (*ms > most_ms) return outside("longer than the longest", most_ms);
  return ms;
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
