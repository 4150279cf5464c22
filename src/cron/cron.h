// Cron: a schedule's fire times (SPEC §9, docs/schedules.md). A leaf: no
// I/O but reading the system's tz database (through Abseil's time zone
// library) when an expression is parsed; no clock (every call takes the
// time it asks about).
//
// Understood:
// - five fields "minute hour day-of-month month day-of-week", or six with a
//   leading seconds field; each "*", a number, a range "a-b", a step "*/n" or
//   "a-b/n" or "a/n", or a list of those "a,b-c"; month names JAN..DEC and
//   day names SUN..SAT (any case); day-of-week 0..7 (0 and 7 both Sunday).
//   When both day fields are restricted (neither starts with '*'), a day
//   matches if either does (Vixie cron).
// - macros: @yearly (@annually), @monthly, @weekly, @daily (@midnight),
//   @hourly;
// - "@every <duration>" (e.g. 30s, 5m, 1h30m; at least 1s, whole
//   seconds): the multiples of the duration since the Unix epoch, whatever
//   the time zone, so every server computes the same times.
//
// Time zones (IANA names; empty: UTC), across daylight-saving changes: a
// local time that is skipped fires at the transition instant (once, however
// many of the expression's times the gap swallowed); a local time that
// repeats fires once, at its first occurrence.
//
// Thread-safety: a Cron is immutable once parsed; share it freely.
#ifndef DELAYQ_CRON_CRON_H_
#define DELAYQ_CRON_CRON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "delayq/status.h"

namespace delayq::cron {

// No further fire time (before kMaxRunAtMs, year 9999).
inline constexpr int64_t kNever = -1;

class Cron {
 public:
  // kInvalidArgument naming what is wrong:
  //   "cron: field 2 (hour) at position 5: 25 is out of range 0-23",
  //   "cron: expected 5 or 6 fields, got 4", "timezone: unknown time zone \"Europe/Berln\"".
  static Result<Cron> Parse(std::string_view expr, std::string_view timezone);

  // The first fire time strictly after after_ms (Unix ms), or kNever.
  int64_t Next(int64_t after_ms) const;
  // The fire times in (from_ms, to_ms], in order: at most `max` of them, the
  // LATEST ones when there are more. *total (if not null) gets how many there
  // are in all, counted up to `count_cap` (then it says count_cap); "@every"
  // counts by arithmetic.
  std::vector<int64_t> Between(int64_t from_ms, int64_t to_ms, size_t max, uint64_t* total,
                               uint64_t count_cap = 10'000'000) const;

  // As given, for messages.
  const std::string& expr() const;
  const std::string& timezone() const;
  // For "@every": the interval; 0 for a calendar expression.
  int64_t every_ms() const;

  Cron(const Cron&) = default;
  Cron& operator=(const Cron&) = default;
  Cron(Cron&&) noexcept = default;
  Cron& operator=(Cron&&) noexcept = default;
  ~Cron();

 private:
  struct Spec;
  explicit Cron(std::shared_ptr<const Spec> spec);
  std::shared_ptr<const Spec> spec_;
};

}  // namespace delayq::cron

#endif  // DELAYQ_CRON_CRON_H_
