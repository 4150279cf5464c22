// The retry wait and Retry-After. Both are pure arithmetic on integers that
// can be large (max_doublings up to 62, failures up to 2^32, Retry-After
// seconds of any length), so every product is checked against the cap before
// it is formed instead of after: nothing here overflows.
#include "push/backoff.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace delayq::push {
namespace {

// base << shift, or `cap` when that would exceed cap (base, cap >= 0).
int64_t ShiftCapped(int64_t base, uint64_t shift, int64_t cap) {
  if (base == 0) return 0;
  if (shift >= 63 || base > (cap >> shift)) return cap;
  return base << shift;
}

// a * b, or `cap` when that would exceed cap (a >= 0, b >= 1, cap >= 0).
int64_t MultiplyCapped(int64_t a, uint64_t b, int64_t cap) {
  if (a == 0) return 0;
  if (b > static_cast<uint64_t>(cap / a)) return cap;
  return a * static_cast<int64_t>(b);
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// `n` digits at s[at..] as a number; -1 when any is not a digit.
int Digits(std::string_view s, size_t at, size_t n) {
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (!IsDigit(s[i])) return -1;
    v = v * 10 + (s[i] - '0');
  }
  return v;
}

// Days from 1970-01-01 to y-m-d in the proleptic Gregorian calendar (Howard
// Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int DaysInMonth(int year, int month) {
  static constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// An IMF-fixdate (RFC 9110 section 5.6.7), "Sun, 06 Nov 1994 08:49:37 GMT",
// as Unix ms; nullopt for anything else. The obsolete RFC 850 and asctime
// forms are not read: senders have been required to use this one since
// RFC 2616, and an unread Retry-After only means our own backoff applies.
std::optional<int64_t> ParseImfFixdate(std::string_view s) {
  static constexpr std::array<std::string_view, 7> kDayNames = {"Mon", "Tue", "Wed", "Thu",
                                                                "Fri", "Sat", "Sun"};
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  // 0         1         2
  // 01234567890123456789012345678
  // Sun, 06 Nov 1994 08:49:37 GMT
  if (s.size() != 29 || s.substr(3, 2) != ", " || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
      s[19] != ':' || s[22] != ':' || s.substr(25) != " GMT") {
    return std::nullopt;
  }
  if (std::find(kDayNames.begin(), kDayNames.end(), s.substr(0, 3)) == kDayNames.end()) {
    return std::nullopt;
  }
  auto month_it = std::find(kMonths.begin(), kMonths.end(), s.substr(8, 3));
  if (month_it == kMonths.end()) return std::nullopt;
  const int month = static_cast<int>(month_it - kMonths.begin()) + 1;
  const int day = Digits(s, 5, 2), year = Digits(s, 12, 4);
  const int hour = Digits(s, 17, 2), minute = Digits(s, 20, 2), second = Digits(s, 23, 2);
  if (day < 1 || year < 0 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 ||
      second > 60 || day > DaysInMonth(year, month)) {
    return std::nullopt;  // second 60: the grammar allows a leap second
  }
  const int64_t seconds =
      DaysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * 1000;
}

}  // namespace

int64_t BackoffMs(const RetryPolicy& policy, uint32_t failures, double unit) {
  const int64_t min_ms = std::max<int64_t>(policy.min_backoff_ms, 0);
  const int64_t max_ms = std::max(policy.max_backoff_ms, min_ms);
  // The retry's index: 0 for the first retry, which waits min_backoff_ms.
  const uint64_t retry = failures == 0 ? 0 : failures - 1;
  const uint64_t doublings = policy.max_doublings;
  int64_t wait;
  if (retry <= doublings) {
    wait = ShiftCapped(min_ms, retry, max_ms);
  } else {
    // Cloud Tasks' RetryConfig: after the doublings the interval "increases
    // linearly by 2^max_doublings * min_backoff" (10 s, 3 doublings, max
    // 300 s: 10, 20, 40, 80, 160, 240, 300, 300, ...).
    const int64_t step = ShiftCapped(min_ms, doublings, max_ms);
    wait = MultiplyCapped(step, retry - doublings + 1, max_ms);
  }
  wait = std::min(wait, max_ms);
  // Jitter spreads the retries of jobs that failed together (a receiver's
  // outage) so they do not return together; only ever shorter, so the
  // policy's maximum stays a maximum, and never under its minimum.
  if (!(unit > 0)) unit = 0;  // NaN too
  if (unit >= 1) unit = std::nextafter(1.0, 0.0);
  const auto cut = static_cast<int64_t>(static_cast<double>(wait) * unit / 5);
  return std::max(wait - cut, min_ms);
}

std::optional<int64_t> ParseRetryAfterMs(std::string_view value, int64_t now_ms, int64_t max_ms) {
  max_ms = std::max<int64_t>(max_ms, 0);
  value = Trim(value);
  if (value.empty()) return std::nullopt;
  if (std::all_of(value.begin(), value.end(), IsDigit)) {
    // delay-seconds: 1*DIGIT, of any length (a huge one is capped, not refused).
    int64_t ms = 0;
    for (char c : value) {
      const int64_t digit_ms = (c - '0') * 1000;
      if (ms > (max_ms - digit_ms) / 10) return max_ms;
      ms = ms * 10 + digit_ms;
    }
    return std::min(ms, max_ms);
  }
  std::optional<int64_t> at_ms = ParseImfFixdate(value);
  if (!at_ms) return std::nullopt;
  if (*at_ms <= now_ms) return 0;  // a date already past: try again now
  return std::min(*at_ms - now_ms, max_ms);
}

}  // namespace delayq::push
