// How it works. A calendar expression is six bit sets (second, minute, hour,
// day of month, month, day of week). Its fire times are the images of the
// civil times those sets match under one map f from civil time to instant:
// a civil time that exists once maps to that instant, one that repeats to
// its first occurrence (absl `pre`), one that a DST gap skips to the gap's
// transition instant (absl `trans`). f never decreases, so the civil times
// whose image is after an instant t form a tail [Start(t), ∞) of civil time,
// and Next is: the first civil time >= Start(t) that the sets match
// (NextMatch, a field at a time: a wrong month jumps to the next allowed
// month, a wrong hour to the next allowed hour, ...), mapped by f. Several
// gap times map to the one transition instant; Next returns it once because
// it asks for an instant strictly later each time.
//
// Between counts without enumerating: matching civil times in the civil
// interval a day at a time (a whole day is |hours|*|minutes|*|seconds|), less
// what the gaps in the interval collapse. It lists the latest `max` by
// enumerating Next over a window before `to` that grows until it holds them.
#include "cron/cron.h"

#include <absl/time/civil_time.h>
#include <absl/time/time.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <limits>
#include <optional>

#include "common/duration.h"
#include "delayq/job.h"

namespace delayq::cron {
namespace {

using absl::CivilDay;
using absl::CivilSecond;

// Fire times before the year 1 are not considered: Next from earlier starts
// there, and a Between's lower end is raised to it (the day loop stays bounded).
constexpr int64_t kFloorMs = -62'135'596'800'000;  // 0001-01-01T00:00:00Z
// Years the never-fires check searches: the Gregorian weekdays and leap days
// repeat every 28 years between century years.
constexpr int64_t kCheckFromYear = 2001;
constexpr int64_t kCheckYears = 28;
constexpr int64_t kMaxEveryS = int64_t{366} * 24 * 3600;

enum FieldKind { kSecond, kMinute, kHour, kDom, kMonth, kDow };

struct FieldInfo {
  const char* name;
  int lo;
  int hi;       // the largest value accepted
  int step_hi;  // where "*" and "a/n" end (day-of-week: 6, so "1/2" is not Sunday too)
};
constexpr FieldInfo kFields[] = {
    {"second", 0, 59, 59},       {"minute", 0, 59, 59}, {"hour", 0, 23, 23},
    {"day-of-month", 1, 31, 31}, {"month", 1, 12, 12},  {"day-of-week", 0, 7, 6},
};
constexpr std::string_view kMonthNames[] = {"JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                            "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"};
constexpr std::string_view kDayNames[] = {"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"};

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

bool Bit(uint64_t mask, int i) { return ((mask >> i) & 1) != 0; }

// The smallest set bit >= from (and <= 63), or -1.
int NextBit(uint64_t mask, int from) {
  if (from > 63) return -1;
  uint64_t rest = mask & (~uint64_t{0} << from);
  return rest == 0 ? -1 : std::countr_zero(rest);
}

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Parses one field ("1-5/2,10") into a bit set. Positions in messages are
// 1-based character positions in the whole expression.
class FieldParser {
 public:
  FieldParser(std::string_view text, size_t offset, int number, FieldKind kind)
      : text_(text), offset_(offset), number_(number), kind_(kind), info_(kFields[kind]) {}

  Result<uint64_t> Parse() {
    uint64_t mask = 0;
    while (true) {
      Status s = Element(&mask);
      if (!s.ok()) return s;
      if (pos_ == text_.size()) break;
      if (text_[pos_] != ',') return Error(pos_, "unexpected \"" + Rest() + "\"");
      ++pos_;
    }
    if (kind_ == kDow && Bit(mask, 7)) mask = (mask & ~(uint64_t{1} << 7)) | 1;  // 7 is Sunday
    return mask;
  }

 private:
  Status Element(uint64_t* mask) {
    size_t start = pos_;
    if (pos_ == text_.size() || text_[pos_] == ',') return Error(pos_, "empty list element");
    int lo = info_.lo;
    int hi = info_.step_hi;
    bool is_range = false;
    if (text_[pos_] == '*') {
      ++pos_;
      is_range = true;
    } else {
      Result<int> a = Value();
      if (!a.ok()) return a.status();
      lo = hi = *a;
      if (pos_ < text_.size() && text_[pos_] == '-') {
        ++pos_;
        Result<int> b = Value();
        if (!b.ok()) return b.status();
        hi = *b;
        is_range = true;
        if (hi < lo) {
          return Error(start, std::string(text_.substr(start, pos_ - start)) +
                                  " is a reversed range (" + std::to_string(lo) + " > " +
                                  std::to_string(hi) + ")");
        }
      }
    }
    int step = 1;
    if (pos_ < text_.size() && text_[pos_] == '/') {
      ++pos_;
      size_t at = pos_;
      if (at == text_.size() || !std::isdigit(static_cast<unsigned char>(text_[at]))) {
        return Error(at, "expected a step (a number) after \"/\"");
      }
      Result<int> n = Number();
      if (!n.ok()) return n.status();
      step = *n;
      if (step == 0) return Error(at, "a step of 0 (a step is at least 1)");
      if (!is_range) hi = info_.step_hi;  // "a/n": from a to the field's end
    }
    if (pos_ < text_.size() && text_[pos_] != ',') {
      return Error(pos_, "unexpected \"" + Rest() + "\"");
    }
    for (int v = lo; v <= hi; v += step) *mask |= uint64_t{1} << v;
    return Status::Ok();
  }

  // A number or, in the month and day-of-week fields, a name; in range.
  Result<int> Value() {
    size_t start = pos_;
    if (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) {
      while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      std::string word = Upper(text_.substr(start, pos_ - start));
      if (kind_ == kMonth) {
        for (int i = 0; i < 12; ++i) {
          if (kMonthNames[i] == word) return i + 1;
        }
        return Error(start, "\"" + std::string(text_.substr(start, pos_ - start)) +
                                "\" is not a month (1-12 or JAN..DEC)");
      }
      if (kind_ == kDow) {
        for (int i = 0; i < 7; ++i) {
          if (kDayNames[i] == word) return i;
        }
        return Error(start, "\"" + std::string(text_.substr(start, pos_ - start)) +
                                "\" is not a day of the week (0-7 or SUN..SAT)");
      }
      return Error(start, "expected a number, got \"" +
                              std::string(text_.substr(start, pos_ - start)) + "\"");
    }
    if (pos_ == text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      return Error(pos_, pos_ == text_.size() ? std::string("expected a number at the end")
                                              : "expected a number, got \"" + Rest() + "\"");
    }
    Result<int> n = Number();
    if (!n.ok()) return n;
    if (*n < info_.lo || *n > info_.hi) {
      return Error(start, std::string(text_.substr(start, pos_ - start)) + " is out of range " +
                              std::to_string(info_.lo) + "-" + std::to_string(info_.hi));
    }
    return *n;
  }

  // Digits; anything past 6 of them is out of every range anyway.
  Result<int> Number() {
    size_t start = pos_;
    int64_t n = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      n = std::min<int64_t>(n * 10 + (text_[pos_] - '0'), 1'000'000);
      ++pos_;
    }
    if (n > 999'999) {
      return Error(start, std::string(text_.substr(start, pos_ - start)) + " is out of range " +
                              std::to_string(info_.lo) + "-" + std::to_string(info_.hi));
    }
    return static_cast<int>(n);
  }

  std::string Rest() const {
    size_t end = text_.find(',', pos_);
    return std::string(text_.substr(pos_, end == std::string_view::npos ? end : end - pos_));
  }

  Status Error(size_t at, const std::string& what) const {
    return InvalidArgument("cron: field " + std::to_string(number_) + " (" + info_.name +
                           ") at position " + std::to_string(offset_ + at + 1) + ": " + what);
  }

  std::string_view text_;
  size_t offset_;  // of text_ in the expression
  int number_;     // 1-based, as the user counts the fields
  FieldKind kind_;
  const FieldInfo& info_;
  size_t pos_ = 0;
};

struct Token {
  std::string_view text;
  size_t offset;
};

std::vector<Token> SplitFields(std::string_view expr) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < expr.size()) {
    while (i < expr.size() && IsSpace(expr[i])) ++i;
    size_t start = i;
    while (i < expr.size() && !IsSpace(expr[i])) ++i;
    if (i > start) out.push_back({expr.substr(start, i - start), start});
  }
  return out;
}

}  // namespace

// The parsed expression and the arithmetic on it. In a named namespace,
// not the anonymous one: Cron::Spec, a type with linkage, derives from it.
namespace detail {

struct Calendar {
  absl::TimeZone tz;
  int64_t every_s = 0;  // "@every": the interval; else 0 and the sets below
  uint64_t seconds = 0;
  uint64_t minutes = 0;
  uint64_t hours = 0;
  uint64_t doms = 0;      // bits 1..31
  uint64_t months = 0;    // bits 1..12
  uint64_t dows = 0;      // bits 0..6, 0 = Sunday
  bool dom_star = false;  // the field began with '*': the Vixie OR does not apply
  bool dow_star = false;
  uint64_t per_day = 0;  // matching times of day in a matching day

  bool DayMatches(CivilDay d) const {
    if (!Bit(months, d.month())) return false;
    bool dom = Bit(doms, d.day());
    // absl: Monday = 0 ... Sunday = 6; cron: Sunday = 0.
    bool dow = Bit(dows, (static_cast<int>(absl::GetWeekday(d)) + 1) % 7);
    return (dom_star || dow_star) ? (dom && dow) : (dom || dow);
  }

  bool Matches(CivilSecond c) const {
    return DayMatches(CivilDay(c)) && Bit(hours, c.hour()) && Bit(minutes, c.minute()) &&
           Bit(seconds, c.second());
  }

  // The first matching civil time >= c, in a year <= last_year.
  std::optional<CivilSecond> NextMatch(CivilSecond c, int64_t last_year) const {
    while (c.year() <= last_year) {
      if (!Bit(months, c.month())) {
        int m = NextBit(months, c.month() + 1);
        c = (m > 0 && m <= 12) ? CivilSecond(c.year(), m, 1)
                               : CivilSecond(c.year() + 1, NextBit(months, 1), 1);
        continue;
      }
      CivilDay d(c);
      if (!DayMatches(d)) {
        c = CivilSecond(d + 1);
        continue;
      }
      if (!Bit(hours, c.hour())) {
        int h = NextBit(hours, c.hour() + 1);
        c = (h >= 0 && h <= 23) ? CivilSecond(c.year(), c.month(), c.day(), h) : CivilSecond(d + 1);
        continue;
      }
      if (!Bit(minutes, c.minute())) {
        int m = NextBit(minutes, c.minute() + 1);
        c = (m >= 0 && m <= 59) ? CivilSecond(c.year(), c.month(), c.day(), c.hour(), m)
                                : CivilSecond(absl::CivilHour(c) + 1);
        continue;
      }
      if (!Bit(seconds, c.second())) {
        int s = NextBit(seconds, c.second() + 1);
        c = (s >= 0 && s <= 59) ? CivilSecond(c.year(), c.month(), c.day(), c.hour(), c.minute(), s)
                                : CivilSecond(absl::CivilMinute(c) + 1);
        continue;
      }
      return c;
    }
    return std::nullopt;
  }

  // The instant a civil time fires at (Unix seconds): the DST rules.
  int64_t FireAt(CivilSecond c) const {
    absl::TimeZone::TimeInfo info = tz.At(c);
    return absl::ToUnixSeconds(info.kind == absl::TimeZone::TimeInfo::SKIPPED ? info.trans
                                                                              : info.pre);
  }

  // The first civil time whose fire instant is >= t (Unix seconds).
  CivilSecond Start(int64_t t) const {
    CivilSecond c = absl::ToCivilSecond(absl::FromUnixSeconds(t - 1), tz) + 1;
    absl::TimeZone::TimeInfo info = tz.At(c);
    if (info.kind == absl::TimeZone::TimeInfo::REPEATED && absl::ToUnixSeconds(info.pre) < t) {
      // t is in the second pass of a repeated hour, which fires nothing:
      // skip to the civil time after the repeated ones.
      c = absl::ToCivilSecond(info.trans - absl::Seconds(1), tz) + 1;
    }
    return c;
  }

  // Matching times of day at or after h:m:s.
  uint64_t CountFrom(int h, int m, int s) const {
    uint64_t ns = std::popcount(seconds);
    uint64_t nm = std::popcount(minutes);
    uint64_t n = std::popcount(hours & (~uint64_t{0} << (h + 1))) * nm * ns;
    if (!Bit(hours, h)) return n;
    n += std::popcount(minutes & (~uint64_t{0} << (m + 1))) * ns;
    if (!Bit(minutes, m)) return n;
    return n + std::popcount(seconds & (~uint64_t{0} << s));
  }
  uint64_t CountFrom(CivilSecond c) const { return CountFrom(c.hour(), c.minute(), c.second()); }

  // Matching civil times in [a, b), counted up to `limit`.
  uint64_t CountCivil(CivilSecond a, CivilSecond b, uint64_t limit) const {
    if (a >= b) return 0;
    CivilDay da(a);
    CivilDay db(b);
    if (da == db) return DayMatches(da) ? std::min(CountFrom(a) - CountFrom(b), limit) : 0;
    uint64_t n = DayMatches(da) ? CountFrom(a) : 0;
    for (CivilDay d = da + 1; d < db && n < limit;) {
      if (!Bit(months, d.month())) {
        d = CivilDay(absl::CivilMonth(d) + 1);
        continue;
      }
      if (DayMatches(d)) n += per_day;
      ++d;
    }
    if (n < limit && DayMatches(db)) n += per_day - CountFrom(b);
    return std::min(n, limit);
  }

  // tz.NextTransition, also past the end of Abseil's list of transitions
  // (the year 2437): the zone's last rule repeats every 400 Gregorian years
  // (146097 days, a whole number of weeks), so the transition 400*k years
  // earlier, moved 400*k years on, is the one.
  bool NextTransition(absl::Time t, absl::TimeZone::CivilTransition* tr, absl::Time* at) const {
    if (tz.NextTransition(t, tr)) {
      *at = tz.At(tr->to).trans;
      return true;
    }
    constexpr int64_t kBaseS = 2'114'380'800;  // 2037-01-01, in the rules' years
    constexpr int64_t kCycleS = int64_t{146'097} * 86'400;
    const int64_t ts = absl::ToUnixSeconds(t);
    if (ts < kBaseS + kCycleS) return false;
    const int64_t k = (ts - kBaseS) / kCycleS;
    if (!tz.NextTransition(absl::FromUnixSeconds(ts - k * kCycleS), tr)) return false;
    *at = tz.At(tr->to).trans + absl::Seconds(k * kCycleS);
    auto shift = [k](CivilSecond c) {
      return CivilSecond(c.year() + 400 * k, c.month(), c.day(), c.hour(), c.minute(), c.second());
    };
    tr->from = shift(tr->from);
    tr->to = shift(tr->to);
    return true;
  }

  // Fire times in (from_ms, to_ms], up to cap.
  uint64_t Count(int64_t from_ms, int64_t to_ms, uint64_t cap) const {
    int64_t t1 = FloorDiv(from_ms, 1000) + 1;
    int64_t t2 = FloorDiv(to_ms, 1000) + 1;
    CivilSecond lo = Start(t1);
    CivilSecond hi = Start(t2);
    // The matching civil times in a gap are one fire time (the transition
    // instant), or none beyond the civil time the gap ends at if that matches.
    uint64_t collapsed = 0;
    uint64_t added = 0;
    absl::TimeZone::CivilTransition tr;
    absl::Time t = absl::FromUnixSeconds(t1 - 1);
    absl::Time at;
    while (NextTransition(t, &tr, &at)) {
      if (absl::ToUnixSeconds(at) > t2 - 1) break;
      if (tr.to > tr.from) {
        uint64_t k = CountCivil(std::max(tr.from, lo), std::min(tr.to, hi),
                                std::numeric_limits<uint64_t>::max());
        if (k > 0) {
          collapsed += k;
          if (!(tr.to < hi && Matches(tr.to))) ++added;
        }
      }
      if (at <= t) break;  // no progress: a zone absl cannot follow further
      t = at;
    }
    uint64_t limit = cap > std::numeric_limits<uint64_t>::max() - collapsed
                         ? std::numeric_limits<uint64_t>::max()
                         : cap + collapsed;
    uint64_t civil = CountCivil(lo, hi, limit);
    return std::min(civil - collapsed + added, cap);
  }
};

}  // namespace detail

namespace {

using detail::Calendar;

Status ParseEvery(const std::vector<Token>& tokens, Calendar* spec);

Status ParseFields(std::string_view expr, const std::vector<Token>& tokens, Calendar* spec) {
  if (tokens.size() != 5 && tokens.size() != 6) {
    return InvalidArgument("cron: expected 5 or 6 fields, got " + std::to_string(tokens.size()) +
                           " in \"" + std::string(expr) + "\"");
  }
  const bool with_seconds = tokens.size() == 6;
  uint64_t* masks[] = {&spec->seconds, &spec->minutes, &spec->hours,
                       &spec->doms,    &spec->months,  &spec->dows};
  spec->seconds = 1;  // five fields: at second 0
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto kind = static_cast<FieldKind>(with_seconds ? i : i + 1);
    Result<uint64_t> mask =
        FieldParser(tokens[i].text, tokens[i].offset, static_cast<int>(i) + 1, kind).Parse();
    if (!mask.ok()) return mask.status();
    *masks[kind] = *mask;
  }
  spec->dom_star = tokens[tokens.size() - 3].text.starts_with('*');
  spec->dow_star = tokens[tokens.size() - 1].text.starts_with('*');
  spec->per_day = static_cast<uint64_t>(std::popcount(spec->hours)) * std::popcount(spec->minutes) *
                  std::popcount(spec->seconds);
  if (!spec->NextMatch(CivilSecond(kCheckFromYear, 1, 1), kCheckFromYear + kCheckYears)) {
    return InvalidArgument("cron: \"" + std::string(expr) +
                           "\" never fires: no date matches its day-of-month, month and "
                           "day-of-week fields");
  }
  return Status::Ok();
}

Status ParseMacro(std::string_view expr, const std::vector<Token>& tokens, Calendar* spec) {
  static constexpr std::pair<std::string_view, std::string_view> kMacros[] = {
      {"@YEARLY", "0 0 1 1 *"}, {"@ANNUALLY", "0 0 1 1 *"}, {"@MONTHLY", "0 0 1 * *"},
      {"@WEEKLY", "0 0 * * 0"}, {"@DAILY", "0 0 * * *"},    {"@MIDNIGHT", "0 0 * * *"},
      {"@HOURLY", "0 * * * *"},
  };
  std::string name = Upper(tokens[0].text);
  if (name == "@EVERY") return ParseEvery(tokens, spec);
  for (const auto& [macro, fields] : kMacros) {
    if (macro != name) continue;
    if (tokens.size() > 1) {
      return InvalidArgument("cron: unexpected \"" + std::string(tokens[1].text) + "\" after " +
                             std::string(tokens[0].text) + " at position " +
                             std::to_string(tokens[1].offset + 1));
    }
    return ParseFields(fields, SplitFields(fields), spec);
  }
  return InvalidArgument("cron: unknown macro \"" + std::string(tokens[0].text) +
                         "\" (known: @yearly, @annually, @monthly, @weekly, @daily, @midnight, "
                         "@hourly, @every <duration>)");
}

Status ParseEvery(const std::vector<Token>& tokens, Calendar* spec) {
  if (tokens.size() < 2) {
    return InvalidArgument("cron: \"@every\" needs a duration (e.g. 30s, 5m, 1h30m)");
  }
  if (tokens.size() > 2) {
    return InvalidArgument("cron: unexpected \"" + std::string(tokens[2].text) +
                           "\" after the @every duration at position " +
                           std::to_string(tokens[2].offset + 1));
  }
  std::string what = "cron: @every duration at position " + std::to_string(tokens[1].offset + 1);
  Result<int64_t> ms = ParseDurationMsWithin(tokens[1].text, what, 1000, kMaxEveryS * 1000);
  if (!ms.ok()) return ms.status();
  if (*ms % 1000 != 0) {
    return InvalidArgument(what + ": '" + std::string(tokens[1].text) +
                           "' is not a whole number of seconds");
  }
  spec->every_s = *ms / 1000;
  return Status::Ok();
}

// Names as in the tz database: no absolute paths, no "..", and not the
// machine's own zone ("localtime"), which would differ from server to server.
bool PlausibleZoneName(std::string_view name) {
  if (name.empty() || name.front() == '/' || name.find("..") != std::string_view::npos ||
      name == "localtime") {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' ||
           c == '+';
  });
}

}  // namespace

struct Cron::Spec : Calendar {
  std::string expr;
  std::string timezone;
};

Cron::Cron(std::shared_ptr<const Spec> spec) : spec_(std::move(spec)) {}
Cron::~Cron() = default;

Result<Cron> Cron::Parse(std::string_view expr, std::string_view timezone) {
  auto spec = std::make_shared<Spec>();
  spec->expr = std::string(expr);
  spec->timezone = std::string(timezone);
  std::vector<Token> tokens = SplitFields(expr);
  if (tokens.empty()) return InvalidArgument("cron: empty expression");
  Status s = tokens[0].text.starts_with('@') ? ParseMacro(expr, tokens, spec.get())
                                             : ParseFields(expr, tokens, spec.get());
  if (!s.ok()) return s;
  if (timezone.empty()) {
    spec->tz = absl::UTCTimeZone();
  } else if (!PlausibleZoneName(timezone) ||
             !absl::LoadTimeZone(std::string(timezone), &spec->tz)) {
    return InvalidArgument("timezone: unknown time zone \"" + std::string(timezone) + "\"");
  }
  return Cron(std::move(spec));
}

int64_t Cron::Next(int64_t after_ms) const {
  const Spec& s = *spec_;
  if (after_ms >= kMaxRunAtMs) return kNever;
  after_ms = std::max(after_ms, kFloorMs - 1);
  if (s.every_s > 0) {
    int64_t every_ms = s.every_s * 1000;
    int64_t next = (FloorDiv(after_ms, every_ms) + 1) * every_ms;
    return next <= kMaxRunAtMs ? next : kNever;
  }
  const int64_t t = FloorDiv(after_ms, 1000) + 1;
  CivilSecond c = s.Start(t);
  while (true) {
    std::optional<CivilSecond> m = s.NextMatch(c, 10'000);
    if (!m) return kNever;
    int64_t at = s.FireAt(*m);
    if (at >= t) return at * 1000 <= kMaxRunAtMs ? at * 1000 : kNever;
    c = *m + 1;  // not expected past Start(t); kept so that a surprise cannot loop
  }
}

std::vector<int64_t> Cron::Between(int64_t from_ms, int64_t to_ms, size_t max, uint64_t* total,
                                   uint64_t count_cap) const {
  const Spec& s = *spec_;
  if (total != nullptr) *total = 0;
  from_ms = std::max(from_ms, kFloorMs - 1);
  to_ms = std::min(to_ms, kMaxRunAtMs);
  if (to_ms <= from_ms) return {};
  if (s.every_s > 0) {
    const int64_t every_ms = s.every_s * 1000;
    const int64_t first = (FloorDiv(from_ms, every_ms) + 1) * every_ms;
    const int64_t last = FloorDiv(to_ms, every_ms) * every_ms;
    if (last < first) return {};
    const auto n = static_cast<uint64_t>((last - first) / every_ms + 1);
    if (total != nullptr) *total = std::min(n, count_cap);
    std::vector<int64_t> out;
    const uint64_t k = std::min<uint64_t>(n, max);
    out.reserve(k);
    for (uint64_t i = k; i > 0; --i) out.push_back(last - static_cast<int64_t>(i - 1) * every_ms);
    return out;
  }
  if (total != nullptr) *total = s.Count(from_ms, to_ms, count_cap);
  if (max == 0) return {};
  // The latest `max`: enumerate a window before to_ms, four times wider each
  // round, until it holds `max` of them or reaches from_ms.
  const int64_t span = to_ms - from_ms;
  int64_t window = max > static_cast<size_t>(span / 1000) ? span : static_cast<int64_t>(max) * 1000;
  std::vector<int64_t> ring;
  size_t head = 0;  // once full, the oldest
  while (true) {
    const int64_t p = window >= span ? from_ms : to_ms - window;
    ring.clear();
    head = 0;
    for (int64_t at = Next(p); at != kNever && at <= to_ms; at = Next(at)) {
      if (ring.size() < max) {
        ring.push_back(at);
      } else {
        ring[head] = at;
        head = (head + 1) % max;
      }
    }
    if (ring.size() >= max || p == from_ms) break;
    window = window > span / 4 ? span : window * 4;
  }
  std::rotate(ring.begin(), ring.begin() + static_cast<std::ptrdiff_t>(head), ring.end());
  return ring;
}

const std::string& Cron::expr() const { return spec_->expr; }
const std::string& Cron::timezone() const { return spec_->timezone; }
int64_t Cron::every_ms() const { return spec_->every_s * 1000; }

}  // namespace delayq::cron
