// Periodic jobs (SPEC §9): a schedule adds a job at each of its fire times.
//
// A Schedule is a named definition (a cron expression in a time zone, the
// topic and fields of the job each firing adds, what to do about missed and
// overlapping firings) plus the firing state the scheduler keeps in the store
// beside it. Each firing adds the job `<name>@<fire time in Unix ms>` with
// run_at = the fire time, ahead of time, so it is delivered like any other
// job. Every server runs the scheduler for every schedule; a firing is made
// by one compare-and-set on the schedule's revision (FireScheduleAsync), so
// many servers and restarts never add one fire time twice and need no
// leader. docs/schedules.md says what each field does.
//
// Stores keep schedules as a third kind of record beside jobs and
// subscriptions: the embedded log (durable, replayed on open), Redis (shared
// by every server on it), the memory store until the process ends.
#ifndef DELAYQ_SCHEDULE_H_
#define DELAYQ_SCHEDULE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "delayq/job.h"
#include "delayq/status.h"

namespace delayq {

// Names: 1–100 bytes of [A-Za-z0-9._:-] (no '@': it separates the name from
// the fire time in a firing's job id).
inline constexpr size_t kMaxScheduleNameBytes = 100;
inline constexpr size_t kMaxCronBytes = 256;
inline constexpr size_t kMaxTimezoneBytes = 64;
// catchup "all": how far back missed firings are added by default, and at
// most; and at most how many one catch-up or backfill adds.
inline constexpr int64_t kDefaultCatchupWindowMs = 24LL * 3600 * 1000;
inline constexpr int64_t kMaxCatchupWindowMs = 366LL * 24 * 3600 * 1000;
inline constexpr size_t kMaxFiringsPerCatchup = 1000;
// How many ranges of skipped fire times a schedule remembers (for backfill's
// "already fired"); the oldest is forgotten first, and then counts as fired.
inline constexpr size_t kMaxScheduleGaps = 32;

// What happens on the way back to fire times missed while no server ran the
// schedule, or while it was paused.
enum class Catchup : uint8_t {
  kNone = 0,  // skip them all; fire at the next time
  kLast = 1,  // one job, for the latest missed time (default)
  kAll = 2,   // every missed time within catchup_window_ms (at most kMaxFiringsPerCatchup)
};
// What a firing does while the previous firing's job is still live (not
// finished, deleted or buried).
enum class Overlap : uint8_t {
  kAllow = 0,      // fire anyway (default); the only one whose firings are added ahead
  kSkip = 1,       // skip this firing (counted in `skipped`)
  kBufferOne = 2,  // hold one firing until the live job ends, then add it at once;
                   // further firings while one is held are skipped
};

std::string_view CatchupName(Catchup c);  // "none", "last", "all"
std::string_view OverlapName(Overlap o);  // "allow", "skip", "buffer_one"
bool ParseCatchup(std::string_view s, Catchup* out);
bool ParseOverlap(std::string_view s, Overlap* out);

struct Schedule {
  // --- The definition: given by the caller ---------------------------------
  std::string name;      // required
  std::string cron;      // required; src/cron says what is understood
  std::string timezone;  // an IANA name; empty: UTC
  // The job each firing adds.
  std::string topic;  // required
  std::string body;
  uint32_t ttr_ms = kDefaultTtrMs;
  uint32_t priority = kDefaultPriority;
  uint32_t max_attempts = 0;
  Catchup catchup = Catchup::kLast;
  int64_t catchup_window_ms = kDefaultCatchupWindowMs;  // for kAll: 1..kMaxCatchupWindowMs
  Overlap overlap = Overlap::kAllow;
  // Paused: no firing is added, and the one added ahead (not yet due) is
  // withdrawn. Resuming applies `catchup` to the fire times passed meanwhile.
  bool paused = false;
  // A firing whose job is buried pauses the schedule (pause_reason says which).
  bool pause_on_failure = false;

  // --- Kept by the store -----------------------------------------------------
  // +1 on every write of the record (put or firing): the compare-and-set
  // token of FireScheduleAsync.
  uint64_t revision = 0;
  // +1 on every put: which definition a planned firing was made from.
  uint64_t version = 0;
  int64_t created_ms = 0;  // wall clock of the first put
  int64_t updated_ms = 0;  // wall clock of the latest put

  // --- Firing state: written by the scheduler (src/schedule) through
  // FireScheduleAsync; a put keeps it, except that a put which resumes a
  // schedule clears pause_reason -------------------------------------------
  // The next fire time (Unix ms), planned under definition `planned_version`
  // (0: not planned). With overlap allow its job is already in the queue.
  int64_t next_fire_at_ms = 0;
  uint64_t planned_version = 0;
  // The latest fire time whose job was added and has fallen due.
  int64_t last_fire_at_ms = 0;
  // The first fire time of the current cron (backfill counts the times from
  // here to last_fire_at_ms, outside `gaps`, as fired).
  int64_t first_fire_at_ms = 0;
  // Ranges [from, to] of fire times skipped (catch-up, pause, overlap skip),
  // oldest first, at most kMaxScheduleGaps.
  std::vector<std::pair<int64_t, int64_t>> gaps;
  // overlap buffer_one: the firing held until the live job ends (0: none).
  int64_t buffered_fire_at_ms = 0;
  // When the scheduler saw the pause (0: not paused): catch-up starts here.
  int64_t paused_at_ms = 0;
  // Why the schedule is paused when the scheduler paused it ("job X buried"),
  // empty otherwise.
  std::string pause_reason;
  uint64_t firings = 0;  // jobs added
  uint64_t skipped = 0;  // fire times passed without a job
};

// The id of the job a schedule's firing at fire_at_ms adds: "<name>@<ms>".
std::string FiringId(std::string_view schedule, int64_t fire_at_ms);

// Checks every caller-given field except that the cron expression and the
// time zone parse (src/cron checks those; the front ends call it too):
// kInvalidArgument naming the field.
Status ValidateScheduleDefinition(const Schedule& s);
Status ValidateScheduleName(std::string_view name);

// One compare-and-set on a schedule (ServingQueue::FireScheduleAsync): if the
// stored record's revision is `revision`, its firing state becomes `state`'s
// (the fields under "Firing state", and `paused` when state.paused is set),
// `jobs` are added (an id already there, in any state, is left as it is and
// not counted), and each of `withdraw` that is still delayed is deleted;
// revision moves on. Otherwise nothing changes.
struct ScheduleFiring {
  std::string name;
  uint64_t revision = 0;
  Schedule state;
  std::vector<JobSpec> jobs;
  std::vector<std::string> withdraw;
};
struct ScheduleFired {
  bool applied = false;  // false: the revision had moved on; `schedule` is the stored one
  Schedule schedule;     // as stored after the call
  uint32_t added = 0;    // jobs actually added
};

}  // namespace delayq

#endif  // DELAYQ_SCHEDULE_H_
