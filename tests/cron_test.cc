// cron::Cron: parsing, Next and Between, against hand-written tables and
// against a brute-force reference that knows nothing of Abseil: it steps UTC
// instants (a minute, or a second, at a time), converts them with glibc
// (TZ + tzset + localtime_r), matches the fields and applies the two DST
// rules itself (a repeated local time fires at its first occurrence only; a
// matching local time that a jump skips fires at the first instant after the
// jump).
#include "cron/cron.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bitset>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "delayq/job.h"

namespace delayq::cron {
namespace {

// ---------------------------------------------------------------- helpers

// "2024-03-10 07:00:00" (UTC) -> Unix ms.
int64_t Utc(const std::string& text) {
  std::tm tm{};
  if (strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &tm) == nullptr) {
    ADD_FAILURE() << "bad time in the test: " << text;
    return 0;
  }
  return static_cast<int64_t>(timegm(&tm)) * 1000;
}

// Unix ms -> "2024-03-10 07:00:00.000Z", for messages.
std::string Iso(int64_t ms) {
  if (ms == kNever) return "never";
  time_t s = static_cast<time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(buf) + "." + std::to_string(1000 + ((ms % 1000) + 1000) % 1000).substr(1) +
         "Z";
}

Cron MustParse(const std::string& expr, const std::string& zone = "") {
  Result<Cron> c = Cron::Parse(expr, zone);
  EXPECT_TRUE(c.ok()) << expr << " in " << zone << ": " << c.status().message();
  if (!c.ok()) return *Cron::Parse("* * * * *", "");
  return *c;
}

// Sets TZ for glibc for the test's life and puts the old value back.
class TzScope {
 public:
  TzScope() {
    const char* old = std::getenv("TZ");
    if (old != nullptr) old_ = old;
  }
  ~TzScope() {
    if (old_) {
      setenv("TZ", old_->c_str(), 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
  }
  void Set(const std::string& zone) {
    if (zone == current_) return;
    setenv("TZ", zone.empty() ? "UTC" : zone.c_str(), 1);
    tzset();
    current_ = zone;
  }

 private:
  std::optional<std::string> old_;
  std::string current_ = "\x01";
};

// -------------------------------------------------------------- reference

// The reference's own reading of the numeric syntax: "*", "n", "a-b", "*/n",
// "a-b/n", "a/n", lists. (Names and macros are covered by the tables.)
struct RefExpr {
  std::bitset<60> sec, min;
  std::bitset<24> hour;
  std::bitset<32> dom;
  std::bitset<13> mon;
  std::bitset<8> dow;
  bool dom_star = false;
  bool dow_star = false;
};

template <size_t N>
std::bitset<N> RefField(const std::string& text, int lo, int hi) {
  std::bitset<N> set;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    int step = 1;
    bool stepped = false;
    if (size_t slash = item.find('/'); slash != std::string::npos) {
      step = std::stoi(item.substr(slash + 1));
      item = item.substr(0, slash);
      stepped = true;
    }
    int a = lo;
    int b = hi;
    if (item != "*") {
      size_t dash = item.find('-');
      a = std::stoi(item.substr(0, dash));
      b = dash != std::string::npos ? std::stoi(item.substr(dash + 1)) : (stepped ? hi : a);
    }
    for (int v = a; v <= b; v += step) set.set(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return set;
}

RefExpr RefParse(const std::string& expr) {
  std::vector<std::string> f;
  size_t i = 0;
  while (i < expr.size()) {
    size_t j = expr.find(' ', i);
    if (j == std::string::npos) j = expr.size();
    if (j > i) f.push_back(expr.substr(i, j - i));
    i = j + 1;
  }
  if (f.size() == 5) f.insert(f.begin(), "0");
  EXPECT_EQ(f.size(), 6u) << expr;
  RefExpr e;
  e.sec = RefField<60>(f[0], 0, 59);
  e.min = RefField<60>(f[1], 0, 59);
  e.hour = RefField<24>(f[2], 0, 23);
  e.dom = RefField<32>(f[3], 1, 31);
  e.mon = RefField<13>(f[4], 1, 12);
  e.dow = RefField<8>(f[5], 0, 6);
  if (e.dow[7]) e.dow.set(0);
  e.dom_star = f[3][0] == '*';
  e.dow_star = f[5][0] == '*';
  return e;
}

bool RefMatches(const RefExpr& e, const std::tm& tm) {
  if (!e.sec[tm.tm_sec] || !e.min[tm.tm_min] || !e.hour[tm.tm_hour] || !e.mon[tm.tm_mon + 1]) {
    return false;
  }
  bool dom = e.dom[tm.tm_mday];
  bool dow = e.dow[tm.tm_wday];
  return (e.dom_star || e.dow_star) ? (dom && dow) : (dom || dow);
}

// Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's
// days_from_civil): timegm's arithmetic without its cost.
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Local civil time as a count of seconds (the local fields read as if UTC).
int64_t LocalSeconds(int64_t u, std::tm* tm) {
  time_t t = static_cast<time_t>(u);
  localtime_r(&t, tm);
  return DaysFromCivil(tm->tm_year + 1900, tm->tm_mon + 1, tm->tm_mday) * 86400 +
         tm->tm_hour * 3600 + tm->tm_min * 60 + tm->tm_sec;
}

// The fire times (Unix ms) in (start_ms, end_s], stepping `step` seconds.
std::vector<int64_t> RefFires(TzScope& tz, const std::string& zone, const RefExpr& e,
                              int64_t start_ms, int64_t end_s, int step) {
  tz.Set(zone);
  std::vector<int64_t> out;
  int64_t start_s = start_ms >= 0 ? start_ms / 1000 : (start_ms - 999) / 1000;
  // Two hours of warm-up: the local times already seen (a repeated hour
  // began at most that long ago).
  int64_t u = (start_s - 2 * 3600) / step * step;
  std::tm tm{};
  int64_t prev = LocalSeconds(u - step, &tm);
  int64_t seen = prev;  // the latest local time so far
  for (; u <= end_s; u += step) {
    int64_t local = LocalSeconds(u, &tm);
    bool fire = false;
    if (local > seen) {  // else: a repeated local time, already fired or not
      fire = RefMatches(e, tm);
      for (int64_t skipped = prev + step; skipped < local && !fire; skipped += step) {
        time_t s = static_cast<time_t>(skipped);
        std::tm st{};
        gmtime_r(&s, &st);
        fire = RefMatches(e, st);
      }
      seen = local;
    }
    prev = local;
    if (fire && u * 1000 > start_ms) out.push_back(u * 1000);
  }
  return out;
}

// Next() chained from start_ms through end_s must give exactly the
// reference's fire times, and nothing more up to end_s.
void ExpectMatchesReference(TzScope& tz, const std::string& expr, const std::string& zone,
                            int64_t start_ms, int64_t end_s) {
  Cron c = MustParse(expr, zone);
  int step = std::count(expr.begin(), expr.end(), ' ') >= 5 ? 1 : 60;
  std::vector<int64_t> want = RefFires(tz, zone, RefParse(expr), start_ms, end_s, step);
  std::vector<int64_t> got;
  for (int64_t at = c.Next(start_ms); at != kNever && at <= end_s * 1000; at = c.Next(at)) {
    got.push_back(at);
    if (got.size() > want.size() + 5) break;
  }
  if (got == want) return;
  std::string msg = "\"" + expr + "\" in " + zone + " from " + Iso(start_ms) + " to " +
                    Iso(end_s * 1000) + "\n  want:";
  for (size_t i = 0; i < std::min<size_t>(want.size(), 8); ++i) msg += " " + Iso(want[i]);
  msg += "\n  got: ";
  for (size_t i = 0; i < std::min<size_t>(got.size(), 8); ++i) msg += " " + Iso(got[i]);
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] != want[i]) {
      msg += "\n  first difference at #" + std::to_string(i) + ": want " + Iso(want[i]) + ", got " +
             Iso(got[i]);
      break;
    }
  }
  ADD_FAILURE() << msg;
}

// --------------------------------------------------------------- tables

struct NextCase {
  const char* expr;
  const char* zone;
  const char* after;              // UTC
  std::vector<const char*> next;  // UTC, in order
};

void ExpectNext(const NextCase& t, int64_t after_ms) {
  Cron c = MustParse(t.expr, t.zone);
  int64_t at = after_ms;
  for (const char* want : t.next) {
    int64_t got = c.Next(at);
    EXPECT_EQ(Iso(got), Iso(Utc(want)))
        << "\"" << t.expr << "\" in " << t.zone << " after " << Iso(at);
    at = got;
    if (at == kNever) break;
  }
}

TEST(CronNext, CalendarTable) {
  const NextCase cases[] = {
      {"* * * * *", "", "2024-01-01 00:00:00", {"2024-01-01 00:01:00", "2024-01-01 00:02:00"}},
      {"*/5 * * * * *", "", "2024-01-01 00:00:03", {"2024-01-01 00:00:05", "2024-01-01 00:00:10"}},
      {"30 15 10 * * *", "", "2024-01-01 00:00:00", {"2024-01-01 10:15:30", "2024-01-02 10:15:30"}},
      {"0,30 * * * * *", "", "2024-01-01 23:59:45", {"2024-01-02 00:00:00", "2024-01-02 00:00:30"}},
      {"0 9 * * MON-FRI",
       "",
       "2024-01-05 09:00:00",
       {"2024-01-08 09:00:00", "2024-01-09 09:00:00"}},
      {"0 9 * * mon-Fri", "", "2024-01-06 12:00:00", {"2024-01-08 09:00:00"}},
      {"0 0 1 JAN *", "", "2024-06-01 00:00:00", {"2025-01-01 00:00:00", "2026-01-01 00:00:00"}},
      {"0 0 1 jan-mar/2 *",
       "",
       "2024-01-01 00:00:00",
       {"2024-03-01 00:00:00", "2025-01-01 00:00:00"}},
      {"0 12 * * sun", "", "2024-01-01 00:00:00", {"2024-01-07 12:00:00", "2024-01-14 12:00:00"}},
      {"0 12 * * 7", "", "2024-01-01 00:00:00", {"2024-01-07 12:00:00"}},
      {"0 12 * * 0", "", "2024-01-01 00:00:00", {"2024-01-07 12:00:00"}},
      {"0 12 * * 5-7",
       "",
       "2024-01-01 00:00:00",
       {"2024-01-05 12:00:00", "2024-01-06 12:00:00", "2024-01-07 12:00:00",
        "2024-01-12 12:00:00"}},
      // "a/n" in day-of-week ends at Saturday: 1/2 is Monday, Wednesday, Friday.
      {"0 0 * * 1/2",
       "",
       "2024-01-06 00:00:00",
       {"2024-01-08 00:00:00", "2024-01-10 00:00:00", "2024-01-12 00:00:00",
        "2024-01-15 00:00:00"}},
      {"15,45 * * * *", "", "2024-01-01 00:20:00", {"2024-01-01 00:45:00", "2024-01-01 01:15:00"}},
      {"0 8-10/2 * * *", "", "2024-01-01 08:30:00", {"2024-01-01 10:00:00", "2024-01-02 08:00:00"}},
      {"10/20 * * * *", "", "2024-01-01 00:31:00", {"2024-01-01 00:50:00", "2024-01-01 01:10:00"}},
      {"5-10,50-55/5 * * * *",
       "",
       "2024-01-01 00:09:00",
       {"2024-01-01 00:10:00", "2024-01-01 00:50:00", "2024-01-01 00:55:00",
        "2024-01-01 01:05:00"}},
      {"0 0 * * *", "", "2024-12-31 23:59:59", {"2025-01-01 00:00:00"}},
      {"59 23 31 12 *", "", "2024-12-31 23:59:00", {"2025-12-31 23:59:00"}},
      // Vixie: both day fields restricted, either matches.
      {"0 0 13 * FRI",
       "",
       "2024-01-01 00:00:00",
       {"2024-01-05 00:00:00", "2024-01-12 00:00:00", "2024-01-13 00:00:00",
        "2024-01-19 00:00:00"}},
      // One day field starting with '*': both must match (odd days that are Fridays).
      {"0 0 */2 * FRI", "", "2024-01-01 00:00:00", {"2024-01-05 00:00:00", "2024-01-19 00:00:00"}},
      {"0 0 1 * */7", "", "2024-01-02 00:00:00", {"2024-09-01 00:00:00"}},  // a Sunday the 1st
      // Leap days, short months, last days.
      {"0 0 29 2 *", "", "2024-03-01 00:00:00", {"2028-02-29 00:00:00", "2032-02-29 00:00:00"}},
      {"0 0 29 2 *", "", "2096-03-01 00:00:00", {"2104-02-29 00:00:00"}},  // 2100 is no leap year
      {"0 0 31 * *",
       "",
       "2024-04-01 00:00:00",
       {"2024-05-31 00:00:00", "2024-07-31 00:00:00", "2024-08-31 00:00:00",
        "2024-10-31 00:00:00"}},
      {"0 0 30 * *", "", "2024-01-30 00:00:00", {"2024-03-30 00:00:00"}},
      {"0 0 28-31 * *", "", "2023-02-28 00:00:00", {"2023-03-28 00:00:00"}},
      {"0 0 28-31 * *", "", "2024-02-28 00:00:00", {"2024-02-29 00:00:00", "2024-03-28 00:00:00"}},
      {"0 0 31 2,4,5 *", "", "2024-01-01 00:00:00", {"2024-05-31 00:00:00"}},
      // Macros.
      {"@hourly", "", "2024-01-01 00:59:59", {"2024-01-01 01:00:00"}},
      {"@daily", "", "2024-01-01 00:00:00", {"2024-01-02 00:00:00"}},
      {"@midnight", "", "2024-01-01 12:00:00", {"2024-01-02 00:00:00"}},
      {"@weekly", "", "2024-01-01 00:00:00", {"2024-01-07 00:00:00"}},
      {"@monthly", "", "2024-01-15 00:00:00", {"2024-02-01 00:00:00"}},
      {"@yearly", "", "2024-01-01 00:00:00", {"2025-01-01 00:00:00"}},
      {"@annually", "", "2024-01-01 00:00:00", {"2025-01-01 00:00:00"}},
      {"@DAILY", "", "2024-01-01 00:00:00", {"2024-01-02 00:00:00"}},
      // Whitespace around and between fields.
      {"  0\t12  * * *  ", "", "2024-01-01 00:00:00", {"2024-01-01 12:00:00"}},
      // In a zone without DST: local midnight in Kolkata (+05:30).
      {"0 0 * * *", "Asia/Kolkata", "2024-01-01 00:00:00", {"2024-01-01 18:30:00"}},
      // The last firing there is.
      {"59 23 31 12 *", "", "9999-12-30 00:00:00", {"9999-12-31 23:59:00"}},
  };
  for (const NextCase& t : cases) ExpectNext(t, Utc(t.after));
}

TEST(CronNext, MillisecondInputsGiveWholeSecondsStrictlyAfter) {
  Cron c = MustParse("* * * * * *");
  EXPECT_EQ(c.Next(1'500), 2'000);
  EXPECT_EQ(c.Next(1'999), 2'000);
  EXPECT_EQ(c.Next(2'000), 3'000);
  EXPECT_EQ(c.Next(-1), 0);
  EXPECT_EQ(c.Next(-1'500), -1'000);
  Cron m = MustParse("* * * * *");
  EXPECT_EQ(m.Next(Utc("2024-01-01 00:00:59") + 999), Utc("2024-01-01 00:01:00"));
  EXPECT_EQ(m.Next(Utc("2024-01-01 00:01:00")), Utc("2024-01-01 00:02:00"));
}

TEST(CronNext, NothingAfterTheLastRunAtIsNever) {
  EXPECT_EQ(MustParse("0 0 1 1 *").Next(Utc("9999-06-01 00:00:00")), kNever);
  EXPECT_EQ(MustParse("* * * * *").Next(kMaxRunAtMs), kNever);
  EXPECT_EQ(MustParse("* * * * * *").Next(kMaxRunAtMs - 1000), kMaxRunAtMs - 999);
  EXPECT_EQ(MustParse("* * * * * *").Next(kMaxRunAtMs - 999), kNever);
  // A zone east of UTC: local 9999-12-31 23:00 is still before the end.
  EXPECT_EQ(MustParse("0 10 31 12 *", "Asia/Tokyo").Next(Utc("9999-12-30 00:00:00")),
            Utc("9999-12-31 01:00:00"));
  // West of UTC, the local year 9999's last hours are past the end.
  EXPECT_EQ(MustParse("0 23 31 12 *", "America/New_York").Next(Utc("9999-12-30 00:00:00")), kNever);
  EXPECT_EQ(MustParse("@every 1s").Next(kMaxRunAtMs - 999), kNever);
}

TEST(CronNext, EveryIsMultiplesOfTheIntervalSinceTheEpochInAnyZone) {
  Cron c = MustParse("@every 90s", "Australia/Lord_Howe");
  EXPECT_EQ(c.every_ms(), 90'000);
  EXPECT_EQ(c.Next(0), 90'000);
  EXPECT_EQ(c.Next(89'999), 90'000);
  EXPECT_EQ(c.Next(90'000), 180'000);
  EXPECT_EQ(c.Next(-1), 0);
  EXPECT_EQ(c.Next(-90'000), 0);
  EXPECT_EQ(c.Next(-90'001), -90'000);
  int64_t day = Utc("2024-03-10 00:00:00");  // a multiple of 90 s
  EXPECT_EQ(MustParse("@every 1h30m", "America/New_York").Next(day + 1), day + 5'400'000);
  EXPECT_EQ(MustParse("@every 5m").Next(day + 299'999), day + 300'000);
  EXPECT_EQ(MustParse("@every 7s").Next(day), (day / 7000 + 1) * 7000);
  EXPECT_EQ(MustParse("@every 1s").every_ms(), 1000);
  EXPECT_EQ(MustParse("@every 366d").every_ms(), 366LL * 86'400'000);
  EXPECT_EQ(MustParse("* * * * *").every_ms(), 0);
}

// DST changes, each hand-checked and also against the reference.
TEST(CronNext, DaylightSavingChanges) {
  const NextCase cases[] = {
      // New York 2024: 02:00 EST -> 03:00 EDT on Mar 10 (07:00Z); 02:00 EDT ->
      // 01:00 EST on Nov 3 (06:00Z).
      {"30 2 * * *",
       "America/New_York",
       "2024-03-09 08:00:00",
       {"2024-03-10 07:00:00", "2024-03-11 06:30:00"}},
      {"0 2 * * *",
       "America/New_York",
       "2024-03-09 08:00:00",
       {"2024-03-10 07:00:00", "2024-03-11 06:00:00"}},
      {"0,30 2 * * *",
       "America/New_York",
       "2024-03-09 08:00:00",
       {"2024-03-10 07:00:00", "2024-03-11 06:00:00"}},  // two gap times, one firing
      {"0 2,3 * * *",
       "America/New_York",
       "2024-03-09 08:00:00",
       {"2024-03-10 07:00:00", "2024-03-11 06:00:00"}},  // 02:00 and 03:00 are one instant
      {"30 2,3 * * *",
       "America/New_York",
       "2024-03-09 09:00:00",
       {"2024-03-10 07:00:00", "2024-03-10 07:30:00", "2024-03-11 06:30:00"}},
      {"30 1 * * *",
       "America/New_York",
       "2024-11-03 00:00:00",
       {"2024-11-03 05:30:00", "2024-11-04 06:30:00"}},  // not 06:30Z, the second 01:30
      {"30 1 * * *", "America/New_York", "2024-11-03 06:00:00", {"2024-11-04 06:30:00"}},
      {"*/15 * * * *",
       "America/New_York",
       "2024-03-10 06:40:00",
       {"2024-03-10 06:45:00", "2024-03-10 07:00:00", "2024-03-10 07:15:00"}},
      {"*/15 * * * *",
       "America/New_York",
       "2024-11-03 05:40:00",
       {"2024-11-03 05:45:00", "2024-11-03 07:00:00", "2024-11-03 07:15:00"}},
      {"*/15 * * * *", "America/New_York", "2024-11-03 06:20:00", {"2024-11-03 07:00:00"}},
      {"30 * * * * *",
       "America/New_York",
       "2024-03-10 06:59:00",
       {"2024-03-10 06:59:30", "2024-03-10 07:00:00",
        "2024-03-10 07:00:30"}},  // 02:00:30 .. 02:59:30
      // Berlin 2024: 02:00 CET -> 03:00 CEST on Mar 31 (01:00Z); 03:00 CEST ->
      // 02:00 CET on Oct 27 (01:00Z).
      {"30 2 * * *",
       "Europe/Berlin",
       "2024-03-30 12:00:00",
       {"2024-03-31 01:00:00", "2024-04-01 00:30:00"}},
      {"30 2 * * *",
       "Europe/Berlin",
       "2024-10-26 12:00:00",
       {"2024-10-27 00:30:00", "2024-10-28 01:30:00"}},
      {"*/15 * * * *",
       "Europe/Berlin",
       "2024-03-31 00:40:00",
       {"2024-03-31 00:45:00", "2024-03-31 01:00:00", "2024-03-31 01:15:00"}},
      {"*/15 * * * *",
       "Europe/Berlin",
       "2024-10-27 00:40:00",
       {"2024-10-27 00:45:00", "2024-10-27 02:00:00", "2024-10-27 02:15:00"}},
      // Lord Howe 2024 (30 minutes): 02:00 LHDT (+11) -> 01:30 LHST (+10:30) on
      // Apr 7 (Apr 6 15:00Z); 02:00 LHST -> 02:30 LHDT on Oct 6 (Oct 5 15:30Z).
      {"45 1 * * *",
       "Australia/Lord_Howe",
       "2024-04-06 12:00:00",
       {"2024-04-06 14:45:00", "2024-04-07 15:15:00"}},
      {"15 2 * * *",
       "Australia/Lord_Howe",
       "2024-10-05 12:00:00",
       {"2024-10-05 15:30:00", "2024-10-06 15:15:00"}},
      {"30 2 * * *",
       "Australia/Lord_Howe",
       "2024-10-05 12:00:00",
       {"2024-10-05 15:30:00", "2024-10-06 15:30:00"}},
      {"*/15 * * * *",
       "Australia/Lord_Howe",
       "2024-04-06 14:40:00",
       {"2024-04-06 14:45:00", "2024-04-06 15:30:00", "2024-04-06 15:45:00"}},
      {"*/15 * * * *",
       "Australia/Lord_Howe",
       "2024-10-05 15:10:00",
       {"2024-10-05 15:15:00", "2024-10-05 15:30:00", "2024-10-05 15:45:00"}},
  };
  TzScope tz;
  for (const NextCase& t : cases) {
    ExpectNext(t, Utc(t.after));
    ExpectMatchesReference(tz, t.expr, t.zone, Utc(t.after), Utc(t.after) / 1000 + 2 * 86400);
  }
}

// ------------------------------------------------- randomised vs reference

// The transitions of a zone in [from, to) (Unix seconds), found with glibc:
// a change of offset within six hours, then bisected to the second.
std::vector<int64_t> GlibcTransitions(TzScope& tz, const std::string& zone, int64_t from,
                                      int64_t to) {
  tz.Set(zone);
  auto offset = [](int64_t u) {
    time_t t = static_cast<time_t>(u);
    std::tm tm{};
    localtime_r(&t, &tm);
    return tm.tm_gmtoff;
  };
  std::vector<int64_t> out;
  constexpr int64_t kStep = 6 * 3600;
  for (int64_t u = from; u + kStep < to; u += kStep) {
    if (offset(u) == offset(u + kStep)) continue;
    int64_t lo = u;  // offset(lo) is the old offset, offset(hi) the new
    int64_t hi = u + kStep;
    while (hi - lo > 1) {
      int64_t mid = lo + (hi - lo) / 2;
      (offset(mid) == offset(lo) ? lo : hi) = mid;
    }
    out.push_back(hi);
  }
  return out;
}

std::string RandomField(std::mt19937_64& rng, int lo, int hi, int star_percent) {
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  std::string out;
  int items = pick(0, 9) == 0 ? 2 : 1;
  for (int i = 0; i < items; ++i) {
    if (i > 0) out += ",";
    int form = pick(0, 99) < star_percent ? 0 : pick(1, 5);
    int a = pick(lo, hi);
    int b = pick(a, hi);
    int n = pick(1, std::max(1, (hi - lo) / 2));
    switch (form) {
      case 0:
        out += "*";
        break;
      case 1:
        out += std::to_string(a);
        break;
      case 2:
        out += std::to_string(a) + "-" + std::to_string(b);
        break;
      case 3:
        out += "*/" + std::to_string(n);
        break;
      case 4:
        out += std::to_string(a) + "-" + std::to_string(b) + "/" + std::to_string(n);
        break;
      default:
        out += std::to_string(a) + "/" + std::to_string(n);
        break;
    }
    if (form == 0) break;  // "*,x" is just "*"
  }
  return out;
}

// Random expressions, zones and starts (most near a DST change up to 2039,
// some anywhere up to 2045: past 2037 both sides extend the zone's last
// rule, glibc slowly, so fewer there), each compared
// with the reference over a window. Fixed seed: DELAYQ_CRON_SEED overrides.
TEST(CronNext, RandomExpressionsMatchTheReference) {
  const char* seed_env = std::getenv("DELAYQ_CRON_SEED");
  const uint64_t seed = seed_env != nullptr ? std::strtoull(seed_env, nullptr, 10) : 26;
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t a, int64_t b) {
    return std::uniform_int_distribution<int64_t>(a, b)(rng);
  };
  const std::vector<std::string> zones = {
      "America/New_York", "Europe/Berlin",    "Australia/Lord_Howe", "UTC",
      "Asia/Kolkata",     "America/St_Johns", "Pacific/Chatham",     "Europe/London",
      "America/Santiago"};
  TzScope tz;
  std::vector<std::vector<int64_t>> transitions;
  for (const std::string& z : zones) {
    transitions.push_back(GlibcTransitions(tz, z, Utc("2023-01-01 00:00:00") / 1000,
                                           Utc("2040-01-01 00:00:00") / 1000));
  }
  const int64_t lo = Utc("2020-01-01 00:00:00") / 1000;
  const int64_t hi = Utc("2045-01-01 00:00:00") / 1000;
  int compared = 0;
  for (int i = 0; i < 600; ++i) {
    size_t zi = static_cast<size_t>(pick(0, static_cast<int64_t>(zones.size()) - 1));
    const bool seconds = pick(0, 5) == 0;
    std::string expr;
    if (seconds) expr = RandomField(rng, 0, 59, 40) + " ";
    expr += RandomField(rng, 0, 59, 30) + " " + RandomField(rng, 0, 23, 40) + " " +
            RandomField(rng, 1, 31, 80) + " " + RandomField(rng, 1, 12, 85) + " " +
            RandomField(rng, 0, 7, 80);
    if (!Cron::Parse(expr, zones[zi]).ok()) continue;  // e.g. never fires
    int64_t start;
    if (!transitions[zi].empty() && pick(0, 3) != 0) {
      const auto& ts = transitions[zi];
      start = ts[static_cast<size_t>(pick(0, static_cast<int64_t>(ts.size()) - 1))] +
              pick(-30 * 3600, 6 * 3600);
    } else {
      start = pick(lo, hi);
    }
    int64_t start_ms = start * 1000 + pick(0, 999);
    int64_t window = seconds ? 3600 : 36 * 3600;
    ExpectMatchesReference(tz, expr, zones[zi], start_ms, start + window);
    ++compared;
    if (HasFailure()) break;  // one case's report is enough
  }
  EXPECT_GT(compared, 450);
}

// ------------------------------------------------------------- Between

TEST(CronBetween, LatestMaxAndTheTotal) {
  Cron c = MustParse("0 * * * *");
  uint64_t total = 0;
  int64_t from = Utc("2024-01-01 00:00:00");
  int64_t to = Utc("2024-01-02 00:00:00");
  std::vector<int64_t> got = c.Between(from, to, 5, &total);
  EXPECT_EQ(total, 24u);  // (from, to]: 01:00 .. the next 00:00
  EXPECT_EQ(got, (std::vector<int64_t>{Utc("2024-01-01 20:00:00"), Utc("2024-01-01 21:00:00"),
                                       Utc("2024-01-01 22:00:00"), Utc("2024-01-01 23:00:00"),
                                       Utc("2024-01-02 00:00:00")}));
  got = c.Between(from, to, 100, &total);
  ASSERT_EQ(got.size(), 24u);
  EXPECT_EQ(got.front(), Utc("2024-01-01 01:00:00"));
  EXPECT_EQ(got.back(), to);
  got = c.Between(from, to, 5, &total, 10);
  EXPECT_EQ(total, 10u);  // capped
  EXPECT_EQ(got.back(), to);
  EXPECT_EQ(got.size(), 5u);
  EXPECT_TRUE(c.Between(from, to, 0, &total).empty());
  EXPECT_EQ(total, 24u);
  EXPECT_TRUE(c.Between(to, from, 5, &total).empty());
  EXPECT_EQ(total, 0u);
  EXPECT_TRUE(c.Between(from, from, 5, nullptr).empty());
  // Far apart firings, one wanted: the window grows to find it.
  got = MustParse("0 0 29 2 *")
            .Between(Utc("2001-01-01 00:00:00"), Utc("2027-01-01 00:00:00"), 1, &total);
  EXPECT_EQ(got, (std::vector<int64_t>{Utc("2024-02-29 00:00:00")}));
  EXPECT_EQ(total, 6u);  // 2004 .. 2024
}

TEST(CronBetween, EveryCountsByArithmetic) {
  Cron c = MustParse("@every 90s");
  uint64_t total = 0;
  std::vector<int64_t> got = c.Between(0, 900'000, 3, &total);
  EXPECT_EQ(total, 10u);
  EXPECT_EQ(got, (std::vector<int64_t>{720'000, 810'000, 900'000}));
  got = c.Between(90'000, 899'999, 100, &total);
  EXPECT_EQ(total, 8u);
  EXPECT_EQ(got.front(), 180'000);
  EXPECT_EQ(got.back(), 810'000);
  // Ten years of seconds, capped, at once.
  Cron s = MustParse("@every 1s");
  got = s.Between(Utc("2020-01-01 00:00:00"), Utc("2030-01-01 00:00:00"), 2, &total, 1000);
  EXPECT_EQ(total, 1000u);
  EXPECT_EQ(got, (std::vector<int64_t>{Utc("2029-12-31 23:59:59"), Utc("2030-01-01 00:00:00")}));
  s.Between(Utc("2020-01-01 00:00:00"), Utc("2030-01-01 00:00:00"), 2, &total, UINT64_MAX);
  EXPECT_EQ(total, 315'619'200u);  // 3653 days
}

TEST(CronBetween, AYearOfSecondsIsFastWithASmallMax) {
  Cron c = MustParse("* * * * * *", "America/New_York");
  uint64_t total = 0;
  int64_t from = Utc("2024-01-01 00:00:00");
  int64_t to = Utc("2025-01-01 00:00:00");
  auto began = std::chrono::steady_clock::now();
  std::vector<int64_t> got = c.Between(from, to, 1000, &total);
  EXPECT_EQ(total, 10'000'000u);  // the default cap
  ASSERT_EQ(got.size(), 1000u);
  EXPECT_EQ(got.front(), to - 999'000);
  EXPECT_EQ(got.back(), to);
  got = c.Between(from, to, 1000, &total, UINT64_MAX);
  // The repeated hour's second pass fires nothing; the gap's times all fire
  // at 03:00:00, which fires anyway.
  EXPECT_EQ(total, 366u * 86400 - 3600);
  auto took = std::chrono::steady_clock::now() - began;
  EXPECT_LT(took, std::chrono::seconds(1));
}

// Totals against counting Next: a year in DST zones, and random short ranges
// against the reference (total and the latest few).
TEST(CronBetween, TotalsMatchNextAndTheReference) {
  const std::pair<const char*, const char*> year_cases[] = {
      {"*/15 * * * *", "America/New_York"},
      {"30 2 * * *", "America/New_York"},
      {"30 1 * * *", "America/New_York"},
      {"*/15 * * * *", "Europe/Berlin"},
      {"30 2 * * *", "Europe/Berlin"},
      {"*/10 2 * * *", "Australia/Lord_Howe"},
      {"0 0 13 * FRI", "UTC"},
      {"7 * * * *", "Australia/Lord_Howe"},
      {"*/30 2 * * *", "Australia/Lord_Howe"},
      {"0,30 2 * * *", "America/New_York"},
  };
  struct Range {
    int64_t from;
    int64_t to;
  };
  const Range ranges[] = {{Utc("2024-01-01 00:00:00"), Utc("2025-01-01 00:00:00")},
                          // Past the end of Abseil's list of transitions (2437).
                          {Utc("2436-01-01 00:00:00"), Utc("2439-01-01 00:00:00")},
                          {Utc("9990-01-01 00:00:00"), Utc("9991-01-01 00:00:00")}};
  for (const auto& [expr, zone] : year_cases) {
    for (const auto& [from, to] : ranges) {
      Cron c = MustParse(expr, zone);
      uint64_t counted = 0;
      int64_t last = kNever;
      for (int64_t at = c.Next(from); at != kNever && at <= to; at = c.Next(at)) {
        ++counted;
        last = at;
      }
      uint64_t total = 0;
      std::vector<int64_t> got = c.Between(from, to, 1, &total);
      EXPECT_EQ(total, counted) << expr << " in " << zone;
      EXPECT_EQ(got, std::vector<int64_t>{last}) << expr << " in " << zone;
    }
  }
  const int64_t from = Utc("2024-01-01 00:00:00");
  const int64_t to = Utc("2025-01-01 00:00:00");
  // Hand-counted: 366 days, 96 a day, the four of 02:xx on Mar 10 are 03:00.
  uint64_t total = 0;
  (void)MustParse("*/15 * * * *", "America/New_York").Between(from, to, 1, &total);
  EXPECT_EQ(total, 366u * 96 - 4);
  (void)MustParse("30 2 * * *", "America/New_York").Between(from, to, 1, &total);
  EXPECT_EQ(total, 366u);

  TzScope tz;
  std::mt19937_64 rng(2026);
  auto pick = [&](int64_t a, int64_t b) {
    return std::uniform_int_distribution<int64_t>(a, b)(rng);
  };
  const char* exprs[] = {"*/15 * * * *", "30 2 * * *", "0,30 1-3 * * *", "*/7 * * * *",
                         "0 * * * *",    "45 1 * * *", "*/20 2 * * 0",   "10-40/10 0-4 * * *"};
  const char* zones[] = {"America/New_York", "Europe/Berlin", "Australia/Lord_Howe"};
  const int64_t centres[] = {Utc("2024-03-10 07:00:00"), Utc("2024-11-03 06:00:00"),
                             Utc("2024-03-31 01:00:00"), Utc("2024-10-27 01:00:00"),
                             Utc("2024-04-06 15:00:00"), Utc("2024-10-05 15:30:00")};
  for (int i = 0; i < 60; ++i) {
    const char* expr = exprs[pick(0, 7)];
    size_t z = static_cast<size_t>(pick(0, 2));
    int64_t centre = centres[2 * z + static_cast<size_t>(pick(0, 1))];
    int64_t a = centre + pick(-20 * 3600, 2 * 3600) * 1000 + pick(0, 999);
    int64_t b = a + pick(0, 30 * 3600) * 1000;
    std::vector<int64_t> want = RefFires(tz, zones[z], RefParse(expr), a, b / 1000, 60);
    size_t max = static_cast<size_t>(pick(0, 6));
    uint64_t total = 0;
    std::vector<int64_t> got = MustParse(expr, zones[z]).Between(a, b, max, &total);
    EXPECT_EQ(total, want.size()) << expr << " in " << zones[z] << " (" << Iso(a) << ", " << Iso(b)
                                  << "]";
    std::vector<int64_t> latest(want.end() - static_cast<ptrdiff_t>(std::min(max, want.size())),
                                want.end());
    EXPECT_EQ(got, latest) << expr << " in " << zones[z] << " (" << Iso(a) << ", " << Iso(b) << "]";
  }
}

// ------------------------------------------------------------- Parse

TEST(CronParse, InvalidExpressionsNameThePositionAndTheReason) {
  const std::pair<const char*, const char*> cases[] = {
      {"0 25 * * *", "cron: field 2 (hour) at position 3: 25 is out of range 0-23"},
      {"* 1-25 * * *", "cron: field 2 (hour) at position 5: 25 is out of range 0-23"},
      {"* * * *", "cron: expected 5 or 6 fields, got 4"},
      {"* * * * * * *", "cron: expected 5 or 6 fields, got 7"},
      {"@hourlyy", "cron: unknown macro \"@hourlyy\""},
      {"@daily now", "cron: unexpected \"now\" after @daily at position 8"},
      {"*/0 * * * *", "cron: field 1 (minute) at position 3: a step of 0"},
      {"5-1 * * * *", "cron: field 1 (minute) at position 1: 5-1 is a reversed range (5 > 1)"},
      {"0 0 * * FRI-MON", "cron: field 5 (day-of-week) at position 9: FRI-MON is a reversed range"},
      {"0 0 * FOO *", "cron: field 4 (month) at position 7: \"FOO\" is not a month"},
      {"0 0 * * Funday", "cron: field 5 (day-of-week) at position 9: \"Funday\" is not a day"},
      {"MON * * * *", "cron: field 1 (minute) at position 1: expected a number, got \"MON\""},
      {"0 0 * * 8", "cron: field 5 (day-of-week) at position 9: 8 is out of range 0-7"},
      {"0 0 0 * *", "cron: field 3 (day-of-month) at position 5: 0 is out of range 1-31"},
      {"0 0 * 13 *", "cron: field 4 (month) at position 7: 13 is out of range 1-12"},
      {"60 * * * * *", "cron: field 1 (second) at position 1: 60 is out of range 0-59"},
      {"0 60 * * * *", "cron: field 2 (minute) at position 3: 60 is out of range 0-59"},
      {"99999999999 * * * *", "cron: field 1 (minute) at position 1: 99999999999 is out of range"},
      {"1x * * * *", "cron: field 1 (minute) at position 2: unexpected \"x\""},
      {"1-2-3 * * * *", "cron: field 1 (minute) at position 4: unexpected \"-3\""},
      {"1,,2 * * * *", "cron: field 1 (minute) at position 3: empty list element"},
      {"1, * * * *", "cron: field 1 (minute) at position 3: empty list element"},
      {"*/ * * * *", "cron: field 1 (minute) at position 3: expected a step"},
      {"*/x * * * *", "cron: field 1 (minute) at position 3: expected a step"},
      {"1- * * * *", "cron: field 1 (minute) at position 3: expected a number at the end"},
      {"? * * * *", "cron: field 1 (minute) at position 1: expected a number, got \"?\""},
      {"0 0 30 2 *", "cron: \"0 0 30 2 *\" never fires"},
      {"0 0 31 4,6,9,11 *", "never fires"},
      {"", "cron: empty expression"},
      {"   ", "cron: empty expression"},
      {"@every", "cron: \"@every\" needs a duration"},
      {"@every 0s",
       "cron: @every duration at position 8: '0s' is shorter than the least allowed, 1s"},
      {"@every 1500ms",
       "cron: @every duration at position 8: '1500ms' is not a whole number of seconds"},
      {"@every 367d", "cron: @every duration at position 8: '367d' is longer than the longest"},
      {"@every 5x", "cron: @every duration at position 8: unknown unit 'x'"},
      {"@every 5", "cron: @every duration at position 8: no unit after 5"},
      {"@every 1m 30s", "cron: unexpected \"30s\" after the @every duration at position 11"},
  };
  for (const auto& [expr, want] : cases) {
    Result<Cron> c = Cron::Parse(expr, "");
    ASSERT_FALSE(c.ok()) << "\"" << expr << "\" was accepted";
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << expr;
    EXPECT_TRUE(c.status().message().starts_with(want) ||
                c.status().message().find(want) != std::string::npos)
        << "\"" << expr << "\": got \"" << c.status().message() << "\", want \"" << want << "\"";
  }
}

TEST(CronParse, TimeZones) {
  Result<Cron> bad = Cron::Parse("* * * * *", "Europe/Berln");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "timezone: unknown time zone \"Europe/Berln\"");
  for (const char* zone : {"../../etc/passwd", "/usr/share/zoneinfo/UTC", "localtime", "Mars/Base",
                           "Europe/Berlin "}) {
    Result<Cron> c = Cron::Parse("* * * * *", zone);
    ASSERT_FALSE(c.ok()) << zone;
    EXPECT_EQ(c.status().message(), std::string("timezone: unknown time zone \"") + zone + "\"");
  }
  Cron utc = MustParse("0 12 * * *", "");
  EXPECT_EQ(utc.timezone(), "");
  EXPECT_EQ(utc.expr(), "0 12 * * *");
  EXPECT_EQ(utc.Next(Utc("2024-06-01 00:00:00")), Utc("2024-06-01 12:00:00"));
  Cron ny = MustParse("0 12 * * *", "America/New_York");
  EXPECT_EQ(ny.timezone(), "America/New_York");
  EXPECT_EQ(ny.Next(Utc("2024-06-01 00:00:00")), Utc("2024-06-01 16:00:00"));
  EXPECT_EQ(ny.Next(Utc("2024-12-01 00:00:00")), Utc("2024-12-01 17:00:00"));
  // A copy shares the parsed expression.
  Cron copy = ny;
  EXPECT_EQ(copy.Next(Utc("2024-06-01 00:00:00")), Utc("2024-06-01 16:00:00"));
}

TEST(CronNext, OneCallCostsMicroseconds) {
  struct Case {
    const char* expr;
    const char* zone;
  };
  const Case cases[] = {{"* * * * * *", "America/New_York"},
                        {"0 0 29 2 *", "Europe/Berlin"},
                        {"0 9 * * MON-FRI", "Australia/Lord_Howe"},
                        {"59 59 23 31 12 *", "UTC"}};
  for (const Case& k : cases) {
    Cron c = MustParse(k.expr, k.zone);
    int64_t at = Utc("2024-01-01 00:00:00");
    constexpr int kCalls = 20'000;
    auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls && at != kNever; ++i) at = c.Next(at);
    auto per_call = (std::chrono::steady_clock::now() - began) / kCalls;
    // Generous (a loaded machine); a second-by-second search would be
    // milliseconds per call for the sparse ones.
    EXPECT_LT(per_call, std::chrono::microseconds(50)) << k.expr;
  }
}

}  // namespace
}  // namespace delayq::cron
